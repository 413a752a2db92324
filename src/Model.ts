/**
 * The model port (§11): the project's own push-based `Model` service. A provider
 * adapter answers `respond(request, sink)` by pushing parts into the sink, in order:
 * `text-delta`, `reasoning-delta {text, providerState?}`, `tool-call {id, name, rawArguments}`,
 * `usage`, and one final `finish {reason}`. The port carries no Effect `Stream` on the per-step
 * path and does no decoding of tool arguments: the loop validates them (§8).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Schema, Stream } from "effect"
import type { Message } from "./Message.js"
import type { FinishReason, Usage } from "./SessionEvent.js"

/**
 * A tool as the provider sees it: `parameters` is a JSON Schema object.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolDefinition {
  readonly name: string
  readonly description: string
  readonly parameters: unknown
}

/**
 * One model request (§6.2): the session's `instructions`, the tool definitions, and
 * exactly the model-visible history derived from the log. `messages` is the agent's live
 * history, append-only between compactions (a compaction gives the agent a new array, §17):
 * it is valid for the duration of `respond` (copy it to keep it). Adapters
 * that convert messages should cache the conversion per message object (e.g. a `WeakMap`) so
 * that nothing per step is O(history) beyond serialization.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelRequest {
  readonly sessionId: string
  readonly turn: number
  readonly step: number
  /**
   * `"compaction"` for a compaction's summarization request (§17; `step` is 0 there and
   * `turn` 0 between turns); absent for a step's request.
   */
  readonly purpose?: "compaction" | undefined
  readonly instructions?: string | undefined
  readonly tools: ReadonlyArray<ToolDefinition>
  readonly messages: ReadonlyArray<Message>
  /** Provider settings such as `maxTokens`, `temperature` (passed through). */
  readonly settings?: { readonly [key: string]: unknown } | undefined
}

/**
 * A part of a streamed model response (§11).
 *
 * @since 0.1.0
 * @category models
 */
export type ModelPart =
  | { readonly type: "text-delta"; readonly text: string }
  | { readonly type: "reasoning-delta"; readonly text: string; readonly providerState?: unknown }
  | { readonly type: "tool-call"; readonly id: string; readonly name: string; readonly rawArguments: string }
  | { readonly type: "usage"; readonly usage: Usage; readonly raw?: unknown }
  | { readonly type: "response"; readonly id?: string | undefined; readonly model?: string | undefined }
  | { readonly type: "finish"; readonly reason: FinishReason }

/**
 * Receives the parts of one response, in order.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelSink {
  readonly part: (part: ModelPart) => Effect.Effect<void>
}

/**
 * The codes of a `ModelError` (§11), each in one place with its meaning and whether the
 * error is retryable (`retryable` on the error says so for each failure; the loop retries a
 * retryable error inside the same step, and a final one ends the turn `{kind:"error"}` with its
 * code):
 *
 * | code | retryable | meaning |
 * |---|---|---|
 * | `HTTP_<status>` | 408, 409, 429, 5xx | a non-2xx answer whose body names no code the adapter keeps (`OpenAICompat`, `AiBridge`; `Anthropic` when the body is not its error envelope) |
 * | `CONTEXT_OVERFLOW` | no | the provider refused the request as longer than the model's context window (all three adapters): the turn compacts once and retries the request once (§17) |
 * | `PROVIDER_ERROR` | when the provider's error type names a transient failure (overload, rate limit, timeout, server error) | an error the provider reported inside a 200 response, or one with nothing more to read than its message |
 * | `NETWORK` | yes | the server could not be reached, or the connection broke while reading the response |
 * | `TIMEOUT` | yes | no response headers, or no next piece of the body, within `idleTimeoutMs` |
 * | `STREAM_INCOMPLETE` | yes | the stream ended before the provider's end of response |
 * | `DEADLINE_EXCEEDED` | no | the request, its retries included, outlasted `requestTimeoutMs` |
 * | `RESPONSE_TOO_LARGE` | no | the body is larger than `maxResponseBytes` |
 * | `BAD_RESPONSE` | no | a body or event that is not JSON or not the provider's shape, or an empty body |
 * | `INVALID_URL` | no | `baseUrl` is not a URL |
 * | `INVALID_REQUEST` | no | the request could not be encoded (`AiBridge`) |
 * | `MALFORMED_INPUT` | no | `@effect/ai` could not build the request (`AiBridge`) |
 * | `MALFORMED_OUTPUT` | no | `@effect/ai` rejected the response: a tool call of an unknown tool, or arguments that are not a JSON object (`AiBridge`) |
 * | `MODEL_FAILED` | no | the model port died with a defect instead of failing (the loop's code) |
 * | `SCRIPT_EXHAUSTED` | no | a scripted model was asked past the end of its script |
 * | `invalid_request_error`, `authentication_error`, `billing_error`, `permission_error`, `not_found_error`, `request_too_large`, `rate_limit_error`, `api_error`, `timeout_error`, `overloaded_error` | rate limit, API, timeout and overload errors; for an HTTP answer, its status decides unless `x-should-retry` says otherwise | Anthropic's error types, kept as Anthropic names them (`Anthropic`; an error type not in this list is `HTTP_<status>`, or `PROVIDER_ERROR` inside a stream) |
 *
 * A scripted model fails with the code its script gives, retryable as the script says.
 *
 * @since 0.1.0
 * @category errors
 */
export const ModelErrorCode = Schema.Union(
  Schema.TemplateLiteral(Schema.Literal("HTTP_"), Schema.Number),
  Schema.Literal(
    "CONTEXT_OVERFLOW",
    "PROVIDER_ERROR",
    "NETWORK",
    "TIMEOUT",
    "STREAM_INCOMPLETE",
    "DEADLINE_EXCEEDED",
    "RESPONSE_TOO_LARGE",
    "BAD_RESPONSE",
    "INVALID_URL",
    "INVALID_REQUEST",
    "MALFORMED_INPUT",
    "MALFORMED_OUTPUT",
    "MODEL_FAILED",
    "SCRIPT_EXHAUSTED"
  ),
  Schema.Literal(
    "invalid_request_error",
    "authentication_error",
    "billing_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "timeout_error",
    "overloaded_error"
  )
)
/**
 * @since 0.1.0
 * @category errors
 */
export type ModelErrorCode = typeof ModelErrorCode.Type

/**
 * A model failure (§11): `code` (a `ModelErrorCode`: its table gives each code's
 * meaning and whether it is retryable), `message`, `status` for HTTP errors, `retryable`,
 * `retryAfterMs` when the provider asked for a delay. A retryable error is retried inside the
 * same step; a final failure ends the turn `{kind:"error"}` with this code.
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  code: ModelErrorCode,
  message: Schema.String,
  status: Schema.optional(Schema.Number),
  retryable: Schema.Boolean,
  retryAfterMs: Schema.optional(Schema.Number),
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * @since 0.1.0
 * @category services
 */
export interface ModelService {
  /** Provider name recorded in `request/header` and in assistant message sources. */
  readonly provider: string
  /** Model name recorded in `request/header` and in assistant message sources. */
  readonly model: string
  /** Streams one response into `sink`. Interruption cancels the request. */
  readonly respond: (request: ModelRequest, sink: ModelSink) => Effect.Effect<void, ModelError>
}

/**
 * @since 0.1.0
 * @category services
 */
export class Model extends Context.Tag("effect-agent-loop/Model")<Model, ModelService>() {}

/**
 * The same parts as an Effect `Stream`, for users who want one (not used by the loop: any
 * `Stream` run costs far more than a whole model step, §11).
 *
 * @since 0.1.0
 * @category combinators
 */
export const toStream = (model: ModelService, request: ModelRequest): Stream.Stream<ModelPart, ModelError> =>
  Stream.asyncPush<ModelPart, ModelError>((emit) =>
    Effect.forkScoped(
      model.respond(request, {
        part: (p) =>
          Effect.sync(() => {
            emit.single(p)
          })
      }).pipe(
        Effect.matchCause({
          onFailure: (cause) => emit.halt(cause),
          onSuccess: () => emit.end()
        })
      )
    )
  )

// ---------------------------------------------------------------------------------------------
// Scripted model (tests, scenarios)
// ---------------------------------------------------------------------------------------------

/**
 * One scripted response (§15): `text` (split on whitespace into n deltas emitted at
 * ⌊i·latencyMs/n⌋ ms, whole milliseconds so virtual times stay integers), `reasoning` (one delta before the text), `toolCalls` (arguments: an object,
 * serialized with `JSON.stringify`, or a raw string sent as is), `finish` (default `"stop"`,
 * or `"tool-calls"` when there are tool calls), `usage`, `error` (the request fails with a
 * `ModelError`), `latencyMs` (tool calls, usage and finish come at `latencyMs`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedResponse {
  readonly text?: string | undefined
  readonly reasoning?: string | undefined
  readonly toolCalls?: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments?: unknown }> | undefined
  readonly finish?: FinishReason | undefined
  readonly usage?: Usage | undefined
  readonly error?: {
    readonly code: ModelErrorCode
    readonly message: string
    readonly retryable?: boolean | undefined
    readonly status?: number | undefined
    readonly retryAfterMs?: number | undefined
  } | undefined
  readonly latencyMs?: number | undefined
}

/**
 * A script entry: a response, or a function of the request that returns one.
 *
 * @since 0.1.0
 * @category models
 */
export type ScriptEntry = ScriptedResponse | ((request: ModelRequest) => ScriptedResponse)

/**
 * A request as the scripted model recorded it: the history copied at request time.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRequest {
  readonly turn: number
  readonly step: number
  readonly purpose?: "compaction" | undefined
  readonly instructions?: string | undefined
  readonly tools: ReadonlyArray<ToolDefinition>
  readonly messages: ReadonlyArray<Message>
}

/**
 * A scripted model: `requests` lists what it was asked (when `record` is on).
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedModel extends ModelService {
  readonly requests: ReadonlyArray<RecordedRequest>
  /** How many responses were consumed (with `loop`, across rounds). */
  readonly consumed: () => number
}

const splitWords = (text: string): ReadonlyArray<string> => {
  const parts = text.match(/\s*\S+|\s+$/g)
  return parts === null || parts.length === 0 ? [text] : parts
}

/**
 * A model that answers each request with the next scripted response, through the same port a
 * provider uses (§11, §15). A request past the end of the script fails with code
 * `SCRIPT_EXHAUSTED` (it is still recorded); `loop: true` starts over instead. A request
 * consumes its response when it starts (a cancelled request has used it). Timing uses the
 * Effect `Clock` (TestClock in tests); `latencyMs` 0 or absent emits everything at once.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scripted = (
  script: ReadonlyArray<ScriptEntry>,
  options?: {
    readonly provider?: string | undefined
    readonly model?: string | undefined
    readonly record?: boolean | undefined
    readonly loop?: boolean | undefined
  }
): ScriptedModel => {
  const requests: Array<RecordedRequest> = []
  const record = options?.record ?? true
  let index = 0
  let consumed = 0
  const respond = (request: ModelRequest, sink: ModelSink): Effect.Effect<void, ModelError> =>
    Effect.suspend(() => {
      if (record) {
        requests.push({
          turn: request.turn,
          step: request.step,
          ...(request.purpose !== undefined ? { purpose: request.purpose } : {}),
          instructions: request.instructions,
          tools: request.tools,
          messages: request.messages.slice()
        })
      }
      if (index >= script.length) {
        if (options?.loop === true && script.length > 0) index = 0
        else {
          return Effect.fail(
            new ModelError({
              code: "SCRIPT_EXHAUSTED",
              message: `the model script has ${script.length} responses; request ${index + 1} has none`,
              retryable: false
            })
          )
        }
      }
      const entry = script[index++]!
      consumed++
      const response = typeof entry === "function" ? entry(request) : entry
      return play(response, sink)
    })
  return {
    provider: options?.provider ?? "scripted",
    model: options?.model ?? "script",
    respond,
    requests,
    consumed: () => consumed
  }
}

/** Runs effects one after another (a plain chain: `Effect.all` costs several µs per call). */
const sequence = (steps: ReadonlyArray<Effect.Effect<void, ModelError>>): Effect.Effect<void, ModelError> => {
  let effect: Effect.Effect<void, ModelError> = Effect.void
  for (let i = steps.length - 1; i >= 0; i--) effect = i === steps.length - 1 ? steps[i]! : Effect.zipRight(steps[i]!, effect)
  return effect
}

const play = (response: ScriptedResponse, sink: ModelSink): Effect.Effect<void, ModelError> => {
  const latency = Math.max(0, response.latencyMs ?? 0)
  const steps: Array<Effect.Effect<void, ModelError>> = []
  let elapsed = 0
  const at = (ms: number, effect: Effect.Effect<void, ModelError>) => {
    if (ms > elapsed) {
      steps.push(Effect.sleep(ms - elapsed))
      elapsed = ms
    }
    steps.push(effect)
  }
  if (response.reasoning !== undefined && response.reasoning.length > 0) {
    at(0, sink.part({ type: "reasoning-delta", text: response.reasoning }))
  }
  if (response.text !== undefined && response.text.length > 0) {
    const words = splitWords(response.text)
    const n = words.length
    for (let i = 0; i < n; i++) {
      at(latency === 0 ? 0 : Math.floor(((i + 1) * latency) / n), sink.part({ type: "text-delta", text: words[i]! }))
    }
  }
  if (response.error !== undefined) {
    const e = response.error
    at(
      latency,
      Effect.fail(
        new ModelError({
          code: e.code,
          message: e.message,
          retryable: e.retryable ?? false,
          ...(e.status !== undefined ? { status: e.status } : {}),
          ...(e.retryAfterMs !== undefined ? { retryAfterMs: e.retryAfterMs } : {})
        })
      )
    )
    return sequence(steps)
  }
  const calls = response.toolCalls ?? []
  for (const c of calls) {
    const raw = typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {})
    at(latency, sink.part({ type: "tool-call", id: c.id, name: c.name, rawArguments: raw }))
  }
  if (response.usage !== undefined) at(latency, sink.part({ type: "usage", usage: response.usage }))
  at(latency, sink.part({ type: "finish", reason: response.finish ?? (calls.length > 0 ? "tool-calls" : "stop") }))
  return sequence(steps)
}

/**
 * `Model` as a layer from a scripted model.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (model: ModelService): Layer.Layer<Model> => Layer.succeed(Model, model)

// ---------------------------------------------------------------------------------------------
// Offline model (the default provider, §14)
// ---------------------------------------------------------------------------------------------

const describeSource = (source: { readonly kind: string; readonly [k: string]: unknown }): string => {
  switch (source.kind) {
    case "user":
      return "you"
    case "plugin":
      return `plugin:${String(source.plugin ?? "?")}`
    case "tool":
      return `tool:${String(source.callId ?? "?")}`
    case "hook":
      return `hook:${String(source.hook ?? "?")}`
    case "session-reference":
      return `session:${String(source.sessionId ?? "?")}`
    default:
      return source.kind
  }
}

const textOfBlocks = (content: ReadonlyArray<Message["content"][number]>): string =>
  content.map((b) => (b.type === "text" ? b.text : "")).filter((s) => s.length > 0).join("\n")

/** Quotes `s` on one line, cut to `max` code points (never inside a surrogate pair). */
const quote = (s: string, max = 60): string => {
  const chars = Array.from(s.replace(/\s+/g, " ").trim())
  return `"${chars.length > max ? chars.slice(0, max - 1).join("") + "…" : chars.join("")}"`
}

/**
 * What the offline model plans for one request: the tool calls it makes, or the text it says.
 *
 * @since 0.1.0
 * @category models
 */
export const offlinePlan = (request: ModelRequest): ScriptedResponse => {
  const messages = request.messages
  let start = messages.length
  while (start > 0 && messages[start - 1]!.role === "user") start--
  const fresh = messages.slice(start)
  const results = fresh.filter((m) => m.content.some((b) => b.type === "tool-result"))
  const others = fresh.filter((m) => !m.content.some((b) => b.type === "tool-result"))
  const lines: Array<string> = []
  for (const r of results) {
    for (const b of r.content) {
      if (b.type === "tool-result") {
        lines.push(`${b.isError ? "Tool error" : "Tool result"} (${b.toolCallId}): ${quote(textOfBlocks(b.content), 80)}`)
      }
    }
  }
  const direct = others.filter((m) => m.source.kind === "user")
  const context = others.filter((m) => m.source.kind !== "user")
  if (others.length > 0) {
    const parts: Array<string> = []
    if (direct.length > 0) {
      parts.push(`${direct.length} from you (${direct.map((m) => quote(textOfBlocks(m.content))).join(", ")})`)
    }
    for (const m of context) parts.push(`context from ${describeSource(m.source)} (${quote(textOfBlocks(m.content))})`)
    lines.push(`I received ${others.length} message${others.length === 1 ? "" : "s"} in this step: ${parts.join("; ")}.`)
  }
  const call = nextOfflineCall(request)
  if (lines.length === 0 && call === undefined) lines.push("Nothing new to answer.")
  return call !== undefined
    ? { ...(lines.length > 0 ? { text: lines.join("\n") } : {}), toolCalls: [call] }
    : { text: lines.join("\n") }
}

/**
 * The tools the last direct user message asks for, in the order of the text ("wait 2 seconds
 * and tell me the time" → wait, then clock), minus those already called since that message:
 * the offline model runs them one step at a time, so `clock` tells the time after the wait.
 */
const nextOfflineCall = (request: ModelRequest): { id: string; name: string; arguments: unknown } | undefined => {
  const messages = request.messages
  let last = -1
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.role === "user" && m.source.kind === "user" && !m.content.some((b) => b.type === "tool-result")) {
      last = i
      break
    }
  }
  if (last < 0) return undefined
  const known = new Set(request.tools.map((t) => t.name))
  const asked = textOfBlocks(messages[last]!.content)
  const wanted: Array<{ at: number; name: string; arguments: unknown }> = []
  const wait = /\bwait\s+(\d+(?:\.\d+)?)\s*(?:s\b|secs?\b|seconds?\b)/i.exec(asked)
  if (wait && known.has("wait")) wanted.push({ at: wait.index, name: "wait", arguments: { seconds: Number(wait[1]) } })
  const time = /\b(what time|the time|time is it|clock)\b/i.exec(asked)
  if (time && known.has("clock")) wanted.push({ at: time.index, name: "clock", arguments: {} })
  const read = /\bread(?:\s+the)?\s+file\s+["'`]?([^\s"'`]+?)["'`]?(?=[\s,;!?]|\.?$)/i.exec(asked)
  if (read && known.has("read_file")) wanted.push({ at: read.index, name: "read_file", arguments: { path: read[1] } })
  wanted.sort((a, b) => a.at - b.at)
  let called = 0
  for (let i = last + 1; i < messages.length; i++) {
    const m = messages[i]!
    if (m.role === "assistant") { for (const b of m.content) if (b.type === "tool-call") called++ }
  }
  const next = wanted[called]
  return next === undefined
    ? undefined
    : { id: `call_${request.turn}_${request.step}_1`, name: next.name, arguments: next.arguments }
}

/**
 * The offline model's summary for a compaction (§17): an earlier summary it folds in, then
 * the direct prompts of the rendered conversation, quoted in order, and how many tool results and
 * context messages it held.
 */
const offlineSummary = (request: ModelRequest): string => {
  const text = request.messages.map((m) => textOfBlocks(m.content)).join("\n")
    .replace(/^<conversation>\n/, "").replace(/\n<\/conversation>[\s\S]*$/, "")
  const prompts: Array<string> = []
  const earlier: Array<string> = []
  let tools = 0
  let context = 0
  for (const p of text.split(/\n\n(?=\[)/)) {
    const body = p.replace(/^\[[^\]\n]*\]\n/, "")
    if (p.startsWith("[user]")) prompts.push(quote(body))
    else if (p.startsWith("[tool]")) tools++
    else if (p.startsWith("[context from plugin compact]")) earlier.push(body.replace(/^[^\n]*\n\n/, ""))
    else if (p.startsWith("[context from ")) context++
  }
  return (earlier.length > 0 ? `${earlier.join(" ")} Then: ` : "Earlier: ") +
    `${prompts.length} prompt${prompts.length === 1 ? "" : "s"} from you` +
    (prompts.length > 0 ? ` (${prompts.join(", ")})` : "") +
    `, ${tools} tool result${tools === 1 ? "" : "s"}, ${context} context message${context === 1 ? "" : "s"}.`
}

/**
 * The offline model (§14): deterministic, rule-based, no network. Asked to "wait N
 * seconds" it calls the `wait` tool; asked for the time it calls `clock`; asked to "read file
 * PATH" it calls `read_file`; several requests in one message run one step after another, in
 * the order of the text. Its text reports each tool result it received (quoted, cut to 80
 * characters) and summarizes the other messages of this step (direct and context, by source). A compaction's summarization
 * request (`purpose: "compaction"`) gets a one-line summary quoting the earlier prompts. Tools it calls must be among the
 * request's tools (see `OfflineTools`). `wordDelayMs` spaces the text deltas (Effect `Clock`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const offline = (options?: { readonly wordDelayMs?: number | undefined }): ModelService => ({
  provider: "offline",
  model: "offline-rules-1",
  respond: (request, sink) =>
    Effect.suspend(() => {
      const plan = request.purpose === "compaction" ? { text: offlineSummary(request) } : offlinePlan(request)
      const words = plan.text === undefined ? 0 : splitWords(plan.text).length
      return play({ ...plan, latencyMs: (options?.wordDelayMs ?? 0) * words }, sink)
    })
})
