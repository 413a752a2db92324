/**
 * Multi-process cluster tests (issue 14 §4): runner processes on loopback over one PostgreSQL
 * database (a fresh one per test), the test process as a client-only process (and a client child
 * for the last test). Short sharding settings keep them fast; assertions are against the
 * configured values plus a margin for a loaded machine. Every wait is bounded; the runners are
 * found by what the database says (the session's writer row), never assumed.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Fiber, Layer, Redacted } from "effect"
import * as Path from "node:path"
import { AgentClient } from "../src/cluster/AgentClient.js"
import * as AgentRunner from "../src/cluster/AgentRunner.js"
import * as Delivery from "../src/Delivery.js"
import * as Invariant from "../src/Invariant.js"
import type { UserMessage } from "../src/Message.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import { SessionStore } from "../src/SessionStore.js"
import * as SqlSessionStore from "../src/SqlSessionStore.js"
import { brief } from "./utils/agent.js"
import {
  type Child,
  describeChildren,
  exitOf,
  type Runner,
  type Settings,
  spawnChild,
  startRunners,
  until
} from "./utils/cluster.js"
import { createDatabase, describePg, dropDatabase } from "./utils/pg.js"

/** Short settings (ms): a dead runner is noticed within about a second or two, a lock expires in 5 s. */
const SETTINGS: Settings = { healthCheck: 1000, lockRefresh: 1500, lockExpiry: 5000, messagePoll: 500 }
/** What a loaded 2-core machine may add to the configured expiry before a session answers again. */
const MARGIN = 10_000

const database = Effect.acquireRelease(Effect.sync(createDatabase), (url) => Effect.sync(() => dropDatabase(url)))

/** The test process's side of a cluster: a client-only process, and readers of the logs and writer rows. */
const connect = (url: string) =>
  Effect.gen(function*() {
    const pgClient = PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })
    const reader = SqlSessionStore.layer().pipe(Layer.provideMerge(pgClient))
    const client = AgentRunner.layerClient({ pg: url })
    const context = yield* Layer.build(Layer.merge(client, reader))
    const store = Context.get(context, SessionStore)
    const sql = Context.get(context, SqlClient.SqlClient)
    /** The session's log (empty while it does not exist). */
    const logOf = (id: string): Effect.Effect<ReadonlyArray<SessionEvent>> =>
      store.read(id).pipe(
        Effect.map((c) => c.events as ReadonlyArray<SessionEvent>),
        Effect.catchTag("SessionNotFound", () => Effect.succeed([])),
        Effect.orDie
      )
    /** The pid of the process whose store holds each session (the writers table). */
    const owners: Effect.Effect<ReadonlyMap<string, number>> = Effect.orDie(
      Effect.map(
        sql<{ session_id: string; writer: string }>`SELECT session_id, writer FROM agent_loop_writers`,
        (rows) => new Map(rows.map((r) => [r.session_id, (JSON.parse(r.writer) as { pid: number }).pid]))
      )
    )
    return { client: Context.get(context, AgentClient), logOf, owners }
  })

/** The ids inserted into the inbox, in log order (one entry per insertion). */
const insertedIds = (events: ReadonlyArray<SessionEvent>): ReadonlyArray<string> =>
  events.flatMap((e) =>
    e.type === "agent/inbox/spliced" ? (e.data as { inserted: ReadonlyArray<UserMessage> }).inserted.map((m) => m.id) : []
  )

const userMessageIds = (events: ReadonlyArray<SessionEvent>): ReadonlyArray<string> =>
  events.flatMap((e) => e.type === "user/message" ? [(e.data as UserMessage).id] : [])

const turnsStarted = (events: ReadonlyArray<SessionEvent>): ReadonlyArray<number> =>
  events.flatMap((e) => e.type === "turn/start" ? [(e.data as { turn: number }).turn] : [])

const turnsEnded = (events: ReadonlyArray<SessionEvent>): ReadonlyArray<string> =>
  events.flatMap((e) =>
    e.type === "turn/end" ? [`${(e.data as { turn: number }).turn} ${(e.data as { reason: { kind: string } }).reason.kind}`] : []
  )

/** Whether the session's last turn is open (started, not ended). */
const running = (events: ReadonlyArray<SessionEvent>): boolean => {
  for (let i = events.length - 1; i >= 0; i--) {
    const type = events[i]!.type
    if (type === "turn/start") return true
    if (type === "turn/end") return false
  }
  return false
}

/** The call id of a `wait` call the log started and did not answer (the session is in that tool call), if any. */
const waitingIn = (events: ReadonlyArray<SessionEvent>): string | undefined => {
  let open: string | undefined
  for (const e of events) {
    const data = e.data as { callId?: string; name?: string; message?: { content: ReadonlyArray<{ toolCallId?: string }> } }
    if (e.type === "tool/call" && data.name === "wait") open = data.callId
    else if (e.type === "tool/result" && data.message?.content[0]?.toolCallId === open) open = undefined
  }
  return open
}

/** `effect`, or a defect naming `what` after `seconds`. */
const bounded = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>, seconds: number) =>
  Effect.timeoutFail(effect, {
    duration: Duration.seconds(seconds),
    onTimeout: () => new Error(`${what}: no answer within ${seconds} s`)
  }).pipe(Effect.orDie)

const range = (n: number) => Array.from({ length: n }, (_, i) => i)

describe.sequential("cluster failover", () => {
  describePg("runner processes on PostgreSQL", () => {
    it.live(
      "3 runners, 20 sessions: SIGKILL of a runner in a tool call → its sessions answer again elsewhere, repaired, every acknowledged delivery with one fate, queued followups run once",
      () =>
        Effect.gen(function*() {
          const WAIT = 10
          const url = yield* database
          const runners = yield* startRunners(url, 3, SETTINGS)
          const children = (): ReadonlyArray<Child> => runners
          const { client, logOf, owners } = yield* connect(url)
          const sessions = range(20).map((i) => `s${String(i).padStart(2, "0")}`)
          const logs = Effect.forEach(sessions, logOf, { concurrency: 4 })

          // Tool-using turns: the offline model calls `wait` (WAIT s), then `clock`.
          yield* bounded(
            "the first followups",
            Effect.forEach(
              sessions,
              (s) => client.followup(s, `wait ${WAIT} seconds and tell me the time`, { messageId: `${s}-f1` }),
              { concurrency: "unbounded" }
            ),
            60
          )
          yield* until("every session's turn to start", Effect.map(logs, (all) => all.every(running)), 30_000, children)
          // A second followup to each session whose turn is running: it waits in the inbox.
          const queued = new Set<string>()
          yield* bounded(
            "the queued followups",
            Effect.forEach(sessions, (s) =>
              Effect.gen(function*() {
                if (!running(yield* logOf(s))) return
                yield* client.followup(s, "thanks", { messageId: `${s}-f2` })
                queued.add(s)
              }), { concurrency: "unbounded" }),
            60
          )
          // The session whose `wait` started last (still far from its end): its owner is killed.
          const seen = new Map<string, number>()
          let target: string | undefined
          yield* until(
            "a session in its wait tool call",
            Effect.gen(function*() {
              const all = yield* logs
              const now = Date.now()
              all.forEach((events, i) => {
                const s = sessions[i]!
                if (waitingIn(events) !== undefined) {
                  if (!seen.has(s)) seen.set(s, now)
                } else seen.delete(s)
              })
              const fresh = [...seen].filter(([, at]) => now - at < (WAIT - 4) * 1000).sort((a, b) => b[1] - a[1])
              target = fresh[0]?.[0]
              return target !== undefined
            }),
            20_000,
            children,
            200
          )
          const session = target!
          const ownerPids = yield* owners
          const victim = runners.find((r) => r.pid === ownerPids.get(session))
          expect(victim, `the owner of ${session} is one of the runners`).toBeDefined()
          const killed = victim!
          const victims = sessions.filter((s) => ownerPids.get(s) === killed.pid)
          killed.signal("SIGKILL")
          const killedAt = Date.now()
          yield* exitOf(killed, 10_000)
          // What the killed runner wrote (nothing more can come from it).
          const before = new Map<string, ReadonlyArray<SessionEvent>>()
          for (const s of victims) before.set(s, yield* logOf(s))
          const waitCall = waitingIn(before.get(session)!)
          expect(waitCall, `${session} was in its wait tool call when its runner was killed`).toBeDefined()

          // The session answers again, from another runner.
          const survivors = runners.filter((r) => r !== killed).map((r) => r.pid)
          let takenAt = 0
          yield* Effect.forkScoped(until(
            "probe",
            Effect.map(owners, (o) => {
              if (survivors.includes(o.get(session) ?? -1)) {
                takenAt = Date.now() - killedAt
                return true
              }
              return false
            }),
            60_000,
            children
          ))
          yield* until(
            `${session} to answer from another runner`,
            Effect.gen(function*() {
              const answered = yield* Effect.option(Effect.timeout(client.status(session), Duration.seconds(2)))
              if (answered._tag === "None") return false
              return survivors.includes((yield* owners).get(session) ?? -1)
            }),
            SETTINGS.lockExpiry + MARGIN,
            children,
            100
          )
          const failover = Date.now() - killedAt

          // Every acknowledged delivery has one fate, the same from the cluster and from the log.
          const fates = yield* bounded(
            "the outcomes",
            Effect.forEach(sessions, (s) =>
              Effect.all([
                client.outcome(s, `${s}-f1`),
                queued.has(s) ? client.outcome(s, `${s}-f2`) : Effect.succeed(undefined)
              ]), { concurrency: "unbounded" }),
            90
          )
          yield* until(
            "every session's last turn to end",
            Effect.map(logs, (all) => all.every((events, i) => turnsEnded(events).length === (queued.has(sessions[i]!) ? 2 : 1))),
            60_000,
            children,
            200
          )
          const final = yield* logs
          for (const [i, s] of sessions.entries()) {
            const events = final[i]!
            const ids = queued.has(s) ? [`${s}-f1`, `${s}-f2`] : [`${s}-f1`]
            expect(Invariant.check(events), s).toEqual([])
            // Nothing duplicated: each delivery inserted once and entered once, one turn each.
            expect(insertedIds(events), s).toEqual(ids)
            expect(userMessageIds(events), s).toEqual(ids)
            expect(turnsStarted(events), s).toEqual(ids.map((_, n) => n + 1))
            const interrupted = victims.includes(s)
            expect(turnsEnded(events), s).toEqual(
              [`1 ${interrupted ? "interrupted" : "completed"}`, ...(queued.has(s) ? ["2 completed"] : [])]
            )
            expect(fates[i], s).toEqual([
              { _tag: "Entered", turn: 1, step: 1 },
              queued.has(s) ? { _tag: "Entered", turn: 2, step: 1 } : undefined
            ])
            for (const [n, id] of ids.entries()) expect(Delivery.fateOf(events, id), id).toEqual(fates[i]![n])
            if (interrupted) {
              // The killed runner's events, then the §10 closers, then the new owner's work.
              const prefix = before.get(s)!
              expect(events.slice(0, prefix.length), s).toEqual(prefix)
              const call = waitingIn(prefix)
              if (call !== undefined) {
                expect(brief(events.slice(prefix.length, prefix.length + 4)), s).toEqual([
                  `tool/result ${call} TOOL_OUTCOME_UNKNOWN`,
                  "step/end 1.1",
                  "turn/end 1 interrupted",
                  "session/end-seed"
                ])
              }
            }
          }
          expect(victims).toContain(session)
          expect(queued.has(session)).toBe(true)
          yield* Effect.logInfo(
            `failover of ${session} (runner ${killed.name}, ${victims.length} sessions): answered again ${failover} ms after the SIGKILL (taken at ${takenAt})`
          )
        }).pipe(Effect.scoped),
      180_000
    )
  })
})

export type { Runner }
void Fiber
void Path
void spawnChild
void describeChildren
