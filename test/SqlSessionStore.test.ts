/**
 * The SQL store's own rules (`SqlSessionStore`, §25): its schema is created by
 * `@effect/sql`'s `Migrator` (recorded in `<prefix>migrations`, run once), table names take a
 * prefix, `layer` runs on a `SqlClient` the user provides, tables of an earlier version are
 * adopted. The behaviour every store shares is in StoreContract.test.ts.
 */
import { Reactivity } from "@effect/experimental"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Layer } from "effect"
import * as NodeFs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as SessionStore from "../src/SessionStore.js"
import * as SqlSessionStore from "../src/SqlSessionStore.js"
import { tmpDir } from "./utils/tmp.js"

const tables = (filename: string): Array<string> => {
  const db = new Database(filename, { readonly: true })
  try {
    return (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as Array<{ name: string }>)
      .map((r) => r.name)
  } finally {
    db.close()
  }
}

const rows = (filename: string, query: string): Array<unknown> => {
  const db = new Database(filename, { readonly: true })
  try {
    return db.prepare(query).all()
  } finally {
    db.close()
  }
}

/** A user's own SQLite client (what `SqlSessionStore.layer` needs). */
const client = (filename: string) => SqliteClient.layer({ filename }).pipe(Layer.provide(Reactivity.layer))

const createAndList = (id: string) =>
  Effect.gen(function*() {
    const store = yield* SessionStore.SessionStore
    const log = yield* store.create({ id, createdAt: 1 })
    yield* log.append([{ type: "plugin/note", data: { id } }])
    return yield* store.list
  })

describe("SqlSessionStore", () => {
  it.scoped("the schema is created by the Migrator, once: <prefix>migrations holds migrations 1 and 2", () =>
    Effect.gen(function*() {
      const filename = Path.join(yield* tmpDir, "s.db")
      for (let i = 0; i < 2; i++) {
        yield* Effect.scoped(Layer.build(SqlSessionStore.layerSqlite({ filename })))
      }
      expect(tables(filename)).toEqual([
        "agent_loop_events",
        "agent_loop_migrations",
        "agent_loop_sessions",
        "agent_loop_writers"
      ])
      expect(rows(filename, "SELECT migration_id, name FROM agent_loop_migrations")).toEqual([
        { migration_id: 1, name: "create_session_tables" },
        { migration_id: 2, name: "add_writer_epoch" }
      ])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("layer runs on the SqlClient the user provides; tablePrefix keeps two stores apart in one database", () =>
    Effect.gen(function*() {
      const filename = Path.join(yield* tmpDir, "shared.db")
      const chat = yield* createAndList("c1").pipe(
        Effect.scoped,
        Effect.provide(SqlSessionStore.layer({ tablePrefix: "chat_" }).pipe(Layer.provide(client(filename))))
      )
      const jobs = yield* createAndList("j1").pipe(
        Effect.scoped,
        Effect.provide(SqlSessionStore.layer({ tablePrefix: "jobs_" }).pipe(Layer.provide(client(filename))))
      )
      expect([chat, jobs]).toEqual([["c1"], ["j1"]])
      expect(tables(filename)).toEqual([
        "chat_events",
        "chat_migrations",
        "chat_sessions",
        "chat_writers",
        "jobs_events",
        "jobs_migrations",
        "jobs_sessions",
        "jobs_writers"
      ])
      expect(rows(filename, "SELECT session_id, seq, event FROM chat_events")).toEqual([
        {
          session_id: "c1",
          seq: 0,
          event: expect.stringMatching(/^\{"type":"plugin\/note","seq":0,"time":\d+,"data":\{"id":"c1"\}\}$/)
        }
      ])
      // Writer rows are released when each store closes.
      expect(rows(filename, "SELECT * FROM chat_writers")).toEqual([])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("a tablePrefix that is not a plain identifier is a SessionStoreError before anything is created", () =>
    Effect.gen(function*() {
      const filename = Path.join(yield* tmpDir, "bad.db")
      const error = yield* Effect.flip(
        Effect.scoped(Layer.build(SqlSessionStore.layerSqlite({ filename, tablePrefix: "x; DROP TABLE y; --" })))
      )
      expect([error._tag, error.message]).toEqual([
        "SessionStoreError",
        "invalid tablePrefix \"x; DROP TABLE y; --\": letters, digits and _ only"
      ])
      expect(tables(filename)).toEqual([])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("a writer row of an earlier process with this pid and host is taken over; a live one is refused naming the row", () =>
    Effect.gen(function*() {
      const filename = Path.join(yield* tmpDir, "w.db")
      yield* createAndList("w").pipe(Effect.scoped, Effect.provide(SqlSessionStore.layerSqlite({ filename })))
      const setWriter = (writer: unknown) => {
        const db = new Database(filename)
        db.prepare("INSERT OR REPLACE INTO agent_loop_writers VALUES (?, ?)").run("w", JSON.stringify(writer))
        db.close()
      }
      setWriter({ pid: process.pid, host: Os.hostname(), instance: "an-earlier-process" })
      const events = yield* Effect.flatMap(SessionStore.SessionStore, (s) => s.open("w")).pipe(
        Effect.map((log) => log.events().map((e) => e.type)),
        Effect.scoped,
        Effect.provide(SqlSessionStore.layerSqlite({ filename }))
      )
      expect(events).toEqual(["plugin/note"])
      setWriter({ pid: process.ppid, host: Os.hostname() })
      const refused = yield* Effect.flip(
        Effect.flatMap(SessionStore.SessionStore, (s) => s.open("w")).pipe(
          Effect.scoped,
          Effect.provide(SqlSessionStore.layerSqlite({ filename }))
        )
      )
      expect(refused.message).toBe(
        `session "w" is open for writing by process ${process.ppid} (one writer per session; if that process is gone, delete its row of agent_loop_writers)`
      )
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("open takes the writer row before it reads the events: a live writer's row refuses it even when the rows do not decode", () =>
    Effect.gen(function*() {
      const filename = Path.join(yield* tmpDir, "order.db")
      yield* createAndList("o").pipe(Effect.scoped, Effect.provide(SqlSessionStore.layerSqlite({ filename })))
      const db = new Database(filename)
      db.prepare("UPDATE agent_loop_events SET event = ? WHERE session_id = ?").run("not json", "o")
      db.prepare("INSERT OR REPLACE INTO agent_loop_writers VALUES (?, ?)").run(
        "o",
        JSON.stringify({ pid: process.ppid, host: Os.hostname() })
      )
      db.close()
      const open = Effect.flatMap(SessionStore.SessionStore, (s) => s.open("o")).pipe(
        Effect.scoped,
        Effect.provide(SqlSessionStore.layerSqlite({ filename }))
      )
      const refused = yield* Effect.flip(open)
      expect([refused._tag, refused.message]).toEqual([
        "SessionStoreError",
        `session "o" is open for writing by process ${process.ppid} (one writer per session; if that process is gone, delete its row of agent_loop_writers)`
      ])
      expect(rows(filename, "SELECT session_id FROM agent_loop_writers")).toEqual([{ session_id: "o" }])
      // Without the row: the events are read and the bad one named; the row is given back.
      const db2 = new Database(filename)
      db2.prepare("DELETE FROM agent_loop_writers").run()
      db2.close()
      expect((yield* Effect.flip(open))._tag).toBe("SessionLogError")
      expect(rows(filename, "SELECT session_id FROM agent_loop_writers")).toEqual([])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("tables made before the store had migrations are adopted with their sessions", () =>
    Effect.gen(function*() {
      const filename = Path.join(yield* tmpDir, "old.db")
      const db = new Database(filename)
      db.exec("CREATE TABLE agent_loop_sessions (id TEXT PRIMARY KEY NOT NULL, header TEXT NOT NULL)")
      db.exec(
        "CREATE TABLE agent_loop_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, PRIMARY KEY (session_id, seq))"
      )
      db.exec("CREATE TABLE agent_loop_writers (session_id TEXT PRIMARY KEY NOT NULL, writer TEXT NOT NULL)")
      db.prepare("INSERT INTO agent_loop_sessions VALUES (?, ?)").run(
        "old",
        JSON.stringify({ type: "session", format: "effect-agent-loop", version: 1, id: "old", createdAt: 5 })
      )
      db.prepare("INSERT INTO agent_loop_events VALUES (?, ?, ?)").run(
        "old",
        0,
        JSON.stringify({ type: "plugin/note", seq: 0, time: 7, data: { kept: true } })
      )
      db.close()
      const contents = yield* Effect.flatMap(SessionStore.SessionStore, (s) => s.read("old")).pipe(
        Effect.scoped,
        Effect.provide(SqlSessionStore.layerSqlite({ filename }))
      )
      expect(contents.events).toEqual([{ type: "plugin/note", seq: 0, time: 7, data: { kept: true } }])
      expect(rows(filename, "SELECT migration_id FROM agent_loop_migrations")).toEqual([{ migration_id: 1 }, { migration_id: 2 }])
      expect(NodeFs.existsSync(filename)).toBe(true)
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
