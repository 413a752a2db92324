import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { Mutex } from "../src/internal/mutex.js"

describe("Mutex (the agent's critical sections)", () => {
  it.effect("sections run one at a time, waiters in FIFO order", () =>
    Effect.gen(function*() {
      const mutex = new Mutex()
      const order: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const first = yield* Effect.fork(mutex.withLock(Effect.zipRight(Deferred.await(gate), Effect.sync(() => order.push("a")))))
      yield* Effect.yieldNow()
      const second = yield* Effect.fork(mutex.withLock(Effect.sync(() => order.push("b"))))
      const third = yield* Effect.fork(mutex.withLock(Effect.sync(() => order.push("c"))))
      yield* Effect.repeatN(Effect.yieldNow(), 10)
      expect(order).toEqual([])
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      yield* Fiber.join(third)
      expect(order).toEqual(["a", "b", "c"])
    }))

  it.effect("a failing section releases the lock; an interrupted waiter never runs and passes its turn on", () =>
    Effect.gen(function*() {
      const mutex = new Mutex()
      const exit = yield* Effect.exit(mutex.withLock(Effect.fail("boom")))
      expect(Exit.isFailure(exit)).toBe(true)
      const gate = yield* Deferred.make<void>()
      const ran: Array<string> = []
      const holder = yield* Effect.fork(mutex.withLock(Deferred.await(gate)))
      yield* Effect.yieldNow()
      const waiter = yield* Effect.fork(mutex.withLock(Effect.sync(() => ran.push("interrupted one"))))
      const next = yield* Effect.fork(mutex.withLock(Effect.sync(() => ran.push("next"))))
      yield* Effect.repeatN(Effect.yieldNow(), 5)
      yield* Fiber.interrupt(waiter)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(next)
      expect(ran).toEqual(["next"])
      // The lock is free again.
      yield* mutex.withLock(Effect.sync(() => ran.push("after")))
      expect(ran).toEqual(["next", "after"])
    }))
})
