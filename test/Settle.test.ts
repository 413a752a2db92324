/**
 * Settling the runtime (internal/settle.ts), as the agent tests (`settle`, `advance` in
 * test/utils/agent.ts) and the simulator use it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Option, Schema } from "effect"
import * as Agent from "../src/Agent.js"
import * as Settle from "../src/internal/settle.js"
import type * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as Tool from "../src/Tool.js"
import { brief, layer, layerTracked, settle, TrackedFibers } from "./utils/agent.js"

const currentFiberId = () => Option.getOrThrow(Fiber.getCurrentFiber()).id().id

/** Waits for the next event-loop turn (a macrotask, as a flush of the locked store does). */
const nextTurn = Effect.async<void>((resume) => {
  const immediate = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(immediate))
})

describe("settle (internal/settle.ts)", () => {
  for (const mode of ["sync", "locked"] as const) {
    it.scoped(`${mode} store: the agent's driver and tool fibers are tracked; settle waits until they wait on the clock`, () => {
      const ran = { respond: [] as Array<number>, tools: [] as Array<number> }
      const script = ScriptedModel.make([{
        toolCalls: [{ id: "a", name: "sleep", arguments: {} }, { id: "b", name: "sleep", arguments: {} }]
      }])
      // The model call runs on the driver fiber; each of two calls on a tool fiber of its own.
      const model: Model.ModelService = {
        ...script,
        respond: (request, sink) =>
          Effect.suspend(() => {
            ran.respond.push(currentFiberId())
            return script.respond(request, sink)
          })
      }
      const sleep = Tool.make({
        name: "sleep",
        description: "sleeps 1 s",
        parameters: Schema.Struct({}),
        execute: () =>
          Effect.suspend(() => {
            ran.tools.push(currentFiberId())
            return Effect.as(Effect.sleep(1000), { content: "ok" })
          })
      })
      return Effect.gen(function*() {
        const tracker = yield* TrackedFibers
        const agent = yield* Agent.make({ tools: [sleep] })
        yield* agent.followup("go")
        yield* settle
        expect(brief(agent.log.events()).slice(-3)).toEqual([
          "assistant sleep({}) sleep({})",
          "tool/call a sleep",
          "tool/call b sleep"
        ])
        expect([ran.respond.length, ran.tools.length]).toEqual([1, 2])
        const tracked = Array.from(tracker.fibers, (f) => f.id().id)
        for (const id of [...ran.respond, ...ran.tools]) expect(tracked).toContain(id)
        expect(tracked).not.toContain(currentFiberId())
        expect(yield* Clock.currentTimeMillis).toBe(0)
      }).pipe(Effect.provide(layer(model, undefined, mode)))
    })
  }

  it.scoped("a fiber woken by a macrotask that arms the next one is waited for to the end of the chain", () =>
    Effect.gen(function*() {
      // Suspended at every look, but it ran in between: a status comparison alone would stop
      // after the first turn.
      let turns = 0
      yield* Effect.forkScoped(Effect.repeatN(Effect.zipRight(nextTurn, Effect.sync(() => turns++)), 4))
      yield* settle
      expect(turns).toBe(5)
    }).pipe(Effect.provide(layerTracked)))

  it.scoped("a runtime that never settles fails after maxRounds, naming the fibers still running", () =>
    Effect.gen(function*() {
      const tracker = yield* TrackedFibers
      const spinning = yield* Effect.forkScoped(Effect.forever(Effect.yieldNow()))
      const rearming = yield* Effect.forkScoped(Effect.forever(nextTurn))
      const sleeping = yield* Effect.forkScoped(Effect.sleep(1000))
      const error = yield* Effect.flip(Settle.settle(tracker, { maxRounds: 5 }))
      const [first, second] = [spinning.id().id, rearming.id().id].sort((a, b) => a - b)
      expect(error).toBeInstanceOf(Settle.Unsettled)
      expect([error.rounds, error.running]).toEqual([5, [first, second]])
      expect(error.message).toBe(
        `the runtime did not settle in 5 rounds (event-loop turns); fibers still running: #${first}, #${second}`
      )
      expect(tracker.fibers.has(sleeping)).toBe(true)
    }).pipe(Effect.provide(layerTracked)))

  it.scoped("fibers started before the tracker was installed, and the settling fiber itself, are not waited for", () =>
    Effect.gen(function*() {
      yield* Effect.forkScoped(Effect.forever(Effect.yieldNow()))
      yield* Effect.gen(function*() {
        const tracker = yield* TrackedFibers
        expect(tracker.fibers.size).toBe(0)
        yield* settle
        // From a fiber of its own, which the tracker sees.
        const settling = yield* Effect.fork(settle)
        expect(tracker.fibers.has(settling)).toBe(true)
        yield* Fiber.join(settling)
      }).pipe(Effect.provide(layerTracked))
    }))
})
