/**
 * The SQL session store (`SqlSessionStore`, §3.3) as named functions over an explicit
 * state record: `SqlStore`, what one store holds (its client and tables, its writer identity, the
 * logs it handed out), and `SqlLog`, what one log it handed out holds (its writer epoch, its
 * group-commit queue). `SqlSessionStore.make` builds a `SqlStore` and serves `create`, `open`,
 * `read` and `list` with these functions; the rules are in that module's comment.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { SqlError as SqlErrorClass } from "@effect/sql/SqlError"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Data, Duration, Effect, Either, Exit, Schedule } from "effect"
import type { EventDraft, SessionEvent, SessionHeader, SessionId } from "../../SessionEvent.js"
import type { CreateOptions, LogContents, SessionLog, SessionNotFound } from "../../SessionLog.js"
import { SessionFenced, SessionLogError, type SessionStoreError, type SessionWriteError } from "../../SessionLog.js"
import { commitDrafts, decodeLog, encodeHeader } from "../logCodec.js"
import * as Store from "./common.js"
import type { tablesOf } from "./sql.js"
import { inUseError, isLiveWriter, readWriter, type Writer } from "./writer.js"

/** The longest string V8 makes (characters): a log's text must fit in one. */
const MAX_TEXT = 0x1fffffe8

/** Rows per INSERT statement (3 parameters each; SQLite allows 32,766 parameters). */
const ROWS_PER_STATEMENT = 5000

/** Rows of one fenced PostgreSQL statement (its arrays are two parameters whatever their length). */
const PG_ROWS_PER_STATEMENT = 50_000

/**
 * How a failed PostgreSQL append is settled when the database cannot be asked at once (a pool
 * that hands back the dying connection, a statement timeout under a lock): three more tries,
 * 100, 200 and 400 ms apart, on fresh connections.
 */
const SETTLE_RETRY = Schedule.intersect(Schedule.exponential(Duration.millis(100)), Schedule.recurs(3))

/** A take of a session that has no row (`open` of an unknown id): rolls the take back. */
class NoSession extends Data.TaggedError("NoSession") {}

/** What a take found: a live writer holding the session, or the session's new epoch. */
type Taken = { readonly held: Writer } | { readonly epoch: number }
const taken = (t: Taken): Taken => t

/** What one SQL store holds (built once by `SqlSessionStore.make`). */
export interface SqlStore {
  readonly sql: SqlClient.SqlClient
  readonly tables: ReturnType<typeof tablesOf>
  readonly sessionsTable: Statement.Identifier
  readonly eventsTable: Statement.Identifier
  readonly writersTable: Statement.Identifier
  /** This store's writer (`thisWriter()` and the store's id, as JSON): the value of its writers rows. */
  readonly me: string
  /** `writers: "takeover"` (§3.3). */
  readonly takeover: boolean
  readonly isPg: boolean
  /** The fenced insert of PostgreSQL (`fencedInsert`), as text: the same for every append. */
  readonly fencedPgInsert: string
  readonly openLogs: Map<string, SessionLog>
  /**
   * Logs of this store that a takeover fenced, or that broke (an append whose outcome could not
   * be found out): `open` takes their session again and reads it afresh, `read` reads the rows.
   */
  readonly staleLogs: WeakSet<SessionLog>
  /** The writer epoch of each log this store handed out. */
  readonly epochs: WeakMap<SessionLog, number>
  /** Set when the store's scope closes: it creates and opens nothing more, its logs append nothing. */
  closed: boolean
}

/** A store's state for `sql` and `tables`, writing as `me`. */
export const makeStore = (
  sql: SqlClient.SqlClient,
  tables: ReturnType<typeof tablesOf>,
  me: string,
  takeover: boolean
): SqlStore => {
  // Quoted table names for statements written as text (the prefix is a plain identifier).
  const quoted = (name: string) => `"${name}"`
  // PostgreSQL: one statement, one round trip. The session row is locked `FOR SHARE` (a take
  // waits for it) and selected only while its epoch is ours; the events are inserted from it,
  // so a fenced append inserts none. Arrays travel as two parameters (`unnest`), so the
  // statement's text is the same for every append.
  const fencedPgInsert =
    `WITH fence AS (SELECT id FROM ${quoted(tables.sessions)} WHERE id = $1 AND writer_epoch = $2 FOR SHARE) ` +
    `INSERT INTO ${
      quoted(tables.events)
    } (session_id, seq, event) SELECT fence.id, v.seq, v.event FROM fence, unnest($3::integer[], $4::text[]) AS v(seq, event) ` +
    `RETURNING seq`
  return {
    sql,
    tables,
    sessionsTable: sql(tables.sessions),
    eventsTable: sql(tables.events),
    writersTable: sql(tables.writers),
    me,
    takeover,
    isPg: sql.onDialectOrElse({ pg: () => true, orElse: () => false }),
    fencedPgInsert,
    openLogs: new Map(),
    staleLogs: new WeakSet(),
    epochs: new WeakMap(),
    closed: false
  }
}

/** A failed statement as the store's error. */
const failed = (what: string, id: string | undefined) => (error: SqlError) => Store.storeError(what, id, error)

/** Quoted table names for statements written as text (the prefix is a plain identifier). */
const quoted = (name: string) => `"${name}"`

/**
 * `sql.withTransaction`, with a failed COMMIT (a full disk) as the `SqlError` it is: the
 * client reports it as a defect. SQLite: a transaction the failure left open is rolled back,
 * since its one connection runs every later statement.
 */
const transaction = <A, E>(s: SqlStore, effect: Effect.Effect<A, E>): Effect.Effect<A, E | SqlError> =>
  s.sql.withTransaction(effect).pipe(
    Effect.catchAllDefect((defect) =>
      Effect.zipRight(
        s.isPg ? Effect.void : Effect.ignore(s.sql.unsafe("ROLLBACK")),
        Effect.fail(
          defect instanceof SqlErrorClass ? defect : new SqlErrorClass({ cause: defect, message: "transaction failed" })
        )
      )
    )
  )

/** The writers row of `id`, if any: its text, and the writer it names (undefined: not one). */
const holderOf = (
  s: SqlStore,
  id: string
): Effect.Effect<{ readonly text: string; readonly writer: Writer | undefined } | undefined, SqlError> =>
  Effect.map(
    s.sql<{ writer: string }>`SELECT writer FROM ${s.writersTable} WHERE session_id = ${id}`,
    (rows) => rows.length === 0 ? undefined : { text: rows[0]!.writer, writer: readWriter(rows[0]!.writer) }
  )

/**
 * Takes the session (§3.3) in one transaction and returns its new writer epoch:
 * the writers row becomes ours (`exclusive`: unless a live writer holds it; a stale row is
 * deleted only if it is still the one that was read, compare and delete, and the insert
 * fails on the key if another writer's row is there by then; `takeover`: whoever holds it),
 * and the session's `writer_epoch` is incremented (`created`: the session row is inserted
 * with epoch 1, and a fork child's seed rows with it). The increment waits for an append of the former writer that is running
 * (PostgreSQL: its `FOR SHARE` lock on the session row), so that the events read after the
 * take are all the former writer will ever have appended. `open` reads after this commits.
 */
const take = (
  s: SqlStore,
  id: string,
  created: { readonly header: string; readonly rows: ReadonlyArray<Row> } | undefined
): Effect.Effect<number, SessionStoreError | SessionNotFound> =>
  transaction(
    s,
    Effect.gen(function*() {
      if (s.takeover) {
        yield* s.sql`INSERT INTO ${s.writersTable} ${
          s.sql.insert({ session_id: id, writer: s.me })
        } ON CONFLICT (session_id) DO UPDATE SET writer = ${s.me}`
      } else {
        const held = yield* holderOf(s, id)
        if (held?.writer !== undefined && isLiveWriter(held.writer)) {
          return taken({ held: held.writer })
        }
        if (held !== undefined) {
          yield* s.sql`DELETE FROM ${s.writersTable} WHERE session_id = ${id} AND writer = ${held.text}`
        }
        yield* s.sql`INSERT INTO ${s.writersTable} ${s.sql.insert({ session_id: id, writer: s.me })}`
      }
      if (created !== undefined) {
        yield* s.sql`INSERT INTO ${s.sessionsTable} ${s.sql.insert({ id, header: created.header, writer_epoch: 1 })}`
        if (created.rows.length > 0) yield* insertRows(s, created.rows)
        return taken({ epoch: 1 })
      }
      const rows = yield* s.sql<
        { writer_epoch: number }
      >`UPDATE ${s.sessionsTable} SET writer_epoch = writer_epoch + 1 WHERE id = ${id} RETURNING writer_epoch`
      // No session: undo the writers row (the transaction rolls back).
      if (rows.length === 0) {
        return yield* Effect.fail(new NoSession())
      }
      return taken({ epoch: Number(rows[0]!.writer_epoch) })
    })
  ).pipe(
    Effect.catchAll((error): Effect.Effect<Taken, SessionStoreError | SessionNotFound> => {
      if (error instanceof NoSession) {
        return Effect.fail(Store.notFound(id))
      }
      // A writer that lost the race to another (or SQLite's "database is locked") is
      // reported as in use when a live writer holds the row.
      return Effect.flatMap(
        Effect.orElseSucceed(holderOf(s, id), () => undefined),
        (held): Effect.Effect<Taken, SessionStoreError> =>
          !s.takeover && held?.writer !== undefined && isLiveWriter(held.writer)
            ? Effect.succeed(taken({ held: held.writer }))
            : Effect.fail(failed(`cannot lock session "${id}"`, id)(error))
      )
    }),
    Effect.flatMap((t) =>
      "held" in t
        ? Effect.fail(inUseError(id, t.held, `delete its row of ${s.tables.writers}`))
        : Effect.succeed(t.epoch)
    )
  )

/** Frees the writers row of `id` if it is still this store's. */
const release = (s: SqlStore, id: string) =>
  Effect.ignore(s.sql`DELETE FROM ${s.writersTable} WHERE session_id = ${id} AND writer = ${s.me}`)

/**
 * Closes the store (its scope's finalizer): it creates, opens and appends nothing more, and the
 * writers rows of the sessions it holds are freed.
 */
export const closeStore = (s: SqlStore): Effect.Effect<void> =>
  Effect.suspend(() => {
    s.closed = true
    const ids = [...s.openLogs.keys()]
    return ids.length === 0
      ? Effect.void
      : Effect.ignore(s.sql`DELETE FROM ${s.writersTable} WHERE writer = ${s.me} AND ${s.sql.in("session_id", ids)}`)
  })

/** One row of the events table. */
type Row = { readonly session_id: string; readonly seq: number; readonly event: string }
/** Plain INSERTs of `rows` (several statements above `ROWS_PER_STATEMENT`, in the caller's transaction). */
const insertRows = (s: SqlStore, rows: ReadonlyArray<Row>): Effect.Effect<void, SqlError> => {
  const statements: Array<Effect.Effect<unknown, SqlError>> = []
  for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
    statements.push(s.sql`INSERT INTO ${s.eventsTable} ${s.sql.insert(rows.slice(i, i + ROWS_PER_STATEMENT))}`)
  }
  return Effect.all(statements, { discard: true })
}

/** The session's epoch now (for a fenced writer's error), if it can be read. */
const epochOf = (s: SqlStore, id: string): Effect.Effect<number | undefined> =>
  s.sql<{ writer_epoch: number }>`SELECT writer_epoch FROM ${s.sessionsTable} WHERE id = ${id}`.pipe(
    Effect.map((rows) => rows.length === 0 ? undefined : Number(rows[0]!.writer_epoch)),
    Effect.orElseSucceed(() => undefined)
  )

/**
 * Inserts `rows` if `epoch` is still the session's (§3.3): all of them or none.
 * Returns false, having written nothing, when the session was taken over.
 */
const fencedInsert = (s: SqlStore, id: string, epoch: number, rows: ReadonlyArray<Row>): Effect.Effect<boolean, SqlError> => {
  if (s.isPg && rows.length <= PG_ROWS_PER_STATEMENT) {
    const seqs = new Array<number>(rows.length)
    const texts = new Array<string>(rows.length)
    for (let i = 0; i < rows.length; i++) {
      seqs[i] = rows[i]!.seq
      texts[i] = rows[i]!.event
    }
    return Effect.map(s.sql.unsafe(s.fencedPgInsert, [id, epoch, seqs, texts]), (inserted) => inserted.length === rows.length)
  }
  if (!s.isPg && rows.length <= ROWS_PER_STATEMENT) {
    // SQLite writes one statement at a time (a database lock): the check and the insert
    // in one statement are atomic against a take.
    const params: Array<unknown> = []
    const values: Array<string> = []
    for (const row of rows) {
      values.push("(?, ?, ?)")
      params.push(row.session_id, row.seq, row.event)
    }
    params.push(id, epoch)
    return Effect.map(
      s.sql.unsafe(
        `INSERT INTO ${quoted(s.tables.events)} (session_id, seq, event) SELECT column1, column2, column3 FROM (VALUES ${
          values.join(", ")
        }) WHERE EXISTS (SELECT 1 FROM ${quoted(s.tables.sessions)} WHERE id = ? AND writer_epoch = ?) RETURNING seq`,
        params
      ),
      (inserted) => inserted.length === rows.length
    )
  }
  // A very large append: check, then insert, in one transaction (PostgreSQL: the check
  // locks the session row as above).
  return transaction(
    s,
    Effect.gen(function*() {
      const current = s.isPg
        ? yield* s.sql<{ writer_epoch: number }>`SELECT writer_epoch FROM ${s.sessionsTable} WHERE id = ${id} FOR SHARE`
        : yield* s.sql<{ writer_epoch: number }>`SELECT writer_epoch FROM ${s.sessionsTable} WHERE id = ${id}`
      if (current.length === 0 || Number(current[0]!.writer_epoch) !== epoch) return false
      yield* insertRows(s, rows)
      return true
    })
  )
}

/**
 * What a failed PostgreSQL append turned out to be (`settle`): not committed (the session
 * re-taken at `epoch`), committed after all (at `epoch`), fenced by another writer, or
 * unknown (the database could not be asked).
 */
type Settled =
  | { readonly _tag: "NotCommitted"; readonly epoch: number }
  | { readonly _tag: "Committed"; readonly epoch: number }
  | { readonly _tag: "Fenced" }
  | { readonly _tag: "Unknown"; readonly cause: unknown }

/**
 * Finds out what a failed append did (§3.3). A statement that failed with a
 * connection error (a reset, `pg_terminate_backend`, a reply lost on the way) may have been
 * committed: the store asks the database on a connection of its own, in one transaction that
 * first re-takes the session for this writer (`writer_epoch` + 1, only while it is still this
 * log's epoch: it waits for the failed statement if that still runs, and fences it if it
 * arrives late), then reads the rows from the append's first seq. Exactly the append's rows:
 * committed; none: not committed; anything else, or a database that cannot be asked after
 * four tries over about 1.5 s: unknown. Every failure of an insert is settled so (a timeout
 * or a refused statement is simply not committed), so an append never leaves the log behind
 * the database.
 */
const settle = (s: SqlStore, id: string, epoch: number, rows: ReadonlyArray<Row>): Effect.Effect<Settled> =>
  transaction(
    s,
    Effect.gen(function*() {
      const bumped = yield* s.sql<
        { writer_epoch: number }
      >`UPDATE ${s.sessionsTable} SET writer_epoch = writer_epoch + 1 WHERE id = ${id} AND writer_epoch = ${epoch} RETURNING writer_epoch`
      if (bumped.length === 0) return { _tag: "Fenced" } as const
      const next = Number(bumped[0]!.writer_epoch)
      const found = yield* s.sql<
        { seq: number; event: string }
      >`SELECT seq, event FROM ${s.eventsTable} WHERE session_id = ${id} AND seq >= ${rows[0]!.seq} ORDER BY seq`
      if (found.length === 0) return { _tag: "NotCommitted", epoch: next } as const
      const same = found.length === rows.length &&
        found.every((row, i) => Number(row.seq) === rows[i]!.seq && row.event === rows[i]!.event)
      return same
        ? { _tag: "Committed", epoch: next } as const
        : { _tag: "Unknown", cause: new Error(`the rows from seq ${rows[0]!.seq} are not this append's`) } as const
    })
  ).pipe(
    Effect.retry(SETTLE_RETRY),
    Effect.catchAll((cause) => Effect.succeed({ _tag: "Unknown", cause } as const))
  )

/** An append waiting to be committed, alone or grouped with others of its log. */
interface Pending {
  readonly drafts: ReadonlyArray<EventDraft>
  readonly time: number
  result: Exit.Exit<ReadonlyArray<SessionEvent>, SessionWriteError> | undefined
  /** Set when this append leads the next commit (it was queued when the last one ended). */
  lead: boolean
  /** Resumes the waiting append (with its result, or with the commit it leads). */
  wake: ((effect: Effect.Effect<ReadonlyArray<SessionEvent>, SessionWriteError>) => void) | undefined
}

/** What one log the store handed out holds; `log` is the `SessionLog` itself. */
class SqlLog {
  readonly id: string
  /** This log's writer epoch: the take's, then the re-take of each settled failure (`settle`). */
  epoch: number
  fenced: SessionFenced | undefined = undefined
  /** Set when a failed append could not be settled: the log refuses appends; `open` takes the session again. */
  broken: SessionStoreError | undefined = undefined
  closed = false
  /** Appends queued for the next commit, in call order. */
  readonly queue: Array<Pending> = []
  /** Whether a commit is running or led: appends arriving now wait for the next one. */
  committing = false
  /** `close` calls waiting for the running commit to end. */
  readonly idle: Array<() => void> = []
  readonly log: SessionLog

  constructor(
    readonly store: SqlStore,
    header: SessionHeader,
    readonly events: Array<SessionEvent>,
    epoch: number
  ) {
    this.id = header.id
    this.epoch = epoch
    this.log = {
      id: header.id,
      header,
      append: (drafts) => append(this, drafts),
      events: () => events,
      close: Effect.suspend(() => closeLog(this))
    }
  }
}

/** Why the log refuses an append now (fenced, broken, closed), if it does. */
const refusal = (l: SqlLog): SessionWriteError | undefined =>
  l.fenced ?? l.broken ??
    (l.store.closed || l.closed ? Store.storeError(`session "${l.id}" is closed`, l.id) : undefined)

/**
 * Commits `batch` in one statement (group commit, §3.3): each append's events
 * are adjacent and in call order; an append whose events cannot be encoded fails alone; a
 * failed insert fails them all and changes nothing in memory.
 */
const flush = (l: SqlLog, batch: ReadonlyArray<Pending>): Effect.Effect<void> => {
  const { events, id, log, store: s } = l
  const refused = refusal(l)
  if (refused !== undefined) {
    for (const p of batch) p.result = Exit.fail(refused)
    return Effect.void
  }
  const rows: Array<Row> = []
  const parts: Array<{ readonly pending: Pending; readonly committed: ReadonlyArray<SessionEvent> }> = []
  let next = events.length
  for (const p of batch) {
    try {
      const committed = commitDrafts(p.drafts, next, p.time)
      // Encoding failures (a cycle, a BigInt) are typed errors and change nothing.
      const encoded = committed.map((event) => ({ session_id: id, seq: event.seq, event: JSON.stringify(event) }))
      for (const row of encoded) rows.push(row)
      parts.push({ pending: p, committed })
      next += committed.length
    } catch (error) {
      p.result = Exit.fail(Store.invalidEvents(id, error))
    }
  }
  if (parts.length === 0) return Effect.void
  const succeed = () => {
    for (const { committed, pending } of parts) {
      for (const event of committed) events.push(event)
      pending.result = Exit.succeed(committed)
    }
  }
  const fail = (failure: SessionWriteError) => {
    for (const { pending } of parts) pending.result = Exit.fail(failure)
  }
  return fencedInsert(s, id, l.epoch, rows).pipe(
    Effect.matchEffect({
      onFailure: (error) => {
        const failure = failed(`cannot append to session "${id}"`, id)(error)
        // SQLite runs in this process: a failed statement was rolled back, its outcome known.
        if (!s.isPg) return Effect.sync(() => fail(failure))
        return Effect.flatMap(settle(s, id, l.epoch, rows), (settled): Effect.Effect<void> => {
          switch (settled._tag) {
            case "Committed":
              l.epoch = settled.epoch
              s.epochs.set(log, l.epoch)
              return Effect.sync(succeed)
            case "NotCommitted":
              l.epoch = settled.epoch
              s.epochs.set(log, l.epoch)
              return Effect.sync(() => fail(failure))
            case "Fenced":
              return fence()
            case "Unknown":
              return Effect.sync(() => {
                const broken = Store.brokenError(
                  `session "${id}" is broken: an append failed and whether it was committed could not be ` +
                    `found out (open the session again)`,
                  id,
                  error
                )
                l.broken = broken
                s.staleLogs.add(log)
                fail(broken)
              })
          }
        })
      },
      onSuccess: (inserted) => inserted ? Effect.sync(succeed) : fence()
    }),
    // A defect (a bug below) still decides every append of the batch.
    Effect.catchAllCause((cause) =>
      Effect.sync(() => {
        for (const p of batch) if (p.result === undefined) p.result = Exit.failCause(cause)
      })
    )
  )
  /** Another writer took the session: this log is fenced for good (nothing of the batch was appended). */
  function fence(): Effect.Effect<void> {
    return Effect.map(epochOf(s, id), (current) => {
      const fenced = new SessionFenced({
        message: `session "${id}" was taken over by another writer (this writer's epoch is ${l.epoch}` +
          `${current === undefined ? "" : `, the session's ${current}`}): nothing was appended`,
        sessionId: id,
        epoch: l.epoch,
        current
      })
      l.fenced = fenced
      s.staleLogs.add(log)
      fail(fenced)
    })
  }
}

/**
 * The commit `leader` leads: it yields once (so that appends made meanwhile join it),
 * commits every queued append, wakes the others of the batch with their results, hands the
 * next commit to the first append queued since (or ends), and returns its own result. No
 * lock: an append queued while a commit runs waits for the next one, which the first of
 * them leads, so batches stay full under load and appends are committed in call order.
 */
const lead = (l: SqlLog, leader: Pending): Effect.Effect<ReadonlyArray<SessionEvent>, SessionWriteError> =>
  Effect.zipRight(
    Effect.yieldNow(),
    Effect.suspend(() => {
      const batch = l.queue.splice(0)
      return Effect.suspend(() =>
        Effect.map(flush(l, batch), () => {
          for (const p of batch) if (p !== leader) p.wake?.(p.result!)
          const next = l.queue[0]
          if (next !== undefined) {
            next.lead = true
            next.wake?.(lead(l, next))
          } else {
            l.committing = false
            for (const resume of l.idle.splice(0)) resume()
          }
        })
      ).pipe(Effect.flatMap(() => leader.result!))
    })
  )

/**
 * A log's `append`. Uninterruptible: an insert the database committed is always recorded in
 * memory too (an interrupted wait on an asynchronous client would lose it, and every later
 * append would then fail on the seq key).
 */
const append = (
  l: SqlLog,
  drafts: ReadonlyArray<EventDraft>
): Effect.Effect<ReadonlyArray<SessionEvent>, SessionWriteError> =>
  drafts.length === 0
    ? Store.EMPTY
    : Effect.uninterruptible(Effect.clockWith((clock) =>
      Effect.suspend(() => {
        const refused = refusal(l)
        if (refused !== undefined) return Effect.fail(refused)
        const pending: Pending = {
          drafts,
          time: clock.unsafeCurrentTimeMillis(),
          result: undefined,
          lead: false,
          wake: undefined
        }
        l.queue.push(pending)
        if (!l.committing) {
          l.committing = true
          return lead(l, pending)
        }
        return Effect.async<ReadonlyArray<SessionEvent>, SessionWriteError>((resume) => {
          if (pending.result !== undefined) resume(pending.result)
          else if (pending.lead) resume(lead(l, pending))
          else pending.wake = resume
        })
      })
    ))

/** A log's `close`: after the commit that is running (its row stays ours until it is done), frees the session. */
const closeLog = (l: SqlLog): Effect.Effect<void> => {
  const { id, log, store: s } = l
  if (l.closed) return Effect.void
  l.closed = true
  if (s.openLogs.get(id) === log) s.openLogs.delete(id)
  // After the commit that is running: its row stays ours until it is done.
  const released = release(s, id)
  return l.committing
    ? Effect.zipRight(Effect.async<void>((resume) => void l.idle.push(() => resume(Effect.void))), released)
    : released
}

/** A log of session `header.id` that this store writes from `events`, at the epoch its take returned. */
const attach = (s: SqlStore, header: SessionHeader, events: Array<SessionEvent>, takenEpoch: number): SessionLog => {
  const { log } = new SqlLog(s, header, events, takenEpoch)
  s.openLogs.set(header.id, log)
  s.epochs.set(log, takenEpoch)
  return log
}

const readRows = Effect.fnUntraced(function*(s: SqlStore, id: SessionId) {
  const readFailed = failed(`cannot read session "${id}"`, id)
  const headers = yield* Effect.mapError(
    s.sql<{ header: string }>`SELECT header FROM ${s.sessionsTable} WHERE id = ${id}`,
    readFailed
  )
  if (headers.length === 0) return yield* Effect.fail(Store.notFound(id))
  const rows = yield* Effect.mapError(
    s.sql<{ seq: number; event: string }>`SELECT seq, event FROM ${s.eventsTable} WHERE session_id = ${id} ORDER BY seq`,
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
  if (contents.header.version !== 1) {
    return yield* Effect.fail(rowError(1, "only logs of our format (version 1) are stored in SQL"))
  }
  if (contents.header.id !== id) {
    return yield* Effect.fail(rowError(1, `the header names session ${JSON.stringify(contents.header.id)}`))
  }
  return { header: contents.header, events: contents.events, warnings: contents.warnings } satisfies LogContents
})

export const create = Effect.fnUntraced(function*(s: SqlStore, createOptions: CreateOptions | undefined) {
  const { events, header, lines } = yield* Store.newSession(createOptions)
  const id = header.id
  if (!Store.isSessionId(id)) return yield* Effect.fail(Store.invalidId(id))
  if (s.closed) return yield* Effect.fail(Store.storeError("the store is closed", id))
  const createFailed = failed(`cannot create session "${id}"`, id)
  const existing = yield* Effect.mapError(s.sql<{ id: string }>`SELECT id FROM ${s.sessionsTable} WHERE id = ${id}`, createFailed)
  if (existing.length > 0 || s.openLogs.has(id)) return yield* Effect.fail(Store.alreadyExists(id))
  // (A take with a header inserts the session row: it never finds no session.)
  // The session row and a fork child's seed rows in the take's one transaction (§3.1).
  const rows = lines.map((event, seq): Row => ({ session_id: id, seq, event }))
  const epoch = yield* Effect.catchTag(
    take(s, id, { header: encodeHeader(header).slice(0, -1), rows }),
    "SessionNotFound",
    Effect.die
  )
  return attach(s, header, events, epoch)
})

export const open = Effect.fnUntraced(function*(s: SqlStore, id: SessionId) {
  // `exclusive`: one log per session in this store (unless a takeover fenced it). `takeover`:
  // every open takes the session again and reads it afresh (another runner may have
  // written it meanwhile); a log handed out before is fenced by the new epoch.
  const already = s.openLogs.get(id)
  if (already !== undefined && !s.takeover && !s.staleLogs.has(already)) return already
  if (!Store.isSessionId(id)) return yield* Effect.fail(Store.notFound(id))
  if (s.closed) return yield* Effect.fail(Store.storeError("the store is closed", id))
  const epoch = yield* take(s, id, undefined)
  const contents = yield* Effect.tapError(readRows(s, id), () => release(s, id))
  return attach(s, contents.header, contents.events as Array<SessionEvent>, epoch)
})

export const read = (
  s: SqlStore,
  id: SessionId
): Effect.Effect<LogContents, SessionStoreError | SessionLogError | SessionNotFound> =>
  Effect.suspend(() => {
    // A log this store writes is read from memory while its epoch is still the session's;
    // one that a takeover fenced (or has taken without its knowing yet: a paused process)
    // is stale, so its session is read from the database like any other.
    const already = s.openLogs.get(id)
    if (already === undefined || s.staleLogs.has(already)) {
      return Store.isSessionId(id) ? readRows(s, id) : Effect.fail(Store.notFound(id))
    }
    return Effect.flatMap(epochOf(s, id), (current) =>
      current === s.epochs.get(already)
        ? Effect.succeed({ header: already.header, events: already.events().slice(), warnings: [] })
        : readRows(s, id))
  })

/** The header's JSON text of session `id` as stored, or undefined when there is none (`Store.HeaderTextId`). */
export const headerText = (s: SqlStore, id: SessionId): Effect.Effect<string | undefined, SessionStoreError> =>
  Effect.mapError(
    Effect.map(
      s.sql<{ header: string }>`SELECT header FROM ${s.sessionsTable} WHERE id = ${id}`,
      (rows) => typeof rows[0]?.header === "string" ? rows[0].header : undefined
    ),
    failed(`cannot read session "${id}"`, id)
  )

export const list = (s: SqlStore): Effect.Effect<ReadonlyArray<SessionId>, SessionStoreError> =>
  Effect.mapError(
    Effect.map(s.sql<{ id: string }>`SELECT id FROM ${s.sessionsTable} ORDER BY id`, (rows) => rows.map((r) => r.id)),
    failed("cannot list the sessions", undefined)
  )

/** Every session's last seq and writer row (`Store.ProbeId`), in two queries. */
export const probe = (s: SqlStore): Effect.Effect<ReadonlyMap<string, Store.Probe>, SessionStoreError> =>
  Effect.mapError(
    Effect.map(
      Effect.all([
        s.sql<
          { id: string; last: number | string | null }
        >`SELECT s.id AS id, (SELECT MAX(e.seq) FROM ${s.eventsTable} e WHERE e.session_id = s.id) AS last FROM ${s.sessionsTable} s`,
        s.sql<{ session_id: string; writer: string }>`SELECT session_id, writer FROM ${s.writersTable}`
      ]),
      ([sessions, writers]) => {
        const held = new Map(writers.map((w) => [w.session_id, w.writer]))
        return new Map(sessions.map((r) => [r.id, { lastSeq: r.last === null ? -1 : Number(r.last), writer: held.get(r.id) }]))
      }
    ),
    failed("cannot probe the sessions", undefined)
  )
