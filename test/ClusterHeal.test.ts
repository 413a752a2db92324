/**
 * Sessions that heal after a transient PostgreSQL fault (§3.3, §10), on a real server:
 * a runner and its `AgentClient` in one process, a fresh database per test, the fault made from
 * outside as an operator meets it: a row lock held by another transaction while every statement
 * times out, the backend of an append terminated while it waits, a reply lost on the way (a TCP
 * proxy between the runner and the server forwards a committed append and drops its answer).
 * Each test checks that the session answers again once the fault ends, that every acknowledged
 * delivery has exactly one fate and that nothing ran twice. Real time (the cluster polls on its
 * own clock); every wait is bounded by a condition.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Context, Deferred, Duration, Effect, Fiber, Layer, Logger, Redacted, Schedule } from "effect"
import * as Net from "node:net"
import { AgentClient } from "../src/cluster/AgentClient.js"
import * as AgentRunner from "../src/cluster/AgentRunner.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import * as SqlSessionStore from "../src/SqlSessionStore.js"
import { CLUSTER_CONDITION_S, CLUSTER_FAULT_TEST_MS, CLUSTER_SLOW_CALL_S, note } from "./utils/bounds.js"
import { freePort } from "./utils/cluster.js"
import { bounded, gatedModel, insertedIds, logOf } from "./utils/entity.js"
import { createDatabase, describePg, dropDatabase } from "./utils/pg.js"

/**
 * One connection to `url` for the test's own statements (a lock held in a transaction, an ALTER),
 * reserved from a pool of its own that closes with the scope.
 */
const adminConnection = (url: string) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))
    return yield* Effect.provide(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.reserve), context)
  })

type Admin = Effect.Effect.Success<ReturnType<typeof adminConnection>>

const query = (admin: Admin, text: string, values: ReadonlyArray<unknown> = []) =>
  Effect.orDie(admin.execute(text, values, undefined))

/**
 * A TCP proxy to the PostgreSQL server at `target` (its port): `drop()` arms it so that the next
 * statement whose text holds `marker` is forwarded and, once the server has answered it completely
 * (ReadyForQuery: the statement is committed), the answer is dropped and the client's connection
 * is cut. `dropped` counts the answers dropped.
 */
const proxy = (target: number, marker: string) =>
  Effect.acquireRelease(
    Effect.async<
      { readonly port: number; readonly drop: () => void; readonly dropped: () => number; readonly server: Net.Server }
    >(
      (resume) => {
        let armed = false
        let dropped = 0
        const server = Net.createServer((client) => {
          const upstream = Net.connect(target, "127.0.0.1")
          let swallowing = false
          client.on("data", (chunk) => {
            if (armed && chunk.includes(marker)) {
              armed = false
              swallowing = true
            }
            upstream.write(chunk)
          })
          upstream.on("data", (chunk) => {
            if (!swallowing) {
              client.write(chunk)
              return
            }
            // ReadyForQuery ('Z', length 5): the statement's implicit transaction is over.
            if (chunk.includes(READY)) {
              dropped++
              client.destroy()
              upstream.destroy()
            }
          })
          const close = () => {
            client.destroy()
            upstream.destroy()
          }
          client.on("error", close).on("close", close)
          upstream.on("error", close).on("close", close)
        })
        server.listen(0, "127.0.0.1", () =>
          resume(Effect.succeed({
            port: (server.address() as Net.AddressInfo).port,
            drop: () => void (armed = true),
            dropped: () => dropped,
            server
          })))
      }
    ),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
  )

const READY = Buffer.from([0x5a, 0, 0, 0, 5])

/** Log lines of the runner (its message text), for the tests that check what it said. */
const collectLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ message }) => {
    lines.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

/** A runner on `url` (with the gated model) and a reader of its session logs on `readerUrl`. */
const cluster = (
  url: string,
  readerUrl: string,
  gate: Deferred.Deferred<void>,
  logs: ReturnType<typeof collectLogs>
) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const runner = AgentRunner.layer({ pg: url, host: "127.0.0.1", port }).pipe(
      Layer.provide(Model.layer(gatedModel(gate))),
      Layer.provide(logs.layer)
    )
    // A second store on the same database, to read the logs as a user would.
    const reader = SqlSessionStore.layer().pipe(Layer.provide(PgClient.layer({ url: Redacted.make(readerUrl) })))
    return yield* Layer.build(Layer.merge(runner, reader))
  })

/**
 * A runner on `url` (the gated model, its log lines collected), its client and a reader of its
 * logs; `admin`'s transaction (the lock a test holds) is rolled back before the runner stops, as
 * a lock it held would keep the runner's appends waiting.
 */
const lockableCluster = (url: string, admin: Admin) =>
  Effect.gen(function*() {
    const gate = yield* Deferred.make<void>()
    const logs = collectLogs()
    const context = yield* cluster(url, url, gate, logs)
    yield* Effect.addFinalizer(() => Effect.ignore(admin.execute("ROLLBACK", [], undefined)))
    const client = Context.get(context, AgentClient)
    const read = (id: string) => Effect.provide(logOf(id), context)
    return { client, gate, logs, read }
  })

const freshDatabase = Effect.acquireRelease(Effect.sync(createDatabase), (url) => Effect.sync(() => dropDatabase(url)))

const turnEnds = (events: ReadonlyArray<SessionEvent>) =>
  events.filter((e) => e.type === "turn/end").map((e) => e.data as { turn: number; reason: { kind: string } })

/** Polls `check` every 50 ms until it holds (at most `CLUSTER_CONDITION_S`). */
const until = <E, R>(what: string, check: Effect.Effect<boolean, E, R>, seconds = CLUSTER_CONDITION_S) =>
  Effect.suspend(() => {
    const started = Date.now()
    return Effect.timeoutFail(
      Effect.repeat(check, { schedule: Schedule.spaced(Duration.millis(50)), until: (done) => done }),
      { duration: Duration.seconds(seconds), onTimeout: () => new Error(`${what}: not within ${seconds} s`) }
    ).pipe(Effect.tap(() => note(`heal until ${what}`, Date.now() - started)))
  })

describePg("a session heals after a transient PostgreSQL fault", () => {
  it.live(
    "every statement times out under a row lock mid-turn: the stopped agent is reopened, deliveries made meanwhile land once, no failure is stored as their reply, one log line per session",
    () =>
      Effect.gen(function*() {
        const url = yield* freshDatabase
        const admin = yield* adminConnection(url)
        // Every statement of every later connection gives up after 200 ms (the runner's pool).
        yield* query(admin, "SELECT set_config('statement_timeout', '0', false)")
        const database = new URL(url).pathname.slice(1)
        yield* query(admin, `ALTER DATABASE ${database} SET statement_timeout = '200ms'`)
        const { client, gate, logs, read } = yield* lockableCluster(url, admin)

        // Two sessions in a turn; s2 gets a delivery as soon as the fault begins, s1 none until
        // its agent stopped.
        expect(yield* bounded(client.followup("s1", "hold the line", { messageId: "m1" }))).toEqual({ messageId: "m1" })
        expect(yield* bounded(client.followup("s2", "hold the line", { messageId: "n1" }))).toEqual({ messageId: "n1" })
        for (const id of ["s1", "s2"]) {
          yield* until("step 1 started", Effect.map(read(id), (events) => events.some((e) => e.type === "step/start")))
        }
        // Another transaction locks the session rows: every append waits for it and times out.
        yield* query(admin, "BEGIN")
        yield* query(admin, "SELECT id FROM agent_loop_sessions WHERE id IN ('s1', 's2') FOR UPDATE")
        yield* Deferred.succeed(gate, undefined)
        const n2 = yield* Effect.fork(bounded(client.followup("s2", "and then", { messageId: "n2" }), CLUSTER_SLOW_CALL_S))
        yield* until(
          "the agent stopped",
          Effect.sync(() => logs.lines.some((l) => l.startsWith("session s1: its agent stopped")))
        )
        // A delivery during the fault: it waits (its reply is never the store's error). An
        // observation window (a condition cannot show that no reply comes): 2 s is ten times the
        // statement timeout (200 ms): the statements that meet the lock have timed out meanwhile.
        const m2 = yield* Effect.fork(bounded(client.followup("s1", "and then", { messageId: "m2" }), CLUSTER_SLOW_CALL_S))
        yield* Effect.sleep(Duration.seconds(2))
        expect(m2.unsafePoll()).toBeNull()
        // The fault ends.
        yield* query(admin, "ROLLBACK")
        expect(yield* Fiber.join(m2)).toEqual({ messageId: "m2" })
        expect(yield* bounded(client.outcome("s1", "m2"))).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        // The turn the fault hit was repaired; m1 had entered its first step.
        expect(yield* bounded(client.outcome("s1", "m1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        // A retry of m2 with the same id: answered, nothing logged twice.
        expect(yield* bounded(client.followup("s1", "and then", { messageId: "m2" }))).toEqual({ messageId: "m2" })
        const events = yield* read("s1")
        expect(insertedIds(events)).toEqual(["m1", "m2"])
        expect(turnEnds(events)).toEqual([
          { turn: 1, reason: { kind: "interrupted" } },
          { turn: 2, reason: { kind: "completed" } }
        ])
        expect(Invariant.check(events)).toEqual([])
        // s2: its delivery made during the fault landed once, after the repaired turn.
        expect(yield* Fiber.join(n2)).toEqual({ messageId: "n2" })
        expect(yield* bounded(client.outcome("s2", "n2"))).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        const events2 = yield* read("s2")
        expect(insertedIds(events2)).toEqual(["n1", "n2"])
        expect(turnEnds(events2).map((e) => e.reason.kind)).toEqual(["interrupted", "completed"])
        expect(Invariant.check(events2)).toEqual([])
        // One line per session named it, the cause and what the runner did: for s1 the stop (no
        // rpc came before the heal), for s2 the stop or the failed log its delivery met first.
        const said = (id: string) => logs.lines.filter((l) => l.startsWith(`session ${id}: its `))
        expect(said("s1")).toHaveLength(1)
        expect(said("s1")[0]).toMatch(
          /^session s1: its agent stopped \(session "s1" stopped: turn 1 could not be closed \(.*\); resume the session to repair it\); reopening the session in 500ms \(the repair closes the open turn, then the pending work runs\)$/
        )
        expect(said("s2")).toHaveLength(1)
        expect(said("s2")[0]).toMatch(
          /^session s2: (its agent stopped|its session log failed) \(.*\); reopening the session (in 500ms|now) \(the repair closes the open turn, then the pending work runs\)$/
        )
      }).pipe(Effect.scoped),
    CLUSTER_FAULT_TEST_MS
  )

  it.live(
    "the backend of an append waiting on a row lock is terminated: the turn is closed RUN_FAILED once the lock goes, the session goes on",
    () =>
      Effect.gen(function*() {
        const url = yield* freshDatabase
        const admin = yield* adminConnection(url)
        const { client, gate, read } = yield* lockableCluster(url, admin)

        expect(yield* bounded(client.followup("s1", "hold the line", { messageId: "m1" }))).toEqual({ messageId: "m1" })
        yield* until("step 1 started", Effect.map(read("s1"), (events) => events.some((e) => e.type === "step/start")))
        yield* query(admin, "BEGIN")
        yield* query(admin, "SELECT id FROM agent_loop_sessions WHERE id = 's1' FOR UPDATE")
        yield* Deferred.succeed(gate, undefined)
        // The append of the model's answer waits for the lock: its backend is terminated.
        const waiting = Effect.map(
          query(admin, "SELECT pid FROM pg_stat_activity WHERE pg_blocking_pids(pid) @> ARRAY[pg_backend_pid()]"),
          (rows) => rows.map((row: { pid: number }) => row.pid)
        )
        yield* until("an append waits for the lock", Effect.map(waiting, (pids) => pids.length === 1))
        const [pid] = yield* waiting
        yield* query(admin, "SELECT pg_terminate_backend($1)", [pid])
        // The lock stays 1 s past the termination, so that what the runner does about the failed
        // append (the turn's closers) meets the lock as well and goes through once it is gone: a
        // fixed window, not a wait for something (the closers may or may not be waiting yet).
        yield* Effect.sleep(Duration.seconds(1))
        yield* query(admin, "COMMIT")
        expect(yield* bounded(client.followup("s1", "and then", { messageId: "m2" }))).toEqual({ messageId: "m2" })
        expect(yield* bounded(client.outcome("s1", "m2"))).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        expect(yield* bounded(client.outcome("s1", "m1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        const events = yield* read("s1")
        expect(insertedIds(events)).toEqual(["m1", "m2"])
        const ends = turnEnds(events)
        expect(ends).toEqual([
          {
            turn: 1,
            reason: {
              kind: "error",
              error: {
                message:
                  "cannot append to session \"s1\": Failed to execute statement: terminating connection due to administrator command",
                code: "RUN_FAILED"
              }
            }
          },
          { turn: 2, reason: { kind: "completed" } }
        ])
        expect(Invariant.check(events)).toEqual([])
        // The answer of the model was not committed: no assistant message in turn 1.
        // The model's answer was not committed: turn 1 has only what the closers logged, its
        // streamed text as an interrupted message.
        expect(
          events.filter((e) => e.type === "assistant/message").map((e) => {
            const data = e.data as { turn: number; interrupted?: boolean }
            return [data.turn, data.interrupted === true]
          })
        ).toEqual([[1, true], [2, false]])
      }).pipe(Effect.scoped),
    CLUSTER_FAULT_TEST_MS
  )

  it.live(
    "the reply of a committed append is lost (a proxy drops it and cuts the connection): the append is found committed, the delivery answers once, the log stays in step",
    () =>
      Effect.gen(function*() {
        const url = yield* freshDatabase
        const server = new URL(url)
        const cut = yield* proxy(Number(server.port), "WITH fence")
        const proxied = new URL(url)
        proxied.port = String(cut.port)
        const gate = yield* Deferred.make<void>()
        yield* Deferred.succeed(gate, undefined)
        const logs = collectLogs()
        const context = yield* cluster(proxied.toString(), url, gate, logs)
        const client = Context.get(context, AgentClient)
        const read = (id: string) => Effect.provide(logOf(id), context)

        expect(yield* bounded(client.followup("s1", "first", { messageId: "m1" }))).toEqual({ messageId: "m1" })
        expect(yield* bounded(client.outcome("s1", "m1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        // The next fenced append (the splice of m2) is committed and its reply dropped.
        cut.drop()
        expect(yield* bounded(client.followup("s1", "second", { messageId: "m2" }))).toEqual({ messageId: "m2" })
        expect(cut.dropped()).toBe(1)
        expect(yield* bounded(client.outcome("s1", "m2"))).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        // Later appends go on from the committed events (no duplicate key).
        expect(yield* bounded(client.followup("s1", "third", { messageId: "m3" }))).toEqual({ messageId: "m3" })
        expect(yield* bounded(client.outcome("s1", "m3"))).toEqual({ _tag: "Entered", turn: 3, step: 1 })
        // Entered is decided when the step enters; the turn ends once the model has answered.
        yield* until("turn 3 ends", Effect.map(read("s1"), (events) => turnEnds(events).length === 3))
        const events = yield* read("s1")
        expect(insertedIds(events)).toEqual(["m1", "m2", "m3"])
        expect(turnEnds(events).map((e) => [e.turn, e.reason.kind])).toEqual([
          [1, "completed"],
          [2, "completed"],
          [3, "completed"]
        ])
        expect(Invariant.check(events)).toEqual([])
        expect(logs.lines.filter((l) => l.includes("stopped"))).toEqual([])
      }).pipe(Effect.scoped),
    CLUSTER_FAULT_TEST_MS
  )
})
