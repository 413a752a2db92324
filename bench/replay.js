// `replay` (ours only): a generated log of 1,000,000 events rebuilt into inbox, history and fates
// (`SessionStore.readFile`: read + decode + validate; `History.derive`; `Delivery.fatesOf`; the
// inbox replay `Inbox.replay`), against a raw baseline in the same bench run:
// `readFileSync` + `JSON.parse` of every line of the same file (the parsed rows kept, as ours
// keeps its events). Each side runs in its own process so that its peak RSS is its own, after a
// warm-up on a 20,000-event log and a read of the file into the page cache (disk reads are not
// what is measured).
//
// The log is generated, not run: our agent writes a template on the JSONL store (a first text
// turn with its `request/header`, then a text turn, a turn with two sequential tool steps and a
// turn whose 4 parallel tool calls steer), and the template's turns are replicated with
// renumbered `seq`, `time`, `turn` and fresh ids (every UUID of the template gets a new last
// group per copy) until the log holds ≥ 1,000,000 events. Running the agent for 1M events would
// take minutes and measure the loop, not the replay. The generated log is checked once with
// `Invariant.check` (rules 1–6 of §12) before it is used.
import { NodeFileSystem } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  Agent,
  Delivery,
  History,
  IdGenerator,
  Invariant,
  Model,
  replayInbox,
  ScriptedModel,
  SessionStore,
  Tool
} from "./dist.js"

const isPrompt = (m) => m.role === "user" && m.source.kind === "user"
const isResult = (m) => m.role === "user" && m.source.kind === "tool"
const textOf = (m) => (m.content[0]?.type === "text" ? m.content[0].text : "")

/** Writes the template log with our agent; returns its path. */
const writeTemplate = async (directory) => {
  const model = ScriptedModel.make([(request) => {
    const msgs = request.messages
    const n = msgs.length
    let i = n - 1
    let results = 0
    while (i >= 0 && !(isPrompt(msgs[i]) && !textOf(msgs[i]).startsWith("steer"))) {
      if (isResult(msgs[i])) results++
      i--
    }
    const prompt = textOf(msgs[i])
    const usage = { inputTokens: n, outputTokens: 3 }
    if (prompt.startsWith("two tool steps") && results < 2) {
      return {
        text: "Looking it up.",
        toolCalls: [{ id: randomUUID(), name: "lookup", arguments: { key: `k${results}` } }],
        usage
      }
    }
    if (prompt.startsWith("four in parallel") && results === 0) {
      return {
        toolCalls: [0, 1, 2, 3].map((j) => ({ id: randomUUID(), name: "fetch", arguments: { page: j } })),
        usage
      }
    }
    return { text: `Done: ${prompt} (${n} messages seen).`, usage }
  }], { loop: true, record: false, provider: "bench", model: "instant" })
  const lookup = Tool.make({
    name: "lookup",
    description: "Looks a key up.",
    parameters: Schema.Struct({ key: Schema.String }),
    execute: ({ key }) => Effect.succeed({ content: `value of ${key}` })
  })
  const fetch = Tool.make({
    name: "fetch",
    description: "Fetches a page.",
    parameters: Schema.Struct({ page: Schema.Number }),
    execute: ({ page }, ctx) =>
      page === 1
        ? Effect.as(Effect.orDie(ctx.agent.steer("steer: only the headers")), { content: `page ${page}: 200 OK` })
        : Effect.succeed({ content: `page ${page}: 200 OK` })
  })
  return await Effect.runPromise(
    Effect.scoped(Effect.gen(function*() {
      const agent = yield* Agent.make({ instructions: "Be brief.", tools: [lookup, fetch] })
      for (const p of ["hello", "say something", "two tool steps please", "four in parallel please"]) {
        yield* agent.followup(p)
        yield* agent.awaitIdle
      }
      return agent.log.path
    })).pipe(Effect.provide(Layer.mergeAll(
      SessionStore.layerJsonl({ directory, fsync: "none" }).pipe(Layer.provide(NodeFileSystem.layer)),
      IdGenerator.layer,
      Model.layer(model)
    )))
  )
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g

/**
 * Generates a log of at least `target` events at `path` from the template. Returns what a replay
 * must find: `{ events, messages, inserted, bytes }`.
 */
export const generateLog = async (path, target) => {
  const directory = mkdtempSync(join(tmpdir(), "bench-template-"))
  try {
    const templatePath = await writeTemplate(directory)
    const lines = readFileSync(templatePath, "utf8").split("\n").filter((l) => l.length > 0)
    const header = lines[0]
    const events = lines.slice(1).map((l) => JSON.parse(l))
    const firstEnd = events.findIndex((e) => e.type === "turn/end")
    const prefix = events.slice(0, firstEnd + 1) // the first turn, with its request/header: once
    const body = events.slice(firstEnd + 1) // turns 2..T+1: replicated
    const turnsPerCopy = body.filter((e) => e.type === "turn/end").length
    if (body.some((e) => e.type === "request/header")) throw new Error("replay: template body has a request/header")
    // Each body event as parts: literal text, then holes for seq, time, turn and ids.
    const t0 = events[0].time
    const compiled = body.map((e) => {
      const copy = { ...e, seq: "@@SEQ@@", time: "@@TIME@@" }
      if (typeof e.data?.turn === "number") copy.data = { ...e.data, turn: "@@TURN@@" }
      const text = JSON.stringify(copy)
      const parts = []
      let last = 0
      const re = /"@@(SEQ|TIME|TURN)@@"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g
      for (let m; (m = re.exec(text)) !== null;) {
        parts.push(text.slice(last, m.index))
        parts.push(m[1] !== undefined ? { hole: m[1], turn: e.data?.turn } : { id: m[0].slice(0, 24) })
        last = m.index + m[0].length
      }
      parts.push(text.slice(last))
      return parts
    })
    const countsOf = (list) => {
      let messages = 0
      let inserted = 0
      for (const e of list) {
        if (e.type === "user/message" || e.type === "assistant/message" || e.type === "tool/result") messages++
        if (e.type === "agent/inbox/spliced") inserted += e.data.inserted.length
      }
      return { messages, inserted }
    }
    const pre = countsOf(prefix)
    const per = countsOf(body)
    const copies = Math.ceil((target - prefix.length) / body.length)
    const fd = openSync(path, "w")
    let buffer = header.replace(UUID, randomUUID()) + "\n"
    for (const e of prefix) buffer += JSON.stringify(e) + "\n"
    let seq = prefix.length
    let bytes = 0
    const flush = () => {
      const b = Buffer.from(buffer)
      writeSync(fd, b)
      bytes += b.length
      buffer = ""
    }
    for (let r = 0; r < copies; r++) {
      const suffix = (r + 1).toString(16).padStart(12, "0")
      const shift = r * turnsPerCopy
      for (const parts of compiled) {
        let line = ""
        for (const p of parts) {
          if (typeof p === "string") line += p
          else if (p.id !== undefined) line += p.id + suffix
          else if (p.hole === "SEQ") line += seq
          else if (p.hole === "TIME") line += t0 + Math.floor(seq / 16)
          else line += p.turn + shift
        }
        buffer += line + "\n"
        seq++
      }
      if (buffer.length > 4_000_000) flush()
    }
    flush()
    closeSync(fd)
    return {
      events: seq,
      messages: pre.messages + copies * per.messages,
      inserted: pre.inserted + copies * per.inserted,
      turns: 1 + copies * turnsPerCopy,
      bytes
    }
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

/** Decodes the log and runs the invariant check (rules 1–6); throws on any violation. */
export const validateLog = async (path) => {
  const contents = await Effect.runPromise(SessionStore.readFile(path).pipe(Effect.provide(NodeFileSystem.layer)))
  const violations = Invariant.check(contents.events, { header: contents.header })
  if (violations.length > 0) {
    throw new Error(
      `replay: the generated log breaks rule ${violations[0].rule} at seq ${violations[0].seq}: ${
        violations[0].message
      } (${violations.length} violations)`
    )
  }
  return contents.events.length
}

/** Reads a file through one small buffer so that it is in the page cache (without holding it). */
export const warmPageCache = (path) => {
  const fd = openSync(path, "r")
  const chunk = Buffer.allocUnsafe(1 << 20)
  while (readSync(fd, chunk, 0, chunk.length, null) > 0);
  closeSync(fd)
}

/** Ours: read + decode + validate, then history, fates and inbox. Returns ms; checks the counts. */
export const replayOurs = async (path, expect) => {
  const start = performance.now()
  const contents = await Effect.runPromise(SessionStore.readFile(path).pipe(Effect.provide(NodeFileSystem.layer)))
  const options = { header: contents.header }
  const history = History.derive(contents.events, options)
  const fates = Delivery.fatesOf(contents.events, options)
  const inbox = replayInbox(contents.events, options)
  const ms = performance.now() - start
  let entered = 0
  for (const fate of fates.values()) if (fate._tag === "Entered") entered++
  const bad = []
  if (contents.events.length !== expect.events) bad.push(`events ${contents.events.length} ≠ ${expect.events}`)
  if (history.length !== expect.messages) bad.push(`history ${history.length} ≠ ${expect.messages}`)
  if (fates.size !== expect.inserted || entered !== expect.inserted) {
    bad.push(`fates ${fates.size} (${entered} entered) ≠ ${expect.inserted}`)
  }
  if (inbox.nextTurn.length !== 0 || inbox.nextStep.length !== 0) bad.push("inbox not empty")
  if (bad.length > 0) throw new Error(`ours replay: counts are off: ${bad.join("; ")}`)
  return ms
}

/** Raw baseline: read the file and JSON.parse every line (rows kept). Returns ms; checks the count. */
export const replayRaw = (path, expect) => {
  const start = performance.now()
  const text = readFileSync(path, "utf8")
  const rows = []
  let pos = text.indexOf("\n") + 1 // the header line is parsed too
  JSON.parse(text.slice(0, pos - 1))
  while (pos < text.length) {
    let end = text.indexOf("\n", pos)
    if (end === -1) end = text.length
    if (end > pos) rows.push(JSON.parse(text.slice(pos, end)))
    pos = end + 1
  }
  const ms = performance.now() - start
  if (rows.length !== expect.events) throw new Error(`raw replay: ${rows.length} rows, expected ${expect.events}`)
  return ms
}
