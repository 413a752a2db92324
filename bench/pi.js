// The peer side of the benchmark (§24): pi-agent-core's `Agent` driven through its real
// loop. Two lines of pi: `@mariozechner/pi-agent-core` 0.73 on Node 20 (the default), and with
// `BENCH_PI=1` the current `@earendil-works/pi-agent-core` 1.x, which needs Node >= 22.19
// (bench/run.js starts those jobs on the LTS node of tools/node-lts). 0.73: `prompt()` →
// runAgentLoop → streamSimple → the api registry, where the model is an api provider registered
// with pi-ai's `registerApiProvider`. 1.x: the `Agent` requires a `streamFn` (what
// `models.streamSimple` is in an app), and the same instant stream is that function. The stream
// answers at once with the event sequence a real adapter pushes (modelled on pi-ai's
// openai-completions adapter: one mutable `output` message passed as `partial`; start,
// text_start/text_delta/text_end or toolcall_start/toolcall_delta/toolcall_end per block, then
// done with the full AssistantMessage, usage and stopReason). It is not pi-ai's faux provider,
// which re-serializes the whole context on every call to estimate usage. Like ours, it reads the
// context it is given to decide text or tool calls and checks it. Tools are pi `AgentTool`s;
// steering is `agent.steer()` from inside a tool. 1.x puts a leading system message (the tools'
// declarations) in the transcript and the context when an agent has tools: it is not counted.
//
// Store: pi-agent-core keeps its transcript in memory and has no session store. For the `jsonl`
// rows the peer persists like pi-coding-agent's SessionManager: a header line, then one
// `{type:"message", id, parentId, timestamp, message}` line per message, written with
// `appendFileSync` from an agent listener at `message_end` (no fsync: pi has no fsync mode).
import { randomUUID } from "node:crypto"
import { appendFileSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { checkCounts, WORKLOADS } from "./workloads.js"

/** The 1.x line (`BENCH_PI=1`), else 0.73. */
export const LINE1 = process.env.BENCH_PI === "1"
const { Agent } = await import(LINE1 ? "@earendil-works/pi-agent-core" : "@mariozechner/pi-agent-core")
const piAi = await import(LINE1 ? "@earendil-works/pi-ai" : "@mariozechner/pi-ai")
const { createAssistantMessageEventStream } = piAi

const API = "bench-instant"

/** The model handed to pi's Agent; its `api` selects the provider registered below. */
export const MODEL = {
  id: "instant",
  name: "Instant bench model",
  api: API,
  provider: "bench",
  baseUrl: "http://localhost:0",
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 1_000_000,
  maxTokens: 16384
}

const usageOf = (input, output) => ({
  input,
  output,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: input + output,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }
})

/**
 * Plays one planned response into a fresh event stream, synchronously (the consumer reads the
 * queued events), as a real adapter pushes them. `plan`: `{ text }` or `{ toolCalls: [{id, name,
 * arguments}] }`, plus `inputTokens`.
 */
const play = (model, plan) => {
  const stream = createAssistantMessageEventStream()
  const output = {
    role: "assistant",
    content: [],
    api: model.api,
    provider: model.provider,
    model: model.id,
    usage: usageOf(0, 0),
    stopReason: "stop",
    timestamp: Date.now()
  }
  stream.push({ type: "start", partial: output })
  if (plan.text !== undefined) {
    const block = { type: "text", text: "" }
    output.content.push(block)
    const contentIndex = output.content.length - 1
    stream.push({ type: "text_start", contentIndex, partial: output })
    block.text += plan.text
    stream.push({ type: "text_delta", contentIndex, delta: plan.text, partial: output })
    stream.push({ type: "text_end", contentIndex, content: block.text, partial: output })
  }
  if (plan.toolCalls !== undefined) {
    for (const call of plan.toolCalls) {
      const block = { type: "toolCall", id: call.id, name: call.name, arguments: {} }
      output.content.push(block)
      const contentIndex = output.content.length - 1
      stream.push({ type: "toolcall_start", contentIndex, partial: output })
      const delta = JSON.stringify(call.arguments)
      block.arguments = JSON.parse(delta)
      stream.push({ type: "toolcall_delta", contentIndex, delta, partial: output })
      stream.push({ type: "toolcall_end", contentIndex, toolCall: block, partial: output })
    }
    output.stopReason = "toolUse"
  }
  output.usage = usageOf(plan.inputTokens, 1)
  stream.push({ type: "done", reason: output.stopReason, message: output })
  stream.end()
  return stream
}

/** The current run's decision function; the registered provider calls it with each context. */
let current

const instant = (model, context) => play(model, current(context))
if (!LINE1) piAi.registerApiProvider({ api: API, stream: instant, streamSimple: instant }, "effect-agent-loop-bench")
/** The `Agent` options that pick the model's stream: 1.x requires `streamFn`. */
const streamOptions = LINE1 ? { streamFn: instant } : {}
/** How many leading system messages a transcript or context has (1.x, with tools: one). */
const systemCount = (msgs) => (msgs[0]?.role === "system" ? 1 : 0)

const isPrompt = (m) => m.role === "user"
const textOf = (m) => (typeof m.content === "string" ? m.content : m.content[0]?.type === "text" ? m.content[0].text : "")

/** The fake model's decisions, reading the context as ours does (bench/ours.js). */
const makeDecide = (workload, state) => {
  const w = WORKLOADS[workload]
  const text = (n) => ({ text: `ok:${n}`, inputTokens: n })
  switch (workload) {
    case "turns":
    case "history-growth":
      return (context) => {
        state.calls++
        const msgs = context.messages
        const n = msgs.length - systemCount(msgs)
        if (n !== 2 * (state.calls - 1) + 1 || !isPrompt(msgs[msgs.length - 1])) {
          state.errors.push(`call ${state.calls}: ${n} messages, last ${msgs[msgs.length - 1]?.role}`)
        }
        return text(n)
      }
    case "tool-steps":
      return (context) => {
        state.calls++
        const msgs = context.messages
        const n = msgs.length
        let k = 0
        let i = n - 1
        while (i >= 0 && !isPrompt(msgs[i])) {
          if (msgs[i].role === "toolResult") k++
          i--
        }
        if (i < 0) state.errors.push(`call ${state.calls}: no prompt in the context`)
        if (k > 0 && (msgs[n - 1].role !== "toolResult" || msgs[n - 1].toolCallId !== state.lastCall)) {
          state.errors.push(`call ${state.calls}: last message is not the result of ${state.lastCall}`)
        }
        if (k < w.toolSteps) {
          const id = `c${state.calls}`
          state.lastCall = id
          return { toolCalls: [{ id, name: "noop", arguments: { k } }], inputTokens: n }
        }
        return text(n)
      }
    case "parallel-tools":
    case "steer-during-tools":
      return (context) => {
        state.calls++
        const msgs = context.messages
        const n = msgs.length
        const last = msgs[n - 1]
        if (isPrompt(last) && !textOf(last).startsWith("steer ")) {
          const calls = []
          for (let j = 0; j < w.calls; j++) calls.push({ id: `c${state.calls}_${j}`, name: "work", arguments: { k: j } })
          state.batch = calls
          return { toolCalls: calls, inputTokens: n }
        }
        const steered = workload === "steer-during-tools"
        const end = steered ? n - 1 : n
        if (steered && !(isPrompt(last) && textOf(last).startsWith("steer "))) {
          state.errors.push(`call ${state.calls}: the steer did not land right after the batch (last: ${last.role})`)
        }
        for (let j = 0; j < w.calls; j++) {
          const m = msgs[end - w.calls + j]
          if (m === undefined || m.role !== "toolResult" || m.toolCallId !== state.batch[j].id) {
            state.errors.push(`call ${state.calls}: result ${j} of the batch is not where expected`)
            break
          }
        }
        if (msgs[end - w.calls - 1]?.role !== "assistant") state.errors.push(`call ${state.calls}: no assistant before the batch`)
        return text(n)
      }
    default:
      throw new Error(`pi: unknown workload ${workload}`)
  }
}

// 0.73 validates TypeBox schemas; 1.x takes any JSON Schema (pi-schema's builders are not a
// dependency of ours).
const Args = LINE1
  ? { type: "object", properties: { k: { type: "number" } }, required: ["k"] }
  : piAi.Type.Object({ k: piAi.Type.Number() })

const makeTools = (workload, state, agentRef) => {
  const result = { content: [{ type: "text", text: "ok" }], details: {} }
  const ran = async () => {
    state.toolRuns++
    return result
  }
  const tool = (name, execute) => ({ name, label: name, description: "Does nothing.", parameters: Args, execute })
  switch (workload) {
    case "tool-steps":
      return [tool("noop", ran)]
    case "parallel-tools":
      return [tool("work", ran)]
    case "steer-during-tools": {
      const steerer = WORKLOADS[workload].steerer
      return [tool("work", async (_id, params) => {
        if (params.k === steerer) {
          agentRef.agent.steer({ role: "user", content: [{ type: "text", text: `steer ${state.calls}` }], timestamp: Date.now() })
        }
        state.toolRuns++
        return result
      })]
    }
    default:
      return []
  }
}

/** pi-coding-agent style JSONL persistence (see the module comment). */
const persistJsonl = (agent) => {
  const directory = mkdtempSync(join(tmpdir(), "bench-pi-"))
  const path = join(directory, "session.jsonl")
  appendFileSync(
    path,
    JSON.stringify({ type: "session", version: 3, id: randomUUID(), timestamp: new Date().toISOString(), cwd: process.cwd() }) +
      "\n"
  )
  let parentId = null
  agent.subscribe((event) => {
    if (event.type !== "message_end") return
    const id = randomUUID()
    appendFileSync(
      path,
      JSON.stringify({ type: "message", id, parentId, timestamp: new Date().toISOString(), message: event.message }) + "\n"
    )
    parentId = id
  })
  return () => rmSync(directory, { recursive: true, force: true })
}

/**
 * One run of a prompt workload on a fresh pi Agent. Returns `{ perUnit }` µs (history-growth:
 * `{ first, last }`), after checking the counts.
 */
export const runPrompts = async ({ workload, store, prompts }) => {
  const w = WORKLOADS[workload]
  const state = { calls: 0, toolRuns: 0, errors: [], lastCall: undefined, batch: undefined }
  current = makeDecide(workload, state)
  const agentRef = { agent: undefined }
  const agent = new Agent({ initialState: { model: MODEL, tools: makeTools(workload, state, agentRef) }, ...streamOptions })
  agentRef.agent = agent
  const cleanup = store === "jsonl" ? persistJsonl(agent) : () => {}
  const tenth = Math.floor(prompts / 10)
  try {
    const marks = []
    const start = performance.now()
    for (let i = 0; i < prompts; i++) {
      if (workload === "history-growth" && (i === tenth || i === prompts - tenth)) marks.push(performance.now())
      await agent.prompt(`prompt ${i}`)
    }
    const end = performance.now()
    const failed = agent.state.messages.filter((m) => m.role === "assistant" && m.stopReason === "error")
    if (failed.length > 0) state.errors.push(`${failed.length} assistant messages ended in error: ${failed[0].errorMessage}`)
    checkCounts("pi", workload, prompts, {
      modelCalls: state.calls,
      toolRuns: state.toolRuns,
      messages: agent.state.messages.length - systemCount(agent.state.messages),
      errors: state.errors
    })
    if (workload === "history-growth") {
      return { first: ((marks[0] - start) * 1000) / tenth, last: ((end - marks[1]) * 1000) / tenth }
    }
    return { perUnit: ((end - start) * 1000) / w.units(prompts) }
  } finally {
    cleanup()
  }
}

/** One run of idle-agents: `count` pi Agents created, none prompted; heap bytes per agent after GC. */
export const runIdle = async ({ count }) => {
  const agents = new Array(count)
  fullGc()
  const before = process.memoryUsage().heapUsed
  for (let i = 0; i < count; i++) {
    agents[i] = new Agent({ initialState: { model: MODEL }, sessionId: randomUUID(), ...streamOptions })
  }
  fullGc()
  const after = process.memoryUsage().heapUsed
  if (agents.some((a) => a === undefined || a.state.isStreaming)) throw new Error("pi idle-agents: agents missing or busy")
  return { perUnit: (after - before) / count }
}

const fullGc = () => {
  if (typeof globalThis.gc !== "function") throw new Error("run with node --expose-gc")
  for (let i = 0; i < 4; i++) globalThis.gc()
}
