/**
 * The stores `agent-loop inspect` reads (§29): a JSONL directory (`<id>.jsonl` files: ours, and
 * DSH v0 logs, whose file name is their id here, as for `pending`), a SQLite database file, or a
 * PostgreSQL database. Read-only: a log is read as `SessionStore.readFile` or the SQL store's
 * `read` read it, no writer is taken, so a running agent or runner keeps its sessions. Each
 * source has a cheap probe (file sizes and times, or the SQL store's last seqs) that tells which
 * sessions changed, and whether a live writer holds each one.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Context, Effect, Layer } from "effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { codeOf, fileErrorText } from "../../internal/fsErrors.js"
import { pgWhere } from "../../internal/pgUrl.js"
import { isSessionId, type Probe, ProbeId, type WithProbe } from "../../internal/store/common.js"
import { isLiveWriter, readWriter } from "../../internal/store/writer.js"
import type { LogContents, SessionStoreError } from "../../SessionLog.js"
import * as SessionStore from "../../SessionStore.js"
import type * as Api from "./api.js"

/** Why a source cannot be opened, or a log read: one line for the user. */
export class SourceError extends Error {}

/** A session's change token and whether a live writer holds it. */
export interface SessionProbe {
  readonly token: string
  readonly writerLive: boolean
}

/** What a probe of the whole store found: each session's probe, and the files it skipped. */
export interface Probed {
  /** By id, the ids sorted. */
  readonly sessions: ReadonlyMap<string, SessionProbe>
  /** Files of a JSONL directory that are not read: a name that is no session id, a symbolic link. */
  readonly skipped: ReadonlyArray<{ readonly name: string; readonly message: string }>
}

/** A store as the inspector reads it. */
export interface Source {
  readonly kind: Api.StoreInfo["kind"]
  readonly where: string
  /** Every session's probe. */
  readonly probe: Effect.Effect<Probed, SourceError>
  /** One session's probe (undefined: no such session). */
  readonly probeOne: (id: string) => Effect.Effect<SessionProbe | undefined, SourceError>
  /** A session's log; `undefined` when the store has no such session. */
  readonly read: (id: string) => Effect.Effect<LogContents | undefined, SourceError>
  /** How often the probe is asked while a page follows the store, in ms. */
  readonly probeEveryMs: number
}

const writerLive = (text: string | undefined): boolean => {
  if (text === undefined) return false
  const writer = readWriter(text)
  return writer !== undefined && isLiveWriter(writer)
}

/**
 * A JSONL directory. A file's token is its size and modification time, and its lock file's
 * presence; a live writer is the one its `<id>.jsonl.lock` names (§3.3).
 */
export const jsonlDirectory = (store: string): Effect.Effect<Source, SourceError> =>
  Effect.try({
    try: () => {
      const directory = NodePath.resolve(store)
      if (!NodeFs.statSync(directory).isDirectory()) throw new SourceError(`--store ${store}: not a directory`)
      /**
       * A file's probe: regular files only. A symbolic link is not followed (it could name a file
       * outside the store), nor is anything else that is not a plain file.
       */
      const probeFile = (name: string): SessionProbe | string => {
        const stats = NodeFs.lstatSync(NodePath.join(directory, name), { throwIfNoEntry: false })
        if (stats === undefined) return "gone"
        if (stats.isSymbolicLink()) return "a symbolic link: not followed (only the store's own files are read)"
        if (!stats.isFile()) return "not a regular file"
        let lock: string | undefined
        try {
          lock = NodeFs.readFileSync(NodePath.join(directory, `${name}.lock`), "utf8")
        } catch {
          lock = undefined
        }
        return { token: `${stats.size}:${stats.mtimeMs}:${lock ?? ""}`, writerLive: writerLive(lock) }
      }
      const fail = (e: unknown) => new SourceError(`--store ${store}: cannot read: ${fileErrorText(e, "read")}`)
      const probe = Effect.try({
        try: (): Probed => {
          const names = NodeFs.readdirSync(directory).filter((n) => n.endsWith(".jsonl")).sort()
          const sessions = new Map<string, SessionProbe>()
          const skipped: Array<{ name: string; message: string }> = []
          for (const name of names) {
            const id = name.slice(0, -6)
            if (!isSessionId(id)) {
              skipped.push({ name, message: "the file's name is no session id ([A-Za-z0-9_-][A-Za-z0-9._-]*.jsonl)" })
              continue
            }
            const found = probeFile(name)
            if (typeof found === "string") {
              if (found !== "gone") skipped.push({ name, message: found })
            } else sessions.set(id, found)
          }
          return { sessions, skipped }
        },
        catch: fail
      })
      const probeOne = (id: string) =>
        Effect.try({
          try: () => {
            if (!isSessionId(id)) return undefined
            const found = probeFile(`${id}.jsonl`)
            return typeof found === "string" ? undefined : found
          },
          catch: fail
        })
      const read = (id: string) =>
        !isSessionId(id)
          ? Effect.succeed(undefined)
          : Effect.suspend(() => {
            const file = NodePath.join(directory, `${id}.jsonl`)
            if (!NodeFs.existsSync(file)) return Effect.succeed(undefined)
            return SessionStore.readFile(file).pipe(
              Effect.mapError((e) => new SourceError(e.message)),
              Effect.provide(NodeFileSystem.layer)
            )
          })
      const source: Source = { kind: "jsonl", where: directory, probe, probeOne, read, probeEveryMs: 250 }
      return source
    },
    catch: (e) =>
      e instanceof SourceError
        ? e
        : new SourceError(
          `--store ${store}: cannot read: ${codeOf(e) === "ENOENT" ? "no such directory" : fileErrorText(e, "read")}`
        )
  })

/**
 * A SQL store (SQLite or PostgreSQL) through `SqlSessionStore`, in the caller's scope. A
 * session's token is its last seq and its writers row; a live writer is the one that row names.
 */
export const sqlStore = (
  kind: "sqlite" | "pg",
  location: string,
  tablePrefix: string | undefined
) =>
  Effect.gen(function*() {
    const where = kind === "pg" ? pgWhere(location) : NodePath.resolve(location)
    const flag = `--${kind} ${kind === "pg" ? where : location}`
    // Read-only: a database without every table of the store is refused before the store is
    // built, since building it creates the missing ones (its migrations).
    const prefix = tablePrefix ?? "agent_loop_"
    const tables = ["sessions", "events", "writers", "migrations"].map((t) => `${prefix}${t}`)
    const missing = yield* Effect.tryPromise({
      try: () => kind === "pg" ? pgMissingTables(location, tables) : sqliteMissingTables(location, tables),
      catch: (e) => new SourceError(`${flag}: ${e instanceof Error ? e.message : String(e)}`)
    })
    if (missing.length > 0) {
      return yield* Effect.fail(
        new SourceError(
          `${flag}: no session store in this database (no table ${missing.join(", ")}); inspect creates nothing`
        )
      )
    }
    const Sql = yield* Effect.promise(() => import("../../SqlSessionStore.js"))
    const layer: Layer.Layer<SessionStore.SessionStore, SessionStoreError> = kind === "pg"
      ? Sql.layerPg({ url: location, tablePrefix, maxConnections: 2 })
      : Sql.layerSqlite({ filename: location, tablePrefix })
    const context = yield* Layer.build(layer).pipe(Effect.mapError((e) => new SourceError(`${flag}: ${e.message}`)))
    const store = Context.get(context, SessionStore.SessionStore)
    const probeAll = (store as WithProbe)[ProbeId]!
    const probe = Effect.map(
      Effect.mapError(probeAll, (e) => new SourceError(`${where}: ${e.message}`)),
      (all: ReadonlyMap<string, Probe>): Probed => {
        const sessions = new Map<string, SessionProbe>()
        for (const id of [...all.keys()].sort()) {
          const p = all.get(id)!
          sessions.set(id, { token: `${p.lastSeq}:${p.writer ?? ""}`, writerLive: writerLive(p.writer) })
        }
        return { sessions, skipped: [] }
      }
    )
    const probeOne = (id: string) => Effect.map(probe, (all) => all.sessions.get(id))
    const read = (id: string) =>
      store.read(id).pipe(
        Effect.map((contents): LogContents | undefined => contents),
        Effect.catchTag("SessionNotFound", () => Effect.succeed(undefined)),
        Effect.mapError((e) => new SourceError(e.message))
      )
    const source: Source = { kind, where, probe, probeOne, read, probeEveryMs: 500 }
    return source
  })

/** Which of `tables` a SQLite database file lacks, read with the driver in read-only mode. */
const sqliteMissingTables = async (file: string, tables: ReadonlyArray<string>): Promise<Array<string>> => {
  const { default: Database } = await import("better-sqlite3")
  const db = new Database(file, { readonly: true, fileMustExist: true })
  try {
    const query = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
    return tables.filter((table) => query.get(table) === undefined)
  } finally {
    db.close()
  }
}

/** The little of `pg` the check uses. */
interface PgClient {
  connect(): Promise<void>
  query(text: string, values: ReadonlyArray<unknown>): Promise<{ readonly rows: ReadonlyArray<Record<string, unknown>> }>
  end(): Promise<void>
}

/** Which of `tables` a PostgreSQL database lacks (in its search path), asked on one short connection. */
const pgMissingTables = async (url: string, tables: ReadonlyArray<string>): Promise<Array<string>> => {
  const pg = (await import("pg")).default as { readonly Client: new(options: object) => PgClient }
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 })
  try {
    await client.connect()
    const missing: Array<string> = []
    for (const table of tables) {
      const { rows } = await client.query("SELECT to_regclass($1) IS NOT NULL AS found", [table])
      if (rows[0]?.found !== true) missing.push(table)
    }
    return missing
  } finally {
    await client.end().catch(() => undefined)
  }
}
