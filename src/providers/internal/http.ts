/**
 * The HTTP side shared by the provider adapters (`OpenAICompat`, `Anthropic`, and `AiBridge` for
 * what `@effect/ai` reports of HTTP): the endpoint URL, one request with a timeout on the
 * response headers and an optional early retry, and the mapping of transport failures, timeouts,
 * non-2xx statuses and `retry-after` headers to `ModelError` (DESIGN.md §11). API keys live only
 * in request headers: nothing here puts a header into a message or into an error's `cause`.
 */
import type { HttpClient, HttpClientError, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Effect, Schedule } from "effect"
import { ModelError, type ModelSink } from "../../Model.js"
import { truncate } from "./wire.js"

/** `${baseUrl}${path}`, ignoring a trailing `/` of `baseUrl` and keeping its query string. */
export const endpointUrl = (baseUrl: string, path: string): string => {
  try {
    const url = new URL(baseUrl)
    url.pathname = url.pathname.replace(/\/+$/, "") + path
    return url.toString()
  } catch {
    return baseUrl.replace(/\/+$/, "") + path
  }
}

/**
 * A URL as error messages show it: without credentials (`user:password@`) and without its query
 * string (gateways put keys there), so that no secret reaches a message, a log or a terminal.
 */
export const displayUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.username === "" && parsed.password === "" && parsed.search === "") return url
    parsed.username = ""
    parsed.password = ""
    const hadQuery = parsed.search !== ""
    parsed.search = ""
    return parsed.toString() + (hadQuery ? "?…" : "")
  } catch {
    return "(an invalid URL)"
  }
}

/** How long an adapter waits for the response headers, then for each next piece (ms). */
export const DEFAULT_IDLE_TIMEOUT_MS = 120_000

/** Where and how one adapter sends its requests. */
export interface Endpoint {
  readonly client: HttpClient.HttpClient
  /** The provider name, used in error messages. */
  readonly provider: string
  readonly url: string
  readonly idleTimeoutMs: number
  /** From `retrySchedule`; `undefined` for no early retry. */
  readonly retry: Schedule.Schedule<unknown, ModelError> | undefined
}

/**
 * The user's retry schedule, each delay at least the failure's `retryAfterMs`; `undefined`
 * stays `undefined` (no early retry: the loop's step retry handles it, DESIGN.md §11).
 */
export const retrySchedule = (
  retry: Schedule.Schedule<unknown, ModelError> | undefined
): Schedule.Schedule<unknown, ModelError> | undefined =>
  retry === undefined ? undefined : Schedule.intersect(
    retry,
    Schedule.addDelay(Schedule.identity<ModelError>(), (e) => e.retryAfterMs ?? 0)
  )

/**
 * Executes `request` and hands the response to `handle`. The response headers must arrive
 * within `idleTimeoutMs` (else `TIMEOUT`). With a retry schedule, a `retryable` failure is
 * retried only while no part has reached `sink` (a retry after that would repeat deltas).
 */
export const send = (
  endpoint: Endpoint,
  request: HttpClientRequest.HttpClientRequest,
  sink: ModelSink,
  handle: (response: HttpClientResponse.HttpClientResponse, sink: ModelSink) => Effect.Effect<void, ModelError>
): Effect.Effect<void, ModelError> => {
  const { client, idleTimeoutMs, provider, retry } = endpoint
  const url = displayUrl(endpoint.url)
  let emitted = false
  const guarded: ModelSink = retry === undefined ? sink : {
    part: (part) => {
      emitted = true
      return sink.part(part)
    }
  }
  const attempt = Effect.flatMap(
    Effect.mapError(client.execute(request), (e) => transportError(e, provider, url)).pipe(
      Effect.timeoutFail({
        duration: idleTimeoutMs,
        onTimeout: () => timeoutError(provider, url, idleTimeoutMs, "the response headers")
      })
    ),
    (response) => handle(response, guarded)
  )
  return retry === undefined ? attempt : Effect.retry(attempt, { schedule: retry, while: (e) => e.retryable && !emitted })
}

/** HTTP statuses worth retrying: 408, 409, 429 and 5xx (Anthropic's 529 "overloaded" included). */
export const isRetryableStatus = (status: number): boolean => status === 408 || status === 409 || status === 429 || status >= 500

/** `retry-after-ms` (milliseconds) or `retry-after` (seconds, or an HTTP date), in ms. */
export const retryAfter = (
  headers: { readonly [name: string]: string | undefined },
  now: number
): number | undefined => {
  const ms = headers["retry-after-ms"]
  if (ms !== undefined) {
    const n = Number(ms)
    if (ms.trim() !== "" && Number.isFinite(n) && n >= 0) return n
  }
  const value = headers["retry-after"]
  if (value === undefined || value.trim() === "") return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1000 : undefined
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

/**
 * A non-2xx answer as a `ModelError` with the adapter's `code`, `message` and `retryable`:
 * `status` set, `retryAfterMs` from the headers (`retryAfter`, against `now` in ms).
 */
export const statusError = (
  response: { readonly status: number; readonly headers: { readonly [name: string]: string | undefined } },
  now: number,
  error: { readonly code: string; readonly message: string; readonly retryable: boolean }
): ModelError => {
  const retryAfterMs = retryAfter(response.headers, now)
  return new ModelError({
    code: error.code,
    message: error.message,
    status: response.status,
    retryable: error.retryable,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs })
  })
}

const MAX_ERROR_BODY = 64 * 1024

/** The body of an error response, at most 64 KiB; `""` when it cannot be read. */
export const readErrorBody = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<string> =>
  response.text.pipe(
    Effect.map((text) => text.length > MAX_ERROR_BODY ? text.slice(0, MAX_ERROR_BODY) : text),
    Effect.orElseSucceed(() => "")
  )

/**
 * An error body as the message, when it holds none the adapter can read: trimmed, cut at 1,000
 * characters; `HTTP <status>` when empty.
 */
export const errorText = (text: string, status: number): string =>
  text.trim() === "" ? `HTTP ${status}` : truncate(text.trim(), 1000)

/** No response headers, or no next body piece, within `idleTimeoutMs`: code `TIMEOUT`, retryable. */
export const timeoutError = (provider: string, url: string, ms: number, waitingFor: string): ModelError =>
  new ModelError({
    code: "TIMEOUT",
    message: `${provider}: no answer from ${url} within ${ms} ms (waiting for ${waitingFor})`,
    retryable: true
  })

/**
 * The `cause` a `ModelError` keeps of an `HttpClientError`: the transport's own error, never the
 * `HttpClientError` itself, whose `request` holds the headers (the API key) in the clear when
 * printed outside a fiber or serialized with `JSON.stringify`.
 */
const safeCause = (error: HttpClientError.HttpClientError): { readonly cause?: unknown } =>
  error.cause === undefined ? {} : { cause: error.cause }

/** The request could not be sent: `INVALID_URL`, else `NETWORK` (retryable). */
export const transportError = (error: HttpClientError.HttpClientError, provider: string, url: string): ModelError =>
  error._tag === "RequestError" && error.reason === "InvalidUrl"
    ? new ModelError({ code: "INVALID_URL", message: `${provider}: invalid URL ${url}`, retryable: false, ...safeCause(error) })
    : new ModelError({
      code: "NETWORK",
      message: `${provider}: cannot reach ${url}: ${causeMessage(error)}`,
      retryable: true,
      ...safeCause(error)
    })

/** The connection broke while reading a response: `NETWORK`, retryable. */
export const networkError = (error: HttpClientError.HttpClientError, doing: string): ModelError =>
  new ModelError({
    code: "NETWORK",
    message: `connection failed while ${doing}: ${causeMessage(error)}`,
    retryable: true,
    ...safeCause(error)
  })

const causeMessage = (error: HttpClientError.HttpClientError): string => {
  const cause: unknown = error.cause
  if (cause instanceof Error) {
    const inner: unknown = cause.cause
    return inner instanceof Error && inner.message !== "" ? `${cause.message} (${inner.message})` : cause.message
  }
  return error.message
}

/** An error the provider reported with nothing more to read than `message`: `PROVIDER_ERROR`, not retryable. */
export const opaqueError = (message: string): ModelError => new ModelError({ code: "PROVIDER_ERROR", message, retryable: false })

/** A body or event the adapter cannot read: `BAD_RESPONSE`, not retryable. */
export const badResponse = (message: string): ModelError => new ModelError({ code: "BAD_RESPONSE", message, retryable: false })
