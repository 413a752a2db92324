/**
 * Release (passivation), outcomes by message id and deliveries by message id (§21): a
 * released agent writes nothing, keeps its inbox for the next `Agent.resume` and hands its
 * undecided outcome waiters to it; `agent.outcome(id)` gives the fate of any message the session
 * delivered, also before a resume; `agent.deliveryOf(id)` gives what the log holds for an id.
 * On the memory store (synchronous sections), the memory store without a synchronous append
 * (locked sections) and the JSONL store.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Fiber, Layer, Logger, Option, Schema, Scope, Stream } from "effect"
import * as Agent from "../src/Agent.js"
import type { AgentEvent } from "../src/AgentEvent.js"
import * as Delivery from "../src/Delivery.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import type { UserMessage } from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as PreStep from "../src/PreStep.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import type * as SessionLog from "../src/SessionLog.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Tool from "../src/Tool.js"
import { advance, brief, layerMemoryLocked, layerTracked, settle } from "./utils/agent.js"
import { tmpDir } from "./utils/tmp.js"

const context = (id: string, text: string): UserMessage => ({
  id: id as never,
  role: "user",
  content: [{ type: "text", text }],
  source: { kind: "plugin", plugin: "test" }
})

const prompt = (id: string, text: string): UserMessage => ({
  id: id as never,
  role: "user",
  content: [{ type: "text", text }],
  source: { kind: "user" }
})

/** Only the events' types and data, for comparing logs across stores (`time` is the TestClock's). */
const shapes = (events: ReadonlyArray<SessionEvent>) => events.map((e) => ({ seq: e.seq, type: e.type, data: e.data }))

const jsonl = Layer.unwrapScoped(Effect.map(tmpDir, (directory) => SessionStore.layerJsonl({ directory }))).pipe(
  Layer.provide(NodeFileSystem.layer)
)

const stores = [
  { name: "memory store", store: SessionStore.layerMemory },
  { name: "memory store, locked sections", store: layerMemoryLocked },
  { name: "JSONL store", store: jsonl }
] as const

/** A pre-step that holds a batch whose text includes "hold" for 1 s (TestClock), then enters it. */
const holding = PreStep.layer([
  (payload, next) =>
    payload.messages.some((m) => m.content.some((b) => b.type === "text" && b.text.includes("hold")))
      ? Effect.zipRight(Effect.sleep("1 second"), next(payload))
      : next(payload)
])

const takeAll = <A>(queue: { readonly takeAll: Effect.Effect<Chunk.Chunk<A>> }) =>
  Effect.map(queue.takeAll, (c) => Chunk.toReadonlyArray(c))

for (const mode of stores) {
  const layers = (model: Model.ModelService, preStep: Layer.Layer<PreStep.PreStep> = PreStep.layer([])) =>
    Layer.mergeAll(mode.store, IdGenerator.layerSeeded(7), Model.layer(model), preStep, layerTracked)

  describe(`agent.release (${mode.name})`, () => {
    it.scoped("inject, release, resume, followup: the injection enters with the followup; release wrote nothing", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const agent = yield* Agent.make({ sessionId: "s" }).pipe(Scope.extend(scope))
        const queue = yield* agent.subscribe
        const fyi = yield* agent.inject(context("ctx-1", "fyi"))
        // A waiter made before the release (§5.1 outcome), one made after it.
        const early = yield* Effect.fork(fyi.outcome)
        const early2 = yield* Effect.fork(agent.outcome("ctx-1"))
        yield* settle
        const before = agent.log.events().slice()
        expect(brief(before)).toEqual(["splice next-step 0 +[fyi]"])
        yield* agent.release
        const late = yield* Effect.fork(fyi.outcome)
        yield* settle
        expect(agent.log.events()).toEqual(before)
        expect((yield* takeAll(queue)).map((e) => e.type)).toEqual([
          "agent/inbox/spliced",
          "agent/inbox/inserted",
          "agent/disposed"
        ])
        expect(yield* agent.status).toBe("idle")
        // The scope closing does nothing more (no dispose splices).
        yield* Scope.close(scope, Exit.void)
        expect(agent.log.events()).toEqual(before)
        expect([early.unsafePoll(), early2.unsafePoll(), late.unsafePoll()]).toEqual([null, null, null])

        const next = yield* Agent.resume("s")
        expect((yield* next.inbox).nextStep.map((p) => [p.message.id, p.waking])).toEqual([["ctx-1", false]])
        expect(brief(next.log.events()).slice(before.length)).toEqual(["session/end-seed"])
        const go = yield* next.followup(prompt("go-1", "go"))
        yield* advance(10)
        expect(brief(next.log.events()).slice(before.length)).toEqual([
          "session/end-seed",
          "splice next-turn 0 +[go]",
          "turn/start 1",
          "splice next-step 0 -1",
          "splice next-turn 0 -1",
          "step/start 1.1",
          "user fyi (plugin)",
          "user go",
          "request/header",
          "assistant ok",
          "step/end 1.1",
          "turn/end 1 completed"
        ])
        const entered = { _tag: "Entered", turn: 1, step: 1 }
        expect(yield* go.outcome).toEqual(entered)
        expect(yield* Fiber.join(early)).toEqual(entered)
        expect(yield* Fiber.join(early2)).toEqual(entered)
        expect(yield* Fiber.join(late)).toEqual(entered)
        expect(Delivery.fateOf(next.log.events(), "ctx-1")).toEqual(entered)
        expect(Invariant.check(next.log.events())).toEqual([])
      }).pipe(Effect.provide(layers(ScriptedModel.make([{ text: "ok" }])))))

    it.scoped("release while a pre-step holds the claim: the turn stays open; resume repairs it and runs the queued followup", () => {
      const logged: Array<string> = []
      const capture = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => logged.push(String(message))))
      return Effect.gen(function*() {
        const scope = yield* Scope.make()
        const agent = yield* Agent.make({ sessionId: "s" }).pipe(Scope.extend(scope))
        const queue = yield* agent.subscribe
        const first = yield* agent.followup(prompt("first", "hold first"))
        const second = yield* agent.followup(prompt("second", "second"))
        const firstWaiter = yield* Effect.fork(first.outcome)
        const secondWaiter = yield* Effect.fork(second.outcome)
        yield* advance(100)
        const before = agent.log.events().slice()
        expect(brief(before)).toEqual([
          "splice next-turn 0 +[hold first]",
          "splice next-turn 1 +[second]",
          "turn/start 1",
          "splice next-turn 0 -1"
        ])
        yield* takeAll(queue)
        yield* agent.release
        expect(agent.log.events()).toEqual(before)
        expect((yield* takeAll(queue)).map((e) => e.type === "agent/status" ? `status ${e.status}` : e.type)).toEqual([
          "status idle",
          "agent/disposed"
        ])
        // The pre-step's sleep was interrupted: time passing writes nothing.
        yield* advance(5000)
        yield* Scope.close(scope, Exit.void)
        expect(agent.log.events()).toEqual(before)
        // The claimed message gets the fate the repair gives it; the queued one waits for the next agent.
        expect(yield* Fiber.join(firstWaiter)).toEqual({ _tag: "Dropped", reason: "interrupted" })
        expect(secondWaiter.unsafePoll()).toBe(null)

        const next = yield* Agent.resume("s", { continuePending: true })
        expect((yield* next.inbox).nextTurn.map((m) => m.id)).toEqual(["second"])
        yield* advance(10)
        expect(brief(next.log.events()).slice(before.length)).toEqual([
          "turn/end 1 interrupted",
          "session/end-seed",
          "turn/start 2",
          "splice next-turn 0 -1",
          "step/start 2.1",
          "user second",
          "request/header",
          "assistant ok",
          "step/end 2.1",
          "turn/end 2 completed"
        ])
        expect(Delivery.fateOf(next.log.events(), "first")).toEqual({ _tag: "Dropped", reason: "interrupted" })
        expect(yield* Fiber.join(secondWaiter)).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        expect(yield* next.outcome("first")).toEqual({ _tag: "Dropped", reason: "interrupted" })
        expect(Invariant.check(next.log.events())).toEqual([])
        // A release is no failure: nothing is logged.
        expect(logged).toEqual([])
      }).pipe(Effect.provide(Layer.merge(layers(ScriptedModel.make([{ text: "ok" }]), holding), capture)))
    })

    it.scoped("release while the model streams: nothing of the stream is logged; resume closes the step and the turn interrupted", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const agent = yield* Agent.make({ sessionId: "s" }).pipe(Scope.extend(scope))
        const go = yield* agent.followup(prompt("go", "go"))
        yield* advance(10)
        const fyi = yield* agent.inject(context("ctx-1", "fyi"))
        // One of two deltas streamed (at 50 ms of 100).
        yield* advance(50)
        const before = agent.log.events().slice()
        expect(brief(before)).toEqual([
          "splice next-turn 0 +[go]",
          "turn/start 1",
          "splice next-turn 0 -1",
          "step/start 1.1",
          "user go",
          "request/header",
          "splice next-step 0 +[fyi]"
        ])
        expect(yield* agent.status).toBe("running")
        yield* agent.release
        expect(yield* agent.status).toBe("idle")
        yield* advance(1000)
        yield* Scope.close(scope, Exit.void)
        expect(agent.log.events()).toEqual(before)
        expect(yield* go.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })

        const next = yield* Agent.resume("s")
        expect(brief(next.log.events()).slice(before.length)).toEqual([
          "step/end 1.1",
          "turn/end 1 interrupted",
          "session/end-seed"
        ])
        expect((yield* next.inbox).nextStep.map((p) => p.message.id)).toEqual(["ctx-1"])
        yield* next.steer(prompt("more", "more"))
        yield* advance(200)
        // `fyi.outcome` is asked of the released agent after the resume: it follows the resumed one.
        expect(brief(next.log.events()).slice(before.length + 3, before.length + 10)).toEqual([
          "splice next-step 1 +[more] wake",
          "turn/start 2",
          "splice next-step 0 -2",
          "step/start 2.1",
          "user fyi (plugin)",
          "user more",
          "assistant three four"
        ])
        expect(yield* fyi.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        expect(Invariant.check(next.log.events())).toEqual([])
      }).pipe(Effect.provide(layers(ScriptedModel.make([{ latencyMs: 100, text: "one two" }, { text: "three four" }])))))

    it.scoped("release during a tool batch: the tools are interrupted, nothing is logged; resume closes each call", () => {
      const interrupted: Array<string> = []
      const hang = Tool.make({
        name: "hang",
        description: "",
        parameters: Schema.Struct({ n: Schema.Number }),
        execute: ({ n }) => Effect.onInterrupt(Effect.never, () => Effect.sync(() => interrupted.push(`hang ${n}`)))
      })
      const model = ScriptedModel.make([{
        toolCalls: [{ id: "c1", name: "hang", arguments: { n: 1 } }, { id: "c2", name: "hang", arguments: { n: 2 } }]
      }, { text: "after" }])
      return Effect.gen(function*() {
        const scope = yield* Scope.make()
        const agent = yield* Agent.make({ sessionId: "s", tools: [hang] }).pipe(Scope.extend(scope))
        yield* agent.followup(prompt("go", "go"))
        yield* advance(10)
        const before = agent.log.events().slice()
        expect(brief(before).slice(-4)).toEqual([
          "request/header",
          "assistant hang({\"n\":1}) hang({\"n\":2})",
          "tool/call c1 hang",
          "tool/call c2 hang"
        ])
        yield* agent.release
        expect(interrupted).toEqual(["hang 1", "hang 2"])
        yield* Scope.close(scope, Exit.void)
        expect(agent.log.events()).toEqual(before)
        const next = yield* Agent.resume("s", { tools: [hang] })
        expect(brief(next.log.events()).slice(before.length)).toEqual([
          "tool/result c1 TOOL_OUTCOME_UNKNOWN",
          "tool/result c2 TOOL_OUTCOME_UNKNOWN",
          "step/end 1.1",
          "turn/end 1 interrupted",
          "session/end-seed"
        ])
        expect(Invariant.check(next.log.events())).toEqual([])
      }).pipe(Effect.provide(layers(model)))
    })

    it.scoped("after release: deliveries fail AgentDisposed, writes fail SessionStoreError, dispose and release do nothing", () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ sessionId: "s" })
        yield* agent.inject(context("ctx-1", "fyi"))
        const before = agent.log.events().slice()
        yield* agent.release
        const disposed = ["AgentDisposed", "agent s was released: resume the session to deliver to it", "s"]
        const failures = yield* Effect.all([
          Effect.flip(agent.followup("hi")),
          Effect.flip(agent.steer("hi")),
          Effect.flip(agent.inject(context("ctx-2", "more"))),
          Effect.flip(agent.replace("ctx-1", context("ctx-3", "other")))
        ])
        expect(failures.map((e) => [e._tag, e.message, (e as { agentId?: string }).agentId])).toEqual([
          disposed,
          disposed,
          disposed,
          disposed
        ])
        const stored = "agent s was released: it writes nothing more; resume the session to go on"
        const writes = yield* Effect.all([
          Effect.flip(agent.cancel()),
          Effect.flip(agent.remove("ctx-1")),
          Effect.flip(agent.clear()),
          Effect.flip(agent.appendEvent("test/note", {}))
        ])
        expect(writes.map((e) => [e._tag, e.message])).toEqual([
          ["SessionStoreError", stored],
          ["SessionStoreError", stored],
          ["SessionStoreError", stored],
          ["SessionStoreError", stored]
        ])
        expect(yield* agent.dispose).toBe(undefined)
        expect(yield* agent.release).toBe(undefined)
        expect(yield* agent.status).toBe("idle")
        expect(Chunk.toReadonlyArray(yield* Stream.runCollect(agent.events)).map((e: AgentEvent) => e.type)).toEqual([
          "agent/disposed"
        ])
        expect(agent.log.events()).toEqual(before)
        // The inbox is as the log has it.
        expect((yield* agent.inbox).nextStep.map((p) => p.message.id)).toEqual(["ctx-1"])
      }).pipe(Effect.provide(layers(ScriptedModel.make([{ text: "ok" }])))))

    it.scoped("release after dispose or on a second call is a no-op; a disposed session resumes as before", () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ sessionId: "s" })
        yield* agent.inject(context("ctx-1", "fyi"))
        yield* agent.dispose
        const after = agent.log.events().slice()
        yield* agent.release
        expect(agent.log.events()).toEqual(after)
        expect(brief(after)).toEqual(["splice next-step 0 +[fyi]", "splice next-step 0 -1 canceled cause=disposed"])
        const next = yield* Agent.resume("s")
        expect(yield* next.outcome("ctx-1")).toEqual({ _tag: "Dropped", reason: "disposed" })
      }).pipe(Effect.provide(layers(ScriptedModel.make([{ text: "ok" }])))))
  })

  describe(`agent.outcome (${mode.name})`, () => {
    it.scoped("entered, canceled, pending then entered, never delivered; a message delivered before a resume", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const agent = yield* Agent.make({ sessionId: "s" }).pipe(Scope.extend(scope))
        yield* agent.followup(prompt("go", "go"))
        yield* advance(10)
        expect(yield* agent.outcome("go")).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        yield* agent.inject(context("dropped", "x"))
        yield* agent.cancel()
        expect(yield* agent.outcome("dropped")).toEqual({ _tag: "Dropped", reason: "canceled" })
        yield* agent.inject(context("later", "y"))
        const waiting = yield* Effect.fork(agent.outcome("later"))
        yield* settle
        expect(waiting.unsafePoll()).toBe(null)
        yield* agent.followup(prompt("go2", "go again"))
        yield* advance(10)
        expect(yield* Fiber.join(waiting)).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        const unknown = yield* Effect.flip(agent.outcome("nope"))
        expect([unknown._tag, unknown.message, unknown.messageId]).toEqual([
          "MessageNotFound",
          "message nope was never delivered in session s",
          "nope"
        ])
        // An assistant message has an id, but was never delivered.
        const assistantId = (agent.log.events().find((e) => e.type === "assistant/message")!.data as any).message.id
        expect((yield* Effect.flip(agent.outcome(assistantId)))._tag).toBe("MessageNotFound")
        yield* agent.inject(context("pending", "z"))
        yield* agent.release
        yield* Scope.close(scope, Exit.void)

        const next = yield* Agent.resume("s")
        expect(yield* Effect.all([next.outcome("go"), next.outcome("dropped"), next.outcome("later")])).toEqual([
          { _tag: "Entered", turn: 1, step: 1 },
          { _tag: "Dropped", reason: "canceled" },
          { _tag: "Entered", turn: 2, step: 1 }
        ])
        const pending = yield* Effect.fork(next.outcome("pending"))
        yield* settle
        expect(pending.unsafePoll()).toBe(null)
        expect((yield* Effect.flip(next.outcome("nope")))._tag).toBe("MessageNotFound")
        yield* next.followup(prompt("go3", "third"))
        yield* advance(10)
        expect(yield* Fiber.join(pending)).toEqual({ _tag: "Entered", turn: 3, step: 1 })
      }).pipe(Effect.provide(layers(ScriptedModel.make([{ text: "ok" }], { loop: true })))))
  })

  describe(`agent.deliveryOf (${mode.name})`, () => {
    it.scoped("what the log holds for a delivered id, also after a resume; none for other ids", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const agent = yield* Agent.make({ sessionId: "s" }).pipe(Scope.extend(scope))
        expect(agent.deliveryOf("go")).toEqual(Option.none())
        yield* agent.followup(prompt("go", "go"))
        yield* advance(10) // the model answers at 100 ms: the turn runs
        yield* agent.steer(prompt("steer", "also"))
        yield* agent.inject(context("ctx", "fyi"))
        const expected = [
          Option.some({ message: prompt("go", "go"), delivery: "followup" }),
          Option.some({ message: prompt("steer", "also"), delivery: "steer" }),
          Option.some({ message: context("ctx", "fyi"), delivery: "inject" }),
          Option.none()
        ]
        const ids = ["go", "steer", "ctx", "nope"]
        expect(ids.map(agent.deliveryOf)).toEqual(expected)
        yield* advance(1000)
        const assistantId = (agent.log.events().find((e) => e.type === "assistant/message")!.data as any).message.id
        expect(agent.deliveryOf(assistantId)).toEqual(Option.none())
        expect(ids.map(agent.deliveryOf)).toEqual(expected)
        yield* agent.release
        yield* Scope.close(scope, Exit.void)
        const next = yield* Agent.resume("s")
        expect(ids.map(next.deliveryOf)).toEqual(expected)
      }).pipe(Effect.provide(layers(ScriptedModel.make([{ latencyMs: 100, text: "ok" }], { loop: true })))))
  })
}

describe("agent.release closes the log", () => {
  /** The memory store whose logs have a `close` that records the session id (one wrapper per log). */
  const closing = (closed: Array<string>) =>
    Layer.effect(
      SessionStore.SessionStore,
      Effect.map(SessionStore.makeMemory, (store) => {
        const logs = new Map<string, SessionLog.SessionLog>()
        const wrap = (log: SessionLog.SessionLog) => {
          let wrapped = logs.get(log.id)
          if (wrapped === undefined) {
            wrapped = { ...log, close: Effect.sync(() => closed.push(log.id)) } as SessionLog.SessionLog
            logs.set(log.id, wrapped)
          }
          return wrapped
        }
        return { ...store, create: (o) => Effect.map(store.create(o), wrap), open: (id) => Effect.map(store.open(id), wrap) }
      })
    )

  it.scoped("release calls the log's close once; a second release and dispose do not", () => {
    const closed: Array<string> = []
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ sessionId: "s" })
      yield* agent.followup(prompt("go", "go"))
      yield* advance(10)
      expect(yield* agent.status).toBe("running")
      expect(closed).toEqual([])
      yield* agent.release
      expect(closed).toEqual(["s"])
      yield* agent.release
      yield* agent.dispose
      expect(closed).toEqual(["s"])
      const next = yield* Agent.resume("s")
      yield* next.dispose
      expect(closed).toEqual(["s"])
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          closing(closed),
          IdGenerator.layerSeeded(7),
          Model.layer(ScriptedModel.make([{ latencyMs: 100, text: "ok" }])),
          layerTracked
        )
      )
    )
  })
})

describe("agent.release across stores", () => {
  it.scoped("the memory store and the JSONL store give the same log for inject, release, resume, followup", () =>
    Effect.gen(function*() {
      const run = (store: Layer.Layer<SessionStore.SessionStore>) =>
        Effect.scoped(Effect.gen(function*() {
          const agent = yield* Agent.make({ sessionId: "s" })
          yield* agent.inject(context("ctx-1", "fyi"))
          yield* agent.release
          const next = yield* Agent.resume("s")
          yield* next.followup(prompt("go", "go"))
          yield* advance(10)
          return shapes(next.log.events())
        })).pipe(
          Effect.provide(Layer.mergeAll(store, IdGenerator.layerSeeded(7), Model.layer(ScriptedModel.make([{ text: "ok" }]))))
        )
      const memory = yield* run(SessionStore.layerMemory)
      const file = yield* run(jsonl)
      expect(file).toEqual(memory)
      expect(memory.map((e) => e.type)).toEqual([
        "agent/inbox/spliced",
        "session/end-seed",
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "user/message",
        "request/header",
        "assistant/message",
        "step/end",
        "turn/end"
      ])
    }).pipe(Effect.provide(layerTracked)))
})
