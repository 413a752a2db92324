import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, Redacted, Schedule, Tracer } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import type { Message, MessageId } from "../src/Message.js"
import { Model, type ModelRequest, type ModelService, type ToolDefinition } from "../src/Model.js"
import * as OpenAICompat from "../src/providers/OpenAICompat.js"
import type { FinishReason } from "../src/SessionEvent.js"
import { note, SOCKET_CLOSE_MS } from "./utils/bounds.js"
import { assistantOf, collect, type Collected, errorFields, freeze, summarize, toolResult, user } from "./utils/modelParts.js"
import { closedPort, framedBody, readFixture, replayServer, type ReplaySpec } from "./utils/replayServer.js"
import { WIRE_USAGE, type WireUsage, type WireUsageFile } from "./utils/wireUsage.js"

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const API_KEY = "sk-test-0123456789"

const adapter = (baseUrl: string, extra?: Partial<OpenAICompat.Options>) =>
  OpenAICompat.make({ baseUrl, model: "test-model", apiKey: Redacted.make(API_KEY), ...extra })

const REQUEST: ModelRequest = {
  sessionId: "s1",
  turn: 1,
  step: 1,
  tools: [],
  messages: [
    Object.freeze({
      id: "m1" as MessageId,
      role: "user" as const,
      content: [{ type: "text" as const, text: "hi" }],
      source: { kind: "user" }
    })
  ]
}

const respond = (model: ModelService, request: ModelRequest = REQUEST) => collect(model, request)

/** Replays `spec` and collects the response. */
const replay = (spec: ReplaySpec) =>
  Effect.gen(function*() {
    const server = yield* replayServer(spec)
    const model = yield* adapter(server.baseUrl)
    const parts = yield* respond(model)
    return summarize(parts)
  })

/** Replays `spec` and returns the typed failure and the parts pushed before it. */
const replayFailure = (spec: ReplaySpec, extra?: Partial<OpenAICompat.Options>) =>
  Effect.gen(function*() {
    const server = yield* replayServer(spec)
    const model = yield* adapter(server.baseUrl, extra)
    const failure = yield* Effect.flip(respond(model))
    // The server's port changes from run to run: messages name it `<server>`.
    const error = errorFields(failure.error)
    return {
      error: { ...error, message: error.message.replaceAll(server.baseUrl, "<server>") },
      parts: summarize(failure.parts),
      requests: server.requests.length
    }
  })

// ---------------------------------------------------------------------------------------------
// Expected results, per recorded file (SOURCES.md)
// ---------------------------------------------------------------------------------------------

interface Expected {
  readonly text: string
  readonly reasoning: string
  readonly shape: string
  readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly args: unknown; readonly raw: string }>
  readonly finish: FinishReason
  /** The usage (normalized and raw) and the response id/model, from test/utils/wireUsage.ts. */
  readonly wire: WireUsage
}

const PARALLEL_CALLS = (ids: readonly [string, string]) => [
  {
    id: ids[0],
    name: "GetWeatherArgs",
    args: { city: "Edinburgh", country: "GB", units: "c" },
    raw: "{\"city\": \"Edinburgh\", \"country\": \"GB\", \"units\": \"c\"}"
  },
  {
    id: ids[1],
    name: "get_stock_price",
    args: { ticker: "AAPL", exchange: "NASDAQ" },
    raw: "{\"ticker\": \"AAPL\", \"exchange\": \"NASDAQ\"}"
  }
]

const DECODED: Record<string, Omit<Expected, "wire">> = {
  "openai-stream-tool-calls-parallel.sse": {
    text: "",
    reasoning: "",
    shape: "response,tool-call*2,usage,finish",
    toolCalls: PARALLEL_CALLS(["call_JMW1whyEaYG438VE1OIflxA2", "call_DNYTawLBoN8fj3KN6qU9N1Ou"]),
    finish: "tool-calls"
  },
  "openai-stream-refusal.sse": {
    // Refusal text is pushed as text deltas; OpenAI's finish_reason is "stop".
    text: "I'm sorry, I can't assist with that request.",
    reasoning: "",
    shape: "response,text-delta*10,usage,finish",
    toolCalls: [],
    finish: "stop"
  },
  "openai-stream-finish-length.sse": {
    text: "{\"",
    reasoning: "",
    shape: "response,text-delta,usage,finish",
    toolCalls: [],
    finish: "length"
  },
  "openai-stream-text-then-tool-call.chunks.jsonl": {
    text: "PRE_TOOL",
    reasoning: "",
    shape: "response,text-delta*2,tool-call,usage,finish",
    toolCalls: [{ id: "call_NZa7xqfefoaMI2YYHowVXVlU", name: "weather", args: {}, raw: "{}" }],
    finish: "tool-calls"
  },
  "vllm-stream-text-usage-chunk.sse": {
    text: "1, 2, 3, 4, 5",
    reasoning: "",
    shape: "response,text-delta*13,usage,finish",
    toolCalls: [],
    finish: "stop"
  },
  "deepseek-reasoner-stream-tool-call.chunks.jsonl": {
    text: "",
    reasoning: "The user is asking for the weather in San Francisco. I need to use the weather tool to get this " +
      "information. Let me invoke the weather tool with the location parameter set to \"San Francisco\".",
    shape: "response,reasoning-delta*39,tool-call,usage,finish",
    toolCalls: [{
      id: "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF",
      name: "weather",
      args: { location: "San Francisco" },
      raw: "{\"location\": \"San Francisco\"}"
    }],
    finish: "tool-calls"
  },
  "openai-nonstream-tool-calls-parallel.json": {
    text: "",
    reasoning: "",
    shape: "response,tool-call*2,usage,finish",
    toolCalls: PARALLEL_CALLS(["call_fdNz3vOBKYgOIpMdWotB9MjY", "call_h1DWI1POMJLb0KwIyQHWXD4p"]),
    finish: "tool-calls"
  },
  "deepseek-reasoner-tool-call.json": {
    text: "",
    reasoning: "The user is asking for the weather in San Francisco. I have a weather tool available that can get " +
      "weather information for a location. I should use this tool with the location parameter set to " +
      "\"San Francisco\". Let me call the weather function.",
    shape: "response,reasoning-delta,tool-call,usage,finish",
    toolCalls: [{
      id: "call_00_9V0vrf86Pc9aelHCJMZqnJBo",
      name: "weather",
      args: { location: "San Francisco" },
      raw: "{\"location\": \"San Francisco\"}"
    }],
    finish: "tool-calls"
  }
}

const EXPECTED: Record<string, Expected> = Object.fromEntries(
  Object.entries(DECODED).map(([file, decoded]) => [file, { ...decoded, wire: WIRE_USAGE[file as WireUsageFile] }])
)

const STREAMING = Object.keys(EXPECTED).filter((f) => !f.endsWith(".json"))

const assertExpected = (actual: Collected, expected: Expected) => {
  expect(actual.text).toBe(expected.text)
  expect(actual.reasoning).toBe(expected.reasoning)
  expect(actual.shape).toBe(expected.shape)
  expect(actual.toolCalls.map((c) => c.id)).toEqual(expected.toolCalls.map((c) => c.id))
  expect(actual.toolCalls.map((c) => c.name)).toEqual(expected.toolCalls.map((c) => c.name))
  expect(actual.toolCalls.map((c) => c.rawArguments)).toEqual(expected.toolCalls.map((c) => c.raw))
  expect(actual.toolCalls.map((c) => JSON.parse(c.rawArguments))).toEqual(expected.toolCalls.map((c) => c.args))
  expect(actual.finish).toBe(expected.finish)
  expect(actual.usage).toEqual(expected.wire.usage)
  expect(actual.rawUsage).toEqual(expected.wire.raw)
  expect(actual.response).toEqual(expected.wire.response)
}

const provideHttp = <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.provide(self, NodeHttpClient.layerUndici)

// ---------------------------------------------------------------------------------------------
// Response side: every OpenAI-format recording
// ---------------------------------------------------------------------------------------------

/** A loopback HTTP server with `handler`, closed (its connections too) with the scope. */
const loopbackServer = (handler: Http.RequestListener) =>
  Effect.acquireRelease(
    Effect.async<Http.Server>((resume) => {
      const s = Http.createServer(handler)
      s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
    }),
    (s) =>
      Effect.sync(() => {
        s.closeAllConnections()
        s.close()
      })
  )

describe("OpenAICompat responses (recorded wire files)", () => {
  for (const [file, expected] of Object.entries(EXPECTED)) {
    it.scopedLive(`${file}: replayed whole`, () =>
      Effect.gen(function*() {
        assertExpected(yield* replay({ file }), expected)
      }).pipe(provideHttp))
  }

  for (const file of STREAMING) {
    it.scopedLive(`${file}: split every 7 bytes`, () =>
      Effect.gen(function*() {
        assertExpected(yield* replay({ file, splitEvery: 7 }), EXPECTED[file]!)
      }).pipe(provideHttp))
  }

  it.scopedLive("split at 1-byte granularity", () =>
    Effect.gen(function*() {
      const file = "openai-stream-tool-calls-parallel.sse"
      assertExpected(yield* replay({ file, splitEvery: 1 }), EXPECTED[file]!)
    }).pipe(provideHttp))

  it.scopedLive("split inside `data:`, inside `[DONE]` and between the two newlines, with real pauses", () =>
    Effect.gen(function*() {
      const file = "openai-stream-finish-length.sse"
      const body = readFixture(file).toString("utf8")
      const done = body.indexOf("data: [DONE]")
      const firstBlank = body.indexOf("\n\n")
      const cuts = [2, 5, 6, firstBlank + 1, done + 3, done + 9, done + 12, done + 13]
      assertExpected(yield* replay({ file, splitAt: cuts, delayMs: 2 }), EXPECTED[file]!)
    }).pipe(provideHttp))

  it.scopedLive(".chunks.jsonl served without the appended [DONE]", () =>
    Effect.gen(function*() {
      for (const file of STREAMING.filter((f) => f.endsWith(".chunks.jsonl"))) {
        assertExpected(yield* replay({ file, done: false }), EXPECTED[file]!)
        assertExpected(yield* replay({ file, done: false, splitEvery: 7 }), EXPECTED[file]!)
      }
    }).pipe(provideHttp))

  it.scopedLive("an unterminated last event is dispatched at EOF, not dropped", () =>
    Effect.gen(function*() {
      // vLLM recording with its final blank line removed: ends `data: [DONE]\n`, then just `data: [DONE]`.
      const vllm = readFixture("vllm-stream-text-usage-chunk.sse").toString("utf8")
      expect(vllm.endsWith("data: [DONE]\n\n")).toBe(true)
      const expected = EXPECTED["vllm-stream-text-usage-chunk.sse"]!
      assertExpected(yield* replay({ body: vllm.slice(0, -1) }), expected)
      assertExpected(yield* replay({ body: vllm.slice(0, -2), splitEvery: 7 }), expected)
      // Cut right after the usage chunk's JSON: no newline, no [DONE]. The usage still counts.
      const length = readFixture("openai-stream-finish-length.sse").toString("utf8")
      const cut = length.slice(0, length.indexOf("\n\ndata: [DONE]"))
      assertExpected(yield* replay({ body: cut }), EXPECTED["openai-stream-finish-length.sse"]!)
    }).pipe(provideHttp))

  it.scopedLive("CRLF line endings, split so that \\r and \\n land in different writes", () =>
    Effect.gen(function*() {
      const crlf = readFixture("vllm-stream-text-usage-chunk.sse").toString("utf8").replaceAll("\n", "\r\n")
      const expected = EXPECTED["vllm-stream-text-usage-chunk.sse"]!
      assertExpected(yield* replay({ body: crlf, splitEvery: 7 }), expected)
      const crs = [...crlf.matchAll(/\r/g)].map((m) => m.index + 1)
      assertExpected(yield* replay({ body: crlf, splitAt: crs }), expected)
      // An `event:` line whose "\r" and "\n" arrive apart must still name the next `data:` (synthetic).
      const events = crlf.split("\r\n\r\n")
      const withError = events.slice(0, 3).join("\r\n\r\n") +
        "\r\n\r\nevent: error\r\ndata: {\"message\":\"Overloaded\",\"type\":\"overloaded_error\"}\r\n\r\n"
      const cuts = [...withError.matchAll(/\r/g)].map((m) => m.index + 1)
      const { error } = yield* replayFailure({ body: withError, splitAt: cuts })
      expect([error.code, error.message, error.retryable]).toEqual([
        "PROVIDER_ERROR",
        "overloaded_error: Overloaded",
        true
      ])
    }).pipe(provideHttp))

  // Usage shapes no recording has, each put in place of the finish-length recording's usage.
  const withUsage = (usage: unknown) => {
    const recorded =
      "{\"prompt_tokens\":79,\"completion_tokens\":1,\"total_tokens\":80,\"completion_tokens_details\":{\"reasoning_tokens\":0}}"
    const body = readFixture("openai-stream-finish-length.sse").toString("utf8")
    expect(body).toContain(recorded)
    return replay({ body: body.replace(recorded, JSON.stringify(usage)) })
  }

  it.scopedLive("usage: OpenRouter's cache_write_tokens → cacheWriteTokens, inside prompt_tokens (synthetic, its documented shape)", () =>
    Effect.gen(function*() {
      // The example of openrouter.ai/docs/use-cases/usage-accounting.
      const openRouter = {
        completion_tokens: 2,
        completion_tokens_details: { reasoning_tokens: 0 },
        cost: 0.95,
        cost_details: { upstream_inference_cost: 19 },
        prompt_tokens: 194,
        prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 100, audio_tokens: 0 },
        total_tokens: 196
      }
      const result = yield* withUsage(openRouter)
      expect([result.usage, result.rawUsage]).toEqual([
        { inputTokens: 194, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 100, reasoningTokens: 0, totalTokens: 196 },
        openRouter
      ])
    }).pipe(provideHttp))

  it.scopedLive("usage: DeepSeek's hit and miss counts without prompt_tokens give inputTokens = hit + miss (synthetic)", () =>
    Effect.gen(function*() {
      const result = yield* withUsage({ completion_tokens: 5, prompt_cache_hit_tokens: 64, prompt_cache_miss_tokens: 10 })
      expect(result.usage).toEqual({
        inputTokens: 74,
        outputTokens: 5,
        cacheReadTokens: 64,
        cacheWriteTokens: 0,
        reasoningTokens: 0
      })
    }).pipe(provideHttp))

  it.scopedLive("usage: an object without any count (or null) gives no usage part; the response part stays (synthetic)", () =>
    Effect.gen(function*() {
      for (const usage of [{}, { total_tokens: 3 }, null]) {
        const result = yield* withUsage(usage)
        expect([result.shape, result.usage, result.rawUsage]).toEqual(["response,text-delta,finish", undefined, undefined])
      }
    }).pipe(provideHttp))

  it.scopedLive("multi-byte UTF-8 split at every byte (synthetic: finish-length recording with other text)", () =>
    Effect.gen(function*() {
      const text = "h\u00e9llo \u2713 \ud83d\ude42 \u4e2d\u6587"
      const body = readFixture("openai-stream-finish-length.sse").toString("utf8")
        .replace("\"content\":\"{\\\"\"", `"content":${JSON.stringify(text)}`)
      const result = yield* replay({ body, splitEvery: 1 })
      expect(result.text).toBe(text)
      expect(result.shape).toBe("response,text-delta,usage,finish")
      expect(result.finish).toBe("length")
    }).pipe(provideHttp))
})

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

describe("OpenAICompat errors", () => {
  it.scopedLive("OpenAI 400 (tool calls without tool messages) → HTTP_400, not retryable", () =>
    Effect.gen(function*() {
      const { error, parts } = yield* replayFailure({
        file: "openai-error-400-tool-calls-without-tool-messages.json",
        status: 400
      })
      expect(error).toEqual({
        _tag: "ModelError",
        code: "HTTP_400",
        message: "invalid_request_error: An assistant message with 'tool_calls' must be followed by tool messages " +
          "responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " +
          "call_VJ3BU6CmJMXEQvBs5yLFGiFi (param messages.[3].role) (HTTP 400 from <server>/chat/completions)",
        status: 400,
        retryable: false,
        retryAfterMs: undefined
      })
      expect(parts.shape).toBe("")
    }).pipe(provideHttp))

  it.scopedLive("DeepSeek 400 served as application/octet-stream is still parsed as JSON", () =>
    Effect.gen(function*() {
      const { error } = yield* replayFailure({
        file: "deepseek-error-400-missing-tool-output.json",
        status: 400,
        contentType: "application/octet-stream"
      })
      expect(error).toEqual({
        _tag: "ModelError",
        code: "HTTP_400",
        message: "invalid_request_error: No tool output found for tool call call-a. (HTTP 400 from <server>/chat/completions)",
        status: 400,
        retryable: false,
        retryAfterMs: undefined
      })
    }).pipe(provideHttp))

  // Synthetic 429 body: no byte-exact recorded 429 exists (SOURCES.md); shaped like OpenAI's.
  const RATE_LIMIT_BODY = JSON.stringify({
    error: {
      message: "Rate limit reached for test-model on tokens per min (TPM). Please try again in 2s.",
      type: "tokens",
      param: null,
      code: "rate_limit_exceeded"
    }
  })

  it.scopedLive("429 with retry-after: 2 → retryable, retryAfterMs 2000 (synthetic body)", () =>
    Effect.gen(function*() {
      const { error } = yield* replayFailure({
        body: RATE_LIMIT_BODY,
        status: 429,
        contentType: "application/json",
        headers: { "retry-after": "2" }
      })
      expect(error).toEqual({
        _tag: "ModelError",
        code: "HTTP_429",
        message: "tokens: Rate limit reached for test-model on tokens per min (TPM). Please try again in 2s. " +
          "(HTTP 429 from <server>/chat/completions)",
        status: 429,
        retryable: true,
        retryAfterMs: 2000
      })
    }).pipe(provideHttp))

  it.scopedLive("retry-after-ms wins over retry-after; a 503 with a plain-text body keeps the text", () =>
    Effect.gen(function*() {
      const ms = yield* replayFailure({
        body: RATE_LIMIT_BODY,
        status: 429,
        contentType: "application/json",
        headers: { "retry-after": "2", "retry-after-ms": "1500" }
      })
      expect(ms.error.retryAfterMs).toBe(1500)
      const plain = yield* replayFailure({ body: "upstream connect error\n", status: 503, contentType: "text/plain" })
      expect(plain.error).toEqual({
        _tag: "ModelError",
        code: "HTTP_503",
        message: "upstream connect error (HTTP 503 from <server>/chat/completions)",
        status: 503,
        retryable: true,
        retryAfterMs: undefined
      })
    }).pipe(provideHttp))

  it.scopedLive("an HTML error page (a gateway's) is shown as a short plain-text excerpt; the URL is named without credentials or query", () =>
    Effect.gen(function*() {
      const page = "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title>\n<style>body { color: red }</style>" +
        "<script>var x = \"<b>\"</script></head>\n<body>\n  <center><h1>502   Bad Gateway</h1></center>\n" +
        "  <hr><center>nginx/1.25.3 &amp; friends</center>\n</body></html>\n"
      const server = yield* replayServer({ body: page, status: 502, contentType: "text/html" })
      const secretUrl = server.baseUrl.replace("http://", "http://alice:hunter2@") + "?api_key=sk-in-the-query&token=t0k"
      const model = yield* adapter(secretUrl)
      const failure = yield* Effect.flip(respond(model))
      expect(errorFields(failure.error)).toEqual({
        _tag: "ModelError",
        code: "HTTP_502",
        message: `502 Bad Gateway 502 Bad Gateway nginx/1.25.3 & friends (HTTP 502 from ${server.baseUrl}/chat/completions?…)`,
        status: 502,
        retryable: true,
        retryAfterMs: undefined
      })
      // A long page: at most 200 characters of its text.
      const long = yield* replayServer({
        body: `<html><body>${"<p>word </p>".repeat(500)}</body></html>`,
        status: 500,
        contentType: "text/html"
      })
      const cut = yield* Effect.flip(respond(yield* adapter(long.baseUrl)))
      expect(cut.error.message).toBe(`${"word ".repeat(40).trim()}… (HTTP 500 from ${long.baseUrl}/chat/completions)`)
    }).pipe(provideHttp))

  // Context overflow (§17). No recording of these errors exists (SOURCES.md): the bodies are
  // written here in the shapes the providers document.
  const OPENAI_OVERFLOW_MESSAGE = "This model's maximum context length is 128000 tokens. However, your messages " +
    "resulted in 130000 tokens. Please reduce the length of the messages."
  const OPENAI_OVERFLOW = {
    message: OPENAI_OVERFLOW_MESSAGE,
    type: "invalid_request_error",
    param: "messages",
    code: "context_length_exceeded"
  }
  const DEEPSEEK_OVERFLOW_MESSAGE = "This model's maximum context length is 65536 tokens. However, you requested " +
    "70000 tokens (70000 in the messages, 0 in the completion). Please reduce the length of the messages or completion."
  const VLLM_OVERFLOW_MESSAGE = "This model's maximum context length is 4096 tokens. However, you requested 5120 " +
    "tokens (4096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion."
  const LLAMACPP_OVERFLOW_MESSAGE = "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it"
  const overflow = (message: string, status: number | undefined) => ({
    _tag: "ModelError",
    code: "CONTEXT_OVERFLOW",
    message: status === undefined ? message : `${message} (HTTP ${status} from <server>/chat/completions)`,
    status,
    retryable: false,
    retryAfterMs: undefined
  })
  const json = (status: number, body: unknown): ReplaySpec => ({
    body: JSON.stringify(body),
    status,
    contentType: "application/json"
  })

  it.scopedLive("OpenAI 400 context_length_exceeded → CONTEXT_OVERFLOW, status 400, not retryable, message kept", () =>
    Effect.gen(function*() {
      const { error, parts, requests } = yield* replayFailure(json(400, { error: OPENAI_OVERFLOW }))
      expect(error).toEqual(overflow(`invalid_request_error: ${OPENAI_OVERFLOW_MESSAGE} (param messages)`, 400))
      expect([parts.shape, requests]).toEqual(["", 1])
    }).pipe(provideHttp))

  it.scopedLive("DeepSeek, vLLM (both shapes) and llama.cpp 400s, and a 413, → CONTEXT_OVERFLOW", () =>
    Effect.gen(function*() {
      const deepseek = yield* replayFailure(json(400, {
        error: { message: DEEPSEEK_OVERFLOW_MESSAGE, type: "invalid_request_error", param: null, code: "invalid_request_error" }
      }))
      expect(deepseek.error).toEqual(overflow(`invalid_request_error: ${DEEPSEEK_OVERFLOW_MESSAGE}`, 400))
      const vllmTop = yield* replayFailure(json(400, {
        object: "error",
        message: VLLM_OVERFLOW_MESSAGE,
        type: "BadRequestError",
        param: null,
        code: 400
      }))
      expect(vllmTop.error).toEqual(overflow(`BadRequestError: ${VLLM_OVERFLOW_MESSAGE}`, 400))
      const vllmEnvelope = yield* replayFailure(json(400, {
        error: { message: VLLM_OVERFLOW_MESSAGE, type: "BadRequestError", param: null, code: 400 }
      }))
      expect(vllmEnvelope.error).toEqual(overflow(`BadRequestError: ${VLLM_OVERFLOW_MESSAGE}`, 400))
      const llamacpp = yield* replayFailure(json(400, {
        error: {
          code: 400,
          message: LLAMACPP_OVERFLOW_MESSAGE,
          type: "exceed_context_size_error",
          n_prompt_tokens: 9412,
          n_ctx: 8192
        }
      }))
      expect(llamacpp.error).toEqual(overflow(`exceed_context_size_error: ${LLAMACPP_OVERFLOW_MESSAGE}`, 400))
      const tooLarge = yield* replayFailure(json(413, { error: OPENAI_OVERFLOW }))
      expect(tooLarge.error).toEqual(overflow(`invalid_request_error: ${OPENAI_OVERFLOW_MESSAGE} (param messages)`, 413))
      const plain = yield* replayFailure({ body: `${VLLM_OVERFLOW_MESSAGE}\n`, status: 400, contentType: "text/plain" })
      expect(plain.error).toEqual(overflow(VLLM_OVERFLOW_MESSAGE, 400))
    }).pipe(provideHttp))

  it.scopedLive("other 400s, and the overflow body under another status, keep HTTP_<status>", () =>
    Effect.gen(function*() {
      const maxTokens = "max_tokens is too large: 200000. This model supports at most 16384 completion tokens, " +
        "whereas you provided 200000."
      const other = yield* replayFailure(json(400, {
        error: { message: maxTokens, type: "invalid_request_error", param: "max_tokens", code: "invalid_value" }
      }))
      expect(other.error).toEqual({
        _tag: "ModelError",
        code: "HTTP_400",
        message: `invalid_request_error: ${maxTokens} (param max_tokens) (HTTP 400 from <server>/chat/completions)`,
        status: 400,
        retryable: false,
        retryAfterMs: undefined
      })
      const unavailable = yield* replayFailure(json(503, { error: OPENAI_OVERFLOW }))
      expect(unavailable.error).toEqual({
        _tag: "ModelError",
        code: "HTTP_503",
        message: `invalid_request_error: ${OPENAI_OVERFLOW_MESSAGE} (param messages) (HTTP 503 from <server>/chat/completions)`,
        status: 503,
        retryable: true,
        retryAfterMs: undefined
      })
      const rateLimited = yield* replayFailure(json(429, {
        error: {
          message: "Request too large for test-model on tokens per min (TPM): Limit 30000, Requested 130000.",
          type: "tokens",
          param: null,
          code: "rate_limit_exceeded"
        }
      }))
      expect([rateLimited.error.code, rateLimited.error.retryable]).toEqual(["HTTP_429", true])
    }).pipe(provideHttp))

  it.scopedLive("a streamed error object (`data: {\"error\": …}`, `event: error`) and a whole error body saying so → CONTEXT_OVERFLOW, no status", () =>
    Effect.gen(function*() {
      const inChunk = yield* replayFailure({ body: `data: ${JSON.stringify({ error: OPENAI_OVERFLOW })}\n\n` })
      expect(inChunk.error).toEqual(overflow(`invalid_request_error: ${OPENAI_OVERFLOW_MESSAGE} (param messages)`, undefined))
      expect(inChunk.parts.shape).toBe("")
      const event = yield* replayFailure({
        body: vllmPrefix() +
          `event: error\ndata: ${JSON.stringify({ error: { message: VLLM_OVERFLOW_MESSAGE, type: "BadRequestError" } })}\n\n`
      })
      expect(event.error).toEqual(overflow(`BadRequestError: ${VLLM_OVERFLOW_MESSAGE}`, undefined))
      expect(event.parts.text).toBe("1,")
      const whole = yield* replayFailure(json(200, { error: OPENAI_OVERFLOW }))
      expect(whole.error).toEqual(overflow(`invalid_request_error: ${OPENAI_OVERFLOW_MESSAGE} (param messages)`, undefined))
      const other = yield* replayFailure({
        body: `data: ${JSON.stringify({ error: { message: "Invalid prompt", type: "invalid_request_error" } })}\n\n`
      })
      expect([other.error.code, other.error.message]).toEqual(["PROVIDER_ERROR", "invalid_request_error: Invalid prompt"])
    }).pipe(provideHttp))

  it.scopedLive("unreachable base URL → NETWORK, retryable", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const model = yield* adapter(`http://127.0.0.1:${port}/v1`)
      const { error } = yield* Effect.flip(respond(model))
      expect(error.code).toBe("NETWORK")
      expect(error.retryable).toBe(true)
      expect(error.status).toBeUndefined()
      expect(error.message).toContain(`http://127.0.0.1:${port}/v1/chat/completions`)
      expect(error.message).not.toContain(API_KEY)
    }).pipe(provideHttp))

  it.scopedLive("a server that never answers → TIMEOUT (retryable) after idleTimeoutMs", () =>
    Effect.gen(function*() {
      const server = yield* loopbackServer(() => {}) // accepts, never answers
      const port = (server.address() as AddressInfo).port
      const model = yield* OpenAICompat.make({ baseUrl: `http://127.0.0.1:${port}/v1`, model: "m", idleTimeoutMs: 200 })
      const { error } = yield* Effect.flip(respond(model))
      expect([error.code, error.retryable]).toEqual(["TIMEOUT", true])
      expect(error.message).toBe(
        `openai-compat: no answer from http://127.0.0.1:${port}/v1/chat/completions within 200 ms (waiting for the response headers)`
      )
    }).pipe(provideHttp))

  it.scopedLive("a connection broken mid-body → NETWORK, retryable, after the parts already pushed", () =>
    Effect.gen(function*() {
      const body = readFixture("vllm-stream-text-usage-chunk.sse").toString("utf8").split("\n\n").slice(0, 3).join("\n\n") +
        "\n\n"
      const server = yield* loopbackServer((_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.write(body, () => setTimeout(() => res.socket?.destroy(), 50))
      })
      const port = (server.address() as AddressInfo).port
      const model = yield* OpenAICompat.make({ baseUrl: `http://127.0.0.1:${port}/v1`, model: "m" })
      const failure = yield* Effect.flip(respond(model))
      expect([failure.error.code, failure.error.retryable, failure.error.message]).toEqual([
        "NETWORK",
        true,
        "connection failed while reading the event stream: other side closed"
      ])
      expect(summarize(failure.parts).text).toBe("1,")
    }).pipe(provideHttp))

  it.scopedLive("a stream that stalls mid-body → TIMEOUT after the parts already pushed", () =>
    Effect.gen(function*() {
      const { error, parts } = yield* replayFailure(
        { file: "vllm-stream-text-usage-chunk.sse", splitAt: [900], delayMs: 5_000 },
        { idleTimeoutMs: 300 }
      )
      expect(error.code).toBe("TIMEOUT")
      expect(error.message).toContain("waiting for the next piece of the event stream")
      expect([parts.text, parts.shape, parts.finish]).toEqual(["1,", "response,text-delta*2", undefined])
    }).pipe(provideHttp))

  // The mid-stream error recordings (OpenRouter, Groq) are not in the wire folder: these bodies are
  // synthetic, spliced after a prefix of the vLLM recording, in the shapes SOURCES.md describes.
  const vllmPrefix = () => {
    const body = readFixture("vllm-stream-text-usage-chunk.sse").toString("utf8")
    const events = body.split("\n\n")
    return events.slice(0, 3).join("\n\n") + "\n\n" // role chunk + "1" + ","
  }

  it.scopedLive("`event: error` mid-stream → PROVIDER_ERROR after the deltas already pushed (synthetic)", () =>
    Effect.gen(function*() {
      const body = vllmPrefix() +
        "event: error\ndata: {\"error\":{\"message\":\"Service Unavailable\",\"type\":\"internal_server_error\"}}\n\n"
      const { error, parts } = yield* replayFailure({ body, splitEvery: 7 })
      expect(error).toEqual({
        _tag: "ModelError",
        code: "PROVIDER_ERROR",
        message: "internal_server_error: Service Unavailable",
        status: undefined,
        retryable: true,
        retryAfterMs: undefined
      })
      expect(parts.text).toBe("1,")
      expect(parts.shape).toBe("response,text-delta*2")
    }).pipe(provideHttp))

  it.scopedLive("an `error` field on a chunk → PROVIDER_ERROR, retryable by its numeric code (synthetic)", () =>
    Effect.gen(function*() {
      const chunk = {
        id: "gen-1",
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta: { content: "" }, finish_reason: "error" }],
        error: { code: 502, message: "Provider returned error" }
      }
      const { error } = yield* replayFailure({ body: vllmPrefix() + `data: ${JSON.stringify(chunk)}\n\n` })
      expect(error).toEqual({
        _tag: "ModelError",
        code: "PROVIDER_ERROR",
        message: "Provider returned error",
        status: undefined,
        retryable: true,
        retryAfterMs: undefined
      })
    }).pipe(provideHttp))

  it.scopedLive("malformed JSON in a chunk → BAD_RESPONSE", () =>
    Effect.gen(function*() {
      const body = vllmPrefix() + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}\n\ndata: [DONE]\n\n"
      const { error } = yield* replayFailure({ body })
      expect(error.code).toBe("BAD_RESPONSE")
      expect(error.retryable).toBe(false)
      expect(error.message).toMatch(/^malformed JSON in a stream chunk: /)
    }).pipe(provideHttp))

  it.scopedLive("a stream cut before its finish_reason → STREAM_INCOMPLETE, retryable (with or without [DONE])", () =>
    Effect.gen(function*() {
      const body = readFixture("openai-stream-tool-calls-parallel.sse").toString("utf8")
      const prefix = body.split("\n\n").slice(0, 6).join("\n\n") + "\n\n"
      const cut = yield* replayFailure({ body: prefix })
      expect(cut.error).toEqual({
        _tag: "ModelError",
        code: "STREAM_INCOMPLETE",
        message: "the response stream ended without a finish_reason",
        status: undefined,
        retryable: true,
        retryAfterMs: undefined
      })
      // The response id/model comes with the first chunk; tool calls only on a finished stream.
      expect(cut.parts.shape).toBe("response")
      const done = yield* replayFailure({ body: prefix + "data: [DONE]\n\n" })
      expect(done.error.code).toBe("STREAM_INCOMPLETE")
      expect(done.error.message).toBe("the response stream ended ([DONE]) without a finish_reason")
    }).pipe(provideHttp))

  it.scopedLive("interrupting respond mid-stream closes the connection", () =>
    Effect.gen(function*() {
      // ~4 KB in 300-byte writes 150 ms apart: about 2 s if nobody interrupts.
      const server = yield* replayServer({ file: "vllm-stream-text-usage-chunk.sse", splitEvery: 300, delayMs: 150 })
      const model = yield* adapter(server.baseUrl)
      const first = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(model.respond(REQUEST, { part: () => Deferred.succeed(first, undefined) }))
      yield* Deferred.await(first)
      yield* Fiber.interrupt(fiber)
      // Polled until the server has seen the connection close (at most `SOCKET_CLOSE_MS`).
      const interrupted = Date.now()
      while (server.aborted === 0 && Date.now() - interrupted < SOCKET_CLOSE_MS) yield* Effect.sleep("10 millis")
      note("a server seeing an interrupted request's connection close", Date.now() - interrupted)
      expect(server.aborted).toBe(1)
    }).pipe(provideHttp))

  it.scopedLive("`retry` retries a retryable failure before the first part, honouring retryAfterMs", () =>
    Effect.gen(function*() {
      const { error, requests } = yield* replayFailure(
        { body: RATE_LIMIT_BODY, status: 429, contentType: "application/json", headers: { "retry-after-ms": "5" } },
        { retry: Schedule.recurs(2) }
      )
      expect(error.code).toBe("HTTP_429")
      expect(requests).toBe(3)
    }).pipe(provideHttp))

  it.scopedLive("`retry` does not retry once a part reached the sink", () =>
    Effect.gen(function*() {
      const body = vllmPrefix() + "event: error\ndata: {\"error\":{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"}}\n\n"
      const { error, requests } = yield* replayFailure({ body }, { retry: Schedule.recurs(2) })
      expect(error.code).toBe("PROVIDER_ERROR")
      expect(error.retryable).toBe(true)
      expect(requests).toBe(1)
    }).pipe(provideHttp))
})

// ---------------------------------------------------------------------------------------------
// Request side
// ---------------------------------------------------------------------------------------------

const assistant = assistantOf("openai-compat", "test-model")

const U1 = user("u1", "What's the weather like in Edinburgh?")
const U2 = user("u2", "What's the price of AAPL?")
const A1 = assistant("a1", [
  { type: "reasoning", text: "Two lookups: weather, then stock price." },
  { type: "tool-call", id: "call_1", name: "GetWeatherArgs", arguments: "{\"city\": \"Edinburgh\"}" },
  { type: "tool-call", id: "call_2", name: "get_stock_price", arguments: "{\"ticker\":\"AAPL\"}" }
])
const R1 = toolResult("r1", "call_1", "12\u00b0C, rain")
const R2 = toolResult("r2", "call_2", "error: exchange closed", true)
const C1 = user("c1", "weather tool: data is 10 minutes old", { kind: "tool", callId: "call_1" })

const SYSTEM = { role: "system", content: "You are terse." }
const WIRE_U1 = { role: "user", content: "What's the weather like in Edinburgh?" }
const WIRE_U2 = { role: "user", content: "What's the price of AAPL?" }
const WIRE_A1 = {
  role: "assistant",
  content: null,
  tool_calls: [
    { id: "call_1", type: "function", function: { name: "GetWeatherArgs", arguments: "{\"city\": \"Edinburgh\"}" } },
    { id: "call_2", type: "function", function: { name: "get_stock_price", arguments: "{\"ticker\":\"AAPL\"}" } }
  ],
  reasoning_content: "Two lookups: weather, then stock price."
}
const WIRE_R1 = { role: "tool", tool_call_id: "call_1", content: "12\u00b0C, rain" }
const WIRE_R2 = { role: "tool", tool_call_id: "call_2", content: "error: exchange closed" }
const WIRE_C1 = { role: "user", content: "weather tool: data is 10 minutes old" }

const TOOLS: ReadonlyArray<ToolDefinition> = [
  {
    name: "GetWeatherArgs",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
  }
]

/** Sends `messages` (one request per list) and returns the captured request bodies. */
const sentBodies = (
  lists: ReadonlyArray<ReadonlyArray<Message>>,
  request?: Partial<ModelRequest>,
  extra?: Partial<OpenAICompat.Options>
) =>
  Effect.gen(function*() {
    const server = yield* replayServer({ file: "openai-stream-finish-length.sse" })
    const model = yield* adapter(server.baseUrl, extra)
    for (const messages of lists) {
      yield* respond(model, { ...REQUEST, instructions: "You are terse.", ...request, messages })
    }
    return { requests: server.requests, bodies: server.requests.map((r) => JSON.parse(r.body)) }
  })

describe("OpenAICompat requests", () => {
  it.scopedLive("maps the history: separate consecutive user messages, tool results right after the call", () =>
    Effect.gen(function*() {
      const { bodies, requests } = yield* sentBodies([[U1, U2, A1, R1, R2, C1]], {
        tools: TOOLS,
        settings: { maxTokens: 256, temperature: 0.2 }
      })
      expect(bodies[0].messages).toEqual([SYSTEM, WIRE_U1, WIRE_U2, WIRE_A1, WIRE_R1, WIRE_R2, WIRE_C1])
      expect(bodies[0]).toEqual({
        model: "test-model",
        messages: bodies[0].messages,
        tools: [{
          type: "function",
          function: {
            name: "GetWeatherArgs",
            description: "Weather for a city",
            parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
          }
        }],
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 256,
        temperature: 0.2
      })
      const req = requests[0]!
      expect(req.method).toBe("POST")
      expect(req.url).toBe("/v1/chat/completions")
      expect(req.headers["authorization"]).toBe(`Bearer ${API_KEY}`)
      expect(req.headers["content-type"]).toBe("application/json")
    }).pipe(provideHttp))

  it.scopedLive("reasoningContent: \"omit\" leaves reasoning_content out (servers that reject it); the default sends it", () =>
    Effect.gen(function*() {
      const sent = yield* sentBodies([[U1, A1, R1, R2]])
      expect(sent.bodies[0].messages[2]).toEqual(WIRE_A1)
      const omitted = yield* sentBodies([[U1, A1, R1, R2]], {}, { reasoningContent: "omit" })
      const { reasoning_content: _, ...withoutReasoning } = WIRE_A1
      expect(omitted.bodies[0].messages[2]).toEqual(withoutReasoning)
      expect(omitted.bodies[0].messages.slice(3)).toEqual([WIRE_R1, WIRE_R2])
    }).pipe(provideHttp))

  it.scopedLive("moves tool results up past context messages logged between the call and its results", () =>
    Effect.gen(function*() {
      const { bodies } = yield* sentBodies([[U1, A1, C1, R1, R2], [U1, A1, R1, C1, R2]])
      const expected = [SYSTEM, WIRE_U1, WIRE_A1, WIRE_R1, WIRE_R2, WIRE_C1]
      expect(bodies[0].messages).toEqual(expected)
      expect(bodies[1].messages).toEqual(expected)
    }).pipe(provideHttp))

  it.scopedLive("a later step sends the same prefix plus the new messages; tools omitted when empty", () =>
    Effect.gen(function*() {
      const A2 = assistant("a2", [{ type: "text", text: "Rainy, 12\u00b0C." }, { type: "text", text: "AAPL: closed." }])
      const U3 = user("u3", "thanks")
      const history: Array<Message> = [U1, U2, A1, R1, R2, C1]
      const first = history.slice()
      history.push(A2, U3)
      const { bodies } = yield* sentBodies([first, history])
      expect(bodies[1].messages).toEqual([
        ...bodies[0].messages,
        { role: "assistant", content: "Rainy, 12\u00b0C.\nAAPL: closed." },
        { role: "user", content: "thanks" }
      ])
      expect("tools" in bodies[1]).toBe(false)
      expect("max_tokens" in bodies[1]).toBe(false)
    }).pipe(provideHttp))

  it.scopedLive("images become image_url data URLs; options set defaults and extraBody", () =>
    Effect.gen(function*() {
      const image = freeze({
        id: "i1" as MessageId,
        role: "user" as const,
        content: [
          { type: "text" as const, text: "What is this?" },
          { type: "image" as const, mediaType: "image/png", data: "iVBORw0KGgo=" },
          { type: "text" as const, text: "Be brief." }
        ],
        source: { kind: "user" }
      })
      const { bodies, requests } = yield* sentBodies([[image]], { instructions: undefined }, {
        apiKey: undefined,
        maxTokens: 100,
        maxTokensField: "max_completion_tokens",
        extraBody: { thinking: { type: "enabled" }, model: "ignored" }
      })
      expect(bodies[0].messages).toEqual([{
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          { type: "text", text: "Be brief." }
        ]
      }])
      expect(bodies[0].model).toBe("test-model")
      expect(bodies[0].max_completion_tokens).toBe(100)
      expect(bodies[0].thinking).toEqual({ type: "enabled" })
      expect(requests[0]!.headers["authorization"]).toBeUndefined()
    }).pipe(provideHttp))

  it.scopedLive("under a tracer of the program's own, respond runs in its OpenAICompat.respond span, the HTTP client's below it", () =>
    Effect.gen(function*() {
      const server = yield* replayServer({ file: "vllm-stream-text-usage-chunk.sse" })
      const model = yield* adapter(server.baseUrl)
      // Effect's own tracer, wrapped so that it is not the default one: spans recorded as made.
      const native = yield* Effect.tracer
      const spans: Array<{ readonly name: string; readonly id: string; readonly parent: string | undefined }> = []
      const recording = Tracer.make({
        span: (name, parent, context, links, startTime, kind, options) => {
          const span = native.span(name, parent, context, links, startTime, kind, options)
          spans.push({ name, id: span.spanId, parent: Option.getOrUndefined(Option.map(parent, (p) => p.spanId)) })
          return span
        },
        context: native.context
      })
      yield* Effect.withTracer(respond(model), recording)
      const own = spans.find((s) => s.name === "OpenAICompat.respond")
      expect(own).toBeDefined()
      expect(spans.filter((s) => s.parent === own!.id).map((s) => s.name)).toEqual(["http.client POST"])
    }).pipe(provideHttp))

  it.effect("layer provides Model with provider and model names", () =>
    Effect.gen(function*() {
      const model = yield* Model
      expect(model.provider).toBe("deepseek")
      expect(model.model).toBe("deepseek-reasoner")
    }).pipe(
      Effect.provide(OpenAICompat.layer({
        baseUrl: "http://127.0.0.1:1/v1",
        model: "deepseek-reasoner",
        provider: "deepseek"
      })),
      provideHttp
    ))
})

it("frames .chunks.jsonl as data: lines with a [DONE] terminator", () => {
  const framed = framedBody({ file: "openai-stream-text-then-tool-call.chunks.jsonl" }).toString("utf8")
  expect(framed.startsWith("data: {")).toBe(true)
  expect(framed.endsWith("\n\ndata: [DONE]\n\n")).toBe(true)
  expect(framed.split("\n\n").length - 1).toBe(8)
})
