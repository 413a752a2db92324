// The loopback OpenAI-compatible server of the `streaming` and `concurrent-sessions` workloads
// (§24), run in a process of its own (`fork`ed by bench/stream.js: its CPU is not the
// client's). `POST /s/<scenario>/<deltas>[/hold]/v1/chat/completions` answers with a
// Chat Completions SSE stream built from the shapes of the recorded streams in
// ../shared/fixtures/wire/ (see SOURCES.md there):
//
// - every chunk is OpenAI's current shape (`openai-stream-text-then-tool-call.chunks.jsonl`):
//   `id`, `object`, `created`, `model`, `service_tier`, `system_fingerprint`, one choice
//   `{index, delta, logprobs: null, finish_reason}` and an `obfuscation` padding field; the first
//   chunk is `delta: {role: "assistant", content: "", refusal: null}`;
// - `text`: `<deltas>` `content` deltas, `finish_reason: "stop"` in an empty-delta chunk, a
//   usage-only chunk with `choices: []`, `data: [DONE]`;
// - `reasoning-tool` (DeepSeek's shape, `deepseek-reasoner-stream-tool-call.chunks.jsonl`):
//   half of `<deltas>` `reasoning_content` deltas with `content: null`, then `content` deltas up
//   to `<deltas>` − 40, then one tool call (`weather`, opened by a chunk with `id`, `type`,
//   `function.name`, `arguments: ""`) whose arguments come in 40 small deltas, and the usage in
//   the `finish_reason: "tool_calls"` chunk (no usage-only chunk), `[DONE]`;
// - `tool`: `<deltas>` `content` deltas, then one `weather` tool call with its arguments in 4
//   deltas, `finish_reason: "tool_calls"`, usage-only chunk, `[DONE]`.
// A request whose last message is a `tool` message (the step after the tool ran) gets a short
// `text` answer of 20 deltas. With `/hold`, the first step stops after half of its deltas until
// the parent sends `"release"` (bench/stream.js measures the heap of all sessions there).
//
// Pacing: one SSE event per `write`, every open stream advanced by one event per timer tick
// (`setTimeout(…, 1)`), so a client reads about one delta per read, as from a real provider.
// The tick is the first argument, in ms (default 1): a client under valgrind (bench/instructions.js)
// needs a slower pace to still read one delta per read.
// The parent gets `{port}` once listening; `{requests}` after "stats".
import { createServer } from "node:http"
import { fileURLToPath } from "node:url"

const CREATED = 1785332890
const MODEL = "gpt-4o-2024-08-06"
const WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".", " It", " was", " a", " sunny"]
const OBFUSCATION = ["dOvUml6hFbj", "kxfWAnRUqJ", "rSSOWQoS", "9", "SPmGKq0orjV", "a1B2"]

/** The `i`-th delta text of a stream (the client checks the concatenation: `expectedText`). */
export const deltaText = (i) => WORDS[i % WORDS.length]
export const expectedText = (from, to) => {
  let s = ""
  for (let i = from; i < to; i++) s += deltaText(i)
  return s
}
/** The tool call's arguments and how they are split (40 or 4 pieces). */
export const TOOL_ARGS = JSON.stringify({ location: "San Francisco, CA", unit: "celsius", days: 3 })
const split = (s, n) => {
  const out = []
  const size = Math.ceil(s.length / n)
  for (let i = 0; i < n; i++) out.push(s.slice(i * size, (i + 1) * size))
  return out.filter((p, i) => p !== "" || i === 0)
}
/** The number of argument deltas of each scenario. */
export const ARG_DELTAS = { "reasoning-tool": split(TOOL_ARGS, 40).length, tool: split(TOOL_ARGS, 4).length }
/** The second step's text: 20 deltas. */
export const FINAL_DELTAS = 20
export const FINAL_TEXT = expectedText(0, FINAL_DELTAS)

let counter = 0
const chunk = (id, delta, finish = null, extra = {}) =>
  `data: ${
    JSON.stringify({
      id,
      object: "chat.completion.chunk",
      created: CREATED,
      model: MODEL,
      service_tier: "default",
      system_fingerprint: "fp_627de6ad19",
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...extra,
      obfuscation: OBFUSCATION[counter++ % OBFUSCATION.length]
    })
  }\n\n`
const usageChunk = (id, usage) =>
  `data: ${
    JSON.stringify({
      id,
      object: "chat.completion.chunk",
      created: CREATED,
      model: MODEL,
      service_tier: "default",
      system_fingerprint: "fp_627de6ad19",
      choices: [],
      usage
    })
  }\n\n`
const USAGE = {
  prompt_tokens: 120,
  completion_tokens: 300,
  total_tokens: 420,
  prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
  completion_tokens_details: {
    reasoning_tokens: 0,
    audio_tokens: 0,
    accepted_prediction_tokens: 0,
    rejected_prediction_tokens: 0
  }
}

/** The SSE events of one response, and the index after which a `/hold` stream waits. */
const events = (scenario, deltas, n) => {
  const id = `chatcmpl-bench${n}`
  const out = [chunk(id, { role: "assistant", content: "", refusal: null })]
  if (scenario === "final" || scenario === "text") {
    const count = scenario === "final" ? FINAL_DELTAS : deltas
    for (let i = 0; i < count; i++) out.push(chunk(id, { content: deltaText(i) }))
    out.push(chunk(id, {}, "stop"), usageChunk(id, USAGE), "data: [DONE]\n\n")
    return { out, holdAt: -1 }
  }
  const reasoning = scenario === "reasoning-tool" ? Math.floor(deltas / 2) : 0
  const args = split(TOOL_ARGS, scenario === "reasoning-tool" ? 40 : 4)
  const text = scenario === "reasoning-tool" ? deltas - reasoning - args.length : deltas
  for (let i = 0; i < reasoning; i++) out.push(chunk(id, { content: null, reasoning_content: deltaText(i) }))
  for (let i = 0; i < text; i++) out.push(chunk(id, { content: deltaText(i) }))
  const holdAt = 1 + Math.floor(deltas / 2) // after the role chunk and half of the deltas
  out.push(chunk(id, {
    tool_calls: [{ index: 0, id: `call_bench${n}`, type: "function", function: { name: "weather", arguments: "" } }]
  }))
  for (const a of args) out.push(chunk(id, { tool_calls: [{ index: 0, function: { arguments: a } }] }))
  if (scenario === "reasoning-tool") {
    out.push(
      chunk(id, { content: "", reasoning_content: null }, "tool_calls", {
        usage: { ...USAGE, completion_tokens_details: { reasoning_tokens: reasoning } }
      }),
      "data: [DONE]\n\n"
    )
  } else {
    out.push(chunk(id, {}, "tool_calls"), usageChunk(id, USAGE), "data: [DONE]\n\n")
  }
  return { out, holdAt }
}

const streams = new Set()
let held = true
let requests = 0
let ticking = false
const TICK_MS = Number(process.argv[2] ?? 1)
const tick = () => {
  for (const s of streams) {
    if (s.next === s.holdAt && held) continue
    s.res.write(s.out[s.next++])
    if (s.next === s.out.length) {
      s.res.end()
      streams.delete(s)
    }
  }
  if (streams.size > 0) setTimeout(tick, TICK_MS)
  else ticking = false
}

const serve = () => {
  const server = createServer((req, res) => {
    const m = /^\/s\/([a-z-]+)\/(\d+)(\/hold)?\/v1\/chat\/completions$/.exec(req.url ?? "")
    if (req.method !== "POST" || m === null) {
      res.writeHead(404, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}`, type: "invalid_request_error" } }))
      return
    }
    const body = []
    req.on("data", (b) => body.push(b))
    req.on("end", () => {
      requests++
      const request = JSON.parse(Buffer.concat(body).toString("utf8"))
      const last = request.messages[request.messages.length - 1]
      const second = last.role === "tool"
      const { out, holdAt } = events(second ? "final" : m[1], Number(m[2]), requests)
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
      res.socket?.setNoDelay(true)
      streams.add({ res, out, next: 0, holdAt: m[3] !== undefined && !second ? holdAt : -1 })
      if (!ticking) {
        ticking = true
        setTimeout(tick, TICK_MS)
      }
    })
  })
  server.keepAliveTimeout = 60_000
  server.maxRequestsPerSocket = 0

  process.on("message", (msg) => {
    if (msg === "release") held = false
    else if (msg === "hold") held = true
    else if (msg === "stats") process.send({ requests })
    else if (msg === "stop") server.close(() => process.exit(0))
  })
  process.on("disconnect", () => process.exit(0))

  server.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }))
}

if (process.argv[1] === fileURLToPath(import.meta.url)) serve()
