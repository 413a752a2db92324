/**
 * `AgentEntity` on a real PostgreSQL (§21), in one process: a runner (sharding over
 * PostgreSQL storage, sockets on loopback) and its `AgentClient`. A fresh database per test.
 * Real time: the cluster polls storage and passivates on its own clock. Every wait is a call or
 * a poll bounded by `bounds.ts`; one observation window (a session that must not be passivated).
 */
import { Sharding } from "@effect/cluster/Sharding"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, it } from "@effect/vitest"
import { Chunk, Context, Deferred, Duration, Effect, Either, Fiber, Layer, Redacted, Schedule, Schema, Stream } from "effect"
import * as Agent from "../src/Agent.js"
import type { AgentEvent } from "../src/AgentEvent.js"
import { AgentClient } from "../src/cluster/AgentClient.js"
import * as AgentRunner from "../src/cluster/AgentRunner.js"
import * as Invariant from "../src/Invariant.js"
import type { UserMessage } from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Offline from "../src/providers/Offline.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import { SessionStore } from "../src/SessionStore.js"
import * as SqlSessionStore from "../src/SqlSessionStore.js"
import * as Subagent from "../src/Subagent.js"
import * as Tool from "../src/Tool.js"
import { brief } from "./utils/agent.js"
import { CLUSTER_CALL_S, CLUSTER_PASSIVATION_S, CLUSTER_TEST_MS } from "./utils/bounds.js"
import { freePort } from "./utils/cluster.js"
import { bounded, gatedModel, insertedIds, logOf } from "./utils/entity.js"
import { createDatabase, describePg, dropDatabase } from "./utils/pg.js"

/** A fresh database, a runner on it, and a reader of its session logs; the database dropped after. */
const cluster = (
  options: {
    readonly gate?: Deferred.Deferred<void>
    readonly maxIdleTime?: Duration.DurationInput
    readonly retention?: Duration.DurationInput
    readonly pruneInterval?: Duration.DurationInput
    readonly fencedGrace?: Duration.DurationInput
    readonly tools?: ReadonlyArray<Tool.Tool<any>>
  }
) =>
  Effect.gen(function*() {
    const url = yield* Effect.acquireRelease(Effect.sync(createDatabase), (url) => Effect.sync(() => dropDatabase(url)))
    const port = yield* freePort
    const gate = options.gate ?? (yield* Deferred.make<void>())
    const runner = AgentRunner.layer({
      pg: url,
      host: "127.0.0.1",
      port,
      maxIdleTime: options.maxIdleTime,
      retention: options.retention,
      pruneInterval: options.pruneInterval,
      fencedGrace: options.fencedGrace,
      tools: options.tools
    }).pipe(Layer.provide(Model.layer(gatedModel(gate))))
    // A second store on the same database, to read the logs as a user would.
    const reader = SqlSessionStore.layer().pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url) })))
    const context = yield* Layer.build(Layer.merge(runner, reader))
    return { context, url }
  })

describePg("AgentEntity on PostgreSQL (runner and client in one process)", () => {
  it.live(
    "followup: the reply names the message once durable, the turn runs, outcome Entered {turn 1, step 1}",
    () =>
      Effect.gen(function*() {
        const { context } = yield* cluster({})
        const client = Context.get(context, AgentClient)
        const started = Date.now()
        const delivered = yield* bounded(client.followup("s1", "hello", { messageId: "m1" }))
        const firstCall = Date.now() - started
        expect(delivered).toEqual({ messageId: "m1" })
        expect(yield* bounded(client.outcome("s1", "m1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        const events = yield* Effect.provide(logOf("s1"), context)
        expect(insertedIds(events)).toEqual(["m1"])
        expect(events.filter((e) => e.type === "turn/end").map((e) => e.data)).toEqual([{
          turn: 1,
          reason: { kind: "completed" }
        }])
        expect(Invariant.check(events)).toEqual([])
        // An id never delivered.
        const missing = yield* Effect.flip(bounded(client.outcome("s1", "nope")))
        expect(missing).toMatchObject({ _tag: "MessageNotFound", messageId: "nope" })
        yield* Effect.logInfo(`first followup round trip (warm-up included): ${firstCall} ms`)
      }).pipe(Effect.scoped),
    CLUSTER_TEST_MS
  )

  it.live(
    "a retried delivery of an id already in the log answers with that delivery; the log holds one copy; the id reused for another kind or other content is refused",
    () =>
      Effect.gen(function*() {
        const { context } = yield* cluster({})
        const client = Context.get(context, AgentClient)
        expect(yield* bounded(client.followup("s2", "first", { messageId: "m1" }))).toEqual({ messageId: "m1" })
        // The same rpc again (the cluster's own answer).
        expect(yield* bounded(client.followup("s2", "first", { messageId: "m1" }))).toEqual({ messageId: "m1" })
        // The id and message again as another kind (another rpc: only the log tells): refused,
        // nothing logged.
        expect(yield* bounded(Effect.flip(client.steer("s2", "first", { messageId: "m1" })))).toMatchObject({
          _tag: "DuplicateMessageId",
          messageId: "m1",
          message: "message id m1 is already in the log as a followup"
        })
        // The id reused for another message: refused, nothing logged.
        const reused = yield* bounded(Effect.flip(client.followup("s2", "first again", { messageId: "m1" })))
        expect(reused).toMatchObject({
          _tag: "DuplicateMessageId",
          messageId: "m1",
          message: "message id m1 is already in the log with other content or source"
        })
        const plugin = { content: [{ type: "text" as const, text: "first" }], source: { kind: "plugin" as const, plugin: "p" } }
        expect(yield* bounded(Effect.flip(client.inject("s2", plugin, { messageId: "m1" })))).toMatchObject({
          _tag: "DuplicateMessageId"
        })
        expect(yield* bounded(Effect.flip(client.inject("s2", "x", { messageId: "" })))).toMatchObject({
          _tag: "InvalidMessage",
          message: "the message id is empty"
        })
        expect(yield* bounded(client.outcome("s2", "m1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        const events = yield* Effect.provide(logOf("s2"), context)
        expect(insertedIds(events)).toEqual(["m1"])
        expect(events.filter((e) => e.type === "turn/start").length).toBe(1)
      }).pipe(Effect.scoped),
    CLUSTER_TEST_MS
  )

  it.live("status, steer and outcome reach a session whose turn is running; events stream live", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const { context } = yield* cluster({ gate })
      const client = Context.get(context, AgentClient)
      // Subscribed first: the stream's first element says it is live.
      const live = yield* Deferred.make<void>()
      const collected = yield* client.events("s3").pipe(
        Stream.tap(() => Deferred.succeed(live, undefined)),
        Stream.takeUntil((e: AgentEvent) => e.type === "turn/end"),
        Stream.runCollect,
        Effect.fork
      )
      yield* bounded(Deferred.await(live))
      expect(yield* bounded(client.followup("s3", "hold on", { messageId: "f1" }))).toEqual({ messageId: "f1" })
      // The turn waits for the gate; these must not wait behind it. (The followup's reply comes
      // once its splice is durable: the turn's claim of it may come a moment later.)
      expect(
        yield* bounded(
          client.status("s3").pipe(
            Effect.filterOrFail((s) => s.nextTurn === 0, () => "not claimed yet" as const),
            Effect.retry({ schedule: Schedule.spaced(Duration.millis(20)), while: (e) => e === "not claimed yet" })
          )
        )
      ).toEqual({ status: "running", nextTurn: 0, nextStep: 0 })
      expect(yield* bounded(client.steer("s3", "also this", { messageId: "s1" }))).toEqual({ messageId: "s1" })
      const outcome = yield* Effect.fork(client.outcome("s3", "s1"))
      yield* Deferred.succeed(gate, undefined)
      expect(yield* bounded(Fiber.join(outcome))).toEqual({ _tag: "Entered", turn: 1, step: 2 })
      const events = Chunk.toReadonlyArray(yield* bounded(Fiber.join(collected)))
      expect(events[0]).toEqual({ type: "agent/status", status: "idle" })
      const durable = events.filter((e) => "seq" in e).map((e) => e.type)
      expect(durable).toEqual([
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "request/header",
        "agent/inbox/spliced",
        "assistant/message",
        "step/end",
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "assistant/message",
        "step/end",
        "turn/end"
      ])
    }).pipe(Effect.scoped), CLUSTER_TEST_MS)

  it.live(
    "passivation releases, never disposes: an injection stays pending and enters the next turn",
    () =>
      Effect.gen(function*() {
        const { context } = yield* cluster({ maxIdleTime: Duration.millis(500) })
        const client = Context.get(context, AgentClient)
        const sharding = Context.get(context, Sharding)
        expect(yield* bounded(client.inject("s4", "remember this", { messageId: "i1" }))).toEqual({ messageId: "i1" })
        expect(yield* sharding.activeEntityCount).toBe(1)
        // The cluster's reaper looks every 5 s at the earliest: passivated PASSIVATED_S_FIGURE.
        yield* bounded(
          Effect.repeat(sharding.activeEntityCount, { until: (n) => n === 0, schedule: Schedule.spaced(Duration.millis(200)) }),
          CLUSTER_PASSIVATION_S,
          "passivation"
        )
        expect(yield* bounded(client.followup("s4", "go", { messageId: "f1" }))).toEqual({ messageId: "f1" })
        expect(yield* bounded(client.outcome("s4", "i1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        expect(yield* bounded(client.outcome("s4", "f1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        const events = yield* Effect.provide(logOf("s4"), context)
        expect(events.filter((e) => e.type === "user/message").map((e) => (e.data as UserMessage).id)).toEqual(["i1", "f1"])
        expect(events.some((e) => e.type === "agent/inbox/spliced" && (e.data as { outcome?: string }).outcome === "canceled"))
          .toBe(false)
        expect(Invariant.check(events)).toEqual([])
      }).pipe(Effect.scoped),
    CLUSTER_TEST_MS
  )

  it.live("a running turn is kept alive: it is not passivated while it waits, and ends Entered", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const { context } = yield* cluster({ gate, maxIdleTime: Duration.millis(500) })
      const client = Context.get(context, AgentClient)
      const sharding = Context.get(context, Sharding)
      expect(yield* bounded(client.followup("s5", "hold on", { messageId: "f1" }))).toEqual({ messageId: "f1" })
      // Past the reaper's first look (5 s) with no rpc active: only the keep-alive holds it. An
      // observation window (no condition shows that a passivation does not come): the reaper runs
      // every 5 s from the runner's start, so 6.5 s after the followup's reply it has looked at
      // least once; an entity it passivates is gone at once (the test above saw it at its poll).
      yield* Effect.sleep(Duration.millis(6500))
      expect(yield* sharding.activeEntityCount).toBe(1)
      yield* Deferred.succeed(gate, undefined)
      expect(yield* bounded(client.outcome("s5", "f1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
      const events = yield* Effect.provide(logOf("s5"), context)
      expect(events.filter((e) => e.type === "turn/end").map((e) => e.data)).toEqual([{ turn: 1, reason: { kind: "completed" } }])
    }).pipe(Effect.scoped), CLUSTER_TEST_MS)

  it.live(
    "an rpc that meets an agent fenced by another writer is not answered with the fence: the owner of the shard reopens the session and delivers",
    () =>
      Effect.gen(function*() {
        const { context, url } = yield* cluster({ fencedGrace: Duration.millis(300) })
        const client = Context.get(context, AgentClient)
        expect(yield* bounded(client.followup("s7", "hello", { messageId: "m1" }))).toEqual({ messageId: "m1" })
        expect(yield* bounded(client.outcome("s7", "m1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        // Another writer takes the session (a new writer epoch) while the runner still owns the shard.
        const other = Context.get(
          yield* Layer.build(SqlSessionStore.layerPg({ url, writers: "takeover", maxConnections: 2 })),
          SessionStore
        )
        const taken = yield* other.open("s7")
        const before = taken.events().length
        // The entity's agent is fenced at its next append; the rpc reopens the session instead.
        expect(yield* bounded(client.followup("s7", "again", { messageId: "m2" }))).toEqual({ messageId: "m2" })
        expect(yield* bounded(client.outcome("s7", "m2"))).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        const events = yield* Effect.provide(logOf("s7"), context)
        expect(insertedIds(events)).toEqual(["m1", "m2"])
        expect(events.length).toBeGreaterThan(before)
        expect(Invariant.check(events)).toEqual([])
      }).pipe(Effect.scoped),
    CLUSTER_TEST_MS
  )

  it.live(
    "a client-only process (no shards) reaches the runner's sessions; processed messages are pruned",
    () =>
      Effect.gen(function*() {
        const { context, url } = yield* cluster({ retention: Duration.zero, pruneInterval: Duration.millis(300) })
        const clientOnly = yield* Layer.build(AgentRunner.layerClient({ pg: url }))
        const client = Context.get(clientOnly, AgentClient)
        const started = Date.now()
        expect(yield* bounded(client.followup("s6", "hello", { messageId: "m1" }))).toEqual({ messageId: "m1" })
        const firstCall = Date.now() - started
        expect(yield* bounded(client.outcome("s6", "m1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        const events = yield* Effect.provide(logOf("s6"), context)
        expect(insertedIds(events)).toEqual(["m1"])
        yield* Effect.logInfo(`client-only process, first followup round trip (warm-up included): ${firstCall} ms`)
        // Every processed message and its reply go (the entity's keep-alive may still be unprocessed).
        const processed = Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<{ n: string }>`SELECT count(*) AS n FROM cluster_messages WHERE processed`.pipe(
            Effect.zipWith(
              sql<{ n: string }>`SELECT count(*) AS n FROM cluster_replies`,
              (m, r) => [Number(m[0]!.n), Number(r[0]!.n)]
            )
          )).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url) })))
        yield* bounded(
          Effect.repeat(processed, {
            until: ([m, r]) =>
              m === 0 && r === 0,
            schedule: Schedule.spaced(Duration.millis(200))
          }),
          CLUSTER_CALL_S,
          "pruning"
        )
      }).pipe(Effect.scoped),
    CLUSTER_TEST_MS
  )

  it.live(
    "approvals: pendingApprovals lists the open question, a session waiting for a person is kept alive, of two approves one wins (a retry of the winner's is done), reject, ApprovalNotOpen, malformed decisions refused",
    () =>
      Effect.gen(function*() {
        let ran = 0
        const clock = Tool.make({
          name: "clock",
          description: "Tell the time.",
          parameters: Schema.Struct({}),
          approval: "always",
          execute: () =>
            Effect.sync(() => {
              ran++
              return { content: "noon" }
            })
        })
        const { context } = yield* cluster({ maxIdleTime: Duration.millis(500), tools: [clock] })
        const client = Context.get(context, AgentClient)
        const sharding = Context.get(context, Sharding)
        const asked = (turn: number) =>
          bounded(
            client.pendingApprovals("a1").pipe(
              Effect.filterOrFail((open) => open.length === 1 && open[0]!.turn === turn, () => "not asked yet" as const),
              Effect.retry({ schedule: Schedule.spaced(Duration.millis(50)), while: (e) => e === "not asked yet" })
            )
          )
        expect(yield* bounded(client.followup("a1", "what time is it", { messageId: "f1" }))).toEqual({ messageId: "f1" })
        const [question] = yield* asked(1)
        expect(question).toEqual({
          id: expect.stringMatching(/^[0-9a-f-]{36}$/),
          toolName: "clock",
          callId: "call_1_1_1",
          arguments: {},
          turn: 1,
          step: 1,
          askedAt: expect.any(Number)
        })
        const id = question!.id
        expect(yield* bounded(client.status("a1"))).toEqual({ status: "awaiting-approval", nextTurn: 0, nextStep: 0 })

        // Malformed decisions and a question that is not open: typed errors, nothing appended.
        const refused = (effect: Effect.Effect<void, unknown>) => bounded(Effect.flip(effect))
        expect(yield* refused(client.approve("a1", ""))).toMatchObject({ _tag: "InvalidDecision", field: "id" })
        expect(yield* refused(client.approve("a1", id, { name: " " }))).toMatchObject({ _tag: "InvalidDecision", field: "name" })
        expect(yield* refused(client.reject("a1", id, { reason: "" }))).toMatchObject({
          _tag: "InvalidDecision",
          field: "reason"
        })
        expect(yield* refused(client.approve("a1", "nope"))).toMatchObject({ _tag: "ApprovalNotOpen", approvalId: "nope" })

        // Past the reaper's first look (5 s; see "a running turn is kept alive"): an observation
        // window, no condition shows that a passivation does not come. The wait is a live run.
        yield* Effect.sleep(Duration.millis(6500))
        expect(yield* sharding.activeEntityCount).toBe(1)
        expect(yield* bounded(client.pendingApprovals("a1"))).toEqual([question])

        // Two people at once: exactly one decision is appended.
        const both = yield* bounded(
          Effect.all([client.approve("a1", id, { name: "ana" }), client.approve("a1", id, { name: "bo" })].map(Effect.either), {
            concurrency: 2
          })
        )
        expect(both.filter(Either.isRight).length).toBe(1)
        const winner = Either.isRight(both[0]!) ? "ana" : "bo"
        const loser = winner === "ana" ? "bo" : "ana"
        expect(both.find(Either.isLeft)!.left).toMatchObject({ _tag: "ApprovalNotOpen", approvalId: id })
        // The winner's decision again (a redelivery after a failover would be this): done, nothing appended.
        yield* bounded(client.approve("a1", id, { name: winner }))
        expect(yield* refused(client.approve("a1", id, { name: loser }))).toMatchObject({ _tag: "ApprovalNotOpen" })
        expect(yield* bounded(client.outcome("a1", "f1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })

        // A second question, rejected for every later call of the tool.
        expect(yield* bounded(client.followup("a1", "what time is it now", { messageId: "f2" }))).toEqual({ messageId: "f2" })
        const [second] = yield* asked(2)
        yield* bounded(client.reject("a1", second!.id, { reason: "not now", always: true, name: "ana" }))
        const ended = Effect.map(
          Effect.provide(logOf("a1"), context),
          (events) => events.filter((e) => e.type === "turn/end").length
        )
        yield* bounded(Effect.repeat(ended, { until: (n) => n === 2, schedule: Schedule.spaced(Duration.millis(50)) }))
        expect(yield* bounded(client.pendingApprovals("a1"))).toEqual([])
        expect(yield* bounded(client.status("a1"))).toEqual({ status: "idle", nextTurn: 0, nextStep: 0 })
        const events = yield* Effect.provide(logOf("a1"), context)
        expect(ran).toBe(1)
        expect(events.filter((e) => e.type === "approval/decided").map((e) => e.data)).toEqual([
          { id, outcome: "allowed-once", by: { kind: "person", name: winner } },
          { id: second!.id, outcome: "rejected-always", by: { kind: "person", name: "ana" }, reason: "not now" }
        ])
        expect(
          events.filter((e) => e.type === "tool/result").map((e) => {
            const data = e.data as { message: UserMessage }
            const block = data.message.content[0] as {
              toolCallId: string
              isError?: boolean
              content: ReadonlyArray<{ text: string }>
            }
            return [block.toolCallId, block.isError === true, block.content[0]?.text]
          })
        ).toEqual([
          ["call_1_1_1", false, "noon"],
          [
            "call_2_1_1",
            true,
            expect.stringContaining(
              "The call to clock was rejected (for every call of this tool in this session) by ana: not now"
            )
          ]
        ])
        expect(Invariant.check(events)).toEqual([])
      }).pipe(Effect.scoped),
    CLUSTER_TEST_MS
  )

  it.live(
    "a question asked by a writer that took the session since: approve reopens the session after fencedGrace and decides it there",
    () =>
      Effect.gen(function*() {
        let ran = 0
        const clock = Tool.make({
          name: "clock",
          description: "Tell the time.",
          parameters: Schema.Struct({}),
          approval: "always",
          execute: () =>
            Effect.sync(() => {
              ran++
              return { content: "noon" }
            })
        })
        const { context, url } = yield* cluster({ fencedGrace: Duration.millis(300), tools: [clock] })
        const client = Context.get(context, AgentClient)
        expect(yield* bounded(client.followup("a2", "hello", { messageId: "f1" }))).toEqual({ messageId: "f1" })
        expect(yield* bounded(client.outcome("a2", "f1"))).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        // Another writer takes the session while the runner still owns the shard, and asks.
        const other = yield* Layer.build(
          Layer.merge(SqlSessionStore.layerPg({ url, writers: "takeover", maxConnections: 2 }), Model.layer(Offline.make()))
        )
        const taker = yield* Agent.resume("a2", { tools: [clock] }).pipe(Effect.provide(other))
        yield* taker.followup("what time is it")
        const [question] = yield* bounded(
          taker.pendingApprovals.pipe(
            Effect.filterOrFail((open) => open.length === 1, () => "not asked yet" as const),
            Effect.retry({ schedule: Schedule.spaced(Duration.millis(20)), while: (e) => e === "not asked yet" })
          )
        )
        // The entity's agent never saw it: the stored log has it open, so the session is reopened.
        yield* bounded(client.approve("a2", question!.id, { name: "ana" }))
        const ended = Effect.map(
          Effect.provide(logOf("a2"), context),
          (events) => events.filter((e) => e.type === "turn/end").length
        )
        yield* bounded(Effect.repeat(ended, { until: (n) => n === 2, schedule: Schedule.spaced(Duration.millis(50)) }))
        const events = yield* Effect.provide(logOf("a2"), context)
        expect(ran).toBe(1)
        expect(events.filter((e) => e.type === "approval/decided").map((e) => e.data)).toEqual([
          { id: question!.id, outcome: "allowed-once", by: { kind: "person", name: "ana" } }
        ])
        expect(events.filter((e) => e.type === "turn/end").map((e) => e.data)).toEqual([
          { turn: 1, reason: { kind: "completed" } },
          { turn: 2, reason: { kind: "completed" } }
        ])
        expect(Invariant.check(events)).toEqual([])
      }).pipe(Effect.scoped),
    CLUSTER_TEST_MS
  )

  it.live(
    "a sub-agent's session: while its parent's call runs its own entity refuses every rpc (SessionDrivenByParent, its log untouched) and its question is listed and decided through the parent; after the call it takes a followup as any session",
    () =>
      Effect.gen(function*() {
        let ran = 0
        const clock = Tool.make({
          name: "clock",
          description: "Tell the time.",
          parameters: Schema.Struct({}),
          approval: "always",
          execute: () =>
            Effect.sync(() => {
              ran++
              return { content: "noon" }
            })
        })
        const { context } = yield* cluster({ tools: [Subagent.tool({ tools: [clock] })] })
        const client = Context.get(context, AgentClient)
        const read = (id: string) => Effect.provide(logOf(id), context)
        const turnsEnded = (events: ReadonlyArray<SessionEvent>) => events.filter((e) => e.type === "turn/end").length
        expect(yield* bounded(client.followup("sp", "ask a sub-agent to tell me the time", { messageId: "f1" }))).toEqual({
          messageId: "f1"
        })
        // The child's clock call asks; the parent lists the question with the child's session.
        const [question] = yield* bounded(
          client.pendingApprovals("sp").pipe(
            Effect.filterOrFail((open) => open.length === 1, () => "not asked yet" as const),
            Effect.retry({ schedule: Schedule.spaced(Duration.millis(50)), while: (e) => e === "not asked yet" })
          )
        )
        const parentEvents = yield* read("sp")
        const start = parentEvents.find((e) => e.type === "subagent/start")!.data as { id: string; callId: string }
        const child = start.id
        expect(start.callId).toBe("call_1_1_1")
        expect(question).toEqual({
          id: expect.stringMatching(/^[0-9a-f-]{36}$/),
          toolName: "clock",
          callId: "call_1_1_1",
          arguments: {},
          turn: 1,
          step: 1,
          askedAt: expect.any(Number),
          sessionId: child
        })
        expect(yield* bounded(client.status("sp"))).toEqual({ status: "awaiting-approval", nextTurn: 0, nextStep: 0 })

        // The child's own entity: refused, typed, never a second writer.
        const before = yield* read(child)
        const driven = {
          _tag: "SessionDrivenByParent",
          sessionId: child,
          parentSession: "sp",
          callId: "call_1_1_1",
          message: `session ${child} is a sub-agent that its parent session sp drives (call call_1_1_1): until that call ` +
            "ends it answers through sp (its questions: pendingApprovals, approve and reject of sp)"
        }
        const refused = <A, E>(effect: Effect.Effect<A, E>) => bounded(Effect.flip(effect))
        expect(yield* refused(client.followup(child, "hello", { messageId: "c1" }))).toMatchObject(driven)
        expect(yield* refused(client.status(child))).toMatchObject(driven)
        expect(yield* refused(client.pendingApprovals(child))).toMatchObject(driven)
        expect(yield* refused(client.approve(child, question!.id, { name: "ana" }))).toMatchObject(driven)
        expect(yield* read(child)).toEqual(before)

        // Decided through the parent: the decision goes to the child's log, the call completes.
        yield* bounded(client.approve("sp", question!.id, { name: "ana" }))
        yield* bounded(
          Effect.repeat(Effect.map(read("sp"), turnsEnded), { until: (n) => n === 1, schedule: Schedule.spaced(50) })
        )
        // A redelivery of that decision is done (found in the child's log); another person's is not.
        yield* bounded(client.approve("sp", question!.id, { name: "ana" }))
        expect(yield* refused(client.approve("sp", question!.id, { name: "bo" }))).toMatchObject({
          _tag: "ApprovalNotOpen",
          approvalId: question!.id
        })
        expect(ran).toBe(1)
        const parentLog = yield* read("sp")
        expect(brief(parentLog).filter((l) => l.startsWith("subagent/") || l.startsWith("tool/") || l.startsWith("turn/end")))
          .toEqual([
            "tool/call call_1_1_1 subagent",
            "subagent/start",
            "subagent/end",
            "tool/result call_1_1_1",
            "turn/end 1 completed"
          ])

        // The call ended: the child is an ordinary session, opened by its own entity.
        expect(yield* bounded(client.followup(child, "thanks", { messageId: "c2" }))).toEqual({ messageId: "c2" })
        expect(yield* bounded(client.outcome(child, "c2"))).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        yield* bounded(
          Effect.repeat(Effect.map(read(child), turnsEnded), { until: (n) => n === 2, schedule: Schedule.spaced(50) })
        )
        const childLog = yield* read(child)
        expect(childLog.filter((e) => e.type === "approval/decided").map((e) => e.data)).toEqual([
          { id: question!.id, outcome: "allowed-once", by: { kind: "person", name: "ana" } }
        ])
        expect(childLog.filter((e) => e.type === "turn/end").map((e) => e.data)).toEqual([
          { turn: 1, reason: { kind: "completed" } },
          { turn: 2, reason: { kind: "completed" } }
        ])
        expect(Invariant.check(parentLog)).toEqual([])
        expect(Invariant.check(childLog)).toEqual([])
      }).pipe(Effect.scoped),
    CLUSTER_TEST_MS
  )
})
