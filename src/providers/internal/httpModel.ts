/**
 * What the HTTP provider adapters (`OpenAICompat`, `Anthropic`) have in common, as one
 * constructor of their `ModelService` (§11): the shared options and their defaults;
 * the fixed part of every request (`POST` to the adapter's URL, the user's headers, then the
 * adapter's own, the user's extra body fields minus the adapter's reserved ones); the settings
 * in the body (`maxTokens` and `temperature` from the request settings, else the options;
 * `top_p` from the settings; the extra fields last); and the respond path: `send` (timeout,
 * early retry), then a non-2xx answer becomes the adapter's error, a JSON body is read whole by
 * the adapter, anything else is read as an event stream into the adapter's assembly state. An
 * adapter says only what differs (`Adapter`).
 *
 * The limits of every request (§23), the same for every adapter:
 * - `idleTimeoutMs` (default 120,000): for the response headers, then between two pieces of the
 *   body that are progress (SSE comments such as `: ping` are not); `TIMEOUT`, retryable.
 * - `requestTimeoutMs` (default 600,000): the whole model request, its retries included: the
 *   deadline starts at the first `respond` of a `ModelRequest` object and holds for each later
 *   `respond` of the same object after a retryable failure (the loop retries a step that way,
 *   and so does the `retry` option); `DEADLINE_EXCEEDED`, not retryable. A success, a final
 *   failure or an interruption ends it. Without `retry` the waits of the attempt keep it (the
 *   response headers, then the body's watchdog, `http.ts` `Deadline`), not a timeout around the
 *   attempt (two fibers more per request); the parts pushed into the sink after the body's end
 *   are then not timed (the loop's sink takes them synchronously).
 * - `maxRetryAfterMs` (default 60,000): a retryable error whose `retry-after` asks for longer is
 *   made final (`retryable: false`, `retryAfterMs` kept, the message saying so) instead of being
 *   slept on; a wait within the cap is logged (`Effect.logWarning`) before any sleep.
 * - `maxResponseBytes` (default 16 MiB): the bytes of a body read, streamed or whole; past it
 *   reading stops, the connection is released, `RESPONSE_TOO_LARGE`, not retryable (the loop
 *   withdraws the deltas already pushed: no partial message is logged). An error body is read
 *   up to 64 KiB only.
 * - Every error message is passed through `redactSecrets` (the configured key, `Bearer …`,
 *   `sk-…`-shaped tokens) before `respond` fails with it.
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Cause, Clock, Effect, Exit, Option, Redacted, type Schedule } from "effect"
import { isTraced } from "../../internal/tracing.js"
import { Model, type ModelError, type ModelRequest, type ModelService, type ModelSink } from "../../Model.js"
import {
  badResponse,
  type BodyLimits,
  capRetryAfter,
  deadlineError,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_MAX_RETRY_AFTER_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  displayUrl,
  fromUrl,
  readErrorBody,
  readText,
  redactError,
  retrySchedule,
  send
} from "./http.js"
import { type EventStreamState, streamEvents } from "./sse.js"
import { isRecord, numberSetting, parseJsonOr, truncate } from "./wire.js"

/**
 * The options every HTTP adapter takes; each adapter's `Options` extends them and documents
 * them (with what its provider makes of them).
 */
export interface HttpOptions {
  readonly model: string
  readonly apiKey?: Redacted.Redacted<string> | undefined
  readonly provider?: string | undefined
  readonly maxTokens?: number | undefined
  readonly temperature?: number | undefined
  readonly headers?: { readonly [name: string]: string } | undefined
  readonly extraBody?: { readonly [key: string]: unknown } | undefined
  readonly retry?: Schedule.Schedule<unknown, ModelError> | undefined
  readonly idleTimeoutMs?: number | undefined
  readonly requestTimeoutMs?: number | undefined
  readonly maxRetryAfterMs?: number | undefined
  readonly maxResponseBytes?: number | undefined
}

/** What one HTTP adapter adds to the common part. */
export interface Adapter {
  /** The span of `respond`, e.g. `"OpenAICompat.respond"`. */
  readonly span: string
  /** The provider name when the options give none. */
  readonly provider: string
  readonly url: string
  /** Body fields `extraBody` may not set. */
  readonly reserved: ReadonlyArray<string>
  /** The adapter's own headers (authentication, version), set after the user's `headers`. */
  readonly headers: (request: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest
  /**
   * The body's fields after `model`, as JSON text that starts with `,` (messages, tools, …);
   * `maxTokens` is `request.settings.maxTokens`, else the option, else `undefined`.
   */
  readonly fields: (request: ModelRequest, maxTokens: number | undefined) => string
  /** The first fields of the body's tail (`stream`, …); `temperature`, `top_p` and `extraBody` follow. */
  readonly tail: (request: ModelRequest, maxTokens: number | undefined) => Record<string, unknown>
  /** A non-2xx answer, given its body (at most 64 KiB, `""` when unreadable) and the time in ms. */
  readonly httpError: (response: HttpClientResponse.HttpClientResponse, text: string, now: number) => ModelError
  /** A whole JSON object body (a server that answered without streaming), pushed into `sink`. */
  readonly wholeBody: (body: Record<string, unknown>, sink: ModelSink) => Effect.Effect<void, ModelError>
  /** A fresh assembly state for one streamed response. */
  readonly streamState: () => EventStreamState
}

/** The adapter's `ModelService` over `client`. */
export const makeHttpModel = (client: HttpClient.HttpClient, options: HttpOptions, adapter: Adapter): ModelService => {
  const provider = options.provider ?? adapter.provider
  const idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS
  const requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS
  const maxRetryAfterMs = options.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS
  const url = adapter.url
  const shownUrl = displayUrl(url)
  const limits: BodyLimits = {
    provider,
    url: shownUrl,
    idleTimeoutMs,
    maxBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
  }
  const secrets = options.apiKey === undefined ? [] : [Redacted.value(options.apiKey)]
  const modelJson = JSON.stringify(options.model)
  const extraBody: Record<string, unknown> = {}
  if (options.extraBody !== undefined) {
    for (const key of Object.keys(options.extraBody)) {
      if (!adapter.reserved.includes(key)) extraBody[key] = options.extraBody[key]
    }
  }
  let baseRequest = HttpClientRequest.post(url)
  if (options.headers !== undefined) baseRequest = HttpClientRequest.setHeaders(baseRequest, options.headers)
  baseRequest = adapter.headers(baseRequest)
  const endpoint = { client, provider, url, idleTimeoutMs, retry: retrySchedule(options.retry) }

  const buildBody = (request: ModelRequest): string => {
    const settings = request.settings
    const maxTokens = numberSetting(settings, "maxTokens") ?? options.maxTokens
    const tail = adapter.tail(request, maxTokens)
    const temperature = numberSetting(settings, "temperature") ?? options.temperature
    if (temperature !== undefined) tail.temperature = temperature
    const topP = numberSetting(settings, "topP")
    if (topP !== undefined) tail.top_p = topP
    for (const key in extraBody) tail[key] = extraBody[key]
    const body = `{"model":${modelJson}${adapter.fields(request, maxTokens)}`
    const tailJson = JSON.stringify(tail)
    return tailJson === "{}" ? body + "}" : body + "," + tailJson.slice(1)
  }

  const handleResponse = (
    response: HttpClientResponse.HttpClientResponse,
    sink: ModelSink,
    limits: BodyLimits
  ): Effect.Effect<void, ModelError> => {
    if (response.status < 200 || response.status >= 300) {
      return Effect.flatMap(readErrorBody(response, limits), (text) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const error = capRetryAfter(
            fromUrl(adapter.httpError(response, text, now), response.status, shownUrl),
            maxRetryAfterMs
          )
          if (!error.retryable || error.retryAfterMs === undefined) return Effect.fail(error)
          // Said before anyone sleeps on it (the `retry` option's schedule, the loop's step retry).
          return Effect.zipRight(
            Effect.logWarning(
              `${provider}: HTTP ${response.status} from ${shownUrl}: the server asks to wait ${
                error.retryAfterMs / 1000
              } s before a retry`
            ),
            Effect.fail(error)
          )
        }))
    }
    const contentType = response.headers["content-type"] ?? ""
    if (contentType.includes("application/json")) {
      return Effect.flatMap(readText(response, limits, "reading the response body"), (text) => {
        const body = parseJsonOr(text)
        return isRecord(body)
          ? adapter.wholeBody(body, sink)
          : Effect.fail(badResponse(`the response body is not a JSON object: ${truncate(text, 200)}`))
      })
    }
    return streamEvents(response, adapter.streamState(), sink, limits)
  }

  /** The deadline of each model request with a retryable failure so far, by request object. */
  const deadlines = new WeakMap<ModelRequest, number>()
  const ended = (request: ModelRequest) => (exit: Exit.Exit<void, ModelError>) =>
    Effect.sync(() => {
      const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
      if (Option.isNone(failure) || !failure.value.retryable) deadlines.delete(request)
    })

  const overdue = () => deadlineError(provider, shownUrl, requestTimeoutMs)
  const respondUntraced = (request: ModelRequest, sink: ModelSink) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const deadline = deadlines.get(request) ?? now + requestTimeoutMs
      deadlines.set(request, deadline)
      const left = deadline - now
      const body = () => HttpClientRequest.bodyText(baseRequest, buildBody(request), "application/json")
      // Without an early retry an attempt is its waits (the headers, the body's pieces): they
      // keep the deadline themselves (`Deadline`), with no timeout around the attempt, which
      // forks two fibers more per request (~10 KB per streaming session, §24). With one,
      // the retries' sleeps are inside the attempt: the timeout bounds them too.
      const attempt = left <= 0
        ? Effect.fail(overdue())
        : endpoint.retry === undefined
        ? Effect.suspend(() => {
          const due = { at: deadline, error: overdue }
          const bounded = { ...limits, deadline: due }
          return send(endpoint, body(), sink, (response, sink) => handleResponse(response, sink, bounded), due)
        })
        : Effect.timeoutFail(
          Effect.suspend(() => send(endpoint, body(), sink, (response, sink) => handleResponse(response, sink, limits))),
          { duration: left, onTimeout: overdue }
        )
      return attempt.pipe(
        Effect.mapError((error) => redactError(error, secrets)),
        Effect.onExit(ended(request))
      )
    })
  // The adapter's span (§19: a child of the loop's `chat` span) only under a tracer of the
  // program's own: with Effect's default tracer nobody sees it, and `Effect.fn`'s span (with its
  // captured stack traces) held ~5 KB per streaming session while it lasted (§24).
  const respondTraced = Effect.fn(adapter.span)(function*(request: ModelRequest, sink: ModelSink) {
    return yield* respondUntraced(request, sink)
  })
  const respond = (request: ModelRequest, sink: ModelSink): Effect.Effect<void, ModelError> =>
    Effect.withFiberRuntime((fiber) => isTraced(fiber) ? respondTraced(request, sink) : respondUntraced(request, sink))

  return Model.of({ provider, model: options.model, respond })
}
