/**
 * The provider contract (§11): every adapter — OpenAI-compatible Chat
 * Completions, Anthropic Messages, and the `@effect/ai` bridge running `@effect/ai-openai`'s
 * Responses API — runs the same suite against a loopback server that captures the request
 * body. Each captured body is read back into one provider-neutral list of items (system, user
 * text, reasoning, assistant text, tool call, tool result), and the same rules are checked on
 * it: tool results right after the assistant message that called them, contexts and steers as
 * separate user-role content in log order, no mid-history system message, a synthetic error
 * result for an orphan call, reasoning sent back with what the provider needs. The response
 * side: recorded streams (`../shared/fixtures/wire/`) end in one finish after their parts, and
 * HTTP errors become typed `ModelError`s with status, retryability and retry-after. Token usage
 * (§18): every recorded file that carries usage gives its exact normalized usage, its raw
 * usage object and its response id/model (test/utils/wireUsage.ts), as parts and in the logged
 * `assistant/message`; cached tokens are counted once, inside `inputTokens`. Exact decoded parts
 * of every recorded file are pinned in each adapter's own test file.
 */
import { OpenAiClient, OpenAiLanguageModel } from "@effect/ai-openai"
import { NodeContext, NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Schema, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Agent from "../src/Agent.js"
import type { ContentBlock, Message } from "../src/Message.js"
import { Model, type ModelRequest, type ModelService, type ToolDefinition } from "../src/Model.js"
import * as AiBridge from "../src/providers/AiBridge.js"
import * as Anthropic from "../src/providers/Anthropic.js"
import * as OfflineTools from "../src/providers/OfflineTools.js"
import * as OpenAICompat from "../src/providers/OpenAICompat.js"
import type { AssistantMessageData } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Tool from "../src/Tool.js"
import { assistantOf, collect, summarize, toolResult, user } from "./utils/modelParts.js"
import { textResponse } from "./utils/openaiResponses.js"
import { closedPort, readFixture, type ReplayServer, replayServer, type ReplaySpec, WIRE_DIR } from "./utils/replayServer.js"
import { WIRE_USAGE, type WireUsage, type WireUsageFile } from "./utils/wireUsage.js"

const KEY = "sk-contract-test-key-0123"

/** A provider-neutral item of a captured request. */
type Item =
  | { readonly kind: "system"; readonly text: string }
  | { readonly kind: "user"; readonly text: string }
  | { readonly kind: "assistant"; readonly text: string }
  | { readonly kind: "reasoning"; readonly text: string; readonly state: unknown }
  | { readonly kind: "call"; readonly id: string; readonly name: string }
  | { readonly kind: "result"; readonly id: string; readonly text: string }

/** An adapter under contract. */
interface Adapter {
  readonly name: string
  /** The adapter on the replay server (its scope keeps HTTP clients alive). */
  readonly make: (server: ReplayServer) => Effect.Effect<ModelService, never, Scope.Scope>
  /** A successful text answer in the provider's wire format. */
  readonly okBody: ReplaySpec
  /** The items of a captured request body, in order. */
  readonly items: (body: any) => ReadonlyArray<Item>
  /** A reasoning block as this adapter's responses leave it on an assistant message. */
  readonly reasoning: ContentBlock
  /** What `items` shows for that block when sent back (the provider needs it back). */
  readonly reasoningSent: Item
  /** Recorded streams with their finish reason and tool-call ids (the bridge has none). */
  readonly recorded: ReadonlyArray<{ readonly spec: ReplaySpec; readonly finish: string; readonly calls: ReadonlyArray<string> }>
  /**
   * Responses whose usage and response id/model are pinned: every recorded file of the adapter
   * that carries usage (`WIRE_USAGE`); for the bridge, hand-written Responses streams (no
   * recorded one is shared).
   */
  readonly usage: ReadonlyArray<{ readonly name: string; readonly spec: ReplaySpec; readonly expected: WireUsage }>
  /**
   * A response with cached prompt tokens: its prompt total as the provider counts the whole
   * prompt, and the cached part of it (counted once: `inputTokens` is the total, not the total
   * plus the cached tokens).
   */
  readonly cached: {
    readonly name: string
    readonly spec: ReplaySpec
    readonly promptTotal: number
    readonly cacheRead: number
    readonly cacheWrite: number
  }
  /** A recorded or provider-shaped 400 error body. */
  readonly badRequest: ReplaySpec
}

const text = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((c: any) => c.text ?? "").join("")
    : ""

const chatItems = (body: any): ReadonlyArray<Item> =>
  body.messages.flatMap((m: any): ReadonlyArray<Item> => {
    switch (m.role) {
      case "system":
        return [{ kind: "system", text: text(m.content) }]
      case "user":
        return [{ kind: "user", text: text(m.content) }]
      case "tool":
        return [{ kind: "result", id: m.tool_call_id, text: text(m.content) }]
      case "assistant":
        return [
          ...(m.reasoning_content !== undefined ? [{ kind: "reasoning" as const, text: m.reasoning_content, state: null }] : []),
          ...(text(m.content) !== "" ? [{ kind: "assistant" as const, text: text(m.content) }] : []),
          ...(m.tool_calls ?? []).map((c: any) => ({ kind: "call" as const, id: c.id, name: c.function.name }))
        ]
      default:
        throw new Error(`unexpected role ${m.role}`)
    }
  })

const anthropicItems = (body: any): ReadonlyArray<Item> => [
  ...(body.system !== undefined ? [{ kind: "system" as const, text: text(body.system) }] : []),
  ...body.messages.flatMap((m: any) =>
    m.content.map((b: any): Item => {
      switch (b.type) {
        case "text":
          return { kind: m.role === "user" ? "user" : "assistant", text: b.text }
        case "tool_result":
          return { kind: "result", id: b.tool_use_id, text: text(b.content) }
        case "tool_use":
          return { kind: "call", id: b.id, name: b.name }
        case "thinking":
          return { kind: "reasoning", text: b.thinking, state: b.signature }
        default:
          throw new Error(`unexpected block ${b.type}`)
      }
    })
  )
]

const responsesItems = (body: any): ReadonlyArray<Item> =>
  body.input.map((i: any): Item => {
    if (i.role === "developer" || i.role === "system") return { kind: "system", text: text(i.content) }
    if (i.role === "user") return { kind: "user", text: text(i.content) }
    if (i.role === "assistant" || i.type === "message") return { kind: "assistant", text: text(i.content) }
    switch (i.type) {
      case "reasoning":
        return { kind: "reasoning", text: text(i.summary), state: i.encrypted_content }
      case "function_call":
        return { kind: "call", id: i.call_id, name: i.name }
      case "function_call_output":
        return { kind: "result", id: i.call_id, text: JSON.parse(i.output) }
      default:
        throw new Error(`unexpected input item ${JSON.stringify(i)}`)
    }
  })

/** Runs `make` with an undici HTTP client that lives as long as the test's scope. */
const withHttp = <A, R>(make: Effect.Effect<A, never, R>) =>
  Effect.flatMap(Layer.build(NodeHttpClient.layerUndici), (context) => Effect.provide(make, context))

const SIGNATURE = "EqQBCkYIBRgCIkB-signature-of-the-thinking-block"

/** The adapter's recorded files that carry usage, with their pinned figures. */
const recordedUsage = (files: ReadonlyArray<WireUsageFile>) =>
  files.map((file) => ({ name: `${file} (recorded)`, spec: { file }, expected: WIRE_USAGE[file] }))

/** A Responses API usage object with cached and reasoning tokens (hand-written, OpenAI's shape). */
const RESPONSES_CACHED_USAGE = {
  input_tokens: 2006,
  input_tokens_details: { cached_tokens: 1920 },
  output_tokens: 300,
  output_tokens_details: { reasoning_tokens: 128 },
  total_tokens: 2306
}

const adapters: ReadonlyArray<Adapter> = [
  {
    name: "openai-compat (Chat Completions)",
    make: (server) =>
      withHttp(OpenAICompat.make({ baseUrl: server.baseUrl, model: "deepseek-reasoner", apiKey: Redacted.make(KEY) })),
    okBody: { file: "vllm-stream-text-usage-chunk.sse" },
    items: chatItems,
    // DeepSeek thinking mode: the reasoning of a tool-call round goes back as reasoning_content.
    reasoning: { type: "reasoning", text: "Two lookups." },
    reasoningSent: { kind: "reasoning", text: "Two lookups.", state: null },
    recorded: [
      {
        spec: { file: "openai-stream-tool-calls-parallel.sse" },
        finish: "tool-calls",
        calls: ["call_JMW1whyEaYG438VE1OIflxA2", "call_DNYTawLBoN8fj3KN6qU9N1Ou"]
      },
      { spec: { file: "openai-stream-finish-length.sse" }, finish: "length", calls: [] },
      { spec: { file: "openai-stream-refusal.sse" }, finish: "stop", calls: [] },
      {
        spec: { file: "openai-stream-text-then-tool-call.chunks.jsonl" },
        finish: "tool-calls",
        calls: ["call_NZa7xqfefoaMI2YYHowVXVlU"]
      },
      {
        spec: { file: "deepseek-reasoner-stream-tool-call.chunks.jsonl" },
        finish: "tool-calls",
        calls: ["call_00_ioIn7yN9p1ZOMNpDLwd4MgAF"]
      },
      { spec: { file: "vllm-stream-text-usage-chunk.sse" }, finish: "stop", calls: [] },
      {
        spec: { file: "openai-nonstream-tool-calls-parallel.json" },
        finish: "tool-calls",
        calls: ["call_fdNz3vOBKYgOIpMdWotB9MjY", "call_h1DWI1POMJLb0KwIyQHWXD4p"]
      },
      {
        spec: { file: "deepseek-reasoner-tool-call.json" },
        finish: "tool-calls",
        calls: ["call_00_9V0vrf86Pc9aelHCJMZqnJBo"]
      }
    ],
    usage: recordedUsage([
      "openai-stream-tool-calls-parallel.sse",
      "openai-stream-refusal.sse",
      "openai-stream-finish-length.sse",
      "openai-stream-text-then-tool-call.chunks.jsonl",
      "openai-nonstream-tool-calls-parallel.json",
      "vllm-stream-text-usage-chunk.sse",
      "deepseek-reasoner-stream-tool-call.chunks.jsonl",
      "deepseek-reasoner-tool-call.json"
    ]),
    // Recorded: DeepSeek's prompt_tokens 339 = prompt_cache_hit_tokens 320 + miss 19.
    cached: {
      name: "deepseek-reasoner-stream-tool-call.chunks.jsonl (recorded)",
      spec: { file: "deepseek-reasoner-stream-tool-call.chunks.jsonl" },
      promptTotal: 339,
      cacheRead: 320,
      cacheWrite: 0
    },
    badRequest: { file: "openai-error-400-tool-calls-without-tool-messages.json", status: 400 }
  },
  {
    name: "anthropic (Messages)",
    make: (server) =>
      withHttp(
        Anthropic.make({ baseUrl: server.baseUrl.replace(/\/v1$/, ""), model: "claude-test", apiKey: Redacted.make(KEY) })
      ),
    okBody: { file: "anthropic-stream-thinking.sse" },
    items: anthropicItems,
    // Anthropic needs the thinking block back with its signature.
    reasoning: { type: "reasoning", text: "Two lookups.", providerState: { kind: "anthropic", signature: SIGNATURE } },
    reasoningSent: { kind: "reasoning", text: "Two lookups.", state: SIGNATURE },
    recorded: [
      { spec: { file: "anthropic-stream-tool-use.sse" }, finish: "tool-calls", calls: ["toolu_01NRLabsLyVHZPKxbKvkfSMn"] },
      { spec: { file: "anthropic-stream-thinking.sse" }, finish: "stop", calls: [] },
      // The tool_use cut by max_tokens is dropped; the response is not failed.
      { spec: { file: "anthropic-stream-tool-use-truncated-max-tokens.sse" }, finish: "length", calls: [] }
    ],
    usage: recordedUsage([
      "anthropic-stream-tool-use.sse",
      "anthropic-stream-tool-use-truncated-max-tokens.sse",
      "anthropic-stream-thinking.sse"
    ]),
    // No recorded Anthropic stream has cache tokens: the tool-use recording with its two cache
    // counts edited (input_tokens 377 excludes them; the whole prompt is 377 + 20 + 300).
    cached: {
      name: "anthropic-stream-tool-use.sse with cache_creation 20 and cache_read 300 (edited recording)",
      spec: {
        body: readFixture("anthropic-stream-tool-use.sse").toString("utf8")
          .replace("\"cache_creation_input_tokens\":0", "\"cache_creation_input_tokens\":20")
          .replace("\"cache_read_input_tokens\":0", "\"cache_read_input_tokens\":300")
      },
      promptTotal: 697,
      cacheRead: 300,
      cacheWrite: 20
    },
    badRequest: { file: "anthropic-error-400-tool-use-without-tool-result.json", status: 400 }
  },
  {
    name: "openai (Responses, through the @effect/ai bridge)",
    make: (server) =>
      Effect.flatMap(
        Layer.build(
          OpenAiLanguageModel.layer({ model: "gpt-5-mini", config: { strict: false } }).pipe(
            Layer.provide(OpenAiClient.layer({ apiKey: Redacted.make(KEY), apiUrl: server.baseUrl })),
            Layer.provide(NodeHttpClient.layerUndici)
          )
        ),
        (context) => Effect.provide(AiBridge.fromLanguageModel({ provider: "openai", model: "gpt-5-mini" }), context)
      ),
    okBody: { body: textResponse("ok") },
    items: responsesItems,
    // OpenAI needs its reasoning item (id, encrypted content) back.
    reasoning: {
      type: "reasoning",
      text: "Two lookups.",
      providerState: {
        kind: "effect-ai",
        parts: [{ text: "Two lookups.", options: { openai: { itemId: "rs_1", encryptedContent: "enc-1" } } }]
      }
    },
    reasoningSent: { kind: "reasoning", text: "Two lookups.", state: "enc-1" },
    recorded: [],
    // Hand-written Responses streams (no recorded one is shared); the raw object is @effect/ai's
    // Usage, since the wire's usage object does not reach the bridge.
    usage: [
      {
        name: "textResponse (hand-written Responses stream)",
        spec: { body: textResponse("ok") },
        expected: {
          usage: {
            inputTokens: 12,
            outputTokens: 5,
            cacheReadTokens: 0,
            cacheWriteTokens: 0,
            reasoningTokens: 0,
            totalTokens: 17
          },
          raw: { inputTokens: 12, outputTokens: 5, totalTokens: 17, reasoningTokens: 0, cachedInputTokens: 0 },
          response: { id: "resp_1", model: "gpt-5-mini" }
        }
      },
      {
        name: "cached and reasoning tokens (hand-written Responses stream)",
        spec: { body: textResponse("ok", RESPONSES_CACHED_USAGE) },
        expected: {
          usage: {
            inputTokens: 2006,
            outputTokens: 300,
            cacheReadTokens: 1920,
            cacheWriteTokens: 0,
            reasoningTokens: 128,
            totalTokens: 2306
          },
          raw: { inputTokens: 2006, outputTokens: 300, totalTokens: 2306, reasoningTokens: 128, cachedInputTokens: 1920 },
          response: { id: "resp_1", model: "gpt-5-mini" }
        }
      }
    ],
    cached: {
      name: "input_tokens 2006 of which 1920 cached (hand-written Responses stream)",
      spec: { body: textResponse("ok", RESPONSES_CACHED_USAGE) },
      promptTotal: 2006,
      cacheRead: 1920,
      cacheWrite: 0
    },
    badRequest: {
      body: JSON.stringify({
        error: {
          message: "No tool output found for function call call_1.",
          type: "invalid_request_error",
          param: "input",
          code: null
        }
      }),
      status: 400,
      contentType: "application/json"
    }
  }
]

const TOOLS: ReadonlyArray<ToolDefinition> = [
  { name: "weather", description: "Weather of a city", parameters: { type: "object", properties: { city: { type: "string" } } } }
]

const U = user("u1", "What is the weather in Paris and Rome?")
const X = user("x1", "weather data is 10 minutes old", { kind: "plugin", plugin: "watch" })
const Y = user("y1", "branch: main", { kind: "plugin", plugin: "git" })
const S = user("s1", "also check Oslo")
const R1 = toolResult("r1", "c1", "Paris: 18°C")
const R2 = toolResult("r2", "c2", "Rome: 24°C")

const request = (messages: ReadonlyArray<Message>): ModelRequest => ({
  sessionId: "s",
  turn: 1,
  step: 2,
  instructions: "Be brief.",
  tools: TOOLS,
  messages
})

/** Sends `messages` through the adapter; returns the captured request's items. */
const sent = (adapter: Adapter, messages: ReadonlyArray<Message>) =>
  Effect.gen(function*() {
    const server = yield* replayServer(adapter.okBody)
    const model = yield* adapter.make(server)
    yield* collect(model, request(messages))
    expect(server.requests).toHaveLength(1)
    return adapter.items(JSON.parse(server.requests[0]!.body))
  })

const brief = (items: ReadonlyArray<Item>) =>
  items.map((i) =>
    i.kind === "call" ? `call ${i.id}` : i.kind === "result" ? `result ${i.id}: ${i.text}` : `${i.kind}: ${i.text}`
  )

const MISSING = "No result was recorded for this tool call: its outcome is unknown."

/**
 * Runs one turn of an agent on `model` (one step: a response with tool calls ends the turn with
 * MAX_STEPS instead of asking again) and returns its logged `assistant/message` data.
 */
const loggedAssistant = (model: ModelService) =>
  Effect.scoped(Effect.gen(function*() {
    const agent = yield* Agent.make({ maxSteps: 1 })
    yield* agent.followup("hi")
    yield* agent.awaitIdle
    const logged = agent.log.events().filter((e) => e.type === "assistant/message")
    expect(logged).toHaveLength(1)
    return logged[0]!.data as AssistantMessageData
  })).pipe(Effect.provide(Layer.merge(SessionStore.layerMemory, Layer.succeed(Model, model))))

describe("token usage: every recorded wire file that carries usage is pinned", () => {
  it("the files whose bytes hold \"usage\" are the keys of WIRE_USAGE, and each is an adapter's usage case", () => {
    const files = Fs.readdirSync(WIRE_DIR).filter((f) => f !== "SOURCES.md" && readFixture(f).includes("usage")).sort()
    expect(files).toHaveLength(11)
    expect(Object.keys(WIRE_USAGE).sort()).toEqual(files)
    expect(adapters.flatMap((a) => a.usage.flatMap((u) => u.spec.file ?? [])).sort()).toEqual(files)
  })
})

describe("tool schemas (what every provider requires)", () => {
  it("Tool.make gives type object at the top: no parameters, an identified struct; anything else throws", () => {
    const none = Tool.make({
      name: "none",
      description: "",
      parameters: Schema.Struct({}),
      execute: () => Effect.succeed({ content: "" })
    })
    expect(none.definition.parameters).toEqual({
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      properties: {}
    })
    const Named = Schema.Struct({ city: Schema.String }).annotations({ identifier: "WeatherArgs" })
    const named = Tool.make({ name: "named", description: "", parameters: Named, execute: () => Effect.succeed({ content: "" }) })
    expect(named.definition.parameters).toEqual({
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      required: ["city"],
      properties: { city: { type: "string" } },
      additionalProperties: false
    })
    expect(() =>
      Tool.make({
        name: "either",
        description: "",
        parameters: Schema.Union(Schema.Struct({ a: Schema.String }), Schema.Struct({ b: Schema.Number })),
        execute: () => Effect.succeed({ content: "" })
      })
    ).toThrow(/^Tool\.make: the parameters of tool "either" must be an object schema/)
  })
})

for (const adapter of adapters) {
  const assistant = assistantOf("test", "test")
  const calls = (...ids: ReadonlyArray<string>): ReadonlyArray<ContentBlock> =>
    ids.map((id) => ({ type: "tool-call", id, name: "weather", arguments: `{"city":"${id}"}` }))

  describe(`provider contract: ${adapter.name}`, () => {
    it.scopedLive("tool results right after their call; contexts X, Y and steer S after them, separate and in order; system only first", () =>
      Effect.gen(function*() {
        const items = yield* sent(adapter, [U, assistant("a1", calls("c1", "c2")), R1, R2, X, Y, S])
        expect(brief(items)).toEqual([
          "system: Be brief.",
          "user: What is the weather in Paris and Rome?",
          "call c1",
          "call c2",
          "result c1: Paris: 18°C",
          "result c2: Rome: 24°C",
          "user: weather data is 10 minutes old",
          "user: branch: main",
          "user: also check Oslo"
        ])
      }))

    it.scopedLive("the CLI's tools (wait, clock, read_file) are sent with type object at the top of each schema", () =>
      Effect.gen(function*() {
        const tools = (yield* OfflineTools.all("/tmp").pipe(Effect.provide(NodeContext.layer))).map((t) => t.definition)
        const server = yield* replayServer(adapter.okBody)
        const model = yield* adapter.make(server)
        yield* collect(model, { ...request([U]), tools })
        const body = JSON.parse(server.requests[0]!.body)
        const schemas = body.tools.map((
          t: any
        ) => [t.name ?? t.function?.name, (t.input_schema ?? t.parameters ?? t.function?.parameters)?.type])
        expect(schemas).toEqual([["wait", "object"], ["clock", "object"], ["read_file", "object"]])
      }))

    it.scopedLive("a result logged after a context still follows its call; the context comes after the results", () =>
      Effect.gen(function*() {
        const items = yield* sent(adapter, [U, assistant("a1", calls("c1", "c2")), R1, X, R2, S])
        expect(brief(items).slice(2)).toEqual([
          "call c1",
          "call c2",
          "result c1: Paris: 18°C",
          "result c2: Rome: 24°C",
          "user: weather data is 10 minutes old",
          "user: also check Oslo"
        ])
      }))

    it.scopedLive("an orphan call (mid-history and at the end) gets a synthetic error result, never sent alone", () =>
      Effect.gen(function*() {
        const items = yield* sent(adapter, [U, assistant("a1", calls("c1", "c2")), R1, X, assistant("a2", calls("c3"))])
        const view = brief(items)
        expect(view.slice(2, 5)).toEqual(["call c1", "call c2", "result c1: Paris: 18°C"])
        expect(view[5]).toContain("result c2: ")
        expect(view[5]).toContain(MISSING)
        expect(view[6]).toBe("user: weather data is 10 minutes old")
        expect(view[7]).toBe("call c3")
        expect(view[8]).toContain("result c3: ")
        expect(view[8]).toContain(MISSING)
        expect(view).toHaveLength(9)
      }))

    it.scopedLive("a result that answers no call of the assistant message before it is sent as user text, never as a stray result", () =>
      Effect.gen(function*() {
        const stray = toolResult("rz", "zz", "late", true)
        const items = yield* sent(adapter, [stray, U, assistant("a1", calls("c1")), R1, stray, S])
        expect(brief(items)).toEqual([
          "system: Be brief.",
          "user: Result of tool call zz (error): late",
          "user: What is the weather in Paris and Rome?",
          "call c1",
          "result c1: Paris: 18°C",
          "user: Result of tool call zz (error): late",
          "user: also check Oslo"
        ])
      }))

    it.scopedLive("nothing model-facing is a mid-history system message: contexts of any source are user-role", () =>
      Effect.gen(function*() {
        const system = user("sys1", "You are now in plan mode.", { kind: "plugin", plugin: "plan-mode", form: "snapshot" })
        const items = yield* sent(adapter, [U, assistant("a1", [{ type: "text", text: "Sure." }]), system, S])
        expect(items.filter((i) => i.kind === "system")).toEqual([{ kind: "system", text: "Be brief." }])
        expect(items[0]!.kind).toBe("system")
        expect(brief(items).slice(-2)).toEqual(["user: You are now in plan mode.", "user: also check Oslo"])
      }))

    it.scopedLive("reasoning of a tool-call round goes back with what the provider needs", () =>
      Effect.gen(function*() {
        const items = yield* sent(adapter, [U, assistant("a1", [adapter.reasoning, ...calls("c1")]), R1])
        const at = items.findIndex((i) => i.kind === "reasoning")
        expect(items[at]).toEqual(adapter.reasoningSent)
        expect(brief(items).slice(at + 1)).toEqual(["call c1", "result c1: Paris: 18°C"])
      }))

    for (const { spec, finish, calls: callIds } of adapter.recorded) {
      it.scopedLive(`${spec.file}: parts, then at most one usage, then one finish (${finish}) last`, () =>
        Effect.gen(function*() {
          const server = yield* replayServer({ ...spec, splitEvery: 7 })
          const model = yield* adapter.make(server)
          const parts = yield* collect(model, request([U]))
          const kinds = parts.map((p) => p.type)
          expect(kinds.filter((k) => k === "finish")).toHaveLength(1)
          expect(kinds.at(-1)).toBe("finish")
          expect(kinds.filter((k) => k === "usage").length).toBeLessThanOrEqual(1)
          if (kinds.includes("usage")) expect(kinds.indexOf("usage")).toBe(kinds.length - 2)
          expect(parts.at(-1)).toEqual({ type: "finish", reason: finish })
          const toolCalls = parts.flatMap((p) => p.type === "tool-call" ? [p] : [])
          expect(toolCalls.map((c) => c.id)).toEqual(callIds)
          for (const call of toolCalls) expect(typeof call.rawArguments).toBe("string")
        }))
    }

    for (const { expected, name, spec } of adapter.usage) {
      it.scopedLive(`${name}: the response id/model first, the exact usage with its raw object before the finish`, () =>
        Effect.gen(function*() {
          const server = yield* replayServer({ ...spec, splitEvery: 7 })
          const parts = yield* collect(yield* adapter.make(server), request([U]))
          expect(parts[0]).toEqual({ type: "response", ...expected.response })
          expect(parts.filter((p) => p.type === "response")).toHaveLength(1)
          expect(parts.at(-2)).toEqual({ type: "usage", usage: expected.usage, raw: expected.raw })
        }))

      it.scopedLive(`${name}: the logged assistant/message carries usage, rawUsage and response`, () =>
        Effect.gen(function*() {
          const server = yield* replayServer(spec)
          const data = yield* loggedAssistant(yield* adapter.make(server))
          expect([data.usage, data.rawUsage, data.response]).toEqual([expected.usage, expected.raw, expected.response])
        }))
    }

    it.scopedLive(`cached tokens are counted once, inside inputTokens: ${adapter.cached.name}`, () =>
      Effect.gen(function*() {
        const { cacheRead, cacheWrite, promptTotal, spec } = adapter.cached
        const server = yield* replayServer(spec)
        const usage = summarize(yield* collect(yield* adapter.make(server), request([U]))).usage!
        // The whole prompt once (not the prompt plus its cached part), the cache counts inside it.
        expect(usage.inputTokens).toBe(promptTotal)
        expect([usage.cacheReadTokens, usage.cacheWriteTokens]).toEqual([cacheRead, cacheWrite])
        expect(usage.cacheReadTokens! + usage.cacheWriteTokens!).toBeLessThanOrEqual(usage.inputTokens!)
        // Where the provider sends a total, it is input + output: nothing counted twice.
        if (usage.totalTokens !== undefined) expect(usage.inputTokens! + usage.outputTokens!).toBe(usage.totalTokens)
      }))

    if (!adapter.name.startsWith("openai (")) {
      it.scopedLive("a 200 event stream that holds no event at all (an HTML page) is BAD_RESPONSE with the body's start, not retried", () =>
        Effect.gen(function*() {
          const server = yield* replayServer({
            body: "<html><body>Please log in</body></html>\n",
            contentType: "text/event-stream"
          })
          const failure = yield* Effect.flip(collect(yield* adapter.make(server), request([U])))
          expect([failure.error.code, failure.error.retryable, failure.error.message]).toEqual([
            "BAD_RESPONSE",
            false,
            "the response is not an event stream: \"<html><body>Please log in</body></html>\""
          ])
          expect(server.requests).toHaveLength(1)
        }))
    }

    it.scopedLive("secrets in the base URL (user:password@, a query string) are in no error message", () =>
      Effect.gen(function*() {
        const port = yield* closedPort
        const fake = { baseUrl: `http://user:sk-url-secret@127.0.0.1:${port}/v1?api-key=query-secret`, requests: [], aborted: 0 }
        const failure = yield* Effect.flip(collect(yield* adapter.make(fake as ReplayServer), request([U])))
        expect(failure.error.code).toBe("NETWORK")
        for (const shown of [failure.error.message, JSON.stringify(failure.error), String(failure.error)]) {
          expect(shown).not.toContain("sk-url-secret")
          expect(shown).not.toContain("query-secret")
        }
        expect(failure.error.message).toContain(`127.0.0.1:${port}`)
      }))

    it.scopedLive("HTTP errors: 400 → not retryable with its status; 429 → retryable with retry-after; the key in no error", () =>
      Effect.gen(function*() {
        const bad = yield* replayServer({
          ...adapter.badRequest,
          contentType: adapter.badRequest.contentType ?? "application/json"
        })
        const failure = yield* Effect.flip(collect(yield* adapter.make(bad), request([U])))
        expect([failure.error._tag, failure.error.status, failure.error.retryable]).toEqual(["ModelError", 400, false])
        expect(failure.error.code.length).toBeGreaterThan(0)
        const limited = yield* replayServer({
          body: adapter.name.startsWith("anthropic")
            ? JSON.stringify({ type: "error", error: { type: "rate_limit_error", message: "Rate limited" } })
            : JSON.stringify({ error: { message: "Rate limited", type: "rate_limit_exceeded", param: null, code: null } }),
          status: 429,
          contentType: "application/json",
          headers: { "retry-after": "7" }
        })
        const limit = yield* Effect.flip(collect(yield* adapter.make(limited), request([U])))
        expect([limit.error.status, limit.error.retryable, limit.error.retryAfterMs]).toEqual([429, true, 7000])
        for (const error of [failure.error, limit.error]) {
          expect(JSON.stringify(error)).not.toContain(KEY)
          expect(String(error)).not.toContain(KEY)
        }
        expect(failure.parts).toEqual([])
      }))
  })
}
