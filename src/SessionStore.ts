/**
 * The session store (§3): where session logs live. `layerMemory` keeps them in
 * memory; `layerJsonl` writes one `<id>.jsonl` file per session (header line, one event a line)
 * through Node file descriptors. The store assigns `seq` (contiguous from 0) and `time` (epoch ms
 * from the Effect `Clock`) when it accepts an append, and serializes appends per session. An
 * append is durable when it returns: in memory for `layerMemory`, `write(2)` returned for
 * `layerJsonl`, and also fsynced (group commit through a queue) for
 * `layerJsonl({ fsync: "batch" })` (§3.3). SQL stores (SQLite, PostgreSQL, …) are in
 * `SqlSessionStore` (`effect-agent-loop/sql`), so that nothing here loads `@effect/sql`.
 * Reading accepts our format (version 1) and DSH format v0 logs (§3.1; the rules are
 * in `internal/logCodec.ts`). The log itself and the store errors are in `SessionLog`.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Context, Effect, Layer, type Scope } from "effect"
import { fileErrorText } from "./internal/fsErrors.js"
import { commitDrafts } from "./internal/logCodec.js"
import * as Store from "./internal/store/common.js"
import { makeJsonlWith, nodeIo } from "./internal/store/jsonl.js"
import type { EventDraft, SessionEvent, SessionHeader, SessionId } from "./SessionEvent.js"
import {
  type CreateOptions,
  type LogContents,
  type SessionLog,
  type SessionLogError,
  type SessionNotFound,
  SessionStoreError
} from "./SessionLog.js"

/**
 * The operations of a session store (§3).
 *
 * @since 0.1.0
 * @category services
 */
export interface SessionStoreService {
  /**
   * Creates a new session and writes its header durably: an empty session, or a child session
   * whose header names its parent and, with a `seed`, a fork child that starts with its
   * parent's events (§3.1; the fields and their rules: `CreateOptions`), header and
   * events in one durable write. `id` defaults to the `IdGenerator` in context when there is
   * one, else a random UUID; `createdAt` (epoch ms) to `Clock.currentTimeMillis`. An id that
   * exists, or that cannot name a file (`[A-Za-z0-9_-][A-Za-z0-9._-]*`), or an option of the
   * wrong shape, is a `SessionStoreError`, and nothing is created.
   */
  readonly create: (options?: CreateOptions | undefined) => Effect.Effect<SessionLog, SessionStoreError>
  /**
   * Opens an existing session for appending. A torn last line is cut back to the end of the
   * last complete line before anything can be appended (§3.1, §10). Returns the
   * already open log when the session is open. A stored log whose header names another
   * session is a `SessionLogError` (line 1). One writer per session: a session that another
   * store or process has open for writing (a live writer's lock: JSONL `<id>.jsonl.lock`, SQL
   * a row of the writers table) is a `SessionStoreError` naming it; a dead writer's lock is
   * taken over. `create` takes the same lock.
   */
  readonly open: (id: SessionId) => Effect.Effect<SessionLog, SessionStoreError | SessionLogError | SessionNotFound>
  /** Reads a session without opening it for writing (a torn tail is ignored, not cut). */
  readonly read: (id: SessionId) => Effect.Effect<LogContents, SessionStoreError | SessionLogError | SessionNotFound>
  /** Ids of the stored sessions, sorted. */
  readonly list: Effect.Effect<ReadonlyArray<SessionId>, SessionStoreError>
}

/**
 * The session store service. Layers: `layerMemory`, `layerJsonl(options)`, and in
 * `effect-agent-loop/sql` `SqlSessionStore.layer` (any `@effect/sql` client) and
 * `SqlSessionStore.layerSqlite(options)`.
 *
 * @since 0.1.0
 * @category services
 */
export class SessionStore extends Context.Tag("effect-agent-loop/SessionStore")<SessionStore, SessionStoreService>() {}

/**
 * Reads and decodes a log file at any path: ours (version 1) or DSH v0 (§3.1), for
 * CLI commands such as `transcript FILE` and `check FILE` (§14). A torn last line is
 * ignored with a warning (the file is not changed). Fails with `SessionStoreError` when the
 * file cannot be read (a missing file too) or is not a regular file (a directory; a fifo, which
 * would block the open, or a device such as `/dev/zero`, which never ends: refused from a `stat`,
 * never opened), `SessionLogError` (naming the line) when its content cannot.
 *
 * @example
 * ```ts
 * import { NodeFileSystem } from "@effect/platform-node"
 * import { Effect } from "effect"
 * import { Invariant, SessionStore } from "effect-agent-loop"
 *
 * const violations = SessionStore.readFile(".agent-loop/sessions/s1.jsonl").pipe(
 *   Effect.map((log) => Invariant.check(log.events)),
 *   Effect.provide(NodeFileSystem.layer)
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const readFile = (
  path: string
): Effect.Effect<LogContents, SessionStoreError | SessionLogError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => {
    const cannotRead = (error: unknown) =>
      new SessionStoreError({
        message: `cannot read ${path}: ${fileErrorText(error, "read")}`,
        sessionId: undefined,
        cause: error
      })
    return fs.stat(path).pipe(
      Effect.mapError(cannotRead),
      Effect.flatMap((info): Effect.Effect<Uint8Array, SessionStoreError> =>
        info.type === "File"
          ? Effect.mapError(fs.readFile(path), cannotRead)
          : Effect.fail(Store.storeError(`cannot read ${path}: not a regular file (${Store.fileKind(info.type)})`, undefined))
      ),
      Effect.flatMap((bytes) => Store.decodeBytes(bytes, path))
    )
  })

// ---------------------------------------------------------------------------------------------
// Memory store
// ---------------------------------------------------------------------------------------------

const makeMemoryLog = (header: SessionHeader, events: Array<SessionEvent>): SessionLog => {
  // One synchronous step: nothing can interleave, so no lock is needed.
  const commit = (drafts: ReadonlyArray<EventDraft>, time: number): ReadonlyArray<SessionEvent> | SessionStoreError => {
    let committed: ReadonlyArray<SessionEvent>
    try {
      committed = commitDrafts(drafts, events.length, time)
    } catch (cause) {
      return Store.invalidEvents(header.id, cause)
    }
    for (let i = 0; i < committed.length; i++) events.push(committed[i]!)
    return committed
  }
  return {
    id: header.id,
    header,
    append: (drafts) => drafts.length === 0 ? Store.EMPTY : Store.appendAt((time) => commit(drafts, time)),
    appendSync: commit,
    events: () => events
  }
}

/**
 * Builds an in-memory store: sessions live as long as the store. Appends are durable when
 * they return (§3.3) and offer `appendSync`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<SessionStoreService> = Effect.sync(() => {
  const sessions = new Map<string, SessionLog>()
  const get = (id: SessionId): Effect.Effect<SessionLog, SessionNotFound> => {
    const log = sessions.get(id)
    return log === undefined ? Effect.fail(Store.notFound(id)) : Effect.succeed(log)
  }
  return SessionStore.of({
    create: (options) =>
      Effect.flatMap(Store.newSession(options), ({ events, header }) => {
        if (!Store.isSessionId(header.id)) return Effect.fail(Store.invalidId(header.id))
        if (sessions.has(header.id)) return Effect.fail(Store.alreadyExists(header.id))
        const log = makeMemoryLog(header, events)
        sessions.set(header.id, log)
        return Effect.succeed(log)
      }).pipe(Effect.withSpan("SessionStore.create")),
    open: (id) => get(id),
    read: (id) => Effect.map(get(id), (log): LogContents => ({ header: log.header, events: log.events().slice(), warnings: [] })),
    list: Effect.sync(() => Array.from(sessions.keys()).sort())
  })
})

/**
 * The in-memory store (no requirements). The simulator uses it (§15).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, Model, Offline, SessionStore } from "effect-agent-loop"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const agent = yield* Agent.make()
 *   yield* agent.followup("hello")
 *   yield* agent.awaitIdle
 *   return agent.log.events().length
 * }))
 * Effect.runPromise(program.pipe(Effect.provide(Layer.merge(SessionStore.layerMemory, Model.layer(Offline.make())))))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<SessionStore> = Layer.effect(SessionStore, makeMemory)

// ---------------------------------------------------------------------------------------------
// JSONL store
// ---------------------------------------------------------------------------------------------

/**
 * Options of `layerJsonl`: `directory` holds one `<id>.jsonl` per session (created on the first
 * `create`); `fsync` is `"none"` (default: durable when `write(2)` returned) or `"batch"` (also
 * fsynced, group-committed) (§3.3).
 *
 * @since 0.1.0
 * @category models
 */
export interface JsonlOptions {
  readonly directory: string
  readonly fsync?: "none" | "batch" | undefined
}

/**
 * Builds a JSONL store in `options.directory` (§3). Open logs keep their file
 * descriptor (opened with flag `"a"`) and their writer lock (`<id>.jsonl.lock`) until the scope
 * closes. Requires no `FileSystem`: it reads and writes through `node:fs` (the appends are
 * synchronous `write(2)` calls on a descriptor, which no `FileSystem` service can give). A log
 * path that is not a regular file (a fifo, a link to a device) is refused at once by `open` and
 * `read` (`SessionStoreError` `cannot open PATH: not a regular file (a fifo)`), never read: its
 * open does not block and its kind is checked on the descriptor; so is a lock file
 * (`cannot lock session …`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeJsonl = (options: JsonlOptions): Effect.Effect<SessionStoreService, never, Scope.Scope> =>
  Effect.map(makeJsonlWith(options, nodeIo), SessionStore.of)

/**
 * The JSONL store (§3.1, §3.3): one `<id>.jsonl` per session in `options.directory`.
 * It needs nothing from the context: files are opened, read and written through `node:fs` on
 * Node file descriptors (not through a `FileSystem` service), so it runs on Node only. Scoped:
 * open files and writer locks are released with the layer (a running fsync round ends first).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, Model, Offline, SessionStore } from "effect-agent-loop"
 *
 * const store = SessionStore.layerJsonl({ directory: ".agent-loop/sessions", fsync: "batch" })
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const agent = yield* Agent.make()
 *   yield* agent.followup("hello")
 *   yield* agent.awaitIdle
 *   return agent.log.path // .agent-loop/sessions/<id>.jsonl
 * }))
 * Effect.runPromise(program.pipe(Effect.provide(Layer.merge(store, Model.layer(Offline.make())))))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerJsonl = (options: JsonlOptions): Layer.Layer<SessionStore> => Layer.scoped(SessionStore, makeJsonl(options))
