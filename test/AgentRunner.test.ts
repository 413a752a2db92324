/**
 * `AgentRunner` on a real PostgreSQL, in one process: what starting a runner and a client-only
 * process asks of the server. A fresh database per test; the server's log is read where
 * `scripts/pg-server.sh` writes it (`server.log` beside the data directory), or the file of the
 * server's logging collector.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import * as NodeFs from "node:fs"
import * as Path from "node:path"
import * as AgentRunner from "../src/cluster/AgentRunner.js"
import * as Model from "../src/Model.js"
import * as Offline from "../src/providers/Offline.js"
import { freePort } from "./utils/cluster.js"
import { createDatabase, describePg, dropDatabase } from "./utils/pg.js"

/** The path of the server's log file, as the server says (its collector's file, else `server.log` beside its data). */
const serverLogPath = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ file: string | null; data: string }>`SELECT pg_current_logfile() AS file, current_setting('data_directory') AS data`,
    ([row]) =>
      row!.file === null
        ? Path.join(Path.dirname(row!.data), "server.log")
        : Path.isAbsolute(row!.file)
        ? row!.file
        : Path.join(row!.data, row!.file)
  )

describePg("AgentRunner on PostgreSQL: the server's log", () => {
  it.live(
    "starting a runner and a client-only process logs no ERROR about the cluster's old tables (dropped where they are)",
    () =>
      Effect.gen(function*() {
        const url = yield* Effect.acquireRelease(Effect.sync(createDatabase), (url) => Effect.sync(() => dropDatabase(url)))
        const sql = Context.get(
          yield* Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })),
          SqlClient.SqlClient
        )
        const logPath = yield* Effect.orDie(serverLogPath(sql))
        expect(NodeFs.existsSync(logPath), `the server's log at ${logPath}`).toBe(true)
        // A cluster prefix of this test's own: other processes on the server log their own lines.
        const prefix = `c${randomUUID().replaceAll("-", "").slice(0, 12)}`
        const start = NodeFs.statSync(logPath).size
        const runner = AgentRunner.layer({ pg: url, host: "127.0.0.1", port: yield* freePort, clusterPrefix: prefix }).pipe(
          Layer.provide(Model.layer(Offline.make()))
        )
        // A table an old release of the cluster left: the storage drops it on start (its probe still runs when it is there).
        yield* Effect.orDie(sql`CREATE TABLE ${sql(`${prefix}_shards`)} (shard_id TEXT)`)
        // Started (its tables made), stopped, started again; a client-only process.
        yield* Effect.scoped(Layer.build(runner))
        expect(yield* Effect.orDie(sql`SELECT to_regclass(${`${prefix}_shards`}) AS t`)).toEqual([{ t: null }])
        yield* Effect.scoped(Layer.build(runner))
        yield* Effect.scoped(Layer.build(AgentRunner.layerClient({ pg: url, clusterPrefix: prefix })))
        // A statement that fails, which the server logs before it answers: the log is written up to here.
        const control = `${prefix}_control`
        expect(yield* Effect.flip(sql`SELECT * FROM ${sql(control)}`)).toMatchObject({ _tag: "SqlError" })
        const logged = NodeFs.readFileSync(logPath).subarray(start).toString("utf8")
        expect(logged).toContain(`relation "${control}" does not exist`)
        expect(logged.split("\n").filter((line) => line.includes(`${prefix}_shards`))).toEqual([])
      }).pipe(Effect.scoped),
    60_000
  )
})
