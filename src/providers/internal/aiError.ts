/**
 * What `@effect/ai` reports as a failure, as the `ModelError` that `AiBridge` fails with
 * (§11): an `error` part of the response stream (OpenAI-style error objects, read by
 * `errors.ts`) and each `AiError` (HTTP statuses with `retry-after`, transport failures, requests
 * that cannot be built, responses `@effect/ai` could not decode, with the tool call it rejected
 * when there is one), with `CONTEXT_OVERFLOW` for a request longer than the model's context
 * window (`errors.ts`, §17). An `HttpRequestError`/`HttpResponseError` is never kept as
 * `cause`: it holds the request headers, API key included, in the clear. Used by `AiBridge` only
 * (it is the only module that may load `@effect/ai`; this one needs its types alone).
 */
import type * as AiError from "@effect/ai/AiError"
import { Clock, Effect } from "effect"
import { ModelError, type ToolDefinition } from "../../Model.js"
import { bodyMessage, innerError, isRetryableError, labelledMessage, overflowOr } from "./errors.js"
import { displayUrl, errorText, fromUrl, isRetryableStatus, opaqueError, statusError } from "./http.js"
import { isRecord, nonEmpty, parseJsonOr, truncate } from "./wire.js"

/** An `error` part of the stream (for `@effect/ai-openai`: the Responses `error` event). */
export const streamError = (error: unknown, provider: string): ModelError => {
  const inner = innerError(error)
  if (!isRecord(inner)) return opaqueError(`${provider}: ${typeof inner === "string" ? inner : "the provider reported an error"}`)
  // The Responses API's `error` event has `type: "error"`: its `code` names the error.
  const label = nonEmpty(inner.code) ?? (inner.type === "error" ? undefined : nonEmpty(inner.type))
  return new ModelError(overflowOr(
    {
      code: "PROVIDER_ERROR",
      message: labelledMessage(inner, label),
      retryable: isRetryableError(inner, label)
    },
    inner,
    undefined
  ))
}

/**
 * An `AiError` as a `ModelError`. The `HttpRequestError`/`HttpResponseError` themselves are
 * never kept as `cause`: they hold the request headers, API key included, in the clear.
 */
export const fromAiError = (
  error: AiError.AiError,
  provider: string,
  tools: ReadonlyArray<ToolDefinition>
): Effect.Effect<ModelError> => {
  switch (error._tag) {
    case "HttpResponseError":
      return Effect.map(Clock.currentTimeMillis, (now) => fromResponseError(error, provider, now))
    case "HttpRequestError": {
      const transport = isRecord(error.cause) ? error.cause.cause : undefined
      const cause = transport === undefined ? {} : { cause: transport }
      const target = `${error.request.method} ${displayUrl(error.request.url)}`
      if (error.reason === "Transport") {
        const detail = transport instanceof Error && transport.message !== "" ? transport.message : error.description
        return Effect.succeed(
          new ModelError({
            code: "NETWORK",
            message: `${provider}: cannot reach ${target}${detail === undefined ? "" : `: ${detail}`}`,
            retryable: true,
            ...cause
          })
        )
      }
      return Effect.succeed(
        new ModelError({
          code: error.reason === "InvalidUrl" ? "INVALID_URL" : "INVALID_REQUEST",
          message: `${provider}: ${error.reason === "InvalidUrl" ? "invalid URL" : "cannot encode the request"} ${target}${
            error.description === undefined ? "" : `: ${error.description}`
          }`,
          retryable: false,
          ...cause
        })
      )
    }
    case "MalformedInput":
    case "MalformedOutput":
    case "UnknownError": {
      const call = error._tag === "MalformedOutput" ? rejectedToolCall(error.cause) : undefined
      if (call !== undefined) {
        const name = String(call.name)
        const callId = String(call.id)
        return Effect.succeed(
          new ModelError({
            code: "MALFORMED_OUTPUT",
            message: tools.some((t) => t.name === name)
              ? `${provider}: @effect/ai rejected the response: tool call ${callId} (${name}) has arguments that are not a JSON object`
              : `${provider}: @effect/ai rejected the response: it calls tool "${name}", which is not among the request's tools`,
            retryable: false,
            cause: error
          })
        )
      }
      const detail = error.description ?? causeText(error.cause)
      return Effect.succeed(
        new ModelError({
          code: error._tag === "MalformedInput"
            ? "MALFORMED_INPUT"
            : error._tag === "MalformedOutput"
            ? "MALFORMED_OUTPUT"
            : "PROVIDER_ERROR",
          message: `${provider}: ${error.module}.${error.method}: ${detail ?? error._tag}`,
          retryable: false,
          cause: error
        })
      )
    }
  }
}

const fromResponseError = (error: AiError.HttpResponseError, provider: string, now: number): ModelError => {
  const status = error.response.status
  if (error.reason !== "StatusCode") {
    // The body could not be read (connection broken mid-body) or was empty.
    const what = error.reason === "EmptyBody" ? "an empty body" : "a broken body"
    return new ModelError({
      code: error.reason === "EmptyBody" ? "BAD_RESPONSE" : "NETWORK",
      message: `${provider}: ${what} from ${error.request.method} ${displayUrl(error.request.url)} (HTTP ${status})${
        error.description === undefined ? "" : `: ${error.description}`
      }`,
      retryable: error.reason === "Decode"
    })
  }
  const body = error.body === undefined ? undefined : parseJsonOr(error.body)
  const withUrl = statusError(
    error.response,
    now,
    overflowOr(
      {
        code: `HTTP_${status}`,
        message: httpMessage(error.body, body, status),
        retryable: isRetryableStatus(status)
      },
      body,
      status
    )
  )
  return fromUrl(withUrl, status, displayUrl(error.request.url))
}

/**
 * The provider's error message from a response body (`text`, and `parsed`, it parsed as JSON
 * or the text itself), else `HTTP <status>`.
 */
const httpMessage = (text: string | undefined, parsed: unknown, status: number): string => {
  if (text === undefined || text.trim() === "") return `HTTP ${status}`
  // A text body arrives as a JSON string (`Inspectable.format`).
  return bodyMessage(parsed) ?? errorText(typeof parsed === "string" ? parsed : text, status)
}

/**
 * The tool-call part that `@effect/ai`'s decoding of the stream rejected (an unknown tool name,
 * or parameters its schema refused), found in the `ParseError`'s issue tree; else `undefined`.
 */
const rejectedToolCall = (cause: unknown): Record<string, unknown> | undefined => {
  const visit = (issue: unknown, depth: number): Record<string, unknown> | undefined => {
    if (!isRecord(issue) || depth > 16) return undefined
    const actual = issue.actual
    if (isRecord(actual) && actual.type === "tool-call") return actual
    for (const key of ["issue", "issues"]) {
      const inner = issue[key]
      const list: ReadonlyArray<unknown> = Array.isArray(inner) ? inner : [inner]
      for (const item of list) {
        const found = visit(item, depth + 1)
        if (found !== undefined) return found
      }
    }
    return undefined
  }
  return isRecord(cause) && cause._tag === "ParseError" ? visit(cause.issue, 0) : undefined
}

const causeText = (cause: unknown): string | undefined =>
  cause instanceof Error && cause.message !== "" ? truncate(cause.message, 1000) : undefined
