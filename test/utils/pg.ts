/**
 * A real PostgreSQL server for the tests (§20). `AGENT_LOOP_TEST_PG` is the URL of a server
 * where the tests may create databases (`scripts/pg-server.sh` starts a throwaway one and prints
 * its URL; `.ci/run` does so and sets it). Without it the PostgreSQL suites are skipped with one
 * line saying how to enable them; with `AGENT_LOOP_REQUIRE_PG=1` (set by `.ci/run`) a missing URL
 * fails them instead.
 */
import { describe } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { PG_ADMIN_MS } from "./bounds.js"

/** The server's URL, or undefined when the PostgreSQL suites are off. */
export const pgUrl: string | undefined = process.env["AGENT_LOOP_TEST_PG"] || undefined

const HOW = "PostgreSQL suites skipped: set AGENT_LOOP_TEST_PG to a server URL (scripts/pg-server.sh starts one and prints it)"

let said = false

/**
 * `describe` for a suite that needs PostgreSQL: skipped (one line on stderr per test file) when
 * `AGENT_LOOP_TEST_PG` is unset; failing when `AGENT_LOOP_REQUIRE_PG=1` too.
 */
export const describePg: typeof describe = ((name: string, fn: () => void) => {
  if (pgUrl !== undefined) return describe(name, fn)
  if (process.env["AGENT_LOOP_REQUIRE_PG"] === "1") {
    return describe(name, () => {
      throw new Error(`${name}: AGENT_LOOP_REQUIRE_PG=1 but AGENT_LOOP_TEST_PG is not set`)
    })
  }
  if (!said) {
    said = true
    process.stderr.write(HOW + "\n")
  }
  return describe.skip(name, fn)
}) as typeof describe

/** `url` with another database name. */
export const withDatabase = (url: string, database: string): string => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/**
 * A new empty database on the test server (its URL); dropped by `dropDatabase`. Made with
 * `psql`-free SQL through a short-lived `node` child (`pg`), so that tests need no client of
 * their own open on the admin database.
 */
export const createDatabase = (options?: { readonly owner?: string }): string => {
  const name = `t_${randomUUID().replaceAll("-", "").slice(0, 16)}`
  adminQuery(`CREATE DATABASE ${name}${options?.owner === undefined ? "" : ` OWNER ${options.owner}`}`)
  return withDatabase(pgUrl!, name)
}

/**
 * A new login role on the test server (its name, `r_…`): no superuser, no password, owning
 * nothing; `settings` are `ALTER ROLE … SET` clauses (`statement_timeout = '1ms'`). Dropped by
 * `dropRole` (after the databases it owns).
 */
export const createRole = (...settings: ReadonlyArray<string>): string => {
  const name = `r_${randomUUID().replaceAll("-", "").slice(0, 16)}`
  adminQuery(`CREATE ROLE ${name} LOGIN`)
  for (const setting of settings) adminQuery(`ALTER ROLE ${name} SET ${setting}`)
  return name
}

/** Drops a role made by `createRole`. */
export const dropRole = (name: string): void => {
  if (!/^r_[0-9a-f]{16}$/.test(name)) throw new Error(`not a test role: ${name}`)
  adminQuery(`DROP ROLE IF EXISTS ${name}`)
}

/** `url` with another user (and no password). */
export const withUser = (url: string, user: string): string => {
  const u = new URL(url)
  u.username = user
  u.password = ""
  return u.toString()
}

/** Drops a database made by `createDatabase` (its connections are ended first). */
export const dropDatabase = (url: string): void => {
  const name = new URL(url).pathname.slice(1)
  if (!/^t_[0-9a-f]{16}$/.test(name)) throw new Error(`not a test database: ${name}`)
  adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
}

const adminQuery = (query: string): void => {
  execFileSync(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `import pg from "pg"; const c = new pg.Client({ connectionString: process.argv[1] }); await c.connect(); try { await c.query(process.argv[2]) } finally { await c.end() }`,
      pgUrl!,
      query
    ],
    { stdio: ["ignore", "ignore", "inherit"], timeout: PG_ADMIN_MS }
  )
}
