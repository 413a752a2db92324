/**
 * Limits of the HTTP provider adapters (§23), for `OpenAICompat` and `Anthropic` alike,
 * against loopback servers: a `retry-after` longer than `maxRetryAfterMs` is not waited for and a
 * wait the server asks for is logged before it starts; SSE comments (`: ping`) are no progress for
 * `idleTimeoutMs`; `requestTimeoutMs` bounds a model request with its retries; `maxResponseBytes`
 * bounds a streamed or whole body (and an error body is read only up to 64 KiB); a key a server
 * echoes in an error is redacted before it becomes a `ModelError` message, so that neither the
 * terminal nor the session log ever holds it. Waits run on the TestClock, synchronized with the
 * real socket on what the client has received.
 */
import { NodeContext, NodeHttpClient } from "@effect/platform-node"
import type * as HttpClient from "@effect/platform/HttpClient"
import { describe, expect, it } from "@effect/vitest"
import {
  Clock,
  Console,
  Deferred,
  Effect,
  Exit,
  Fiber,
  Layer,
  Logger,
  Option,
  Queue,
  Redacted,
  Schedule,
  type Scope,
  TestClock
} from "effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import { main } from "../src/cli/main.js"
import * as IdGenerator from "../src/IdGenerator.js"
import type { MessageId } from "../src/Message.js"
import * as Model from "../src/Model.js"
import type { ModelError, ModelPart, ModelRequest, ModelService } from "../src/Model.js"
import * as Anthropic from "../src/providers/Anthropic.js"
import { redactSecrets } from "../src/providers/internal/http.js"
import * as OpenAICompat from "../src/providers/OpenAICompat.js"
import * as SessionStore from "../src/SessionStore.js"
import { collect, errorFields, summarize } from "./utils/modelParts.js"
import { replayServer } from "./utils/replayServer.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const KEY = "sk-limits-test-0123456789abcdef"

/** The options both adapters share, as these tests set them. */
interface Limits {
  readonly idleTimeoutMs?: number
  readonly requestTimeoutMs?: number
  readonly maxRetryAfterMs?: number
  readonly maxResponseBytes?: number
  readonly retry?: Schedule.Schedule<unknown, ModelError>
  readonly apiKey?: Redacted.Redacted<string>
}

/** An adapter under test, with its wire format. */
interface Case {
  readonly name: string
  /** The adapter on a server root `http://127.0.0.1:PORT` (no path). */
  readonly make: (root: string, limits?: Limits) => Effect.Effect<ModelService, never, Scope.Scope>
  /** The URL its requests go to. */
  readonly url: (root: string) => string
  /** The events before the first text delta. */
  readonly head: string
  /** One text delta as an SSE event. */
  readonly delta: (text: string) => string
  /** The events that end a text answer. */
  readonly tail: string
  /** A whole (non-streamed) JSON answer with `text`. */
  readonly whole: (text: string) => string
  /** What a `429` carries as its code. */
  readonly rateLimitCode: string
  readonly rateLimitBody: string
}

/** Runs `make` with an undici HTTP client that lives as long as the test's scope. */
const http = <A>(make: Effect.Effect<A, never, HttpClient.HttpClient>) =>
  Effect.flatMap(Layer.build(NodeHttpClient.layerUndici), (context) => Effect.provide(make, context))

const cases: ReadonlyArray<Case> = [
  {
    name: "openai-compat",
    make: (root, limits) => http(OpenAICompat.make({ baseUrl: `${root}/v1`, model: "m", apiKey: Redacted.make(KEY), ...limits })),
    url: (root) => `${root}/v1/chat/completions`,
    head: "",
    delta: (text) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text } }] })}\n\n`,
    tail: `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`,
    whole: (text) =>
      JSON.stringify({ choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }] }),
    rateLimitCode: "HTTP_429",
    rateLimitBody: JSON.stringify({ error: { message: "Rate limit reached", type: "requests" } })
  },
  {
    name: "anthropic",
    make: (root, limits) => http(Anthropic.make({ baseUrl: root, model: "m", apiKey: Redacted.make(KEY), ...limits })),
    url: (root) => `${root}/v1/messages`,
    head: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n" +
      "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    delta: (text) =>
      `event: content_block_delta\ndata: ${
        JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })
      }\n\n`,
    tail: "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n" +
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    whole: (text) => JSON.stringify({ type: "message", content: [{ type: "text", text }], stop_reason: "end_turn" }),
    rateLimitCode: "rate_limit_error",
    rateLimitBody: JSON.stringify({ type: "error", error: { type: "rate_limit_error", message: "Rate limited" } })
  }
]

const REQUEST: ModelRequest = {
  sessionId: "s1",
  turn: 1,
  step: 1,
  tools: [],
  messages: [{ id: "m1" as MessageId, role: "user", content: [{ type: "text", text: "hi" }], source: { kind: "user" } }]
}

/** A fresh request object (the deadline of a model request follows the object, see `requestTimeoutMs`). */
const request = (): ModelRequest => ({ ...REQUEST })

/** Real time, whatever clock the test runs on: lets sockets and fibers do their work. */
const live = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/** `effect`, or a defect after 5 s of real time (a wait on the socket, bounded whatever the clock). */
const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.raceFirst(effect, Effect.zipRight(live(5_000), Effect.dieMessage("no progress within 5 s of real time")))

/** Polls (real time, at most `tries` × 10 ms) until `done()`. */
const until = (done: () => boolean, tries = 300) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries && !done(); i++) yield* live(10)
  })

/** A server whose answers the test writes itself; closed with its connections when the scope closes. */
interface ManualServer {
  readonly root: string
  readonly responses: Array<Http.ServerResponse>
  readonly aborted: () => number
}

const manualServer = (
  handle: (res: Http.ServerResponse, index: number) => void,
  onServer: (server: Http.Server) => void = () => {}
) =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: Http.Server; readonly manual: ManualServer }>((resume) => {
      const responses: Array<Http.ServerResponse> = []
      let aborted = 0
      const server = Http.createServer((req, res) => {
        req.resume()
        req.on("end", () => {
          responses.push(res)
          res.on("close", () => {
            if (!res.writableFinished) aborted++
          })
          handle(res, responses.length - 1)
        })
      })
      onServer(server)
      server.listen(0, "127.0.0.1", () => {
        const port = (server.address() as AddressInfo).port
        resume(Effect.succeed({ server, manual: { root: `http://127.0.0.1:${port}`, responses, aborted: () => aborted } }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ manual }) => manual))

const sse = (res: Http.ServerResponse, status = 200, type = "text/event-stream") => {
  res.writeHead(status, { "content-type": type })
  res.flushHeaders()
}

/** Writes `piece()` until `total` bytes or the client goes away, respecting backpressure; then ends. */
const flood = async (res: Http.ServerResponse, piece: string, total: number) => {
  let sent = 0
  while (sent < total && !res.destroyed) {
    sent += piece.length
    if (!res.write(piece)) await new Promise<void>((resolve) => res.once("drain", resolve).once("close", resolve))
  }
  if (!res.destroyed) res.end()
}

describe.each(cases)("provider limits: $name", (c) => {
  describe("retry-after", () => {
    it.scoped("a wait longer than maxRetryAfterMs (default 60 s) is not waited for: the error is final", () =>
      Effect.gen(function*() {
        for (const retryAfter of ["999999", "Thu, 01 Jan 2099 00:00:00 GMT"]) {
          const server = yield* replayServer({
            body: c.rateLimitBody,
            status: 429,
            contentType: "application/json",
            headers: { "retry-after": retryAfter }
          })
          const root = server.baseUrl.replace(/\/v1$/, "")
          const model = yield* c.make(root)
          const { error } = yield* Effect.flip(collect(model, request()))
          const askedMs = retryAfter === "999999" ? 999_999_000 : Date.parse(retryAfter) // TestClock time is 0
          expect([error.code, error.status, error.retryable, error.retryAfterMs]).toEqual([c.rateLimitCode, 429, false, askedMs])
          expect(error.message).toMatch(
            new RegExp(
              `\\(the server asks to wait ${
                askedMs / 1000
              } s before a retry, more than maxRetryAfterMs \\(60000 ms\\) allows: not retried\\)$`
            )
          )
        }
      }))

    it.scoped("a wait within the cap is logged before it starts (here by the `retry` option's schedule, on the TestClock)", () =>
      Effect.gen(function*() {
        const logs: Array<string> = []
        const logger = Logger.make(({ logLevel, message }) => {
          logs.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
        })
        const server = yield* replayServer({
          body: c.rateLimitBody,
          status: 429,
          contentType: "application/json",
          headers: { "retry-after": "30" }
        })
        const root = server.baseUrl.replace(/\/v1$/, "")
        const model = yield* c.make(root, { retry: Schedule.recurs(1) })
        const fiber = yield* Effect.fork(
          collect(model, request()).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
        )
        yield* until(() => logs.length === 1)
        const line = `WARN ${c.name}: HTTP 429 from ${c.url(root)}: the server asks to wait 30 s before a retry`
        expect([logs, server.requests.length]).toEqual([[line], 1])
        yield* TestClock.adjust("29999 millis")
        yield* live(50)
        expect(server.requests.length).toBe(1)
        yield* TestClock.adjust("1 millis")
        const exit = yield* bounded(Fiber.await(fiber))
        expect(Exit.isFailure(exit)).toBe(true)
        expect([logs, server.requests.length]).toEqual([[line, line], 2])
      }))
  })

  describe("the end of a stream (§24)", () => {
    it.scoped("the body's end after the end marker is read: the next request reuses the connection (keep-alive)", () =>
      Effect.gen(function*() {
        let connections = 0
        const server = yield* manualServer((res) => {
          sse(res)
          res.write(c.head + c.delta("a") + c.tail)
          setTimeout(() => res.end(), 20) // the body's end in a later read than the marker
        }, (s) => s.on("connection", () => connections++))
        const model = yield* c.make(server.root)
        for (const text of ["a", "a", "a"]) {
          expect(summarize(yield* bounded(collect(model, request()))).text).toBe(text)
          yield* live(20) // the connection back in the client's pool before the next request
        }
        expect([connections, server.responses.length, server.aborted()]).toEqual([1, 3, 0])
      }))

    it.scoped("a body kept open after the end marker: every part is pushed at once, the rest is read for 1 s (TestClock), then the connection is dropped", () =>
      Effect.gen(function*() {
        const server = yield* manualServer((res) => {
          sse(res)
          res.write(c.head + c.delta("b") + c.tail)
        })
        const model = yield* c.make(server.root)
        const parts: Array<ModelPart> = []
        const finished = yield* Deferred.make<void>()
        const fiber = yield* Effect.fork(model.respond(request(), {
          part: (p) =>
            Effect.sync(() => {
              parts.push(p)
              if (p.type === "finish") Deferred.unsafeDone(finished, Exit.void)
            })
        }))
        yield* bounded(Deferred.await(finished))
        expect(summarize(parts)).toMatchObject({ text: "b", finish: "stop" })
        yield* live(50)
        server.responses[0]!.write(": more after the end\n\n")
        yield* live(50)
        yield* TestClock.adjust(999)
        yield* live(20)
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        yield* TestClock.adjust(1)
        yield* bounded(Fiber.join(fiber))
        yield* until(() => server.aborted() === 1)
        expect(server.aborted()).toBe(1)
        expect(summarize(parts).shape).toBe(c.name === "openai-compat" ? "text-delta,finish" : "text-delta,usage,finish")
      }))
  })

  describe("idle timeout and deadline", () => {
    it.scoped("SSE comments are no progress: `: ping` every 5 s does not keep a stalled stream alive past idleTimeoutMs", () =>
      Effect.gen(function*() {
        const server = yield* manualServer((res) => {
          sse(res)
          res.write(c.head + c.delta("a"))
        })
        const model = yield* c.make(server.root, { idleTimeoutMs: 10_000 })
        const first = yield* Deferred.make<void>()
        const fiber = yield* Effect.fork(model.respond(request(), { part: () => Deferred.succeed(first, undefined) }))
        yield* bounded(Deferred.await(first))
        let endedAt: number | undefined
        for (let i = 1; i <= 6 && endedAt === undefined; i++) {
          server.responses[0]!.write(": ping\n\n")
          yield* live(40)
          yield* TestClock.adjust("5 seconds")
          yield* live(20)
          if (Option.isSome(yield* Fiber.poll(fiber))) endedAt = i * 5_000
        }
        expect(endedAt).toBe(10_000)
        const error = yield* Effect.flip(Fiber.join(fiber))
        expect(errorFields(error)).toEqual({
          _tag: "ModelError",
          code: "TIMEOUT",
          message: `${c.name}: no answer from ${
            c.url(server.root)
          } within 10000 ms (waiting for the next piece of the event stream; only SSE comments arrived)`,
          status: undefined,
          retryable: true,
          retryAfterMs: undefined
        })
      }))

    it.scoped("a stream that stalls after one chunk, retried: the attempts stop at requestTimeoutMs, retries included", () =>
      Effect.gen(function*() {
        const server = yield* manualServer((res) => {
          sse(res)
          res.write(c.head + c.delta("a"))
        })
        const model = yield* c.make(server.root, { idleTimeoutMs: 100_000, requestTimeoutMs: 250_000 })
        const parts = yield* Queue.unbounded<void>()
        const codes: Array<string> = []
        const failedAt: Array<number> = []
        const req = request()
        // The loop retries a step by calling `respond` again with the same request.
        const attempt = model.respond(req, { part: () => Queue.offer(parts, undefined) }).pipe(
          Effect.tapError((e) =>
            Effect.sync(() => {
              codes.push(e.code)
            })
          ),
          Effect.tapError(() => Effect.flatMap(Clock.currentTimeMillis, (t) => Effect.sync(() => void failedAt.push(t))))
        )
        const fiber = yield* Effect.fork(
          Effect.retry(attempt, {
            schedule: Schedule.intersect(Schedule.spaced("1 second"), Schedule.recurs(5)),
            while: (e) => e.retryable
          })
        )
        for (let i = 0; i < 3; i++) {
          yield* bounded(Queue.take(parts)) // the attempt's chunk arrived: it now waits for the next piece
          yield* live(30)
          yield* TestClock.adjust("100 seconds")
          yield* live(30)
          yield* TestClock.adjust("1 second") // the retry's spacing
          yield* live(30)
        }
        const exit = yield* bounded(Fiber.await(fiber))
        expect(Exit.isFailure(exit)).toBe(true)
        expect(codes).toEqual(["TIMEOUT", "TIMEOUT", "DEADLINE_EXCEEDED"])
        expect(failedAt).toEqual([100_000, 201_000, 250_000])
        expect(server.responses.length).toBe(3)
        const error = yield* Effect.flip(Fiber.join(fiber))
        expect([error.retryable, error.message]).toEqual([
          false,
          `${c.name}: the request to ${c.url(server.root)} did not finish within requestTimeoutMs (250000 ms, retries included)`
        ])
      }))

    it.scoped("the deadline is the request's: a new request, or the same one after it succeeded, has a fresh one", () =>
      Effect.gen(function*() {
        const server = yield* manualServer((res, index) => {
          sse(res)
          res.write(c.head + c.delta("a"))
          if (index === 0) res.end(c.tail) // complete
          if (index === 1) res.end() // incomplete: retryable
        })
        const model = yield* c.make(server.root, { idleTimeoutMs: 100_000, requestTimeoutMs: 150_000 })
        const req = request()
        expect(summarize(yield* Effect.mapError(collect(model, req), (f) => f.error)).text).toBe("a")
        // Past the deadline the first call had: it ended with the success.
        yield* TestClock.adjust("200 seconds")
        const first = yield* Effect.flip(collect(model, req))
        expect(first.error.code).toBe("STREAM_INCOMPLETE")
        yield* TestClock.adjust("149 seconds")
        // The retry of `req` has 1 s left; another request has its own 150 s.
        const retry = yield* Effect.fork(Effect.flip(collect(model, req)))
        const other = yield* Effect.fork(Effect.flip(collect(model, request())))
        yield* until(() => server.responses.length === 4)
        yield* live(30)
        yield* TestClock.adjust("1 second")
        expect((yield* bounded(Fiber.join(retry))).error.code).toBe("DEADLINE_EXCEEDED")
        yield* TestClock.adjust("99 seconds")
        expect((yield* bounded(Fiber.join(other))).error.code).toBe("TIMEOUT")
      }))

    it.scoped("the deadline holds while no headers come, within idleTimeoutMs: DEADLINE_EXCEEDED at requestTimeoutMs", () =>
      Effect.gen(function*() {
        const server = yield* manualServer(() => {}) // never answers
        const model = yield* c.make(server.root, { idleTimeoutMs: 100_000, requestTimeoutMs: 30_000 })
        const fiber = yield* Effect.fork(
          Effect.flip(model.respond(request(), { part: () => Effect.void })).pipe(
            Effect.flatMap((e) => Effect.map(Clock.currentTimeMillis, (t) => [e.code, t] as const))
          )
        )
        yield* until(() => server.responses.length === 1)
        yield* live(30)
        yield* TestClock.adjust("29 seconds")
        yield* live(30)
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        yield* TestClock.adjust("1 second")
        expect(yield* bounded(Fiber.join(fiber))).toEqual(["DEADLINE_EXCEEDED", 30_000])
      }))

    it.scoped("the deadline holds while the body is progress: a delta every 4 s, idleTimeoutMs 10 s, requestTimeoutMs 10 s", () =>
      Effect.gen(function*() {
        const server = yield* manualServer((res) => {
          sse(res)
          res.write(c.head + c.delta("a"))
        })
        const model = yield* c.make(server.root, { idleTimeoutMs: 10_000, requestTimeoutMs: 10_000 })
        const parts = yield* Queue.unbounded<void>()
        const fiber = yield* Effect.fork(
          Effect.flip(model.respond(request(), { part: () => Queue.offer(parts, undefined) })).pipe(
            Effect.flatMap((e) => Effect.map(Clock.currentTimeMillis, (t) => [e.code, t] as const))
          )
        )
        yield* bounded(Queue.take(parts))
        for (let i = 0; i < 2; i++) {
          yield* live(30)
          yield* TestClock.adjust("4 seconds")
          server.responses[0]!.write(c.delta("b"))
          yield* bounded(Queue.take(parts))
        }
        yield* live(30)
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        yield* TestClock.adjust("2 seconds")
        expect(yield* bounded(Fiber.join(fiber))).toEqual(["DEADLINE_EXCEEDED", 10_000])
      }))
  })

  describe("response size", () => {
    it.scopedLive("an endless stream stops at maxResponseBytes: RESPONSE_TOO_LARGE, not retryable, the connection closed", () =>
      Effect.gen(function*() {
        const piece = c.delta("x".repeat(16 * 1024))
        const server = yield* manualServer((res) => {
          sse(res)
          res.write(c.head)
          void flood(res, piece, 64 * 1024 * 1024)
        })
        const model = yield* c.make(server.root, { maxResponseBytes: 1024 * 1024 })
        const failure = yield* Effect.flip(collect(model, request()))
        expect(errorFields(failure.error)).toEqual({
          _tag: "ModelError",
          code: "RESPONSE_TOO_LARGE",
          message: `${c.name}: the response from ${
            c.url(server.root)
          } is larger than maxResponseBytes (1048576 bytes): reading stopped`,
          status: undefined,
          retryable: false,
          retryAfterMs: undefined
        })
        expect(summarize(failure.parts).text.length).toBeLessThanOrEqual(1024 * 1024)
        yield* until(() => server.aborted() === 1)
        expect(server.aborted()).toBe(1)
      }))

    it.scopedLive("a whole JSON body larger than maxResponseBytes is RESPONSE_TOO_LARGE", () =>
      Effect.gen(function*() {
        const body = c.whole("y".repeat(2 * 1024 * 1024))
        const server = yield* manualServer((res) => {
          sse(res, 200, "application/json")
          void flood(res, body, body.length)
        })
        const model = yield* c.make(server.root, { maxResponseBytes: 1024 * 1024 })
        const failure = yield* Effect.flip(collect(model, request()))
        expect([failure.error.code, failure.error.retryable, failure.parts.length]).toEqual(["RESPONSE_TOO_LARGE", false, 0])
        // Under the limit the same body is read.
        const ok = yield* c.make(server.root, { maxResponseBytes: 3 * 1024 * 1024 })
        expect(summarize(yield* Effect.mapError(collect(ok, request()), (f) => f.error)).text.length).toBe(2 * 1024 * 1024)
      }))

    it.scopedLive("a 50 MB error body: read only up to 64 KiB (the connection closed), the status error shown", () =>
      Effect.gen(function*() {
        const server = yield* manualServer((res) => {
          sse(res, 500, "text/plain")
          void flood(res, "E".repeat(64 * 1024), 50 * 1024 * 1024)
        })
        const model = yield* c.make(server.root)
        const { error } = yield* Effect.flip(collect(model, request()))
        expect([error.code, error.status, error.retryable, error.message]).toEqual([
          "HTTP_500",
          500,
          true,
          "E".repeat(1000) + `… (HTTP 500 from ${c.url(server.root)})`
        ])
        yield* until(() => server.aborted() === 1)
        expect(server.aborted()).toBe(1)
      }))
  })

  describe("secrets", () => {
    it.scopedLive("a key echoed in an error body or a stream's error event is redacted from the message", () =>
      Effect.gen(function*() {
        const echo = `Incorrect API key provided: Bearer ${KEY}. Also tried gsk_abcdef0123456789 and sk-other-9876543210.`
        const redacted = "Incorrect API key provided: Bearer [redacted]. Also tried [redacted] and [redacted]."
        const status = yield* replayServer({
          body: JSON.stringify({ error: { message: echo, type: "invalid_request_error" } }),
          status: 401,
          contentType: "application/json"
        })
        const model = yield* c.make(status.baseUrl.replace(/\/v1$/, ""))
        const { error } = yield* Effect.flip(collect(model, request()))
        expect(error.message).toContain(redacted)
        expect(error.message).not.toContain(KEY)
        // A key of any shape, when it is the configured one.
        const own = "custom0key0of0another0shape"
        const plain = yield* replayServer({ body: `bad key ${own}`, status: 403, contentType: "text/plain" })
        const ownModel = yield* c.make(plain.baseUrl.replace(/\/v1$/, ""), { apiKey: Redacted.make(own) })
        const ownError = yield* Effect.flip(collect(ownModel, request()))
        expect(ownError.error.message).toBe(`bad key [redacted] (HTTP 403 from ${c.url(plain.baseUrl.replace(/\/v1$/, ""))})`)
        // Inside a 200 stream.
        const event = c.name === "anthropic"
          ? `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "authentication_error", message: echo } })}\n\n`
          : `event: error\ndata: ${JSON.stringify({ error: { message: echo, type: "invalid_request_error" } })}\n\n`
        const stream = yield* replayServer({ body: c.head + event })
        const streamModel = yield* c.make(stream.baseUrl.replace(/\/v1$/, ""))
        const streamError = yield* Effect.flip(collect(streamModel, request()))
        expect(streamError.error.message).toContain(redacted)
      }))
  })
})

describe("redactSecrets", () => {
  it("replaces the configured key, Bearer tokens and key-shaped tokens; leaves words and short values", () => {
    const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, string]> = [
      ["Incorrect API key provided: Bearer sk-abc123xyz.", [], "Incorrect API key provided: Bearer [redacted]."],
      ["authorization: bearer eyJhbGciOi.J9x-y_z== was refused", [], "authorization: bearer [redacted] was refused"],
      ["keys sk-ant-api03-AbC9, gsk_0123456789 and xai-12345678ab", [], "keys [redacted], [redacted] and [redacted]"],
      ["masked: sk-proj-****************abcd", [], "masked: sk-proj-****************abcd"],
      [
        "use scikit-learn (sk-learn), task-1234567, risk_level_99999",
        [],
        "use scikit-learn (sk-learn), task-1234567, risk_level_99999"
      ],
      ["key=Zm9vYmFyYmF6cXV4 in the query", ["Zm9vYmFyYmF6cXV4"], "key=[redacted] in the query"],
      ["short abc in text", ["abc"], "short abc in text"]
    ]
    for (const [text, secrets, expected] of cases) expect([text, redactSecrets(text, secrets)]).toEqual([text, expected])
  })
})

// ---------------------------------------------------------------------------------------------
// Through the loop and the CLI
// ---------------------------------------------------------------------------------------------

const tmpDir = scratchDirs("agent-loop-limits-")

/** Runs the CLI in-process; returns exit code, stdout and stderr. */
const cli = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const err: Array<string> = []
    const base = yield* Console.consoleWith(Effect.succeed)
    const capture: Console.Console = {
      ...base,
      log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(args.map(String).join(" "))),
      error: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void err.push(args.map(String).join(" ")))
    }
    const code = yield* main(argv).pipe(Effect.withConsole(capture), Effect.provide(NodeContext.layer))
    return { code, out: out.join("\n"), err: err.join("\n") }
  })

describe("provider limits through the loop and the CLI", () => {
  it.scopedLive(
    "a turn whose response is too large ends error RESPONSE_TOO_LARGE and logs no partial message",
    () =>
      Effect.gen(function*() {
        const piece = cases[0]!.delta("z".repeat(16 * 1024))
        const server = yield* manualServer((res) => {
          sse(res)
          void flood(res, piece, 64 * 1024 * 1024)
        })
        const model = yield* cases[0]!.make(server.root, { maxResponseBytes: 256 * 1024 })
        const events = yield* Effect.scoped(Effect.gen(function*() {
          const agent = yield* Agent.make({})
          yield* agent.followup("hi")
          yield* agent.awaitIdle
          return agent.log.events()
        })).pipe(Effect.provide(Layer.mergeAll(Model.layer(model), SessionStore.layerMemory, IdGenerator.layer)))
        const end = events.find((e) => e.type === "turn/end")
        expect((end?.data as any).reason.kind).toBe("error")
        expect((end?.data as any).reason.error.code).toBe("RESPONSE_TOO_LARGE")
        expect(events.filter((e) => e.type === "assistant/message")).toEqual([])
        expect(JSON.stringify(events).length).toBeLessThan(10_000)
      }),
    30_000
  )

  for (const provider of ["openai-compat", "openai"] as const) {
    it.live(
      `run --provider ${provider} against a server that echoes the key: the key is in no output and not in the log`,
      () =>
        Effect.scoped(Effect.gen(function*() {
          // Not key-shaped: only the configured secret finds it outside "Bearer …".
          const key = "Zq7pLm3xTr9wKeyValue"
          const server = yield* replayServer({
            body: JSON.stringify({
              error: { message: `Incorrect API key provided: Bearer ${key} (${key})`, type: "invalid_request_error" }
            }),
            status: 401,
            contentType: "application/json"
          })
          const store = tmpDir()
          process.env.AGENT_LOOP_LIMITS_TEST_KEY = key
          const { code, err, out } = yield* cli([
            "run",
            "--prompt",
            "hi",
            "--provider",
            provider,
            "--base-url",
            server.baseUrl,
            "--model",
            "m",
            "--api-key-env",
            "AGENT_LOOP_LIMITS_TEST_KEY",
            "--store",
            store
          ])
          delete process.env.AGENT_LOOP_LIMITS_TEST_KEY
          expect(server.requests[0]!.headers.authorization).toBe(`Bearer ${key}`)
          expect(code).toBe(4)
          if (provider === "openai-compat") {
            expect(err).toBe(
              "error: HTTP_401: invalid_request_error: Incorrect API key provided: Bearer [redacted] ([redacted]) " +
                `(HTTP 401 from ${server.baseUrl}/chat/completions)`
            )
          } else {
            expect(err).toContain("Bearer [redacted] ([redacted])")
          }
          expect(err + out).not.toContain(key)
          const log = Fs.readFileSync(Path.join(store, Fs.readdirSync(store)[0]!), "utf8")
          expect(log).toContain("[redacted]")
          expect(log).not.toContain(key)
        })),
      30_000
    )
  }

  it.effect("--api-key-env given a key instead of a variable name: refused without echoing it", () =>
    Effect.gen(function*() {
      const withKeyEnv = (value: string) =>
        cli(["run", "--prompt", "x", "--provider", "openai-compat", "--model", "m", "--base-url", "http://127.0.0.1:1/v1"].concat(
          ["--api-key-env", value]
        ))
      for (const value of ["gsk_live_0123456789abcdefABCDEF", "sk_test_51HqLyjWDarjtT1zdp7dc", "xai_0123456789abcdefghij"]) {
        expect(yield* withKeyEnv(value)).toEqual({
          code: 2,
          out: "",
          err: "--api-key-env: the value looks like an API key, not the NAME of an environment variable (not shown)"
        })
      }
      // A variable's name is still shown.
      const unset = yield* withKeyEnv("MY_PROVIDER_API_KEY_2")
      expect(unset.err).toBe("--api-key-env: the environment variable MY_PROVIDER_API_KEY_2 is not set")
    }))
})
