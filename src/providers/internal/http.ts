/**
 * The HTTP side shared by the provider adapters (`OpenAICompat`, `Anthropic`, and `AiBridge` for
 * what `@effect/ai` reports of HTTP): the endpoint URL, one request with a timeout on the
 * response headers and an optional early retry, reading a body piece by piece with an idle
 * timeout and a byte limit, and the mapping of transport failures, timeouts, non-2xx statuses and
 * `retry-after` headers to `ModelError` (§11). API keys live only in request headers:
 * nothing here puts a header into a message or into an error's `cause`, and `redactSecrets`
 * removes a key a server echoes from the text of an error.
 */
import type { HttpClient, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { HttpClientError } from "@effect/platform"
import { Chunk, Effect, Exit, Option, Schedule, type Scope, Stream } from "effect"
import { ModelError, type ModelErrorCode, type ModelSink } from "../../Model.js"
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

/** How long one model request may take in all, its retries included (ms): 10 minutes. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 600_000

/** The longest `retry-after` an adapter lets its caller wait (ms): 60 s. */
export const DEFAULT_MAX_RETRY_AFTER_MS = 60_000

/** The most bytes of one response body an adapter reads (16 MiB). */
export const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024

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
 * stays `undefined` (no early retry: the loop's step retry handles it, §11).
 */
export const retrySchedule = (
  retry: Schedule.Schedule<unknown, ModelError> | undefined
): Schedule.Schedule<unknown, ModelError> | undefined =>
  retry === undefined ? undefined : Schedule.intersect(
    retry,
    Schedule.addDelay(Schedule.identity<ModelError>(), (e) => e.retryAfterMs ?? 0)
  )

/**
 * A model request's deadline (`requestTimeoutMs`) kept by the waits of one attempt instead of a
 * timeout around it: `at` on the Effect `Clock` (ms), `error` what the attempt fails with then.
 * A timeout around the attempt forks two fibers more per model request (a race of the attempt
 * and a sleep), ~10 KB per streaming session (§24).
 */
export interface Deadline {
  readonly at: number
  readonly error: () => ModelError
}

/**
 * Executes `request` and hands the response to `handle`. The response headers must arrive
 * within `idleTimeoutMs` (else `TIMEOUT`) and before `deadline` when one is given (else its
 * error). With a retry schedule, a `retryable` failure is retried only while no part has
 * reached `sink` (a retry after that would repeat deltas).
 */
export const send = (
  endpoint: Endpoint,
  request: HttpClientRequest.HttpClientRequest,
  sink: ModelSink,
  handle: (response: HttpClientResponse.HttpClientResponse, sink: ModelSink) => Effect.Effect<void, ModelError>,
  deadline?: Deadline
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
  const headers = Effect.mapError(client.execute(request), (e) => transportError(e, provider, url))
  const idle = () => timeoutError(provider, url, idleTimeoutMs, "the response headers")
  const timed = deadline === undefined
    ? Effect.timeoutFail(headers, { duration: idleTimeoutMs, onTimeout: idle })
    : Effect.flatMap(Effect.clock, (clock) => {
      const left = deadline.at - clock.unsafeCurrentTimeMillis()
      return left < idleTimeoutMs
        ? Effect.timeoutFail(headers, { duration: Math.max(0, left), onTimeout: deadline.error })
        : Effect.timeoutFail(headers, { duration: idleTimeoutMs, onTimeout: idle })
    })
  const attempt = Effect.flatMap(timed, (response) => handle(response, guarded))
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
  error: { readonly code: ModelErrorCode; readonly message: string; readonly retryable: boolean }
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

/**
 * A `retryable` error whose `retryAfterMs` is more than `maxMs`, made final (`retryable: false`,
 * `retryAfterMs` kept, the message saying so): no caller sleeps past the cap (§23: a
 * `retry-after: 999999` slept 11.6 days). Any other error is returned as it is.
 */
export const capRetryAfter = (error: ModelError, maxMs: number): ModelError =>
  !error.retryable || error.retryAfterMs === undefined || error.retryAfterMs <= maxMs
    ? error
    : copyError(error, {
      retryable: false,
      message: `${error.message} (the server asks to wait ${
        error.retryAfterMs / 1000
      } s before a retry, more than maxRetryAfterMs (${maxMs} ms) allows: not retried)`
    })

/** `error` with some fields replaced (its `cause` kept). */
export const copyError = (
  error: ModelError,
  fields: { readonly message?: string; readonly retryable?: boolean }
): ModelError =>
  new ModelError({
    code: error.code,
    message: fields.message ?? error.message,
    retryable: fields.retryable ?? error.retryable,
    ...(error.status === undefined ? {} : { status: error.status }),
    ...(error.retryAfterMs === undefined ? {} : { retryAfterMs: error.retryAfterMs }),
    ...(error.cause === undefined ? {} : { cause: error.cause })
  })

/** What reading a body allows: the idle timeout and the byte limit, with what messages show. */
export interface BodyLimits {
  readonly provider: string
  /** The URL as messages show it (`displayUrl`). */
  readonly url: string
  readonly idleTimeoutMs: number
  readonly maxBytes: number
  /**
   * The model request's deadline, kept by the body's watchdog (`readBody`): at `at` the read
   * fails with its error, whether it waits for a piece or is inside `onPiece`. None: no deadline
   * here (the caller bounds the request).
   */
  readonly deadline?: Deadline | undefined
}

/**
 * What `readBody`'s `onPiece` made of a piece: `"progress"` (the idle timeout starts again),
 * `"idle"` (nothing that counts arrived: SSE comments), `"stop"` (enough read: the connection is
 * released at once), `"done"` (the response is complete, e.g. `[DONE]` or `message_stop`: what is
 * left of the body is read and dropped, see `readBody`).
 */
export type PieceOutcome = "progress" | "idle" | "stop" | "done"

/**
 * After `"done"`, how long (ms) the rest of a body may take to end, and how much of it (bytes) is
 * read, before the connection is released unread. A server ends the body right after its end
 * marker; reading that end is what lets the HTTP client reuse the connection (keep-alive). A
 * body dropped before its end aborts the request and closes the connection, so that every model
 * request opened a new one (§24: a TCP, with TLS a TLS, handshake per request, and an
 * abort error with its stack trace per response).
 */
export const REST_OF_BODY = { ms: 1_000, bytes: 64 * 1024 } as const

/**
 * Pulls a response body piece by piece into `onPiece` until it ends or `onPiece` says `"stop"`;
 * after `"done"`, up to `REST_OF_BODY` of what follows is read without `onPiece` (it ends quietly
 * at the body's end, or at that limit, or at the first idle timeout, whichever comes first).
 * Fails with `TIMEOUT` (retryable) when no piece that is progress arrived within `idleTimeoutMs`
 * of the last one (Effect `Clock`), `RESPONSE_TOO_LARGE` (not retryable) before the piece that
 * would take the body past `maxBytes`, `NETWORK` when the connection breaks while `doing`, and
 * with the deadline's error at `limits.deadline`. Leaving (by the end, a stop or a failure)
 * releases the connection.
 */
export const readBody = (
  response: HttpClientResponse.HttpClientResponse,
  limits: BodyLimits,
  doing: string,
  waitingFor: string,
  onPiece: (bytes: Uint8Array) => Effect.Effect<PieceOutcome, ModelError>
): Effect.Effect<void, ModelError> =>
  Effect.scoped(Effect.flatMap(pullBody(response, doing), (next) =>
    Effect.flatMap(Effect.clock, (clock) => {
      const { deadline, idleTimeoutMs, maxBytes } = limits
      const end = deadline === undefined ? Infinity : deadline.at
      let total = 0
      let idleBytes = 0 // bytes since the last progress (SSE comments)
      let since = clock.unsafeCurrentTimeMillis()
      let waiting = false // the reader is waiting for the next piece (not inside onPiece)
      let rest = -1 // after "done": the bytes of the rest read so far (-1 before)
      const restMs = Math.min(REST_OF_BODY.ms, idleTimeoutMs)
      const timeout = () =>
        timeoutError(
          limits.provider,
          limits.url,
          idleTimeoutMs,
          idleBytes > 0 ? `${waitingFor}; only SSE comments arrived` : waitingFor
        )
      const drainRest = next.pipe(
        Effect.catchAll(() => Effect.succeed(undefined)) // the response is complete: a broken rest is no failure
      )
      // The reader is a chain of continuations, not a generator: a generator suspended at the
      // next pull kept the previous piece (its `chunk` and `bytes` registers) alive, and so did
      // a loop over the piece's chunk; here, while it waits, nothing holds a read it has handed
      // to `onPiece` (~1.4 KB per session at the peak of concurrent-sessions, §24).
      const reader: Effect.Effect<void, ModelError> = Effect.suspend(function nextPiece(): Effect.Effect<
        void,
        ModelError
      > {
        if (rest >= 0) return restOfBody
        // A piece that was no progress (or a slow onPiece) may have used up the time already.
        if (since + idleTimeoutMs - clock.unsafeCurrentTimeMillis() <= 0) return Effect.fail(timeout())
        waiting = true
        return Effect.flatMap(next, (chunk) => {
          waiting = false
          return chunk === undefined ? Effect.void : pieces(chunk, 0)
        })
      })
      const pieces = (chunk: Chunk.Chunk<Uint8Array>, from: number): Effect.Effect<void, ModelError> => {
        for (let i = from; i < chunk.length; i++) {
          const bytes = Chunk.unsafeGet(chunk, i)
          if (rest >= 0) {
            rest += bytes.length
            continue
          }
          total += bytes.length
          if (total > maxBytes) return Effect.fail(tooLargeError(limits.provider, limits.url, maxBytes))
          return Effect.flatMap(onPiece(bytes), (outcome) => {
            if (outcome === "stop") return Effect.void
            if (outcome === "progress" || outcome === "done") {
              idleBytes = 0
              since = clock.unsafeCurrentTimeMillis()
              if (outcome === "done") rest = 0
            } else idleBytes += bytes.length
            return pieces(chunk, i + 1)
          })
        }
        return reader
      }
      const restOfBody = Effect.gen(function*() {
        const restEnd = clock.unsafeCurrentTimeMillis() + restMs
        while (rest <= REST_OF_BODY.bytes) {
          const left = restEnd - clock.unsafeCurrentTimeMillis()
          if (left <= 0) return
          const chunk = yield* Effect.timeoutTo(drainRest, { duration: left, onTimeout: () => undefined, onSuccess: (c) => c })
          if (chunk === undefined) return
          for (const bytes of chunk) rest += bytes.length
        }
      })
      // One watchdog per body instead of a timeout (a fiber and a timer) per piece: it sleeps
      // until the deadline `since + idleTimeoutMs`; woken before it (progress moved `since`),
      // it sleeps again for the rest; at it, while the reader waits for a piece, it fails the
      // read (the pull is interrupted, as a timeout did). While the reader is inside `onPiece`
      // the reader's own check above decides; the watchdog sleeps `idleTimeoutMs` from a time
      // before any later progress, so it never wakes after the next deadline. The rest after
      // "done" has its own, shorter bound in the reader (one timer per response); the watchdog
      // ends it quietly should it come first. The request's deadline (`limits.deadline`), when
      // given, it keeps too until "done": it never sleeps past it, and at it fails the read
      // whatever the reader is doing (as a timeout around the request did); after "done" the
      // response is complete and the deadline no longer applies.
      const watchdog = Effect.gen(function*() {
        while (true) {
          const now = clock.unsafeCurrentTimeMillis()
          if (rest < 0 && end - now <= 0) return yield* Effect.fail(deadline!.error())
          const left = since + idleTimeoutMs - now
          if (left > 0) yield* Effect.sleep(rest >= 0 ? left : Math.min(left, end - now))
          else if (rest >= 0) return
          else if (waiting) return yield* Effect.fail(timeout())
          else yield* Effect.sleep(Math.min(idleTimeoutMs, end - now))
        }
      })
      return Effect.raceFirst(reader, watchdog)
    })))

/** The part of a Node.js `Readable` that `pullBody` reads. */
interface NodeReadable {
  readonly readable: boolean
  readonly closed?: boolean
  read(): Uint8Array | null
  on(event: string, listener: (...args: Array<any>) => void): unknown
  off(event: string, listener: (...args: Array<any>) => void): unknown
  destroy(): unknown
}

const isNodeReadable = (u: unknown): u is NodeReadable =>
  typeof u === "object" && u !== null && typeof (u as NodeReadable).read === "function" &&
  typeof (u as NodeReadable).on === "function" && typeof (u as NodeReadable).off === "function" &&
  typeof (u as NodeReadable).destroy === "function" && typeof (u as NodeReadable).readable === "boolean"

/**
 * The Node.js `Readable` under a response of @effect/platform-node's clients (`source.body` of
 * `NodeHttpClient.layerUndici`'s, `source` itself of the `node:http` one's), and the abort
 * controller of the `HttpClient`'s wrapper around it (its `stream` aborts it when the body's
 * stream ends), or undefined for any other response. Exported for `test/HttpBody.test.ts`, which
 * pins that both clients take this path with the pinned versions.
 */
export const nodeBodyOf = (
  response: HttpClientResponse.HttpClientResponse
): { readonly readable: NodeReadable; readonly controller: AbortController | undefined } | undefined => {
  let inner: unknown = response
  let controller: AbortController | undefined
  const wrapper = response as { readonly original?: unknown; readonly controller?: unknown }
  if (typeof wrapper.original === "object" && wrapper.original !== null) {
    if (!(wrapper.controller instanceof AbortController)) return undefined
    inner = wrapper.original
    controller = wrapper.controller
  }
  const source: unknown = (inner as { readonly source?: unknown }).source
  if (isNodeReadable(source)) return { readable: source, controller }
  if (typeof source === "object" && source !== null) {
    const body: unknown = (source as { readonly body?: unknown }).body
    if (isNodeReadable(body)) return { readable: body, controller }
  }
  return undefined
}

/**
 * A pull of the response body: the next piece, `undefined` at the end, or `NETWORK` (the
 * connection broke while `doing`); closing the scope releases the body. Under a Node.js
 * `Readable` it reads that stream itself, as @effect/platform-node's `stream` does (`read()`
 * after each `"readable"`, the same `ResponseError` of reason `"Decode"`, `destroy()` when left
 * before its end): the stream's channel keeps the last piece it emitted until it emits the next,
 * so that every waiting response held its last read (up to ~30 KB; ~7–19 KB per session at the
 * peak of concurrent-sessions, §24) after it was decoded. Other bodies are read by
 * `Stream.toPull(response.stream)`.
 *
 * The Node.js pull is one `Effect.async` per wait with no canceler (a canceler makes Effect wrap
 * every wait in an interruption bracket: six operations and their allocations per piece, §24).
 * A pull that is interrupted while it waits leaves its waiter in place, so the next `"readable"`
 * would read a piece for nobody: that is harmless because an interrupted pull is always the
 * body's last (`readBody` leaves, and its scope releases the body, right after it).
 */
const pullBody = (
  response: HttpClientResponse.HttpClientResponse,
  doing: string
): Effect.Effect<Effect.Effect<Chunk.Chunk<Uint8Array> | undefined, ModelError>, never, Scope.Scope> => {
  const node = nodeBodyOf(response)
  if (node === undefined) {
    return Effect.map(Stream.toPull(response.stream), (pull) =>
      pull.pipe(
        Effect.catchAll((e) => Option.isNone(e) ? Effect.succeed(undefined) : Effect.fail(networkError(e.value, doing)))
      ))
  }
  const { controller, readable } = node
  const abort = Effect.sync(() => {
    if (controller !== undefined) controller.abort()
  })
  // A body that is no longer readable is at its end (and left as it is), as in the stream.
  if (!readable.readable) return Effect.as(Effect.addFinalizer(() => abort), Effect.succeed(undefined))
  const release = Effect.sync(() => {
    if (readable.closed === false) readable.destroy()
    if (controller !== undefined) controller.abort()
  })
  let exit: Exit.Exit<undefined, ModelError> | undefined
  let waiter: (() => void) | undefined
  const wake = () => {
    if (waiter !== undefined) waiter()
  }
  const onErr = (cause: unknown) => {
    exit = Exit.fail(
      networkError(new HttpClientError.ResponseError({ request: response.request, response, reason: "Decode", cause }), doing)
    )
    wake()
  }
  const onEnd = () => {
    exit = Exit.succeed(undefined)
    wake()
  }
  const wait = Effect.async<Chunk.Chunk<Uint8Array> | undefined, ModelError>((resume) => {
    const attempt = (): boolean => {
      const item = readable.read()
      if (item !== null) resume(Effect.succeed(Chunk.of(item)))
      else if (exit !== undefined) resume(exit)
      else return false
      waiter = undefined
      return true
    }
    if (!attempt()) waiter = attempt
  })
  // What is there already is taken without waiting.
  const pull = Effect.suspend(() => {
    const item = readable.read()
    if (item !== null) return Effect.succeed(Chunk.of(item))
    return exit ?? wait
  })
  return Effect.as(
    Effect.acquireRelease(
      Effect.sync(() => {
        readable.on("readable", wake)
        readable.on("error", onErr)
        readable.on("end", onEnd)
      }),
      () =>
        Effect.sync(() => {
          waiter = undefined
          readable.off("readable", wake)
          readable.off("error", onErr)
          readable.off("end", onEnd)
        }).pipe(Effect.zipRight(release))
    ),
    pull
  )
}

/** A whole body as text, within `limits` (see `readBody`). */
export const readText = (
  response: HttpClientResponse.HttpClientResponse,
  limits: BodyLimits,
  doing: string
): Effect.Effect<string, ModelError> =>
  Effect.suspend(() => {
    const decoder = new TextDecoder()
    const texts: Array<string> = []
    return Effect.as(
      readBody(response, limits, doing, "the rest of the response body", (bytes) => {
        texts.push(decoder.decode(bytes, { stream: true }))
        return Effect.succeed("progress")
      }),
      texts
    ).pipe(Effect.map((texts) => texts.join("") + decoder.decode()))
  })

const MAX_ERROR_BODY = 64 * 1024

/**
 * The body of an error response: its first 64 KiB (reading stops there and the connection is
 * released; a 50 MB error body is not read whole), what arrived before a stall of
 * `idleTimeoutMs`, or `""` when nothing can be read.
 */
export const readErrorBody = (
  response: HttpClientResponse.HttpClientResponse,
  limits: BodyLimits
): Effect.Effect<string> =>
  Effect.suspend(() => {
    const decoder = new TextDecoder()
    let text = ""
    return readBody(
      response,
      { ...limits, maxBytes: Number.MAX_SAFE_INTEGER },
      "reading the error body",
      "the rest of the error body",
      (bytes) => {
        text += decoder.decode(bytes, { stream: true })
        return Effect.succeed(text.length >= MAX_ERROR_BODY ? "stop" : "progress")
      }
    ).pipe(
      Effect.ignore,
      Effect.map(() => text.length > MAX_ERROR_BODY ? text.slice(0, MAX_ERROR_BODY) : text)
    )
  })

/**
 * An error body as the message, when it holds none the adapter can read: trimmed, cut at 1,000
 * characters; an HTML page (a proxy's or a gateway's error page) as its text (`htmlExcerpt`);
 * `HTTP <status>` when empty.
 */
export const errorText = (text: string, status: number): string => {
  const trimmed = text.trim()
  if (trimmed === "") return `HTTP ${status}`
  if (!looksLikeHtml(trimmed)) return truncate(trimmed, 1000)
  const excerpt = htmlExcerpt(trimmed)
  return excerpt === "" ? `HTTP ${status} (an HTML page without text)` : excerpt
}

/** The most characters of an HTML error page's text that a message shows. */
export const MAX_HTML_EXCERPT = 200

/** Whether an error body is an HTML page: it opens with a doctype, a comment or an HTML tag. */
const looksLikeHtml = (text: string): boolean => /^<(?:!doctype\s+html|!--|html|head|body|title)\b/i.test(text)

const ENTITIES: { readonly [name: string]: string } = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: " " }

/**
 * The text of an HTML page, for a message: scripts, styles, comments and tags removed (a tag cut
 * off at the end of a body read only in part too), the common entities decoded, whitespace
 * collapsed to single spaces, cut at `MAX_HTML_EXCERPT` characters (with `…`).
 */
export const htmlExcerpt = (html: string): string => {
  const text = html
    .replace(/<(script|style)\b[\s\S]*?(?:<\/\1\s*>|$)/gi, " ")
    .replace(/<!--[\s\S]*?(?:-->|$)/g, " ")
    .replace(/<[^>]*(?:>|$)/g, " ")
    .replace(/&(?:#(\d{1,7})|#x([0-9a-f]{1,6})|([a-z]+));/gi, (entity, dec?: string, hex?: string, name?: string) => {
      const code = dec !== undefined ? Number(dec) : hex !== undefined ? parseInt(hex, 16) : undefined
      if (code !== undefined) return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : entity
      return ENTITIES[name!.toLowerCase()] ?? entity
    })
    .replace(/\s+/g, " ")
    .trim()
  return text.length > MAX_HTML_EXCERPT ? text.slice(0, MAX_HTML_EXCERPT).trimEnd() + "…" : text
}

/**
 * A non-2xx answer's error with where it came from (`url` as `displayUrl` shows it: no
 * credentials, no query): `<message> (HTTP <status> from <url>)`, or `HTTP <status> from <url>`
 * when the body said nothing. Its `cause` and other fields are kept.
 */
export const fromUrl = (error: ModelError, status: number, url: string): ModelError =>
  copyError(error, {
    message: error.message === `HTTP ${status}`
      ? `HTTP ${status} from ${url}`
      : `${error.message} (HTTP ${status} from ${url})`
  })

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

/** The body is larger than `maxResponseBytes`: `RESPONSE_TOO_LARGE`, not retryable (the same answer would come again). */
export const tooLargeError = (provider: string, url: string, maxBytes: number): ModelError =>
  new ModelError({
    code: "RESPONSE_TOO_LARGE",
    message: `${provider}: the response from ${url} is larger than maxResponseBytes (${maxBytes} bytes): reading stopped`,
    retryable: false
  })

/** A model request, its retries included, outlasted `requestTimeoutMs`: `DEADLINE_EXCEEDED`, not retryable. */
export const deadlineError = (provider: string, url: string, ms: number): ModelError =>
  new ModelError({
    code: "DEADLINE_EXCEEDED",
    message: `${provider}: the request to ${url} did not finish within requestTimeoutMs (${ms} ms, retries included)`,
    retryable: false
  })

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

const REDACTED = "[redacted]"

/** `Bearer <token>` (RFC 6750 token characters), not one already redacted. */
const BEARER = /\b(Bearer\s+)(?!\[redacted\])([A-Za-z0-9\-._~+/]+=*)/gi

/**
 * Key-shaped tokens: `sk-…`/`sk_…` (OpenAI, Anthropic `sk-ant-…`, DeepSeek, Stripe-style),
 * `gsk_…` (Groq), `xai-…` (xAI), at least 6 more characters with a digit among them (so that
 * words such as `sk-learn` stay).
 */
const KEY_SHAPED = /\b(?:sk|gsk|xai)[-_](?=[A-Za-z0-9_\-*]*\d)[A-Za-z0-9_\-*]{6,}/g

/**
 * `text` without secrets, each replaced by `[redacted]`: the `secrets` given (the configured API
 * key; values shorter than 8 characters are not searched for, they would match ordinary text),
 * then `Bearer …` tokens and key-shaped tokens (`sk-…`, `gsk_…`, `xai-…`). Applied to every
 * provider error text before it becomes a `ModelError` message, so that a key a server echoes
 * (`Incorrect API key provided: Bearer sk-…`) is never printed nor logged (§23).
 */
export const redactSecrets = (text: string, secrets: ReadonlyArray<string>): string => {
  let out = text
  for (const secret of secrets) {
    if (secret.length >= 8 && out.includes(secret)) out = out.split(secret).join(REDACTED)
  }
  // A sentence's full stop after the token stays.
  out = out.replace(BEARER, (_, bearer: string, token: string) => bearer + REDACTED + (token.endsWith(".") ? "." : ""))
  return out.replace(KEY_SHAPED, REDACTED)
}

/** `error` with `redactSecrets` applied to its message (the same error when nothing was found). */
export const redactError = (error: ModelError, secrets: ReadonlyArray<string>): ModelError => {
  const message = redactSecrets(error.message, secrets)
  return message === error.message ? error : copyError(error, { message })
}
