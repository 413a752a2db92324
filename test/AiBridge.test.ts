import { OpenAiClient, OpenAiLanguageModel } from "@effect/ai-openai"
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Fiber, Layer, Option, Redacted, Schema, Stream, TestClock } from "effect"
import * as Agent from "../src/Agent.js"
import type { ContentBlock, Message } from "../src/Message.js"
import type { ModelError, ModelPart, ModelRequest, ModelService, ToolDefinition } from "../src/Model.js"
import * as AiBridge from "../src/providers/AiBridge.js"
import * as Tool_ from "../src/Tool.js"
import { brief, checkLog, layer } from "./utils/agent.js"
import { assistantOf, collect, errorFields, toolResult, user } from "./utils/modelParts.js"
import { responseObject, sse } from "./utils/openaiResponses.js"
import { closedPort, replayServer } from "./utils/replayServer.js"

// ---------------------------------------------------------------------------------------------
// A scripted @effect/ai LanguageModel: one entry per streamText call, parts in their encoded
// form (what a provider emits before @effect/ai decodes them)
// ---------------------------------------------------------------------------------------------

interface Scripted {
  readonly parts?: ReadonlyArray<Response.StreamPartEncoded> | undefined
  /** `"one"` (default): all parts in one chunk; `"each"`: one chunk per part. */
  readonly chunks?: "one" | "each" | undefined
  /** Fail the stream with this error after the parts. */
  readonly fail?: AiError.AiError | undefined
  /** Send nothing more after the parts (a provider that stalls). */
  readonly stall?: boolean | undefined
}

const scriptedLanguageModel = (script: ReadonlyArray<Scripted>) =>
  Effect.gen(function*() {
    const calls: Array<LanguageModel.ProviderOptions> = []
    const service = yield* LanguageModel.make({
      generateText: () => Effect.dieMessage("generateText is not used by the bridge"),
      streamText: (options) => {
        calls.push(options)
        const entry = script[calls.length - 1]
        if (entry === undefined) return Stream.dieMessage(`script exhausted at call ${calls.length}`)
        let stream: Stream.Stream<Response.StreamPartEncoded, AiError.AiError> = Stream.fromIterable(entry.parts ?? [])
        if (entry.chunks === "each") stream = Stream.rechunk(stream, 1)
        if (entry.fail !== undefined) stream = Stream.concat(stream, Stream.fail(entry.fail))
        if (entry.stall === true) stream = Stream.concat(stream, Stream.never)
        return stream
      }
    })
    return { service, calls }
  })

const bridged = (script: ReadonlyArray<Scripted>, options?: AiBridge.Options) =>
  Effect.gen(function*() {
    const { calls, service } = yield* scriptedLanguageModel(script)
    const model = yield* AiBridge.fromLanguageModel(options).pipe(
      Effect.provideService(LanguageModel.LanguageModel, service)
    )
    return { model, calls }
  })

const request = (messages: ReadonlyArray<Message>, extra?: Partial<ModelRequest>): ModelRequest => ({
  sessionId: "s",
  turn: 1,
  step: 1,
  tools: [],
  messages,
  ...extra
})

const respond = (model: ModelService, req: ModelRequest) => Effect.flatten(Effect.either(collect(model, req)))

/** The bridge's own model source. */
const assistant = assistantOf("effect-ai", "unknown")

const call = (id: string, name: string, args: string): ContentBlock => ({ type: "tool-call", id, name, arguments: args })

/**
 * A prompt as plain data: each message's role and content, each part without the part type id
 * and without empty `options`.
 */
const plain = (prompt: Prompt.Prompt) =>
  prompt.content.map((message) =>
    message.role === "system"
      ? { role: "system", content: message.content }
      : {
        role: message.role,
        content: message.content.map((part) => {
          const out: Record<string, unknown> = {}
          for (const [key, value] of Object.entries(part)) {
            if (key.startsWith("~")) continue
            if (key === "options" && Object.keys(value as object).length === 0) continue
            out[key] = value
          }
          return out
        })
      }
  )

const text = (t: string) => ({ type: "text", text: t })
const toolCallPart = (id: string, name: string, params: unknown, options?: unknown) => ({
  type: "tool-call",
  id,
  name,
  params,
  providerExecuted: false,
  ...(options === undefined ? {} : { options })
})
const toolResultPart = (id: string, name: string, result: unknown, isFailure = false) => ({
  type: "tool-result",
  id,
  name,
  isFailure,
  result,
  providerExecuted: false
})

const MISSING =
  "No result was recorded for this tool call: its outcome is unknown. Do not assume it ran or did not run; check before calling it again."

const finishPart = (
  reason: Response.FinishReason,
  usage?: Partial<typeof Response.Usage.Encoded>
): Response.StreamPartEncoded => ({
  type: "finish",
  reason,
  usage: { inputTokens: undefined, outputTokens: undefined, totalTokens: undefined, ...usage }
})

// ---------------------------------------------------------------------------------------------
// (a) Request shape
// ---------------------------------------------------------------------------------------------

describe("AiBridge: request → Prompt", () => {
  it.effect("instructions first; results right after their call, in call order; contexts and steer as separate user messages", () =>
    Effect.gen(function*() {
      const { calls, model } = yield* bridged([{ parts: [finishPart("stop")] }])
      const history = [
        user("m1", "U"),
        assistant("m2", [
          { type: "text", text: "Checking." },
          call("c1", "read", "{\"path\":\"a\"}"),
          call("c2", "clock", "{}")
        ]),
        toolResult("m3", "c1", "alpha"),
        toolResult("m4", "c2", "12:00", true),
        user("m5", "X", { kind: "plugin", plugin: "netwatch" }),
        user("m6", "Y", { kind: "tool", callId: "c1" }),
        user("m7", "S")
      ]
      yield* respond(model, request(history, { instructions: "Be brief." }))
      expect(calls).toHaveLength(1)
      expect(plain(calls[0]!.prompt)).toEqual([
        { role: "system", content: "Be brief." },
        { role: "user", content: [text("U")] },
        {
          role: "assistant",
          content: [text("Checking."), toolCallPart("c1", "read", { path: "a" }), toolCallPart("c2", "clock", {})]
        },
        { role: "tool", content: [toolResultPart("c1", "read", "alpha")] },
        { role: "tool", content: [toolResultPart("c2", "clock", "12:00", true)] },
        { role: "user", content: [text("X")] },
        { role: "user", content: [text("Y")] },
        { role: "user", content: [text("S")] }
      ])
      // No tools: none offered, nothing to decode against.
      expect(calls[0]!.tools).toEqual([])
      expect(calls[0]!.toolChoice).toBe("none")
    }))

  it.effect("an orphan call gets a synthetic error result; a result logged after a context moves up; a stray result becomes user text", () =>
    Effect.gen(function*() {
      const { calls, model } = yield* bridged([{ parts: [finishPart("stop")] }])
      const history = [
        user("m1", "go"),
        assistant("m2", [call("c1", "read", "{\"path\":\"a\"}"), call("c2", "read", "not json")]),
        user("m3", "context logged early", { kind: "plugin", plugin: "p" }),
        toolResult("m4", "c2", "second"),
        toolResult("m5", "zz", "nobody asked", true),
        assistant("m6", [{ type: "text", text: "" }]),
        assistant("m7", [call("c3", "clock", "[1]")]),
        user("m8", "after")
      ]
      yield* respond(model, request(history))
      expect(plain(calls[0]!.prompt)).toEqual([
        { role: "user", content: [text("go")] },
        // Arguments that are not a JSON object are sent as `{}`.
        { role: "assistant", content: [toolCallPart("c1", "read", { path: "a" }), toolCallPart("c2", "read", {})] },
        { role: "tool", content: [toolResultPart("c1", "read", MISSING, true)] },
        { role: "tool", content: [toolResultPart("c2", "read", "second")] },
        { role: "user", content: [text("context logged early")] },
        { role: "user", content: [text("Result of tool call zz (error): nobody asked")] },
        // The empty assistant message m6 sends nothing.
        { role: "assistant", content: [toolCallPart("c3", "clock", {})] },
        { role: "tool", content: [toolResultPart("c3", "clock", MISSING, true)] },
        { role: "user", content: [text("after")] }
      ])
    }))

  it.effect("reasoning state goes back as reasoning parts with their options, and the following item with its own; images as bytes", () =>
    Effect.gen(function*() {
      const { calls, model } = yield* bridged([{ parts: [finishPart("stop")] }])
      const state: AiBridge.ReasoningState = {
        kind: "effect-ai",
        parts: [
          { text: "First, ", options: { openai: { itemId: "rs_1", encryptedContent: "enc" } } },
          { text: "second.", options: { openai: { itemId: "rs_1", encryptedContent: "enc" } } }
        ],
        next: { type: "tool-call", id: "c1", options: { openai: { itemId: "fc_1" } } }
      }
      const history = [
        {
          ...user("m1", "look"),
          content: [{ type: "text" as const, text: "look" }, { type: "image" as const, mediaType: "image/png", data: "AAEC" }]
        },
        assistant("m2", [
          { type: "reasoning", text: "First, second.", providerState: state },
          call("c1", "read", "{}"),
          { type: "reasoning", text: "foreign", providerState: { kind: "anthropic", signature: "sig" } },
          { type: "text", text: "Done." }
        ]),
        toolResult("m3", "c1", "ok")
      ]
      yield* respond(model, request(history))
      const prompt = plain(calls[0]!.prompt)
      expect(prompt).toEqual([
        {
          role: "user",
          content: [text("look"), { type: "file", mediaType: "image/png", data: Buffer.from([0, 1, 2]) }]
        },
        {
          role: "assistant",
          content: [
            { type: "reasoning", text: "First, ", options: { openai: { itemId: "rs_1", encryptedContent: "enc" } } },
            { type: "reasoning", text: "second.", options: { openai: { itemId: "rs_1", encryptedContent: "enc" } } },
            toolCallPart("c1", "read", {}, { openai: { itemId: "fc_1" } }),
            // Another adapter's state is not ours: the text goes as a plain reasoning part.
            { type: "reasoning", text: "foreign" },
            text("Done.")
          ]
        },
        { role: "tool", content: [toolResultPart("c1", "read", "ok")] }
      ])
    }))

  it.effect("tools: JSON Schema passed through as is, tool choice auto, resolution disabled", () =>
    Effect.gen(function*() {
      const { calls, model } = yield* bridged([{ parts: [finishPart("stop")] }])
      const readSchema = {
        $schema: "http://json-schema.org/draft-07/schema#",
        type: "object",
        required: ["path"],
        properties: { path: { type: "string", description: "file path" }, limit: { type: "integer" } },
        additionalProperties: false
      }
      const tools: Array<ToolDefinition> = [
        { name: "read", description: "Reads a file", parameters: readSchema },
        { name: "clock", description: "Tells the time", parameters: undefined }
      ]
      yield* respond(model, request([user("m1", "hi")], { tools }))
      const offered = calls[0]!.tools
      expect(offered.map((t) => [t.name, t.description])).toEqual([["read", "Reads a file"], ["clock", "Tells the time"]])
      expect(offered.map((t) => Tool.getJsonSchema(t as any))).toEqual([readSchema, { type: "object", properties: {} }])
      expect(calls[0]!.toolChoice).toBe("auto")
    }))
})

// ---------------------------------------------------------------------------------------------
// (b) Streamed parts → ModelParts
// ---------------------------------------------------------------------------------------------

const TOOLS: Array<ToolDefinition> = [
  { name: "read", description: "Reads a file", parameters: { type: "object", properties: { path: { type: "string" } } } },
  { name: "clock", description: "Tells the time", parameters: { type: "object", properties: {} } }
]

describe("AiBridge: stream → ModelParts", () => {
  it.effect("text, reasoning with providerState, tool calls with raw arguments, usage and finish, pushed in order", () =>
    Effect.gen(function*() {
      const { model } = yield* bridged([{
        chunks: "each",
        parts: [
          { type: "response-metadata", id: "resp_1", modelId: "m" },
          { type: "reasoning-start", id: "rs_1:0", metadata: { openai: { itemId: "rs_1" } } },
          { type: "reasoning-delta", id: "rs_1:0", delta: "Think", metadata: { openai: { itemId: "rs_1" } } },
          { type: "reasoning-delta", id: "rs_1:0", delta: "ing. ", metadata: { openai: { itemId: "rs_1" } } },
          { type: "reasoning-start", id: "rs_1:1", metadata: { openai: { itemId: "rs_1" } } },
          { type: "reasoning-delta", id: "rs_1:1", delta: "More.", metadata: { openai: { itemId: "rs_1" } } },
          { type: "reasoning-end", id: "rs_1:0", metadata: { openai: { itemId: "rs_1", encryptedContent: "enc" } } },
          { type: "reasoning-end", id: "rs_1:1", metadata: { openai: { itemId: "rs_1", encryptedContent: "enc" } } },
          { type: "text-start", id: "msg_1", metadata: { openai: { itemId: "msg_1" } } },
          { type: "text-delta", id: "msg_1", delta: "Hello" },
          { type: "text-delta", id: "msg_1", delta: "" },
          { type: "text-delta", id: "msg_1", delta: " there" },
          { type: "text-end", id: "msg_1" },
          { type: "tool-params-start", id: "call_1", name: "read" },
          { type: "tool-params-delta", id: "call_1", delta: "{\"path\":" },
          { type: "tool-params-delta", id: "call_1", delta: "  \"a.txt\" }" },
          { type: "tool-params-end", id: "call_1" },
          { type: "tool-call", id: "call_1", name: "read", params: { path: "a.txt" }, metadata: { openai: { itemId: "fc_1" } } },
          // No params deltas: the arguments are re-serialized from the parsed params.
          { type: "tool-call", id: "call_2", name: "clock", params: { tz: "UTC", n: 1.5 } },
          finishPart("tool-calls", {
            inputTokens: 10,
            outputTokens: 5,
            totalTokens: 15,
            reasoningTokens: 3,
            cachedInputTokens: 4
          })
        ]
      }])
      const parts = yield* respond(model, request([user("m1", "hi")], { tools: TOOLS }))
      const state: AiBridge.ReasoningState = {
        kind: "effect-ai",
        parts: [
          { text: "Thinking. ", options: { openai: { itemId: "rs_1", encryptedContent: "enc" } } },
          { text: "More.", options: { openai: { itemId: "rs_1", encryptedContent: "enc" } } }
        ],
        next: { type: "text", options: { openai: { itemId: "msg_1" } } }
      }
      expect(parts).toEqual(
        [
          // The response-metadata part, as `response` (id, modelId → model).
          { type: "response", id: "resp_1", model: "m" },
          { type: "reasoning-delta", text: "Think" },
          { type: "reasoning-delta", text: "ing. " },
          { type: "reasoning-delta", text: "More." },
          { type: "reasoning-delta", text: "", providerState: state },
          { type: "text-delta", text: "Hello" },
          { type: "text-delta", text: " there" },
          { type: "tool-call", id: "call_1", name: "read", rawArguments: "{\"path\":  \"a.txt\" }" },
          { type: "tool-call", id: "call_2", name: "clock", rawArguments: "{\"tz\":\"UTC\",\"n\":1.5}" },
          {
            type: "usage",
            usage: {
              inputTokens: 10,
              outputTokens: 5,
              cacheReadTokens: 4,
              cacheWriteTokens: 0,
              reasoningTokens: 3,
              totalTokens: 15
            },
            // @effect/ai's Usage as plain JSON: the provider's own object does not reach the bridge.
            raw: { inputTokens: 10, outputTokens: 5, totalTokens: 15, reasoningTokens: 3, cachedInputTokens: 4 }
          },
          { type: "finish", reason: "tool-calls" }
        ] satisfies Array<ModelPart>
      )
    }))

  it.effect("a reasoning item with no summary text still carries its state (encrypted content), closed by the finish", () =>
    Effect.gen(function*() {
      const { model } = yield* bridged([{
        parts: [
          { type: "reasoning-start", id: "rs_9:0", metadata: { openai: { itemId: "rs_9", encryptedContent: "e9" } } },
          { type: "reasoning-end", id: "rs_9:0", metadata: { openai: { itemId: "rs_9", encryptedContent: "e9" } } },
          finishPart("stop")
        ]
      }])
      expect(yield* respond(model, request([user("m1", "hi")]))).toEqual([
        {
          type: "reasoning-delta",
          text: "",
          providerState: {
            kind: "effect-ai",
            parts: [{ text: "", options: { openai: { itemId: "rs_9", encryptedContent: "e9" } } }]
          }
        },
        { type: "finish", reason: "stop" }
      ])
    }))

  it.effect("reasoning without provider metadata carries no state", () =>
    Effect.gen(function*() {
      const { model } = yield* bridged([{
        parts: [
          { type: "reasoning-start", id: "r" },
          { type: "reasoning-delta", id: "r", delta: "hmm" },
          { type: "reasoning-end", id: "r" },
          { type: "text-start", id: "t" },
          { type: "text-delta", id: "t", delta: "ok" },
          finishPart("stop")
        ]
      }])
      expect(yield* respond(model, request([user("m1", "hi")]))).toEqual([
        { type: "reasoning-delta", text: "hmm" },
        { type: "text-delta", text: "ok" },
        { type: "finish", reason: "stop" }
      ])
    }))

  it.effect("finish reasons: stop, tool-calls, length, content-filter kept; pause/other/unknown by tool calls", () =>
    Effect.gen(function*() {
      const callPart: Response.StreamPartEncoded = { type: "tool-call", id: "c", name: "clock", params: {} }
      const cases: ReadonlyArray<[Response.FinishReason, boolean, string]> = [
        ["stop", false, "stop"],
        ["stop", true, "tool-calls"],
        ["tool-calls", true, "tool-calls"],
        ["tool-calls", false, "stop"],
        ["length", true, "length"],
        ["content-filter", false, "content-filter"],
        ["pause", false, "stop"],
        ["other", true, "tool-calls"],
        ["unknown", false, "stop"]
      ]
      const { model } = yield* bridged(cases.map(([reason, withCall]) => ({
        parts: [...(withCall ? [callPart] : []), finishPart(reason)]
      })))
      const finishes: Array<string> = []
      for (const _ of cases) {
        const parts = yield* respond(model, request([user("m1", "hi")], { tools: TOOLS }))
        const last = parts[parts.length - 1]!
        finishes.push(last.type === "finish" ? last.reason : last.type)
      }
      expect(finishes).toEqual(cases.map(([, , expected]) => expected))
    }))

  it.effect("usage: a total without input or output counts (OpenAI's 0 when there was no usage) is dropped", () =>
    Effect.gen(function*() {
      const { model } = yield* bridged([
        { parts: [finishPart("stop", { totalTokens: 0 })] },
        { parts: [finishPart("stop", { inputTokens: 7 })] }
      ])
      expect(yield* respond(model, request([user("m1", "hi")]))).toEqual([{ type: "finish", reason: "stop" }])
      expect(yield* respond(model, request([user("m1", "hi")]))).toEqual([
        {
          type: "usage",
          usage: { inputTokens: 7, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 },
          raw: { inputTokens: 7 }
        },
        { type: "finish", reason: "stop" }
      ])
    }))

  it.effect("reading stops at the first finish", () =>
    Effect.gen(function*() {
      const { model } = yield* bridged([{
        parts: [
          { type: "text-delta", id: "t", delta: "a" },
          finishPart("stop"),
          { type: "text-delta", id: "t", delta: "late" },
          finishPart("length")
        ]
      }])
      expect(yield* respond(model, request([user("m1", "hi")]))).toEqual([
        { type: "text-delta", text: "a" },
        { type: "finish", reason: "stop" }
      ])
    }))
})

// ---------------------------------------------------------------------------------------------
// (c) Errors
// ---------------------------------------------------------------------------------------------

const requestDetails = {
  method: "POST" as const,
  url: "https://api.example.test/v1/responses",
  urlParams: [],
  hash: Option.none(),
  headers: { authorization: "Bearer sk-never-printed" }
}

const httpError = (status: number, body: string | undefined, headers: Record<string, string> = {}) =>
  new AiError.HttpResponseError({
    module: "OpenAiClient",
    method: "streamRequest",
    request: requestDetails,
    response: { status, headers },
    reason: "StatusCode",
    ...(body === undefined ? {} : { body })
  })

const failure = (model: ModelService, req: ModelRequest) =>
  Effect.flip(collect(model, req)).pipe(Effect.map(({ error, parts }) => ({ error: errorFields(error), parts, raw: error })))

describe("AiBridge: errors → ModelError", () => {
  it.effect("HTTP statuses: code, status, provider message, retryable for 429/5xx, retryAfterMs from headers", () =>
    Effect.gen(function*() {
      const { model } = yield* bridged([
        {
          fail: httpError(429, JSON.stringify({ error: { message: "Slow down", type: "rate_limit_error" } }, null, 2), {
            "retry-after": "3"
          })
        },
        { fail: httpError(503, "\"upstream unavailable\"", { "retry-after-ms": "250" }) },
        {
          fail: httpError(400, JSON.stringify({ error: { message: "Bad input", type: "invalid_request_error", param: "input" } }))
        },
        { fail: httpError(401, undefined) }
      ], { provider: "openai" })
      const req = request([user("m1", "hi")])
      expect((yield* failure(model, req)).error).toEqual({
        _tag: "ModelError",
        code: "HTTP_429",
        message: "rate_limit_error: Slow down (HTTP 429 from https://api.example.test/v1/responses)",
        status: 429,
        retryable: true,
        retryAfterMs: 3000
      })
      expect((yield* failure(model, req)).error).toEqual({
        _tag: "ModelError",
        code: "HTTP_503",
        message: "upstream unavailable (HTTP 503 from https://api.example.test/v1/responses)",
        status: 503,
        retryable: true,
        retryAfterMs: 250
      })
      expect((yield* failure(model, req)).error).toEqual({
        _tag: "ModelError",
        code: "HTTP_400",
        message: "invalid_request_error: Bad input (param input) (HTTP 400 from https://api.example.test/v1/responses)",
        status: 400,
        retryable: false,
        retryAfterMs: undefined
      })
      const unauthorized = yield* failure(model, req)
      expect(unauthorized.error).toEqual({
        _tag: "ModelError",
        code: "HTTP_401",
        message: "HTTP 401 from https://api.example.test/v1/responses",
        status: 401,
        retryable: false,
        retryAfterMs: undefined
      })
      // The AiError (whose request headers hold the key) is not kept.
      expect(unauthorized.raw.cause).toBeUndefined()
      expect(JSON.stringify(unauthorized.raw)).not.toContain("sk-never-printed")
    }))

  it.effect("context overflow (§17): a 400 or 413 body or an error part saying so → CONTEXT_OVERFLOW; a 503 keeps HTTP_503", () =>
    Effect.gen(function*() {
      // No recording of these errors exists: the bodies are the providers' documented shapes.
      const openai = {
        message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        type: "invalid_request_error",
        param: "messages",
        code: "context_length_exceeded"
      }
      const anthropic = {
        type: "error",
        error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" }
      }
      const window = "Your input exceeds the context window of this model. Please adjust your input and try again."
      const { model } = yield* bridged([
        { fail: httpError(400, JSON.stringify({ error: openai })) },
        { fail: httpError(413, JSON.stringify(anthropic)) },
        {
          parts: [{ type: "error", error: { type: "error", code: "context_length_exceeded", message: window, param: "input" } }]
        },
        { fail: httpError(503, JSON.stringify({ error: openai })) }
      ], { provider: "openai" })
      const req = request([user("m1", "hi")])
      const overflow = (message: string, status: number | undefined) => ({
        _tag: "ModelError",
        code: "CONTEXT_OVERFLOW",
        message: status === undefined ? message : `${message} (HTTP ${status} from https://api.example.test/v1/responses)`,
        status,
        retryable: false,
        retryAfterMs: undefined
      })
      expect((yield* failure(model, req)).error).toEqual(
        overflow(`invalid_request_error: ${openai.message} (param messages)`, 400)
      )
      expect((yield* failure(model, req)).error).toEqual(
        overflow("invalid_request_error: prompt is too long: 210000 tokens > 200000 maximum", 413)
      )
      expect((yield* failure(model, req)).error).toEqual(
        overflow(`context_length_exceeded: ${window} (param input)`, undefined)
      )
      expect((yield* failure(model, req)).error).toMatchObject({ code: "HTTP_503", status: 503, retryable: true })
    }))

  it.effect("transport, encoding and URL failures; malformed input/output; unknown errors", () =>
    Effect.gen(function*() {
      const transport = new Error("connect ECONNREFUSED 127.0.0.1:9")
      const requestError = (reason: "Transport" | "Encode" | "InvalidUrl", cause?: unknown) =>
        new AiError.HttpRequestError({
          module: "OpenAiClient",
          method: "streamRequest",
          reason,
          request: requestDetails,
          description: "request failed",
          // What @effect/platform's RequestError looks like: the request (headers!) and the transport error.
          cause: { _tag: "RequestError", request: { headers: requestDetails.headers }, cause }
        })
      const { model } = yield* bridged([
        { fail: requestError("Transport", transport) },
        { fail: requestError("InvalidUrl") },
        { fail: requestError("Encode") },
        {
          fail: new AiError.MalformedInput({
            module: "OpenAiLanguageModel",
            method: "prepareMessages",
            description: "unsupported media type"
          })
        },
        {
          fail: new AiError.MalformedOutput({
            module: "OpenAiLanguageModel",
            method: "makeStreamResponse",
            description: "bad arguments"
          })
        },
        { fail: new AiError.UnknownError({ module: "X", method: "y" }) },
        {
          fail: httpError(200, undefined).pipe((e) =>
            new AiError.HttpResponseError({ ...e, reason: "Decode", description: "socket hang up" })
          )
        }
      ], { provider: "openai" })
      const req = request([user("m1", "hi")])
      const network = yield* failure(model, req)
      expect(network.error).toEqual({
        _tag: "ModelError",
        code: "NETWORK",
        message: "openai: cannot reach POST https://api.example.test/v1/responses: connect ECONNREFUSED 127.0.0.1:9",
        status: undefined,
        retryable: true,
        retryAfterMs: undefined
      })
      expect(network.raw.cause).toBe(transport)
      expect(JSON.stringify(network.raw)).not.toContain("sk-never-printed")
      expect((yield* failure(model, req)).error).toMatchObject({
        code: "INVALID_URL",
        message: "openai: invalid URL POST https://api.example.test/v1/responses: request failed",
        retryable: false
      })
      expect((yield* failure(model, req)).error).toMatchObject({
        code: "INVALID_REQUEST",
        message: "openai: cannot encode the request POST https://api.example.test/v1/responses: request failed",
        retryable: false
      })
      expect((yield* failure(model, req)).error).toMatchObject({
        code: "MALFORMED_INPUT",
        message: "openai: OpenAiLanguageModel.prepareMessages: unsupported media type",
        retryable: false
      })
      expect((yield* failure(model, req)).error).toMatchObject({
        code: "MALFORMED_OUTPUT",
        message: "openai: OpenAiLanguageModel.makeStreamResponse: bad arguments",
        retryable: false
      })
      expect((yield* failure(model, req)).error).toMatchObject({
        code: "PROVIDER_ERROR",
        message: "openai: X.y: UnknownError",
        retryable: false
      })
      expect((yield* failure(model, req)).error).toMatchObject({
        code: "NETWORK",
        message: "openai: a broken body from POST https://api.example.test/v1/responses (HTTP 200): socket hang up",
        status: undefined,
        retryable: true
      })
    }))

  it.effect("error parts, a finish with reason error, and a stream without finish", () =>
    Effect.gen(function*() {
      const { model } = yield* bridged([
        {
          chunks: "each",
          parts: [
            { type: "text-delta", id: "t", delta: "partial" },
            { type: "error", error: { type: "error", code: "server_error", message: "The server had an error", param: null } }
          ]
        },
        { parts: [{ type: "error", error: { type: "error", code: "invalid_prompt", message: "No.", param: "input" } }] },
        { parts: [{ type: "text-delta", id: "t", delta: "x" }, finishPart("error")] },
        { parts: [{ type: "text-delta", id: "t", delta: "cut" }] }
      ])
      const req = request([user("m1", "hi")])
      const first = yield* failure(model, req)
      expect(first.parts).toEqual([{ type: "text-delta", text: "partial" }])
      expect(first.error).toEqual({
        _tag: "ModelError",
        code: "PROVIDER_ERROR",
        message: "server_error: The server had an error",
        status: undefined,
        retryable: true,
        retryAfterMs: undefined
      })
      expect((yield* failure(model, req)).error).toMatchObject({
        code: "PROVIDER_ERROR",
        message: "invalid_prompt: No. (param input)",
        retryable: false
      })
      expect((yield* failure(model, req)).error).toMatchObject({
        code: "PROVIDER_ERROR",
        message: "effect-ai: the response finished with reason \"error\"",
        retryable: false
      })
      const cut = yield* failure(model, req)
      expect(cut.parts).toEqual([{ type: "text-delta", text: "cut" }])
      expect(cut.error).toMatchObject({
        code: "STREAM_INCOMPLETE",
        message: "effect-ai: the response stream ended without a finish",
        retryable: true
      })
    }))

  it.effect("limitation: a call to a tool not in the request fails the stream (MALFORMED_OUTPUT), with the rest of its chunk", () =>
    Effect.gen(function*() {
      const parts: Array<Response.StreamPartEncoded> = [
        { type: "text-delta", id: "t", delta: "Let me look." },
        { type: "tool-call", id: "c9", name: "delete_everything", params: {} },
        finishPart("tool-calls")
      ]
      const { model } = yield* bridged([{ parts, chunks: "one" }, { parts, chunks: "each" }])
      const req = request([user("m1", "hi")], { tools: TOOLS })
      const sameChunk = yield* failure(model, req)
      // @effect/ai decodes chunk by chunk: the text that came in the same chunk is lost too.
      expect(sameChunk.parts).toEqual([])
      const unknownTool = {
        _tag: "ModelError",
        code: "MALFORMED_OUTPUT",
        message:
          "effect-ai: @effect/ai rejected the response: it calls tool \"delete_everything\", which is not among the request's tools",
        status: undefined,
        retryable: false,
        retryAfterMs: undefined
      }
      expect(sameChunk.error).toEqual(unknownTool)
      const ownChunk = yield* failure(model, req)
      expect(ownChunk.parts).toEqual([{ type: "text-delta", text: "Let me look." }])
      expect(ownChunk.error).toEqual(unknownTool)
    }))

  it.effect("limitation: arguments that are not a JSON object fail the stream; any object passes (the loop validates it)", () =>
    Effect.gen(function*() {
      const { model } = yield* bridged([
        { parts: [{ type: "tool-call", id: "c1", name: "read", params: "a.txt" }, finishPart("tool-calls")] },
        { parts: [{ type: "tool-call", id: "c1", name: "read", params: { wrong: [1] } }, finishPart("tool-calls")] }
      ])
      const req = request([user("m1", "hi")], { tools: TOOLS })
      expect((yield* failure(model, req)).error).toMatchObject({
        code: "MALFORMED_OUTPUT",
        message: "effect-ai: @effect/ai rejected the response: tool call c1 (read) has arguments that are not a JSON object",
        retryable: false
      })
      expect(yield* respond(model, req)).toEqual([
        { type: "tool-call", id: "c1", name: "read", rawArguments: "{\"wrong\":[1]}" },
        { type: "finish", reason: "tool-calls" }
      ])
    }))
})

// ---------------------------------------------------------------------------------------------
// (d) Under the Agent loop
// ---------------------------------------------------------------------------------------------

describe("AiBridge: under the Agent loop", () => {
  it.scoped("a bridged tool call runs our tool; the next request carries the result after the call, reasoning state round-tripped", () =>
    Effect.gen(function*() {
      const { calls, service } = yield* scriptedLanguageModel([
        {
          chunks: "each",
          parts: [
            { type: "reasoning-start", id: "rs_1:0", metadata: { openai: { itemId: "rs_1" } } },
            { type: "reasoning-delta", id: "rs_1:0", delta: "Echo it.", metadata: { openai: { itemId: "rs_1" } } },
            { type: "reasoning-end", id: "rs_1:0", metadata: { openai: { itemId: "rs_1", encryptedContent: "enc" } } },
            { type: "tool-params-start", id: "call_1", name: "echo" },
            { type: "tool-params-delta", id: "call_1", delta: "{\"value\": \"hi\"}" },
            { type: "tool-call", id: "call_1", name: "echo", params: { value: "hi" }, metadata: { openai: { itemId: "fc_1" } } },
            finishPart("tool-calls", { inputTokens: 20, outputTokens: 6, totalTokens: 26 })
          ]
        },
        { parts: [{ type: "text-delta", id: "t", delta: "It said hi." }, finishPart("stop")] }
      ])
      const model = yield* AiBridge.fromLanguageModel({ provider: "openai", model: "gpt-5-mini" }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, service)
      )
      const echo = Tool_.make({
        name: "echo",
        description: "Echoes a value",
        parameters: Schema.Struct({ value: Schema.String }),
        execute: ({ value }) => Effect.succeed({ content: `echo: ${value}` })
      })
      yield* Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [echo], instructions: "Be brief." })
        yield* agent.followup("say hi")
        yield* agent.awaitIdle
        const events = agent.log.events()
        expect(brief(events)).toEqual([
          "splice next-turn 0 +[say hi]",
          "turn/start 1",
          "splice next-turn 0 -1",
          "step/start 1.1",
          "user say hi",
          "request/header",
          "assistant ~Echo it. echo({\"value\": \"hi\"})",
          "tool/call call_1 echo",
          "tool/result call_1",
          "step/end 1.1",
          "step/start 1.2",
          "assistant It said hi.",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
        const first = events.find((e) => e.type === "assistant/message")!.data as any
        expect(first.message.content[0]).toEqual({
          type: "reasoning",
          text: "Echo it.",
          providerState: {
            kind: "effect-ai",
            parts: [{ text: "Echo it.", options: { openai: { itemId: "rs_1", encryptedContent: "enc" } } }],
            next: { type: "tool-call", id: "call_1", options: { openai: { itemId: "fc_1" } } }
          }
        })
        expect(first.usage).toEqual({
          inputTokens: 20,
          outputTokens: 6,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          reasoningTokens: 0,
          totalTokens: 26
        })
        expect(first.rawUsage).toEqual({ inputTokens: 20, outputTokens: 6, totalTokens: 26 })
        expect(first.finish).toBe("tool-calls")
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
      expect(calls).toHaveLength(2)
      expect(calls[0]!.tools.map((t) => t.name)).toEqual(["echo"])
      expect(plain(calls[1]!.prompt)).toEqual([
        { role: "system", content: "Be brief." },
        { role: "user", content: [text("say hi")] },
        {
          role: "assistant",
          content: [
            { type: "reasoning", text: "Echo it.", options: { openai: { itemId: "rs_1", encryptedContent: "enc" } } },
            toolCallPart("call_1", "echo", { value: "hi" }, { openai: { itemId: "fc_1" } })
          ]
        },
        { role: "tool", content: [toolResultPart("call_1", "echo", "echo: hi")] }
      ])
    }))
})

// ---------------------------------------------------------------------------------------------
// (e) @effect/ai-openai (Responses API) against a loopback server
// ---------------------------------------------------------------------------------------------

const KEY = "sk-test-SECRET-0123456789"

const openAiLayer = (baseUrl: string) =>
  OpenAiLanguageModel.layer({ model: "gpt-5-mini", config: { strict: false } }).pipe(
    Layer.provide(OpenAiClient.layer({ apiKey: Redacted.make(KEY), apiUrl: baseUrl })),
    Layer.provide(NodeHttpClient.layerUndici)
  )

/** The bridged OpenAI model; its HTTP client lives as long as the test's scope. */
const openAiBridge = (baseUrl: string) =>
  Effect.flatMap(Layer.build(openAiLayer(baseUrl)), (context) =>
    AiBridge.fromLanguageModel({
      provider: "openai",
      model: "gpt-5-mini",
      configure: (req) =>
        OpenAiLanguageModel.withConfigOverride({ max_output_tokens: req.settings?.maxTokens as number | undefined })
    }).pipe(Effect.provide(context)))

describe("AiBridge: @effect/ai-openai over loopback HTTP", () => {
  it.scopedLive("builds a Responses request from the history and maps a streamed reasoning + function call", () =>
    Effect.gen(function*() {
      const server = yield* replayServer({
        body: sse([
          { type: "response.created", response: responseObject("in_progress") },
          { type: "response.output_item.added", output_index: 0, item: { type: "reasoning", id: "rs_1", summary: [] } },
          {
            type: "response.reasoning_summary_part.added",
            summary_index: 0,
            output_index: 0,
            item_id: "rs_1",
            part: { type: "summary_text", text: "" }
          },
          {
            type: "response.reasoning_summary_text.delta",
            summary_index: 0,
            output_index: 0,
            item_id: "rs_1",
            delta: "Reading "
          },
          {
            type: "response.reasoning_summary_text.delta",
            summary_index: 0,
            output_index: 0,
            item_id: "rs_1",
            delta: "the file."
          },
          {
            type: "response.output_item.done",
            output_index: 0,
            item: {
              type: "reasoning",
              id: "rs_1",
              summary: [{ type: "summary_text", text: "Reading the file." }],
              encrypted_content: "gAAAA-enc-1"
            }
          },
          {
            type: "response.output_item.added",
            output_index: 1,
            item: {
              type: "function_call",
              id: "fc_1",
              call_id: "call_1",
              name: "read_file",
              arguments: "",
              status: "in_progress"
            }
          },
          { type: "response.function_call_arguments.delta", output_index: 1, item_id: "fc_1", delta: "{\"path\":" },
          { type: "response.function_call_arguments.delta", output_index: 1, item_id: "fc_1", delta: " \"notes.txt\"}" },
          {
            type: "response.output_item.done",
            output_index: 1,
            item: {
              type: "function_call",
              id: "fc_1",
              call_id: "call_1",
              name: "read_file",
              arguments: "{\"path\": \"notes.txt\"}",
              status: "completed"
            }
          },
          {
            type: "response.completed",
            response: responseObject("completed", {
              usage: {
                input_tokens: 42,
                input_tokens_details: { cached_tokens: 8 },
                output_tokens: 17,
                output_tokens_details: { reasoning_tokens: 9 },
                total_tokens: 59
              }
            })
          }
        ]),
        splitEvery: 97
      })
      const model = yield* openAiBridge(server.baseUrl)
      const readFile: ToolDefinition = {
        name: "read_file",
        description: "Reads a file",
        parameters: { type: "object", required: ["path"], properties: { path: { type: "string" } }, additionalProperties: false }
      }
      const history = [
        user("m1", "Read notes.txt"),
        assistant("m2", [
          {
            type: "reasoning",
            text: "Plan.",
            providerState: {
              kind: "effect-ai",
              parts: [{ text: "Plan.", options: { openai: { itemId: "rs_0", encryptedContent: "gAAAA-enc-0" } } }],
              next: { type: "tool-call", id: "call_0", options: { openai: { itemId: "fc_0" } } }
            }
          },
          call("call_0", "read_file", "{\"path\":\"notes.txt\"}")
        ]),
        toolResult("m3", "call_0", "hello"),
        user("m4", "fyi: notes.txt is new", { kind: "plugin", plugin: "watch" }),
        user("m5", "and summarize it")
      ]
      const parts = yield* respond(
        model,
        request(history, { instructions: "You are terse.", tools: [readFile], settings: { maxTokens: 256 } })
      )
      expect(server.requests).toHaveLength(1)
      const sent = server.requests[0]!
      expect(sent.method).toBe("POST")
      expect(sent.url).toBe("/v1/responses")
      expect(sent.headers.authorization).toBe(`Bearer ${KEY}`)
      expect(JSON.parse(sent.body)).toEqual({
        model: "gpt-5-mini",
        max_output_tokens: 256,
        input: [
          { role: "developer", content: "You are terse." },
          { role: "user", content: [{ type: "input_text", text: "Read notes.txt" }] },
          { id: "rs_0", type: "reasoning", summary: [{ type: "summary_text", text: "Plan." }], encrypted_content: "gAAAA-enc-0" },
          { id: "fc_0", type: "function_call", call_id: "call_0", name: "read_file", arguments: "{\"path\":\"notes.txt\"}" },
          // @effect/ai-openai sends JSON.stringify(result): a text result arrives quoted.
          { type: "function_call_output", call_id: "call_0", output: "\"hello\"" },
          { role: "user", content: [{ type: "input_text", text: "fyi: notes.txt is new" }] },
          { role: "user", content: [{ type: "input_text", text: "and summarize it" }] }
        ],
        include: [],
        text: { format: { type: "text" } },
        tools: [{
          type: "function",
          name: "read_file",
          description: "Reads a file",
          parameters: readFile.parameters,
          strict: false
        }],
        tool_choice: "auto",
        stream: true
      })
      expect(parts).toEqual(
        [
          // response.created's id and model.
          { type: "response", id: "resp_1", model: "gpt-5-mini" },
          { type: "reasoning-delta", text: "Reading " },
          { type: "reasoning-delta", text: "the file." },
          {
            type: "reasoning-delta",
            text: "",
            providerState: {
              kind: "effect-ai",
              parts: [{ text: "Reading the file.", options: { openai: { itemId: "rs_1", encryptedContent: "gAAAA-enc-1" } } }],
              next: { type: "tool-call", id: "call_1", options: { openai: { itemId: "fc_1" } } }
            }
          },
          { type: "tool-call", id: "call_1", name: "read_file", rawArguments: "{\"path\": \"notes.txt\"}" },
          {
            type: "usage",
            // input_tokens 42 includes the 8 cached (OpenAI's Responses usage): counted once.
            usage: {
              inputTokens: 42,
              outputTokens: 17,
              cacheReadTokens: 8,
              cacheWriteTokens: 0,
              reasoningTokens: 9,
              totalTokens: 59
            },
            raw: { inputTokens: 42, outputTokens: 17, totalTokens: 59, reasoningTokens: 9, cachedInputTokens: 8 }
          },
          { type: "finish", reason: "tool-calls" }
        ] satisfies Array<ModelPart>
      )
    }))

  it.scopedLive("HTTP 429 and a refused connection map to ModelErrors that never hold the API key", () =>
    Effect.gen(function*() {
      const server = yield* replayServer({
        status: 429,
        contentType: "application/json",
        headers: { "retry-after": "2" },
        body: JSON.stringify({ error: { message: "Rate limit reached", type: "requests", code: "rate_limit_exceeded" } })
      })
      const model = yield* openAiBridge(server.baseUrl)
      const limited = yield* failure(model, request([user("m1", "hi")]))
      expect(limited.error).toEqual({
        _tag: "ModelError",
        code: "HTTP_429",
        message: `requests: Rate limit reached (HTTP 429 from ${server.baseUrl}/responses)`,
        status: 429,
        retryable: true,
        retryAfterMs: 2000
      })
      expect(server.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`)
      const leaks = (e: ModelError) =>
        [JSON.stringify(e), String(e), e.message, Cause.pretty(Cause.fail(e))].some((s) => s.includes("SECRET"))
      expect(leaks(limited.raw)).toBe(false)
      // Why the bridge drops @effect/ai's error: its request headers carry the key in the clear.
      const direct = yield* LanguageModel.streamText({ prompt: "hi" }).pipe(
        Stream.runDrain,
        Effect.flip,
        Effect.provide(openAiLayer(server.baseUrl))
      )
      expect(direct._tag).toBe("HttpResponseError")
      expect(JSON.stringify(direct)).toContain(KEY)

      const port = yield* closedPort
      const offline = yield* openAiBridge(`http://127.0.0.1:${port}/v1`)
      const refused = yield* failure(offline, request([user("m1", "hi")]))
      expect(refused.error).toMatchObject({ code: "NETWORK", retryable: true, status: undefined })
      expect(refused.error.message).toMatch(new RegExp(`^openai: cannot reach POST http://127\\.0\\.0\\.1:${port}/v1/responses`))
      expect(leaks(refused.raw)).toBe(false)
    }))

  it.scopedLive("context overflow over loopback HTTP: a 400 context_length_exceeded and an error event saying so → CONTEXT_OVERFLOW", () =>
    Effect.gen(function*() {
      // Written here in the documented shapes (no recording of this error exists).
      const window = "Your input exceeds the context window of this model. Please adjust your input and try again."
      const server = yield* replayServer([
        {
          status: 400,
          contentType: "application/json",
          body: JSON.stringify({
            error: { message: window, type: "invalid_request_error", param: "input", code: "context_length_exceeded" }
          })
        },
        {
          body: sse([
            { type: "response.created", response: responseObject("in_progress") },
            { type: "error", code: "context_length_exceeded", message: window, param: "input" }
          ])
        }
      ])
      const model = yield* openAiBridge(server.baseUrl)
      const req = request([user("m1", "hi")])
      expect((yield* failure(model, req)).error).toEqual({
        _tag: "ModelError",
        code: "CONTEXT_OVERFLOW",
        message: `invalid_request_error: ${window} (param input) (HTTP 400 from ${server.baseUrl}/responses)`,
        status: 400,
        retryable: false,
        retryAfterMs: undefined
      })
      expect((yield* failure(model, req)).error).toEqual({
        _tag: "ModelError",
        code: "CONTEXT_OVERFLOW",
        message: `context_length_exceeded: ${window} (param input)`,
        status: undefined,
        retryable: false,
        retryAfterMs: undefined
      })
      expect(server.requests).toHaveLength(2)
    }))

  it.scopedLive("limitations of @effect/ai-openai's stream decoder: an error event fails; a refusal and response.failed look like an empty stop", () =>
    Effect.gen(function*() {
      const server = yield* replayServer([
        {
          body: sse([
            { type: "response.created", response: responseObject("in_progress") },
            { type: "error", code: "server_error", message: "The server had an error", param: null }
          ])
        },
        {
          body: sse([
            { type: "response.created", response: responseObject("in_progress") },
            {
              type: "response.output_item.added",
              output_index: 0,
              item: { type: "message", id: "msg_1", role: "assistant", status: "in_progress", content: [] }
            },
            {
              type: "response.refusal.delta",
              output_index: 0,
              content_index: 0,
              item_id: "msg_1",
              delta: "I can't help with that."
            },
            {
              type: "response.output_item.done",
              output_index: 0,
              item: {
                type: "message",
                id: "msg_1",
                role: "assistant",
                status: "completed",
                content: [{ type: "refusal", refusal: "I can't help with that." }]
              }
            },
            { type: "response.completed", response: responseObject("completed") }
          ])
        },
        {
          body: sse([
            { type: "response.created", response: responseObject("in_progress") },
            {
              type: "response.failed",
              response: responseObject("failed", { error: { code: "server_error", message: "The model crashed" } })
            }
          ])
        }
      ])
      const model = yield* openAiBridge(server.baseUrl)
      const req = request([user("m1", "hi")])
      expect((yield* failure(model, req)).error).toEqual({
        _tag: "ModelError",
        code: "PROVIDER_ERROR",
        message: "server_error: The server had an error",
        status: undefined,
        retryable: true,
        retryAfterMs: undefined
      })
      const response = { type: "response", id: "resp_1", model: "gpt-5-mini" }
      // No `response.refusal.delta` handling: the refusal text never reaches the bridge.
      expect(yield* respond(model, req)).toEqual([response, { type: "finish", reason: "stop" }])
      // `response.failed` becomes a plain finish: its error is not visible to the bridge.
      expect(yield* respond(model, req)).toEqual([response, { type: "finish", reason: "stop" }])
      expect(server.requests).toHaveLength(3)
    }))
})

describe("AiBridge: idle timeout", () => {
  it.effect("nothing for idleTimeoutMs (default 120 s, on the Effect clock) → TIMEOUT, retryable, after the parts already pushed", () =>
    Effect.gen(function*() {
      const { model } = yield* bridged([
        {
          parts: [{ type: "text-start", id: "t1" }, { type: "text-delta", id: "t1", delta: "Hel" }],
          chunks: "each",
          stall: true
        },
        { stall: true }
      ])
      const first = yield* Effect.fork(respond(model, request([user("u1", "hi")])))
      yield* TestClock.adjust(119_999)
      expect(first.unsafePoll()).toBe(null)
      yield* TestClock.adjust(1)
      const result = yield* Effect.either(Fiber.join(first))
      expect(result).toMatchObject({
        _tag: "Left",
        left: {
          error: { _tag: "ModelError", code: "TIMEOUT", message: "effect-ai: nothing arrived for 120000 ms", retryable: true },
          parts: [{ type: "text-delta", text: "Hel" }]
        }
      })
      // Before the first part too, with a shorter limit.
      const { model: quick } = yield* bridged([{ stall: true }], { idleTimeoutMs: 5_000 })
      const second = yield* Effect.fork(respond(quick, request([user("u1", "hi")])))
      yield* TestClock.adjust(5_000)
      expect(yield* Effect.either(Fiber.join(second))).toMatchObject({
        _tag: "Left",
        left: { error: { code: "TIMEOUT" }, parts: [] }
      })
    }))
})
