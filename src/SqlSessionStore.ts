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
import { Effect, Layer, Redacted, type Scope } from "effect"
import { pgWhere } from "./internal/pgUrl.js"
import * as Store from "./internal/store/common.js"
import { loadDriver, migrate, tablesOf } from "./internal/store/sql.js"
import { closeStore, create, headerText, list, makeStore, open, probe, read } from "./internal/store/sqlStore.js"
import { openStore, thisWriter } from "./internal/store/writer.js"
import type { SessionStoreError } from "./SessionLog.js"
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
    yield* migrate(sql, tables)
    const self = openStore()
    yield* Effect.addFinalizer(() => Effect.sync(self.close))
    const store = makeStore(sql, tables, JSON.stringify({ ...thisWriter(), store: self.id }), options.writers === "takeover")
    yield* Effect.addFinalizer(() => closeStore(store))
    const storeLock = yield* Effect.makeSemaphore(1)
    const listed = list(store)
    const service: SessionStoreService & Store.WithHeaderText & Store.WithProbe = {
      create: (createOptions) => Effect.withSpan(storeLock.withPermits(1)(create(store, createOptions)), "SessionStore.create"),
      open: (id) => Effect.withSpan(storeLock.withPermits(1)(open(store, id)), "SessionStore.open"),
      read: (id) => Effect.withSpan(read(store, id), "SessionStore.read"),
      list: Effect.withSpan(listed, "SessionStore.list"),
      // Internal: a header-only read (the cluster entity's check for a child session, §21 rule 9).
      [Store.HeaderTextId]: (id) => headerText(store, id),
      // Internal: every session's last seq and writer row (agent-loop inspect, §29).
      [Store.ProbeId]: probe(store)
    }
    return SessionStore.of(service)
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
