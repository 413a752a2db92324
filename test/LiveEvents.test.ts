/**
 * The live events hub (§5.3, `src/internal/agent/hub.ts`): each subscription is a
 * `Queue.Dequeue` with `PubSub.subscribe`'s semantics (every event published after it was made,
 * in order, unbounded; the `Queue` functions work on it; shut down with its scope, its waiting
 * takers interrupted), here through `agent.subscribe` / `agent.events` and on the hub itself.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Fiber, Layer, Option, Queue, Scope, Stream } from "effect"
import * as Agent from "../src/Agent.js"
import type { AgentEvent } from "../src/AgentEvent.js"
import * as IdGenerator from "../src/IdGenerator.js"
import { Hub } from "../src/internal/agent/hub.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as SessionStore from "../src/SessionStore.js"
import { advance, layerTracked, settle } from "./utils/agent.js"

const layers = (model: Model.ModelService) =>
  Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layerSeeded(3), Model.layer(model), layerTracked)

/** A model that streams each response's text as one delta per character. */
const streaming = (...texts: ReadonlyArray<string>): Model.ModelService => {
  let n = 0
  return {
    provider: "test",
    model: "chars",
    respond: (_request, sink) =>
      Effect.suspend(() => {
        const text = texts[n++] ?? ""
        return Effect.zipRight(
          Effect.forEach([...text], (c) => sink.part({ type: "text-delta", text: c }), { discard: true }),
          sink.part({ type: "finish", reason: "stop" })
        )
      })
  }
}

const kinds = (events: Iterable<AgentEvent>) => [...events].map((e) => e.type === "assistant/delta" ? `delta ${e.text}` : e.type)

describe("live events (§5.3)", () => {
  it.scoped("two subscriptions each get every event in order; a later one only what follows it; the deltas of a streamed step", () => {
    const model = streaming("ab", "cd")
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      const first = yield* agent.subscribe
      yield* agent.followup("one")
      yield* advance(10)
      const second = yield* agent.subscribe
      yield* agent.followup("again")
      yield* advance(10)
      const all = Chunk.toReadonlyArray(yield* Queue.takeAll(first))
      const later = Chunk.toReadonlyArray(yield* Queue.takeAll(second))
      const turn = [
        "agent/inbox/spliced",
        "agent/inbox/inserted",
        "agent/status",
        "turn/start",
        "agent/inbox/spliced",
        "agent/inbox/claimed",
        "step/start",
        "user/message"
      ]
      expect(kinds(all)).toEqual([
        ...turn,
        "request/header", // once per session while the request's header stays the same
        "delta a",
        "delta b",
        "assistant/message",
        "step/end",
        "turn/end",
        "agent/status",
        ...turn,
        "delta c",
        "delta d",
        "assistant/message",
        "step/end",
        "turn/end",
        "agent/status"
      ])
      expect(later).toEqual(all.slice(all.length - later.length))
      expect(later.length).toBe(14)
      expect(yield* Queue.size(first)).toBe(0)
    }).pipe(Effect.provide(layers(model)))
  })

  it.effect("the Queue functions on a subscription: take, poll, takeUpTo, takeBetween waits for its minimum, size, isFull", () =>
    Effect.gen(function*() {
      const hub = new Hub<number>()
      const q = hub.subscribe()
      expect(Queue.isDequeue(q)).toBe(true)
      hub.publish(1)
      hub.publish(2)
      hub.publish(3)
      expect(yield* Queue.size(q)).toBe(3)
      expect(yield* Queue.isFull(q)).toBe(false)
      expect(yield* Queue.take(q)).toBe(1)
      expect(yield* Queue.poll(q)).toEqual(Option.some(2))
      expect(Chunk.toReadonlyArray(yield* Queue.takeUpTo(q, 5))).toEqual([3])
      expect(yield* Queue.poll(q)).toEqual(Option.none())
      expect(yield* Queue.isEmpty(q)).toBe(true)
      const between = yield* Effect.fork(Queue.takeBetween(q, 2, 3))
      hub.publish(4)
      yield* Effect.yieldNow()
      expect(between.unsafePoll()).toBe(null)
      hub.publish(5)
      hub.publish(6)
      expect(Chunk.toReadonlyArray(yield* Fiber.join(between))).toEqual([4, 5])
      expect(yield* q).toBe(6) // a subscription is an Effect that takes
      // two waiting takers are served in the order they waited
      const a = yield* Effect.fork(Queue.take(q))
      const b = yield* Effect.fork(Queue.take(q))
      yield* Effect.yieldNow()
      hub.publish(7)
      hub.publish(8)
      expect([yield* Fiber.join(a), yield* Fiber.join(b)]).toEqual([7, 8])
      // an interrupted taker loses nothing: the next event goes to the next take
      const gone = yield* Effect.fork(Queue.take(q))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(gone)
      hub.publish(9)
      expect(yield* Queue.take(q)).toBe(9)
    }))

  it.effect("a slow subscriber keeps everything (unbounded), in order", () =>
    Effect.gen(function*() {
      const hub = new Hub<number>()
      const q = hub.subscribe()
      for (let i = 0; i < 5000; i++) hub.publish(i)
      const firstHalf = Chunk.toReadonlyArray(yield* Queue.takeUpTo(q, 2600))
      for (let i = 5000; i < 6000; i++) hub.publish(i)
      const rest = Chunk.toReadonlyArray(yield* Queue.takeAll(q))
      expect([...firstHalf, ...rest]).toEqual(Array.from({ length: 6000 }, (_, i) => i))
    }))

  it.effect("a taker interrupted while it waits loses nothing: the next event goes to the next take; two waiting takers get one each, in order", () =>
    Effect.gen(function*() {
      const hub = new Hub<number>()
      const q = hub.subscribe()
      const gone = yield* Effect.fork(Queue.take(q))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(gone)
      hub.publish(1)
      expect(yield* Queue.take(q)).toBe(1)
      const first = yield* Effect.fork(Queue.take(q))
      yield* Effect.yieldNow()
      const second = yield* Effect.fork(Queue.take(q))
      yield* Effect.yieldNow()
      const abandoned = yield* Effect.fork(Queue.take(q))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(abandoned)
      hub.publish(2)
      hub.publish(3)
      expect([yield* Fiber.join(first), yield* Fiber.join(second)]).toEqual([2, 3])
      expect(yield* Queue.size(q)).toBe(0)
      hub.publish(4)
      expect(Chunk.toReadonlyArray(yield* Queue.takeAll(q))).toEqual([4])
    }))

  it.effect("shutdown: waiting takers and later takes are interrupted, Stream.fromQueue ends, the hub forgets it, awaitShutdown resumes", () =>
    Effect.gen(function*() {
      const hub = new Hub<string>()
      const q = hub.subscribe()
      const waiting = yield* Effect.fork(Queue.take(q))
      const ended = yield* Effect.fork(Queue.awaitShutdown(q))
      const collected = yield* Effect.fork(Stream.runCollect(Stream.fromQueue(hub.subscribe())))
      yield* Effect.yieldNow()
      hub.publish("x")
      expect(yield* Fiber.join(waiting)).toBe("x")
      const again = yield* Effect.fork(Queue.take(q))
      yield* Effect.yieldNow()
      yield* Queue.shutdown(q)
      expect(Exit.isInterrupted(yield* Fiber.await(again))).toBe(true)
      expect(Exit.isInterrupted(yield* Effect.exit(Queue.take(q)))).toBe(true)
      expect(yield* Queue.isShutdown(q)).toBe(true)
      yield* Fiber.join(ended)
      expect(hub.subscriptions.size).toBe(1)
      for (const s of hub.subscriptions) yield* Queue.shutdown(s)
      expect(Chunk.toReadonlyArray(yield* Fiber.join(collected))).toEqual(["x"])
      expect(hub.subscriptions.size).toBe(0)
    }))

  it.effect("agent.subscribe's queue is shut down with its scope; the last one gone, the agent drops its hub", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make()
      const scope = yield* Scope.make()
      const queue = yield* Scope.extend(agent.subscribe, scope)
      const waiting = yield* Effect.fork(Queue.take(queue))
      yield* settle
      yield* Scope.close(scope, Exit.void)
      expect(Exit.isInterrupted(yield* Fiber.await(waiting))).toBe(true)
      expect(yield* Queue.isShutdown(queue)).toBe(true)
      expect((agent as unknown as { hub: unknown }).hub).toBe(undefined)
    }).pipe(Effect.scoped, Effect.provide(layers(ScriptedModel.make([])))))
})
