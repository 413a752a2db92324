/**
 * Reading the error objects of OpenAI-style APIs (`{error: {type, code, message, param}}`, as
 * Chat Completions servers, Ollama, vLLM and the Responses API send them) into what a
 * `ModelError` shows: the message, `type: message (param …)`, and whether the error is worth
 * retrying (a retryable HTTP status as its numeric code, or a type naming an overload, a rate
 * limit, a timeout or a server error; DESIGN.md §11). Shared by `OpenAICompat` and `AiBridge`.
 */
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
