/**
 * The agent's public shape (§25, §2, §4): the inbox is an immutable value in a `Ref`
 * (`agent.inbox`), replaced with each durable splice; `agent.log` is a read-only view; a tool's
 * `ctx.agent` has the delivery methods' exact types; the errors have guards. Both store modes:
 * a synchronous store (one `Ref.modify` per section) and an asynchronous one (a
 * `SynchronizedRef`).
 */
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Layer, Ref, Schema, Stream } from "effect"
import * as Agent from "../src/Agent.js"
import * as AgentError from "../src/AgentError.js"
import type * as Delivery from "../src/Delivery.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Inbox from "../src/Inbox.js"
import * as Message from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Tool from "../src/Tool.js"
import { advance, brief, layerMemoryLocked, layerTracked, settle, text } from "./utils/agent.js"

const modes = [
  { name: "synchronous store", store: SessionStore.layerMemory },
  { name: "asynchronous store", store: layerMemoryLocked }
] as const

for (const mode of modes) {
  const layers = (model: Model.ModelService) =>
    Layer.mergeAll(mode.store, IdGenerator.layerSeeded(3), Model.layer(model), layerTracked)

  describe(`Agent shape (${mode.name})`, () => {
    it.scoped("agent.inbox is a Ref of an immutable value: a value read before a splice stays as it was", () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make()
        const empty = yield* agent.inbox
        expect(empty).toEqual({ nextTurn: [], nextStep: [] })
        expect(Ref.RefTypeId in agent.inbox).toBe(true)
        const c = yield* agent.inject({
          id: "ctx-1" as never,
          role: "user",
          content: [{ type: "text", text: "fyi" }],
          source: { kind: "plugin", plugin: "t" }
        })
        const one = yield* agent.inbox
        expect(one.nextStep.map((p) => [p.message.id, p.waking])).toEqual([["ctx-1", false]])
        // The earlier value did not change, and neither value can be changed.
        expect(empty).toEqual({ nextTurn: [], nextStep: [] })
        expect(Object.isFrozen(one) && Object.isFrozen(one.nextStep) && Object.isFrozen(one.nextTurn)).toBe(true)
        // Its items too: a waking flag cannot be turned on from outside (§6.3).
        expect(Object.isFrozen(one.nextStep[0])).toBe(true)
        expect(() => {
          ;(one.nextStep[0] as { waking: boolean }).waking = true
        }).toThrow(TypeError)
        // Reading twice without a splice gives the very same value (no copy per read).
        expect(yield* agent.inbox).toBe(one)
        yield* agent.remove(c.messageId)
        expect(yield* agent.inbox).toEqual(Inbox.empty)
        expect(one.nextStep).toHaveLength(1)
      }).pipe(Effect.provide(layers(ScriptedModel.make([])))))

    it.scoped("the inbox value equals the log's replay after every section of a run", () => {
      const model = ScriptedModel.make([{ latencyMs: 10, text: "one" }, { text: "two" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const queue = yield* agent.subscribe
        yield* agent.followup("first")
        yield* agent.followup("second")
        yield* agent.steer("steer")
        yield* advance(100)
        // At every committed event the Ref's value at the end equals the replay of the whole log.
        const events = agent.log.events()
        expect(yield* agent.inbox).toEqual(Inbox.replay(events))
        expect(brief(events).filter((l) => l.startsWith("turn/end"))).toEqual(["turn/end 1 completed", "turn/end 2 completed"])
        expect((yield* queue.takeAll).pipe((c) => [...c].filter((e) => e.type === "agent/inbox/claimed").length)).toBe(3)
      }).pipe(Effect.provide(layers(model)))
    })

    it.scoped("live events follow the log: a claim's notifications come right after its splices, before the step they enter", () => {
      const model = ScriptedModel.make([{ text: "one" }, { text: "two" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const queue = yield* agent.subscribe
        yield* agent.followup("first")
        yield* agent.followup("second")
        yield* advance(10)
        const seen = [...(yield* queue.takeAll)].flatMap((e) =>
          e.type === "agent/inbox/claimed" ?
            [`claimed ${text((e as { readonly message: Message.Message }).message)}`]
            : "seq" in e
            ? brief([e])
            : []
        )
        expect(seen).toEqual([
          "splice next-turn 0 +[first]",
          "splice next-turn 1 +[second]",
          "turn/start 1",
          "splice next-turn 0 -1",
          "claimed first",
          "step/start 1.1",
          "user first",
          "request/header",
          "assistant one",
          "step/end 1.1",
          "turn/end 1 completed",
          "turn/start 2",
          "splice next-turn 0 -1",
          "claimed second",
          "step/start 2.1",
          "user second",
          "assistant two",
          "step/end 2.1",
          "turn/end 2 completed"
        ])
      }).pipe(Effect.provide(layers(model)))
    })

    it.scoped("agent.log is read-only: id, header, path, events(); no append", () =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({ sessionId: "ro" })
        expect(Object.keys(agent.log).sort()).toEqual(["events", "header", "id"])
        expect("append" in agent.log).toBe(false)
        expect(Object.isFrozen(agent.log)).toBe(true)
        expect(agent.log.id).toBe("ro")
        expect(agent.log).toBe(agent.log)
        // @ts-expect-error the view has no append: only the agent writes its session
        expect(agent.log.append).toBe(undefined)
        yield* agent.followup("hi")
        expect(agent.log.events().length).toBeGreaterThan(0)
      }).pipe(Effect.provide(layers(ScriptedModel.make([{ text: "ok" }])))))

    it.scoped("a tool's ctx.agent has the delivery methods' exact types, and its steer joins the turn", () => {
      const steerer = Tool.make({
        name: "steerer",
        description: "steers while it runs",
        parameters: Schema.Struct({}),
        execute: (_args, ctx) => {
          expectTypeOf(ctx.agent.steer).returns.toEqualTypeOf<Effect.Effect<Delivery.Delivery, AgentError.DeliveryError>>()
          expectTypeOf(ctx.agent.inject).returns.toEqualTypeOf<Effect.Effect<Delivery.Delivery, AgentError.DeliveryError>>()
          return Effect.as(Effect.orDie(ctx.agent.steer("from the tool")), { content: "steered" })
        }
      })
      const model = ScriptedModel.make([{ toolCalls: [{ id: "c1", name: "steerer", arguments: {} }] }, { text: "done" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [steerer] })
        yield* agent.followup("go")
        yield* advance(10)
        expect(brief(agent.log.events())).toEqual([
          "splice next-turn 0 +[go]",
          "turn/start 1",
          "splice next-turn 0 -1",
          "step/start 1.1",
          "user go",
          "request/header",
          "assistant steerer({})",
          "tool/call c1 steerer",
          "splice next-step 0 +[from the tool] wake",
          "tool/result c1",
          "step/end 1.1",
          "splice next-step 0 -1",
          "step/start 1.2",
          "user from the tool",
          "assistant done",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
      }).pipe(Effect.provide(layers(model)))
    })
  })
}

describe("Agent live events end with the agent (§5.3, §9)", () => {
  it.scoped("after dispose every stream ends with agent/disposed, having taken every event; a later stream holds only that", () => {
    const never = Tool.make({ name: "never", description: "", parameters: Schema.Struct({}), execute: () => Effect.never })
    const model = ScriptedModel.make([{ toolCalls: [{ id: "c1", name: "never", arguments: {} }] }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [never] })
      const collected = yield* Effect.fork(Stream.runCollect(agent.events))
      const statuses = yield* Effect.fork(Stream.runCollect(agent.statusChanges))
      yield* settle // both streams subscribed
      yield* agent.followup("go")
      yield* advance(10)
      yield* agent.dispose
      const events = Chunk.toReadonlyArray(yield* Fiber.join(collected))
      const durable = events.filter((e) => "seq" in e)
      expect(durable.map((e) => (e as { seq: number }).seq)).toEqual(agent.log.events().map((e) => e.seq))
      expect(events.at(-1)).toEqual({ type: "agent/disposed" })
      expect(brief(durable.slice(-3) as never)).toEqual(["tool/result c1 ABORTED", "step/end 1.1", "turn/end 1 aborted:disposed"])
      expect(Chunk.toReadonlyArray(yield* Fiber.join(statuses))).toEqual(["idle", "running", "idle"])
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(agent.events))).toEqual([{ type: "agent/disposed" }])
    }).pipe(
      Effect.provide(Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layerSeeded(6), Model.layer(model), layerTracked))
    )
  })
})

describe("Delivery input checked at run time (§2, §5.1)", () => {
  it.scoped("inject refuses a string; UserMessage.make refuses a null source; nothing is logged", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make()
      const injected = yield* Effect.flip(agent.inject("plain" as never))
      expect([injected._tag, injected.message]).toEqual([
        "InvalidMessage",
        "inject takes a UserMessage whose source names its producer, not a string"
      ])
      const made = yield* Effect.flip(Message.UserMessage.make({ text: "x", source: null as never }))
      expect([made._tag, made.message]).toEqual([
        "InvalidMessage",
        "message source must be an object with a string kind (at source)"
      ])
      expect(agent.log.events()).toEqual([])
    }).pipe(
      Effect.provide(Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layerSeeded(8), Model.layer(ScriptedModel.make([]))))
    ))
})

describe("Values nested too deep (§23)", () => {
  it.scoped("a message or event data nested deeper than 240 levels is refused with a typed error naming where; nothing is logged", () =>
    Effect.gen(function*() {
      const nested = (n: number): unknown => {
        let v: unknown = []
        for (let i = 1; i < n; i++) v = [v]
        return v
      }
      const agent = yield* Agent.make()
      const deep = nested(10_000)
      // The path names where the limit was passed, cut to 80 characters.
      const at = (root: string) => `${`${root}${"[0]".repeat(240)}`.slice(0, 80)}…`
      const event = yield* Effect.flip(agent.appendEvent("x/y", deep))
      expect([event._tag, event.message]).toEqual([
        "InvalidEvent",
        `event data is not JSON: nested deeper than 240 levels of arrays and objects (at ${at("data")})`
      ])
      const made = yield* Effect.flip(Message.UserMessage.make({ text: "x", source: { kind: "user", deep } }))
      expect([made._tag, made.message]).toEqual([
        "InvalidMessage",
        `message nested deeper than 240 levels of arrays and objects (at ${at("source.deep")})`
      ])
      const followup = yield* Effect.flip(agent.followup({
        id: "m1" as never,
        role: "user",
        content: [{ type: "text", text: "x" }],
        source: { kind: "user", deep: nested(241) }
      }))
      expect(followup._tag).toBe("InvalidMessage")
      // 240 levels are accepted, and the log reads back.
      yield* agent.appendEvent("x/y", nested(240))
      expect(agent.log.events().map((e) => e.type)).toEqual(["x/y"])
    }).pipe(
      Effect.provide(Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layerSeeded(8), Model.layer(ScriptedModel.make([]))))
    ))
})

describe("appendEvent and the compaction bracket (§17)", () => {
  it.scoped("compaction/start, compaction/summary and compaction/end are the runtime's: InvalidEvent, nothing logged", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make()
      const refused: Array<[string, string]> = []
      for (const type of ["compaction/start", "compaction/summary", "compaction/end"]) {
        const error = yield* Effect.flip(agent.appendEvent(type, { compactionId: "k1", turn: null }))
        refused.push([error._tag, error.message])
      }
      expect(refused).toEqual([
        ["InvalidEvent", "\"compaction/start\" is not a plugin event type (a compaction event, appended by the runtime only)"],
        ["InvalidEvent", "\"compaction/summary\" is not a plugin event type (a compaction event, appended by the runtime only)"],
        ["InvalidEvent", "\"compaction/end\" is not a plugin event type (a compaction event, appended by the runtime only)"]
      ])
      // Another type of a plugin named like it is a plugin event.
      yield* agent.appendEvent("compaction/note", {})
      expect(agent.log.events().map((e) => e.type)).toEqual(["compaction/note"])
    }).pipe(
      Effect.provide(Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layerSeeded(4), Model.layer(ScriptedModel.make([]))))
    ))
})

describe("AgentError guards", () => {
  it.scoped("each error has a guard; DeliveryError covers the delivery failures", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make()
      const sent = yield* agent.followup("once")
      const duplicate = yield* Effect.flip(
        agent.followup({ id: sent.messageId, role: "user", content: [{ type: "text", text: "again" }], source: { kind: "user" } })
      )
      expect([
        AgentError.isDuplicateMessageId(duplicate),
        AgentError.isDeliveryError(duplicate),
        AgentError.isAgentDisposed(duplicate)
      ]).toEqual([true, true, false])
      const missing = yield* Effect.flip(agent.remove("nope"))
      expect([AgentError.isMessageNotPending(missing), AgentError.isDeliveryError(missing)]).toEqual([true, false])
      const invalid = yield* Effect.flip(agent.appendEvent("turn/start", {}))
      expect(AgentError.isInvalidEvent(invalid)).toBe(true)
      yield* agent.dispose
      const disposed = yield* Effect.flip(agent.followup("late"))
      expect([AgentError.isAgentDisposed(disposed), disposed.message]).toEqual([true, `agent ${agent.id} is disposed`])
    }).pipe(
      Effect.provide(
        Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layerSeeded(4), Model.layer(ScriptedModel.make([{ text: "ok" }])))
      )
    ))
})
