// `streaming` and `concurrent-sessions` (§24): real streamed responses from the loopback
// OpenAI-compatible server of bench/sse-server.js (a process of its own, `fork`ed here), consumed
// end to end by each side's own agent loop and a subscriber of its live events:
//
// - ours: `Agent` on `OpenAICompat.layer` over `NodeHttpClient.layerUndici`, a memory store, a
//   subscriber of `agent.subscribe` (the queue of `agent.events`) that reads every event until
//   `turn/end`;
// - pi: pi-agent-core's `Agent` with pi-ai's own `openai-completions` provider (the `openai` SDK
//   over the global `fetch`), a subscriber of `agent.subscribe`;
// - ai: the Vercel AI SDK's `streamText` on `@ai-sdk/openai-compatible`'s chat model, the tool
//   loop of `stopWhen: stepCountIs(2)`, its `fullStream` read to the end.
//
// Every side must see exactly the streamed text and reasoning, one `weather` call with the sent
// arguments, its tool run once and the second step's text; a run whose counts are off throws.
// CPU is `process.cpuUsage()` (user + system) of this process only.
import { NodeHttpClient } from "@effect/platform-node"
import { Effect, Layer, Queue, Schema } from "effect"
import { fork } from "node:child_process"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { StringDecoder } from "node:string_decoder"
import { fileURLToPath } from "node:url"
import { Agent, IdGenerator, Model, OpenAICompat, SessionStore, Tool } from "./dist.js"
import { ARG_DELTAS, expectedText, FINAL_DELTAS, FINAL_TEXT, TOOL_ARGS } from "./sse-server.js"

const SERVER = fileURLToPath(new URL("./sse-server.js", import.meta.url))
const TOOL_OUTPUT = "sunny, 21 °C"
const WEATHER_SCHEMA = {
  type: "object",
  properties: { location: { type: "string" }, unit: { type: "string" }, days: { type: "number" } },
  required: ["location", "unit", "days"],
  additionalProperties: false
}

/**
 * Starts the server process (one SSE event per stream every `tickMs`); `{ base(scenario, deltas,
 * hold), release, hold, requests, stop }`.
 */
export const startServer = async (tickMs = 1) => {
  const child = fork(SERVER, [String(tickMs)], { stdio: ["ignore", "inherit", "inherit", "ipc"] })
  const port = await new Promise((resolve, reject) => {
    child.once("message", (m) => resolve(m.port))
    child.once("exit", (code) => reject(new Error(`sse-server exited ${code}`)))
  })
  return {
    base: (scenario, deltas, hold = false) => `http://127.0.0.1:${port}/s/${scenario}/${deltas}${hold ? "/hold" : ""}/v1`,
    release: () => child.send("release"),
    hold: () => child.send("hold"),
    requests: () =>
      new Promise((resolve) => {
        child.once("message", (m) => resolve(m.requests))
        child.send("stats")
      }),
    stop: () => {
      child.removeAllListeners("exit")
      child.kill("SIGKILL")
    }
  }
}

/**
 * What one turn of `scenario` must show: the text and reasoning of its steps, whether a tool
 * call comes, and the number of deltas the server sent (the per-delta figure divides by it).
 */
export const expectation = (scenario, deltas) => {
  if (scenario === "text") return { text: [expectedText(0, deltas)], reasoning: "", tool: false, wireDeltas: deltas }
  const args = ARG_DELTAS[scenario]
  const reasoning = scenario === "reasoning-tool" ? Math.floor(deltas / 2) : 0
  const text = scenario === "reasoning-tool" ? deltas - reasoning - args : deltas
  return {
    text: [expectedText(0, text), FINAL_TEXT],
    reasoning: expectedText(0, reasoning),
    tool: true,
    wireDeltas: reasoning + text + args + FINAL_DELTAS,
    // the barrier of `/hold`: the first step's text received up to half of its deltas
    holdText: expectedText(0, Math.floor(deltas / 2) - reasoning).length
  }
}

/** Compares one turn's record with the expectation; returns the first mismatch or undefined. */
const mismatch = (got, want) => {
  const text = got.text.join("|")
  if (text !== want.text.join("|")) return `text ${JSON.stringify(text.slice(0, 80))}… (${text.length} chars)`
  if (got.reasoning !== want.reasoning) return `reasoning of ${got.reasoning.length} chars, expected ${want.reasoning.length}`
  if (want.tool && (got.calls !== 1 || got.args !== TOOL_ARGS)) return `${got.calls} tool calls, arguments ${got.args}`
  if (!want.tool && got.calls !== 0) return `${got.calls} tool calls`
  if (got.toolRuns !== (want.tool ? 1 : 0)) return `${got.toolRuns} tool runs`
  return undefined
}

const newRecord = () => ({ text: [], reasoning: "", calls: 0, args: "", toolRuns: 0, deltas: 0 })

// ---------------------------------------------------------------------------------------------
// Sides: `makeSide(name)` → `{ turn(baseUrl, record, onText), close() }`; `turn` resolves when
// the subscriber saw the turn's end.
// ---------------------------------------------------------------------------------------------

const oursSide = async () => {
  const { ManagedRuntime } = await import("effect")
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layer, NodeHttpClient.layerUndici)
  )
  const Args = Schema.Struct({ location: Schema.String, unit: Schema.String, days: Schema.Number })
  const toolsFor = (record) => [
    Tool.make({
      name: "weather",
      description: "The weather at a place.",
      parameters: Args,
      execute: () =>
        Effect.sync(() => {
          record.toolRuns++
          return { content: TOOL_OUTPUT }
        })
    })
  ]
  // One model service per base URL (its HttpClient from the runtime), made once and provided to
  // each session as a service, as a server would: not a layer built anew for every session.
  const models = new Map()
  const modelFor = async (baseUrl) => {
    let model = models.get(baseUrl)
    if (model === undefined) {
      model = await runtime.runPromise(OpenAICompat.make({ baseUrl, model: "gpt-4o-2024-08-06" }))
      models.set(baseUrl, model)
    }
    return model
  }
  return {
    /** Makes the agent and subscribes (not measured); returns `run()`, the measured turn. */
    prepare: async (baseUrl, record, onText) => {
      const model = await modelFor(baseUrl)
      let run
      const ready = new Promise((resolve) => (run = resolve))
      let go
      const started = new Promise((resolve) => (go = resolve))
      const done = runtime.runPromise(
        Effect.scoped(Effect.gen(function*() {
          const agent = yield* Agent.make({ tools: toolsFor(record) })
          const queue = yield* agent.subscribe
          run(undefined)
          yield* Effect.promise(() => started)
          yield* agent.followup("What is the weather in San Francisco?")
          let step = -1
          for (;;) {
            const e = yield* Queue.take(queue)
            if (e.type === "assistant/delta") {
              record.deltas++
              if (e.text !== undefined) {
                if (e.step !== step) {
                  step = e.step
                  record.text.push("")
                }
                record.text[record.text.length - 1] += e.text
                if (onText !== undefined) onText(record)
              } else if (e.reasoning !== undefined) record.reasoning += e.reasoning
              else if (e.toolCall !== undefined) {
                record.calls++
                record.args = e.toolCall.arguments
              }
            } else if (e.type === "assistant/retry") record.retries = (record.retries ?? 0) + 1
            else if (e.type === "turn/end") break
            else if (process.env.BENCH_DEBUG && e.type !== "assistant/delta") console.error(JSON.stringify(e).slice(0, 300))
          }
        })).pipe(Effect.provideService(Model.Model, model))
      )
      await ready
      return () => {
        go()
        return done
      }
    },
    close: () => runtime.dispose()
  }
}

/**
 * pi: 0.73 (`@mariozechner`), or with `BENCH_PI=1` the 1.x line (`@earendil-works`, Node >= 22.19),
 * whose `Agent` takes a `streamFn`: `models.streamSimple` of a `Models` collection with one
 * provider of the openai-completions api at the server (one collection per base URL), as pi-ai's
 * README sets up a local OpenAI-compatible server.
 */
const piSide = async () => {
  const line1 = process.env.BENCH_PI === "1"
  const { Agent: PiAgent } = await import(line1 ? "@earendil-works/pi-agent-core" : "@mariozechner/pi-agent-core")
  let Args
  let streamOptions = () => ({})
  if (line1) {
    const { createModels, createProvider } = await import("@earendil-works/pi-ai")
    const { openAICompletionsApi } = await import("@earendil-works/pi-ai/api/openai-completions.lazy")
    Args = WEATHER_SCHEMA
    const collections = new Map()
    streamOptions = (model) => {
      let models = collections.get(model.baseUrl)
      if (models === undefined) {
        models = createModels()
        models.setProvider(createProvider({
          id: model.provider,
          name: "bench",
          baseUrl: model.baseUrl,
          auth: { apiKey: { name: "bench", resolve: async () => ({ auth: { apiKey: "bench" } }) } },
          models: [model],
          api: openAICompletionsApi()
        }))
        collections.set(model.baseUrl, models)
      }
      return { streamFn: models.streamSimple.bind(models) }
    }
  } else {
    const { Type } = await import("@mariozechner/pi-ai")
    Args = Type.Object({ location: Type.String(), unit: Type.String(), days: Type.Number() })
  }
  return {
    prepare: async (baseUrl, record, onText) => {
      const model = {
        id: "gpt-4o-2024-08-06",
        name: "bench",
        api: "openai-completions",
        provider: "bench",
        baseUrl,
        reasoning: false,
        input: ["text"],
        cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
        contextWindow: 128_000,
        maxTokens: 16_384
      }
      const tools = [{
        name: "weather",
        label: "weather",
        description: "The weather at a place.",
        parameters: Args,
        execute: async () => {
          record.toolRuns++
          return { content: [{ type: "text", text: TOOL_OUTPUT }], details: {} }
        }
      }]
      const agent = new PiAgent({ initialState: { model, tools }, getApiKey: () => "bench", ...streamOptions(model) })
      agent.subscribe((event) => {
        if (event.type !== "message_update") return
        const e = event.assistantMessageEvent
        switch (e.type) {
          case "text_start":
            record.text.push("")
            break
          case "text_delta":
            record.deltas++
            record.text[record.text.length - 1] += e.delta
            if (onText !== undefined) onText(record)
            break
          case "thinking_delta":
            record.deltas++
            record.reasoning += e.delta
            break
          case "toolcall_delta":
            record.deltas++
            break
          case "toolcall_end":
            record.calls++
            record.args = JSON.stringify(e.toolCall.arguments)
            break
        }
      })
      return async () => {
        await agent.prompt("What is the weather in San Francisco?")
        const failed = agent.state.messages.find((m) => m.role === "assistant" && m.stopReason === "error")
        if (failed !== undefined) throw new Error(`pi: ${failed.errorMessage}`)
      }
    },
    close: async () => {}
  }
}

const aiSide = async () => {
  const { jsonSchema, stepCountIs, streamText, tool } = await import("ai")
  const { createOpenAICompatible } = await import("@ai-sdk/openai-compatible")
  const providers = new Map()
  return {
    prepare: async (baseUrl, record, onText) => {
      let provider = providers.get(baseUrl)
      if (provider === undefined) {
        provider = createOpenAICompatible({ name: "bench", baseURL: baseUrl, apiKey: "bench", includeUsage: true })
        providers.set(baseUrl, provider)
      }
      const model = provider.chatModel("gpt-4o-2024-08-06")
      const tools = {
        weather: tool({
          description: "The weather at a place.",
          inputSchema: jsonSchema(WEATHER_SCHEMA),
          execute: async () => {
            record.toolRuns++
            return TOOL_OUTPUT
          }
        })
      }
      return async () => {
        const result = streamText({
          model,
          prompt: "What is the weather in San Francisco?",
          tools,
          stopWhen: stepCountIs(2),
          maxRetries: 0
        })
        let step = 0
        let textStep = -1
        for await (const part of result.fullStream) {
          switch (part.type) {
            case "start-step":
              step++
              break
            case "text-delta":
              record.deltas++
              if (textStep !== step) {
                textStep = step
                record.text.push("")
              }
              record.text[record.text.length - 1] += part.text
              if (onText !== undefined) onText(record)
              break
            case "reasoning-delta":
              record.deltas++
              record.reasoning += part.text
              break
            case "tool-input-delta":
              record.deltas++
              break
            case "tool-call":
              record.calls++
              record.args = JSON.stringify(part.input)
              break
            case "error":
              throw part.error instanceof Error ? part.error : new Error(JSON.stringify(part.error))
          }
        }
      }
    },
    close: async () => {}
  }
}

/**
 * raw: the floor of any adapter (no agent, no loop, no events). Per turn, the same request(s) the
 * adapters send (POST `${base}/chat/completions`: the prompt, the `weather` tool, `stream: true`;
 * after a tool call a second POST whose last message is the `tool` result, which makes the server
 * answer step 2), the body read as text, split into SSE lines, each `data:` payload but
 * `[DONE]` `JSON.parse`d; the only other work is what the check needs (strings concatenated,
 * deltas counted, the tool "run" counted). `transport`: node's `http` module (`http.request`,
 * the global agent: keep-alive; `raw-http`) or undici's `request` (`raw-undici`); `raw` is the
 * cheaper of the two for each workload: `http` for `streaming`, undici for `concurrent-sessions`
 * (measured side by side: bench/README.md, "Streaming, many sessions, many logs").
 */
const RAW_TOOLS = [{
  type: "function",
  function: { name: "weather", description: "The weather at a place.", parameters: WEATHER_SCHEMA }
}]
const RAW_PROMPT = "What is the weather in San Francisco?"
const RAW_HEADERS = { "content-type": "application/json", authorization: "Bearer bench" }

const rawSide = (transport) => async () => {
  let post
  if (transport === "undici") {
    const { request } = await import("undici")
    post = async (url, body, onChunk) => {
      const res = await request(url, { method: "POST", headers: RAW_HEADERS, body })
      if (res.statusCode !== 200) throw new Error(`raw: HTTP ${res.statusCode}: ${await res.body.text()}`)
      // undici's body ignores setEncoding: a StringDecoder, as http's setEncoding does
      const decoder = new StringDecoder("utf8")
      await new Promise((resolve, reject) => {
        res.body.on("data", (bytes) => onChunk(decoder.write(bytes)))
        res.body.on("end", resolve)
        res.body.on("error", reject)
      })
    }
  } else {
    const { request } = await import("node:http")
    post = (url, body, onChunk) =>
      new Promise((resolve, reject) => {
        const req = request(url, {
          method: "POST",
          headers: { ...RAW_HEADERS, "content-length": Buffer.byteLength(body) }
        }, (res) => {
          if (res.statusCode !== 200) {
            reject(new Error(`raw: HTTP ${res.statusCode}`))
            res.resume()
            return
          }
          res.setEncoding("utf8")
          res.on("data", onChunk)
          res.on("end", resolve)
          res.on("error", reject)
        })
        req.on("error", reject)
        req.end(body)
      })
  }
  /** One step: POST, SSE lines, `JSON.parse`; returns the tool call, if one came. */
  const step = async (url, messages, record, onText) => {
    let buffer = ""
    let textStarted = false
    let call
    const onEvent = (e) => {
      const choice = e.choices[0]
      if (choice === undefined) return // the usage-only chunk
      const d = choice.delta
      if (typeof d.content === "string" && d.content !== "") {
        record.deltas++
        if (!textStarted) {
          textStarted = true
          record.text.push("")
        }
        record.text[record.text.length - 1] += d.content
        if (onText !== undefined) onText(record)
      } else if (typeof d.reasoning_content === "string" && d.reasoning_content !== "") {
        record.deltas++
        record.reasoning += d.reasoning_content
      }
      if (d.tool_calls !== undefined) {
        const f = d.tool_calls[0].function
        if (call === undefined) call = { id: d.tool_calls[0].id, name: f.name, args: "" }
        if (f.arguments !== "") {
          record.deltas++
          call.args += f.arguments
        }
      }
    }
    const onChunk = (chunk) => {
      buffer = buffer === "" ? chunk : buffer + chunk
      let start = 0
      for (;;) {
        const nl = buffer.indexOf("\n", start)
        if (nl === -1) break
        if (buffer.startsWith("data: ", start)) {
          const payload = buffer.slice(start + 6, nl)
          if (payload !== "[DONE]") onEvent(JSON.parse(payload))
        }
        start = nl + 1
      }
      if (start > 0) buffer = buffer.slice(start)
    }
    const body = JSON.stringify({
      model: "gpt-4o-2024-08-06",
      messages,
      tools: RAW_TOOLS,
      stream: true,
      stream_options: { include_usage: true }
    })
    await post(url, body, onChunk)
    return { call, text: textStarted ? record.text[record.text.length - 1] : null }
  }
  return {
    prepare: async (baseUrl, record, onText) => {
      const url = `${baseUrl}/chat/completions`
      return async () => {
        const messages = [{ role: "user", content: RAW_PROMPT }]
        const first = await step(url, messages, record, onText)
        if (first.call === undefined) return
        record.calls++
        record.args = first.call.args
        record.toolRuns++ // the tool "runs": its output is a constant
        messages.push(
          {
            role: "assistant",
            content: first.text,
            tool_calls: [{ id: first.call.id, type: "function", function: { name: first.call.name, arguments: first.call.args } }]
          },
          { role: "tool", tool_call_id: first.call.id, content: TOOL_OUTPUT }
        )
        const second = await step(url, messages, record, onText)
        if (second.call !== undefined) throw new Error("raw: a tool call in step 2")
      }
    },
    close: async () => {}
  }
}

const SIDES = {
  ours: oursSide,
  pi: piSide,
  ai: aiSide,
  // the cheaper transport of each workload (measured: bench/README.md)
  raw: (workload) => rawSide(workload === "concurrent" ? "undici" : "http")(),
  "raw-http": rawSide("http"),
  "raw-undici": rawSide("undici")
}

const cpuMicros = () => {
  const u = process.cpuUsage()
  return u.user + u.system
}

/**
 * `streaming`: `warmupTurns` then `turns` turns of `scenario` (`text` or `reasoning-tool`), each
 * on a fresh agent, one after another. Per turn: µs of process CPU per delta the server sent
 * (from the prompt to the subscriber's end of the turn; making the agent is not measured).
 */
export const runStreaming = async ({ side, scenario, deltas, warmupTurns, turns, tickMs }) => {
  const server = await startServer(tickMs)
  const s = await SIDES[side]("streaming")
  try {
    const want = expectation(scenario, deltas)
    const base = server.base(scenario, deltas)
    const samples = []
    for (let i = 0; i < warmupTurns + turns; i++) {
      const record = newRecord()
      const run = await s.prepare(base, record)
      const cpu0 = cpuMicros()
      const t0 = performance.now()
      await run()
      const cpu = cpuMicros() - cpu0
      const ms = performance.now() - t0
      const bad = mismatch(record, want)
      if (bad !== undefined) throw new Error(`${side} streaming ${scenario}, turn ${i}: ${bad}`)
      if (i >= warmupTurns) samples.push({ perUnit: cpu / want.wireDeltas, ms, deltas: record.deltas })
    }
    const requests = await server.requests()
    const perTurn = want.tool ? 2 : 1
    if (requests !== (warmupTurns + turns) * perTurn) {
      throw new Error(`${side} streaming: the server saw ${requests} requests, expected ${(warmupTurns + turns) * perTurn}`)
    }
    return { samples, wireDeltas: want.wireDeltas }
  } finally {
    await s.close()
    server.stop()
  }
}

/**
 * `concurrent-sessions`: `sessions` agents made first, then all their turns started together
 * (one turn each: `deltas` text deltas and a tool call, then a second step) against the server's
 * `/hold` route, which stops every first step after half of its deltas until released. When
 * every session has its half, the heap is measured after a full GC (minus the heap before the
 * agents were made, per session), then the server is released. CPU per turn is the process CPU
 * from the start of the turns to the end of the last, minus the GC at the barrier; the
 * event-loop delay (`monitorEventLoopDelay`, 1 ms resolution) over the same span, without the GC.
 * `heap: false` (bench/instructions.js) leaves out the full GCs and the heap figure.
 */
export const runConcurrent = async ({ side, sessions, deltas, warmupSessions, runs, tickMs, heap = true }) => {
  const server = await startServer(tickMs)
  const s = await SIDES[side]("concurrent")
  const want = expectation("tool", deltas)
  const base = server.base("tool", deltas, true)
  let requestsBefore = 0
  const once = async (n, measure) => {
    server.hold()
    const records = Array.from({ length: n }, newRecord)
    let reached = 0
    let atPeak
    const peak = new Promise((resolve) => (atPeak = resolve))
    const onText = (record) => {
      if (!record.atHold && record.text.length === 1 && record.text[0].length >= want.holdText) {
        record.atHold = true
        if (++reached === n) atPeak()
      }
    }
    if (heap) fullGc()
    const heapBefore = process.memoryUsage().heapUsed
    const runs = []
    for (const r of records) runs.push(await s.prepare(base, r, onText))
    const histogram = monitorEventLoopDelay({ resolution: 1 })
    const cpu0 = cpuMicros()
    const t0 = performance.now()
    histogram.enable()
    const all = Promise.all(runs.map((run) => run()))
    await Promise.race([peak, all])
    histogram.disable()
    const gc0 = cpuMicros()
    if (heap) fullGc()
    const heapPeak = process.memoryUsage().heapUsed
    const gcCpu = cpuMicros() - gc0
    histogram.enable()
    server.release()
    await all
    histogram.disable()
    const cpu = cpuMicros() - cpu0 - gcCpu
    const ms = performance.now() - t0
    if (reached !== n) throw new Error(`${side} concurrent-sessions: ${reached} of ${n} sessions reached the hold`)
    for (let i = 0; i < n; i++) {
      const bad = mismatch(records[i], want)
      if (bad !== undefined) throw new Error(`${side} concurrent-sessions, session ${i}: ${bad}`)
    }
    const requests = await server.requests()
    if (requests - requestsBefore !== 2 * n) {
      throw new Error(`${side} concurrent-sessions: the server saw ${requests - requestsBefore} requests, expected ${2 * n}`)
    }
    requestsBefore = requests
    if (!measure) return undefined
    return {
      cpuPerTurn: cpu / n,
      loopDelayP99: histogram.percentile(99) / 1e6,
      loopDelayMax: histogram.max / 1e6,
      heapPerSession: heap ? (heapPeak - heapBefore) / n : null,
      ms
    }
  }
  try {
    if (warmupSessions > 0) await once(warmupSessions, false)
    const samples = []
    for (let i = 0; i < runs; i++) samples.push(await once(sessions, true))
    return { samples, wireDeltas: want.wireDeltas }
  } finally {
    await s.close()
    server.stop()
  }
}

const fullGc = () => {
  if (typeof globalThis.gc !== "function") throw new Error("run with node --expose-gc")
  for (let i = 0; i < 4; i++) globalThis.gc()
}
