/**
 * An OpenAI-compatible Chat Completions adapter for the `Model` port (§11): one
 * streaming `POST {baseUrl}/chat/completions` per model request over @effect/platform's
 * `HttpClient`, for DeepSeek, vLLM, llama.cpp, Ollama, OpenAI and gateways that speak the same
 * wire format. The history is mapped by the rules of §11 (consecutive user-role messages
 * stay separate; tool results directly follow their assistant tool-call message, moved up past
 * any context message logged in between; no mid-history system message; `reasoning_content` is
 * sent back unless `reasoningContent: "omit"`). Each message's converted JSON is cached per message object, so a step only
 * converts the messages that are new. The response (an SSE stream, or a whole `chat.completion`
 * JSON body when a server ignores `stream: true`) is pushed into the sink as one `response`
 * (the first chunk's `id` and `model`, before anything else), `text-delta`, `reasoning-delta`,
 * `tool-call` (raw argument strings, never parsed), `usage` and one `finish`. Every failure is a
 * typed `ModelError`.
 *
 * Usage (§18): the stream's last `usage` object (a usage-only chunk with `choices: []`, or,
 * as DeepSeek sends it, the finish chunk's) is mapped once, at the end, into the five normalized
 * counts and pushed with `raw`, the object as sent:
 *
 * - `inputTokens` = `prompt_tokens`, which includes the cached tokens (DeepSeek without it:
 *   `prompt_cache_hit_tokens + prompt_cache_miss_tokens`);
 * - `cacheReadTokens` = `prompt_tokens_details.cached_tokens` (OpenAI, vLLM, DeepSeek), else
 *   DeepSeek's `prompt_cache_hit_tokens`;
 * - `cacheWriteTokens` = `prompt_tokens_details.cache_write_tokens` (OpenRouter);
 * - `outputTokens` = `completion_tokens` (reasoning included); `reasoningTokens` =
 *   `completion_tokens_details.reasoning_tokens`;
 * - a count the server does not send is 0 (vLLM sends no reasoning count, OpenAI none for cache
 *   writes); `totalTokens` = `total_tokens` only when sent.
 *
 * So cached tokens are counted once: `inputTokens` is the whole prompt and `cacheReadTokens` a
 * part of it (DeepSeek: 339 prompt tokens of which 320 cached give `inputTokens` 339). A stream
 * without usage (`stream_options.include_usage` ignored) pushes no `usage` part.
 *
 * Decisions (where the wire format leaves room):
 * - **Refusals** (`delta.refusal`, `message.refusal`) are pushed as `text-delta`s so people see
 *   them and the model sees its own answer next turn; the finish reason stays what the server
 *   said (OpenAI sends `stop`). `content-filter` is reserved for `finish_reason:"content_filter"`.
 * - **End of stream**: `data: [DONE]` completes the response: its closing parts (tool calls,
 *   usage, finish) are pushed at once; then what is left of the body is read and dropped (for at
 *   most 1 s and 64 KiB, then the connection is released unread), because a connection whose
 *   body was read to its end is reused for the next request (keep-alive), while one dropped
 *   before it is closed (§24: a new connection, with TLS a new handshake, per request). A stream
 *   that ends without `[DONE]` is accepted when a `finish_reason` arrived; an unterminated last
 *   event (no blank line before EOF) is dispatched, not dropped, so a `data: [DONE]` or a usage
 *   chunk cut short of its blank line still counts.
 * - **Incomplete streams**: no `finish_reason` by the end of the body (with or without `[DONE]`)
 *   fails with `STREAM_INCOMPLETE` (retryable): the deltas already pushed are withdrawn by the
 *   loop's retry (§11).
 * - **Orphan calls**: an assistant tool call with no result before the next assistant message
 *   or the end of the history (a log cut by a crash and not repaired) gets a synthetic `tool`
 *   message `error: No result was recorded for this tool call…`, in call order, before the
 *   user messages that follow. (Chat Completions has no error flag: the text says it.)
 * - **Stray results**: a tool result that answers no call of the assistant message before it (a
 *   hand-edited or foreign log) is sent as user text `Result of tool call ID: …`, as the other
 *   adapters do: a `tool` message must follow the assistant message that called it.
 * - **Tool-call order**: a tool-result message that the log holds after a context user message
 *   (which §8 never produces, but a hand-edited or foreign log may) is moved up to
 *   directly after its assistant tool-call message; the context messages follow the last result.
 * - **Context overflow**: a request longer than the model's context window fails with
 *   `CONTEXT_OVERFLOW` (§17: the loop compacts and retries) only when the server says so in
 *   a documented form (`context_length_exceeded`, llama.cpp's `exceed_context_size_error`, or
 *   `maximum context length is N tokens`), in a 400 or 413 answer or an error inside the stream;
 *   any other 400 keeps `HTTP_400`, so that an unrelated refusal does not start a compaction.
 *
 * @since 0.1.0
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { type ContentBlock, textOf } from "../Message.js"
import { Model, ModelError, type ModelPart, type ModelService, type ModelSink } from "../Model.js"
import type { FinishReason } from "../SessionEvent.js"
import { bodyMessage, describeError, innerError, isRetryableError, overflowOr } from "./internal/errors.js"
import {
  type Call,
  type Converted,
  convertOnce,
  MISSING_RESULT,
  orderHistory,
  strayResultText,
  type Wire
} from "./internal/history.js"
import { badResponse, endpointUrl, errorText, isRetryableStatus, opaqueError, statusError } from "./internal/http.js"
import { type HttpOptions, makeHttpModel } from "./internal/httpModel.js"
import { type EventStreamState, pushAll } from "./internal/sse.js"
import * as WireFormat from "./internal/wire.js"

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
 *   `retryAfterMs`. Default: none, the loop's step retry handles them (§11).
 * - `idleTimeoutMs`, `requestTimeoutMs`, `maxRetryAfterMs`, `maxResponseBytes`: the limits of a
 *   request, below (the same for every HTTP adapter). All use the Effect `Clock`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends HttpOptions {
  readonly baseUrl: string
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens" | undefined
  readonly reasoningContent?: "send" | "omit" | undefined
  /**
   * How long (ms) to wait for the response headers, and then for each next piece of the body
   * that is progress (SSE comments such as `: ping` are not), before failing with `ModelError`
   * code `TIMEOUT` (retryable). Default 120,000.
   */
  readonly idleTimeoutMs?: number | undefined
  /**
   * How long (ms) one model request may take, its retries included (the loop's step retry and
   * the `retry` option call `respond` again with the same `ModelRequest` object: the deadline
   * runs from the first call), before failing with `DEADLINE_EXCEEDED` (not retryable). Default
   * 600,000 (10 minutes).
   */
  readonly requestTimeoutMs?: number | undefined
  /**
   * The longest wait (ms) a `retry-after` / `retry-after-ms` header may ask for. A server that
   * asks for more gets no retry: the error is made final (`retryable: false`, `retryAfterMs`
   * kept, the message says so). A wait within the cap is logged (`Effect.logWarning`) before
   * anyone sleeps on it. Default 60,000.
   */
  readonly maxRetryAfterMs?: number | undefined
  /**
   * The most bytes of a response body read (an event stream or a whole JSON body); past it
   * reading stops and the request fails with `RESPONSE_TOO_LARGE` (not retryable). Default
   * 16 MiB (16,777,216). An error body is read up to 64 KiB only.
   */
  readonly maxResponseBytes?: number | undefined
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
 * - `CONTEXT_OVERFLOW` (not retryable; §17): the request is longer than the model's context
 *   window. A 400 or 413 answer, or an `error` object inside a 200 response, whose error has
 *   `code` `context_length_exceeded` (OpenAI) or `type` `exceed_context_size_error` (llama.cpp),
 *   or whose message says `maximum context length is N tokens` (OpenAI, DeepSeek, vLLM); `message`
 *   and `status` as for `HTTP_<status>` (no `status` inside a 200 response). The loop compacts
 *   the history and retries once;
 * - `NETWORK` (retryable): the server could not be reached or the connection broke mid-body;
 * - `INVALID_URL`: `baseUrl` is not a URL;
 * - `PROVIDER_ERROR`: an `error` object inside a 200 response (a chunk's `error` field or an
 *   `event: error` SSE event); retryable when its numeric `code` is a retryable HTTP status or its
 *   type names an overload, rate limit, timeout or server error;
 * - `BAD_RESPONSE`: a chunk or body that is not JSON, or a body without a choice;
 * - `STREAM_INCOMPLETE` (retryable): the stream ended without a `finish_reason`;
 * - `TIMEOUT` (retryable): no headers, or no progress in the body, within `idleTimeoutMs`;
 * - `DEADLINE_EXCEEDED`: the request, its retries included, outlasted `requestTimeoutMs`;
 * - `RESPONSE_TOO_LARGE`: the body is larger than `maxResponseBytes`.
 *
 * A `retry-after` longer than `maxRetryAfterMs` makes the error final (`retryable: false`). A
 * key the server echoes (the configured one, `Bearer …`, `sk-…`-shaped tokens) is replaced by
 * `[redacted]` in every message.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<ModelService, never, HttpClient.HttpClient> =>
  Effect.map(HttpClient.HttpClient, (client) => makeWithClient(client, options))

/**
 * The adapter as the `Model` service (§11), leaving `HttpClient.HttpClient` as a
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
export const layer = (options: Options): Layer.Layer<Model, never, HttpClient.HttpClient> => Layer.effect(Model, make(options))

// ---------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------

const RESERVED_BODY_KEYS = ["model", "messages", "tools"]

const makeWithClient = (client: HttpClient.HttpClient, options: Options): ModelService => {
  const maxTokensField = options.maxTokensField ?? "max_tokens"
  const wire = options.reasoningContent === "omit" ? WIRE_PLAIN : WIRE
  return makeHttpModel(client, options, {
    span: "OpenAICompat.respond",
    provider: "openai-compat",
    url: endpointUrl(options.baseUrl, "/chat/completions"),
    reserved: RESERVED_BODY_KEYS,
    headers: (request) => options.apiKey === undefined ? request : HttpClientRequest.bearerToken(request, options.apiKey),
    fields: (request) => {
      const messages: Array<string> = []
      if (request.instructions !== undefined && request.instructions !== "") {
        messages.push(JSON.stringify({ role: "system", content: request.instructions }))
      }
      orderHistory(request.messages, wire, "log", messages)
      const json = `,"messages":[${messages.join(",")}]`
      return request.tools.length > 0 ? json + `,"tools":${toolsJson(request.tools)}` : json
    },
    tail: (_, maxTokens) => {
      const tail: Record<string, unknown> = { stream: true, stream_options: { include_usage: true } }
      if (maxTokens !== undefined) tail[maxTokensField] = maxTokens
      return tail
    },
    httpError,
    wholeBody: completionBody,
    streamState: () => new StreamState()
  })
}

// ---------------------------------------------------------------------------------------------
// Request: message mapping (§11), cached per message object
// ---------------------------------------------------------------------------------------------

/** An assistant message as JSON, and the same without `reasoning_content`. */
interface AssistantJson {
  readonly json: string
  /** For option `reasoningContent: "omit"`. */
  readonly plain: string
}

/** A tool result as a `tool` message, and as the user text it becomes when it answers no call. */
interface ResultJson {
  readonly callId: string
  readonly json: string
  readonly stray: string
}

/**
 * The `tool` message of each result directly after its assistant message, in log order (a
 * result logged after a context message is moved up); a user-role message's text and images
 * after the results as one `user` message. See `orderHistory` for missing and stray results.
 */
const WIRE: Wire<AssistantJson, ResultJson, string, string> = {
  convert: (message) => convertMessage(message),
  callId: (result) => result.callId,
  assistant: (message) => message.json,
  result: (result) => result.json,
  missing: (call) => JSON.stringify({ role: "tool", tool_call_id: call.id, content: `error: ${MISSING_RESULT}` }),
  stray: (result) => result.stray,
  user: (json) => json
}

const WIRE_PLAIN: Wire<AssistantJson, ResultJson, string, string> = { ...WIRE, assistant: (message) => message.plain }

const convertAssistant = (content: ReadonlyArray<ContentBlock>): Converted<AssistantJson, ResultJson, string> => {
  let text: string | undefined
  let reasoning: string | undefined
  const toolCalls: Array<unknown> = []
  const calls: Array<Call> = []
  for (const block of content) {
    switch (block.type) {
      case "text":
        text = joinLines(text, block.text)
        break
      case "reasoning":
        reasoning = joinLines(reasoning, block.text)
        break
      case "tool-call":
        calls.push({ id: block.id, name: block.name })
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
  if (reasoning === undefined) return { _tag: "assistant", message: { json: plain, plain }, calls }
  json.reasoning_content = reasoning
  return { _tag: "assistant", message: { json: JSON.stringify(json), plain }, calls }
}

/**
 * A user-role message: plain `user` message, or one `tool` message per `tool-result` block
 * (`content` = the result's text blocks joined with "\n"; Chat Completions has no error flag, so
 * `isError` results are sent as their text, and images inside results are not sent).
 */
const convertUser = (content: ReadonlyArray<ContentBlock>): Converted<AssistantJson, ResultJson, string> => {
  const results: Array<ResultJson> = []
  for (const block of content) {
    if (block.type === "tool-result") {
      results.push({
        callId: block.toolCallId,
        json: JSON.stringify({ role: "tool", tool_call_id: block.toolCallId, content: textOf(block.content) }),
        stray: JSON.stringify({ role: "user", content: strayResultText(block) })
      })
    }
  }
  if (results.length === 0) return { _tag: "user", results, message: userJson(content) }
  const rest = content.some((b) => b.type === "text" || b.type === "image") ? userJson(content) : undefined
  return { _tag: "user", results, message: rest }
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

const toolsJson = WireFormat.toolsOnce((tool) => ({
  type: "function",
  function: { name: tool.name, description: tool.description, parameters: WireFormat.parametersOf(tool) }
}))

// ---------------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------------

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
  /** The last `usage` object of the stream, as sent; mapped once, at the end. */
  private rawUsage: Record<string, unknown> | undefined = undefined
  /** Whether the `response` part (the first chunk's `id` / `model`) was pushed. */
  private responded = false
  private readonly calls: Array<ToolCallSlot> = []

  onEvent(name: string, data: string, out: Array<ModelPart>): void {
    if (name === "error") {
      this.failure = providerError(WireFormat.parseJsonOr(data), data)
      return
    }
    // Chat Completions chunks are unnamed events; other named events are not chunks.
    if (name !== "message") return
    if (data === "[DONE]") {
      this.done = true
      return
    }
    const chunk = WireFormat.parseJson(data)
    if (WireFormat.isRecord(chunk)) this.onChunk(chunk, out)
    else if (chunk !== WireFormat.NOT_JSON) {
      this.failure = badResponse(`a stream chunk is not an object: ${WireFormat.truncate(data, 200)}`)
    } else if (data.trim() === "[DONE]") this.done = true
    else this.failure = badResponse(`malformed JSON in a stream chunk: ${WireFormat.truncate(data, 200)}`)
  }

  private onChunk(chunk: Record<string, unknown>, out: Array<ModelPart>): void {
    if (chunk.error !== undefined && chunk.error !== null) {
      this.failure = providerError(chunk.error, undefined)
      return
    }
    if (!this.responded) {
      const response = WireFormat.responsePart(chunk.id, chunk.model)
      if (response !== undefined) {
        this.responded = true
        out.push(response)
      }
    }
    if (WireFormat.isRecord(chunk.usage)) this.rawUsage = chunk.usage
    const choice = firstChoice(chunk.choices)
    if (choice === undefined) return
    const delta = choice.delta
    if (WireFormat.isRecord(delta)) {
      contentParts(delta, out)
      if (Array.isArray(delta.tool_calls)) {
        for (const call of delta.tool_calls) if (WireFormat.isRecord(call)) this.onToolCallDelta(call)
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
    const fn = WireFormat.isRecord(call.function) ? call.function : undefined
    const id = WireFormat.nonEmpty(call.id)
    const name = fn === undefined ? undefined : WireFormat.nonEmpty(fn.name)
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
    pushUsage(this.rawUsage, out)
    out.push({ type: "finish", reason: mapFinishReason(this.finishReason, calls.length > 0) })
  }
}

/** A whole `chat.completion` JSON body (a server that answered without streaming). */
const completionBody = (body: Record<string, unknown>, sink: ModelSink): Effect.Effect<void, ModelError> =>
  Effect.suspend(() => {
    if (body.error !== undefined && body.error !== null) return Effect.fail(providerError(body.error, undefined))
    const choice = firstChoice(body.choices)
    const message = choice === undefined ? undefined : choice.message
    if (choice === undefined || !WireFormat.isRecord(message)) {
      return Effect.fail(badResponse("the response body has no choice with a message"))
    }
    const parts: Array<ModelPart> = []
    const response = WireFormat.responsePart(body.id, body.model)
    if (response !== undefined) parts.push(response)
    contentParts(message, parts)
    let calls = 0
    if (Array.isArray(message.tool_calls)) {
      for (const call of message.tool_calls) {
        if (!WireFormat.isRecord(call)) continue
        const fn = WireFormat.isRecord(call.function) ? call.function : {}
        const args = fn.arguments
        calls++
        parts.push({
          type: "tool-call",
          id: WireFormat.nonEmpty(call.id) ?? generatedCallId(),
          name: typeof fn.name === "string" ? fn.name : "",
          rawArguments: typeof args === "string"
            ? (args === "" ? "{}" : args)
            : JSON.stringify(args ?? {})
        })
      }
    }
    if (WireFormat.isRecord(body.usage)) pushUsage(body.usage, parts)
    const reason = typeof choice.finish_reason === "string" ? choice.finish_reason : "stop"
    parts.push({ type: "finish", reason: mapFinishReason(reason, calls > 0) })
    return pushAll(sink, parts)
  })

/**
 * The text parts of a streamed `delta` or a whole `message`, in this order: reasoning
 * (`reasoning_content`, else `reasoning`), content, refusal (as text, see the module's notes).
 */
const contentParts = (message: Record<string, unknown>, out: Array<ModelPart>): void => {
  const reasoning = WireFormat.nonEmpty(message.reasoning_content) ?? WireFormat.nonEmpty(message.reasoning)
  if (reasoning !== undefined) out.push({ type: "reasoning-delta", text: reasoning })
  const content = WireFormat.nonEmpty(message.content)
  if (content !== undefined) out.push({ type: "text-delta", text: content })
  const refusal = WireFormat.nonEmpty(message.refusal)
  if (refusal !== undefined) out.push({ type: "text-delta", text: refusal })
}

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
      return WireFormat.stopOrToolCalls(hasToolCalls)
  }
}

/**
 * Pushes the `usage` part of a response whose usage object (as sent) is `raw`, when it holds a
 * count (the mapping is in the module's notes); `raw` rides along as the part's `raw`.
 */
const pushUsage = (raw: Record<string, unknown> | undefined, out: Array<ModelPart>): void => {
  if (raw === undefined) return
  const prompt = WireFormat.isRecord(raw.prompt_tokens_details) ? raw.prompt_tokens_details : undefined
  const completion = WireFormat.isRecord(raw.completion_tokens_details) ? raw.completion_tokens_details : undefined
  const hit = WireFormat.num(raw.prompt_cache_hit_tokens)
  const miss = WireFormat.num(raw.prompt_cache_miss_tokens)
  const usage = WireFormat.normalizedUsage({
    inputTokens: WireFormat.num(raw.prompt_tokens) ?? (hit !== undefined && miss !== undefined ? hit + miss : undefined),
    outputTokens: WireFormat.num(raw.completion_tokens),
    cacheReadTokens: (prompt === undefined ? undefined : WireFormat.num(prompt.cached_tokens)) ?? hit,
    cacheWriteTokens: prompt === undefined ? undefined : WireFormat.num(prompt.cache_write_tokens),
    reasoningTokens: completion === undefined ? undefined : WireFormat.num(completion.reasoning_tokens),
    totalTokens: WireFormat.num(raw.total_tokens)
  })
  if (usage !== undefined) out.push({ type: "usage", usage, raw })
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/**
 * A non-2xx answer: `HTTP_<status>` (`CONTEXT_OVERFLOW` for a 400 or 413 that says the request
 * is longer than the context window), the body's OpenAI-style error message (else its text).
 */
const httpError = (response: HttpClientResponse.HttpClientResponse, text: string, now: number): ModelError => {
  const body = WireFormat.parseJsonOr(text)
  return statusError(
    response,
    now,
    overflowOr(
      {
        code: `HTTP_${response.status}`,
        message: bodyMessage(body) ?? errorText(text, response.status),
        retryable: isRetryableStatus(response.status)
      },
      body,
      response.status
    )
  )
}

/**
 * An `error` object inside a 200 response (a chunk's `error`, an `event: error`, a whole body's
 * `error`): `PROVIDER_ERROR`, or `CONTEXT_OVERFLOW` when it says the request is longer than the
 * context window.
 */
const providerError = (error: unknown, raw: string | undefined): ModelError => {
  const inner = innerError(error)
  if (WireFormat.isRecord(inner)) {
    const type = [inner.type, inner.code].find((v): v is string => typeof v === "string")
    return new ModelError(
      overflowOr(
        { code: "PROVIDER_ERROR", message: describeError(inner), retryable: isRetryableError(inner, type) },
        inner,
        undefined
      )
    )
  }
  const message = typeof inner === "string" ? inner : raw !== undefined ? WireFormat.truncate(raw, 1000) : "provider error"
  return opaqueError(message)
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

/** The choice with `index` 0 (n = 1), else the first one. */
const firstChoice = (choices: unknown): Record<string, unknown> | undefined => {
  if (!Array.isArray(choices) || choices.length === 0) return undefined
  for (const c of choices) if (WireFormat.isRecord(c) && (c.index === 0 || c.index === undefined)) return c
  return undefined
}

const generatedCallId = (): string => `call_${randomUUID()}`

/** `text` after `before` and a line break (the blocks of one assistant message share one field). */
const joinLines = (before: string | undefined, text: string): string => before === undefined ? text : before + "\n" + text

const convertMessage = convertOnce<Converted<AssistantJson, ResultJson, string>>(convertAssistant, convertUser)
