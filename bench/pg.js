// The PostgreSQL server of the `pg` bench section (§20): AGENT_LOOP_BENCH_PG (a server URL
// where the bench may create databases) if set, else a throwaway server started by
// scripts/pg-server.sh (fsync=off, synchronous_commit=off) in /tmp/agent-loop-bench-pg on port
// 55434, stopped again at the end when this run started it. Each job gets a database of its own,
// created before it and dropped (WITH (FORCE)) after it. Queries run in a short-lived `node`
// child (`pg`), so that run.js stays synchronous and holds no connection of its own.
import { execFileSync, spawnSync } from "node:child_process"
import { existsSync, readdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const THROWAWAY_DIR = "/tmp/agent-loop-bench-pg"
const THROWAWAY_PORT = "55434"

/** Runs `queries` in order on the database at `url`; returns the rows of the last one. */
const query = (url, ...queries) => {
  let out
  try {
    out = runQueries(url, queries)
  } catch (e) {
    const why = String(e.stderr ?? "").split("\n").find((l) => /^\w*Error\b/.test(l)) ?? (e instanceof Error ? e.message : e)
    const u = new URL(url)
    throw new Error(`${u.hostname}:${u.port}${u.pathname}: ${why}`, { cause: e })
  }
  return JSON.parse(out)
}

const runQueries = (url, queries) =>
  execFileSync(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `import pg from "pg"
const c = new pg.Client({ connectionString: process.argv[1] })
await c.connect()
try {
  let rows = []
  for (const q of JSON.parse(process.argv[2])) rows = (await c.query(q)).rows
  process.stdout.write(JSON.stringify(rows))
} finally { await c.end() }`,
      url,
      JSON.stringify(queries)
    ],
    { cwd: here, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 60_000 }
  )

/** `url` with another database name. */
const withDatabase = (url, database) => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/**
 * The server: `{ url, label, settings, stop }`. `settings` are the server's `fsync` and
 * `synchronous_commit` (they decide what the figures mean); `stop` stops a throwaway server this
 * run started (a no-op otherwise).
 */
export const pgServer = () => {
  const given = process.env.AGENT_LOOP_BENCH_PG || undefined
  let url = given
  let stop = () => {}
  if (url === undefined) {
    const running = existsSync(join(THROWAWAY_DIR, "data", "postmaster.pid"))
    const r = spawnSync("bash", [join(here, "..", "scripts", "pg-server.sh"), THROWAWAY_DIR, THROWAWAY_PORT], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"]
    })
    if (r.status !== 0) throw new Error(`scripts/pg-server.sh failed: ${(r.stderr || r.stdout).trim()}`)
    url = r.stdout.trim().split("\n").pop()
    if (!running) {
      stop = () => {
        const bin = readdirSync("/usr/lib/postgresql").map((v) => `/usr/lib/postgresql/${v}/bin/pg_ctl`).find(existsSync)
        if (bin === undefined) return
        const argv = [bin, "-D", join(THROWAWAY_DIR, "data"), "-m", "fast", "-w", "stop"]
        const root = process.getuid?.() === 0
        spawnSync(root ? "runuser" : argv[0], root ? ["-u", "postgres", "--", ...argv] : argv.slice(1), { stdio: "ignore" })
      }
    }
  }
  const [row] = query(
    url,
    "SELECT current_setting('server_version') AS version, current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS synchronous_commit"
  )
  const u = new URL(url)
  return {
    url,
    label: `PostgreSQL ${row.version} at ${u.hostname}:${u.port}${given === undefined ? " (throwaway)" : ""}`,
    settings: { fsync: row.fsync, synchronousCommit: row.synchronous_commit },
    stop
  }
}

let made = 0

/** A fresh database on the server for one job: `{ url, drop }`. */
export const pgDatabase = (serverUrl) => {
  const name = `agent_loop_bench_${process.pid}_${++made}`
  query(serverUrl, `CREATE DATABASE ${name}`)
  return {
    url: withDatabase(serverUrl, name),
    drop: () => query(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  }
}
