/**
 * A loopback HTTP server that replays recorded provider responses from
 * `../shared/fixtures/wire/` with the framing rules of its SOURCES.md: `.sse` bodies are sent
 * byte for byte as `text/event-stream`; `.chunks.jsonl` lines become `data: <line>\n\n`, plus
 * `data: [DONE]\n\n` unless `done: false`; `.json` bodies are sent with the given status and
 * content-type. A body can be split at byte offsets (or every N bytes) with a pause between
 * writes, so the client sees the SSE lines cut at odd places. Every request body is captured.
 * The server is scoped (closed, with its connections, when the scope closes) and bounded: it
 * stops answering after `maxRequests` and closes itself after `lifetimeMs`. Its pauses
 * (`delayMs`) pace what it sends; they are no waits of a test.
 */
import { Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"
import { TEST_TIMEOUT_MS } from "./bounds.js"

/** The recorded wire fixtures, relative to the repository root (never copied into the repo). */
export const WIRE_DIR = Path.resolve(process.cwd(), "../shared/fixtures/wire")

/** Reads a fixture file's bytes. */
export const readFixture = (name: string): Buffer => Fs.readFileSync(Path.join(WIRE_DIR, name))

/** What to answer, for every request. */
export interface ReplaySpec {
  /** A fixture file name in `WIRE_DIR`; framed by its suffix. */
  readonly file?: string | undefined
  /** An explicit body (used as is, content-type `text/event-stream` unless given). */
  readonly body?: string | Uint8Array | undefined
  /** Append `data: [DONE]\n\n` to a `.chunks.jsonl` file (default true). */
  readonly done?: boolean | undefined
  /** HTTP status (default 200). */
  readonly status?: number | undefined
  /** Content-type (default by suffix: `.json` → `application/json`, else `text/event-stream`). */
  readonly contentType?: string | undefined
  /** Extra response headers. */
  readonly headers?: { readonly [name: string]: string } | undefined
  /** Split the body into pieces of this many bytes. */
  readonly splitEvery?: number | undefined
  /** Split the body at these byte offsets. */
  readonly splitAt?: ReadonlyArray<number> | undefined
  /** Pause between writes: milliseconds, or 0 / undefined for one event-loop turn. */
  readonly delayMs?: number | undefined
}

/** A request the server received. */
export interface CapturedRequest {
  readonly method: string
  readonly url: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

/** A running replay server. */
export interface ReplayServer {
  readonly baseUrl: string
  readonly requests: ReadonlyArray<CapturedRequest>
  /** Responses whose connection closed before the whole body was written (client aborted). */
  readonly aborted: number
}

/** The body a spec describes, framed by the rules of SOURCES.md. */
export const framedBody = (spec: ReplaySpec): Buffer => {
  if (spec.body !== undefined) return Buffer.from(spec.body)
  if (spec.file === undefined) return Buffer.alloc(0)
  const raw = readFixture(spec.file)
  if (!spec.file.endsWith(".chunks.jsonl")) return raw
  let out = ""
  for (const line of raw.toString("utf8").split("\n")) {
    if (line.trim() !== "") out += `data: ${line}\n\n`
  }
  if (spec.done !== false) out += "data: [DONE]\n\n"
  return Buffer.from(out, "utf8")
}

const pieces = (body: Buffer, spec: ReplaySpec): Array<Buffer> => {
  const cuts: Array<number> = []
  if (spec.splitEvery !== undefined && spec.splitEvery > 0) {
    for (let i = spec.splitEvery; i < body.length; i += spec.splitEvery) cuts.push(i)
  }
  if (spec.splitAt !== undefined) { for (const at of spec.splitAt) cuts.push(at) }
  const sorted = [...new Set(cuts)].filter((i) => i > 0 && i < body.length).sort((a, b) => a - b)
  const out: Array<Buffer> = []
  let start = 0
  for (const cut of sorted) {
    out.push(body.subarray(start, cut))
    start = cut
  }
  out.push(body.subarray(start))
  return out
}

const pause = (ms: number | undefined): Promise<void> =>
  new Promise((resolve) => ms === undefined || ms <= 0 ? setImmediate(resolve) : setTimeout(resolve, ms))

const MAX_REQUEST_BODY = 4 * 1024 * 1024

/**
 * Starts a server on 127.0.0.1 (random port) answering every request with `spec` (or request i
 * with the i-th spec of a sequence, the last one repeating); closed when
 * the scope closes. Bounded: at most `maxRequests` answers (then 503), closes itself after
 * `lifetimeMs`: by default `TEST_TIMEOUT_MS`, the bound of the tests that use it, so that it never
 * closes under a test that is slow but within its bound (it was 20 s, less than a loaded `Chat`
 * test may take); a test bounded longer passes its own.
 */
export const replayServer = (
  specOrSequence: ReplaySpec | ReadonlyArray<ReplaySpec>,
  options?: { readonly maxRequests?: number | undefined; readonly lifetimeMs?: number | undefined }
): Effect.Effect<ReplayServer, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: Http.Server; readonly replay: ReplayServer; readonly timer: NodeJS.Timeout }>(
      (resume) => {
        // A sequence answers request i with spec i (the last one repeats).
        const specs: ReadonlyArray<ReplaySpec> = Array.isArray(specOrSequence) ? specOrSequence : [specOrSequence as ReplaySpec]
        const prepared = specs.map((spec) => ({
          spec,
          chunks: pieces(framedBody(spec), spec),
          contentType: spec.contentType ??
            (spec.file?.endsWith(".json") === true ? "application/json" : "text/event-stream")
        }))
        const requests: Array<CapturedRequest> = []
        let aborted = 0
        const maxRequests = options?.maxRequests ?? 16
        const server = Http.createServer((req, res) => {
          const received: Array<Buffer> = []
          let size = 0
          req.on("data", (data: Buffer) => {
            size += data.length
            if (size <= MAX_REQUEST_BODY) received.push(data)
          })
          req.on("end", () => {
            requests.push({
              method: req.method ?? "",
              url: req.url ?? "",
              headers: req.headers,
              body: Buffer.concat(received).toString("utf8")
            })
            if (requests.length > maxRequests) {
              res.writeHead(503).end()
              return
            }
            res.on("close", () => {
              if (!res.writableFinished) aborted++
            })
            const { chunks, contentType, spec } = prepared[Math.min(requests.length - 1, prepared.length - 1)]!
            void (async () => {
              res.writeHead(spec.status ?? 200, { "content-type": contentType, ...spec.headers })
              res.flushHeaders()
              for (let i = 0; i < chunks.length; i++) {
                if (res.destroyed) return
                if (i > 0) await pause(spec.delayMs)
                res.write(chunks[i])
              }
              res.end()
            })().catch(() => res.destroy())
          })
        })
        const timer = setTimeout(() => {
          server.closeAllConnections()
          server.close()
        }, options?.lifetimeMs ?? TEST_TIMEOUT_MS)
        timer.unref()
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          const replay: ReplayServer = {
            baseUrl: `http://127.0.0.1:${port}/v1`,
            requests,
            get aborted() {
              return aborted
            }
          }
          resume(Effect.succeed({ server, timer, replay }))
        })
      }
    ),
    ({ server, timer }) =>
      Effect.async<void>((resume) => {
        clearTimeout(timer)
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ replay }) => replay))

/** A loopback port that was just bound and closed: connecting to it is refused. */
export const closedPort: Effect.Effect<number> = Effect.async<number>((resume) => {
  const server = Http.createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})
