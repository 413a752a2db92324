/**
 * Session logs in SQL (§3.3: an append is durable when committed), imported as
 * `effect-agent-loop/sql`: `layer` runs the store on the `@effect/sql` `SqlClient` you provide
 * (SQLite, PostgreSQL), `layerSqlite` on SQLite through `@effect/sql-sqlite-node`
 * (better-sqlite3, loaded on first use), `layerPg` on PostgreSQL through `@effect/sql-pg`
 * (loaded on first use). Cut as `@effect/cluster` cuts its `MessageStorage` /
 * `SqlMessageStorage`: the service and the file stores are in `SessionStore`, this module adds
 * the SQL implementation, so that a memory or JSONL user never loads `@effect/sql`.
 *
 * Tables (with the default `tablePrefix` `"agent_loop_"`), created by `@effect/sql`'s `Migrator`
 * (its own table: `<prefix>migrations`):
 * - `<prefix>sessions (id TEXT PRIMARY KEY, header TEXT, writer_epoch INTEGER)`: the header
 *   line's JSON, and the session's writer epoch (migration 2; the fencing token below);
 * - `<prefix>events (session_id TEXT, seq INTEGER, event TEXT, PRIMARY KEY (session_id, seq))`:
 *   one row per event, `event` being exactly the line the JSONL store would write (without its
 *   newline): a session exports to a JSONL log by concatenation, and reads back through the same
 *   decoder with the same checks;
 * - `<prefix>writers (session_id TEXT PRIMARY KEY, writer TEXT)`: who writes a session (one
 *   writer per session).
 * Tables of these names that a version without the migrations table made are adopted when their
 * columns are these; tables of these names with other columns make the store fail to build
 * (choose another `tablePrefix`).
 *
 * Rules:
 * - An append is one statement (a transaction above 5,000 events on SQLite, 50,000 on
 *   PostgreSQL): all of its events or none, committed when it returns. Appends to one log are
 *   serialized by the log; those that arrive while one is being committed are committed together
 *   in the next statement (group commit: each call's events adjacent, in call order; a call whose
 *   events cannot be encoded fails alone).
 * - An append that fails is settled before it returns (PostgreSQL; `settle`): the statement may
 *   have been committed although its connection failed (a reset, a terminated backend, a reply
 *   lost on the way), so the store re-takes the session for this writer (`writer_epoch` + 1, only
 *   while it is still this log's: a statement still on its way is fenced) and reads the append's
 *   rows on another connection. Found: the append succeeded; absent: it failed and nothing of it
 *   is anywhere; undecidable (the database cannot be asked, four tries over 1.5 s): the log breaks
 *   (every later append fails; `open` takes the session again). SQLite needs none of this: its
 *   statements run in this process and a failed one was rolled back.
 * - Fenced writers (§3.3): every take of a session (`open`, `create`) increments its
 *   `writer_epoch` in the transaction that takes the writers row; every append inserts its events
 *   only while the epoch is still its log's (PostgreSQL: the session row is locked `FOR SHARE` in
 *   the same statement, so a take waits for an append that is running; SQLite: one statement,
 *   which the database lock serializes). A fenced append writes nothing and fails with
 *   `SessionFenced`, and so does every later append of that log.
 * - One writer per session: a row of the writers table is held while a log is open, taken
 *   before `open` reads the events. `writers: "exclusive"` (default): a live writer's row makes
 *   `open`/`create` fail with a `SessionStoreError` naming it; the row of a dead writer, or of a
 *   closed store of this process that could not delete it (a full disk), is taken over.
 *   `writers: "takeover"`: `open` takes the session from whoever holds it, and reads it afresh
 *   each time (a log it handed out before is fenced). `log.close` frees the row at once.
 * - `read` of a session whose log this store has open returns that log's events (one query
 *   checks that its epoch is still the session's); once another writer has taken the session,
 *   the rows in the database.
 * - Reading orders rows by `seq`. A row that is not one line of JSON, a missing or repeated seq,
 *   or invalid event data is a `SessionLogError` naming the session and the seq; its `line` is
 *   the line the event would have in a JSONL file (seq + 2). There is no torn tail: a commit is
 *   atomic.
 * - Session ids follow the JSONL store's rule (`[A-Za-z0-9_-][A-Za-z0-9._-]*`), so every session
 *   can be exported to a file. Logs opened through the store refuse appends once its scope closes.
 * - Portable SQL (`TEXT` keys): SQLite and PostgreSQL (`layerPg`); MySQL would need `VARCHAR`
 *   keys and another fenced insert.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError as SqlErrorClass } from "@effect/sql/SqlError"
import type { SqlError } from "@effect/sql/SqlError"
import { Data, Duration, Effect, Either, Exit, Layer, Redacted, Schedule, type Scope } from "effect"
import { commitDrafts, decodeLog, encodeHeader } from "./internal/logCodec.js"
import { pgWhere } from "./internal/pgUrl.js"
import * as Store from "./internal/store/common.js"
import { loadDriver, migrate, tablesOf } from "./internal/store/sql.js"
import { inUseError, isLiveWriter, openStore, readWriter, thisWriter, type Writer } from "./internal/store/writer.js"
import type { EventDraft, SessionEvent, SessionHeader, SessionId } from "./SessionEvent.js"
import type { CreateOptions, LogContents, SessionLog, SessionNotFound } from "./SessionLog.js"
import { SessionFenced, SessionLogError, type SessionStoreError, type SessionWriteError } from "./SessionLog.js"
import { SessionStore, type SessionStoreService } from "./SessionStore.js"

/**
 * Options of the SQL store: `tablePrefix` (default `"agent_loop_"`; letters, digits and `_`,
 * starting with a letter or `_`) names its tables, so that several stores or applications can
 * share one database.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlOptions {
  readonly tablePrefix?: string | undefined
  /**
   * How `open`/`create` treat a session another writer holds (§3.3):
   * - `"exclusive"` (default): a live writer's row makes them fail with a `SessionStoreError`
   *   naming it; a dead writer's row (a process of this host that is gone) is taken over.
   * - `"takeover"`: they always take the session, fencing the writer that held it (its next
   *   append fails with `SessionFenced` and writes nothing). For a process that something else
   *   has already made the session's one owner (an `@effect/cluster` runner that holds the
   *   entity's shard): the epoch, not the row, keeps a paused former owner from writing.
   */
  readonly writers?: "exclusive" | "takeover" | undefined
}

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

const PREFIX = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Builds the SQL store on the `@effect/sql` `SqlClient` in context (§3.3): runs its
 * migrations, then serves `create`/`open`/`read`/`list` (rules in the module comment). Fails
 * with `SessionStoreError` when the schema cannot be created or a table of its names has other
 * columns, or `tablePrefix` is not a plain identifier. Scoped: on close, the store's writer rows
 * are released and its open logs refuse appends.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: SqlOptions = {}
): Effect.Effect<SessionStoreService, SessionStoreError, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const prefix = options.tablePrefix ?? "agent_loop_"
    if (!PREFIX.test(prefix)) {
      return yield* Effect.fail(
        Store.storeError(`invalid tablePrefix ${JSON.stringify(prefix)}: letters, digits and _ only`, undefined)
      )
    }
    const tables = tablesOf(prefix)
    const sql = yield* SqlClient.SqlClient
    const failed = (what: string, id: string | undefined) => (error: SqlError) => Store.storeError(what, id, error)
    yield* migrate(sql, tables)
    const sessionsTable = sql(tables.sessions)
    const eventsTable = sql(tables.events)
    const writersTable = sql(tables.writers)

    const openLogs = new Map<string, SessionLog>()
    /**
     * Logs of this store that a takeover fenced, or that broke (an append whose outcome could not
     * be found out): `open` takes their session again and reads it afresh, `read` reads the rows.
     */
    const staleLogs = new WeakSet<SessionLog>()
    /** The writer epoch of each log this store handed out. */
    const epochs = new WeakMap<SessionLog, number>()
    let closed = false
    const self = openStore()
    yield* Effect.addFinalizer(() => Effect.sync(self.close))
    const me = JSON.stringify({ ...thisWriter(), store: self.id })
    const takeover = options.writers === "takeover"
    const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
    // Quoted table names for statements written as text (the prefix is a plain identifier).
    const quoted = (name: string) => `"${name}"`

    /**
     * `sql.withTransaction`, with a failed COMMIT (a full disk) as the `SqlError` it is: the
     * client reports it as a defect. SQLite: a transaction the failure left open is rolled back,
     * since its one connection runs every later statement.
     */
    const transaction = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E | SqlError> =>
      sql.withTransaction(effect).pipe(
        Effect.catchAllDefect((defect) =>
          Effect.zipRight(
            isPg ? Effect.void : Effect.ignore(sql.unsafe("ROLLBACK")),
            Effect.fail(
              defect instanceof SqlErrorClass ? defect : new SqlErrorClass({ cause: defect, message: "transaction failed" })
            )
          )
        )
      )

    const holderOf = (
      id: string
    ): Effect.Effect<{ readonly text: string; readonly writer: Writer | undefined } | undefined, SqlError> =>
      Effect.map(sql<{ writer: string }>`SELECT writer FROM ${writersTable} WHERE session_id = ${id}`, (rows) =>
        rows.length === 0 ? undefined : { text: rows[0]!.writer, writer: readWriter(rows[0]!.writer) })

    /**
     * Takes the session (§3.3) in one transaction and returns its new writer epoch:
     * the writers row becomes ours (`exclusive`: unless a live writer holds it; a stale row is
     * deleted only if it is still the one that was read, compare and delete, and the insert
     * fails on the key if another writer's row is there by then; `takeover`: whoever holds it),
     * and the session's `writer_epoch` is incremented (`header`: the session row is inserted
     * with epoch 1). The increment waits for an append of the former writer that is running
     * (PostgreSQL: its `FOR SHARE` lock on the session row), so that the events read after the
     * take are all the former writer will ever have appended. `open` reads after this commits.
     */
    const take = (id: string, header: string | undefined): Effect.Effect<number, SessionStoreError | SessionNotFound> =>
      transaction(Effect.gen(function*() {
        if (takeover) {
          yield* sql`INSERT INTO ${writersTable} ${
            sql.insert({ session_id: id, writer: me })
          } ON CONFLICT (session_id) DO UPDATE SET writer = ${me}`
        } else {
          const held = yield* holderOf(id)
          if (held?.writer !== undefined && isLiveWriter(held.writer)) {
            return taken({ held: held.writer })
          }
          if (held !== undefined) {
            yield* sql`DELETE FROM ${writersTable} WHERE session_id = ${id} AND writer = ${held.text}`
          }
          yield* sql`INSERT INTO ${writersTable} ${sql.insert({ session_id: id, writer: me })}`
        }
        if (header !== undefined) {
          yield* sql`INSERT INTO ${sessionsTable} ${sql.insert({ id, header, writer_epoch: 1 })}`
          return taken({ epoch: 1 })
        }
        const rows = yield* sql<
          { writer_epoch: number }
        >`UPDATE ${sessionsTable} SET writer_epoch = writer_epoch + 1 WHERE id = ${id} RETURNING writer_epoch`
        // No session: undo the writers row (the transaction rolls back).
        if (rows.length === 0) {
          return yield* Effect.fail(new NoSession())
        }
        return taken({ epoch: Number(rows[0]!.writer_epoch) })
      })).pipe(
        Effect.catchAll((error): Effect.Effect<Taken, SessionStoreError | SessionNotFound> => {
          if (error instanceof NoSession) {
            return Effect.fail(Store.notFound(id))
          }
          // A writer that lost the race to another (or SQLite's "database is locked") is
          // reported as in use when a live writer holds the row.
          return Effect.flatMap(
            Effect.orElseSucceed(holderOf(id), () =>
              undefined),
            (held): Effect.Effect<Taken, SessionStoreError> =>
              !takeover && held?.writer !== undefined && isLiveWriter(held.writer)
                ? Effect.succeed(taken({ held: held.writer }))
                : Effect.fail(failed(`cannot lock session "${id}"`, id)(error))
          )
        }),
        Effect.flatMap((t) =>
          "held" in t
            ? Effect.fail(inUseError(id, t.held, `delete its row of ${tables.writers}`))
            : Effect.succeed(t.epoch)
        )
      )
    /** Frees the writers row of `id` if it is still this store's. */
    const release = (id: string) => Effect.ignore(sql`DELETE FROM ${writersTable} WHERE session_id = ${id} AND writer = ${me}`)
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closed = true
        const ids = [...openLogs.keys()]
        return ids.length === 0
          ? Effect.void
          : Effect.ignore(sql`DELETE FROM ${writersTable} WHERE writer = ${me} AND ${sql.in("session_id", ids)}`)
      })
    )
    const storeLock = yield* Effect.makeSemaphore(1)

    type Row = { readonly session_id: string; readonly seq: number; readonly event: string }
    /** Plain INSERTs of `rows` (several statements above `ROWS_PER_STATEMENT`, in the caller's transaction). */
    const insertRows = (rows: ReadonlyArray<Row>): Effect.Effect<void, SqlError> => {
      const statements: Array<Effect.Effect<unknown, SqlError>> = []
      for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
        statements.push(sql`INSERT INTO ${eventsTable} ${sql.insert(rows.slice(i, i + ROWS_PER_STATEMENT))}`)
      }
      return Effect.all(statements, { discard: true })
    }
    /** The session's epoch now (for a fenced writer's error), if it can be read. */
    const epochOf = (id: string): Effect.Effect<number | undefined> =>
      sql<{ writer_epoch: number }>`SELECT writer_epoch FROM ${sessionsTable} WHERE id = ${id}`.pipe(
        Effect.map((rows) => rows.length === 0 ? undefined : Number(rows[0]!.writer_epoch)),
        Effect.orElseSucceed(() => undefined)
      )
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
    /**
     * Inserts `rows` if `epoch` is still the session's (§3.3): all of them or none.
     * Returns false, having written nothing, when the session was taken over.
     */
    const fencedInsert = (id: string, epoch: number, rows: ReadonlyArray<Row>): Effect.Effect<boolean, SqlError> => {
      if (isPg && rows.length <= PG_ROWS_PER_STATEMENT) {
        const seqs = new Array<number>(rows.length)
        const texts = new Array<string>(rows.length)
        for (let i = 0; i < rows.length; i++) {
          seqs[i] = rows[i]!.seq
          texts[i] = rows[i]!.event
        }
        return Effect.map(sql.unsafe(fencedPgInsert, [id, epoch, seqs, texts]), (inserted) => inserted.length === rows.length)
      }
      if (!isPg && rows.length <= ROWS_PER_STATEMENT) {
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
          sql.unsafe(
            `INSERT INTO ${quoted(tables.events)} (session_id, seq, event) SELECT column1, column2, column3 FROM (VALUES ${
              values.join(", ")
            }) WHERE EXISTS (SELECT 1 FROM ${quoted(tables.sessions)} WHERE id = ? AND writer_epoch = ?) RETURNING seq`,
            params
          ),
          (inserted) => inserted.length === rows.length
        )
      }
      // A very large append: check, then insert, in one transaction (PostgreSQL: the check
      // locks the session row as above).
      return transaction(Effect.gen(function*() {
        const current = isPg
          ? yield* sql<{ writer_epoch: number }>`SELECT writer_epoch FROM ${sessionsTable} WHERE id = ${id} FOR SHARE`
          : yield* sql<{ writer_epoch: number }>`SELECT writer_epoch FROM ${sessionsTable} WHERE id = ${id}`
        if (current.length === 0 || Number(current[0]!.writer_epoch) !== epoch) return false
        yield* insertRows(rows)
        return true
      }))
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
    const settle = (id: string, epoch: number, rows: ReadonlyArray<Row>): Effect.Effect<Settled> =>
      transaction(Effect.gen(function*() {
        const bumped = yield* sql<
          { writer_epoch: number }
        >`UPDATE ${sessionsTable} SET writer_epoch = writer_epoch + 1 WHERE id = ${id} AND writer_epoch = ${epoch} RETURNING writer_epoch`
        if (bumped.length === 0) return { _tag: "Fenced" } as const
        const next = Number(bumped[0]!.writer_epoch)
        const found = yield* sql<
          { seq: number; event: string }
        >`SELECT seq, event FROM ${eventsTable} WHERE session_id = ${id} AND seq >= ${rows[0]!.seq} ORDER BY seq`
        if (found.length === 0) return { _tag: "NotCommitted", epoch: next } as const
        const same = found.length === rows.length &&
          found.every((row, i) => Number(row.seq) === rows[i]!.seq && row.event === rows[i]!.event)
        return same
          ? { _tag: "Committed", epoch: next } as const
          : { _tag: "Unknown", cause: new Error(`the rows from seq ${rows[0]!.seq} are not this append's`) } as const
      })).pipe(
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

    const attach = (header: SessionHeader, events: Array<SessionEvent>, takenEpoch: number): SessionLog => {
      const id = header.id
      let logClosed = false
      /** This log's writer epoch: the take's, then the re-take of each settled failure (`settle`). */
      let epoch = takenEpoch
      let fenced: SessionFenced | undefined
      /** Set when a failed append could not be settled: the log refuses appends; `open` takes the session again. */
      let broken: SessionStoreError | undefined
      /** Appends queued for the next commit, in call order. */
      const queue: Array<Pending> = []
      /** Whether a commit is running or led: appends arriving now wait for the next one. */
      let committing = false
      /** `close` calls waiting for the running commit to end. */
      const idle: Array<() => void> = []
      const refusal = (): SessionWriteError | undefined =>
        fenced ?? broken ?? (closed || logClosed ? Store.storeError(`session "${id}" is closed`, id) : undefined)
      /**
       * Commits `batch` in one statement (group commit, §3.3): each append's events
       * are adjacent and in call order; an append whose events cannot be encoded fails alone; a
       * failed insert fails them all and changes nothing in memory.
       */
      const flush = (batch: ReadonlyArray<Pending>): Effect.Effect<void> => {
        const refused = refusal()
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
        return fencedInsert(id, epoch, rows).pipe(
          Effect.matchEffect({
            onFailure: (error) => {
              const failure = failed(`cannot append to session "${id}"`, id)(error)
              // SQLite runs in this process: a failed statement was rolled back, its outcome known.
              if (!isPg) return Effect.sync(() => fail(failure))
              return Effect.flatMap(settle(id, epoch, rows), (settled): Effect.Effect<void> => {
                switch (settled._tag) {
                  case "Committed":
                    epoch = settled.epoch
                    epochs.set(log, epoch)
                    return Effect.sync(succeed)
                  case "NotCommitted":
                    epoch = settled.epoch
                    epochs.set(log, epoch)
                    return Effect.sync(() => fail(failure))
                  case "Fenced":
                    return fence()
                  case "Unknown":
                    return Effect.sync(() => {
                      broken = Store.brokenError(
                        `session "${id}" is broken: an append failed and whether it was committed could not be ` +
                          `found out (open the session again)`,
                        id,
                        error
                      )
                      staleLogs.add(log)
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
          return Effect.map(epochOf(id), (current) => {
            fenced = new SessionFenced({
              message: `session "${id}" was taken over by another writer (this writer's epoch is ${epoch}` +
                `${current === undefined ? "" : `, the session's ${current}`}): nothing was appended`,
              sessionId: id,
              epoch,
              current
            })
            staleLogs.add(log)
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
      const lead = (leader: Pending): Effect.Effect<ReadonlyArray<SessionEvent>, SessionWriteError> =>
        Effect.zipRight(
          Effect.yieldNow(),
          Effect.suspend(() => {
            const batch = queue.splice(0)
            return Effect.suspend(() =>
              Effect.map(flush(batch), () => {
                for (const p of batch) if (p !== leader) p.wake?.(p.result!)
                const next = queue[0]
                if (next !== undefined) {
                  next.lead = true
                  next.wake?.(lead(next))
                } else {
                  committing = false
                  for (const resume of idle.splice(0)) resume()
                }
              })
            ).pipe(Effect.flatMap(() => leader.result!))
          })
        )
      const log: SessionLog = {
        id,
        header,
        // Uninterruptible: an insert the database committed is always recorded in memory too
        // (an interrupted wait on an asynchronous client would lose it, and every later append
        // would then fail on the seq key).
        append: (drafts) =>
          drafts.length === 0
            ? Store.EMPTY
            : Effect.uninterruptible(Effect.clockWith((clock) =>
              Effect.suspend(() => {
                const refused = refusal()
                if (refused !== undefined) return Effect.fail(refused)
                const pending: Pending = {
                  drafts,
                  time: clock.unsafeCurrentTimeMillis(),
                  result: undefined,
                  lead: false,
                  wake: undefined
                }
                queue.push(pending)
                if (!committing) {
                  committing = true
                  return lead(pending)
                }
                return Effect.async<ReadonlyArray<SessionEvent>, SessionWriteError>((resume) => {
                  if (pending.result !== undefined) resume(pending.result)
                  else if (pending.lead) resume(lead(pending))
                  else pending.wake = resume
                })
              })
            )),
        events: () => events,
        close: Effect.suspend(() => {
          if (logClosed) return Effect.void
          logClosed = true
          if (openLogs.get(id) === log) openLogs.delete(id)
          // After the commit that is running: its row stays ours until it is done.
          const released = release(id)
          return committing
            ? Effect.zipRight(Effect.async<void>((resume) => void idle.push(() => resume(Effect.void))), released)
            : released
        })
      }
      openLogs.set(id, log)
      epochs.set(log, epoch)
      return log
    }

    const readRows = Effect.fnUntraced(function*(id: SessionId) {
      const readFailed = failed(`cannot read session "${id}"`, id)
      const headers = yield* Effect.mapError(
        sql<{ header: string }>`SELECT header FROM ${sessionsTable} WHERE id = ${id}`,
        readFailed
      )
      if (headers.length === 0) return yield* Effect.fail(Store.notFound(id))
      const rows = yield* Effect.mapError(
        sql<{ seq: number; event: string }>`SELECT seq, event FROM ${eventsTable} WHERE session_id = ${id} ORDER BY seq`,
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

    const create = Effect.fnUntraced(function*(createOptions: CreateOptions | undefined) {
      const header = yield* Store.newHeader(createOptions)
      const id = header.id
      if (!Store.isSessionId(id)) return yield* Effect.fail(Store.invalidId(id))
      if (closed) return yield* Effect.fail(Store.storeError("the store is closed", id))
      const createFailed = failed(`cannot create session "${id}"`, id)
      const existing = yield* Effect.mapError(sql<{ id: string }>`SELECT id FROM ${sessionsTable} WHERE id = ${id}`, createFailed)
      if (existing.length > 0 || openLogs.has(id)) return yield* Effect.fail(Store.alreadyExists(id))
      // (A take with a header inserts the session row: it never finds no session.)
      const epoch = yield* Effect.catchTag(take(id, encodeHeader(header).slice(0, -1)), "SessionNotFound", Effect.die)
      return attach(header, [], epoch)
    })

    const open = Effect.fnUntraced(function*(id: SessionId) {
      // `exclusive`: one log per session in this store (unless a takeover fenced it). `takeover`:
      // every open takes the session again and reads it afresh (another runner may have
      // written it meanwhile); a log handed out before is fenced by the new epoch.
      const already = openLogs.get(id)
      if (already !== undefined && !takeover && !staleLogs.has(already)) return already
      if (!Store.isSessionId(id)) return yield* Effect.fail(Store.notFound(id))
      if (closed) return yield* Effect.fail(Store.storeError("the store is closed", id))
      const epoch = yield* take(id, undefined)
      const contents = yield* Effect.tapError(readRows(id), () => release(id))
      return attach(contents.header, contents.events as Array<SessionEvent>, epoch)
    })

    const read = (id: SessionId): Effect.Effect<LogContents, SessionStoreError | SessionLogError | SessionNotFound> =>
      Effect.suspend(() => {
        // A log this store writes is read from memory while its epoch is still the session's;
        // one that a takeover fenced (or has taken without its knowing yet: a paused process)
        // is stale, so its session is read from the database like any other.
        const already = openLogs.get(id)
        if (already === undefined || staleLogs.has(already)) {
          return Store.isSessionId(id) ? readRows(id) : Effect.fail(Store.notFound(id))
        }
        return Effect.flatMap(epochOf(id), (current) =>
          current === epochs.get(already)
            ? Effect.succeed({ header: already.header, events: already.events().slice(), warnings: [] })
            : readRows(id))
      })

    const list = Effect.mapError(
      Effect.map(sql<{ id: string }>`SELECT id FROM ${sessionsTable} ORDER BY id`, (rows) => rows.map((r) => r.id)),
      failed("cannot list the sessions", undefined)
    )

    return SessionStore.of({
      create: (createOptions) => Effect.withSpan(storeLock.withPermits(1)(create(createOptions)), "SessionStore.create"),
      open: (id) => Effect.withSpan(storeLock.withPermits(1)(open(id)), "SessionStore.open"),
      read: (id) => Effect.withSpan(read(id), "SessionStore.read"),
      list: Effect.withSpan(list, "SessionStore.list")
    })
  })

/**
 * The SQL store as a layer on the `@effect/sql` `SqlClient` you provide (SQLite, PostgreSQL, …;
 * §3.3). Scoped: writer rows are released with the layer.
 *
 * @example
 * ```ts
 * import { SqliteClient } from "@effect/sql-sqlite-node"
 * import { Layer } from "effect"
 * import * as SqlSessionStore from "effect-agent-loop/sql"
 *
 * const store = SqlSessionStore.layer({ tablePrefix: "chat_" }).pipe(
 *   Layer.provide(SqliteClient.layer({ filename: "sessions.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: SqlOptions = {}): Layer.Layer<SessionStore, SessionStoreError, SqlClient.SqlClient> =>
  Layer.scoped(SessionStore, make(options))

/**
 * Options of `layerSqlite`. `filename`: the database file (created when missing; `":memory:"`
 * for a private in-memory database). `synchronous`: SQLite's `PRAGMA synchronous` in WAL mode:
 * `"full"` (default) syncs the WAL at every commit, so an append that returned survives power
 * loss; `"normal"` syncs at checkpoints only, so it survives a crash of the process (SIGKILL) but
 * not of the machine. `tablePrefix` as for `make`.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteOptions extends SqlOptions {
  readonly filename: string
  readonly synchronous?: "full" | "normal" | undefined
}

/**
 * The SQL store on SQLite (`@effect/sql-sqlite-node`, i.e. better-sqlite3, in WAL mode): every
 * session in one database file (§3.3). The driver is an optional peer dependency,
 * loaded when the layer is built: install `@effect/sql-sqlite-node` (and `@effect/sql`,
 * `@effect/experimental`). Fails with `SessionStoreError` when the driver cannot be loaded or
 * the file is not a usable database. Scoped: the database closes with the layer.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, Model, Offline } from "effect-agent-loop"
 * import * as SqlSessionStore from "effect-agent-loop/sql"
 *
 * const store = SqlSessionStore.layerSqlite({ filename: "sessions.db", synchronous: "normal" })
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const agent = yield* Agent.make()
 *   yield* agent.followup("hello")
 *   yield* agent.awaitIdle
 * }))
 * Effect.runPromise(program.pipe(Effect.provide(Layer.merge(store, Model.layer(Offline.make())))))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlite = (options: SqliteOptions): Layer.Layer<SessionStore, SessionStoreError> =>
  Layer.scoped(
    SessionStore,
    Effect.gen(function*() {
      const cannotOpen = (cause: unknown) =>
        Store.storeError(`cannot open the SQLite database ${options.filename}`, undefined, cause)
      const { SqliteClient } = yield* loadDriver(
        () => import("@effect/sql-sqlite-node"),
        "layerSqlite",
        "@effect/sql-sqlite-node@0.53.0",
        cannotOpen
      )
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
      return yield* Effect.provideService(make(options), SqlClient.SqlClient, client)
    })
  )

/**
 * Options of `layerPg`: `url` of the PostgreSQL database (`postgres://user@host:port/db`;
 * a `Redacted` keeps a password out of logs), `maxConnections` of its pool (default 10), and
 * the SQL store's `tablePrefix` and `writers`.
 *
 * @since 0.1.0
 * @category models
 */
export interface PgOptions extends SqlOptions {
  readonly url: string | Redacted.Redacted
  readonly maxConnections?: number | undefined
}

/**
 * The SQL store on PostgreSQL (`@effect/sql-pg`, i.e. `pg`): every session in the database's
 * tables (§3.3). An append is one statement (a transaction above 50,000 events) that
 * checks the writer epoch under a `FOR SHARE` lock of the session row and inserts the events
 * (all or none): a writer fenced by a takeover writes nothing and fails with `SessionFenced`.
 * Concurrent appends to one session are committed together (group commit). The driver is an
 * optional peer dependency, loaded when the layer is built: install `@effect/sql-pg` (and
 * `@effect/sql`, `@effect/experimental`). Fails with `SessionStoreError` when the driver cannot
 * be loaded or the database cannot be reached. Scoped: the pool closes with the layer.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, Model, Offline } from "effect-agent-loop"
 * import * as SqlSessionStore from "effect-agent-loop/sql"
 *
 * const store = SqlSessionStore.layerPg({ url: "postgres://agents@127.0.0.1:5432/agents" })
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const agent = yield* Agent.make({ sessionId: "s1" })
 *   yield* agent.followup("hello")
 *   yield* agent.awaitIdle
 * }))
 * Effect.runPromise(program.pipe(Effect.provide(Layer.merge(store, Model.layer(Offline.make())))))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPg = (options: PgOptions): Layer.Layer<SessionStore, SessionStoreError> =>
  Layer.scoped(SessionStore, makePg(options))

/**
 * The PostgreSQL store as an effect (what `layerPg` builds), for a program that builds several
 * stores or needs the client too: `makePg` gives the store and keeps the pool open in the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makePg = (options: PgOptions): Effect.Effect<SessionStoreService, SessionStoreError, Scope.Scope> =>
  Effect.gen(function*() {
    const url = typeof options.url === "string" ? options.url : Redacted.value(options.url)
    const where = pgWhere(url)
    const cannotOpen = (cause: unknown) => Store.storeError(`cannot open the PostgreSQL database ${where}`, undefined, cause)
    const { PgClient } = yield* loadDriver(() => import("@effect/sql-pg"), "layerPg", "@effect/sql-pg@0.53.0", cannotOpen)
    const { Reactivity } = yield* Effect.tryPromise({ try: () => import("@effect/experimental"), catch: cannotOpen })
    const client = yield* PgClient.make({
      url: Redacted.make(url),
      maxConnections: options.maxConnections ?? 10,
      connectTimeout: "10 seconds",
      // The store reads and writes its own column names; no JSON parsing of text columns.
      transformJson: false
    }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.mapError(cannotOpen),
      Effect.catchAllDefect((defect) => Effect.fail(cannotOpen(defect)))
    )
    return yield* Effect.provideService(make(options), SqlClient.SqlClient, client)
  })
