import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Inspectable, Layer, Redacted, Schema, type Scope, TestClock } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Agent from "../src/Agent.js"
import type { Message, MessageId } from "../src/Message.js"
import { Model, type ModelPart, type ModelRequest, type ModelService, type ToolDefinition } from "../src/Model.js"
import * as Anthropic from "../src/providers/Anthropic.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import * as Tool from "../src/Tool.js"
import { layer as agentLayer } from "./utils/agent.js"
import { assistantOf, collect, errorFields, freeze, summarize, toolResult, user } from "./utils/modelParts.js"
import { closedPort, readFixture, type ReplayServer, replayServer, type ReplaySpec } from "./utils/replayServer.js"
import { WIRE_USAGE } from "./utils/wireUsage.js"

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const API_KEY = "sk-ant-test-0123456789"

/** The replay server's origin: the adapter appends `/v1/messages` itself. */
const originOf = (server: ReplayServer): string => server.baseUrl.replace(/\/v1$/, "")

const adapter = (server: ReplayServer, extra?: Partial<Anthropic.Options>) =>
  Anthropic.make({ baseUrl: originOf(server), model: "claude-test", apiKey: Redacted.make(API_KEY), ...extra })

const assistant = assistantOf("anthropic", "claude-test")

const REQUEST: ModelRequest = { sessionId: "s1", turn: 1, step: 1, tools: [], messages: [user("m1", "hi")] }

const provideHttp = <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.provide(self, NodeHttpClient.layerUndici)

/** Replays `spec` once and returns the parts pushed. */
const replayParts = (spec: ReplaySpec) =>
  Effect.gen(function*() {
    const server = yield* replayServer(spec)
    const model = yield* adapter(server)
    return yield* collect(model, REQUEST)
  })

/** Replays `spec` and returns the typed failure and the parts pushed before it. */
const replayFailure = (spec: ReplaySpec, extra?: Partial<Anthropic.Options>) =>
  Effect.gen(function*() {
    const server = yield* replayServer(spec)
    const model = yield* adapter(server, extra)
    const failure = yield* Effect.flip(collect(model, REQUEST))
    // The server's port changes from run to run: messages name it `<server>`.
    const error = errorFields(failure.error)
    return {
      error: { ...error, message: error.message.replaceAll(originOf(server), "<server>") },
      raw: failure.error,
      parts: failure.parts,
      requests: server.requests.length
    }
  })

/** Lets real I/O progress for one macrotask (no timer). */
const tick = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/** Advances the TestClock by `ms` (letting I/O run in between) until `fiber` is done. */
const advanceUntilDone = <A, E>(fiber: Fiber.RuntimeFiber<A, E>, ms: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      if ((yield* Fiber.poll(fiber))._tag === "Some") break
      yield* TestClock.adjust(ms)
      yield* tick
    }
    return yield* Fiber.join(fiber)
  })

/** A loopback server that sends `head` (status 200, event stream) and then nothing, or nothing at all. */
const stallingServer = (head: string | undefined): Effect.Effect<number, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<Http.Server>((resume) => {
      const s = Http.createServer((req, res) => {
        req.resume()
        if (head === undefined) return
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.write(head)
      })
      s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
    }),
    (s) =>
      Effect.async<void>((resume) => {
        s.closeAllConnections()
        s.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map((s) => (s.address() as AddressInfo).port))

// ---------------------------------------------------------------------------------------------
// Expected results, per recorded file (../shared/fixtures/wire/SOURCES.md, checked by hand)
// ---------------------------------------------------------------------------------------------

/** anthropic-stream-tool-use.sse: text block 0 ("I", "'ll check…"), tool_use block 1, tool_use stop. */
const TOOL_USE_PARTS: ReadonlyArray<ModelPart> = [
  { type: "response", ...WIRE_USAGE["anthropic-stream-tool-use.sse"].response },
  { type: "text-delta", text: "I" },
  { type: "text-delta", text: "'ll check the current weather in Paris for you." },
  // input_json_delta "" + "{\"locati" + "on\": \"P" + "ar" + "is\"}", raw, not re-serialized.
  { type: "tool-call", id: "toolu_01NRLabsLyVHZPKxbKvkfSMn", name: "get_weather", rawArguments: "{\"location\": \"Paris\"}" },
  // message_start input_tokens 377 (cache 0 + 0); message_delta cumulative output_tokens 65.
  {
    type: "usage",
    usage: WIRE_USAGE["anthropic-stream-tool-use.sse"].usage,
    raw: WIRE_USAGE["anthropic-stream-tool-use.sse"].raw
  },
  { type: "finish", reason: "tool-calls" }
]

/**
 * anthropic-stream-tool-use-truncated-max-tokens.sse: five text deltas; the `make_file` tool_use
 * (index 1) never gets its content_block_stop and is dropped; stop_reason max_tokens.
 */
const TRUNCATED_PARTS: ReadonlyArray<ModelPart> = [
  { type: "response", ...WIRE_USAGE["anthropic-stream-tool-use-truncated-max-tokens.sse"].response },
  { type: "text-delta", text: "I" },
  { type: "text-delta", text: "'ll create a comprehensive tax guide for" },
  { type: "text-delta", text: " someone with multiple W2s an" },
  { type: "text-delta", text: "d save it in a file called taxes.txt. Let" },
  { type: "text-delta", text: " me do that for you now." },
  {
    type: "usage",
    usage: WIRE_USAGE["anthropic-stream-tool-use-truncated-max-tokens.sse"].usage,
    raw: WIRE_USAGE["anthropic-stream-tool-use-truncated-max-tokens.sse"].raw
  },
  { type: "finish", reason: "length" }
]

const THINKING_TEXT = "This is a straightforward question about pedestrian safety. I should provide clear, helpful " +
  "advice about how to safely cross a street. This is basic safety information that could help prevent accidents."

const SIGNATURE = "EvMCCkYICxgCKkCHP2cSuEdcJK/0rFwqES/ecn+VurRpNTwI4XNyM0vnNfGsc9OmE8YYHauwBZ/uaRpmlEn2I4/kszHlcpptO82JEgy" +
  "RMSbPkJYaegxYF3AaDHZbSm9EzZ6CM+YtliIw3iNVP/ilYrfoneo8S2+ad/5xSC62nKbk6joLtKmqXgXwYFJRpjIUjM2V7EGReOPRKtoBKfNHVmdNf7S" +
  "eMhHalX/ObSeJ1G/NjDyGQAsDjyHGd7uY1r5gAIn3Cpdv5r+gHYJmWT+w2uiKZsBDRoSf4O3Km0l752EhPD4InEhqpCKyqhbUZ3dt5+JVKQHk2iyTBhQ" +
  "MB/XBYgZTstIpRqQRXU5ypcrydgnqj3mD1G9C7YC0ZTCNvFluAx0OL8q+cQwufgfqKquLEf2+XMYzhx9jYkVFEpnf/s1nx6gNBATKfF3Dmrs2r4tWu2QJ" +
  "B+FjlRuDp/8dxUxgJbmyhGxb7XsYeb1vgb7wwzDvP/UhjfQYAQ=="

const ANSWER_TEXT = "Here are the basic steps for safely crossing the street:\n\n" +
  "**At intersections with traffic lights:**\n" +
  "- Wait for the pedestrian \"Walk\" signal\n" +
  "- Look both ways before stepping into the street\n" +
  "- Make eye contact with drivers when possible\n" +
  "- Stay alert for turning vehicles\n\n" +
  "**At intersections without signals:**\n" +
  "- Use crosswalks when available\n" +
  "- Stop at the curb and look left, right, then left again\n" +
  "- Wait for a clear gap in traffic\n" +
  "- Walk briskly but don't run\n" +
  "- Keep looking for traffic as you cross\n\n" +
  "**General safety tips:**\n" +
  "- Put away phones and remove headphones\n" +
  "- Wear bright or reflective clothing in low light\n" +
  "- Never assume drivers see you\n" +
  "- Avoid crossing between parked cars\n" +
  "- Walk facing traffic when there's no sidewalk\n\n" +
  "**In busy urban areas:**\n" +
  "- Follow pedestrian signals strictly\n" +
  "- Be extra cautious of cyclists in bike lanes\n" +
  "- Watch for buses and large vehicles with blind spots\n\n" +
  "The key is to be visible, alert, and predictable in your movements. Always prioritize safety over speed when " +
  "crossing streets."

/**
 * anthropic-stream-thinking.sse: 14 thinking_delta (one empty, skipped), one signature_delta,
 * then the state-carrying reasoning delta at the block's stop; 95 text deltas; end_turn.
 */
const assertThinking = (parts: ReadonlyArray<ModelPart>) => {
  const s = summarize(parts)
  expect(s.shape).toBe("response,reasoning-delta*14,text-delta*95,usage,finish")
  expect(s.reasoning).toBe(THINKING_TEXT)
  expect(s.text).toBe(ANSWER_TEXT)
  expect(parts[1]).toEqual({ type: "reasoning-delta", text: "This" })
  expect(parts[14]).toEqual({ type: "reasoning-delta", text: "", providerState: { kind: "anthropic", signature: SIGNATURE } })
  expect(parts.filter((p) => p.type === "reasoning-delta" && p.providerState !== undefined).length).toBe(1)
  // message_delta repeats input_tokens 43 and the cache fields; output_tokens 282.
  const wire = WIRE_USAGE["anthropic-stream-thinking.sse"]
  expect([s.usage, s.rawUsage, s.response]).toEqual([wire.usage, wire.raw, wire.response])
  expect(s.finish).toBe("stop")
}

const fixtureText = (file: string) => readFixture(file).toString("utf8")

/** Byte offsets that are odd, small primes and inside multi-byte fields. */
const ODD_CUTS = [1, 2, 3, 5, 7, 11, 13, 101, 257, 263, 509, 1021, 1031, 2039, 4093, 8191, 12007, 16381]

// ---------------------------------------------------------------------------------------------
// Response side
// ---------------------------------------------------------------------------------------------

describe("Anthropic responses (recorded wire files)", () => {
  it.scoped("tool use: text deltas, tool call with the raw partial_json, usage, finish tool-calls", () =>
    Effect.gen(function*() {
      expect(yield* replayParts({ file: "anthropic-stream-tool-use.sse" })).toEqual(TOOL_USE_PARTS)
    }).pipe(provideHttp))

  it.scoped("tool_use cut by max_tokens: the stream does not fail, the incomplete call is dropped, finish length", () =>
    Effect.gen(function*() {
      expect(yield* replayParts({ file: "anthropic-stream-tool-use-truncated-max-tokens.sse" })).toEqual(TRUNCATED_PARTS)
    }).pipe(provideHttp))

  it.scoped("thinking: reasoning deltas, then the signature as providerState, then text", () =>
    Effect.gen(function*() {
      assertThinking(yield* replayParts({ file: "anthropic-stream-thinking.sse" }))
    }).pipe(provideHttp))

  it.scoped("every recording decodes the same split every 7 bytes, every byte, and at odd offsets", () =>
    Effect.gen(function*() {
      for (const spec of [{ splitEvery: 7 }, { splitEvery: 1 }, { splitAt: ODD_CUTS }]) {
        expect(yield* replayParts({ file: "anthropic-stream-tool-use.sse", ...spec })).toEqual(TOOL_USE_PARTS)
        expect(yield* replayParts({ file: "anthropic-stream-tool-use-truncated-max-tokens.sse", ...spec }))
          .toEqual(TRUNCATED_PARTS)
        // 16.6 KB: byte by byte would be 16,000 writes; every 7 bytes and the odd cuts suffice.
        if (spec.splitEvery !== 1) assertThinking(yield* replayParts({ file: "anthropic-stream-thinking.sse", ...spec }))
      }
    }).pipe(provideHttp))

  it.scoped("CRLF line endings with \\r and \\n in different writes decode the same", () =>
    Effect.gen(function*() {
      const crlf = fixtureText("anthropic-stream-tool-use.sse").replaceAll("\n", "\r\n")
      const cuts = [...crlf.matchAll(/\r/g)].map((m) => m.index + 1)
      expect(yield* replayParts({ body: crlf, splitAt: cuts })).toEqual(TOOL_USE_PARTS)
    }).pipe(provideHttp))

  it.scoped("cache tokens count once, inside inputTokens: 377 + 20 written + 300 read = 697 (edited recording)", () =>
    Effect.gen(function*() {
      const body = fixtureText("anthropic-stream-tool-use.sse")
        .replace("\"cache_creation_input_tokens\":0", "\"cache_creation_input_tokens\":20")
        .replace("\"cache_read_input_tokens\":0", "\"cache_read_input_tokens\":300")
      const s = summarize(yield* replayParts({ body }))
      expect(s.usage).toEqual({
        inputTokens: 697,
        outputTokens: 65,
        cacheReadTokens: 300,
        cacheWriteTokens: 20,
        reasoningTokens: 0
      })
      expect(s.rawUsage).toEqual({
        input_tokens: 377,
        cache_creation_input_tokens: 20,
        cache_read_input_tokens: 300,
        output_tokens: 65,
        service_tier: "standard"
      })
    }).pipe(provideHttp))

  it.scoped("message_delta usage is cumulative: its counts replace message_start's, a null keeps the earlier value (synthetic)", () =>
    Effect.gen(function*() {
      const ev = (type: string, data: unknown) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`
      const body = ev("message_start", {
        type: "message_start",
        message: {
          id: "msg_1",
          model: "claude-x",
          usage: { input_tokens: 5, cache_creation_input_tokens: 100, cache_read_input_tokens: 0, output_tokens: 1 }
        }
      }) +
        ev("message_delta", {
          type: "message_delta",
          delta: { stop_reason: "end_turn" },
          usage: { input_tokens: null, cache_read_input_tokens: 40, output_tokens: 7 }
        }) +
        ev("message_delta", { type: "message_delta", delta: {}, usage: { output_tokens: 12 } }) +
        ev("message_stop", { type: "message_stop" })
      expect(yield* replayParts({ body })).toEqual([
        { type: "response", id: "msg_1", model: "claude-x" },
        {
          type: "usage",
          usage: { inputTokens: 145, outputTokens: 12, cacheReadTokens: 40, cacheWriteTokens: 100, reasoningTokens: 0 },
          raw: { input_tokens: 5, cache_creation_input_tokens: 100, cache_read_input_tokens: 40, output_tokens: 12 }
        },
        { type: "finish", reason: "stop" }
      ])
    }).pipe(provideHttp))

  it.scoped("a whole `message` JSON body (no streaming) gives the parts the stream gives (synthetic)", () =>
    Effect.gen(function*() {
      const message = {
        id: "msg_019Q1hrJbZG26Fb9BQhrkHEr",
        type: "message",
        role: "assistant",
        model: "claude-sonnet-4-20250514",
        content: [
          { type: "thinking", thinking: "Weather lookup.", signature: "sig-w" },
          { type: "text", text: "I'll check the current weather in Paris for you." },
          { type: "tool_use", id: "toolu_01NRLabsLyVHZPKxbKvkfSMn", name: "get_weather", input: { location: "Paris" } }
        ],
        stop_reason: "tool_use",
        stop_sequence: null,
        usage: { input_tokens: 377, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 65 }
      }
      const parts = yield* replayParts({ body: JSON.stringify(message), contentType: "application/json" })
      expect(parts).toEqual([
        { type: "response", id: "msg_019Q1hrJbZG26Fb9BQhrkHEr", model: "claude-sonnet-4-20250514" },
        { type: "reasoning-delta", text: "Weather lookup." },
        { type: "reasoning-delta", text: "", providerState: { kind: "anthropic", signature: "sig-w" } },
        { type: "text-delta", text: "I'll check the current weather in Paris for you." },
        {
          type: "tool-call",
          id: "toolu_01NRLabsLyVHZPKxbKvkfSMn",
          name: "get_weather",
          rawArguments: "{\"location\":\"Paris\"}"
        },
        {
          type: "usage",
          usage: { inputTokens: 377, outputTokens: 65, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 },
          raw: message.usage
        },
        { type: "finish", reason: "tool-calls" }
      ])
    }).pipe(provideHttp))

  it.scoped("adjacent thinking and redacted_thinking blocks: the state becomes the wire blocks (synthetic)", () =>
    Effect.gen(function*() {
      const ev = (type: string, data: unknown) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`
      const body = [
        ev("message_start", { type: "message_start", message: { usage: { input_tokens: 10, output_tokens: 1 } } }),
        ev("content_block_start", {
          type: "content_block_start",
          index: 0,
          content_block: { type: "thinking", thinking: "", signature: "" }
        }),
        ev("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "A" } }),
        ev("content_block_delta", {
          type: "content_block_delta",
          index: 0,
          delta: { type: "signature_delta", signature: "sig-a" }
        }),
        ev("content_block_stop", { type: "content_block_stop", index: 0 }),
        ev("content_block_start", {
          type: "content_block_start",
          index: 1,
          content_block: { type: "redacted_thinking", data: "ENC" }
        }),
        ev("content_block_stop", { type: "content_block_stop", index: 1 }),
        ev("content_block_start", {
          type: "content_block_start",
          index: 2,
          content_block: { type: "thinking", thinking: "", signature: "" }
        }),
        ev("content_block_delta", { type: "content_block_delta", index: 2, delta: { type: "thinking_delta", thinking: "B" } }),
        ev("content_block_delta", {
          type: "content_block_delta",
          index: 2,
          delta: { type: "signature_delta", signature: "sig-b" }
        }),
        ev("content_block_stop", { type: "content_block_stop", index: 2 }),
        ev("content_block_start", { type: "content_block_start", index: 3, content_block: { type: "text", text: "" } }),
        ev("content_block_delta", { type: "content_block_delta", index: 3, delta: { type: "text_delta", text: "ok" } }),
        ev("content_block_stop", { type: "content_block_stop", index: 3 }),
        ev("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 9 } }),
        ev("message_stop", { type: "message_stop" })
      ].join("")
      const A = { type: "thinking", thinking: "A", signature: "sig-a" }
      const R = { type: "redacted_thinking", data: "ENC" }
      const B = { type: "thinking", thinking: "B", signature: "sig-b" }
      expect(yield* replayParts({ body })).toEqual([
        { type: "reasoning-delta", text: "A" },
        { type: "reasoning-delta", text: "", providerState: { kind: "anthropic", signature: "sig-a" } },
        // The redacted block joins the same reasoning block: the state switches to the blocks form
        // before it, so a stream cut here still matches what was signed.
        { type: "reasoning-delta", text: "", providerState: { kind: "anthropic", blocks: [A] } },
        { type: "reasoning-delta", text: "", providerState: { kind: "anthropic", blocks: [A, R] } },
        { type: "reasoning-delta", text: "B" },
        { type: "reasoning-delta", text: "", providerState: { kind: "anthropic", blocks: [A, R, B] } },
        { type: "text-delta", text: "ok" },
        {
          type: "usage",
          usage: { inputTokens: 10, outputTokens: 9, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 },
          raw: { input_tokens: 10, output_tokens: 9 }
        },
        { type: "finish", reason: "stop" }
      ])
    }).pipe(provideHttp))

  it.scoped("a tool_use left open in a response that was not truncated is pushed at message_stop (edited recording)", () =>
    Effect.gen(function*() {
      const events = fixtureText("anthropic-stream-tool-use.sse").split("\n\n")
      expect(events[12]).toBe("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}")
      const body = [...events.slice(0, 12), ...events.slice(13)].join("\n\n")
      expect(yield* replayParts({ body })).toEqual(TOOL_USE_PARTS)
    }).pipe(provideHttp))

  it.scoped("stop_reason refusal → content-filter; stop_sequence → stop; end_turn with tool calls → tool-calls (edited recordings)", () =>
    Effect.gen(function*() {
      const body = fixtureText("anthropic-stream-thinking.sse")
      const refusal = yield* replayParts({ body: body.replace("\"stop_reason\":\"end_turn\"", "\"stop_reason\":\"refusal\"") })
      expect(summarize(refusal).finish).toBe("content-filter")
      const stop = yield* replayParts({ body: body.replace("\"stop_reason\":\"end_turn\"", "\"stop_reason\":\"stop_sequence\"") })
      expect(summarize(stop).finish).toBe("stop")
      // A response with tool calls finishes tool-calls whatever stop_reason says (as the other adapters).
      const tools = fixtureText("anthropic-stream-tool-use.sse").replace(
        "\"stop_reason\":\"tool_use\"",
        "\"stop_reason\":\"end_turn\""
      )
      expect(summarize(yield* replayParts({ body: tools })).finish).toBe("tool-calls")
    }).pipe(provideHttp))
})

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/** The first `n` events of a recording, each with its blank line. */
const eventsPrefix = (file: string, n: number) => fixtureText(file).split("\n\n").slice(0, n).join("\n\n") + "\n\n"

describe("Anthropic errors", () => {
  it.scoped("400 invalid_request_error (tool_use without tool_result) → code from error.type, status 400, not retryable", () =>
    Effect.gen(function*() {
      const { error, parts } = yield* replayFailure({
        file: "anthropic-error-400-tool-use-without-tool-result.json",
        status: 400,
        headers: { "request-id": "req_header_ignored_when_the_body_has_one" }
      })
      expect(error).toEqual({
        _tag: "ModelError",
        code: "invalid_request_error",
        message: "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: " +
          "toolu_issue8112_custom. Each `tool_use` block must have a corresponding `tool_result` block in the next " +
          "message. (request_id req_011CdKG2NtAD16XZmtMKXVQr) (HTTP 400 from <server>/v1/messages)",
        status: 400,
        retryable: false,
        retryAfterMs: undefined
      })
      expect(error.message).not.toContain(API_KEY)
      expect(parts).toEqual([])
    }).pipe(provideHttp))

  // Synthetic bodies in Anthropic's envelope: no byte-exact recorded 429/529 exists (SOURCES.md).
  const envelope = (type: string, message: string) => JSON.stringify({ type: "error", error: { type, message } })

  it.scoped("429 rate_limit_error with retry-after: 7 → retryable, retryAfterMs 7000 (synthetic body)", () =>
    Effect.gen(function*() {
      const { error } = yield* replayFailure({
        body: envelope("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
        status: 429,
        contentType: "application/json",
        headers: { "retry-after": "7", "request-id": "req_429" }
      })
      expect(error).toEqual({
        _tag: "ModelError",
        code: "rate_limit_error",
        message: "Number of request tokens has exceeded your per-minute rate limit (request_id req_429) " +
          "(HTTP 429 from <server>/v1/messages)",
        status: 429,
        retryable: true,
        retryAfterMs: 7000
      })
    }).pipe(provideHttp))

  it.scoped("529 overloaded_error and 500 api_error → retryable; x-should-retry: false wins; a non-envelope body → HTTP_<status>", () =>
    Effect.gen(function*() {
      const overloaded = yield* replayFailure({
        body: envelope("overloaded_error", "Overloaded"),
        status: 529,
        contentType: "application/json"
      })
      expect(overloaded.error).toEqual({
        _tag: "ModelError",
        code: "overloaded_error",
        message: "Overloaded (HTTP 529 from <server>/v1/messages)",
        status: 529,
        retryable: true,
        retryAfterMs: undefined
      })
      const api = yield* replayFailure({
        body: envelope("api_error", "Internal server error"),
        status: 500,
        contentType: "application/json",
        headers: { "x-should-retry": "false" }
      })
      expect([api.error.code, api.error.status, api.error.retryable]).toEqual(["api_error", 500, false])
      const plain = yield* replayFailure({ body: "upstream connect error\n", status: 502, contentType: "text/plain" })
      expect(plain.error).toEqual({
        _tag: "ModelError",
        code: "HTTP_502",
        message: "upstream connect error (HTTP 502 from <server>/v1/messages)",
        status: 502,
        retryable: true,
        retryAfterMs: undefined
      })
    }).pipe(provideHttp))

  it.scoped("an error type Anthropic does not document → HTTP_<status> (PROVIDER_ERROR in a stream), the type heading the message", () =>
    Effect.gen(function*() {
      const http = yield* replayFailure({
        body: envelope("quota_exhausted_error", "Out of credits"),
        status: 402,
        contentType: "application/json"
      })
      expect(http.error).toEqual({
        _tag: "ModelError",
        code: "HTTP_402",
        message: "quota_exhausted_error: Out of credits (HTTP 402 from <server>/v1/messages)",
        status: 402,
        retryable: false,
        retryAfterMs: undefined
      })
      const event = `event: error\ndata: ${envelope("brownout_error", "Try later")}\n\n`
      const streamed = yield* replayFailure({ body: eventsPrefix("anthropic-stream-tool-use.sse", 4) + event, splitEvery: 7 })
      expect(streamed.error).toEqual({
        _tag: "ModelError",
        code: "PROVIDER_ERROR",
        message: "brownout_error: Try later",
        status: undefined,
        retryable: false,
        retryAfterMs: undefined
      })
    }).pipe(provideHttp))

  it.scoped("`error` event mid-stream (docs example spliced after the tool-use recording's first events) → overloaded_error, retryable", () =>
    Effect.gen(function*() {
      const body = eventsPrefix("anthropic-stream-tool-use.sse", 4) + fixtureText("anthropic-stream-error-overloaded.sse")
      const { error, parts } = yield* replayFailure({ body, splitEvery: 7 })
      expect(error).toEqual({
        _tag: "ModelError",
        code: "overloaded_error",
        message: "Overloaded",
        status: undefined,
        retryable: true,
        retryAfterMs: undefined
      })
      expect(parts).toEqual(TOOL_USE_PARTS.slice(0, 2))
    }).pipe(provideHttp))

  // Context overflow (§17): no recording of this error exists (SOURCES.md); the bodies are
  // Anthropic's envelope with the messages its documentation and SDK issues show.
  const TOO_LONG = "prompt is too long: 210000 tokens > 200000 maximum"
  const overflow = (message: string, status: number | undefined) => ({
    _tag: "ModelError",
    code: "CONTEXT_OVERFLOW",
    message: status === undefined ? message : `${message} (HTTP ${status} from <server>/v1/messages)`,
    status,
    retryable: false,
    retryAfterMs: undefined
  })
  const withRequestId = (type: string, message: string) =>
    JSON.stringify({ type: "error", error: { type, message }, request_id: "req_overflow" })

  it.scoped("400 invalid_request_error \"prompt is too long\" → CONTEXT_OVERFLOW, status 400, not retryable, message kept", () =>
    Effect.gen(function*() {
      const { error, parts, requests } = yield* replayFailure({
        body: withRequestId("invalid_request_error", TOO_LONG),
        status: 400,
        contentType: "application/json"
      })
      expect(error).toEqual(overflow(`${TOO_LONG} (request_id req_overflow)`, 400))
      expect([parts, requests]).toEqual([[], 1])
    }).pipe(provideHttp))

  it.scoped("413 with the same body, input + max_tokens over the limit, x-should-retry: true → CONTEXT_OVERFLOW, not retryable", () =>
    Effect.gen(function*() {
      const tooLarge = yield* replayFailure({
        body: envelope("invalid_request_error", TOO_LONG),
        status: 413,
        contentType: "application/json",
        headers: { "request-id": "req_413" }
      })
      expect(tooLarge.error).toEqual(overflow(`${TOO_LONG} (request_id req_413)`, 413))
      const limit = "input length and `max_tokens` exceed context limit: 197626 + 8192 > 200000, decrease input " +
        "length or `max_tokens` and try again"
      const sum = yield* replayFailure({
        body: envelope("invalid_request_error", limit),
        status: 400,
        contentType: "application/json",
        headers: { "x-should-retry": "true" }
      })
      expect(sum.error).toEqual(overflow(limit, 400))
    }).pipe(provideHttp))

  it.scoped("other invalid_request_errors, request_too_large, and the message under a 5xx keep their codes", () =>
    Effect.gen(function*() {
      const other = yield* replayFailure({
        body: envelope(
          "invalid_request_error",
          "max_tokens: 300000 > 64000, which is the maximum allowed number of output tokens"
        ),
        status: 400,
        contentType: "application/json"
      })
      expect([other.error.code, other.error.status, other.error.retryable]).toEqual(["invalid_request_error", 400, false])
      const bytes = yield* replayFailure({
        body: envelope("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        status: 413,
        contentType: "application/json"
      })
      expect([bytes.error.code, bytes.error.status, bytes.error.retryable]).toEqual(["request_too_large", 413, false])
      const api = yield* replayFailure({
        body: envelope("api_error", TOO_LONG),
        status: 500,
        contentType: "application/json"
      })
      expect([api.error.code, api.error.status, api.error.retryable]).toEqual(["api_error", 500, true])
    }).pipe(provideHttp))

  it.scoped("an `error` event saying the prompt is too long (mid-stream, and as a whole error body) → CONTEXT_OVERFLOW, no status", () =>
    Effect.gen(function*() {
      const event = `event: error\ndata: ${envelope("invalid_request_error", TOO_LONG)}\n\n`
      const streamed = yield* replayFailure({ body: eventsPrefix("anthropic-stream-tool-use.sse", 4) + event, splitEvery: 7 })
      expect(streamed.error).toEqual(overflow(TOO_LONG, undefined))
      expect(streamed.parts).toEqual(TOOL_USE_PARTS.slice(0, 2))
      const whole = yield* replayFailure({
        body: envelope("invalid_request_error", TOO_LONG),
        status: 200,
        contentType: "application/json"
      })
      expect(whole.error).toEqual(overflow(TOO_LONG, undefined))
    }).pipe(provideHttp))

  it.scoped("a stream that ends without message_stop → STREAM_INCOMPLETE, retryable, after the parts already pushed", () =>
    Effect.gen(function*() {
      // Up to and including message_delta (stop_reason tool_use): no message_stop.
      const cut = yield* replayFailure({ body: eventsPrefix("anthropic-stream-tool-use.sse", 14) })
      expect(cut.error).toEqual({
        _tag: "ModelError",
        code: "STREAM_INCOMPLETE",
        message: "the response stream ended without message_stop (stop_reason tool_use)",
        status: undefined,
        retryable: true,
        retryAfterMs: undefined
      })
      expect(cut.parts).toEqual(TOOL_USE_PARTS.slice(0, 4))
      const early = yield* replayFailure({ body: eventsPrefix("anthropic-stream-tool-use.sse", 4) })
      expect(early.error.message).toBe("the response stream ended without message_stop")
      expect(early.parts).toEqual(TOOL_USE_PARTS.slice(0, 2))
    }).pipe(provideHttp))

  it.scoped("malformed JSON in an event → BAD_RESPONSE", () =>
    Effect.gen(function*() {
      const body = eventsPrefix("anthropic-stream-tool-use.sse", 2) + "event: content_block_delta\ndata: {\"type\":\n\n"
      const { error } = yield* replayFailure({ body })
      expect([error.code, error.retryable, error.message]).toEqual([
        "BAD_RESPONSE",
        false,
        "malformed JSON in a stream event: {\"type\":"
      ])
    }).pipe(provideHttp))

  it.scoped("unreachable server → NETWORK, retryable; the API key is in no error, message or cause", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const model = yield* Anthropic.make({
        baseUrl: `http://127.0.0.1:${port}/`,
        model: "claude-test",
        apiKey: Redacted.make(API_KEY)
      })
      const { error } = yield* Effect.flip(collect(model, REQUEST))
      expect([error.code, error.retryable, error.status]).toEqual(["NETWORK", true, undefined])
      expect(error.message).toContain(`http://127.0.0.1:${port}/v1/messages`)
      expect(error.message).not.toContain(API_KEY)
      expect(Inspectable.format(error)).not.toContain(API_KEY)
      expect(JSON.stringify(error)).not.toContain(API_KEY)
      expect(String(error.cause)).not.toContain(API_KEY)
    }).pipe(provideHttp))

  it.scoped("no response headers within idleTimeoutMs → TIMEOUT, retryable (TestClock)", () =>
    Effect.gen(function*() {
      const port = yield* stallingServer(undefined)
      const model = yield* Anthropic.make({ baseUrl: `http://127.0.0.1:${port}`, model: "m", idleTimeoutMs: 30_000 })
      const fiber = yield* Effect.fork(Effect.flip(collect(model, REQUEST)))
      const { error } = yield* advanceUntilDone(fiber, 30_000)
      expect(errorFields(error)).toEqual({
        _tag: "ModelError",
        code: "TIMEOUT",
        message:
          `anthropic: no answer from http://127.0.0.1:${port}/v1/messages within 30000 ms (waiting for the response headers)`,
        status: undefined,
        retryable: true,
        retryAfterMs: undefined
      })
    }).pipe(provideHttp))

  it.scoped("a stream that stalls mid-body → TIMEOUT after the parts already pushed (TestClock)", () =>
    Effect.gen(function*() {
      const port = yield* stallingServer(eventsPrefix("anthropic-stream-tool-use.sse", 4))
      const model = yield* Anthropic.make({ baseUrl: `http://127.0.0.1:${port}`, model: "m", idleTimeoutMs: 30_000 })
      const parts: Array<ModelPart> = []
      const fiber = yield* Effect.fork(
        Effect.flip(model.respond(REQUEST, { part: (p) => Effect.sync(() => void parts.push(p)) }))
      )
      for (let i = 0; i < 1000 && parts.length < 2; i++) yield* tick
      expect(parts).toEqual(TOOL_USE_PARTS.slice(0, 2))
      const error = yield* advanceUntilDone(fiber, 30_000)
      expect([error.code, error.retryable]).toEqual(["TIMEOUT", true])
      expect(error.message).toContain("waiting for the next piece of the event stream")
    }).pipe(provideHttp))
})

// ---------------------------------------------------------------------------------------------
// Request side
// ---------------------------------------------------------------------------------------------

const TOOLS: ReadonlyArray<ToolDefinition> = [
  {
    name: "get_weather",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
  }
]

const U = user("u1", "What's the weather in Paris and in Rome?")
const A = assistant("a1", [
  { type: "reasoning", text: "Two lookups.", providerState: { kind: "anthropic", signature: "sig-1" } },
  { type: "text", text: "Checking both." },
  { type: "tool-call", id: "c1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" },
  { type: "tool-call", id: "c2", name: "get_weather", arguments: "{\"city\": \"Rome\"}" }
])
const R1 = toolResult("r1", "c1", "18\u00b0C, sunny")
const R2 = toolResult("r2", "c2", "error: station offline", true)
const X = user("x1", "weather data is 10 minutes old", { kind: "tool", callId: "c1" })
const Y = user("y1", "branch: main", { kind: "plugin", plugin: "git" })
const S = user("s1", "also check Oslo")

const WIRE_U = { role: "user", content: [{ type: "text", text: "What's the weather in Paris and in Rome?" }] }
const WIRE_A = {
  role: "assistant",
  content: [
    { type: "thinking", thinking: "Two lookups.", signature: "sig-1" },
    { type: "text", text: "Checking both." },
    { type: "tool_use", id: "c1", name: "get_weather", input: { city: "Paris" } },
    { type: "tool_use", id: "c2", name: "get_weather", input: { city: "Rome" } }
  ]
}
const WIRE_R1 = { type: "tool_result", tool_use_id: "c1", content: "18\u00b0C, sunny" }
const WIRE_R2 = { type: "tool_result", tool_use_id: "c2", content: "error: station offline", is_error: true }
const WIRE_X = { type: "text", text: "weather data is 10 minutes old" }
const WIRE_Y = { type: "text", text: "branch: main" }
const WIRE_S = { type: "text", text: "also check Oslo" }

const MISSING = "No result was recorded for this tool call: its outcome is unknown. " +
  "Do not assume it ran or did not run; check before calling it again."

/** Sends each history (one request per list) and returns the captured requests and parsed bodies. */
const sentBodies = (
  lists: ReadonlyArray<ReadonlyArray<Message>>,
  request?: Partial<ModelRequest>,
  extra?: Partial<Anthropic.Options>
) =>
  Effect.gen(function*() {
    const server = yield* replayServer({ file: "anthropic-stream-tool-use.sse" })
    const model = yield* adapter(server, extra)
    for (const messages of lists) {
      yield* collect(model, { ...REQUEST, instructions: "You are terse.", ...request, messages })
    }
    return { requests: server.requests, bodies: server.requests.map((r) => JSON.parse(r.body)) }
  })

describe("Anthropic requests", () => {
  it.scoped("calls c1, c2; results c1, c2; contexts X, Y; steer S → one user turn [result c1, result c2, X, Y, S]", () =>
    Effect.gen(function*() {
      const { bodies, requests } = yield* sentBodies([[U, A, R1, R2, X, Y, S]], { tools: TOOLS })
      expect(bodies[0]).toEqual({
        model: "claude-test",
        max_tokens: 8192,
        system: "You are terse.",
        messages: [WIRE_U, WIRE_A, { role: "user", content: [WIRE_R1, WIRE_R2, WIRE_X, WIRE_Y, WIRE_S] }],
        tools: [{
          name: "get_weather",
          description: "Weather for a city",
          input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
        }],
        stream: true
      })
      const req = requests[0]!
      expect([req.method, req.url]).toEqual(["POST", "/v1/messages"])
      expect(req.headers["x-api-key"]).toBe(API_KEY)
      expect(req.headers["anthropic-version"]).toBe("2023-06-01")
      expect(req.headers["content-type"]).toBe("application/json")
      expect(req.headers["authorization"]).toBeUndefined()
      expect(req.body).not.toContain(API_KEY)
    }).pipe(provideHttp))

  it.scoped("instructions only in top-level system: never a system role; omitted when empty", () =>
    Effect.gen(function*() {
      const { bodies, requests } = yield* sentBodies([[U, A, R1, R2, X, Y, S], [U]], { instructions: undefined })
      for (const r of requests) expect(r.body).not.toContain("\"role\":\"system\"")
      expect("system" in bodies[0]).toBe(false)
      const withSystem = yield* sentBodies([[U, A, R1, R2, S]])
      expect(withSystem.bodies[0].system).toBe("You are terse.")
      expect(withSystem.bodies[0].messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant", "user"])
    }).pipe(provideHttp))

  it.scoped("results logged after a context still come first, in call order; consecutive user messages form one turn", () =>
    Effect.gen(function*() {
      const U2 = user("u2", "Be brief.")
      const { bodies } = yield* sentBodies([[U, U2, A, R2, X, R1, Y, S]])
      expect(bodies[0].messages).toEqual([
        { role: "user", content: [...WIRE_U.content, { type: "text", text: "Be brief." }] },
        WIRE_A,
        { role: "user", content: [WIRE_R1, WIRE_R2, WIRE_X, WIRE_Y, WIRE_S] }
      ])
    }).pipe(provideHttp))

  it.scoped("a call without a result gets a synthetic error result (mid-history and at the end)", () =>
    Effect.gen(function*() {
      const A2 = assistant("a2", [{ type: "text", text: "Done." }])
      const { bodies } = yield* sentBodies([[U, A, R2, S, A2, user("u3", "thanks")], [U, A], [U, A, A2]])
      const synthetic = { type: "tool_result", tool_use_id: "c1", content: MISSING, is_error: true }
      const wireA2 = { role: "assistant", content: [{ type: "text", text: "Done." }] }
      expect(bodies[0].messages).toEqual([
        WIRE_U,
        WIRE_A,
        { role: "user", content: [synthetic, WIRE_R2, WIRE_S] },
        wireA2,
        { role: "user", content: [{ type: "text", text: "thanks" }] }
      ])
      const both = [synthetic, { type: "tool_result", tool_use_id: "c2", content: MISSING, is_error: true }]
      expect(bodies[1].messages).toEqual([WIRE_U, WIRE_A, { role: "user", content: both }])
      expect(bodies[2].messages).toEqual([WIRE_U, WIRE_A, { role: "user", content: both }, wireA2])
    }).pipe(provideHttp))

  it.scoped("a result that answers no preceding call is sent as text", () =>
    Effect.gen(function*() {
      const { bodies } = yield* sentBodies([[U, toolResult("r9", "zz", "stale", true)]])
      expect(bodies[0].messages).toEqual([{
        role: "user",
        content: [...WIRE_U.content, { type: "text", text: "Result of tool call zz (error): stale" }]
      }])
    }).pipe(provideHttp))

  it.scoped("thinking goes back with its signature; the blocks form verbatim; reasoning without state is not sent", () =>
    Effect.gen(function*() {
      const blocks = [
        { type: "thinking", thinking: "A", signature: "sig-a" },
        { type: "redacted_thinking", data: "ENC" },
        { type: "thinking", thinking: "B", signature: "sig-b" }
      ]
      const A3 = assistant("a3", [
        { type: "reasoning", text: "AB", providerState: { kind: "anthropic", blocks } },
        { type: "text", text: "ok" },
        { type: "reasoning", text: "from another provider" },
        { type: "reasoning", text: "foreign state", providerState: { kind: "other", signature: "x" } },
        { type: "reasoning", text: "", providerState: { kind: "anthropic", signature: "sig-empty" } }
      ])
      const { bodies } = yield* sentBodies([[U, A3, user("u4", "next")]])
      expect(bodies[0].messages[1]).toEqual({
        role: "assistant",
        content: [...blocks, { type: "text", text: "ok" }, { type: "thinking", thinking: "", signature: "sig-empty" }]
      })
    }).pipe(provideHttp))

  it.scoped("unparsable or non-object arguments are sent as input {}", () =>
    Effect.gen(function*() {
      const A4 = assistant("a4", [
        { type: "tool-call", id: "c1", name: "get_weather", arguments: "{\"city\": \"Par" },
        { type: "tool-call", id: "c2", name: "get_weather", arguments: "[1,2]" }
      ])
      const { bodies } = yield* sentBodies([[U, A4, R1, R2]])
      expect(bodies[0].messages[1].content).toEqual([
        { type: "tool_use", id: "c1", name: "get_weather", input: {} },
        { type: "tool_use", id: "c2", name: "get_weather", input: {} }
      ])
    }).pipe(provideHttp))

  it.scoped("options: thinking, maxTokens, temperature, top_p, headers, extraBody; images; empty texts skipped", () =>
    Effect.gen(function*() {
      const image = freeze({
        id: "i1" as MessageId,
        role: "user" as const,
        content: [
          { type: "text" as const, text: "What is this?" },
          { type: "text" as const, text: "" },
          { type: "image" as const, mediaType: "image/png", data: "iVBORw0KGgo=" }
        ],
        source: { kind: "user" }
      })
      const A5 = assistant("a5", [{ type: "tool-call", id: "c9", name: "snap", arguments: "{}" }])
      const R9 = freeze({
        id: "r9" as MessageId,
        role: "user" as const,
        content: [{
          type: "tool-result" as const,
          toolCallId: "c9",
          content: [{ type: "text" as const, text: "a cat" }, { type: "image" as const, mediaType: "image/jpeg", data: "/9j/" }]
        }],
        source: { kind: "tool", callId: "c9" }
      })
      const { bodies, requests } = yield* sentBodies([[image, A5, R9]], { settings: { temperature: 1, topP: 0.9 } }, {
        maxTokens: 4096,
        thinking: { budgetTokens: 1024 },
        headers: { "anthropic-beta": "interleaved-thinking-2025-05-14" },
        extraBody: { stop_sequences: ["END"], model: "ignored", system: "ignored" }
      })
      expect(bodies[0]).toEqual({
        model: "claude-test",
        max_tokens: 4096,
        system: "You are terse.",
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "What is this?" },
              { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }
            ]
          },
          { role: "assistant", content: [{ type: "tool_use", id: "c9", name: "snap", input: {} }] },
          {
            role: "user",
            content: [{
              type: "tool_result",
              tool_use_id: "c9",
              content: [
                { type: "text", text: "a cat" },
                { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "/9j/" } }
              ]
            }]
          }
        ],
        stream: true,
        thinking: { type: "enabled", budget_tokens: 1024 },
        temperature: 1,
        top_p: 0.9,
        stop_sequences: ["END"]
      })
      expect(requests[0]!.headers["anthropic-beta"]).toBe("interleaved-thinking-2025-05-14")
    }).pipe(provideHttp))

  it.effect("layer provides Model with provider and model names", () =>
    Effect.gen(function*() {
      const model = yield* Model
      expect([model.provider, model.model]).toEqual(["anthropic", "claude-sonnet-4-20250514"])
    }).pipe(
      Effect.provide(Anthropic.layer({ model: "claude-sonnet-4-20250514", apiKey: Redacted.make(API_KEY) })),
      provideHttp
    ))
})

// ---------------------------------------------------------------------------------------------
// Through the agent loop: what the loop stores is what the next request sends
// ---------------------------------------------------------------------------------------------

const types = (events: ReadonlyArray<SessionEvent>) => events.map((e) => e.type)

const runAgent = <A, E>(
  model: ModelService,
  body: (agent: Agent.Agent) => Effect.Effect<A, E, Scope.Scope>,
  options?: Agent.AgentOptions
) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({ instructions: "You are terse.", ...options })
    return yield* body(agent)
  }).pipe(Effect.provide(agentLayer(model)))

describe("Anthropic through the agent loop", () => {
  it.scoped("the thinking block and its signature come back in the next turn's request", () =>
    Effect.gen(function*() {
      const server = yield* replayServer({ file: "anthropic-stream-thinking.sse" })
      const model = yield* adapter(server)
      yield* runAgent(model, (agent) =>
        Effect.gen(function*() {
          yield* agent.followup("How do I cross the street?")
          yield* agent.awaitIdle
          yield* agent.followup("thanks")
          yield* agent.awaitIdle
        }))
      expect(server.requests.length).toBe(2)
      const body = JSON.parse(server.requests[1]!.body)
      expect(body.system).toBe("You are terse.")
      expect(body.messages).toEqual([
        { role: "user", content: [{ type: "text", text: "How do I cross the street?" }] },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: THINKING_TEXT, signature: SIGNATURE },
            { type: "text", text: ANSWER_TEXT }
          ]
        },
        { role: "user", content: [{ type: "text", text: "thanks" }] }
      ])
    }).pipe(provideHttp))

  it.scoped("a tool call runs and its result follows the tool_use in the next step's request", () =>
    Effect.gen(function*() {
      const server = yield* replayServer([{ file: "anthropic-stream-tool-use.sse" }, { file: "anthropic-stream-thinking.sse" }])
      const model = yield* adapter(server)
      const weather = Tool.make({
        name: "get_weather",
        description: "Weather for a location",
        parameters: Schema.Struct({ location: Schema.String }),
        execute: ({ location }) => Effect.succeed({ content: `${location}: 18\u00b0C` })
      })
      yield* runAgent(model, (agent) =>
        Effect.gen(function*() {
          yield* agent.followup("Weather in Paris?")
          yield* agent.awaitIdle
        }), { tools: [weather] })
      expect(server.requests.length).toBe(2)
      const first = JSON.parse(server.requests[0]!.body)
      expect(first.tools).toEqual([{
        name: "get_weather",
        description: "Weather for a location",
        input_schema: first.tools[0].input_schema
      }])
      expect(JSON.parse(server.requests[1]!.body).messages).toEqual([
        { role: "user", content: [{ type: "text", text: "Weather in Paris?" }] },
        {
          role: "assistant",
          content: [
            { type: "text", text: "I'll check the current weather in Paris for you." },
            { type: "tool_use", id: "toolu_01NRLabsLyVHZPKxbKvkfSMn", name: "get_weather", input: { location: "Paris" } }
          ]
        },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "toolu_01NRLabsLyVHZPKxbKvkfSMn", content: "Paris: 18\u00b0C" }]
        }
      ])
    }).pipe(provideHttp))

  it.scoped("a tool_use cut by max_tokens: the turn ends max-tokens with the text, and no tool call is logged", () =>
    Effect.gen(function*() {
      const server = yield* replayServer({ file: "anthropic-stream-tool-use-truncated-max-tokens.sse" })
      const model = yield* adapter(server)
      const events = yield* runAgent(model, (agent) =>
        Effect.gen(function*() {
          yield* agent.followup("Write a tax guide to taxes.txt")
          yield* agent.awaitIdle
          return agent.log.events().slice()
        }))
      const turn = events.filter((e) => e.type !== "agent/inbox/spliced")
      expect(types(turn)).toEqual([
        "turn/start",
        "step/start",
        "user/message",
        "request/header",
        "assistant/message",
        "step/end",
        "turn/end"
      ])
      const assistantEvent = turn.find((e) => e.type === "assistant/message")!.data as any
      expect(assistantEvent.finish).toBe("length")
      expect(assistantEvent.message.content).toEqual([{
        type: "text",
        text: "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a file called " +
          "taxes.txt. Let me do that for you now."
      }])
      expect((turn[turn.length - 1]!.data as any).reason).toEqual({ kind: "max-tokens" })
    }).pipe(provideHttp))
})

it("the layer type leaves HttpClient to the caller", () => {
  const provided: Layer.Layer<Model> = Anthropic.layer({ model: "m" }).pipe(Layer.provide(NodeHttpClient.layerUndici))
  expect(Layer.isLayer(provided)).toBe(true)
})
