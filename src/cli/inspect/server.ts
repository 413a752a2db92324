/**
 * The HTTP server of `agent-loop inspect` (§29), on `@effect/platform`'s `HttpServer` (Node's
 * `http` underneath): the page's three files, kept in memory, and the read-only JSON API of
 * `api.ts`, with server-sent events for live sessions.
 *
 * Rules:
 * - Only `GET` and `HEAD` (anything else is 405): no request changes a session.
 * - Paths are matched segment by segment against a fixed list; nothing of a path is ever joined
 *   into a file path. A session id must be a valid session id (`[A-Za-z0-9_-][A-Za-z0-9._-]*`)
 *   and one of the store's; anything else is 404, so no file outside the store can be reached.
 * - Bound to loopback (the default), a request whose `Host` is not `127.0.0.1:PORT`,
 *   `localhost:PORT`, `[::1]:PORT` or the `--host` address with the port is 403: a page of another site that resolves its own name
 *   to 127.0.0.1 (DNS rebinding) cannot read the API.
 * - Every answer carries a strict Content-Security-Policy (scripts and styles from this server
 *   only, no inline script, no frames) and `nosniff`; the page renders log content as text.
 * - A session's projection (`model.ts`) is built on its first request and kept until the
 *   session's probe token changes. While a page listens to a live stream, the store is probed
 *   every 250 ms (JSONL) or 500 ms (SQL), and a change is sent within that time.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Duration, Effect, Fiber, PubSub, Ref, Schedule, Stream } from "effect"
import * as NodeFs from "node:fs"
import { createServer } from "node:http"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import { isSessionId } from "../../internal/store/common.js"
import type * as Prices from "../../Prices.js"
import type * as Api from "./api.js"
import * as Model from "./model.js"
import type { Probed, SessionProbe, Source } from "./sources.js"

/** The page's files, read once from `dist/cli/inspect/` (built by `scripts/build-cli.js`). */
interface Assets {
  readonly html: string
  readonly js: string
  readonly css: string
}

/** Where the page's files are: beside the CLI bundle (`dist/cli/inspect/`), from this module or its chunk. */
export const assetsDirectory = (): string | undefined => {
  const here = NodePath.dirname(fileURLToPath(import.meta.url))
  for (const candidate of [NodePath.join(here, "inspect"), NodePath.join(here, "..", "inspect")]) {
    if (NodeFs.existsSync(NodePath.join(candidate, "index.html"))) return candidate
  }
  return undefined
}

const readAssets = (directory: string): Assets => ({
  html: NodeFs.readFileSync(NodePath.join(directory, "index.html"), "utf8"),
  js: NodeFs.readFileSync(NodePath.join(directory, "app.js"), "utf8"),
  css: NodeFs.readFileSync(NodePath.join(directory, "app.css"), "utf8")
})

/** What `serve` needs. */
export interface Options {
  readonly source: Source
  readonly host: string
  readonly port: number
  readonly prices?: Prices.Prices | undefined
  readonly version: string
  readonly assets: string
}

const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cache-control": "no-store"
}

const json = (body: unknown, status = 200) =>
  HttpServerResponse.text(JSON.stringify(body), {
    status,
    contentType: "application/json; charset=utf-8",
    headers: SECURITY_HEADERS
  })

const notFound = (error: string) => json({ error } satisfies Api.ApiError, 404)

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]"])

/** Whether a host is a loopback name or address (`--host` that needs no warning). */
export const isLoopback = (host: string): boolean => LOOPBACK.has(host) || host.startsWith("127.")

const intParam = (params: URLSearchParams, name: string, fallback: number): number => {
  const value = Number(params.get(name) ?? fallback)
  return Number.isSafeInteger(value) && value >= 0 ? value : fallback
}

type Change = { readonly id: string | undefined }

/** What the server knows of a session it has read: its summary, and its header's id. */
interface Known {
  readonly token: string
  readonly summary: Api.SessionSummary
  readonly headerId: string
}

/** How long a probe of the whole store serves the list and the pages' links (ms). */
const PROBE_REUSE_MS = 200

/** How many sessions' whole projections the server keeps at once. */
const MODELS_KEPT = 4

/**
 * Serves the inspector on `host:port` (port 0: a free one) until the scope closes, and returns
 * the address it listens on.
 */
export const serve = (options: Options) =>
  Effect.gen(function*() {
    const { source } = options
    const assets = readAssets(options.assets)
    // Every session's summary as last read (small: the list needs them all), and the whole
    // projections of the few sessions last opened (large: a session of 100,000 events is about
    // 250 MB), each kept while its probe token holds.
    const summaries = new Map<string, Known>()
    const models = new Map<string, { readonly token: string; readonly model: Model.SessionModel }>()
    const problems = new Map<string, string>()
    // Versions are unique across runs of the server (a page that outlived a restart sees the
    // new server's versions as new).
    let version = Date.now()
    const builds = yield* Effect.makeSemaphore(1)

    /** A session's model as its log stands now (kept while its token holds; `MODELS_KEPT` at most). */
    const modelOf = (id: string, probe: SessionProbe | undefined) =>
      builds.withPermits(1)(Effect.gen(function*() {
        if (probe === undefined) return undefined
        const cached = models.get(id)
        if (cached !== undefined && cached.token === probe.token) {
          models.delete(id)
          models.set(id, cached)
          return cached.model
        }
        models.delete(id)
        const contents = yield* source.read(id).pipe(
          Effect.tapError((e) => Effect.sync(() => problems.set(id, e.message)))
        )
        if (contents === undefined) return undefined
        const model = Model.build(id, contents, { writerLive: probe.writerLive, prices: options.prices, version: ++version })
        models.set(id, { token: probe.token, model })
        for (const old of models.keys()) {
          if (models.size <= MODELS_KEPT) break
          models.delete(old)
        }
        summaries.set(id, { token: probe.token, summary: model.summary, headerId: contents.header.id })
        problems.delete(id)
        return model
      }))

    /** A session's summary: from `summaries` while its token holds, else from its model. */
    const summaryOf = (id: string, probe: SessionProbe | undefined) =>
      Effect.suspend(() => {
        const known = summaries.get(id)
        return known !== undefined && probe !== undefined && known.token === probe.token
          ? Effect.succeed(known)
          : Effect.map(modelOf(id, probe), () => summaries.get(id))
      })

    // The list and a session's page need the whole store's probe (for the links); one taken in
    // the last PROBE_REUSE_MS, by them or by the live loop, is used again: a directory of
    // thousands of logs takes tens of milliseconds to probe, and a page asks several times at once.
    let recent: { readonly at: number; readonly probed: Probed } | undefined
    const remember = (probed: Probed) => Effect.sync(() => void (recent = { at: Date.now(), probed }))
    const freshProbe = Effect.tap(source.probe, remember)
    const probeRecent = Effect.suspend(() =>
      recent !== undefined && Date.now() - recent.at < PROBE_REUSE_MS ? Effect.succeed(recent.probed) : freshProbe
    )

    const session = (id: string) =>
      isSessionId(id) ? Effect.flatMap(source.probeOne(id), (probe) => modelOf(id, probe)) : Effect.succeed(undefined)

    /**
     * A summary with its parent and children as ids of this store. Ours name them by session id,
     * which is the file's name. A DSH child names its parent by header id, and DSH file names are
     * not ids (several logs of a folder may even share a header id): a child `X.N` belongs to `X`
     * when `X`'s header id is the one it names; else to the one session known with that header
     * id; else the link is left as the log has it. The children are those the log names
     * (`subagent/start`) and the `X.N` that belong to `X`.
     */
    const linked = (summary: Api.SessionSummary, all: ReadonlyMap<string, SessionProbe>) =>
      Effect.gen(function*() {
        let parent = summary.parent
        if (parent !== undefined && !all.has(parent)) {
          const stem = /^(.*)\.\d+$/.exec(summary.id)?.[1]
          const byStem = stem !== undefined && all.has(stem)
            ? yield* Effect.orElseSucceed(summaryOf(stem, all.get(stem)), () => undefined)
            : undefined
          if (byStem?.headerId === parent) parent = stem
          else {
            const named = [...summaries].filter(([id, known]) => all.has(id) && known.headerId === parent)
            if (named.length === 1) parent = named[0]![0]
          }
        }
        const children = [...summary.children]
        const own = summaries.get(summary.id)?.headerId
        for (const id of all.keys()) {
          if (!id.startsWith(`${summary.id}.`) || !/^\d+$/.test(id.slice(summary.id.length + 1))) continue
          const child = yield* Effect.orElseSucceed(summaryOf(id, all.get(id)), () => undefined)
          if (child !== undefined && child.summary.parent === own && !children.includes(id)) children.push(id)
        }
        return {
          ...summary,
          parent,
          children,
          ...(parent !== undefined && !all.has(parent) ? { parentOutside: true as const } : {})
        }
      })

    const list = Effect.gen(function*() {
      const { sessions: all, skipped } = yield* probeRecent
      const sessions: Array<Api.SessionSummary> = []
      for (const [id, probe] of all) {
        const known = yield* summaryOf(id, probe).pipe(Effect.orElseSucceed(() => undefined))
        if (known !== undefined) sessions.push(known.summary)
      }
      const withLinks: Array<Api.SessionSummary> = []
      for (const summary of sessions) withLinks.push(yield* linked(summary, all))
      for (const [id] of problems) if (!all.has(id)) problems.delete(id)
      for (const [id] of summaries) if (!all.has(id)) summaries.delete(id)
      const body: Api.SessionList = {
        sessions: withLinks,
        problems: [
          ...[...problems].map(([id, message]) => ({ id, message })),
          ...skipped.map(({ message, name }) => ({ id: name, message }))
        ],
        version
      }
      return body
    })

    // The live streams: one probe loop, which probes while any page listens and publishes what
    // changed since the last probe (the first is taken now, so that a change made before a page
    // listens is still seen at its first probe).
    const changes = yield* PubSub.unbounded<Change>()
    const listeners = yield* Ref.make(0)
    const last = new Map<string, string>()
    const first = yield* Effect.orElseSucceed(source.probe, () => undefined)
    for (const [id, probe] of first?.sessions ?? []) last.set(id, probe.token)
    const probeLoop = Effect.gen(function*() {
      if ((yield* Ref.get(listeners)) === 0) return
      const probed = yield* Effect.orElseSucceed(freshProbe, () => undefined)
      if (probed === undefined) return
      const all = probed.sessions
      let listChanged = all.size !== last.size
      for (const [id, probe] of all) {
        if (last.get(id) !== probe.token) {
          yield* PubSub.publish(changes, { id })
          listChanged = true
          last.set(id, probe.token)
        }
      }
      for (const id of [...last.keys()]) {
        if (!all.has(id)) {
          last.delete(id)
          yield* PubSub.publish(changes, { id })
        }
      }
      if (listChanged) yield* PubSub.publish(changes, { id: undefined })
    })
    yield* Effect.forkScoped(Effect.repeat(probeLoop, Schedule.spaced(Duration.millis(source.probeEveryMs))))

    const encoder = new TextEncoder()
    const sse = (events: Stream.Stream<string, never, never>) => {
      const keepAlive = Stream.repeatEffect(Effect.succeed(": keep-alive\n\n")).pipe(
        Stream.schedule(Schedule.spaced(Duration.seconds(15)))
      )
      const body = Stream.concat(Stream.make(": open\n\n"), Stream.merge(events, keepAlive)).pipe(
        Stream.map((text) => encoder.encode(text)),
        Stream.ensuring(Ref.update(listeners, (n) => n - 1))
      )
      return Effect.as(
        Ref.update(listeners, (n) => n + 1),
        HttpServerResponse.stream(body, {
          contentType: "text/event-stream",
          headers: { ...SECURITY_HEADERS, "x-accel-buffering": "no" }
        })
      )
    }
    const subscribe = (keep: (change: Change) => boolean) => Stream.fromPubSub(changes).pipe(Stream.filter(keep))

    // A stream starts with the state as it is (a `changed` the page ignores when it has that
    // version), so that a change between the page's read and its subscription is not lost.
    const sessionLive = (id: string) =>
      sse(
        Stream.concat(Stream.succeed<Change>({ id }), subscribe((c) => c.id === id)).pipe(
          Stream.mapEffect(() => Effect.either(session(id))),
          Stream.map((read) => {
            if (read._tag === "Left" || read.right === undefined) {
              // The log cannot be read now (cut, garbled, removed): the page says so.
              const error: Api.ApiError = {
                error: read._tag === "Left" ? read.left.message : `no session ${id} in the store any more`
              }
              return `event: unreadable\ndata: ${JSON.stringify(error)}\n\n`
            }
            const m = read.right
            const change: Api.LiveChange = { version: m.view.version, rows: m.rows.length, events: m.contents.events.length }
            return `event: changed\ndata: ${JSON.stringify(change)}\n\n`
          })
        )
      )
    const listLive = sse(
      Stream.concat(Stream.succeed<Change>({ id: undefined }), subscribe(() => true)).pipe(
        Stream.debounce(Duration.millis(100)),
        Stream.map(() => `event: sessions\ndata: ${JSON.stringify({ version })}\n\n`)
      )
    )

    const sessionRoute = (id: string, rest: ReadonlyArray<string>, query: URLSearchParams) =>
      Effect.gen(function*() {
        if (rest.length === 1 && rest[0] === "live") {
          if (!isSessionId(id) || (yield* source.probeOne(id)) === undefined) return notFound(`no session ${id}`)
          return yield* sessionLive(id)
        }
        const model = yield* session(id)
        if (model === undefined) return notFound(`no session ${id}`)
        if (rest.length === 0) {
          return json({ ...model.view, summary: yield* linked(model.view.summary, (yield* probeRecent).sessions) })
        }
        if (rest.length === 1 && rest[0] === "rows") {
          const from = Math.min(intParam(query, "from", 0), model.rows.length)
          const count = Math.min(intParam(query, "count", 200), 2000)
          return json({ from, rows: model.rows.slice(from, from + count), total: model.rows.length } satisfies Api.RowPage)
        }
        if (rest.length === 1 && rest[0] === "events") {
          const events = model.contents.events
          const first = events.length > 0 ? events[0]!.seq : 0
          const from = Math.max(intParam(query, "from", first), first)
          const count = Math.min(intParam(query, "count", 100), 500)
          const start = from - first
          return json(
            {
              from,
              events: events.slice(start, start + count).map(Model.eventOut),
              total: events.length
            } satisfies Api.EventPage
          )
        }
        if (rest.length === 1 && rest[0] === "request") {
          const request = Model.requestOf(model, intParam(query, "turn", 0), intParam(query, "step", 0))
          return request === undefined ? notFound("no such step in this session") : json(request)
        }
        if (rest.length === 2 && rest[0] === "messages") {
          const story = Model.storyOf(model, rest[1]!)
          return story === undefined ? notFound("no such message in this session") : json(story)
        }
        return notFound("no such path")
      })

    const route = (segments: ReadonlyArray<string>, query: URLSearchParams) =>
      Effect.gen(function*() {
        if (segments.length === 0) {
          return HttpServerResponse.text(assets.html, { contentType: "text/html; charset=utf-8", headers: SECURITY_HEADERS })
        }
        if (segments.length === 2 && segments[0] === "assets") {
          if (segments[1] === "app.js") {
            return HttpServerResponse.text(assets.js, {
              contentType: "text/javascript; charset=utf-8",
              headers: SECURITY_HEADERS
            })
          }
          if (segments[1] === "app.css") {
            return HttpServerResponse.text(assets.css, { contentType: "text/css; charset=utf-8", headers: SECURITY_HEADERS })
          }
        }
        if (segments[0] !== "api") return notFound("no such path")
        if (segments.length === 2 && segments[1] === "store") {
          return json(
            {
              kind: source.kind,
              where: source.where,
              readOnly: true,
              prices: options.prices !== undefined,
              version: options.version
            } satisfies Api.StoreInfo
          )
        }
        if (segments.length === 2 && segments[1] === "sessions") return json(yield* list)
        if (segments.length === 2 && segments[1] === "live") return yield* listLive
        if (segments.length >= 3 && segments[1] === "sessions") {
          return yield* sessionRoute(segments[2]!, segments.slice(3), query)
        }
        return notFound("no such path")
      })

    const nodeServer = createServer()
    const server = yield* NodeHttpServer.make(() => nodeServer, { port: options.port, host: options.host })
    // Closing waits for every connection to end, and a live stream never does: end them first
    // (this finalizer runs before the server's own), so a signal stops the server at once.
    yield* Effect.addFinalizer(() => Effect.sync(() => nodeServer.closeAllConnections()))
    const address = server.address
    const port = address._tag === "TcpAddress" ? address.port : options.port
    const loopback = isLoopback(options.host)
    const own = options.host.includes(":") ? `[${options.host}]` : options.host
    const allowedHosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `${own}:${port}`])

    const app = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (request.method !== "GET" && request.method !== "HEAD") {
        return HttpServerResponse.text("read-only: only GET\n", {
          status: 405,
          headers: { ...SECURITY_HEADERS, allow: "GET, HEAD" }
        })
      }
      if (loopback && !allowedHosts.has(request.headers.host ?? "")) {
        return HttpServerResponse.text("forbidden host\n", { status: 403, headers: SECURITY_HEADERS })
      }
      // The path as sent (`new URL` would read `//x/y` as a host), split before any decoding.
      const queryAt = request.url.indexOf("?")
      const pathname = queryAt === -1 ? request.url : request.url.slice(0, queryAt)
      const query = new URLSearchParams(queryAt === -1 ? "" : request.url.slice(queryAt + 1))
      const segments: Array<string> = []
      for (const raw of pathname.split("/")) {
        if (raw === "") continue
        let segment: string
        try {
          segment = decodeURIComponent(raw)
        } catch {
          return notFound("no such path")
        }
        segments.push(segment)
      }
      return yield* route(segments, query)
    }).pipe(
      Effect.catchAll((e) => Effect.succeed(json({ error: e.message } satisfies Api.ApiError, 500))),
      // A bug of the inspector's: the page gets a line, stderr the whole cause.
      Effect.catchAllDefect((defect) =>
        Effect.as(
          Effect.logError("inspect: request failed", defect),
          json({ error: `internal error: ${defect instanceof Error ? defect.message : String(defect)}` }, 500)
        )
      )
    )
    const serving = yield* Effect.forkScoped(Effect.provideService(HttpServer.serveEffect()(app), HttpServer.HttpServer, server))
    yield* Effect.addFinalizer(() => Fiber.interrupt(serving))
    return { host: options.host, port }
  })
