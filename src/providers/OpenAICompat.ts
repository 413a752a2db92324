/**
 * An OpenAI-compatible Chat Completions adapter for the `Model` port (DESIGN.md §11): one
 * streaming `POST {baseUrl}/chat/completions` per model request over @effect/platform's
 * `HttpClient`, for DeepSeek, vLLM, llama.cpp, Ollama, OpenAI and gateways that speak the same
 * wire format. The history is mapped by the rules of DESIGN.md §11 (consecutive user-role messages
 * stay separate; tool results directly follow their assistant tool-call message, moved up past
 * any context message logged in between; no mid-history system message; `reasoning_content` is
 * sent back unless `reasoningContent: "omit"`). Each message's converted JSON is cached per message object, so a step only
 * converts the messages that are new. The response (an SSE stream, or a whole `chat.completion`
 * JSON body when a server ignores `stream: true`) is pushed into the sink as `text-delta`,
 * `reasoning-delta`, `tool-call` (raw argument strings, never parsed), `usage` and one `finish`.
 * Every failure is a typed `ModelError`.
 *
 * Decisions (where the wire format leaves room):
 * - **Refusals** (`delta.refusal`, `message.refusal`) are pushed as `text-delta`s so people see
 *   them and the model sees its own answer next turn; the finish reason stays what the server
 *   said (OpenAI sends `stop`). `content-filter` is reserved for `finish_reason:"content_filter"`.
 * - **End of stream**: `data: [DONE]` ends reading (the connection is released at once). A stream
 *   that ends without `[DONE]` is accepted when a `finish_reason` arrived; an unterminated last
 *   event (no blank line before EOF) is dispatched, not dropped, so a `data: [DONE]` or a usage
 *   chunk cut short of its blank line still counts.
 * - **Incomplete streams**: no `finish_reason` by the end of the body (with or without `[DONE]`)
 *   fails with `STREAM_INCOMPLETE` (retryable): the deltas already pushed are withdrawn by the
 *   loop's retry (DESIGN.md §11).
 * - **Orphan calls**: an assistant tool call with no result before the next assistant message
 *   or the end of the history (a log cut by a crash and not repaired) gets a synthetic `tool`
 *   message `error: No result was recorded for this tool call…`, in call order, before the
 *   user messages that follow. (Chat Completions has no error flag: the text says it.)
 * - **Stray results**: a tool result that answers no call of the assistant message before it (a
 *   hand-edited or foreign log) is sent as user text `Result of tool call ID: …`, as the other
 *   adapters do: a `tool` message must follow the assistant message that called it.
 * - **Tool-call order**: a tool-result message that the log holds after a context user message
 *   (which DESIGN.md §8 never produces, but a hand-edited or foreign log may) is moved up to
 *   directly after its assistant tool-call message; the context messages follow the last result.
 *
 * @since 0.1.0
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import type { HttpClientResponse } from "@effect/platform"
import { Clock, Effect, Layer, type Redacted, type Schedule } from "effect"
import { randomUUID } from "node:crypto"
import { type ContentBlock, type Message, textOf } from "../Message.js"
import { Model, ModelError, type ModelPart, type ModelRequest, type ModelService, type ModelSink, type ToolDefinition } from "../Model.js"
import type { FinishReason, Usage } from "../SessionEvent.js"
import {
  badResponse,
  displayUrl,
  type Endpoint,
  endpointUrl,
  isRetryableStatus,
  networkError,
  readErrorBody,
  retryAfter,
  retrySchedule,
  send
} from "./internal/http.js"
import { type EventStreamState, pushAll, streamEvents } from "./internal/sse.js"
import { convertOnce, isRecord, MISSING_RESULT, nonEmpty, num, numberSetting, parseJsonOr, strayResultText, truncate } from "./internal/wire.js"

/**
 * Options of the adapter.
 *
 * - `baseUrl`: the API root, e.g. `https://api.deepseek.com/v1` or `http://localhost:11434/v1`;
 *   requests go to `${baseUrl}/chat/completions` (a trailing `/` is ignored).
 * - `model`: the model name sent in every request and recorded in `request/header`.
 * - `apiKey`: sent as `Authorization: Bearer …`; `Redacted`, never logged (omit for local servers).
 * - `provider`: the provider name recorded in `request/header` (default `"openai-compat"`).
 * - `maxTokens`, `temperature`: defaults for `request.settings.maxTokens` / `.temperature`.
 * - `maxTokensField`: the body field for `maxTokens`: `max_tokens` (default) or
 *   `max_completion_tokens` (OpenAI reasoning models reject `max_tokens`).
 * - `reasoningContent`: `"send"` (default) puts an assistant message's reasoning back as
 *   `reasoning_content` (DeepSeek's thinking mode requires it after tool calls); `"omit"` leaves
 *   it out, for servers that reject the field (e.g. Cerebras, older vLLM).
 * - `headers`: extra request headers (e.g. OpenRouter's `HTTP-Referer`).
 * - `extraBody`: extra top-level body fields merged last (e.g. `{thinking: {type: "enabled"}}`);
 *   they may override `stream`, `stream_options` and the settings, never `model`, `messages`
 *   or `tools`.
 * - `retry`: a schedule for failures that happen **before the first part reached the sink**
 *   (connection refused, HTTP 429/5xx) and are `retryable`; each delay is at least the error's
 *   `retryAfterMs`. Default: none, the loop's step retry handles them (DESIGN.md §11).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly baseUrl: string
  readonly model: string
  readonly apiKey?: Redacted.Redacted<string> | undefined
  readonly provider?: string | undefined
  readonly maxTokens?: number | undefined
  readonly temperature?: number | undefined
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens" | undefined
  readonly reasoningContent?: "send" | "omit" | undefined
  readonly headers?: { readonly [name: string]: string } | undefined
  readonly extraBody?: { readonly [key: string]: unknown } | undefined
  readonly retry?: Schedule.Schedule<unknown, ModelError> | undefined
  /**
   * How long (ms) to wait for the response headers, and then for each next piece of the body,
   * before failing with `ModelError` code `TIMEOUT` (retryable). Default 120,000. Uses the
   * Effect `Clock`.
   */
  readonly idleTimeoutMs?: number | undefined
}

/**
 * Builds the adapter's `ModelService` from the `HttpClient` in context (provide
 * `NodeHttpClient.layerUndici` or `FetchHttpClient.layer`).
 *
 * `respond` fails with `ModelError`, `code`:
 * - `HTTP_<status>` for a non-2xx answer: `message` is the provider's `error.message`, prefixed
 *   with its `error.type` (the body is parsed as JSON whatever its content-type); `status` set;
 *   retryable for 408, 409, 429 and 5xx; `retryAfterMs` from `retry-after-ms` or `retry-after`
 *   (seconds or an HTTP date);
 * - `NETWORK` (retryable): the server could not be reached or the connection broke mid-body;
 * - `INVALID_URL`: `baseUrl` is not a URL;
 * - `PROVIDER_ERROR`: an `error` object inside a 200 response (a chunk's `error` field or an
 *   `event: error` SSE event); retryable when its numeric `code` is a retryable HTTP status or its
 *   type names an overload, rate limit, timeout or server error;
 * - `BAD_RESPONSE`: a chunk or body that is not JSON, or a body without a choice;
 * - `STREAM_INCOMPLETE` (retryable): the stream ended without a `finish_reason`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<ModelService, never, HttpClient.HttpClient> =>
  Effect.map(HttpClient.HttpClient, (client) => makeWithClient(client, options))

/**
 * The adapter as the `Model` service (DESIGN.md §11), leaving `HttpClient.HttpClient` as a
 * requirement: `OpenAICompat.layer({...}).pipe(Layer.provide(NodeHttpClient.layerUndici))`.
 *
 * @example
 * ```ts
 * import { NodeHttpClient } from "@effect/platform-node"
 * import { Config, Effect, Layer } from "effect"
 * import { OpenAICompat } from "effect-agent-loop"
 *
 * const deepseek = Layer.unwrapEffect(Effect.map(Config.redacted("DEEPSEEK_API_KEY"), (apiKey) =>
 *   OpenAICompat.layer({ baseUrl: "https://api.deepseek.com/v1", model: "deepseek-chat", apiKey })
 * )).pipe(Layer.provide(NodeHttpClient.layerUndici))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Model, never, HttpClient.HttpClient> =>
  Layer.effect(Model, make(options))

// ---------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------

const RESERVED_BODY_KEYS = new Set(["model", "messages", "tools"])

const makeWithClient = (client: HttpClient.HttpClient, options: Options): ModelService => {
  const provider = options.provider ?? "openai-compat"
  const idleTimeout = options.idleTimeoutMs ?? 120_000
  const url = endpointUrl(options.baseUrl, "/chat/completions")
  const modelJson = JSON.stringify(options.model)
  const maxTokensField = options.maxTokensField ?? "max_tokens"
  const sendReasoning = options.reasoningContent !== "omit"
  const extraBody: Record<string, unknown> = {}
  if (options.extraBody !== undefined) {
    for (const key of Object.keys(options.extraBody)) {
      if (!RESERVED_BODY_KEYS.has(key)) extraBody[key] = options.extraBody[key]
    }
  }
  let baseRequest = HttpClientRequest.post(url)
  if (options.headers !== undefined) baseRequest = HttpClientRequest.setHeaders(baseRequest, options.headers)
  if (options.apiKey !== undefined) baseRequest = HttpClientRequest.bearerToken(baseRequest, options.apiKey)
  const endpoint: Endpoint = { client, provider, url, idleTimeoutMs: idleTimeout, retry: retrySchedule(options.retry) }

  const buildBody = (request: ModelRequest): string => {
    const settings = request.settings
    const tail: Record<string, unknown> = { stream: true, stream_options: { include_usage: true } }
    const maxTokens = numberSetting(settings, "maxTokens") ?? options.maxTokens
    if (maxTokens !== undefined) tail[maxTokensField] = maxTokens
    const temperature = numberSetting(settings, "temperature") ?? options.temperature
    if (temperature !== undefined) tail.temperature = temperature
    const topP = numberSetting(settings, "topP")
    if (topP !== undefined) tail.top_p = topP
    for (const key in extraBody) tail[key] = extraBody[key]
    let body = `{"model":${modelJson},"messages":[${assembleMessages(request, sendReasoning).join(",")}]`
    if (request.tools.length > 0) body += `,"tools":${toolsJson(request.tools)}`
    const tailJson = JSON.stringify(tail)
    return tailJson === "{}" ? body + "}" : body + "," + tailJson.slice(1)
  }

  const respond = Effect.fn("OpenAICompat.respond")(function*(request: ModelRequest, sink: ModelSink) {
    const httpRequest = HttpClientRequest.bodyText(baseRequest, buildBody(request), "application/json")
    return yield* send(
      endpoint,
      httpRequest,
      sink,
      (response, guarded) => handleResponse(response, guarded, idleTimeout, provider, displayUrl(url))
    )
  })

  return Model.of({ provider, model: options.model, respond })
}

// ---------------------------------------------------------------------------------------------
// Request: message mapping (DESIGN.md §11), cached per message object
// ---------------------------------------------------------------------------------------------

type Converted =
  | { readonly _tag: "user"; readonly json: string }
  | {
    readonly _tag: "assistant"
    readonly json: string
    /** The same without `reasoning_content` (option `reasoningContent: "omit"`). */
    readonly plain: string
    readonly callIds: ReadonlyArray<string>
  }
  | {
    readonly _tag: "tool"
    readonly results: ReadonlyArray<{ readonly callId: string; readonly json: string; readonly stray: string }>
    /** The message's non-result blocks, sent as a user message after the results. */
    readonly rest: string | undefined
  }

const toolsCache = new WeakMap<ReadonlyArray<ToolDefinition>, string>()

const convert = (message: Message): Converted => convertMessage(message)

/**
 * The provider-facing message list, as JSON strings: the `system` message, then the history in
 * log order, except that tool results are moved up to directly follow their assistant tool-call
 * message when user-role messages were logged in between (those follow the last result).
 * One `WeakMap` lookup per message; conversion only for messages not seen before.
 */
const assembleMessages = (request: ModelRequest, sendReasoning: boolean): Array<string> => {
  const out: Array<string> = []
  if (request.instructions !== undefined && request.instructions !== "") {
    out.push(JSON.stringify({ role: "system", content: request.instructions }))
  }
  let owed: Array<string> | undefined // call ids of the last assistant message still without result
  let held: Array<string> | undefined // user-role messages logged while results were owed
  const release = () => {
    // A call without a result (before the next assistant message or the end of the history)
    // gets a synthetic error result: a request never holds an orphan call (§11).
    if (owed !== undefined) for (const id of owed) out.push(missingResultJson(id))
    if (held !== undefined) for (const json of held) out.push(json)
    held = undefined
    owed = undefined
  }
  for (const message of request.messages) {
    const c = convert(message)
    switch (c._tag) {
      case "assistant": {
        release()
        out.push(sendReasoning ? c.json : c.plain)
        if (c.callIds.length > 0) owed = c.callIds.slice()
        break
      }
      case "tool": {
        for (const result of c.results) {
          const i = owed === undefined ? -1 : owed.indexOf(result.callId)
          if (i >= 0) {
            out.push(result.json)
            owed!.splice(i, 1)
          } else if (owed !== undefined && owed.length > 0) {
            // A result that answers no call of the preceding assistant message: user text
            // (a `tool` message must follow its call), after the owed results.
            ;(held ??= []).push(result.stray)
          } else {
            out.push(result.stray)
          }
        }
        if (c.rest !== undefined) {
          if (owed !== undefined && owed.length > 0) (held ??= []).push(c.rest)
          else out.push(c.rest)
        }
        if (owed !== undefined && owed.length === 0) release()
        break
      }
      case "user": {
        if (owed !== undefined && owed.length > 0) (held ??= []).push(c.json)
        else out.push(c.json)
        break
      }
    }
  }
  release()
  return out
}

const missingResultJson = (callId: string): string =>
  JSON.stringify({ role: "tool", tool_call_id: callId, content: `error: ${MISSING_RESULT}` })

const convertAssistant = (content: ReadonlyArray<ContentBlock>): Converted => {
  let text: string | undefined
  let reasoning: string | undefined
  const toolCalls: Array<unknown> = []
  const callIds: Array<string> = []
  for (const block of content) {
    switch (block.type) {
      case "text":
        text = text === undefined ? block.text : text + "\n" + block.text
        break
      case "reasoning":
        reasoning = reasoning === undefined ? block.text : reasoning + "\n" + block.text
        break
      case "tool-call":
        callIds.push(block.id)
        toolCalls.push({ id: block.id, type: "function", function: { name: block.name, arguments: block.arguments } })
        break
    }
  }
  const json: Record<string, unknown> = {
    role: "assistant",
    content: text ?? (toolCalls.length > 0 ? null : "")
  }
  if (toolCalls.length > 0) json.tool_calls = toolCalls
  const plain = JSON.stringify(json)
  // DeepSeek thinking mode requires the reasoning of tool-call rounds back (unless omitted).
  if (reasoning === undefined) return { _tag: "assistant", json: plain, plain, callIds }
  json.reasoning_content = reasoning
  return { _tag: "assistant", json: JSON.stringify(json), plain, callIds }
}

/**
 * A user-role message: plain `user` message, or one `tool` message per `tool-result` block
 * (`content` = the result's text blocks joined with "\n"; Chat Completions has no error flag, so
 * `isError` results are sent as their text, and images inside results are not sent).
 */
const convertUser = (content: ReadonlyArray<ContentBlock>): Converted => {
  let results: Array<{ readonly callId: string; readonly json: string; readonly stray: string }> | undefined
  for (const block of content) {
    if (block.type === "tool-result") {
      const text = textOf(block.content)
      ;(results ??= []).push({
        callId: block.toolCallId,
        json: JSON.stringify({ role: "tool", tool_call_id: block.toolCallId, content: text }),
        stray: JSON.stringify({
          role: "user",
          content: strayResultText(block)
        })
      })
    }
  }
  if (results === undefined) return { _tag: "user", json: userJson(content) }
  const rest = content.some((b) => b.type === "text" || b.type === "image") ? userJson(content) : undefined
  return { _tag: "tool", results, rest }
}

const userJson = (content: ReadonlyArray<ContentBlock>): string => {
  if (!content.some((b) => b.type === "image")) {
    return JSON.stringify({ role: "user", content: textOf(content) })
  }
  const parts: Array<unknown> = []
  for (const block of content) {
    if (block.type === "text") parts.push({ type: "text", text: block.text })
    else if (block.type === "image") {
      parts.push({ type: "image_url", image_url: { url: `data:${block.mediaType};base64,${block.data}` } })
    }
  }
  return JSON.stringify({ role: "user", content: parts })
}


const toolsJson = (tools: ReadonlyArray<ToolDefinition>): string => {
  let json = toolsCache.get(tools)
  if (json === undefined) {
    json = JSON.stringify(tools.map((tool) => ({
      type: "function",
      function: {
        name: tool.name,
        description: tool.description,
        parameters: tool.parameters ?? { type: "object", properties: {} }
      }
    })))
    toolsCache.set(tools, json)
  }
  return json
}

// ---------------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------------

const handleResponse = (
  response: HttpClientResponse.HttpClientResponse,
  sink: ModelSink,
  idleTimeout: number,
  provider: string,
  url: string
): Effect.Effect<void, ModelError> => {
  if (response.status < 200 || response.status >= 300) {
    return Effect.flatMap(readErrorBody(response), (text) => Effect.flatMap(httpError(response, text), Effect.fail))
  }
  const contentType = response.headers["content-type"] ?? ""
  if (contentType.includes("application/json")) {
    return Effect.flatMap(
      Effect.mapError(response.text, (e) => networkError(e, "reading the response body")),
      (text) => completionBody(text, sink)
    )
  }
  return streamEvents(response, new StreamState(), sink, idleTimeout, provider, url)
}

interface ToolCallSlot {
  readonly index: number
  id: string
  name: string
  args: string
}

/** Assembly state of one streamed response. */
class StreamState implements EventStreamState {
  done = false
  failure: ModelError | undefined = undefined
  private finishReason: string | undefined = undefined
  private usage: Usage | undefined = undefined
  private readonly calls: Array<ToolCallSlot> = []

  onEvent(name: string, data: string, out: Array<ModelPart>): void {
    if (name === "error") {
      this.failure = providerError(parseJsonOr(data), data)
      return
    }
    // Chat Completions chunks are unnamed events; other named events are not chunks.
    if (name !== "message") return
    if (data === "[DONE]") {
      this.done = true
      return
    }
    let chunk: unknown
    try {
      chunk = JSON.parse(data)
    } catch {
      if (data.trim() === "[DONE]") {
        this.done = true
        return
      }
      this.failure = badResponse(`malformed JSON in a stream chunk: ${truncate(data, 200)}`)
      return
    }
    if (!isRecord(chunk)) {
      this.failure = badResponse(`a stream chunk is not an object: ${truncate(data, 200)}`)
      return
    }
    this.onChunk(chunk, out)
  }

  private onChunk(chunk: Record<string, unknown>, out: Array<ModelPart>): void {
    if (chunk.error !== undefined && chunk.error !== null) {
      this.failure = providerError(chunk.error, undefined)
      return
    }
    if (isRecord(chunk.usage)) this.usage = mapUsage(chunk.usage)
    const choice = firstChoice(chunk.choices)
    if (choice === undefined) return
    const delta = choice.delta
    if (isRecord(delta)) {
      const reasoning = nonEmpty(delta.reasoning_content) ?? nonEmpty(delta.reasoning)
      if (reasoning !== undefined) out.push({ type: "reasoning-delta", text: reasoning })
      const content = nonEmpty(delta.content)
      if (content !== undefined) out.push({ type: "text-delta", text: content })
      const refusal = nonEmpty(delta.refusal)
      if (refusal !== undefined) out.push({ type: "text-delta", text: refusal })
      if (Array.isArray(delta.tool_calls)) {
        for (const call of delta.tool_calls) if (isRecord(call)) this.onToolCallDelta(call)
      }
    }
    if (typeof choice.finish_reason === "string" && choice.finish_reason !== "") {
      this.finishReason = choice.finish_reason
    }
  }

  /**
   * Assembles tool calls by `index`: `id` and `name` from the opening delta, `arguments`
   * concatenated as raw strings. A delta with a new `id` at an index already holding another
   * call opens a new call (servers that send each call whole, all at index 0).
   */
  private onToolCallDelta(call: Record<string, unknown>): void {
    const fn = isRecord(call.function) ? call.function : undefined
    const id = nonEmpty(call.id)
    const name = fn === undefined ? undefined : nonEmpty(fn.name)
    const args = fn === undefined ? undefined : typeof fn.arguments === "string" ? fn.arguments : undefined
    const last = this.calls[this.calls.length - 1]
    const index = typeof call.index === "number"
      ? call.index
      : id === undefined && last !== undefined
      ? last.index
      : this.calls.length
    let slot: ToolCallSlot | undefined
    for (let i = this.calls.length - 1; i >= 0; i--) {
      if (this.calls[i]!.index === index) {
        slot = this.calls[i]
        break
      }
    }
    if (slot === undefined || (id !== undefined && slot.id !== "" && slot.id !== id)) {
      slot = { index, id: "", name: "", args: "" }
      this.calls.push(slot)
    }
    if (id !== undefined && slot.id === "") slot.id = id
    if (name !== undefined && slot.name === "") slot.name = name
    if (args !== undefined) slot.args += args
  }

  /** End of the response: tool calls in index order, usage, one finish; or a failure. */
  finish(out: Array<ModelPart>): void {
    if (this.failure !== undefined) return
    if (this.finishReason === undefined) {
      this.failure = new ModelError({
        code: "STREAM_INCOMPLETE",
        message: this.done
          ? "the response stream ended ([DONE]) without a finish_reason"
          : "the response stream ended without a finish_reason",
        retryable: true
      })
      return
    }
    const calls = this.calls.slice().sort((a, b) => a.index - b.index)
    for (const call of calls) {
      out.push({
        type: "tool-call",
        id: call.id === "" ? generatedCallId() : call.id,
        name: call.name,
        rawArguments: call.args === "" ? "{}" : call.args
      })
    }
    if (this.usage !== undefined) out.push({ type: "usage", usage: this.usage })
    out.push({ type: "finish", reason: mapFinishReason(this.finishReason, calls.length > 0) })
  }
}

/** A whole `chat.completion` JSON body (a server that answered without streaming). */
const completionBody = (text: string, sink: ModelSink): Effect.Effect<void, ModelError> =>
  Effect.suspend(() => {
    const body = parseJsonOr(text)
    if (!isRecord(body)) return Effect.fail(badResponse(`the response body is not a JSON object: ${truncate(text, 200)}`))
    if (body.error !== undefined && body.error !== null) return Effect.fail(providerError(body.error, undefined))
    const choice = firstChoice(body.choices)
    const message = choice === undefined ? undefined : choice.message
    if (choice === undefined || !isRecord(message)) {
      return Effect.fail(badResponse("the response body has no choice with a message"))
    }
    const parts: Array<ModelPart> = []
    const reasoning = nonEmpty(message.reasoning_content) ?? nonEmpty(message.reasoning)
    if (reasoning !== undefined) parts.push({ type: "reasoning-delta", text: reasoning })
    const content = nonEmpty(message.content)
    if (content !== undefined) parts.push({ type: "text-delta", text: content })
    const refusal = nonEmpty(message.refusal)
    if (refusal !== undefined) parts.push({ type: "text-delta", text: refusal })
    let calls = 0
    if (Array.isArray(message.tool_calls)) {
      for (const call of message.tool_calls) {
        if (!isRecord(call)) continue
        const fn = isRecord(call.function) ? call.function : {}
        const args = fn.arguments
        calls++
        parts.push({
          type: "tool-call",
          id: nonEmpty(call.id) ?? generatedCallId(),
          name: typeof fn.name === "string" ? fn.name : "",
          rawArguments: typeof args === "string"
            ? (args === "" ? "{}" : args)
            : JSON.stringify(args ?? {})
        })
      }
    }
    if (isRecord(body.usage)) parts.push({ type: "usage", usage: mapUsage(body.usage) })
    const reason = typeof choice.finish_reason === "string" ? choice.finish_reason : "stop"
    parts.push({ type: "finish", reason: mapFinishReason(reason, calls > 0) })
    return pushAll(sink, parts)
  })

/**
 * `stop` → `stop` (or `tool-calls` when the response has tool calls: Ollama and some vLLM
 * versions say `stop`), `tool_calls`/`function_call` → `tool-calls`, `length` → `length`,
 * `content_filter` → `content-filter`; anything else → `stop` (`tool-calls` with tool calls).
 */
const mapFinishReason = (reason: string, hasToolCalls: boolean): FinishReason => {
  switch (reason) {
    case "tool_calls":
    case "function_call":
      return "tool-calls"
    case "length":
      return "length"
    case "content_filter":
      return "content-filter"
    default:
      return hasToolCalls ? "tool-calls" : "stop"
  }
}

const mapUsage = (u: Record<string, unknown>): Usage => {
  const usage: { -readonly [K in keyof Usage]: number } = {}
  const input = num(u.prompt_tokens)
  if (input !== undefined) usage.inputTokens = input
  const output = num(u.completion_tokens)
  if (output !== undefined) usage.outputTokens = output
  const cached = (isRecord(u.prompt_tokens_details) ? num(u.prompt_tokens_details.cached_tokens) : undefined) ??
    num(u.prompt_cache_hit_tokens)
  if (cached !== undefined) usage.cacheReadTokens = cached
  const reasoning = isRecord(u.completion_tokens_details)
    ? num(u.completion_tokens_details.reasoning_tokens)
    : undefined
  if (reasoning !== undefined) usage.reasoningTokens = reasoning
  const total = num(u.total_tokens)
  if (total !== undefined) usage.totalTokens = total
  return usage
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

const RETRYABLE_TYPE = /overload|rate.?limit|server.?error|timeout|unavailable|internal/i

const httpError = (
  response: HttpClientResponse.HttpClientResponse,
  text: string
): Effect.Effect<ModelError> =>
  Effect.map(Clock.currentTimeMillis, (now) => {
    const status = response.status
    const body = parseJsonOr(text)
    let message: string | undefined
    if (isRecord(body)) {
      if (isRecord(body.error)) message = describeError(body.error)
      else if (typeof body.error === "string") message = body.error // Ollama: {"error": "…"}
      else if (typeof body.message === "string") message = describeError(body) // vLLM: top-level
    }
    if (message === undefined) message = text.trim() === "" ? `HTTP ${status}` : truncate(text.trim(), 1000)
    const retryAfterMs = retryAfter(response.headers, now)
    return new ModelError({
      code: `HTTP_${status}`,
      message,
      status,
      retryable: isRetryableStatus(status),
      ...(retryAfterMs === undefined ? {} : { retryAfterMs })
    })
  })

/** `type: message (param …)` from an OpenAI-style error object. */
const describeError = (error: Record<string, unknown>): string => {
  const message = typeof error.message === "string" ? error.message : JSON.stringify(error)
  const type = typeof error.type === "string" && error.type !== ""
    ? error.type
    : typeof error.code === "string" && error.code !== ""
    ? error.code
    : undefined
  const param = typeof error.param === "string" && error.param !== "" ? ` (param ${error.param})` : ""
  return (type === undefined ? message : `${type}: ${message}`) + param
}

const providerError = (error: unknown, raw: string | undefined): ModelError => {
  const inner = isRecord(error) && isRecord(error.error) ? error.error : error
  if (!isRecord(inner)) {
    return new ModelError({
      code: "PROVIDER_ERROR",
      message: typeof inner === "string" ? inner : raw !== undefined ? truncate(raw, 1000) : "provider error",
      retryable: false
    })
  }
  const numeric = num(inner.code) ?? num(inner.status)
  const type = [inner.type, inner.code].find((v): v is string => typeof v === "string")
  const retryable = numeric !== undefined
    ? isRetryableStatus(numeric)
    : type !== undefined && RETRYABLE_TYPE.test(type)
  return new ModelError({ code: "PROVIDER_ERROR", message: describeError(inner), retryable })
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

/** The choice with `index` 0 (n = 1), else the first one. */
const firstChoice = (choices: unknown): Record<string, unknown> | undefined => {
  if (!Array.isArray(choices) || choices.length === 0) return undefined
  for (const c of choices) if (isRecord(c) && (c.index === 0 || c.index === undefined)) return c
  return undefined
}

const generatedCallId = (): string => `call_${randomUUID()}`

const convertMessage = convertOnce<Converted>(convertAssistant, convertUser)
