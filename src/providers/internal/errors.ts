/**
 * Reading the error objects of OpenAI-style APIs (`{error: {type, code, message, param}}`, as
 * Chat Completions servers, Ollama, vLLM and the Responses API send them) into what a
 * `ModelError` shows: the message, `type: message (param …)`, and whether the error is worth
 * retrying (a retryable HTTP status as its numeric code, or a type naming an overload, a rate
 * limit, a timeout or a server error; §11). Shared by `OpenAICompat` and `AiBridge`.
 * Also the recognition of a request longer than the model's context window, `CONTEXT_OVERFLOW`
 * (§17), shared by all three adapters.
 */
import type { ModelErrorCode } from "../../Model.js"
import { isRetryableStatus } from "./http.js"
import { isRecord, nonEmpty, num } from "./wire.js"

const RETRYABLE_TYPE = /overload|rate.?limit|server.?error|timeout|unavailable|internal/i

/** The object inside an `{error: {...}}` envelope, else the value itself. */
export const innerError = (error: unknown): unknown => isRecord(error) && isRecord(error.error) ? error.error : error

/** `label: message (param …)`; the message is `error.message`, else the object as JSON. */
export const labelledMessage = (error: Record<string, unknown>, label: string | undefined): string => {
  const message = typeof error.message === "string" ? error.message : JSON.stringify(error)
  const param = nonEmpty(error.param) !== undefined ? ` (param ${error.param})` : ""
  return (label === undefined ? message : `${label}: ${message}`) + param
}

/** `type: message (param …)` from an OpenAI-style error object (`code` when it has no `type`). */
export const describeError = (error: Record<string, unknown>): string =>
  labelledMessage(error, nonEmpty(error.type) ?? nonEmpty(error.code))

/**
 * Whether an error object is worth retrying: its numeric `code` (or `status`) is a retryable
 * HTTP status; without one, its `label` (type or code) names a transient failure.
 */
export const isRetryableError = (error: Record<string, unknown>, label: string | undefined): boolean => {
  const numeric = num(error.code) ?? num(error.status)
  return numeric !== undefined ? isRetryableStatus(numeric) : label !== undefined && RETRYABLE_TYPE.test(label)
}

/**
 * The message of a non-2xx answer's parsed body: `{error: {...}}` (OpenAI), `{error: "…"}`
 * (Ollama) or a top-level `{message, type}` (vLLM); `undefined` for any other body.
 */
export const bodyMessage = (body: unknown): string | undefined => {
  if (!isRecord(body)) return undefined
  if (isRecord(body.error)) return describeError(body.error)
  if (typeof body.error === "string") return body.error
  return typeof body.message === "string" ? describeError(body) : undefined
}

/**
 * The `ModelError` code of a request the provider refused because it is longer than the model's
 * context window (§17): not retryable, the loop compacts and retries once.
 */
export const CONTEXT_OVERFLOW = "CONTEXT_OVERFLOW"

/**
 * The messages that say so, each a provider's own phrasing:
 * - OpenAI, DeepSeek, vLLM: `This model's maximum context length is 128000 tokens. However, …`;
 * - Anthropic: `prompt is too long: 210000 tokens > 200000 maximum`, and
 *   `input length and \`max_tokens\` exceed context limit: 197000 + 8192 > 200000, …`.
 */
const OVERFLOW_MESSAGES: ReadonlyArray<RegExp> = [
  /maximum context length is [\d,]+ tokens/i,
  /prompt is too long: [\d,]+ tokens > [\d,]+ maximum/i,
  /input length and `?max_tokens`? exceed context limit: [\d,]+ \+ [\d,]+ > [\d,]+/i
]

/** The `code` or `type` values that say so: OpenAI's and llama.cpp server's. */
const OVERFLOW_IDS: ReadonlySet<string> = new Set(["context_length_exceeded", "exceed_context_size_error"])

const isOverflowMessage = (message: unknown): boolean =>
  typeof message === "string" && OVERFLOW_MESSAGES.some((pattern) => pattern.test(message))

/**
 * Whether an error body or error object (inside an `{error: ...}` envelope or not, or a bare
 * string) says the request is longer than the model's context window: its `code` or `type` is
 * `context_length_exceeded` (OpenAI) or `exceed_context_size_error` (llama.cpp server), or its
 * message has one of the phrasings of OpenAI, DeepSeek, vLLM (`maximum context length is N
 * tokens`) or Anthropic (`prompt is too long: N tokens > M maximum`, `input length and
 * \`max_tokens\` exceed context limit: …`). Nothing else matches: a rate limit on tokens per
 * minute (`rate_limit_exceeded`) or Anthropic's byte limit (`request_too_large`) is not one.
 */
export const isContextOverflow = (error: unknown): boolean => {
  const inner = innerError(error)
  if (!isRecord(inner)) return isOverflowMessage(inner)
  const ids = [inner.code, inner.type]
  return ids.some((id) => typeof id === "string" && OVERFLOW_IDS.has(id)) || isOverflowMessage(inner.message)
}

/** What an adapter makes a `ModelError` of (with `statusError`, or `new ModelError`). */
export interface ErrorFields {
  readonly code: ModelErrorCode
  readonly message: string
  readonly retryable: boolean
}

/**
 * `fields` with code `CONTEXT_OVERFLOW` and `retryable: false` (the message kept) when `body`
 * says the request is longer than the context window (`isContextOverflow`) and `status` is 400
 * or 413 (the statuses providers refuse it with) or `undefined` (an error inside a 200 response,
 * e.g. a streamed `error` event); else `fields` as they are.
 */
export const overflowOr = (fields: ErrorFields, body: unknown, status: number | undefined): ErrorFields =>
  (status === undefined || status === 400 || status === 413) && isContextOverflow(body)
    ? { code: CONTEXT_OVERFLOW, message: fields.message, retryable: false }
    : fields
