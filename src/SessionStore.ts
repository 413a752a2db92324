/**
 * The session store (DESIGN.md §3): where session logs live. `layerMemory` keeps them in
 * memory; `layerJsonl` writes one `<id>.jsonl` file per session (header line, one event a line)
 * through @effect/platform's `FileSystem`. The store assigns `seq` (contiguous from 0) and
 * `time` (epoch ms from the Effect `Clock`) when it accepts an append, and serializes appends
 * per session. An append is durable when it returns: in memory for `layerMemory`, `write(2)`
 * returned for `layerJsonl`, and also fsynced (group commit through a queue) for
 * `layerJsonl({ fsync: "batch" })` (DESIGN.md §3.3). `layerSqlite` keeps every session in one
 * SQLite database (WAL mode; `makeSql` on any `@effect/sql` client): an append is durable when
 * committed. Reading accepts our format (version 1) and DSH format v0 logs (DESIGN.md §3.1; the
 * rules are in `internal/logCodec.ts`).
 *
 * @since 0.1.0
 */
import * as NodeFs from "node:fs"
import * as Os from "node:os"
import { FileSystem } from "@effect/platform"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { PlatformError } from "@effect/platform/Error"
import {
  Context,
  Effect,
  Either,
  ExecutionStrategy,
  Exit,
  Layer,
  Option,
  Schema,
  Scope
} from "effect"
import { IdGenerator, random } from "./IdGenerator.js"
import { commitDrafts, decodeLog, encodeEvents, encodeHeader, InvalidDraft, makeHeader } from "./internal/logCodec.js"
import type { EventDraft, SessionEvent, SessionHeader, SessionId } from "./SessionEvent.js"

/**
 * An I/O failure of the store (create, open, write, fsync, read, list), an id that cannot name
 * a file, or an append to a closed or broken log. `cause` is the platform error when there is
 * one. A failed append changes nothing in memory (DESIGN.md §3.3).
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionStoreError extends Schema.TaggedError<SessionStoreError>()("SessionStoreError", {
  message: Schema.String,
  sessionId: Schema.optional(Schema.String),
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * A log that cannot be read: corruption before the tail (a line that is not JSON, a bad
 * envelope, a `seq` out of order, core `data` that fails its schema), a header that is not a
 * session header, a legacy shape the reader cannot import. `line` is 1-based (line 1 is the
 * header); `message` names the line and the file (DESIGN.md §3.1).
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionLogError extends Schema.TaggedError<SessionLogError>()("SessionLogError", {
  message: Schema.String,
  path: Schema.optional(Schema.String),
  line: Schema.Number
}) {}

/**
 * No session has this id (`open`, `read`). Creating a session whose id exists is a
 * `SessionStoreError`.
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  message: Schema.String,
  sessionId: Schema.String
}) {}

/**
 * What reading a log gives: the header, every event, deep-frozen (DSH v0 logs normalized:
 * `seq`/`time` assigned, packed chunk rows expanded into `assistant/chunk` events), and warnings
 * (a torn last line ignored, blank lines skipped). `validBytes` and `tornTail` are set for
 * logs read from bytes (DESIGN.md §3.1).
 *
 * @since 0.1.0
 * @category models
 */
export interface LogContents {
  readonly header: SessionHeader
  readonly events: ReadonlyArray<SessionEvent>
  readonly warnings: ReadonlyArray<string>
  /** Byte length of the complete lines; a torn tail starts here (JSONL only). */
  readonly validBytes?: number | undefined
  /** True when a torn last line was ignored. */
  readonly tornTail?: boolean | undefined
}

/**
 * An open session log, the only writer of its session (DESIGN.md §3.3). A store hands out one
 * `SessionLog` per session: `open` of a session that is already open returns the same log.
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionLog {
  readonly id: SessionId
  readonly header: SessionHeader
  /** The file of a JSONL log. */
  readonly path?: string | undefined
  /**
   * Assigns `seq` (continuing the log) and `time` (`Clock.currentTimeMillis` when the append is
   * accepted, one value for the whole call) and appends the drafts in order, all or nothing:
   * one `write` for the whole call in the JSONL store. Deep-freezes the drafts' data in place.
   * Returns the committed, frozen events once durable. Concurrent calls are serialized and
   * each call's events are adjacent. Fails with `SessionStoreError` when the write (or, with
   * `fsync: "batch"`, the fsync) fails; after a failed write the file is cut back to its last
   * committed event and nothing changed. A failed fsync breaks the log (later appends fail):
   * its events were written and stay in `events()`, but their durability is unknown.
   */
  readonly append: (drafts: ReadonlyArray<EventDraft>) => Effect.Effect<ReadonlyArray<SessionEvent>, SessionStoreError>
  /**
   * Offered by a store whose appends are durable when a synchronous call returns (memory; JSONL
   * with `fsync: "none"`, where durable means `write(2)` returned, DESIGN.md §3.3): the same as
   * `append`, with `time` (epoch ms) given by the caller, as one synchronous step that returns
   * the committed events or the `SessionStoreError` (never throws). The agent uses it to run
   * each critical section (validate → append → state) as one step, with no lock: nothing can
   * interleave with a synchronous call. Absent when an append must wait (`fsync: "batch"`).
   */
  readonly appendSync?: ((drafts: ReadonlyArray<EventDraft>, time: number) => ReadonlyArray<SessionEvent> | SessionStoreError) | undefined
  /**
   * Every committed event so far (including the events read when the log was opened), in `seq`
   * order. A live read-only view that grows with later appends: `slice()` it for a snapshot.
   */
  readonly events: () => ReadonlyArray<SessionEvent>
}

/**
 * The operations of a session store (DESIGN.md §3).
 *
 * @since 0.1.0
 * @category services
 */
export interface SessionStoreService {
  /**
   * Creates a new empty session and writes its header durably. `id` defaults to the
   * `IdGenerator` in context when there is one, else a random UUID; `createdAt` (epoch ms) to
   * `Clock.currentTimeMillis`. An id that exists, or that cannot name a file
   * (`[A-Za-z0-9_-][A-Za-z0-9._-]*`), is a `SessionStoreError`.
   */
  readonly create: (options?: {
    readonly id?: SessionId | undefined
    readonly cwd?: string | undefined
    readonly createdAt?: number | undefined
  }) => Effect.Effect<SessionLog, SessionStoreError>
  /**
   * Opens an existing session for appending. A torn last line is cut back to the end of the
   * last complete line before anything can be appended (DESIGN.md §3.1, §10). Returns the
   * already open log when the session is open. A stored log whose header names another
   * session is a `SessionLogError` (line 1). One writer per session: a session that another
   * store or process has open for writing (a live writer's lock: JSONL `<id>.jsonl.lock`, SQL
   * `agent_loop_writers`) is a `SessionStoreError` naming it; a dead writer's lock is taken
   * over. `create` takes the same lock.
   */
  readonly open: (id: SessionId) => Effect.Effect<SessionLog, SessionStoreError | SessionLogError | SessionNotFound>
  /** Reads a session without opening it for writing (a torn tail is ignored, not cut). */
  readonly read: (id: SessionId) => Effect.Effect<LogContents, SessionStoreError | SessionLogError | SessionNotFound>
  /** Ids of the stored sessions, sorted. */
  readonly list: Effect.Effect<ReadonlyArray<SessionId>, SessionStoreError>
}

/**
 * The session store service. Layers: `layerMemory`, `layerJsonl(options)`, `layerSqlite(options)`
 * (or `makeSql` on your own `SqlClient`).
 *
 * @since 0.1.0
 * @category services
 */
export class SessionStore extends Context.Tag("effect-agent-loop/SessionStore")<SessionStore, SessionStoreService>() {}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

const EMPTY: Effect.Effect<ReadonlyArray<SessionEvent>> = Effect.succeed(Object.freeze([]))

const VALID_ID = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/

const nextId: Effect.Effect<string> = Effect.flatMap(
  Effect.serviceOption(IdGenerator),
  (generator) => Option.isSome(generator) ? generator.value.next : random.next
)

type CreateOptions = Parameters<SessionStoreService["create"]>[0]

const resolveCreate = Effect.fnUntraced(function*(options: CreateOptions) {
  const id = options?.id ?? (yield* nextId)
  const createdAt = options?.createdAt ?? (yield* Effect.clockWith((clock) => clock.currentTimeMillis))
  return makeHeader({ id, createdAt, cwd: options?.cwd })
})

/** The message of a cause; for an error that wraps another (an `SqlError`), both messages. */
const causeMessage = (cause: unknown): string => {
  if (!(cause instanceof Error)) return String(cause)
  const inner = (cause as { readonly cause?: unknown }).cause
  return inner instanceof Error && inner.message !== "" && !cause.message.includes(inner.message)
    ? `${cause.message}: ${inner.message}`
    : cause.message
}

const storeError = (message: string, sessionId: string | undefined, cause?: unknown): SessionStoreError =>
  new SessionStoreError({
    message: cause === undefined ? message : `${message}: ${causeMessage(cause)}`,
    sessionId,
    cause
  })

const isNotFound = (error: PlatformError): boolean => error._tag === "SystemError" && error.reason === "NotFound"

const notFound = (id: string): SessionNotFound => new SessionNotFound({ message: `no session "${id}"`, sessionId: id })

const logError = (path: string | undefined, failure: { readonly line: number; readonly message: string }) =>
  new SessionLogError({
    message: `${path ?? "session log"}, line ${failure.line}: ${failure.message}`,
    path,
    line: failure.line
  })

const decodeBytes = (
  bytes: Uint8Array,
  path: string | undefined
): Effect.Effect<LogContents, SessionLogError> => {
  const result = decodeLog(bytes)
  return Either.isRight(result) ? Effect.succeed(result.right) : Effect.fail(logError(path, result.left))
}

/**
 * Reads and decodes a log file at any path: ours (version 1) or DSH v0 (DESIGN.md §3.1), for
 * CLI commands such as `transcript FILE` and `check FILE` (DESIGN.md §14). A torn last line is
 * ignored with a warning (the file is not changed). Fails with `SessionStoreError` when the
 * file cannot be read, `SessionLogError` (naming the line) when its content cannot.
 *
 * @since 0.1.0
 * @category constructors
 */
export const readFile = (
  path: string
): Effect.Effect<LogContents, SessionStoreError | SessionLogError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    fs.readFile(path).pipe(
      Effect.mapError((error) => storeError(`cannot read ${path}`, undefined, error)),
      Effect.flatMap((bytes) => decodeBytes(bytes, path))
    ))

// ---------------------------------------------------------------------------------------------
// Memory store
// ---------------------------------------------------------------------------------------------

const makeMemoryLog = (header: SessionHeader): SessionLog => {
  const events: Array<SessionEvent> = []
  // One synchronous step: nothing can interleave, so no lock is needed.
  const commit = (drafts: ReadonlyArray<EventDraft>, time: number): ReadonlyArray<SessionEvent> | SessionStoreError => {
    let committed: ReadonlyArray<SessionEvent>
    try {
      committed = commitDrafts(drafts, events.length, time)
    } catch (cause) {
      return invalidEvents(header.id, cause)
    }
    for (let i = 0; i < committed.length; i++) events.push(committed[i]!)
    return committed
  }
  return {
    id: header.id,
    header,
    append: (drafts) =>
      drafts.length === 0 ? EMPTY : Effect.clockWith((clock) => {
        const result = commit(drafts, clock.unsafeCurrentTimeMillis())
        return result instanceof SessionStoreError ? Effect.fail(result) : Effect.succeed(result)
      }),
    appendSync: commit,
    events: () => events
  }
}

/** The error of an append whose events the reader would refuse or that are not JSON. */
const invalidEvents = (id: string, cause: unknown): SessionStoreError =>
  cause instanceof InvalidDraft
    ? new SessionStoreError({ message: `cannot append to session "${id}": ${cause.message}`, sessionId: id, cause })
    : storeError(`cannot append to session "${id}": an event is not JSON`, id, cause)

/**
 * Builds an in-memory store: sessions live as long as the store. Appends are durable when
 * they return (DESIGN.md §3.3).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<SessionStoreService> = Effect.sync(() => {
  const sessions = new Map<string, SessionLog>()
  const get = (id: SessionId): Effect.Effect<SessionLog, SessionNotFound> => {
    const log = sessions.get(id)
    return log === undefined ? Effect.fail(notFound(id)) : Effect.succeed(log)
  }
  return SessionStore.of({
    create: Effect.fn("SessionStore.create")(function*(options) {
      const header = yield* resolveCreate(options)
      if (!VALID_ID.test(header.id)) {
        return yield* Effect.fail(storeError(`invalid session id ${JSON.stringify(header.id)}`, header.id))
      }
      if (sessions.has(header.id)) {
        return yield* Effect.fail(storeError(`session "${header.id}" already exists`, header.id))
      }
      const log = makeMemoryLog(header)
      sessions.set(header.id, log)
      return log
    }),
    open: (id) => get(id),
    read: (id) =>
      Effect.map(get(id), (log): LogContents => ({ header: log.header, events: log.events().slice(), warnings: [] })),
    list: Effect.sync(() => Array.from(sessions.keys()).sort())
  })
})

/**
 * The in-memory store (no requirements). The simulator uses it (DESIGN.md §15).
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
 * `create`); `fsync` is `"none"` (default: durable when `write` returned) or `"batch"` (also
 * fsynced, group-committed) (DESIGN.md §3.3).
 *
 * @since 0.1.0
 * @category models
 */
export interface JsonlOptions {
  readonly directory: string
  readonly fsync?: "none" | "batch" | undefined
  /** The write seam (tests inject faults through it). @internal */
  readonly io?: JsonlIo | undefined
}

/**
 * How the JSONL store writes appended lines: a synchronous `write(2)` on the open file's
 * descriptor (durable as DESIGN.md §3.3 defines it once it returns; one system call, no thread
 * pool round trip), a synchronous truncate that undoes a failed write, and `fdatasync(2)` for
 * `fsync: "batch"` (in the thread pool; one per group-commit round). Opening, reading and
 * cutting torn tails go through @effect/platform's `FileSystem`.
 *
 * @internal
 */
export interface JsonlIo {
  /**
   * Writes `text` as UTF-8 (one `write(2)`; no intermediate byte array); returns the bytes
   * written, fewer on a short write. Throws on failure.
   */
  readonly writeText: (fd: number, text: string) => number
  /** Writes `length` bytes from `offset` (the rest after a short write); returns the bytes written. Throws on failure. */
  readonly write: (fd: number, bytes: Uint8Array, offset: number, length: number) => number
  /** Cuts the file to `size` bytes. Throws on failure. */
  readonly truncate: (fd: number, size: number) => void
  /** Flushes the file's data to the device; calls `done` with the error, or null. */
  readonly datasync: (fd: number, done: (error: Error | null) => void) => void
}

const nodeIo: JsonlIo = {
  writeText: (fd, text) => NodeFs.writeSync(fd, text),
  write: (fd, bytes, offset, length) => NodeFs.writeSync(fd, bytes, offset, length),
  truncate: (fd, size) => NodeFs.ftruncateSync(fd, size),
  datasync: (fd, done) => NodeFs.fdatasync(fd, done)
}

/** `fdatasync` through the `io` seam as an effect. */
const datasync = (io: JsonlIo, file: FileSystem.File): Effect.Effect<void, Error> =>
  Effect.async<void, Error>((resume) => {
    io.datasync(file.fd as unknown as number, (error) => resume(error === null ? Effect.void : Effect.fail(error)))
  })


/**
 * `fsync: "batch"`: an append waiting for its group-commit round: its events and their lines,
 * and `done`, called with the round's error, if any.
 */
interface Pending {
  readonly committed: ReadonlyArray<SessionEvent>
  readonly text: string
  readonly done: (error: SessionStoreError | undefined) => void
}

/**
 * The mutable state of one open JSONL log. An append (seq, time, write, commit) is one
 * synchronous step, so appends need no lock: nothing can interleave with it.
 */
interface JsonlLog {
  readonly id: string
  readonly path: string
  readonly file: FileSystem.File
  readonly io: JsonlIo
  readonly events: Array<SessionEvent>
  /** Bytes of the file that hold committed lines. */
  size: number
  /** The file ends with a complete line that lacks its newline (a DSH log, an edited file). */
  pendingNewline: boolean
  /** Set when the log can no longer be appended to (closed, or a failed fsync or repair). */
  broken: SessionStoreError | undefined
  /** `fsync: "batch"`: appends waiting for the next round (their lines not written yet). */
  waiting: Array<Pending> | undefined
  /** `fsync: "batch"`: the `seq` of the next append (counts the waiting appends' events). */
  nextSeq: number
  /** `fsync: "batch"`: an fdatasync round is running. */
  syncing: boolean
  /** `fsync: "batch"`: a round will start on the next turn of the event loop. */
  roundDue: boolean
  /** Called once the running round has ended (closing waits for it). */
  onRoundEnd: (() => void) | undefined
}

/**
 * Writes all of `text` through the `io` seam (one `write(2)` of the string in the normal case;
 * after a short write, the rest as bytes). Returns the bytes written. Throws on failure.
 */
const writeAllSync = (io: JsonlIo, file: FileSystem.File, text: string): number => {
  const fd = file.fd as unknown as number
  const total = Buffer.byteLength(text, "utf8")
  let offset = io.writeText(fd, text)
  if (offset >= total) return total
  const bytes = Buffer.from(text, "utf8")
  while (offset < total) {
    const n = io.write(fd, bytes, offset, total - offset)
    if (n <= 0) throw new Error("write returned 0 bytes written")
    offset += n
  }
  return total
}

/**
 * Appends the drafts as one synchronous `write(2)` (looping on a short write). On failure the
 * part that reached the file is cut off and nothing changes in memory; if the cut fails too,
 * the log is marked broken. Returns the committed events or the error.
 */
const writeDrafts = (
  log: JsonlLog,
  drafts: ReadonlyArray<EventDraft>,
  time: number
): ReadonlyArray<SessionEvent> | SessionStoreError => {
  if (log.broken !== undefined) return log.broken
  const encoded = encodeDrafts(log, drafts, log.events.length, time)
  if (encoded instanceof SessionStoreError) return encoded
  const failed = writeText(log, encoded.text)
  if (failed !== undefined) return failed
  const events = log.events
  const committed = encoded.committed
  for (let i = 0; i < committed.length; i++) events.push(committed[i]!)
  return committed
}

/** The committed events of `drafts` (from `seq`) and their lines, or the error when not JSON. */
const encodeDrafts = (
  log: JsonlLog,
  drafts: ReadonlyArray<EventDraft>,
  seq: number,
  time: number
): { readonly committed: ReadonlyArray<SessionEvent>; readonly text: string } | SessionStoreError => {
  try {
    const committed = commitDrafts(drafts, seq, time)
    return { committed, text: encodeEvents(committed) }
  } catch (cause) {
    return invalidEvents(log.id, cause)
  }
}

/**
 * Writes lines at the end of the file (one `write(2)` in the normal case). On failure the part
 * that reached the file is cut off (if that fails too, the log is broken) and the error is
 * returned; on success the file size is updated.
 */
const writeText = (log: JsonlLog, text: string): SessionStoreError | undefined => {
  let written: number
  try {
    written = writeAllSync(log.io, log.file, log.pendingNewline ? "\n" + text : text)
  } catch (error) {
    try {
      log.io.truncate(log.file.fd as unknown as number, log.size)
    } catch (truncateError) {
      log.broken = storeError(`session "${log.id}" is broken: a failed write could not be cut back`, log.id, truncateError)
    }
    return storeError(`cannot append to session "${log.id}"`, log.id, error)
  }
  log.size += written
  log.pendingNewline = false
  return undefined
}

/**
 * `fsync: "batch"` (group commit, DESIGN.md §3.3): the append's events get their `seq` now and
 * wait for the next round, which writes the lines of every waiting append in one `write(2)`,
 * then runs one `fdatasync`; the append returns when that is done. A round starts on the event
 * loop's next turn (`setImmediate`, not a timer), so that every append made in this turn
 * (fibers resumed by the last round, other appenders) shares it; appends made while a round's
 * fdatasync runs wait for the next one.
 */
const appendBatched = (
  log: JsonlLog,
  drafts: ReadonlyArray<EventDraft>
): Effect.Effect<ReadonlyArray<SessionEvent>, SessionStoreError> =>
  Effect.clockWith((clock) =>
    Effect.async<ReadonlyArray<SessionEvent>, SessionStoreError>((resume) => {
      if (log.broken !== undefined) return resume(Effect.fail(log.broken))
      const encoded = encodeDrafts(log, drafts, log.nextSeq, clock.unsafeCurrentTimeMillis())
      if (encoded instanceof SessionStoreError) return resume(Effect.fail(encoded))
      const committed = encoded.committed
      log.nextSeq += committed.length
      log.waiting!.push({
        committed,
        text: encoded.text,
        done: (error) => resume(error === undefined ? Effect.succeed(committed) : Effect.fail(error))
      })
      scheduleRound(log)
    })
  )

/** Starts a round on the next turn of the event loop unless one runs or is due. */
const scheduleRound = (log: JsonlLog): void => {
  if (log.syncing || log.roundDue) return
  log.roundDue = true
  setImmediate(() => {
    log.roundDue = false
    if (!log.syncing && log.waiting !== undefined && log.waiting.length > 0) startRound(log)
  })
}

/**
 * One group-commit round: the lines of every waiting append in one write, then one
 * fdatasync, then each append's outcome; then the next round if appends wait. A failed write
 * fails the round's appends and leaves the log as it was (their `seq`s are given again); a
 * failed fdatasync breaks the log (its events were written; their durability is unknown).
 */
const startRound = (log: JsonlLog): void => {
  const round = log.waiting!
  log.waiting = []
  let text = ""
  for (let i = 0; i < round.length; i++) text += round[i]!.text
  const writeFailure = log.broken ?? writeText(log, text)
  if (writeFailure !== undefined) {
    log.nextSeq = log.events.length
    for (let i = 0; i < round.length; i++) round[i]!.done(writeFailure)
    return
  }
  const events = log.events
  for (let i = 0; i < round.length; i++) {
    const committed = round[i]!.committed
    for (let j = 0; j < committed.length; j++) events.push(committed[j]!)
  }
  log.syncing = true
  log.io.datasync(log.file.fd as unknown as number, (error) => {
    log.syncing = false
    let failure: SessionStoreError | undefined = undefined
    if (error !== null) {
      failure = storeError(`cannot fsync session "${log.id}"`, log.id, error)
      if (log.broken === undefined) log.broken = storeError(`session "${log.id}" is broken: an fsync failed`, log.id)
    }
    for (let i = 0; i < round.length; i++) round[i]!.done(failure)
    if (log.waiting!.length > 0) {
      // Appended while this round ran: the next round, unless the log broke or is closing
      // (closing fails them itself).
      if (log.broken === undefined) return scheduleRound(log)
      if (log.onRoundEnd === undefined) {
        const rest = log.waiting!
        log.waiting = []
        log.nextSeq = log.events.length
        for (let i = 0; i < rest.length; i++) rest[i]!.done(log.broken)
      }
    }
    const ended = log.onRoundEnd
    if (ended !== undefined) {
      log.onRoundEnd = undefined
      ended()
    }
  })
}

const makeSessionLog = (log: JsonlLog, header: SessionHeader): SessionLog => {
  const lockedWrite = (drafts: ReadonlyArray<EventDraft>) =>
    Effect.clockWith((clock) => {
      const result = writeDrafts(log, drafts, clock.unsafeCurrentTimeMillis())
      return result instanceof SessionStoreError ? Effect.fail(result) : Effect.succeed(result)
    })
  const batch = log.waiting !== undefined
  const append: SessionLog["append"] = !batch
    ? (drafts) => drafts.length === 0 ? EMPTY : lockedWrite(drafts)
    : (drafts) => drafts.length === 0 ? EMPTY : appendBatched(log, drafts)
  return {
    id: log.id,
    header,
    path: log.path,
    append,
    ...(!batch ? { appendSync: (drafts, time) => writeDrafts(log, drafts, time) } : {}),
    events: () => log.events
  } satisfies SessionLog
}

/**
 * The writer of a session, as recorded in its lock (JSONL: `<id>.jsonl.lock`; SQL: a row of
 * `agent_loop_writers`): the process id and host name.
 */
interface Writer {
  readonly pid: number
  readonly host: string
}

const thisWriter = (): Writer => ({ pid: process.pid, host: Os.hostname() })

/**
 * Whether the recorded writer may still write: this process (another store of it), a process
 * of this host that still runs, or a process of another host (which cannot be checked). A
 * writer that died (SIGKILL, a crash) leaves a stale lock, which the next writer takes over.
 */
const isLiveWriter = (writer: Writer): boolean => {
  if (writer.host !== Os.hostname() || writer.pid === process.pid) return true
  try {
    process.kill(writer.pid, 0)
    return true
  } catch (error) {
    return (error as { code?: string }).code === "EPERM"
  }
}

const readWriter = (text: string): Writer | undefined => {
  try {
    const value = JSON.parse(text) as Writer
    return typeof value?.pid === "number" && typeof value.host === "string" ? value : undefined
  } catch {
    return undefined
  }
}

const inUseError = (id: string, writer: Writer): SessionStoreError =>
  storeError(
    `session "${id}" is open for writing by process ${writer.pid}${writer.host === Os.hostname() ? "" : ` on ${writer.host}`}` +
      " (one writer per session; if that process is gone, remove its lock)",
    id
  )

/**
 * Takes the JSONL writer lock file at `lockPath` (created exclusively; a stale one, whose
 * writer is gone or unreadable, is replaced). Returns its release. Fails with
 * `SessionStoreError` when a live writer holds it.
 */
const acquireWriterLock = (lockPath: string, id: string): Effect.Effect<Effect.Effect<void>, SessionStoreError> =>
  Effect.suspend(() => {
    const me = JSON.stringify(thisWriter())
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        NodeFs.writeFileSync(lockPath, me, { flag: "wx" })
        return Effect.succeed(Effect.sync(() => {
          try {
            if (NodeFs.readFileSync(lockPath, "utf8") === me) NodeFs.unlinkSync(lockPath)
          } catch {
            // already gone
          }
        }))
      } catch (error) {
        if ((error as { code?: string }).code !== "EEXIST") {
          return Effect.fail(storeError(`cannot lock session "${id}" (${lockPath})`, id, error))
        }
      }
      let holder: Writer | undefined
      try {
        holder = readWriter(NodeFs.readFileSync(lockPath, "utf8"))
      } catch {
        continue // released meanwhile
      }
      if (holder !== undefined && isLiveWriter(holder)) return Effect.fail(inUseError(id, holder))
      try {
        NodeFs.unlinkSync(lockPath) // stale
      } catch {
        // taken or released meanwhile: try again
      }
    }
    return Effect.fail(storeError(`cannot lock session "${id}" (${lockPath}): contended`, id))
  })

/**
 * A store reads session `id` from `<id>.jsonl`: a file whose header names another session (a
 * copied or renamed file) is refused, as the log it would open could not be found again by its
 * id (`readFile` reads such a file at its path).
 */
const ownHeader = (id: string, path: string, contents: LogContents): Effect.Effect<LogContents, SessionLogError> =>
  contents.header.id === id
    ? Effect.succeed(contents)
    : Effect.fail(logError(path, { line: 1, message: `the header names session ${JSON.stringify(contents.header.id)}, not ${JSON.stringify(id)}` }))

/**
 * Builds a JSONL store in `options.directory` (DESIGN.md §3). Open logs keep their file
 * handle (opened with flag `"a"`) until the scope closes; with `fsync: "batch"` appends are
 * group-committed: one `fdatasync` per round for every append whose write returned before the
 * round began (no fiber: rounds chain from the fdatasync callbacks).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeJsonl = (
  options: JsonlOptions
): Effect.Effect<SessionStoreService, never, FileSystem.FileSystem | Scope.Scope> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const storeScope = yield* Effect.scope
    const batch = options.fsync === "batch"
    const io = options.io ?? nodeIo
    const directory = options.directory.length > 1 ? options.directory.replace(/\/+$/, "") : options.directory
    const pathOf = (id: string) => `${directory}/${id}.jsonl`
    const openLogs = new Map<string, SessionLog>()
    const storeLock = yield* Effect.makeSemaphore(1)

    /** Sets up an open log on a file handle in its own scope (child of the store's). */
    const attach = Effect.fnUntraced(function*(
      scope: Scope.Scope,
      file: FileSystem.File,
      header: SessionHeader,
      path: string,
      events: Array<SessionEvent>,
      size: number,
      pendingNewline: boolean
    ) {
      const log: JsonlLog = {
        id: header.id,
        path,
        file,
        io,
        events,
        size,
        pendingNewline,
        broken: undefined,
        waiting: batch ? [] : undefined,
        nextSeq: events.length,
        syncing: false,
        roundDue: false,
        onRoundEnd: undefined
      }
      // Runs before the file closes: the log is closed to appends; a running fdatasync round
      // ends first (its appends get its outcome); appends still waiting (not written) fail.
      yield* Scope.addFinalizer(
        scope,
        Effect.async<void>((resume) => {
          log.broken = storeError(`session "${log.id}" is closed`, log.id)
          const finish = () => {
            const rest = log.waiting ?? []
            log.waiting = batch ? [] : undefined
            const closed = storeError(`session "${log.id}" was closed before its fsync`, log.id)
            for (const waiting of rest) waiting.done(closed)
            resume(Effect.void)
          }
          if (log.syncing) log.onRoundEnd = finish
          else finish()
        })
      )
      const sessionLog = makeSessionLog(log, header)
      openLogs.set(header.id, sessionLog)
      return sessionLog
    })

    const openFile = (id: string, path: string, flag: "a" | "ax") =>
      Effect.flatMap(Scope.fork(storeScope, ExecutionStrategy.sequential), (scope) =>
        // One writer per session: `<id>.jsonl.lock` is held while the log is open (released
        // when its scope closes, after the file).
        Effect.zipRight(
          Effect.flatMap(acquireWriterLock(`${path}.lock`, id), (release) => Scope.addFinalizer(scope, release)),
          fs.open(path, { flag }).pipe(
            Scope.extend(scope),
            Effect.mapError((error) =>
              flag === "ax" && error._tag === "SystemError" && error.reason === "AlreadyExists"
                ? storeError(`session "${id}" already exists`, id)
                : storeError(`cannot open ${path}`, id, error)
            )
          )
        ).pipe(
          Effect.map((file) => [scope, file] as const),
          Effect.onError(() => Scope.close(scope, Exit.void))
        ))

    const create = Effect.fnUntraced(function*(createOptions: CreateOptions) {
      const header = yield* resolveCreate(createOptions)
      const id = header.id
      if (!VALID_ID.test(id)) return yield* Effect.fail(storeError(`invalid session id ${JSON.stringify(id)}`, id))
      if (openLogs.has(id)) return yield* Effect.fail(storeError(`session "${id}" already exists`, id))
      yield* Effect.mapError(
        fs.makeDirectory(directory, { recursive: true }),
        (error) => storeError(`cannot create ${directory}`, id, error)
      )
      const path = pathOf(id)
      const [scope, file] = yield* openFile(id, path, "ax")
      const writeHeader = Effect.try({ try: () => writeAllSync(io, file, encodeHeader(header)), catch: (error) => error })
      const size = yield* (batch ? Effect.zipLeft(writeHeader, datasync(io, file)) : writeHeader).pipe(
        Effect.mapError((error) => storeError(`cannot write the header of ${path}`, id, error)),
        Effect.onError(() => Effect.zipRight(Scope.close(scope, Exit.void), Effect.ignore(fs.remove(path))))
      )
      return yield* attach(scope, file, header, path, [], size, false)
    })

    const readBytes = (id: SessionId, path: string) =>
      Effect.mapError(
        fs.readFile(path),
        (error) => isNotFound(error) ? notFound(id) : storeError(`cannot read ${path}`, id, error)
      )

    const open = Effect.fnUntraced(function*(id: SessionId) {
      const already = openLogs.get(id)
      if (already !== undefined) return already
      if (!VALID_ID.test(id)) return yield* Effect.fail(notFound(id))
      const path = pathOf(id)
      const bytes = yield* readBytes(id, path)
      const contents = yield* Effect.flatMap(decodeBytes(bytes, path), (c) => ownHeader(id, path, c))
      const size = contents.validBytes ?? bytes.length
      const [scope, file] = yield* openFile(id, path, "a")
      if (contents.tornTail === true) {
        // DESIGN.md §3.1: cut the torn tail before anything can be appended.
        yield* (batch ? Effect.zipRight(file.truncate(size), datasync(io, file)) : file.truncate(size)).pipe(
          Effect.mapError((error) => storeError(`cannot cut the torn tail of ${path}`, id, error)),
          Effect.onError(() => Scope.close(scope, Exit.void))
        )
      }
      const pendingNewline = size > 0 && bytes[size - 1] !== 10
      return yield* attach(
        scope,
        file,
        contents.header,
        path,
        contents.events as Array<SessionEvent>,
        size,
        pendingNewline
      )
    })

    const read = Effect.fnUntraced(function*(id: SessionId) {
      const already = openLogs.get(id)
      if (already !== undefined) {
        return { header: already.header, events: already.events().slice(), warnings: [] } satisfies LogContents
      }
      if (!VALID_ID.test(id)) return yield* Effect.fail(notFound(id))
      const path = pathOf(id)
      return yield* Effect.flatMap(decodeBytes(yield* readBytes(id, path), path), (c) => ownHeader(id, path, c))
    })

    const list: Effect.Effect<ReadonlyArray<SessionId>, SessionStoreError> = fs.readDirectory(directory).pipe(
      Effect.map((names) => {
        const ids: Array<string> = []
        for (const name of names) {
          if (name.endsWith(".jsonl") && name.length > 6) ids.push(name.slice(0, -6))
        }
        return ids.sort()
      }),
      Effect.catchAll((error) =>
        isNotFound(error) ? Effect.succeed([]) : Effect.fail(storeError(`cannot list ${directory}`, undefined, error))
      ),
      Effect.withSpan("SessionStore.list")
    )

    return SessionStore.of({
      create: (createOptions) => Effect.withSpan(storeLock.withPermits(1)(create(createOptions)), "SessionStore.create"),
      open: (id) => Effect.withSpan(storeLock.withPermits(1)(open(id)), "SessionStore.open"),
      read: (id) => Effect.withSpan(read(id), "SessionStore.read"),
      list
    })
  })

/**
 * The JSONL store (DESIGN.md §3.1, §3.3): one `<id>.jsonl` per session in `options.directory`.
 * Requires the platform's `FileSystem` (e.g. `NodeFileSystem.layer`). Scoped: open file
 * handles and fsync flushers close with the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerJsonl = (options: JsonlOptions): Layer.Layer<SessionStore, never, FileSystem.FileSystem> =>
  Layer.scoped(SessionStore, makeJsonl(options))

// ---------------------------------------------------------------------------------------------
// SQL store
// ---------------------------------------------------------------------------------------------

/** The longest string V8 makes (characters): a log's text must fit in one. */
const MAX_TEXT = 0x1fffffe8

/** Rows per INSERT statement (3 parameters each; SQLite allows 32,766 parameters). */
const ROWS_PER_STATEMENT = 5000

/**
 * Builds the SQL store (DESIGN.md §3.3: an append is durable when committed) on the
 * `@effect/sql` `SqlClient` in context; `layerSqlite` runs it on SQLite. Creates its tables when
 * missing:
 * - `agent_loop_sessions (id TEXT PRIMARY KEY, header TEXT)`: the header line's JSON;
 * - `agent_loop_events (session_id TEXT, seq INTEGER, event TEXT, PRIMARY KEY (session_id, seq))`:
 *   one row per event, `event` being exactly the line the JSONL store would write (without its
 *   newline): a session exports to a JSONL log by concatenation, and reads back through the same
 *   decoder with the same checks.
 *
 * Rules:
 * - An append is one INSERT (a transaction when it holds more than 5,000 events): all of its
 *   events or none, committed when it returns. Appends to one log are serialized by the log.
 * - One writer per session: a second process appending to the same session fails on the
 *   `(session_id, seq)` key with a `SessionStoreError` (nothing changes in memory), never
 *   interleaves.
 * - Reading orders rows by `seq`. A row that is not one line of JSON, a missing or repeated seq,
 *   or invalid event data is a `SessionLogError` naming the session and the seq; its `line` is
 *   the line the event would have in a JSONL file (seq + 2). There is no torn tail: a commit is
 *   atomic.
 * - Session ids follow the JSONL store's rule (`[A-Za-z0-9_-][A-Za-z0-9._-]*`), so every session
 *   can be exported to a file. Logs opened through the store refuse appends once its scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSql: Effect.Effect<SessionStoreService, SessionStoreError, SqlClient.SqlClient | Scope.Scope> = Effect
  .gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const failed = (what: string, id: string | undefined) => (error: SqlError) => storeError(what, id, error)
    yield* Effect.mapError(
      Effect.zipRight(
        sql`CREATE TABLE IF NOT EXISTS agent_loop_sessions (id TEXT PRIMARY KEY NOT NULL, header TEXT NOT NULL)`,
        Effect.zipRight(
          sql`CREATE TABLE IF NOT EXISTS agent_loop_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, PRIMARY KEY (session_id, seq))`,
          sql`CREATE TABLE IF NOT EXISTS agent_loop_writers (session_id TEXT PRIMARY KEY NOT NULL, writer TEXT NOT NULL)`
        )
      ),
      failed("cannot create the session tables", undefined)
    )
    // Tables of these names made by something else: refused now, not at the first append.
    for (const [table, columns] of [
      ["agent_loop_sessions", "id, header"],
      ["agent_loop_events", "session_id, seq, event"],
      ["agent_loop_writers", "session_id, writer"]
    ] as const) {
      yield* Effect.mapError(
        sql.unsafe(`SELECT ${columns} FROM ${table} WHERE 1 = 0`),
        failed(`the table ${table} exists without the columns (${columns}) this store needs`, undefined)
      )
    }
    const openLogs = new Map<string, SessionLog>()
    let closed = false
    const me = JSON.stringify(thisWriter())
    // One writer per session: a row of `agent_loop_writers` is held while the log is open here.
    const lockWriter = (id: string): Effect.Effect<void, SessionStoreError> =>
      sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<{ writer: string }>`SELECT writer FROM agent_loop_writers WHERE session_id = ${id}`
        const holder = rows.length > 0 ? readWriter(rows[0]!.writer) : undefined
        if (holder !== undefined && isLiveWriter(holder)) return holder
        yield* sql`DELETE FROM agent_loop_writers WHERE session_id = ${id}`
        yield* sql`INSERT INTO agent_loop_writers ${sql.insert({ session_id: id, writer: me })}`
        return undefined
      })).pipe(
        Effect.mapError(failed(`cannot lock session "${id}"`, id)),
        Effect.flatMap((holder) => holder === undefined ? Effect.void : Effect.fail(inUseError(id, holder)))
      )
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closed = true
        const ids = [...openLogs.keys()]
        return ids.length === 0
          ? Effect.void
          : Effect.ignore(sql`DELETE FROM agent_loop_writers WHERE writer = ${me} AND ${sql.in("session_id", ids)}`)
      })
    )
    const storeLock = yield* Effect.makeSemaphore(1)

    type Row = { readonly session_id: string; readonly seq: number; readonly event: string }
    const insert = (rows: ReadonlyArray<Row>): Effect.Effect<unknown, SqlError> => {
      if (rows.length <= ROWS_PER_STATEMENT) return sql`INSERT INTO agent_loop_events ${sql.insert(rows)}`
      const statements: Array<Effect.Effect<unknown, SqlError>> = []
      for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
        statements.push(sql`INSERT INTO agent_loop_events ${sql.insert(rows.slice(i, i + ROWS_PER_STATEMENT))}`)
      }
      return sql.withTransaction(Effect.all(statements, { discard: true }))
    }

    const attach = (header: SessionHeader, events: Array<SessionEvent>): Effect.Effect<SessionLog> =>
      Effect.map(Effect.makeSemaphore(1), (lock) => {
        const id = header.id
        const commit = (time: number, drafts: ReadonlyArray<EventDraft>) => {
          if (closed) return Effect.fail(storeError(`session "${id}" is closed`, id))
          let committed: ReadonlyArray<SessionEvent>
          let rows: ReadonlyArray<Row>
          try {
            committed = commitDrafts(drafts, events.length, time)
            // Encoding failures (a cycle, a BigInt) are typed errors and change nothing.
            rows = committed.map((event) => ({ session_id: id, seq: event.seq, event: JSON.stringify(event) }))
          } catch (error) {
            return Effect.fail(invalidEvents(id, error))
          }
          return insert(rows).pipe(
            Effect.mapError(failed(`cannot append to session "${id}"`, id)),
            Effect.map(() => {
              for (const event of committed) events.push(event)
              return committed
            })
          )
        }
        const log: SessionLog = {
          id,
          header,
          append: (drafts) =>
            drafts.length === 0
              ? EMPTY
              : lock.withPermits(1)(
                // Uninterruptible: an insert the database committed is always recorded in memory
                // too (an interrupted wait on an asynchronous client would lose it, and every later
                // append would then fail on the seq key).
                Effect.uninterruptible(
                  Effect.clockWith((clock) => Effect.suspend(() => commit(clock.unsafeCurrentTimeMillis(), drafts)))
                )
              ),
          events: () => events
        }
        openLogs.set(id, log)
        return log
      })

    const readRows = Effect.fnUntraced(function*(id: SessionId) {
      const readFailed = failed(`cannot read session "${id}"`, id)
      const headers = yield* Effect.mapError(
        sql<{ header: string }>`SELECT header FROM agent_loop_sessions WHERE id = ${id}`,
        readFailed
      )
      if (headers.length === 0) return yield* Effect.fail(notFound(id))
      const rows = yield* Effect.mapError(
        sql<{ seq: number; event: string }>`SELECT seq, event FROM agent_loop_events WHERE session_id = ${id} ORDER BY seq`,
        readFailed
      )
      const where = `session "${id}"`
      const rowError = (line: number, message: string) => {
        const seq = line >= 2 ? rows[line - 2]?.seq : undefined
        return new SessionLogError({
          message: `${where}${seq === undefined ? "" : `, seq ${seq}`}: ${message}`,
          path: undefined,
          line
        })
      }
      const header = headers[0]!.header
      if (typeof header !== "string" || header.includes("\n")) return yield* Effect.fail(rowError(1, "header is not one line"))
      let text = header + "\n"
      for (let i = 0; i < rows.length; i++) {
        const event = rows[i]!.event
        if (typeof event !== "string" || event.includes("\n")) {
          return yield* Effect.fail(rowError(i + 2, "event row is not one line of JSON"))
        }
        if (text.length + event.length + 1 > MAX_TEXT) {
          return yield* Effect.fail(rowError(i + 2, "the log is too large to read (the reader's limit is about 512 MiB of text)"))
        }
        text += event + "\n"
      }
      const decoded = decodeLog(text)
      if (Either.isLeft(decoded)) return yield* Effect.fail(rowError(decoded.left.line, decoded.left.message))
      const contents = decoded.right
      if (contents.header.version !== 1) return yield* Effect.fail(rowError(1, "only logs of our format (version 1) are stored in SQL"))
      if (contents.header.id !== id) {
        return yield* Effect.fail(rowError(1, `the header names session ${JSON.stringify(contents.header.id)}`))
      }
      return { header: contents.header, events: contents.events, warnings: contents.warnings } satisfies LogContents
    })

    const create = Effect.fnUntraced(function*(options: CreateOptions) {
      const header = yield* resolveCreate(options)
      const id = header.id
      if (!VALID_ID.test(id)) return yield* Effect.fail(storeError(`invalid session id ${JSON.stringify(id)}`, id))
      if (closed) return yield* Effect.fail(storeError("the store is closed", id))
      const createFailed = failed(`cannot create session "${id}"`, id)
      const existing = yield* Effect.mapError(sql<{ id: string }>`SELECT id FROM agent_loop_sessions WHERE id = ${id}`, createFailed)
      if (existing.length > 0 || openLogs.has(id)) return yield* Effect.fail(storeError(`session "${id}" already exists`, id))
      yield* lockWriter(id)
      yield* Effect.mapError(
        sql`INSERT INTO agent_loop_sessions ${sql.insert({ id, header: encodeHeader(header).slice(0, -1) })}`,
        createFailed
      )
      return yield* attach(header, [])
    })

    const open = Effect.fnUntraced(function*(id: SessionId) {
      const already = openLogs.get(id)
      if (already !== undefined) return already
      if (!VALID_ID.test(id)) return yield* Effect.fail(notFound(id))
      if (closed) return yield* Effect.fail(storeError("the store is closed", id))
      yield* lockWriter(id)
      const contents = yield* Effect.tapError(
        readRows(id),
        () => Effect.ignore(sql`DELETE FROM agent_loop_writers WHERE session_id = ${id} AND writer = ${me}`)
      )
      return yield* attach(contents.header, contents.events as Array<SessionEvent>)
    })

    const read = (id: SessionId): Effect.Effect<LogContents, SessionStoreError | SessionLogError | SessionNotFound> =>
      Effect.suspend(() => {
        const already = openLogs.get(id)
        if (already !== undefined) {
          return Effect.succeed({ header: already.header, events: already.events().slice(), warnings: [] })
        }
        return VALID_ID.test(id) ? readRows(id) : Effect.fail(notFound(id))
      })

    const list = Effect.mapError(
      Effect.map(sql<{ id: string }>`SELECT id FROM agent_loop_sessions ORDER BY id`, (rows) => rows.map((r) => r.id)),
      failed("cannot list the sessions", undefined)
    )

    return SessionStore.of({
      create: (options) => Effect.withSpan(storeLock.withPermits(1)(create(options)), "SessionStore.create"),
      open: (id) => Effect.withSpan(storeLock.withPermits(1)(open(id)), "SessionStore.open"),
      read: (id) => Effect.withSpan(read(id), "SessionStore.read"),
      list: Effect.withSpan(list, "SessionStore.list")
    })
  })

/**
 * Options of `layerSqlite`. `filename`: the database file (created when missing; `":memory:"`
 * for a private in-memory database). `synchronous`: SQLite's `PRAGMA synchronous` in WAL mode:
 * `"full"` (default) syncs the WAL at every commit, so an append that returned survives power
 * loss; `"normal"` syncs at checkpoints only, so it survives a crash of the process (SIGKILL) but
 * not of the machine.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteOptions {
  readonly filename: string
  readonly synchronous?: "full" | "normal" | undefined
}

/**
 * The SQLite store (`makeSql` on `@effect/sql-sqlite-node`, i.e. better-sqlite3, in WAL mode):
 * every session in one database file (DESIGN.md §3.3). Fails with `SessionStoreError` when the
 * native module cannot be loaded or the file is not a usable database. Scoped: the database
 * closes with the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlite = (options: SqliteOptions): Layer.Layer<SessionStore, SessionStoreError> =>
  Layer.scoped(
    SessionStore,
    Effect.gen(function*() {
      const cannotOpen = (cause: unknown) => storeError(`cannot open the SQLite database ${options.filename}`, undefined, cause)
      // Loaded on first use, so that the other stores never load the native module.
      const { SqliteClient } = yield* Effect.tryPromise({
        try: () => import("@effect/sql-sqlite-node"),
        catch: cannotOpen
      })
      const { Reactivity } = yield* Effect.tryPromise({ try: () => import("@effect/experimental"), catch: cannotOpen })
      const client = yield* SqliteClient.make({ filename: options.filename }).pipe(
        Effect.provide(Reactivity.layer),
        Effect.catchAllDefect((defect) => Effect.fail(cannotOpen(defect)))
      )
      const synchronous = options.synchronous === "normal" ? "NORMAL" : "FULL"
      const modes = yield* client<{ journal_mode: string }>`PRAGMA journal_mode`.pipe(
        Effect.zipLeft(client.unsafe(`PRAGMA synchronous = ${synchronous}`)),
        Effect.mapError(cannotOpen)
      )
      if (options.filename !== ":memory:" && modes[0]?.journal_mode !== "wal") {
        return yield* Effect.fail(cannotOpen(`journal_mode is ${modes[0]?.journal_mode}, not wal`))
      }
      return yield* Effect.provideService(makeSql, SqlClient.SqlClient, client)
    })
  )
