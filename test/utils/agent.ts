/**
 * Test helpers: an agent on the memory store with a scripted model and seeded ids; settling the
 * test's fibers and advancing the TestClock.
 */
import { expect } from "@effect/vitest"
import { Chunk, Clock, Context, Effect, FiberRef, Layer, TestClock } from "effect"
import * as Agent from "../../src/Agent.js"
import * as Delivery from "../../src/Delivery.js"
import * as IdGenerator from "../../src/IdGenerator.js"
import * as Settle from "../../src/internal/settle.js"
import * as Invariant from "../../src/Invariant.js"
import type { Message, UserMessage } from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as PreStep from "../../src/PreStep.js"
import type { SessionEvent } from "../../src/SessionEvent.js"
import type * as SessionLog from "../../src/SessionLog.js"
import * as SessionStore from "../../src/SessionStore.js"
import type * as Tool from "../../src/Tool.js"

/**
 * The memory store without its synchronous append, and with group-committed appends: each
 * append returns at the next "flush" (a macrotask), together with every append made before it,
 * as a JSONL append waits for its fsync round with `fsync: "batch"`. Every critical section of
 * the agent then takes the lock path.
 */
export const layerMemoryLocked: Layer.Layer<SessionStore.SessionStore> = Layer.effect(
  SessionStore.SessionStore,
  Effect.map(SessionStore.makeMemory, (store) => {
    let round: Array<() => void> | undefined = undefined
    const flushed = Effect.async<void>((resume) => {
      if (round === undefined) {
        const waiters: Array<() => void> = []
        round = waiters
        setImmediate(() => {
          round = undefined
          for (const wake of waiters) wake()
        })
      }
      round.push(() => resume(Effect.void))
    })
    const waiting = (log: SessionLog.SessionLog): SessionLog.SessionLog => ({
      ...log,
      append: (drafts) => Effect.tap(log.append(drafts), () => flushed),
      appendSync: undefined
    })
    return {
      ...store,
      create: (options) => Effect.map(store.create(options), waiting),
      open: (id) => Effect.map(store.open(id), waiting)
    }
  })
)

/**
 * How the store of an agent test appends: `"sync"` is the memory store (its synchronous append
 * makes each critical section one synchronous step); `"locked"` is `layerMemoryLocked` (no
 * synchronous append: every critical section takes the lock path, as with JSONL `fsync: "batch"`).
 */
export type StoreMode = "sync" | "locked"

/** The store of agent tests in the given mode. */
export const storeLayer = (mode: StoreMode = "sync"): Layer.Layer<SessionStore.SessionStore> =>
  mode === "locked" ? layerMemoryLocked : SessionStore.layerMemory

/**
 * The fibers of a test: a `FiberTracker` (internal/settle.ts) installed as a supervisor on the
 * fiber `layerTracked` is provided to, so it sees every fiber started from there on, the agent's
 * driver and tool fibers included (they are forked from the calling fiber's FiberRefs).
 */
export class TrackedFibers extends Context.Tag("test/TrackedFibers")<TrackedFibers, Settle.FiberTracker>() {}

/**
 * Installs a fresh `FiberTracker` on the fiber it is provided to, for the scope it is provided
 * in: provide it around the whole test (fibers started before it are not tracked).
 */
export const layerTracked: Layer.Layer<TrackedFibers> = Layer.scoped(
  TrackedFibers,
  Effect.suspend(() => {
    const tracker = new Settle.FiberTracker()
    return Effect.as(Effect.locallyScopedWith(FiberRef.currentSupervisor, (s) => s.zip(tracker)), tracker)
  })
)

/** Layers for an agent test: the store in `mode`, seeded ids, the given model and pre-step, tracked fibers. */
export const layer = (
  model: Model.ModelService,
  preStep: Layer.Layer<PreStep.PreStep> = PreStep.layer([]),
  mode: StoreMode = "sync"
) => Layer.mergeAll(storeLayer(mode), IdGenerator.layerSeeded(42), Model.layer(model), preStep, layerTracked)

/** A compact view of a log: `type` plus the fields that identify the event. */
export const brief = (events: ReadonlyArray<SessionEvent>): Array<string> =>
  events.map((e) => {
    const d = e.data as any
    switch (e.type) {
      case "agent/inbox/spliced": {
        const ins = d.inserted.map((m: UserMessage) => text(m)).join("|")
        return `splice ${d.target} ${d.start}${d.removedCount ? ` -${d.removedCount}` : ""}${ins ? ` +[${ins}]` : ""}${
          d.outcome ? ` ${d.outcome}` : ""
        }${d.cause ? ` cause=${d.cause.kind}` : ""}${d.wake ? " wake" : ""}`
      }
      case "turn/start":
        return `turn/start ${d.turn}`
      case "turn/end":
        return `turn/end ${d.turn} ${d.reason.kind}${d.reason.kind === "error" ? `:${d.reason.error.code}` : ""}${
          d.reason.kind === "aborted" ? `:${d.reason.reason.kind}` : ""
        }`
      case "step/start":
        return `step/start ${d.turn}.${d.step}`
      case "step/end":
        return `step/end ${d.turn}.${d.step}`
      case "user/message":
        return `user ${text(d)}${d.source.kind === "user" ? "" : ` (${d.source.kind})`}`
      case "assistant/message":
        return `assistant ${text(d.message)}${d.interrupted ? " (interrupted)" : ""}`
      case "tool/call":
        return `tool/call ${d.callId} ${d.name}`
      case "tool/result":
        return `tool/result ${d.message.content[0].toolCallId}${d.error ? ` ${d.error.code}` : ""}`
      case "request/header":
        return `request/header`
      case "approval/asked":
        return `asked ${d.id} ${d.toolName} ${d.callId}`
      case "approval/decided":
        return `decided ${d.id} ${d.outcome}${
          d.by ? ` by ${d.by.kind}${d.by.policy ? `:${d.by.policy}` : ""}${d.by.name ? `:${d.by.name}` : ""}` : ""
        }`
      default:
        return e.type
    }
  })

/** Text of a message: text blocks, tool calls as `name(args)`, tool results as their text. */
export const text = (m: Message): string =>
  m.content.map((b) =>
    b.type === "text"
      ? b.text
      : b.type === "tool-call"
      ? `${b.name}(${b.arguments})`
      : b.type === "tool-result"
      ? `result:${b.content.map((c) => (c.type === "text" ? c.text : "")).join("")}`
      : b.type === "reasoning"
      ? `~${b.text}`
      : ""
  ).join(" ")

/**
 * The most event-loop turns `settle` waits for. A settle in these suites takes 1 to 13 rounds
 * (measured; the longest are chains of flushes of the locked store); a runtime still busy after
 * this many never settles (a fiber that loops without suspending, or re-arms a macrotask
 * forever), and the test fails naming the fibers that still ran.
 */
export const SETTLE_ROUNDS = 10_000

/**
 * Lets the test's fibers (those started under `layerTracked`) run until each is suspended on
 * something outside the runtime (a clock sleep, a promise, I/O) or done, and none ran across a
 * real event-loop turn (so the `setImmediate` flushes of `layerMemoryLocked` happen). No time
 * passes. Dies with `Unsettled` after `SETTLE_ROUNDS` rounds.
 */
export const settle: Effect.Effect<void, never, TrackedFibers> = Effect.flatMap(
  TrackedFibers,
  (tracker) => Effect.orDie(Settle.settle(tracker, { maxRounds: SETTLE_ROUNDS }))
)

export { Agent }

/** Advances the TestClock by `ms`, sleep by sleep, letting the runtime settle before each step. */
export const advance = (ms: number) =>
  Effect.gen(function*() {
    yield* settle
    const start = yield* Clock.currentTimeMillis
    const target = start + ms
    while (true) {
      const now = yield* Clock.currentTimeMillis
      const sleeps = Chunk.toReadonlyArray(yield* TestClock.sleeps())
      const due = sleeps.filter((s) => s <= target)
      if (due.length === 0) {
        if (target > now) yield* TestClock.adjust(target - now)
        yield* settle
        return
      }
      const next = Math.min(...due)
      yield* TestClock.adjust(Math.max(0, next - now))
      yield* settle
    }
  })

/**
 * Waits in real time until `agent`'s log holds an event of `type`, for work that neither the
 * TestClock drives nor `settle` sees: a tool's file-system calls run on libuv's thread pool, so
 * the tool fiber is suspended (settled) while they run and `advance` may move the clock before
 * the tool's result is logged. Checks the log after each real event-loop turn (a 1 ms timer);
 * dies after `withinMs` of real time naming the events logged so far. The default, 10 s, is ~90 times
 * the slowest wait measured: the ACP `read_file` test's on-disk checks of a missing file took
 * 0 to 111 ms past `advance` in 10 runs on 2 cores loaded by two busy loops (load average 15).
 */
export const untilLogged = (
  agent: { readonly log: { readonly events: () => ReadonlyArray<SessionEvent> } },
  type: string,
  withinMs = 10_000
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const started = Date.now()
    while (!agent.log.events().some((e) => e.type === type)) {
      if (Date.now() - started >= withinMs) {
        return yield* Effect.die(
          new Error(`no ${type} in the log after ${withinMs} ms; logged: ${brief(agent.log.events()).join(", ")}`)
        )
      }
      yield* Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 1)))
    }
  })

/** Checks every delivery's outcome against `Delivery.fateOf` on the log, and the invariants. */
export const checkLog = (
  agent: Agent.Agent,
  deliveries: ReadonlyArray<Delivery.Delivery> = []
) =>
  Effect.gen(function*() {
    const events = agent.log.events()
    expect(Invariant.check(events)).toEqual([])
    for (const d of deliveries) {
      const fate = Delivery.fateOf(events, d.messageId)
      if (fate === undefined || fate._tag === "Pending") continue
      const outcome = yield* d.outcome
      expect(outcome).toEqual(fate)
    }
  })

/**
 * A `ToolContext` for calling a tool's `execute` directly, outside any agent: call `c` of turn 1
 * step 1, progress reports dropped, no agent (a tool that uses it, or makes a message, fails the
 * test).
 */
export const bareToolContext: Tool.ToolContext = {
  callId: "c",
  turn: 1,
  step: 1,
  agent: new Proxy({}, {
    get: (_, key) => {
      throw new Error(`bareToolContext has no agent (${String(key)})`)
    }
  }) as Tool.ToolContext["agent"],
  makeMessage: () => Effect.die("bareToolContext makes no message"),
  progress: () => Effect.void
}
