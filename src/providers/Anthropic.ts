/**
 * An Anthropic Messages adapter for the `Model` port (§11): one streaming
 * `POST {baseUrl}/v1/messages` per model request over @effect/platform's `HttpClient`, with
 * `x-api-key` (a `Redacted` key) and `anthropic-version: 2023-06-01`. The session's
 * instructions go to the top-level `system` field, never into the history. The history is mapped
 * to Anthropic's alternating turns: consecutive user-role messages (direct prompts, contexts,
 * steers, tool results) form one `user` turn whose `tool_result` blocks come first, in call
 * order, right after the assistant turn that called them, followed by the text and image blocks
 * of the other messages, one block each, in log order. Each message's converted blocks are
 * cached per message object, so a step only converts the messages that are new. The SSE
 * response (`message_start`, `content_block_*`, `message_delta`, `message_stop`, `ping`,
 * `error`) is pushed into the sink as one `response` (`message_start`'s `message.id` and
 * `message.model`, first), `text-delta`, `reasoning-delta`, `tool-call` (the raw `partial_json`
 * concatenation, never parsed), `usage` and one `finish`. Every failure is a typed `ModelError`.
 *
 * Decisions (where the wire format leaves room):
 * - **Thinking signatures**: a `thinking` block streams as `reasoning-delta`s, then, at its
 *   `content_block_stop`, one `reasoning-delta` with empty text whose `providerState` is
 *   `{kind:"anthropic", signature}` (see `ThinkingState`). The loop keeps it on the assistant
 *   message's `reasoning` block, and the next request sends `{type:"thinking", thinking: text,
 *   signature}` back. When the loop's one reasoning block covers more than one wire block
 *   (adjacent thinking blocks, or any `redacted_thinking`), the state carries the wire blocks
 *   themselves, `{kind:"anthropic", blocks}`, and they are sent back verbatim. A `reasoning`
 *   block without such a state (another provider's, or a stream cut before the signature)
 *   cannot be verified by Anthropic and is not sent.
 * - **Tool calls** are pushed at their `content_block_stop`, so they keep their place among the
 *   text and thinking blocks. A `tool_use` block with no `input_json_delta` has arguments `"{}"`.
 * - **Truncation** (`stop_reason: "max_tokens"`): the stream is not failed. A `tool_use` block
 *   that the limit cut (no `content_block_stop`) is dropped, as §6.4 says an
 *   incomplete call is; complete calls are pushed, and the loop gives each a `TRUNCATED`
 *   result. The finish reason is `length`. (A `tool_use` left open in a response that was not
 *   truncated is pushed at `message_stop` with the arguments that arrived.)
 * - **Unparsable arguments**: a `tool-call` whose `arguments` are not a JSON object is sent back
 *   as `tool_use` with `input: {}` (Anthropic accepts only an object); the loop's error result
 *   for it (`INVALID_ARGUMENTS`) tells the model what was wrong.
 * - **Orphan calls**: a `tool_use` with no `tool_result` in the user-role messages that follow it
 *   (before the next assistant message or the end of the history) gets a synthetic error
 *   `tool_result`, so a request is never rejected for it. A `tool-result` that answers no call
 *   of the directly preceding assistant message is sent as a text block instead.
 * - **End of stream**: `message_stop` completes the response (its last parts are pushed at
 *   once); the body's end that follows is read, so the connection is reused, as in
 *   `OpenAICompat`. A body that ends without it fails with `STREAM_INCOMPLETE` (retryable).
 * - **Usage** (§18): Anthropic's `input_tokens` excludes the cache, so `inputTokens` is the
 *   whole prompt, `input_tokens + cache_creation_input_tokens + cache_read_input_tokens`, and
 *   means what it means for the Chat Completions providers (cached tokens counted once, inside
 *   it); `cacheWriteTokens` = `cache_creation_input_tokens`, `cacheReadTokens` =
 *   `cache_read_input_tokens`, `outputTokens` = `output_tokens`; `reasoningTokens` is 0 (thinking
 *   is billed as output and not reported apart: `outputTokens` includes it); no `totalTokens`
 *   (Anthropic sends none). The usage arrives in two places: `message_start`'s `message.usage`
 *   and `message_delta`'s `usage`, whose counts Anthropic documents as cumulative. The `raw`
 *   of the `usage` part is therefore `message_start`'s usage object with every `message_delta`'s
 *   fields merged over it (a field sent as `null` keeps the earlier value), e.g. `{input_tokens:
 *   377, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 65,
 *   service_tier: "standard"}` for a start with `output_tokens: 1` and a delta with 65. It is
 *   mapped once, at `message_stop`.
 * - **Context overflow**: Anthropic has no error type of its own for it (it is an
 *   `invalid_request_error`), so the message is read: `prompt is too long: N tokens > M maximum`
 *   or `input length and \`max_tokens\` exceed context limit: …`, in a 400 or 413 answer or an
 *   `error` event, fails with `CONTEXT_OVERFLOW` (§17: the loop compacts and retries)
 *   instead of `invalid_request_error`. Any other `invalid_request_error` keeps its code.
 *
 * @since 0.1.0
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Effect, Layer, Redacted } from "effect"
import { type ContentBlock, type Message, textOf, type ToolResultBlock } from "../Message.js"
import { Model, ModelError, ModelErrorCode, type ModelPart, type ModelService, type ModelSink } from "../Model.js"
import type { FinishReason, Usage } from "../SessionEvent.js"
import { overflowOr } from "./internal/errors.js"
import {
  type Call,
  type Converted,
  convertOnce,
  MISSING_RESULT,
  orderHistory,
  splitUser,
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
 * - `model`: the model name sent in every request and recorded in `request/header`.
 * - `apiKey`: sent as `x-api-key`; `Redacted`, never logged nor put in an error message
 *   (omit only for a proxy that adds it).
 * - `baseUrl`: the API root (default `https://api.anthropic.com`); requests go to
 *   `${baseUrl}/v1/messages` (a trailing `/` is ignored).
 * - `provider`: the provider name recorded in `request/header` (default `"anthropic"`).
 * - `maxTokens`: `max_tokens` when `request.settings.maxTokens` is not set (default 8192;
 *   Anthropic requires the field; Claude 3 Opus and Haiku allow at most 4096). With `thinking`
 *   it must exceed `budgetTokens`.
 * - `temperature`: default for `request.settings.temperature` (`topP` is read from the
 *   settings only). Anthropic rejects a temperature other than 1 together with thinking.
 * - `thinking`: extended thinking, sent as `thinking: {type:"enabled", budget_tokens}`.
 * - `anthropicVersion`: the `anthropic-version` header (default `"2023-06-01"`).
 * - `headers`: extra request headers (e.g. `anthropic-beta: interleaved-thinking-2025-05-14`).
 * - `extraBody`: extra top-level body fields merged last (e.g. `{stop_sequences: [...]}`); they
 *   may override the settings and `stream`, never `model`, `system`, `messages` or `tools`.
 * - `retry`: a schedule for failures that happen **before the first part reached the sink**
 *   (connection refused, HTTP 429/5xx/529) and are `retryable`; each delay is at least the
 *   error's `retryAfterMs`. Default: none, the loop's step retry handles them (§11).
 * - `idleTimeoutMs`: how long (ms) to wait for the response headers, and then for each next
 *   piece of the body that is progress, before failing with `TIMEOUT` (retryable). Default
 *   120,000. Anthropic's `ping` events are events, so progress; SSE comment lines are not.
 * - `requestTimeoutMs`: how long (ms) one model request may take, its retries included (the
 *   deadline runs from the first `respond` of a `ModelRequest` object; the loop's step retry and
 *   `retry` call again with the same object), before failing with `DEADLINE_EXCEEDED` (not
 *   retryable). Default 600,000 (10 minutes).
 * - `maxRetryAfterMs`: the longest wait (ms) a `retry-after` may ask for; a longer one makes the
 *   error final (`retryable: false`, `retryAfterMs` kept, the message says so); a wait within
 *   the cap is logged (`Effect.logWarning`) before anyone sleeps on it. Default 60,000.
 * - `maxResponseBytes`: the most bytes of a response body read (stream or whole JSON); past it
 *   reading stops and the request fails with `RESPONSE_TOO_LARGE` (not retryable). Default
 *   16 MiB. An error body is read up to 64 KiB only.
 *
 * All of them use the Effect `Clock`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends HttpOptions {
  readonly baseUrl?: string | undefined
  readonly thinking?: { readonly budgetTokens: number } | undefined
  readonly anthropicVersion?: string | undefined
}

/**
 * A thinking block as Anthropic sends it and wants it back: `thinking` with its `signature`, or
 * `redacted_thinking` with its encrypted `data`.
 *
 * @since 0.1.0
 * @category models
 */
export type ThinkingBlock =
  | { readonly type: "thinking"; readonly thinking: string; readonly signature: string }
  | { readonly type: "redacted_thinking"; readonly data: string }

/**
 * The `providerState` this adapter puts on `reasoning-delta`s (and so on the assistant
 * message's `reasoning` blocks, §2): `{kind:"anthropic", signature}` when the
 * reasoning block is exactly one `thinking` block (its text is the block's `thinking`), else
 * `{kind:"anthropic", blocks}`, the wire blocks the reasoning block stands for, sent back as
 * they are.
 *
 * @since 0.1.0
 * @category models
 */
export type ThinkingState =
  | { readonly kind: "anthropic"; readonly signature: string }
  | { readonly kind: "anthropic"; readonly blocks: ReadonlyArray<ThinkingBlock> }

/**
 * Builds the adapter's `ModelService` from the `HttpClient` in context (provide
 * `NodeHttpClient.layerUndici` or `FetchHttpClient.layer`).
 *
 * `respond` fails with `ModelError`, `code`:
 * - the error envelope's `error.type` for a non-2xx answer (`invalid_request_error`,
 *   `rate_limit_error`, `overloaded_error`, …: the types `ModelErrorCode` lists; `HTTP_<status>`
 *   for another type, which then heads the message, or when the body is not Anthropic's envelope): `message` is `error.message` with the `request_id`; `status` set; retryable for
 *   408, 409, 429 and 5xx (529 included) unless an `x-should-retry` header says otherwise;
 *   `retryAfterMs` from `retry-after` (seconds or an HTTP date) or `retry-after-ms`;
 * - `CONTEXT_OVERFLOW` (not retryable, whatever `x-should-retry` says; §17): the request is
 *   longer than the model's context window: a 400 or 413 answer, or an `error` event inside a
 *   200 stream, whose `error.message` says `prompt is too long: N tokens > M maximum` or
 *   `input length and \`max_tokens\` exceed context limit: …` (or carries OpenAI's
 *   `context_length_exceeded`, for proxies); `message` and `status` as above (no `status` for an
 *   event). The loop compacts the history and retries once;
 * - the event's `error.type` for an `error` event inside a 200 stream (`overloaded_error`,
 *   `api_error`, …; `PROVIDER_ERROR` without a type or for a type `ModelErrorCode` does not list,
 *   which then heads the message): no `status`; retryable for overload,
 *   rate-limit, API and timeout errors;
 * - `NETWORK` (retryable): the server could not be reached or the connection broke mid-body;
 * - `TIMEOUT` (retryable): nothing arrived within `idleTimeoutMs`;
 * - `INVALID_URL`: `baseUrl` is not a URL;
 * - `BAD_RESPONSE`: an event or body that is not JSON;
 * - `STREAM_INCOMPLETE` (retryable): the stream ended without `message_stop`;
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
 * requirement: `Anthropic.layer({...}).pipe(Layer.provide(NodeHttpClient.layerUndici))`.
 *
 * @example
 * ```ts
 * import { NodeHttpClient } from "@effect/platform-node"
 * import { Config, Effect, Layer } from "effect"
 * import { Anthropic } from "effect-agent-loop"
 *
 * const claude = Layer.unwrapEffect(Effect.map(Config.redacted("ANTHROPIC_API_KEY"), (apiKey) =>
 *   Anthropic.layer({ model: "claude-sonnet-4-5", apiKey })
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

const DEFAULT_BASE_URL = "https://api.anthropic.com"
const DEFAULT_MAX_TOKENS = 8192
const RESERVED_BODY_KEYS = ["model", "system", "messages", "tools"]

const makeWithClient = (client: HttpClient.HttpClient, options: Options): ModelService =>
  makeHttpModel(client, options, {
    span: "Anthropic.respond",
    provider: "anthropic",
    url: endpointUrl(options.baseUrl ?? DEFAULT_BASE_URL, "/v1/messages"),
    reserved: RESERVED_BODY_KEYS,
    headers: (request) => {
      const versioned = HttpClientRequest.setHeader(request, "anthropic-version", options.anthropicVersion ?? "2023-06-01")
      return options.apiKey === undefined
        ? versioned
        : HttpClientRequest.setHeader(versioned, "x-api-key", Redacted.value(options.apiKey))
    },
    fields: (request, maxTokens) => {
      let json = `,"max_tokens":${JSON.stringify(maxTokens ?? DEFAULT_MAX_TOKENS)}`
      if (request.instructions !== undefined && request.instructions !== "") {
        json += `,"system":${JSON.stringify(request.instructions)}`
      }
      json += `,"messages":[${assembleMessages(request.messages).join(",")}]`
      return request.tools.length > 0 ? json + `,"tools":${toolsJson(request.tools)}` : json
    },
    tail: () =>
      options.thinking === undefined
        ? { stream: true }
        : { stream: true, thinking: { type: "enabled", budget_tokens: options.thinking.budgetTokens } },
    httpError,
    wholeBody: messageBody,
    streamState: () => new StreamState()
  })

// ---------------------------------------------------------------------------------------------
// Request: history → alternating turns (§11), blocks cached per message object
// ---------------------------------------------------------------------------------------------

/** One piece of the history: blocks of an assistant turn, or blocks of a user turn. */
interface Piece {
  readonly assistant: boolean
  /** The blocks as JSON, joined with ","; `""` for a user-role message without any (it still ends an assistant turn). */
  readonly json: string
}

interface ResultBlock {
  readonly callId: string
  readonly json: string
  readonly block: ToolResultBlock
}

/**
 * Each assistant message's `tool_result`s in call order right after it, then the other blocks
 * of the user-role messages in log order; an assistant message with no block is left out.
 */
const WIRE: Wire<Piece, ResultBlock, Piece, Piece> = {
  convert: (message) => {
    const c = convertMessage(message)
    return c._tag === "assistant" && c.message === undefined ? undefined : c
  },
  callId: (result) => result.callId,
  assistant: (piece) => piece,
  result: (result) => ({ assistant: false, json: result.json }),
  missing: (call) => ({ assistant: false, json: resultJson(call.id, MISSING_RESULT, true) }),
  stray: (result) => ({ assistant: false, json: JSON.stringify({ type: "text", text: strayResultText(result.block) }) }),
  user: (piece) => piece
}

/**
 * The `messages` array, as one JSON string per turn: consecutive assistant pieces form one
 * assistant turn, consecutive user pieces one user turn (Anthropic's turns alternate); a turn
 * without blocks is not sent.
 */
const assembleMessages = (messages: ReadonlyArray<Message>): Array<string> => {
  const out: Array<string> = []
  let role = "user" // of the turn being built
  let blocks: Array<string> = []
  const flush = () => {
    if (blocks.length > 0) out.push(`{"role":"${role}","content":[${blocks.join(",")}]}`)
    blocks = []
  }
  for (const piece of orderHistory(messages, WIRE, "call", [])) {
    const pieceRole = piece.assistant ? "assistant" : "user"
    if (pieceRole !== role) {
      flush()
      role = pieceRole
    }
    if (piece.json !== "") blocks.push(piece.json)
  }
  flush()
  return out
}

const convertAssistant = (content: ReadonlyArray<ContentBlock>): Converted<Piece, ResultBlock, Piece> => {
  const blocks: Array<string> = []
  const calls: Array<Call> = []
  for (const block of content) {
    if (block.type === "text") {
      if (block.text !== "") blocks.push(JSON.stringify({ type: "text", text: block.text }))
    } else if (block.type === "reasoning") {
      for (const thinking of thinkingBlocks(block.text, block.providerState)) blocks.push(JSON.stringify(thinking))
    } else if (block.type === "tool-call") {
      calls.push({ id: block.id, name: block.name })
      blocks.push(
        JSON.stringify({ type: "tool_use", id: block.id, name: block.name, input: WireFormat.objectArguments(block.arguments) })
      )
    }
  }
  return { _tag: "assistant", message: blocks.length === 0 ? undefined : { assistant: true, json: blocks.join(",") }, calls }
}

/** The wire blocks a `reasoning` block stands for (none without this adapter's state). */
const thinkingBlocks = (text: string, state: unknown): ReadonlyArray<ThinkingBlock> => {
  if (!WireFormat.isRecord(state) || state.kind !== "anthropic") return []
  if (typeof state.signature === "string") return [{ type: "thinking", thinking: text, signature: state.signature }]
  if (!Array.isArray(state.blocks)) return []
  const out: Array<ThinkingBlock> = []
  for (const b of state.blocks) {
    if (!WireFormat.isRecord(b)) continue
    if (b.type === "thinking" && typeof b.thinking === "string" && typeof b.signature === "string") {
      out.push({ type: "thinking", thinking: b.thinking, signature: b.signature })
    } else if (b.type === "redacted_thinking" && typeof b.data === "string") {
      out.push({ type: "redacted_thinking", data: b.data })
    }
  }
  return out
}

const convertUser = (content: ReadonlyArray<ContentBlock>): Converted<Piece, ResultBlock, Piece> => {
  const { parts, results } = splitUser(
    content,
    (block): ResultBlock => ({ callId: block.toolCallId, json: toolResultJson(block), block }),
    (block) =>
      JSON.stringify(block.type === "text" ? { type: "text", text: block.text } : imageBlock(block.mediaType, block.data))
  )
  return { _tag: "user", results, message: { assistant: false, json: parts.join(",") } }
}

const imageBlock = (mediaType: string, data: string) => ({
  type: "image",
  source: { type: "base64", media_type: mediaType, data }
})

/**
 * `{type:"tool_result", tool_use_id, content, is_error?}`: `content` is the result's text
 * blocks joined with "\n" (omitted when empty), or an array of text and image blocks when the
 * result holds an image; `is_error: true` only for error results.
 */
const toolResultJson = (block: ToolResultBlock): string => {
  if (!block.content.some((b) => b.type === "image")) {
    return resultJson(block.toolCallId, textOf(block.content), block.isError === true)
  }
  const content: Array<unknown> = []
  for (const b of block.content) {
    if (b.type === "text" && b.text !== "") content.push({ type: "text", text: b.text })
    else if (b.type === "image") content.push(imageBlock(b.mediaType, b.data))
  }
  return JSON.stringify({
    type: "tool_result",
    tool_use_id: block.toolCallId,
    content,
    ...(block.isError === true ? { is_error: true } : {})
  })
}

const resultJson = (callId: string, text: string, isError: boolean): string =>
  JSON.stringify({
    type: "tool_result",
    tool_use_id: callId,
    ...(text === "" ? {} : { content: text }),
    ...(isError ? { is_error: true } : {})
  })

const toolsJson = WireFormat.toolsOnce((tool) => ({
  name: tool.name,
  description: tool.description,
  input_schema: WireFormat.parametersOf(tool)
}))

// ---------------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------------

type OpenBlock =
  | { readonly kind: "text" }
  | { readonly kind: "thinking"; text: string; signature: string }
  | { readonly kind: "redacted_thinking"; readonly data: string }
  | { readonly kind: "tool_use"; readonly id: string; readonly name: string; json: string }
  | { readonly kind: "other" }

/** Assembly state of one streamed response (also fed by a whole `message` body). */
class StreamState implements EventStreamState {
  done = false
  failure: ModelError | undefined = undefined
  private stopReason: string | undefined = undefined
  /**
   * The usage as sent: `message_start`'s `message.usage` with each `message_delta`'s `usage`
   * fields merged over it (cumulative counts; `null` fields skipped). Mapped once, at the end.
   */
  private rawUsage: Record<string, unknown> | undefined = undefined
  private readonly open = new Map<number, OpenBlock>()
  private calls = 0
  /**
   * The signed thinking blocks behind the loop's current reasoning block: the loop merges
   * consecutive `reasoning-delta`s into one block until a text delta or a tool call comes in
   * between (src/Agent.ts), so the state pushed last must describe all of them.
   */
  private run: Array<ThinkingBlock> = []
  /** The reasoning text pushed since the run began. */
  private runText = ""
  /** Whether the loop's last content block is a reasoning block of this response. */
  private inRun = false

  onEvent(name: string, data: string, out: Array<ModelPart>): void {
    const event = WireFormat.parseJson(data)
    if (WireFormat.isRecord(event)) this.onData(typeof event.type === "string" ? event.type : name, event, out)
    else if (event !== WireFormat.NOT_JSON) {
      this.failure = badResponse(`a stream event is not an object: ${WireFormat.truncate(data, 200)}`)
    } else if (name === "error") this.failure = opaqueError(WireFormat.truncate(data, 1000))
    else this.failure = badResponse(`malformed JSON in a stream event: ${WireFormat.truncate(data, 200)}`)
  }

  onData(type: string, event: Record<string, unknown>, out: Array<ModelPart>): void {
    switch (type) {
      case "message_start": {
        const message = event.message
        if (!WireFormat.isRecord(message)) return
        const response = WireFormat.responsePart(message.id, message.model)
        if (response !== undefined) out.push(response)
        if (WireFormat.isRecord(message.usage)) this.onUsage(message.usage)
        return
      }
      case "content_block_start": {
        const index = WireFormat.num(event.index)
        const block = event.content_block
        if (index === undefined || !WireFormat.isRecord(block)) return
        this.onBlockStart(index, block, out)
        return
      }
      case "content_block_delta": {
        const block = this.open.get(WireFormat.num(event.index) ?? -1)
        if (block !== undefined && WireFormat.isRecord(event.delta)) this.onDelta(block, event.delta, out)
        return
      }
      case "content_block_stop": {
        const index = WireFormat.num(event.index) ?? -1
        const block = this.open.get(index)
        if (block === undefined) return
        this.open.delete(index)
        this.onBlockStop(block, out)
        return
      }
      case "message_delta": {
        if (WireFormat.isRecord(event.delta) && typeof event.delta.stop_reason === "string") {
          this.stopReason = event.delta.stop_reason
        }
        if (WireFormat.isRecord(event.usage)) this.onUsage(event.usage)
        return
      }
      case "message_stop": {
        this.done = true
        return
      }
      case "error": {
        this.failure = streamError(event.error)
        return
      }
      default:
        return // ping, and event types this adapter does not know
    }
  }

  private onBlockStart(index: number, block: Record<string, unknown>, out: Array<ModelPart>): void {
    switch (block.type) {
      case "text": {
        this.open.set(index, { kind: "text" })
        this.text(WireFormat.nonEmpty(block.text), out)
        return
      }
      case "thinking": {
        this.beginThinking(out)
        const open = {
          kind: "thinking" as const,
          text: "",
          signature: typeof block.signature === "string" ? block.signature : ""
        }
        this.open.set(index, open)
        if (typeof block.thinking === "string") this.reasoning(open, block.thinking, out)
        return
      }
      case "redacted_thinking": {
        this.beginThinking(out)
        this.open.set(index, { kind: "redacted_thinking", data: typeof block.data === "string" ? block.data : "" })
        return
      }
      case "tool_use": {
        this.open.set(index, {
          kind: "tool_use",
          id: typeof block.id === "string" ? block.id : "",
          name: typeof block.name === "string" ? block.name : "",
          json: ""
        })
        return
      }
      default:
        this.open.set(index, { kind: "other" })
    }
  }

  private onDelta(block: OpenBlock, delta: Record<string, unknown>, out: Array<ModelPart>): void {
    switch (delta.type) {
      case "text_delta":
        if (block.kind === "text") this.text(WireFormat.nonEmpty(delta.text), out)
        return
      case "thinking_delta":
        if (block.kind === "thinking" && typeof delta.thinking === "string") this.reasoning(block, delta.thinking, out)
        return
      case "signature_delta":
        if (block.kind === "thinking" && typeof delta.signature === "string") block.signature += delta.signature
        return
      case "input_json_delta":
        if (block.kind === "tool_use" && typeof delta.partial_json === "string") block.json += delta.partial_json
        return
    }
  }

  private onBlockStop(block: OpenBlock, out: Array<ModelPart>): void {
    switch (block.kind) {
      case "thinking": {
        // unsigned: cannot be sent back
        if (block.signature !== "") this.signed({ type: "thinking", thinking: block.text, signature: block.signature }, out)
        return
      }
      case "redacted_thinking": {
        if (block.data !== "") this.signed({ type: "redacted_thinking", data: block.data }, out)
        return
      }
      case "tool_use": {
        this.pushCall(block, out)
        return
      }
    }
  }

  /** A signed wire block joins the run: the state of the whole run is pushed again. */
  private signed(block: ThinkingBlock, out: Array<ModelPart>): void {
    this.run.push(block)
    out.push({ type: "reasoning-delta", text: "", providerState: this.runState() })
    this.inRun = true
  }

  private text(text: string | undefined, out: Array<ModelPart>): void {
    if (text === undefined) return
    out.push({ type: "text-delta", text })
    this.endRun()
  }

  private reasoning(block: { text: string }, text: string, out: Array<ModelPart>): void {
    if (text === "") return
    block.text += text
    out.push({ type: "reasoning-delta", text })
    this.runText += text
    this.inRun = true
  }

  /**
   * A thinking block starts. When it joins a reasoning block the loop already holds with a
   * state, that state becomes the `blocks` form now, so that a stream cut inside the new block
   * leaves a state that still matches what Anthropic signed.
   */
  private beginThinking(out: Array<ModelPart>): void {
    if (!this.inRun) {
      this.endRun()
      return
    }
    if (this.run.length === 1 && this.run[0]!.type === "thinking" && this.run[0]!.thinking === this.runText) {
      out.push({ type: "reasoning-delta", text: "", providerState: { kind: "anthropic", blocks: this.run.slice() } })
    }
  }

  private runState(): ThinkingState {
    const only = this.run.length === 1 ? this.run[0]! : undefined
    return only !== undefined && only.type === "thinking" && only.thinking === this.runText
      ? { kind: "anthropic", signature: only.signature }
      : { kind: "anthropic", blocks: this.run.slice() }
  }

  private endRun(): void {
    this.run = []
    this.runText = ""
    this.inRun = false
  }

  private pushCall(block: { readonly id: string; readonly name: string; readonly json: string }, out: Array<ModelPart>): void {
    out.push({ type: "tool-call", id: block.id, name: block.name, rawArguments: block.json === "" ? "{}" : block.json })
    this.calls++
    this.endRun()
  }

  private onUsage(usage: Record<string, unknown>): void {
    const base = this.rawUsage
    if (base === undefined) {
      this.rawUsage = usage
      return
    }
    const merged: Record<string, unknown> = { ...base }
    for (const key in usage) {
      const value = usage[key]
      if (value !== null && value !== undefined) merged[key] = value
    }
    this.rawUsage = merged
  }

  /** End of the body: tool calls still open (unless truncated), usage, one finish; or a failure. */
  finish(out: Array<ModelPart>): void {
    if (this.failure !== undefined) return
    if (!this.done) {
      this.failure = new ModelError({
        code: "STREAM_INCOMPLETE",
        message: this.stopReason === undefined
          ? "the response stream ended without message_stop"
          : `the response stream ended without message_stop (stop_reason ${this.stopReason})`,
        retryable: true
      })
      return
    }
    const truncated = this.stopReason === "max_tokens" || this.stopReason === "model_context_window_exceeded"
    if (!truncated) {
      // A tool_use never closed although the response was not cut: push what arrived.
      const left = [...this.open.entries()].sort((a, b) => a[0] - b[0])
      for (const [, block] of left) if (block.kind === "tool_use") this.pushCall(block, out)
    }
    this.open.clear()
    const raw = this.rawUsage
    if (raw !== undefined) {
      const usage = mapUsage(raw)
      if (usage !== undefined) out.push({ type: "usage", usage, raw })
    }
    out.push({ type: "finish", reason: mapStopReason(this.stopReason, this.calls > 0) })
  }
}

/**
 * A whole `message` JSON body (a proxy that answered without streaming): replayed through the
 * same assembly as the stream, so the parts are the ones the stream would have given.
 */
const messageBody = (body: Record<string, unknown>, sink: ModelSink): Effect.Effect<void, ModelError> =>
  Effect.suspend(() => {
    if (body.type === "error") return Effect.fail(streamError(body.error))
    if (!Array.isArray(body.content)) return Effect.fail(badResponse("the response body is not a message"))
    const state = new StreamState()
    const out: Array<ModelPart> = []
    state.onData("message_start", { message: { id: body.id, model: body.model, usage: body.usage } }, out)
    body.content.forEach((block: unknown, index) => {
      if (!WireFormat.isRecord(block)) return
      const start = block.type === "tool_use" ? { ...block, input: {} } : block
      state.onData("content_block_start", { index, content_block: start }, out)
      if (block.type === "tool_use" && block.input !== undefined) {
        const partial_json = JSON.stringify(block.input)
        state.onData("content_block_delta", { index, delta: { type: "input_json_delta", partial_json } }, out)
      }
      state.onData("content_block_stop", { index }, out)
    })
    state.onData("message_delta", { delta: { stop_reason: body.stop_reason } }, out)
    state.onData("message_stop", {}, out)
    state.finish(out)
    return state.failure === undefined ? pushAll(sink, out) : Effect.fail(state.failure)
  })

/**
 * The normalized usage of Anthropic's usage object (the module's notes): `input_tokens` excludes
 * the cache, so `inputTokens` = `input_tokens + cache_creation_input_tokens +
 * cache_read_input_tokens`; `cacheWriteTokens` = `cache_creation_input_tokens`, `cacheReadTokens`
 * = `cache_read_input_tokens`, `outputTokens` = `output_tokens` (thinking included),
 * `reasoningTokens` 0 (not reported apart). `undefined` when it holds no count.
 */
const mapUsage = (u: Record<string, unknown>): Usage | undefined => {
  const input = WireFormat.num(u.input_tokens)
  const write = WireFormat.num(u.cache_creation_input_tokens)
  const read = WireFormat.num(u.cache_read_input_tokens)
  return WireFormat.normalizedUsage({
    inputTokens: input === undefined && write === undefined && read === undefined
      ? undefined
      : (input ?? 0) + (write ?? 0) + (read ?? 0),
    outputTokens: WireFormat.num(u.output_tokens),
    cacheReadTokens: read,
    cacheWriteTokens: write
  })
}

/**
 * `tool_use` → `tool-calls`, `max_tokens` (and `model_context_window_exceeded`) → `length`,
 * `refusal` → `content-filter`; anything else (`end_turn`, `stop_sequence`, `pause_turn`, none)
 * → `stop`, or, as in the other adapters, `tool-calls` when the response has tool calls.
 */
const mapStopReason = (reason: string | undefined, hasToolCalls: boolean): FinishReason => {
  switch (reason) {
    case "tool_use":
      return "tool-calls"
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "refusal":
      return "content-filter"
    default:
      return WireFormat.stopOrToolCalls(hasToolCalls)
  }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

const RETRYABLE_TYPES = new Set(["overloaded_error", "rate_limit_error", "api_error", "timeout_error"])

/**
 * Anthropic's documented error types: the codes the adapter keeps, the third member of
 * `ModelErrorCode` (one list, there).
 */
const ERROR_TYPES: ReadonlySet<string> = new Set<ModelErrorCode>(ModelErrorCode.members[2].literals)

/** `type` when it is one of Anthropic's documented error types, else undefined. */
const knownType = (type: string | undefined): ModelErrorCode | undefined =>
  type !== undefined && ERROR_TYPES.has(type) ? type as ModelErrorCode : undefined

/** `message` prefixed with an error type the adapter does not keep as the code. */
const withType = (type: string | undefined, message: string): string =>
  type === undefined || knownType(type) !== undefined ? message : `${type}: ${message}`

/**
 * An `error` event in a 200 stream (or an error body): code `error.type` when it is one of
 * Anthropic's documented types, else `PROVIDER_ERROR` with the type before the message
 * (`CONTEXT_OVERFLOW` when the message says the prompt is too long), no status.
 */
const streamError = (error: unknown): ModelError => {
  if (!WireFormat.isRecord(error)) return opaqueError(typeof error === "string" ? error : "provider error")
  const type = WireFormat.nonEmpty(error.type)
  return new ModelError(overflowOr(
    {
      code: knownType(type) ?? "PROVIDER_ERROR",
      message: withType(type, typeof error.message === "string" ? error.message : JSON.stringify(error)),
      retryable: type !== undefined && RETRYABLE_TYPES.has(type)
    },
    error,
    undefined
  ))
}

/**
 * A non-2xx answer: Anthropic's `{type:"error", error:{type, message}, request_id}` envelope,
 * code `error.type` when it is one of Anthropic's documented types, else `HTTP_<status>` with the
 * type before the message; `CONTEXT_OVERFLOW` for a 400 or 413 whose message says the prompt is
 * too long.
 */
const httpError = (response: HttpClientResponse.HttpClientResponse, text: string, now: number): ModelError => {
  const status = response.status
  const body = WireFormat.parseJsonOr(text)
  const error = WireFormat.isRecord(body) && WireFormat.isRecord(body.error) ? body.error : undefined
  const type = error === undefined ? undefined : WireFormat.nonEmpty(error.type)
  let message = withType(type, error !== undefined && typeof error.message === "string" ? error.message : errorText(text, status))
  const requestId = (WireFormat.isRecord(body) ? WireFormat.nonEmpty(body.request_id) : undefined) ??
    response.headers["request-id"]
  if (requestId !== undefined) message += ` (request_id ${requestId})`
  const shouldRetry = response.headers["x-should-retry"]
  return statusError(
    response,
    now,
    overflowOr(
      {
        code: knownType(type) ?? `HTTP_${status}`,
        message,
        retryable: shouldRetry === "true" ? true : shouldRetry === "false" ? false : isRetryableStatus(status)
      },
      body,
      status
    )
  )
}

const convertMessage = convertOnce<Converted<Piece, ResultBlock, Piece>>(convertAssistant, convertUser)
