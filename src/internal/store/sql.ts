/**
 * What the SQL store (`SqlSessionStore`, §3.3) stands on: its tables for a prefix, the
 * `@effect/sql` `Migrator` migrations that create them (or adopt tables of these names made
 * before the store had migrations, checking their columns), and the loading of a driver, an
 * optional peer dependency, on first use.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { SessionStoreError } from "../../SessionLog.js"
import * as Store from "./common.js"

/** The store's tables for a prefix. */
export const tablesOf = (prefix: string) => ({
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
    }),
    // The writer epoch, the fencing token of a session (§3.3): every take of the
    // session increments it; every append checks it in its own statement or transaction.
    "2_add_writer_epoch": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`ALTER TABLE ${sql(tables.sessions)} ADD COLUMN writer_epoch INTEGER NOT NULL DEFAULT 0`
    })
  })

/**
 * Runs the migrations; a failure is a `SessionStoreError` (the Migrator reports a failed migration
 * as a defect). On PostgreSQL (§20) they run in one transaction whose first statement takes an
 * advisory lock named after the migrations table, so that stores opened at once on a fresh
 * database migrate one after another (the Migrator's `CREATE TABLE` of its table, run by two at
 * once, failed one: `relation "…migrations" already exists`, or a duplicate `pg_type` key). The
 * lock, the Migrator (its own transaction becomes a savepoint) and the migrations use the
 * transaction's one connection, so a pool of one is enough; the lock goes with the commit or the
 * rollback. Its key is a pair of integers, apart from the single-integer key of `AgentRunner`'s
 * lock, which a runner holds while it opens its store (never the other way round). Under the lock
 * the migrations table is made first, as the Migrator makes it: its probe (`::regclass`) fails on
 * a fresh database, and a failed statement aborts the transaction.
 */
export const migrate = (
  sql: SqlClient.SqlClient,
  tables: ReturnType<typeof tablesOf>
): Effect.Effect<void, SessionStoreError> => {
  const run = Migrator.make({})({ loader: migrations(tables), table: tables.migrations })
  return sql.onDialectOrElse({
    pg: () =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT pg_advisory_xact_lock(hashtext('effect-agent-loop/session-store-migrations'), hashtext(${tables.migrations}))`
        yield* sql`CREATE TABLE IF NOT EXISTS ${sql(tables.migrations)} (
  migration_id integer primary key,
  created_at timestamp with time zone not null default now(),
  name text not null
)`
        return yield* run
      })),
    orElse: () => run
  }).pipe(
    Effect.provideService(SqlClient.SqlClient, sql),
    Effect.catchAllDefect((defect) => Effect.fail(defect)),
    Effect.mapError((error) => {
      const inner = (error as { readonly cause?: unknown }).cause
      return inner instanceof SessionStoreError ? inner : Store.storeError("cannot create the session tables", undefined, error)
    }),
    Effect.asVoid
  )
}

/**
 * Loads a driver (an optional peer dependency) on first use, so that the other stores never load
 * it; a driver that is not installed fails with the package and version to install.
 */
export const loadDriver = <A>(
  load: () => Promise<A>,
  layerName: string,
  pkg: string,
  cannotOpen: (cause: unknown) => SessionStoreError
): Effect.Effect<A, SessionStoreError> =>
  Effect.tryPromise({
    try: load,
    catch: (cause) =>
      (cause as { readonly code?: unknown }).code === "ERR_MODULE_NOT_FOUND"
        ? Store.storeError(
          `SqlSessionStore.${layerName} needs ${
            pkg.slice(0, pkg.lastIndexOf("@"))
          } (an optional peer dependency of effect-agent-loop), ` +
            `which is not installed: npm install ${pkg}`,
          undefined,
          cause
        )
        : cannotOpen(cause)
  })
