/**
 * Session logs in SQL (DESIGN.md §3.3: an append is durable when committed), imported as
 * `effect-agent-loop/sql`: `layer` runs the store on the `@effect/sql` `SqlClient` you provide
 * (SQLite, PostgreSQL, …), `layerSqlite` on SQLite through `@effect/sql-sqlite-node`
 * (better-sqlite3, loaded on first use). Cut as `@effect/cluster` cuts its `MessageStorage` /
 * `SqlMessageStorage`: the service and the file stores are in `SessionStore`, this module adds
 * the SQL implementation, so that a memory or JSONL user never loads `@effect/sql`.
 *
 * Tables (with the default `tablePrefix` `"agent_loop_"`), created by `@effect/sql`'s `Migrator`
 * (its own table: `<prefix>migrations`):
 * - `<prefix>sessions (id TEXT PRIMARY KEY, header TEXT)`: the header line's JSON;
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
 * - An append is one INSERT (a transaction when it holds more than 5,000 events): all of its
 *   events or none, committed when it returns. Appends to one log are serialized by the log.
 * - One writer per session: a row of the writers table is held while a log is open, taken
 *   before `open` reads the events (a live writer's row makes `open`/`create` fail with a
 *   `SessionStoreError` naming it; the row of a dead writer, or of a closed store of this
 *   process that could not delete it, a full disk, is taken over). A second process appending to the same session anyway fails
 *   on the `(session_id, seq)` key (nothing changes in memory), never interleaves.
 * - Reading orders rows by `seq`. A row that is not one line of JSON, a missing or repeated seq,
 *   or invalid event data is a `SessionLogError` naming the session and the seq; its `line` is
 *   the line the event would have in a JSONL file (seq + 2). There is no torn tail: a commit is
 *   atomic.
 * - Session ids follow the JSONL store's rule (`[A-Za-z0-9_-][A-Za-z0-9._-]*`), so every session
 *   can be exported to a file. Logs opened through the store refuse appends once its scope closes.
 * - Portable SQL (`TEXT` keys): SQLite and PostgreSQL; MySQL would need `VARCHAR` keys.
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Layer, type Scope } from "effect"
import { commitDrafts, decodeLog, encodeHeader } from "./internal/logCodec.js"
import * as Store from "./internal/store/common.js"
import { inUseError, isLiveWriter, openStore, readWriter, thisWriter, type Writer } from "./internal/store/writer.js"
import type { EventDraft, SessionEvent, SessionHeader, SessionId } from "./SessionEvent.js"
import type { CreateOptions, LogContents, SessionLog, SessionNotFound } from "./SessionLog.js"
import { SessionLogError, SessionStoreError } from "./SessionLog.js"
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
}

/** The longest string V8 makes (characters): a log's text must fit in one. */
const MAX_TEXT = 0x1fffffe8

/** Rows per INSERT statement (3 parameters each; SQLite allows 32,766 parameters). */
const ROWS_PER_STATEMENT = 5000

const PREFIX = /^[A-Za-z_][A-Za-z0-9_]*$/

/** The store's tables for a prefix. */
const tablesOf = (prefix: string) => ({
  sessions: `${prefix}sessions`,
  events: `${prefix}events`,
  writers: `${prefix}writers`,
  migrations: `${prefix}migrations`
})

/**
 * The migrations of the store's schema (`Migrator.fromRecord`): 1 creates the three tables, or
 * adopts tables of these names made before the store had migrations, checking their columns.
 */
const migrations = (tables: ReturnType<typeof tablesOf>): Migrator.Loader =>
  Migrator.fromRecord({
    "1_create_session_tables": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE IF NOT EXISTS ${sql(tables.sessions)} (id TEXT PRIMARY KEY NOT NULL, header TEXT NOT NULL)`
      yield* sql`CREATE TABLE IF NOT EXISTS ${
        sql(tables.events)
      } (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, PRIMARY KEY (session_id, seq))`
      yield* sql`CREATE TABLE IF NOT EXISTS ${sql(tables.writers)} (session_id TEXT PRIMARY KEY NOT NULL, writer TEXT NOT NULL)`
      // Tables of these names that something else made: refused now, not at the first append.
      for (
        const [table, columns] of [
          [tables.sessions, ["id", "header"]],
          [tables.events, ["session_id", "seq", "event"]],
          [tables.writers, ["session_id", "writer"]]
        ] as const
      ) {
        yield* Effect.mapError(
          sql`SELECT ${sql.literal(columns.join(", "))} FROM ${sql(table)} WHERE 1 = 0`,
          (error) =>
            Store.storeError(
              `the table ${table} exists without the columns (${columns.join(", ")}) this store needs`,
              undefined,
              error
            )
        )
      }
    })
  })

/** Runs the migrations; a failure is a `SessionStoreError` (the Migrator reports a failed migration as a defect). */
const migrate = (sql: SqlClient.SqlClient, tables: ReturnType<typeof tablesOf>): Effect.Effect<void, SessionStoreError> =>
  Migrator.make({})({ loader: migrations(tables), table: tables.migrations }).pipe(
    Effect.provideService(SqlClient.SqlClient, sql),
    Effect.catchAllDefect((defect) => Effect.fail(defect)),
    Effect.mapError((error) => {
      const inner = (error as { readonly cause?: unknown }).cause
      return inner instanceof SessionStoreError ? inner : Store.storeError("cannot create the session tables", undefined, error)
    }),
    Effect.asVoid
  )

/**
 * Builds the SQL store on the `@effect/sql` `SqlClient` in context (DESIGN.md §3.3): runs its
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
    let closed = false
    const self = openStore()
    yield* Effect.addFinalizer(() => Effect.sync(self.close))
    const me = JSON.stringify({ ...thisWriter(), store: self.id })
    // One writer per session: a row of the writers table is held while the log is open here.
    // `open` takes it before it reads the events (what was read before could be stale by the
    // time the row is ours). Taken in one transaction that cannot interleave with another
    // writer's: a stale row is deleted only if it is still the one that was read (compare and
    // delete), and the insert fails on the key if another writer's row is there by then; a
    // writer that lost that race (or SQLite's "database is locked") is reported as in use when
    // a live writer holds the row.
    const holderOf = (
      id: string
    ): Effect.Effect<{ readonly text: string; readonly writer: Writer | undefined } | undefined, SqlError> =>
      Effect.map(sql<{ writer: string }>`SELECT writer FROM ${writersTable} WHERE session_id = ${id}`, (rows) =>
        rows.length === 0 ? undefined : { text: rows[0]!.writer, writer: readWriter(rows[0]!.writer) })
    const lockWriter = (id: string): Effect.Effect<void, SessionStoreError> =>
      sql.withTransaction(Effect.gen(function*() {
        const held = yield* holderOf(id)
        if (held?.writer !== undefined && isLiveWriter(held.writer)) {
          return held.writer
        }
        if (held !== undefined) {
          yield* sql`DELETE FROM ${writersTable} WHERE session_id = ${id} AND writer = ${held.text}`
        }
        yield* sql`INSERT INTO ${writersTable} ${sql.insert({ session_id: id, writer: me })}`
        return undefined
      })).pipe(
        Effect.catchAll((error) =>
          Effect.flatMap(
            Effect.orElseSucceed(holderOf(id), () =>
              undefined),
            (held) =>
              held?.writer !== undefined && isLiveWriter(held.writer)
                ? Effect.succeed(held.writer)
                : Effect.fail(failed(`cannot lock session "${id}"`, id)(error))
          )
        ),
        Effect.flatMap((holder) =>
          holder === undefined ? Effect.void : Effect.fail(inUseError(id, holder, `delete its row of ${tables.writers}`))
        )
      )
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
    const insert = (rows: ReadonlyArray<Row>): Effect.Effect<unknown, SqlError> => {
      if (rows.length <= ROWS_PER_STATEMENT) return sql`INSERT INTO ${eventsTable} ${sql.insert(rows)}`
      const statements: Array<Effect.Effect<unknown, SqlError>> = []
      for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
        statements.push(sql`INSERT INTO ${eventsTable} ${sql.insert(rows.slice(i, i + ROWS_PER_STATEMENT))}`)
      }
      return sql.withTransaction(Effect.all(statements, { discard: true }))
    }

    const attach = (header: SessionHeader, events: Array<SessionEvent>): Effect.Effect<SessionLog> =>
      Effect.map(Effect.makeSemaphore(1), (lock) => {
        const id = header.id
        const commit = (time: number, drafts: ReadonlyArray<EventDraft>) => {
          if (closed) return Effect.fail(Store.storeError(`session "${id}" is closed`, id))
          let committed: ReadonlyArray<SessionEvent>
          let rows: ReadonlyArray<Row>
          try {
            committed = commitDrafts(drafts, events.length, time)
            // Encoding failures (a cycle, a BigInt) are typed errors and change nothing.
            rows = committed.map((event) => ({ session_id: id, seq: event.seq, event: JSON.stringify(event) }))
          } catch (error) {
            return Effect.fail(Store.invalidEvents(id, error))
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
              ? Store.EMPTY
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
      yield* lockWriter(id)
      yield* Effect.mapError(
        sql`INSERT INTO ${sessionsTable} ${sql.insert({ id, header: encodeHeader(header).slice(0, -1) })}`,
        createFailed
      )
      return yield* attach(header, [])
    })

    const open = Effect.fnUntraced(function*(id: SessionId) {
      const already = openLogs.get(id)
      if (already !== undefined) return already
      if (!Store.isSessionId(id)) return yield* Effect.fail(Store.notFound(id))
      if (closed) return yield* Effect.fail(Store.storeError("the store is closed", id))
      yield* lockWriter(id)
      const contents = yield* Effect.tapError(
        readRows(id),
        () => Effect.ignore(sql`DELETE FROM ${writersTable} WHERE session_id = ${id} AND writer = ${me}`)
      )
      return yield* attach(contents.header, contents.events as Array<SessionEvent>)
    })

    const read = (id: SessionId): Effect.Effect<LogContents, SessionStoreError | SessionLogError | SessionNotFound> =>
      Effect.suspend(() => {
        const already = openLogs.get(id)
        if (already !== undefined) {
          return Effect.succeed({ header: already.header, events: already.events().slice(), warnings: [] })
        }
        return Store.isSessionId(id) ? readRows(id) : Effect.fail(Store.notFound(id))
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
 * DESIGN.md §3.3). Scoped: writer rows are released with the layer.
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
 * session in one database file (DESIGN.md §3.3). The driver is an optional peer dependency,
 * loaded when the layer is built: install `@effect/sql-sqlite-node` (and `@effect/sql`,
 * `@effect/experimental`). Fails with `SessionStoreError` when the driver cannot be loaded or
 * the file is not a usable database. Scoped: the database closes with the layer.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, Model } from "effect-agent-loop"
 * import * as SqlSessionStore from "effect-agent-loop/sql"
 *
 * const store = SqlSessionStore.layerSqlite({ filename: "sessions.db", synchronous: "normal" })
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const agent = yield* Agent.make()
 *   yield* agent.followup("hello")
 *   yield* agent.awaitIdle
 * }))
 * Effect.runPromise(program.pipe(Effect.provide(Layer.merge(store, Model.layer(Model.offline())))))
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
      // Loaded on first use, so that the other stores never load the native module. A driver
      // that is not installed (an optional peer dependency) is named with its version.
      const { SqliteClient } = yield* Effect.tryPromise({
        try: () => import("@effect/sql-sqlite-node"),
        catch: (cause) =>
          (cause as { readonly code?: unknown }).code === "ERR_MODULE_NOT_FOUND"
            ? Store.storeError(
              "SqlSessionStore.layerSqlite needs @effect/sql-sqlite-node (an optional peer dependency of effect-agent-loop), " +
                "which is not installed: npm install @effect/sql-sqlite-node@0.53.0",
              undefined,
              cause
            )
            : cannotOpen(cause)
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
      return yield* Effect.provideService(make(options), SqlClient.SqlClient, client)
    })
  )
