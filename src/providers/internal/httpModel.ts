/**
 * What the HTTP provider adapters (`OpenAICompat`, `Anthropic`) have in common, as one
 * constructor of their `ModelService` (DESIGN.md §11): the shared options and their defaults;
 * the fixed part of every request (`POST` to the adapter's URL, the user's headers, then the
 * adapter's own, the user's extra body fields minus the adapter's reserved ones); the settings
 * in the body (`maxTokens` and `temperature` from the request settings, else the options;
 * `top_p` from the settings; the extra fields last); and the respond path: `send` (timeout,
 * early retry), then a non-2xx answer becomes the adapter's error, a JSON body is read whole by
 * the adapter, anything else is read as an event stream into the adapter's assembly state. An
 * adapter says only what differs (`Adapter`).
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Clock, Effect, type Redacted, type Schedule } from "effect"
import { Model, type ModelError, type ModelRequest, type ModelService, type ModelSink } from "../../Model.js"
import { badResponse, DEFAULT_IDLE_TIMEOUT_MS, displayUrl, networkError, readErrorBody, retrySchedule, send } from "./http.js"
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
  const url = adapter.url
  const shownUrl = displayUrl(url)
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
    sink: ModelSink
  ): Effect.Effect<void, ModelError> => {
    if (response.status < 200 || response.status >= 300) {
      return Effect.flatMap(
        readErrorBody(response),
        (text) => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.fail(adapter.httpError(response, text, now)))
      )
    }
    const contentType = response.headers["content-type"] ?? ""
    if (contentType.includes("application/json")) {
      return Effect.flatMap(
        Effect.mapError(response.text, (e) => networkError(e, "reading the response body")),
        (text) => {
          const body = parseJsonOr(text)
          return isRecord(body)
            ? adapter.wholeBody(body, sink)
            : Effect.fail(badResponse(`the response body is not a JSON object: ${truncate(text, 200)}`))
        }
      )
    }
    return streamEvents(response, adapter.streamState(), sink, idleTimeoutMs, provider, shownUrl)
  }

  const respond = Effect.fn(adapter.span)(function*(request: ModelRequest, sink: ModelSink) {
    const httpRequest = HttpClientRequest.bodyText(baseRequest, buildBody(request), "application/json")
    return yield* send(endpoint, httpRequest, sink, handleResponse)
  })

  return Model.of({ provider, model: options.model, respond })
}
