// Our side of the side-by-side benchmark (§24): the real `Agent` over the real model port,
// driven by `ScriptedModel.make` with function entries, so the fake model sees every request's
// context (it checks what it was given and decides text or tool calls from it) and answers at
// once through the same sink a provider adapter uses. Each run builds a fresh agent on a fresh
// store, times the prompt loop only, then checks its counts.
import { NodeFileSystem } from "@effect/platform-node"
import { Effect, Layer, Schema, Tracer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, Compaction, IdGenerator, layerPg, layerSqlite, Model, ScriptedModel, SessionStore, Tool } from "./dist.js"
import { checkCounts, compactionRange, WORKLOADS } from "./workloads.js"

const isPrompt = (m) => m.role === "user" && m.source.kind === "user"
const isResult = (m) => m.role === "user" && m.source.kind === "tool"
const textOf = (m) => (m.content[0] !== undefined && m.content[0].type === "text" ? m.content[0].text : "")
const isCheckpoint = (m) => m.role === "user" && m.source.kind === "plugin" && m.source.plugin === "compact"

/**
 * The fake model of one run: a function of the request (its context), through `ScriptedModel.make`.
 * `state.calls` counts requests, `state.errors` collects every context it did not expect.
 */
const makeModel = (workload, state) => {
  const w = WORKLOADS[workload]
  const usage = (n) => ({ inputTokens: n, outputTokens: 1 })
  const text = (n) => ({ text: `ok:${n}`, usage: usage(n) })
  let decide
  switch (workload) {
    case "turns":
    case "history-growth":
      decide = (msgs) => {
        const n = msgs.length
        // prompt i sees 2 messages per earlier prompt, then its own
        if (n !== 2 * (state.calls - 1) + 1 || !isPrompt(msgs[n - 1])) {
          state.errors.push(`call ${state.calls}: ${n} messages, last ${msgs[n - 1]?.role}`)
        }
        return text(n)
      }
      break
    case "history-growth-compaction":
      // O(1) per request, like history-growth: a turn's request is the previous one plus the
      // previous answer and the new prompt, or (right after a compaction) a shorter one that
      // starts with the checkpoint of the latest summary. A summarization request (`purpose:
      // "compaction"`, one user message) gets a short text. The reported `inputTokens` are the
      // request's tokens by `Compaction.estimateTokens` (what a provider would report, here in
      // the loop's own units), kept incrementally: summed anew only after a compaction.
      decide = (msgs, request) => {
        const n = msgs.length
        if (request.purpose === "compaction") {
          state.summaries++
          if (n !== 1 || !textOf(msgs[0]).startsWith("<conversation>")) {
            state.errors.push(`call ${state.calls}: a summarization request with ${n} messages`)
          }
          state.compactedSince = true
          return { text: `summary ${state.summaries}`, usage: usage(n) }
        }
        const turn = state.calls - 1 - state.summaries
        if (!isPrompt(msgs[n - 1]) || textOf(msgs[n - 1]) !== `prompt ${turn}`) {
          state.errors.push(`call ${state.calls}: the last message is not prompt ${turn}`)
        }
        if (state.compactedSince) {
          if (n > state.lastLength || !isCheckpoint(msgs[0]) || !textOf(msgs[0]).endsWith(`summary ${state.summaries}`)) {
            state.errors.push(`call ${state.calls}: after compaction ${state.summaries}, ${n} messages, first ${msgs[0].role}`)
          }
        } else if (n !== state.lastLength + 2) {
          state.errors.push(`call ${state.calls}: ${n} messages after ${state.lastLength}`)
        }
        if (state.compactedSince || n === 1) {
          state.tokens = 0
          for (const m of msgs) state.tokens += Compaction.estimateTokens(m)
        } else {
          state.tokens += Compaction.estimateTokens(msgs[n - 2]) + Compaction.estimateTokens(msgs[n - 1])
        }
        state.compactedSince = false
        state.lastLength = n
        return { text: `ok:${n}`, usage: usage(state.tokens) }
      }
      break
    case "tool-steps":
      decide = (msgs) => {
        const n = msgs.length
        let k = 0
        let i = n - 1
        while (i >= 0 && !isPrompt(msgs[i])) {
          if (isResult(msgs[i])) k++
          i--
        }
        if (i < 0) state.errors.push(`call ${state.calls}: no prompt in the context`)
        if (k > 0) {
          const block = msgs[n - 1].content[0]
          if (!isResult(msgs[n - 1]) || block.toolCallId !== state.lastCall) {
            state.errors.push(`call ${state.calls}: last message is not the result of ${state.lastCall}`)
          }
        }
        if (k < w.toolSteps) {
          const id = `c${state.calls}`
          state.lastCall = id
          return { toolCalls: [{ id, name: "noop", arguments: { k } }], usage: usage(n) }
        }
        return text(n)
      }
      break
    case "parallel-tools":
    case "steer-during-tools":
      decide = (msgs) => {
        const n = msgs.length
        const last = msgs[n - 1]
        const prompt = isPrompt(last) && !textOf(last).startsWith("steer ")
        if (prompt) {
          const calls = []
          for (let j = 0; j < w.calls; j++) calls.push({ id: `c${state.calls}_${j}`, name: "work", arguments: { k: j } })
          state.batch = calls
          return { toolCalls: calls, usage: usage(n) }
        }
        // the step after the batch: all results in call order (then the steer, for steer-during-tools)
        const steered = workload === "steer-during-tools"
        const end = steered ? n - 1 : n
        if (steered && !(isPrompt(last) && textOf(last).startsWith("steer "))) {
          state.errors.push(`call ${state.calls}: the steer did not land right after the batch (last: ${last.role})`)
        }
        for (let j = 0; j < w.calls; j++) {
          const m = msgs[end - w.calls + j]
          if (m === undefined || !isResult(m) || m.content[0].toolCallId !== state.batch[j].id) {
            state.errors.push(`call ${state.calls}: result ${j} of the batch is not where expected`)
            break
          }
        }
        if (msgs[end - w.calls - 1]?.role !== "assistant") state.errors.push(`call ${state.calls}: no assistant before the batch`)
        return text(n)
      }
      break
    default:
      throw new Error(`ours: unknown workload ${workload}`)
  }
  return ScriptedModel.make([(request) => {
    state.calls++
    return decide(request.messages, request)
  }], { loop: true, record: false, provider: "bench", model: "instant" })
}

const makeTools = (workload, state) => {
  const Args = Schema.Struct({ k: Schema.Number })
  const out = { content: "ok" }
  const ran = Effect.sync(() => {
    state.toolRuns++
    return out
  })
  switch (workload) {
    case "tool-steps":
      return [Tool.make({ name: "noop", description: "Does nothing.", parameters: Args, execute: () => ran })]
    case "parallel-tools":
      return [Tool.make({ name: "work", description: "Does nothing.", parameters: Args, execute: () => ran })]
    case "steer-during-tools": {
      const steerer = WORKLOADS[workload].steerer
      return [Tool.make({
        name: "work",
        description: "Does nothing; call k=1 steers while it runs.",
        parameters: Args,
        execute: ({ k }, ctx) => k === steerer ? Effect.zipRight(Effect.orDie(ctx.agent.steer(`steer ${ctx.turn}`)), ran) : ran
      })]
    }
    default:
      return []
  }
}

/**
 * A tracer whose spans do nothing (§19, `tracer: "drop"`): the loop makes every span it
 * would make for an exporter (a span object per turn, model request and tool call, attributes,
 * events, links), and nothing is kept or exported, so the figure is the loop's own tracing cost.
 */
const NO_ATTRIBUTES = new Map()
const droppingTracer = Tracer.make({
  span: (name, parent, context, links, startTime, kind) => ({
    _tag: "Span",
    name,
    spanId: "0000000000000001",
    traceId: "00000000000000000000000000000001",
    parent,
    context,
    status: { _tag: "Started", startTime },
    attributes: NO_ATTRIBUTES,
    links,
    sampled: false,
    kind,
    end: () => {},
    attribute: () => {},
    event: () => {},
    addLinks: () => {}
  }),
  context: (f) => f()
})

/**
 * A tracer that records (`tracer: "record"`): each span keeps what an in-memory exporter keeps
 * (name, ids, parent, kind, start and end time as bigints, a `Map` of the attributes that
 * `attribute()` writes, the events, the links, the exit in the `Ended` status `end()` sets), and
 * every ended span is pushed onto `recorded`, which `runPrompts` empties at the start of each
 * run: a run keeps all its spans, runs do not pile up. Ids come from a counter (an exporter's are
 * random: 16 and 32 hex digits). The figure is the loop's tracing cost plus the keeping of every
 * span, the exporter's own work (encoding, sending) excepted.
 */
let recorded = []
let spanCount = 0
let traceCount = 0
const hexId = (n, digits) => n.toString(16).padStart(digits, "0")
class RecordingSpan {
  constructor(name, parent, context, links, startTime, kind) {
    this._tag = "Span"
    this.name = name
    this.spanId = hexId(++spanCount, 16)
    this.traceId = parent._tag === "Some" ? parent.value.traceId : hexId(++traceCount, 32)
    this.parent = parent
    this.context = context
    this.status = { _tag: "Started", startTime }
    this.attributes = new Map()
    this.events = []
    this.links = Array.from(links)
    this.sampled = true
    this.kind = kind
  }
  end(endTime, exit) {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
    recorded.push(this)
  }
  attribute(key, value) {
    this.attributes.set(key, value)
  }
  event(name, startTime, attributes) {
    this.events.push([name, startTime, attributes ?? {}])
  }
  addLinks(links) {
    for (const link of links) this.links.push(link)
  }
}
const recordingTracer = Tracer.make({
  span: (name, parent, context, links, startTime, kind) => new RecordingSpan(name, parent, context, links, startTime, kind),
  context: (f) => f()
})
const TRACERS = { drop: droppingTracer, record: recordingTracer }
let reportedSpans = false

/**
 * The store layer of a run: memory, PostgreSQL (`layerPg` on the job's database `url`, its
 * default pool), or JSONL / SQLite (synchronous NORMAL, FULL for fsync "batch") in a fresh
 * temporary directory.
 */
const storeLayer = (store, fsync, url) => {
  if (store === "memory") return { layer: SessionStore.layerMemory, cleanup: () => {} }
  if (store === "pg") {
    if (layerPg === undefined) throw new Error("ours: this build has no SqlSessionStore.layerPg")
    return { layer: layerPg({ url }), cleanup: () => {} }
  }
  const directory = mkdtempSync(join(tmpdir(), "bench-ours-"))
  if (store === "sqlite") {
    return {
      layer: layerSqlite({ filename: join(directory, "sessions.db"), synchronous: fsync === "batch" ? "full" : "normal" }),
      cleanup: () => rmSync(directory, { recursive: true, force: true })
    }
  }
  return {
    layer: SessionStore.layerJsonl({ directory, fsync }).pipe(Layer.provide(NodeFileSystem.layer)),
    cleanup: () => rmSync(directory, { recursive: true, force: true })
  }
}

/**
 * One run of a prompt workload: a fresh agent, `prompts` prompts awaited one after another.
 * Returns `{ perUnit }` in µs (history-growth: `{ first, last }` µs per turn over the first and
 * the last 10% of the turns; history-growth-compaction also `compactions`, `firstPlain` and
 * `lastPlain` µs per turn over the turns of those tenths that did not compact, and
 * `firstCompacting`/`lastCompacting` ms per turn that did, null for a tenth without one) after
 * checking the counts.
 */
export const runPrompts = async ({ workload, store, fsync = "none", url, prompts, tracer }) => {
  if (tracer !== undefined && TRACERS[tracer] === undefined) throw new Error(`ours: unknown tracer ${tracer}`)
  if (tracer === "record") recorded = []
  const w = WORKLOADS[workload]
  const state = {
    calls: 0,
    toolRuns: 0,
    errors: [],
    lastCall: undefined,
    batch: undefined,
    summaries: 0,
    compactedSince: false,
    lastLength: -1,
    tokens: 0
  }
  const model = makeModel(workload, state)
  const tools = makeTools(workload, state)
  const { layer, cleanup } = storeLayer(store, fsync, url)
  const tenth = Math.floor(prompts / 10)
  const growth = workload === "history-growth" || workload === "history-growth-compaction"
  let policy = Layer.empty
  if (w.compaction !== undefined) {
    if (Compaction === undefined) throw new Error("ours: this build has no Compaction")
    policy = Compaction.layer(w.compaction)
  }
  try {
    const result = await Effect.runPromise(
      Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make({ tools })
        const marks = []
        // Compaction workload: each turn timed, split by whether it compacted (a summarization
        // request during it), per tenth: [first 10%, last 10%] of {turns, µs} each.
        const split = { plain: [{ n: 0, us: 0 }, { n: 0, us: 0 }], compacting: [{ n: 0, us: 0 }, { n: 0, us: 0 }] }
        const timed = w.compaction !== undefined
        const start = performance.now()
        for (let i = 0; i < prompts; i++) {
          if (growth && (i === tenth || i === prompts - tenth)) marks.push(performance.now())
          const t0 = timed ? performance.now() : 0
          const summaries = state.summaries
          yield* agent.followup(`prompt ${i}`)
          yield* agent.awaitIdle
          if (timed && (i < tenth || i >= prompts - tenth)) {
            const part = (state.summaries > summaries ? split.compacting : split.plain)[i < tenth ? 0 : 1]
            part.n++
            part.us += (performance.now() - t0) * 1000
          }
        }
        const end = performance.now()
        const history = yield* agent.history
        let turns = 0
        let compactions = 0
        let logged = 0
        const outcomes = []
        for (const e of agent.log.events()) {
          if (e.type === "turn/end") turns++
          else if (e.type === "compaction/end") {
            if (e.data.outcome === "compacted") compactions++
            else outcomes.push(e.data.outcome)
          } else if (e.type === "assistant/message" || (e.type === "user/message" && !isCheckpoint(e.data))) logged++
        }
        if (turns !== prompts) state.errors.push(`${turns} turns ended, expected ${prompts}`)
        if (w.compaction !== undefined) {
          // Every bracket compacted, one summarization request each, about one per
          // turnsPerCompaction turns; the history is the last checkpoint and what followed it.
          const bad = []
          const { min, max } = compactionRange(workload, prompts)
          if (outcomes.length > 0) bad.push(`compactions ended ${outcomes.join(", ")}`)
          if (compactions !== state.summaries) bad.push(`${compactions} compactions, ${state.summaries} summarization requests`)
          if (compactions < min || compactions > max) bad.push(`${compactions} compactions, expected ${min}–${max}`)
          if (compactions > 0 && (!isCheckpoint(history[0]) || !textOf(history[0]).endsWith(`summary ${compactions}`))) {
            bad.push("the history does not start with the last checkpoint")
          }
          if (history.length !== state.lastLength + 1) {
            bad.push(`a history of ${history.length} messages, the last request had ${state.lastLength}`)
          }
          if (bad.length > 0) throw new Error(`ours ${workload} (${prompts} prompts): compactions are off: ${bad.join("; ")}`)
        }
        checkCounts("ours", workload, prompts, {
          modelCalls: model.consumed() - state.summaries,
          toolRuns: state.toolRuns,
          messages: w.compaction !== undefined ? logged : history.length,
          errors: state.errors
        })
        if (model.consumed() !== state.calls) throw new Error("ours: the scripted model's count disagrees with ours")
        if (growth) {
          const times = { first: ((marks[0] - start) * 1000) / tenth, last: ((end - marks[1]) * 1000) / tenth }
          if (!timed) return times
          const mean = (p) => (p.n === 0 ? null : p.us / p.n)
          return {
            ...times,
            compactions,
            firstPlain: mean(split.plain[0]),
            lastPlain: mean(split.plain[1]),
            firstCompacting: split.compacting[0].n === 0 ? null : mean(split.compacting[0]) / 1000,
            lastCompacting: split.compacting[1].n === 0 ? null : mean(split.compacting[1]) / 1000
          }
        }
        return { perUnit: ((end - start) * 1000) / w.units(prompts) }
      })).pipe(
        Effect.provide(Layer.mergeAll(layer, IdGenerator.layer, Model.layer(model), policy)),
        tracer === undefined ? (self) => self : Effect.withTracer(TRACERS[tracer])
      )
    )
    if (tracer === "record") checkRecorded(workload, prompts)
    return result
  } finally {
    cleanup()
  }
}

/**
 * A run with the recording tracer must have recorded spans, every one ended, of plausible names
 * (a broken tracer fails the job); the first run of a process reports its count on stderr.
 */
const checkRecorded = (workload, prompts) => {
  const units = WORKLOADS[workload].units(prompts)
  if (recorded.length === 0) throw new Error(`ours ${workload}: the recording tracer recorded no span in ${prompts} prompts`)
  const names = new Map()
  for (const span of recorded) {
    if (span.status._tag !== "Ended" || typeof span.status.endTime !== "bigint") {
      throw new Error(`ours ${workload}: recorded span ${span.name} not ended`)
    }
    names.set(span.name, (names.get(span.name) ?? 0) + 1)
  }
  if (!reportedSpans) {
    reportedSpans = true
    const unit = WORKLOADS[workload].unit
    const attributes = recorded.reduce((n, span) => n + span.attributes.size, 0)
    process.stderr.write(
      `bench: recording tracer, ${workload} ${prompts} prompts: ${recorded.length} spans, ${
        (recorded.length / prompts).toFixed(2)
      } per prompt, ${(recorded.length / units).toFixed(2)} per ${unit}, ${
        (attributes / recorded.length).toFixed(1)
      } attributes per span (${[...names].map(([name, n]) => `${name} ${n}`).join(", ")})\n`
    )
  }
}

/**
 * One run of idle-agents: `count` agents created on one memory store, none prompted; heap bytes
 * per agent after GC (the store's per-session record included: it is part of what an agent
 * holds). Needs `--expose-gc`.
 */
export const runIdle = async ({ count }) => {
  const model = ScriptedModel.make([{ text: "ok" }], { loop: true, record: false })
  return await Effect.runPromise(
    Effect.scoped(Effect.gen(function*() {
      const agents = new Array(count)
      fullGc()
      const before = process.memoryUsage().heapUsed
      for (let i = 0; i < count; i++) agents[i] = yield* Agent.make()
      fullGc()
      const after = process.memoryUsage().heapUsed
      if (agents.length !== count || agents.some((a) => a === undefined)) throw new Error("ours idle-agents: agents missing")
      const status = yield* agents[count - 1].status
      if (status !== "idle") throw new Error(`ours idle-agents: agent is ${status}`)
      return { perUnit: (after - before) / count }
    })).pipe(Effect.provide(Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layer, Model.layer(model))))
  )
}

export const fullGc = () => {
  if (typeof globalThis.gc !== "function") throw new Error("run with node --expose-gc")
  for (let i = 0; i < 4; i++) globalThis.gc()
}
