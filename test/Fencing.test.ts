/**
 * Fenced writers on PostgreSQL (§20, §3.3): a session's writer epoch is a
 * fencing token. A store that takes a session over (`writers: "takeover"`) increments it; the
 * former writer's next append fails `SessionFenced` and writes nothing; its agent stops, leaving
 * its turn for the new owner, who repairs it (§10). In one process (two stores on one database)
 * and across two OS processes, the first paused with SIGSTOP while the second takes over. And
 * stores opened at once on a fresh database: all open, their migrations run once (§20).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Redacted, Scope } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import type { AgentEvent } from "../src/AgentEvent.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import * as Offline from "../src/providers/Offline.js"
import * as SessionStore from "../src/SessionStore.js"
import * as SqlSessionStore from "../src/SqlSessionStore.js"
import { brief } from "./utils/agent.js"
import { createDatabase, describePg, dropDatabase } from "./utils/pg.js"

const database = Effect.acquireRelease(Effect.sync(createDatabase), (url) => Effect.sync(() => dropDatabase(url)))

const storeOn = (url: string, writers: "exclusive" | "takeover", scope: Scope.Scope) =>
  Effect.map(
    Layer.buildWithScope(SqlSessionStore.layerPg({ url, writers, maxConnections: 4 }), scope),
    (context) => Context.get(context, SessionStore.SessionStore)
  )

/** A client of one connection on `url`, to look at the store's tables. */
const inspect = (url: string) =>
  Effect.map(
    Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })),
    (context) => Context.get(context, SqlClient.SqlClient)
  )

/** Builds a store on `url` (a pool of `maxConnections`) and closes it: its error's message, or "open". */
const openAndClose = (url: string, maxConnections: number) =>
  Effect.scoped(Layer.build(SqlSessionStore.layerPg({ url, writers: "takeover", maxConnections }))).pipe(
    Effect.match({ onFailure: (error) => error.message, onSuccess: () => "open" })
  )

/** Six stores opened at once on `url`: what each open gave. */
const sixAtOnce = (url: string, maxConnections: number) =>
  Effect.all(Array.from({ length: 6 }, () => openAndClose(url, maxConnections)), { concurrency: "unbounded" })

/** The rows of the migrations table (a primary key on `migration_id`: each at most once). */
const migrated = (sql: SqlClient.SqlClient) =>
  Effect.orDie(sql`SELECT migration_id, name FROM agent_loop_migrations ORDER BY migration_id`.withoutTransform)

describePg("SQL stores opened at once on a fresh PostgreSQL database (§20)", () => {
  for (const maxConnections of [4, 1]) {
    it.live(`six stores (pools of ${maxConnections}) opened at once all open; the migrations ran, recorded once`, () =>
      Effect.gen(function*() {
        const url = yield* database
        expect(yield* sixAtOnce(url, maxConnections)).toEqual(Array(6).fill("open"))
        expect(yield* migrated(yield* inspect(url))).toEqual([
          { migration_id: 1, name: "create_session_tables" },
          { migration_id: 2, name: "add_writer_epoch" }
        ])
      }).pipe(Effect.scoped))
  }

  it.live("a failing migration is the store's error (the same as before the lock) and is rolled back, migrations table included; then stores open", () =>
    Effect.gen(function*() {
      const url = yield* database
      const sql = yield* inspect(url)
      yield* Effect.orDie(sql`CREATE TABLE agent_loop_events (a INTEGER, b TEXT)`)
      expect(yield* openAndClose(url, 1)).toMatch(
        /^the table agent_loop_events exists without the columns \(session_id, seq, event\) this store needs: .*column "session_id" does not exist/
      )
      const present = sql<{ sessions: string | null; migrations: string | null }>`SELECT
        to_regclass('agent_loop_sessions')::text AS sessions, to_regclass('agent_loop_migrations')::text AS migrations`
      expect(yield* Effect.orDie(present)).toEqual([{ sessions: null, migrations: null }])
      yield* Effect.orDie(sql`DROP TABLE agent_loop_events`)
      expect(yield* sixAtOnce(url, 1)).toEqual(Array(6).fill("open"))
      expect(yield* migrated(sql)).toEqual([
        { migration_id: 1, name: "create_session_tables" },
        { migration_id: 2, name: "add_writer_epoch" }
      ])
    }).pipe(Effect.scoped))
})

describePg("fenced writers on PostgreSQL", () => {
  it.live("a takeover fences a running agent: its next append fails SessionFenced, it stops, the new owner repairs and goes on; the former store reads the stored log", () =>
    Effect.gen(function*() {
      const url = yield* database
      const scope = yield* Effect.scope
      const first = yield* Effect.orDie(storeOn(url, "exclusive", scope))
      const second = yield* Effect.orDie(storeOn(url, "takeover", scope))
      // A model that waits for `gate` before it answers: the turn is running when the session is taken.
      const called = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const offline = Offline.make()
      const gated: Model.ModelService = {
        ...offline,
        respond: (request, sink) =>
          Effect.zipRight(
            Effect.zipRight(Deferred.succeed(called, undefined), Deferred.await(gate)),
            offline.respond(request, sink)
          )
      }
      const agentScope = yield* Scope.make()
      const agent = yield* Agent.make({ sessionId: "s" }).pipe(
        Effect.provideService(SessionStore.SessionStore, first),
        Effect.provideService(Model.Model, gated),
        Scope.extend(agentScope)
      )
      const events: Array<AgentEvent> = []
      const queue = yield* Scope.extend(agent.subscribe, agentScope)
      const drain = yield* Effect.forkScoped(Effect.forever(Effect.map(queue.take, (e) => events.push(e))))
      const delivery = yield* agent.followup("hello")
      yield* Deferred.await(called)
      const before = agent.log.events().length
      // The new owner takes the session and resumes it: the open turn is closed by repair.
      const owner = yield* Agent.resume("s").pipe(
        Effect.provideService(SessionStore.SessionStore, second),
        Effect.provideService(Model.Model, offline)
      )
      const repaired = yield* second.read("s")
      // Before it has tried to append, the former writer's store already reads the session as
      // stored (its epoch is no longer the session's), not its own stale copy.
      expect((yield* first.read("s")).events).toEqual(repaired.events)
      expect(brief(repaired.events)).toEqual([
        "splice next-turn 0 +[hello]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "step/start 1.1",
        "user hello",
        "request/header",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      // The former writer's model answers: its append is fenced, and it stops. The prompt had
      // entered before the takeover (its user/message is in the log).
      yield* Deferred.succeed(gate, undefined)
      expect(yield* delivery.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
      yield* agent.awaitIdle
      expect(agent.log.events().length).toBe(before)
      const refused = yield* Effect.flip(agent.followup("again"))
      expect(refused).toMatchObject({ _tag: "SessionFenced", sessionId: "s", epoch: 1, current: 2 })
      // The fenced writer's store reads the session as stored (the new owner's repair included),
      // not its own stale copy: a runner asked for a message the new owner logged finds it.
      expect((yield* first.read("s")).events).toEqual(repaired.events)
      yield* Effect.sleep("50 millis")
      yield* Fiber.interrupt(drain)
      expect(events.at(-1)?.type).toBe("agent/disposed")
      // Its disposal writes nothing either.
      yield* Scope.close(agentScope, Exit.void)
      // Nothing of the fenced writer after the takeover; the new owner goes on.
      const next = yield* owner.followup("after")
      expect(yield* next.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
      yield* owner.awaitIdle
      const log = yield* second.read("s")
      expect(log.events.slice(0, repaired.events.length)).toEqual(repaired.events)
      expect(Invariant.check(log.events)).toEqual([])
    }).pipe(Effect.scoped))

  it.live(
    "two processes: the writer paused by SIGSTOP is taken over; after SIGCONT its append fails SessionFenced and nothing of it is in the log",
    () =>
      Effect.gen(function*() {
        const url = yield* database
        // The writer's stdout is a file, not a pipe: once the writer is stopped, the file holds
        // every tick it printed (a pipe may still hold lines the test has not read).
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "agent-loop-fence-"))),
          (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
        )
        const stdout = Path.join(dir, "stdout")
        const fd = Fs.openSync(stdout, "w")
        const child = spawn(process.execPath, [Path.resolve("test/utils/fenceChild.mjs"), url, "p"], {
          stdio: ["ignore", fd, "pipe"]
        })
        Fs.closeSync(fd)
        yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
        let err = ""
        child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString()))
        const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
        const out = () => Fs.readFileSync(stdout, "utf8")
        const ticks = () => [...out().matchAll(/^tick (\d+)$/gm)].map((m) => Number(m[1]))
        /** The writer's state in /proc (`T`: stopped). */
        const state = () => {
          const stat = Fs.readFileSync(`/proc/${child.pid}/stat`, "utf8")
          return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
        }
        /** Polls `ready` every 20 ms, for at most `ms`. */
        const until = (ready: () => boolean, ms: number, what: string) =>
          Effect.gen(function*() {
            for (let waited = 0; !ready(); waited += 20) {
              if (waited >= ms) {
                return yield* Effect.die(new Error(`timed out waiting for ${what}; stdout: ${out()} stderr: ${err}`))
              }
              yield* Effect.sleep("20 millis")
            }
          })
        yield* until(() => ticks().length >= 5, 20_000, "5 ticks")
        child.kill("SIGSTOP")
        yield* until(() => state() === "T", 10_000, "the writer to stop")
        // The ticks the writer acknowledged before it stopped. It may also have had one append in
        // flight (sent, its answer not yet read): the database commits it or the takeover fences it.
        const acknowledged = ticks().length
        // The new owner takes the session over while the writer is paused and appends.
        const scope = yield* Effect.scope
        const owner = yield* Effect.orDie(storeOn(url, "takeover", scope))
        const log = yield* owner.open("p")
        const taken = log.events().length
        yield* log.append([{ type: "test/owner", data: { at: taken } }])
        child.kill("SIGCONT")
        const code = yield* Effect.promise(() =>
          Promise.race([exited, new Promise<string>((resolve) => setTimeout(() => resolve("timeout"), 15_000))])
        )
        expect(code).toBe(3)
        const failure = JSON.parse(out().trim().split("\n").at(-1)!)
        expect(failure).toMatchObject({ failed: "SessionFenced", epoch: 1, current: 2 })
        // After SIGCONT the writer printed at most the tick of the append in flight (committed
        // before the takeover), the next in sequence; every append after it failed SessionFenced.
        const printed = ticks()
        expect(printed).toEqual(Array.from({ length: printed.length }, (_, n) => n))
        expect(printed.length === acknowledged || printed.length === acknowledged + 1).toBe(true)
        // The log holds exactly the printed ticks, committed before the takeover, then the new
        // owner's event, and nothing of the paused writer after it.
        const final = yield* owner.read("p")
        const types = final.events.map((e) => e.type)
        expect(types.slice(-1)).toEqual(["test/owner"])
        const logged = final.events.filter((e) => e.type === "test/tick").map((e) => (e.data as { n: number }).n)
        expect(logged).toEqual(printed)
        expect(taken).toBe(printed.length)
      }).pipe(Effect.scoped),
    60_000
  )
})
