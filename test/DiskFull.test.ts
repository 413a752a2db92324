/**
 * A full disk during a turn, then space again (§23; §10, §12), on the JSONL
 * store in both fsync modes, its `write(2)` failing with `ENOSPC` through the failpoint seam:
 * a turn whose closing events can still be written ends `{kind:"error", code:"RUN_FAILED"}` (its
 * closers are tried six times over about 3 s: 100, 200, 400, 800 and 1,600 ms apart); one that
 * cannot be closed stops the agent (status `stopped`; nothing more is written: a later
 * `turn/start` would leave the log invalid for good), and resuming the session repairs the turn
 * and goes on.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Layer, Logger, LogLevel, Option, Schema, Scope, TestServices } from "effect"
import * as Agent from "../src/Agent.js"
import * as Delivery from "../src/Delivery.js"
import * as IdGenerator from "../src/IdGenerator.js"
import { makeJsonlWith, nodeIo } from "../src/internal/store/jsonl.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import { SessionStoreError } from "../src/SessionLog.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Tool from "../src/Tool.js"
import { advance, brief, layerTracked, settle } from "./utils/agent.js"
import { failpointIo, Failpoints, withFailpoints } from "./utils/failpoints.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const scratch = scratchDirs("disk-full-")

/** A JSONL store in `directory` whose appends from `at` on fail `ENOSPC` `times` times. */
const fullDisk = (directory: string, fsync: "none" | "batch", at: number, times: number) =>
  Effect.gen(function*() {
    const fp = new Failpoints({ at, times, fault: { _tag: "IoError", code: "ENOSPC", syscall: "write", bytes: 5 } })
    const store = yield* makeJsonlWith({ directory, fsync }, failpointIo(fp, nodeIo))
    return withFailpoints(store, fp, true)
  })

/**
 * Waits until the agent is idle, for at most 10 s of real time. With `fsync: "batch"` an append
 * returns when its `fdatasync` round is done: real I/O in the thread pool, which `settle` (and so
 * `advance`) does not see, so what follows a durable append (the agent going idle after its
 * turn's closers) is waited for, not read at once. The bound is on the live clock: the TestClock
 * does not move while the test waits, so a run that would need more virtual time fails here.
 */
const idle = (agent: Agent.Agent) =>
  TestServices.provideLive(Effect.timeoutFail(agent.awaitIdle, {
    duration: "10 seconds",
    onTimeout: () => new Error("the agent was not idle within 10 s")
  }))

const services = Layer.mergeAll(
  Model.layer(ScriptedModel.make([{ text: "one" }, { text: "two" }, { text: "three" }], { loop: true })),
  IdGenerator.layerSeeded(7),
  Logger.minimumLogLevel(LogLevel.None)
)

describe("a turn whose claim the store refuses", () => {
  it.scoped("is tried once more, then its work waits for the next delivery: no turn after turn without end", () =>
    Effect.gen(function*() {
      // Settings nested deeper than a log line may (256 levels): the claim's append, which
      // carries the request header, is refused every time; the turn's closers are small.
      let deep: unknown = "x"
      for (let i = 0; i < 300; i++) deep = [deep]
      const agent = yield* Agent.make({ sessionId: "s", settings: { deep } })
      const first = yield* agent.followup("go")
      yield* settle
      const events = agent.log.events()
      expect(Invariant.check(events)).toEqual([])
      expect(brief(events)).toEqual([
        "splice next-turn 0 +[go]",
        "turn/start 1",
        "turn/end 1 error:RUN_FAILED",
        "turn/start 2",
        "turn/end 2 error:RUN_FAILED"
      ])
      expect(Delivery.fateOf(events, first.messageId)).toEqual({ _tag: "Pending" })
      expect(yield* agent.status).toBe("idle")
    }).pipe(Effect.provide(Layer.mergeAll(SessionStore.layerMemory, services, layerTracked))))
})

describe("a stopped agent's queued deliveries", () => {
  it.scoped("get their outcome when the agent that resumes the session in this process decides them", () =>
    Effect.gen(function*() {
      const directory = scratch()
      // Append 1 the followup, 2 its claim, 3 the queued followup; the response (4) and the
      // six tries of closing the turn (5-10) fail: the agent stops with "queued" pending.
      const store = yield* fullDisk(directory, "none", 4, 7)
      const withStore = Effect.provideService(SessionStore.SessionStore, store)
      const agent = yield* withStore(Agent.make({ sessionId: "s" }))
      yield* agent.followup("hello")
      yield* settle
      const queued = yield* agent.followup("queued")
      const outcome = yield* Effect.fork(queued.outcome)
      yield* advance(10)
      // Closing the turn is tried again 100, 200, 400, 800 and 1,600 ms later.
      expect(yield* agent.status).toBe("running")
      yield* advance(3099)
      expect(yield* agent.status).toBe("running")
      yield* advance(1)
      expect(yield* agent.status).toBe("stopped")
      const stopped = yield* agent.stopCause
      expect(stopped._tag).toBe("Some")
      expect(yield* Effect.flip(agent.followup("more"))).toEqual(Option.getOrThrow(stopped))
      expect(outcome.unsafePoll()).toBeNull()
      // Space again; the same store resumes the session: repair, then the queued followup runs.
      const resumed = yield* withStore(Agent.resume("s", { continuePending: true }))
      yield* advance(10)
      expect(yield* Fiber.join(outcome)).toEqual(Delivery.entered(2, 1))
      yield* idle(resumed)
      expect(Invariant.check(resumed.log.events())).toEqual([])
    }).pipe(
      Effect.provide(Layer.mergeAll(
        Model.layer(ScriptedModel.make([{ text: "one", latencyMs: 10 }], { loop: true })),
        IdGenerator.layerSeeded(7),
        Logger.minimumLogLevel(LogLevel.None),
        layerTracked
      ))
    ))
})

describe("dispose on a full disk", () => {
  it.scoped("stops the run all the same (the queues could not be cleared), then fails with the store's error", () =>
    Effect.gen(function*() {
      const fp = new Failpoints({ at: 5, times: 100, fault: { _tag: "IoError", code: "ENOSPC", syscall: "write" } })
      const store = withFailpoints(yield* SessionStore.makeMemory, fp, false)
      const hang = Tool.make({ name: "hang", description: "", parameters: Schema.Struct({}), execute: () => Effect.never })
      const scope = yield* Scope.make()
      const agent = yield* Scope.extend(
        Agent.make({ sessionId: "s", tools: [hang] }).pipe(Effect.provideService(SessionStore.SessionStore, store)),
        scope
      )
      yield* agent.followup("go")
      yield* settle
      yield* agent.followup("queued")
      // Appends 1-4: the followup, the claim and step, the tool call, the queued followup; the
      // disk is full from 5 on (dispose's clearing of the queue is the first to fail).
      expect(brief(agent.log.events()).slice(-3)).toEqual([
        "assistant hang({})",
        "tool/call c1 hang",
        "splice next-turn 0 +[queued]"
      ])
      const disposing = yield* Effect.fork(Effect.flip(agent.dispose))
      // The interrupted turn's closers are tried six times over 3.1 s, then the agent stops.
      yield* advance(3100)
      const error = yield* Fiber.join(disposing)
      expect(error).toBeInstanceOf(SessionStoreError)
      expect(yield* agent.status).toBe("stopped")
      const events = agent.log.events()
      expect(Invariant.check(events)).toEqual([])
      expect(brief(events).at(-1)).toBe("splice next-turn 0 +[queued]")
    }).pipe(
      Effect.provide(Layer.mergeAll(
        services,
        Model.layer(ScriptedModel.make([{ toolCalls: [{ id: "c1", name: "hang", arguments: {} }] }])),
        layerTracked
      ))
    ))
})

describe("a full disk during a turn", () => {
  for (const fsync of ["none", "batch"] as const) {
    it.scoped(`fsync ${fsync}: space again before the turn is closed: the turn ends RUN_FAILED and the session goes on`, () =>
      Effect.gen(function*() {
        const directory = scratch()
        // Append 1 is the followup, 2 the turn's opening, 3 the response (fails once).
        const store = yield* fullDisk(directory, fsync, 3, 1)
        const agent = yield* Agent.make({ sessionId: "s" }).pipe(Effect.provideService(SessionStore.SessionStore, store))
        const first = yield* agent.followup("hello")
        expect(yield* first.outcome).toEqual(Delivery.entered(1, 1))
        yield* idle(agent)
        const second = yield* agent.followup("again")
        expect(yield* second.outcome).toEqual(Delivery.entered(2, 1))
        yield* idle(agent)
        const events = agent.log.events()
        expect(Invariant.check(events)).toEqual([])
        expect(brief(events).filter((e) => e.startsWith("turn/end"))).toEqual([
          "turn/end 1 error:RUN_FAILED",
          "turn/end 2 completed"
        ])
      }).pipe(Effect.provide(services)))

    it.scoped(`fsync ${fsync}: space again while the closers are tried again: the turn ends RUN_FAILED 300 ms later`, () =>
      Effect.gen(function*() {
        const directory = scratch()
        // The response (append 3) and the first two tries of the closers (4, 5) fail; the third
        // try, 100 + 200 ms later, gets through.
        const store = yield* fullDisk(directory, fsync, 3, 3)
        const agent = yield* Agent.make({ sessionId: "s" }).pipe(Effect.provideService(SessionStore.SessionStore, store))
        const first = yield* agent.followup("hello")
        expect(yield* first.outcome).toEqual(Delivery.entered(1, 1))
        yield* advance(299)
        expect(yield* agent.status).toBe("running")
        expect(brief(agent.log.events()).filter((e) => e.startsWith("turn/"))).toEqual(["turn/start 1"])
        // The third try, 300 ms after the first, closes the turn: the agent is idle once the
        // closers are durable (with "batch", when their fdatasync returns), with no more time.
        yield* advance(1)
        yield* idle(agent)
        expect(yield* Clock.currentTimeMillis).toBe(300)
        expect(yield* agent.status).toBe("idle")
        expect(Option.isNone(yield* agent.stopCause)).toBe(true)
        const second = yield* agent.followup("again")
        yield* advance(10)
        expect(yield* second.outcome).toEqual(Delivery.entered(2, 1))
        // Entered at step 1: the rest of turn 2 is written after it.
        yield* idle(agent)
        const events = agent.log.events()
        expect(Invariant.check(events)).toEqual([])
        expect(brief(events).filter((e) => e.startsWith("turn/end"))).toEqual([
          "turn/end 1 error:RUN_FAILED",
          "turn/end 2 completed"
        ])
      }).pipe(Effect.provide(Layer.merge(services, layerTracked))))

    it.scoped(`fsync ${fsync}: a turn that cannot be closed stops the agent; resume repairs it and goes on`, () =>
      Effect.gen(function*() {
        const directory = scratch()
        const scope = yield* Scope.make()
        // The response (append 3) and the six tries of closing the failed turn (4-9) fail;
        // then the disk has space again.
        const store = yield* Scope.extend(fullDisk(directory, fsync, 3, 7), scope)
        const agent = yield* Scope.extend(
          Agent.make({ sessionId: "s" }).pipe(Effect.provideService(SessionStore.SessionStore, store)),
          scope
        )
        const first = yield* agent.followup("hello")
        // It entered step 1 (append 2) before the disk filled.
        expect(yield* first.outcome).toEqual(Delivery.entered(1, 1))
        yield* advance(3100)
        yield* idle(agent)
        expect(yield* agent.status).toBe("stopped")
        // Space again: the stopped agent writes nothing; every delivery fails naming the cause.
        const refused = yield* Effect.flip(agent.followup("again"))
        expect(refused).toBeInstanceOf(SessionStoreError)
        expect(refused.message).toMatch(/^session "s" stopped: turn 1 could not be closed \(.*ENOSPC.*\); resume the session/)
        expect(yield* Effect.flip(agent.cancel())).toEqual(refused)
        const stoppedAt = agent.log.events()
        expect(Invariant.check(stoppedAt)).toEqual([])
        // Turn 1 is left open for the repair: nothing was written after its step began.
        expect(brief(stoppedAt).filter((e) => e.startsWith("turn/"))).toEqual(["turn/start 1"])
        yield* Scope.close(scope, { _tag: "Success", value: undefined } as never)
        // A restart: a new store resumes the session, repairs the open turn and goes on.
        const events = yield* Effect.gen(function*() {
          const resumed = yield* Agent.resume("s")
          const next = yield* resumed.followup("again")
          expect(yield* next.outcome).toEqual(Delivery.entered(2, 1))
          yield* idle(resumed)
          return resumed.log.events()
        }).pipe(Effect.provide(SessionStore.layerJsonl({ directory, fsync })))
        expect(Invariant.check(events)).toEqual([])
        expect(brief(events).filter((e) => e.startsWith("turn/end"))).toEqual([
          "turn/end 1 interrupted",
          "turn/end 2 completed"
        ])
      }).pipe(Effect.provide(Layer.merge(services, layerTracked))))
  }
})
