// `append` (ours only): events/s of the JSONL store with N concurrent appenders on one session
// log, against a raw baseline measured in the same run: the very bytes our store wrote (read
// back from its file) written again with plain `write(2)`, batched N lines per write, each write
// followed by `fdatasync` (fsync "batch"), or without it (fsync "none"). The baseline is the
// ideal group commit; ours group-commits its appends in rounds (one write and one fdatasync per round).
// With `store: "sqlite"` (`layerSqlite`, WAL, `synchronous` FULL for fsync "batch", NORMAL for
// "none"), the baseline is better-sqlite3 itself: the rows ours committed (read back from its
// database) inserted again with one prepared INSERT per event, each its own commit, on a second
// database with the same settings. SQLite commits one append at a time (no group commit).
// With `store: "pg"` (the job's PostgreSQL database `url`), ours is the store `layerPg` builds
// (`SqlSessionStore.make` on a `PgClient` made with `makePg`'s options: a pool of 10), and the
// baseline is the rows ours committed (same session_id, seq, event text) INSERTed again through
// that same client, one INSERT per event with `appenders` of them in flight, into a table of the
// same shape. Each run has tables of its own (prefix `r<run>_`). PostgreSQL group-commits the
// concurrent appends of one log (one statement per round).
import { NodeFileSystem } from "@effect/platform-node"
import * as SqlClient from "@effect/sql/SqlClient"
import Database from "better-sqlite3"
import { Effect, Layer, Redacted } from "effect"
import {
  closeSync,
  fdatasync,
  fdatasyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { layerSqlite, makeSqlStore, SessionStore } from "./dist.js"

const TEXT = "the quick brown fox jumps over the lazy dog; ".repeat(3)

/** Ours: `appenders` fibers append `total / appenders` single-event drafts each. Returns events/s and the file. */
const runOurs = async ({ appenders, total, fsync, directory, store = "jsonl" }) => {
  const per = Math.floor(total / appenders)
  const events = per * appenders
  const program = Effect.gen(function*() {
    const store = yield* SessionStore.SessionStore
    const log = yield* store.create()
    const appender = (a) =>
      Effect.gen(function*() {
        for (let i = 0; i < per; i++) {
          yield* log.append([{ type: "bench/append", data: { appender: a, i, text: TEXT } }])
        }
      })
    const start = performance.now()
    yield* Effect.forEach(Array.from({ length: appenders }, (_, a) => a), appender, { concurrency: "unbounded", discard: true })
    const elapsed = performance.now() - start
    if (log.events().length !== events) {
      throw new Error(`ours append: ${log.events().length} events in the log, expected ${events}`)
    }
    return { perSecond: events / (elapsed / 1000), path: log.path }
  })
  return await Effect.runPromise(
    Effect.scoped(program).pipe(
      Effect.provide(
        store === "sqlite"
          ? layerSqlite({ filename: join(directory, "ours.db"), synchronous: sqliteSync(fsync) })
          : SessionStore.layerJsonl({ directory, fsync }).pipe(Layer.provide(NodeFileSystem.layer))
      )
    )
  )
}

const sqliteSync = (fsync) => fsync === "batch" ? "full" : "normal"

/** Raw SQLite: the rows of ours, one prepared INSERT per event (autocommit), same pragmas. */
const runRawSqlite = ({ directory, fsync, expected }) => {
  const ours = new Database(join(directory, "ours.db"), { readonly: true })
  const rows = ours.prepare("SELECT session_id, seq, event FROM agent_loop_events ORDER BY seq").all()
  ours.close()
  if (rows.length !== expected) throw new Error(`append: ${rows.length} rows in our database, expected ${expected}`)
  const db = new Database(join(directory, "raw.db"))
  db.pragma("journal_mode = WAL")
  db.pragma(`synchronous = ${sqliteSync(fsync).toUpperCase()}`)
  db.exec(
    "CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, PRIMARY KEY (session_id, seq))"
  )
  const insert = db.prepare("INSERT INTO events (session_id, seq, event) VALUES (?, ?, ?)")
  const start = performance.now()
  for (const r of rows) insert.run(r.session_id, r.seq, r.event)
  const elapsed = performance.now() - start
  db.close()
  return { perSecond: rows.length / (elapsed / 1000) }
}

/** Raw: the same event lines, `appenders` lines per write, fdatasync after each write when `fsync === "batch"`. */
const runRaw = ({ lines, appenders, fsync, directory }) => {
  const path = join(directory, "raw.jsonl")
  const batches = []
  for (let i = 0; i < lines.length; i += appenders) batches.push(Buffer.from(lines.slice(i, i + appenders).join("")))
  const fd = openSync(path, "a")
  const start = performance.now()
  for (const b of batches) {
    let off = 0
    while (off < b.length) off += writeSync(fd, b, off)
    if (fsync === "batch") fdatasyncSync(fd)
  }
  const elapsed = performance.now() - start
  closeSync(fd)
  return { perSecond: lines.length / (elapsed / 1000) }
}

/** `makePg`'s client options (src/SqlSessionStore.ts), so that ours here is the store `layerPg` builds. */
const PG_POOL = 10

/** PostgreSQL, ours then raw on one client: `{ ours, peer }` events/s. */
const runPg = async ({ appenders, total, url, run }) => {
  if (makeSqlStore === undefined) throw new Error("append: this build has no SqlSessionStore.make")
  const { PgClient } = await import("@effect/sql-pg")
  const { Reactivity } = await import("@effect/experimental")
  const per = Math.floor(total / appenders)
  const events = per * appenders
  const prefix = `r${run}_`
  const program = Effect.gen(function*() {
    const sql = yield* PgClient.make({
      url: Redacted.make(url),
      maxConnections: PG_POOL,
      connectTimeout: "10 seconds",
      transformJson: false
    })
    const store = yield* Effect.provideService(makeSqlStore({ tablePrefix: prefix }), SqlClient.SqlClient, sql)
    const log = yield* store.create()
    const appender = (a) =>
      Effect.gen(function*() {
        for (let i = 0; i < per; i++) {
          yield* log.append([{ type: "bench/append", data: { appender: a, i, text: TEXT } }])
        }
      })
    let start = performance.now()
    yield* Effect.forEach(Array.from({ length: appenders }, (_, a) => a), appender, { concurrency: "unbounded", discard: true })
    const oursMs = performance.now() - start
    if (log.events().length !== events) {
      throw new Error(`ours append: ${log.events().length} events in the log, expected ${events}`)
    }
    const rows = yield* sql.unsafe(`SELECT session_id, seq, event FROM "${prefix}events" ORDER BY seq`)
    if (rows.length !== events) throw new Error(`append: ${rows.length} rows in our table, expected ${events}`)
    const raw = `"${prefix}raw_events"`
    yield* sql.unsafe(
      `CREATE TABLE ${raw} (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, PRIMARY KEY (session_id, seq))`
    )
    const insert = `INSERT INTO ${raw} (session_id, seq, event) VALUES ($1, $2, $3)`
    start = performance.now()
    yield* Effect.forEach(rows, (r) => sql.unsafe(insert, [r.session_id, r.seq, r.event]), {
      concurrency: appenders,
      discard: true
    })
    const rawMs = performance.now() - start
    const [{ n }] = yield* sql.unsafe(`SELECT count(*)::integer AS n FROM ${raw}`)
    if (n !== events) throw new Error(`append: ${n} rows in the raw table, expected ${events}`)
    return { ours: events / (oursMs / 1000), peer: events / (rawMs / 1000) }
  })
  return await Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(Reactivity.layer)))
}

/** One run: ours, then the raw baseline on the bytes (SQL: the rows) ours wrote. */
export const runAppend = async ({ appenders, total, fsync, store = "jsonl", url, run = 0 }) => {
  if (store === "pg") return await runPg({ appenders, total, url, run })
  const directory = mkdtempSync(join(tmpdir(), "bench-append-"))
  try {
    const ours = await runOurs({ appenders, total, fsync, directory, store })
    if (store === "sqlite") {
      const raw = runRawSqlite({ directory, fsync, expected: Math.floor(total / appenders) * appenders })
      return { ours: ours.perSecond, peer: raw.perSecond }
    }
    const text = readFileSync(ours.path, "utf8")
    const lines = text.split("\n").slice(1, -1).map((l) => l + "\n") // minus the header, minus the final ""
    const expected = Math.floor(total / appenders) * appenders
    if (lines.length !== expected) throw new Error(`append: ${lines.length} lines in our file, expected ${expected}`)
    const raw = runRaw({ lines, appenders, fsync, directory })
    const files = readdirSync(directory)
    if (files.length !== 2) throw new Error(`append: unexpected files ${files.join(", ")}`)
    return { ours: ours.perSecond, peer: raw.perSecond }
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

/**
 * `sessions-append` (§24): `sessions` sessions of one JSONL store, each with its own log and
 * one appender fiber appending `total / sessions` single-event drafts, all concurrently. Raw
 * baseline in the same run: the very lines ours wrote (read back from its files, headers aside)
 * appended again to `sessions` files of their own, one `write(2)` per line as ours does; with
 * `fsync: "batch"` each file's next line waits for the `fdatasync` of the previous one (async,
 * on libuv's pool, all files at once, as ours), with "none" the lines are written file after
 * file in rounds. Returns `{ ours, peer }` aggregate events/s, and `oursCpuUs`, `peerCpuUs`: µs
 * of process CPU (user + system) per event over the same spans (`bench/profile.js` prints them;
 * with other work on the machine they vary less than the wall-clock rates).
 */
export const runSessionsAppend = async ({ sessions, total, fsync }) => {
  const directory = mkdtempSync(join(tmpdir(), "bench-sessions-append-"))
  try {
    const per = Math.floor(total / sessions)
    const events = per * sessions
    const program = Effect.gen(function*() {
      const store = yield* SessionStore.SessionStore
      const logs = []
      for (let s = 0; s < sessions; s++) logs.push(yield* store.create())
      const appender = (s) =>
        Effect.gen(function*() {
          const log = logs[s]
          for (let i = 0; i < per; i++) {
            yield* log.append([{ type: "bench/append", data: { session: s, i, text: TEXT } }])
          }
        })
      const cpu = process.cpuUsage()
      const start = performance.now()
      yield* Effect.forEach(logs.map((_, s) => s), appender, { concurrency: "unbounded", discard: true })
      const elapsed = performance.now() - start
      const cpuUs = cpuSince(cpu)
      for (const log of logs) {
        if (log.events().length !== per) {
          throw new Error(`sessions-append: ${log.events().length} events in a log, expected ${per}`)
        }
      }
      return { perSecond: events / (elapsed / 1000), cpuUs, paths: logs.map((l) => l.path) }
    })
    const ours = await Effect.runPromise(
      Effect.scoped(program).pipe(
        Effect.provide(SessionStore.layerJsonl({ directory, fsync }).pipe(Layer.provide(NodeFileSystem.layer)))
      )
    )
    const files = ours.paths.map((p) => {
      const lines = readFileSync(p, "utf8").split("\n").slice(1, -1).map((l) => l + "\n")
      if (lines.length !== per) throw new Error(`sessions-append: ${lines.length} lines in ${p}, expected ${per}`)
      return lines
    })
    const rawDir = join(directory, "raw")
    mkdirSync(rawDir)
    const fds = files.map((_, s) => openSync(join(rawDir, `raw-${s}.jsonl`), "a"))
    const write = (fd, line) => {
      const b = Buffer.from(line)
      let off = 0
      while (off < b.length) off += writeSync(fd, b, off)
    }
    const cpu = process.cpuUsage()
    const start = performance.now()
    if (fsync === "batch") {
      await Promise.all(files.map(async (lines, s) => {
        for (const line of lines) {
          write(fds[s], line)
          await new Promise((resolve, reject) => fdatasync(fds[s], (e) => (e ? reject(e) : resolve())))
        }
      }))
    } else {
      for (let i = 0; i < per; i++) for (let s = 0; s < sessions; s++) write(fds[s], files[s][i])
    }
    const elapsed = performance.now() - start
    const cpuUs = cpuSince(cpu)
    for (const fd of fds) closeSync(fd)
    const written = readdirSync(rawDir).reduce((n, f) => n + readFileSync(join(rawDir, f), "utf8").split("\n").length - 1, 0)
    if (written !== events) throw new Error(`sessions-append: ${written} raw lines, expected ${events}`)
    return {
      ours: ours.perSecond,
      peer: events / (elapsed / 1000),
      oursCpuUs: ours.cpuUs / events,
      peerCpuUs: cpuUs / events
    }
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

/** µs of process CPU (user + system) since `start` (a `process.cpuUsage()`). */
const cpuSince = (start) => {
  const c = process.cpuUsage(start)
  return c.user + c.system
}
