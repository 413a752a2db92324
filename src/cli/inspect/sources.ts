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

/** A store as the inspector reads it. */
export interface Source {
  readonly kind: Api.StoreInfo["kind"]
  readonly where: string
  /** Every session's probe, by id (the ids of the store, sorted). */
  readonly probe: Effect.Effect<ReadonlyMap<string, SessionProbe>, SourceError>
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
      const probe = Effect.try({
        try: () => {
          const names = NodeFs.readdirSync(directory).filter((n) => n.endsWith(".jsonl")).sort()
          const out = new Map<string, SessionProbe>()
          for (const name of names) {
            const id = name.slice(0, -6)
            if (!isSessionId(id)) continue
            const stats = NodeFs.statSync(NodePath.join(directory, name), { throwIfNoEntry: false })
            if (stats === undefined || !stats.isFile()) continue
            let lock: string | undefined
            try {
              lock = NodeFs.readFileSync(NodePath.join(directory, `${name}.lock`), "utf8")
            } catch {
              lock = undefined
            }
            out.set(id, { token: `${stats.size}:${stats.mtimeMs}:${lock ?? ""}`, writerLive: writerLive(lock) })
          }
          return out as ReadonlyMap<string, SessionProbe>
        },
        catch: (e) => new SourceError(`--store ${store}: cannot read: ${fileErrorText(e, "read")}`)
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
      const source: Source = { kind: "jsonl", where: directory, probe, read, probeEveryMs: 250 }
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
    const Sql = yield* Effect.promise(() => import("../../SqlSessionStore.js"))
    const layer: Layer.Layer<SessionStore.SessionStore, SessionStoreError> = kind === "pg"
      ? Sql.layerPg({ url: location, tablePrefix, maxConnections: 2 })
      : Sql.layerSqlite({ filename: location, tablePrefix })
    const where = kind === "pg" ? pgWhere(location) : NodePath.resolve(location)
    const context = yield* Layer.build(layer).pipe(
      Effect.mapError((e) => new SourceError(`--${kind} ${kind === "pg" ? where : location}: ${e.message}`))
    )
    const store = Context.get(context, SessionStore.SessionStore)
    const probeAll = (store as WithProbe)[ProbeId]!
    const probe = Effect.map(
      Effect.mapError(probeAll, (e) => new SourceError(`${where}: ${e.message}`)),
      (all: ReadonlyMap<string, Probe>) => {
        const out = new Map<string, SessionProbe>()
        for (const id of [...all.keys()].sort()) {
          const p = all.get(id)!
          out.set(id, { token: `${p.lastSeq}:${p.writer ?? ""}`, writerLive: writerLive(p.writer) })
        }
        return out as ReadonlyMap<string, SessionProbe>
      }
    )
    const read = (id: string) =>
      store.read(id).pipe(
        Effect.map((contents): LogContents | undefined => contents),
        Effect.catchTag("SessionNotFound", () => Effect.succeed(undefined)),
        Effect.mapError((e) => new SourceError(e.message))
      )
    const source: Source = { kind, where, probe, read, probeEveryMs: 500 }
    return source
  })
