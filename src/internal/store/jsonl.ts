/**
 * The JSONL store's internals (§3.1, §3.3): one `<id>.jsonl` per session, written
 * through the open file's Node descriptor. With `fsync: "none"` an append is one synchronous
 * `write(2)` (durable once it returns; nothing can interleave with it, so the log needs no
 * lock); with `fsync: "batch"` appends are group-committed (one `write(2)` and one
 * `fdatasync(2)` per round, rounds started on the event loop's next turn, never by a timer).
 * Everything goes through `node:fs` (opening, reading, cutting a torn tail, the writer lock), so
 * the store requires no `FileSystem` service: a `FileSystem` could not give the synchronous
 * descriptor writes the appends are made of. A log is opened without blocking and checked to be
 * a regular file on its descriptor: a fifo at its path would otherwise hold a thread of the
 * pool for ever (its open, or its read), which not even `process.exit` gets past.
 */
import { Effect, ExecutionStrategy, Exit, Scope } from "effect"
import * as NodeFs from "node:fs"
import type { EventDraft, SessionEvent, SessionHeader, SessionId } from "../../SessionEvent.js"
import type { CreateOptions, LogContents, SessionLog, SessionLogError, SessionNotFound } from "../../SessionLog.js"
import { SessionStoreError } from "../../SessionLog.js"
import { commitDrafts, encodeCommitted, encodeHeader } from "../logCodec.js"
import * as Store from "./common.js"
import { makeDirectorySync, statsKind } from "./directory.js"
import { acquireWriterLock } from "./writer.js"

/** Options of the JSONL store (see `SessionStore.JsonlOptions`). */
export interface JsonlStoreOptions {
  readonly directory: string
  readonly fsync?: "none" | "batch" | undefined
}

/**
 * How the JSONL store writes appended lines: a synchronous `write(2)` on the open file's
 * descriptor (durable as §3.3 defines it once it returns; one system call, no thread
 * pool round trip), a synchronous truncate that undoes a failed write, and `fdatasync(2)` for
 * `fsync: "batch"` (in the thread pool; one per group-commit round). The seam through which
 * tests inject faults (`makeJsonlWith`).
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
  /**
   * Reads the whole file from the start (`open` reads a log through the descriptor it holds,
   * under its writer lock); calls `done` with the error, or null and the bytes. Optional:
   * `fs.readFile(fd)` without it.
   */
  readonly readAll?: ((fd: number, done: (error: Error | null, bytes: Uint8Array) => void) => void) | undefined
  /**
   * Milliseconds of a monotonic clock, for the cadence of the file check (`FILE_CHECK_MS`).
   * Optional: `performance.now()` without it (not the `Clock` service: the check's cadence is
   * real time, whatever clock the events' `time` comes from).
   */
  readonly now?: (() => number) | undefined
}

export const nodeIo: JsonlIo = {
  writeText: (fd, text) => NodeFs.writeSync(fd, text),
  write: (fd, bytes, offset, length) => NodeFs.writeSync(fd, bytes, offset, length),
  truncate: (fd, size) => NodeFs.ftruncateSync(fd, size),
  datasync: (fd, done) => NodeFs.fdatasync(fd, done),
  readAll: (fd, done) => NodeFs.readFile(fd, done)
}

/** `fdatasync` through the `io` seam as an effect. */
const datasync = (io: JsonlIo, fd: number): Effect.Effect<void, Error> =>
  Effect.async<void, Error>((resume) => {
    io.datasync(fd, (error) => resume(error === null ? Effect.void : Effect.fail(error)))
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
  /** The open file's descriptor (flag `"a"`), closed with the log's scope. */
  readonly fd: number
  readonly io: JsonlIo
  readonly events: Array<SessionEvent>
  /** Bytes of the file that hold committed lines. */
  size: number
  /** `io.now` or `performance.now`. */
  readonly now: () => number
  /** When (`now()`) the file was last found unchanged (`fileChanged`); `-Infinity` before the first check. */
  checkedAt: number
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
const writeAllSync = (io: JsonlIo, fd: number, text: string): number => {
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
  const failed = writeText(log, encoded.text, false)
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
    return { committed, text: encodeCommitted(committed) }
  } catch (cause) {
    return Store.invalidEvents(log.id, cause)
  }
}

/**
 * How long (ms of `JsonlLog.now`: 100 µs) a check of the file (`fileChanged`) stands for the
 * appends after it with `fsync: "none"`: a write whose log was checked less than this ago is
 * not checked again. An agent's appends are further apart than that (each is checked); a burst
 * of appends (a tool batch's results, a replay into a new log, 64 sessions under the
 * `sessions-append` bench) shares one `fstat` per 100 µs (one per ~40 appends there) instead of
 * one per append, which cost about as much as the write itself (see `fileChanged`). With
 * `fsync: "batch"` every round checks (one `fstat` beside an `fdatasync`).
 */
export const FILE_CHECK_MS = 0.1

/**
 * Whether the open file stopped being the session's log as this store wrote it (one
 * `fstat(2)`): its last link is gone (deleted, or replaced by a rename over its path), or its
 * size is not the bytes written (cut by a truncation, or written by someone else). Appending on
 * would acknowledge events into a file nobody reads (unlinked) or that no longer reads (a cut
 * mid-line, a log without its header), so the error breaks the log. Not noticed: a rename of
 * the file itself to another path (its events stay readable there).
 *
 * When it runs: before a write whose log was last checked `FILE_CHECK_MS` (100 µs) or more ago
 * (`fsync: "none"`), before every round's write (`"batch"`), and after a failed write (before
 * the cut back, which must not extend a file cut meanwhile). So a change is noticed by the
 * first append that starts 100 µs or more after the previous check; the appends in between
 * (a burst's) may be acknowledged into the changed file. The check never excluded that: it is
 * not atomic with the write (a change between the `fstat` and the `write(2)` goes unnoticed),
 * so what it gives is "noticed at the next append", not "never written into"; the window grows
 * from the µs between the two system calls to 100 µs. An event acknowledged in it into a
 * deleted file is lost as one appended just before the delete would be, which no check can
 * save; a size change is still noticed (the sizes differ by what the other party cut or
 * wrote), one burst later. Measured on Node 20, 2 vCPU shared with other work, 64 open logs:
 * `fstatSync` 0.6 µs of CPU beside 0.64 µs for the `write(2)` of a 230-byte line (1.5 µs for
 * the pair: an `fstat` right after a write costs more); the cadence took 1.1–1.5 µs off the
 * 4.4–5.1 µs of CPU per append of `sessions-append` (`fsync: "none"`, bench/README.md).
 */
const fileChanged = (log: JsonlLog): SessionStoreError | undefined => {
  let stats: NodeFs.Stats
  try {
    stats = NodeFs.fstatSync(log.fd)
  } catch (error) {
    return Store.brokenError(`session "${log.id}" is broken: cannot check its file ${log.path}`, log.id, error)
  }
  return changeOf(log, stats)
}

/** What `stats` (of the log's open file) says changed (`fileChanged`), or undefined. */
const changeOf = (log: JsonlLog, stats: NodeFs.Stats): SessionStoreError | undefined => {
  if (stats.nlink === 0) {
    return Store.storeError(
      `session "${log.id}" is broken: its file ${log.path} was deleted or replaced while the session was open; nothing more is appended to it`,
      log.id
    )
  }
  if (stats.size !== log.size) {
    return Store.storeError(
      `session "${log.id}" is broken: its file ${log.path} ${
        stats.size < log.size ? "was cut" : "grew"
      } to ${stats.size} bytes while the session was open (this store wrote ${log.size}); nothing more is appended to it`,
      log.id
    )
  }
  return undefined
}

/**
 * Writes lines at the end of the file (one `write(2)` in the normal case), after the file
 * check when it is due (`always`: every round of `fsync: "batch"`; else `FILE_CHECK_MS`). On
 * failure the part that reached the file is cut off (if that fails too, the log is broken) and
 * the error is returned; on success the file size is updated.
 */
const writeText = (log: JsonlLog, text: string, always: boolean): SessionStoreError | undefined => {
  const now = log.now()
  if (always || now - log.checkedAt >= FILE_CHECK_MS) {
    const changed = fileChanged(log)
    if (changed !== undefined) {
      log.broken = changed
      return changed
    }
    log.checkedAt = now
  }
  let written: number
  try {
    written = writeAllSync(log.io, log.fd, log.pendingNewline ? "\n" + text : text)
  } catch (error) {
    cutBack(log)
    return Store.storeError(`cannot append to session "${log.id}"`, log.id, error)
  }
  log.size += written
  log.pendingNewline = false
  return undefined
}

/**
 * After a failed write: cuts off what reached the file, unless the file changed under the log
 * since its last check (a cut to fewer bytes than the log's would extend the file with zeros);
 * a changed file, or a failed cut, breaks the log. The check counts a partial write (bytes past
 * `log.size`) as the log's own: only a smaller size or a lost link mean a change.
 */
const cutBack = (log: JsonlLog): void => {
  let stats: NodeFs.Stats | undefined
  try {
    stats = NodeFs.fstatSync(log.fd)
  } catch {
    stats = undefined // the cut below decides
  }
  if (stats !== undefined && (stats.nlink === 0 || stats.size < log.size)) {
    log.broken = changeOf(log, stats)
    return
  }
  try {
    log.io.truncate(log.fd, log.size)
  } catch (truncateError) {
    log.broken = Store.brokenError(`session "${log.id}" is broken: a failed write could not be cut back`, log.id, truncateError)
  }
}

/**
 * `fsync: "batch"` (group commit, §3.3): the append's events get their `seq` now and
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
  const writeFailure = log.broken ?? writeText(log, text, true)
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
  log.io.datasync(log.fd, (error) => {
    log.syncing = false
    let failure: SessionStoreError | undefined = undefined
    if (error !== null) {
      failure = Store.storeError(`cannot fsync session "${log.id}"`, log.id, error)
      if (log.broken === undefined) log.broken = Store.brokenError(`session "${log.id}" is broken: an fsync failed`, log.id)
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
  // One synchronous `write(2)`: nothing can interleave with it, so it needs no lock.
  const writeNow = (drafts: ReadonlyArray<EventDraft>) => Store.appendAt((time) => writeDrafts(log, drafts, time))
  const batch = log.waiting !== undefined
  const append: SessionLog["append"] = !batch
    ? (drafts) => drafts.length === 0 ? Store.EMPTY : writeNow(drafts)
    : (drafts) => drafts.length === 0 ? Store.EMPTY : appendBatched(log, drafts)
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
 * Flags of `open` on an existing log: read (to load it) and append, never create; and never
 * block: a fifo at the log's path (opened for reading, it waits for a writer) is opened at once
 * and refused from its `fstat` (`notRegular`). On a regular file `O_NONBLOCK` changes nothing.
 */
const OPEN_EXISTING = NodeFs.constants.O_RDWR | NodeFs.constants.O_APPEND | NodeFs.constants.O_NONBLOCK

/** Flags of `read`'s open: read only, never blocking (as `OPEN_EXISTING`). */
const OPEN_READ = NodeFs.constants.O_RDONLY | NodeFs.constants.O_NONBLOCK

/**
 * The error of a log path that is not a regular file (a fifo, a device: reading it could block
 * for ever or never end), or undefined for a regular file.
 */
const notRegular = (id: string, path: string, verb: string, stats: NodeFs.Stats): SessionStoreError | undefined =>
  stats.isFile() ? undefined : Store.storeError(`cannot ${verb} ${path}: not a regular file (${statsKind(stats)})`, id)

/** Whether something is at `path` (a failure other than "no entry" counts as there: opening it reports it). */
const exists = (path: string): boolean => {
  try {
    return NodeFs.statSync(path, { throwIfNoEntry: false }) !== undefined
  } catch {
    return true
  }
}

/** The `code` of a Node system error (`ENOENT`, `EEXIST`, …), if it has one. */
const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? (error as { code: string }).code
    : undefined

/**
 * Builds a JSONL store in `options.directory` that writes through `io` (§3). Open logs
 * keep their descriptor (opened with flag `"a"`) until the store's scope closes; with
 * `fsync: "batch"` appends are group-committed: one `fdatasync` per round for every append
 * whose write returned before the round began (no fiber: rounds chain from the fdatasync
 * callbacks).
 */
export const makeJsonlWith = (options: JsonlStoreOptions, io: JsonlIo) =>
  Effect.gen(function*() {
    const readAll = io.readAll ?? nodeIo.readAll!
    const now = io.now ?? (() => performance.now())
    const storeScope = yield* Effect.scope
    const batch = options.fsync === "batch"
    const directory = options.directory.length > 1 ? options.directory.replace(/\/+$/, "") : options.directory
    const pathOf = (id: string) => `${directory}/${id}.jsonl`
    const openLogs = new Map<string, SessionLog>()
    const storeLock = yield* Effect.makeSemaphore(1)

    /** Sets up an open log on a descriptor in its own scope (child of the store's). */
    const attach = (
      scope: Scope.CloseableScope,
      fd: number,
      header: SessionHeader,
      path: string,
      events: Array<SessionEvent>,
      size: number,
      pendingNewline: boolean
    ): Effect.Effect<SessionLog> => {
      const log: JsonlLog = {
        id: header.id,
        path,
        fd,
        io,
        now,
        checkedAt: -Infinity,
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
      const closing = Effect.async<void>((resume) => {
        log.broken = Store.storeError(`session "${log.id}" is closed`, log.id)
        const finish = () => {
          const rest = log.waiting ?? []
          log.waiting = batch ? [] : undefined
          const closed = Store.storeError(`session "${log.id}" was closed before its fsync`, log.id)
          for (const waiting of rest) waiting.done(closed)
          resume(Effect.void)
        }
        if (log.syncing) log.onRoundEnd = finish
        else finish()
      })
      return Effect.map(Scope.addFinalizer(scope, closing), () => {
        const sessionLog: SessionLog = {
          ...makeSessionLog(log, header),
          // The log's own scope: appends refused, the file closed, the lock file removed.
          close: Effect.suspend(() => {
            if (openLogs.get(header.id) === sessionLog) openLogs.delete(header.id)
            return Scope.close(scope, Exit.void)
          })
        }
        openLogs.set(header.id, sessionLog)
        return sessionLog
      })
    }

    /**
     * Opens a log in a new scope (a child of the store's): one writer per session, so
     * `<id>.jsonl.lock` is taken first and released when the scope closes, after the file;
     * `openFd` opens the file under the lock.
     */
    const openFile = <E>(id: string, path: string, openFd: Effect.Effect<number, E>) =>
      Effect.flatMap(Scope.fork(storeScope, ExecutionStrategy.sequential), (scope) =>
        Effect.flatMap(acquireWriterLock(`${path}.lock`, id), (release) =>
          Scope.addFinalizer(scope, release)).pipe(
            Effect.zipRight(openFd),
            Effect.tap((fd) => Scope.addFinalizer(scope, Effect.sync(() => NodeFs.closeSync(fd)))),
            Effect.map((fd) => [scope, fd] as const),
            Effect.onError(() => Scope.close(scope, Exit.void))
          ))

    /** Creates the file (`create`): it must not exist. */
    const createFd = (id: string, path: string) =>
      Effect.try({
        try: () =>
          NodeFs.openSync(path, "ax"),
        catch: (error) =>
          codeOf(error) === "EEXIST" ? Store.alreadyExists(id) : Store.storeError(`cannot open ${path}`, id, error)
      })

    /**
     * Opens an existing file (`open`) for reading and appending, without creating it; one that
     * is not a regular file is refused (`OPEN_EXISTING`).
     */
    const openExistingFd = (id: string, path: string) =>
      Effect.flatMap(
        Effect.try({
          try: () => NodeFs.openSync(path, OPEN_EXISTING),
          catch: (error): SessionStoreError | SessionNotFound =>
            codeOf(error) === "ENOENT" ? Store.notFound(id) : Store.storeError(`cannot open ${path}`, id, error)
        }),
        (fd) => {
          let refused: SessionStoreError | undefined
          try {
            refused = notRegular(id, path, "open", NodeFs.fstatSync(fd))
          } catch (error) {
            refused = Store.storeError(`cannot open ${path}`, id, error)
          }
          if (refused === undefined) return Effect.succeed(fd)
          NodeFs.closeSync(fd)
          return Effect.fail(refused)
        }
      )

    const create = Effect.fnUntraced(function*(createOptions?: CreateOptions | undefined) {
      const { events, header, lines } = yield* Store.newSession(createOptions)
      const id = header.id
      if (!Store.isSessionId(id)) {
        return yield* Effect.fail(Store.invalidId(id))
      }
      if (openLogs.has(id)) {
        return yield* Effect.fail(Store.alreadyExists(id))
      }
      // Not Node's recursive mkdir: it never returns under /proc (`directory.ts`).
      const problem = makeDirectorySync(directory)
      if (problem !== undefined) {
        return yield* Effect.fail(
          new SessionStoreError({
            message: `cannot create ${directory}: ${problem.reason}`,
            sessionId: id,
            cause: problem.cause
          })
        )
      }
      const path = pathOf(id)
      const [scope, fd] = yield* openFile(id, path, createFd(id, path))
      // Header and seed (a fork child's first events) in one write (§3.1).
      const text = lines.length === 0 ? encodeHeader(header) : encodeHeader(header) + lines.join("\n") + "\n"
      const writeHeader = Effect.try({ try: () => writeAllSync(io, fd, text), catch: (error) => error })
      const size = yield* (batch ? Effect.zipLeft(writeHeader, datasync(io, fd)) : writeHeader).pipe(
        Effect.mapError((error) => Store.storeError(`cannot write the header of ${path}`, id, error)),
        Effect.onError(() =>
          Effect.zipRight(Scope.close(scope, Exit.void), Effect.sync(() => NodeFs.rmSync(path, { force: true })))
        )
      )
      return yield* attach(scope, fd, header, path, events, size, false)
    })

    /** Reads the whole file (`read`); one that is not a regular file is refused, never read (`OPEN_READ`). */
    const readBytes = (id: SessionId, path: string): Effect.Effect<Uint8Array, SessionStoreError | SessionNotFound> =>
      Effect.tryPromise({
        try: async (): Promise<Uint8Array | SessionStoreError> => {
          const file = await NodeFs.promises.open(path, OPEN_READ)
          try {
            return notRegular(id, path, "read", await file.stat()) ?? await file.readFile()
          } finally {
            await file.close()
          }
        },
        catch: (error) => codeOf(error) === "ENOENT" ? Store.notFound(id) : Store.storeError(`cannot read ${path}`, id, error)
      }).pipe(Effect.flatMap((bytes) => bytes instanceof SessionStoreError ? Effect.fail(bytes) : Effect.succeed(bytes)))

    /** Reads the whole file through the descriptor `open` holds (under the writer lock). */
    const readFd = (id: SessionId, path: string, fd: number): Effect.Effect<Uint8Array, SessionStoreError> =>
      Effect.async<Uint8Array, SessionStoreError>((resume) => {
        readAll(fd, (error, bytes) =>
          resume(error === null ? Effect.succeed(bytes) : Effect.fail(Store.storeError(`cannot read ${path}`, id, error))))
      })

    /** The log on `fd` (its lock held in `scope`): read, decoded, its torn tail cut, attached. */
    const load = Effect.fnUntraced(function*(scope: Scope.CloseableScope, fd: number, id: SessionId, path: string) {
      const bytes = yield* readFd(id, path, fd)
      const contents = yield* Effect.flatMap(Store.decodeBytes(bytes, path), (c) =>
        Store.ownHeader(id, path, c))
      const size = contents.validBytes ?? bytes.length
      if (contents.tornTail === true) {
        // §3.1: cut the torn tail before anything can be appended.
        const cut = Effect.try({
          try: () =>
            io.truncate(fd, size),
          catch: (error) => error
        })
        yield* (batch ? Effect.zipRight(cut, datasync(io, fd)) : cut).pipe(
          Effect.mapError((error) => Store.storeError(`cannot cut the torn tail of ${path}`, id, error))
        )
      }
      const pendingNewline = size > 0 && bytes[size - 1] !== 10
      return yield* attach(scope, fd, contents.header, path, contents.events as Array<SessionEvent>, size, pendingNewline)
    })

    const open = Effect.fnUntraced(function*(id: SessionId) {
      const already = openLogs.get(id)
      if (already !== undefined) return already
      if (!Store.isSessionId(id)) return yield* Effect.fail(Store.notFound(id))
      const path = pathOf(id)
      // A missing log is not found (rather than "cannot lock" in a missing directory); the open
      // below, which does not create the file, catches one removed meanwhile.
      if (!exists(path)) return yield* Effect.fail(Store.notFound(id))
      // The writer lock first, then the read (through the descriptor opened under the lock): a
      // log read before the lock was taken may be stale by then (another process completed a
      // turn meanwhile), and repairing it would append at seqs already used.
      const [scope, fd] = yield* openFile(id, path, openExistingFd(id, path))
      return yield* Effect.onError(load(scope, fd, id, path), () => Scope.close(scope, Exit.void))
    })

    const read = (id: SessionId): Effect.Effect<LogContents, SessionStoreError | SessionLogError | SessionNotFound> =>
      Effect.suspend(() => {
        const already = openLogs.get(id)
        if (already !== undefined) {
          return Effect.succeed({ header: already.header, events: already.events().slice(), warnings: [] })
        }
        if (!Store.isSessionId(id)) return Effect.fail(Store.notFound(id))
        const path = pathOf(id)
        return Effect.flatMap(
          readBytes(id, path),
          (bytes) => Effect.flatMap(Store.decodeBytes(bytes, path), (c) => Store.ownHeader(id, path, c))
        )
      })

    const list: Effect.Effect<ReadonlyArray<SessionId>, SessionStoreError> = Effect.tryPromise({
      try: () => NodeFs.promises.readdir(directory),
      catch: (error) => error
    }).pipe(
      Effect.map((names) => {
        const ids: Array<string> = []
        for (const name of names) {
          if (name.endsWith(".jsonl") && name.length > 6) ids.push(name.slice(0, -6))
        }
        return ids.sort()
      }),
      Effect.catchAll((error) =>
        codeOf(error) === "ENOENT"
          ? Effect.succeed([])
          : Effect.fail(Store.storeError(`cannot list ${directory}`, undefined, error))
      ),
      Effect.withSpan("SessionStore.list")
    )

    return {
      create: (createOptions?: CreateOptions | undefined) =>
        Effect.withSpan(storeLock.withPermits(1)(create(createOptions)), "SessionStore.create"),
      open: (id: SessionId) => Effect.withSpan(storeLock.withPermits(1)(open(id)), "SessionStore.open"),
      read: (id: SessionId) => Effect.withSpan(read(id), "SessionStore.read"),
      list
    }
  })
