/**
 * The agent's fibers belong to its scope (§9 "The card, in code"): the driver and the tool calls
 * are members of `FiberSet`s in a scope the agent owns; cancel interrupts the run, disposal
 * closes the scope. Pinned here: closing the scope the agent was made in interrupts every
 * running call and the driver, which closes its turn durably, and leaves no fiber of the agent
 * alive; a tool that disposes or cancels its own agent (from the driver fiber or a call fiber of
 * its own) ends the turn the same way instead of waiting for itself. Both store modes.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Ref, Schema, Scope } from "effect"
import * as Agent from "../src/Agent.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as Tool from "../src/Tool.js"
import { advance, brief, layerTracked, settle, storeLayer, type StoreMode, TrackedFibers } from "./utils/agent.js"

/** The ids of the tracked fibers (the caller excluded) that have not ended. */
const alive = Effect.flatMap(
  TrackedFibers,
  (tracker) =>
    Effect.flatMap(
      Effect.fiberId,
      (self) => Effect.map(tracker.value, (fibers) => fibers.filter((f) => f.id().id !== (self as { id: number }).id).length)
    )
)

const layers = (mode: StoreMode, model: Model.ModelService) =>
  Layer.mergeAll(storeLayer(mode), IdGenerator.layerSeeded(7), Model.layer(model), layerTracked)

for (const mode of ["sync", "locked"] as const) {
  describe(`the agent's fibers belong to its scope (${mode} store)`, () => {
    it.scoped("closing the agent's scope interrupts its calls and its driver, closes the turn, leaves no fiber", () => {
      const model = ScriptedModel.make([{
        toolCalls: [{ id: "a", name: "wait", arguments: {} }, { id: "b", name: "wait", arguments: {} }]
      }])
      return Effect.gen(function*() {
        const started = yield* Ref.make<Array<string>>([])
        const interrupted = yield* Ref.make<Array<string>>([])
        const wait = Tool.make({
          name: "wait",
          description: "",
          parameters: Schema.Struct({}),
          execute: (_, ctx) =>
            Effect.zipRight(
              Ref.update(started, (s) => [...s, ctx.callId]),
              Effect.onInterrupt(Effect.never, () => Ref.update(interrupted, (s) => [...s, ctx.callId]))
            )
        })
        const scope = yield* Scope.make()
        const agent = yield* Scope.extend(Agent.make({ tools: [wait] }), scope)
        const before = yield* alive
        yield* agent.followup("go")
        yield* advance(10)
        expect(yield* Ref.get(started)).toEqual(["a", "b"])
        // The driver and both calls are running.
        expect((yield* alive) - before).toBe(3)
        yield* Scope.close(scope, Exit.void)
        expect((yield* Ref.get(interrupted)).sort()).toEqual(["a", "b"])
        expect(brief(agent.log.events()).slice(-4)).toEqual([
          "tool/result a ABORTED",
          "tool/result b ABORTED",
          "step/end 1.1",
          "turn/end 1 aborted:disposed"
        ])
        yield* settle
        expect(yield* alive).toBe(before)
        expect(yield* agent.status).toBe("idle")
      }).pipe(Effect.provide(layers(mode, model)))
    })

    for (const calls of [1, 2]) {
      const where = calls === 1 ? "the driver fiber (a single call)" : "a call fiber (a batch of two)"
      it.scoped(`a tool that disposes its own agent, on ${where}, ends the turn disposed and the agent's scope`, () => {
        const toolCalls = calls === 1
          ? [{ id: "x", name: "quit", arguments: {} }]
          : [{ id: "w", name: "idle", arguments: {} }, { id: "x", name: "quit", arguments: {} }]
        const model = ScriptedModel.make([{ toolCalls }, { text: "never asked" }])
        return Effect.gen(function*() {
          const self = yield* Deferred.make<Agent.Agent>()
          const quit = Tool.make({
            name: "quit",
            description: "",
            parameters: Schema.Struct({}),
            execute: () =>
              Effect.as(Effect.orDie(Effect.flatMap(Deferred.await(self), (agent) => agent.dispose)), { content: "unreachable" })
          })
          const idle = Tool.make({ name: "idle", description: "", parameters: Schema.Struct({}), execute: () => Effect.never })
          const scope = yield* Scope.make()
          const agent = yield* Scope.extend(Agent.make({ tools: [quit, idle] }), scope)
          yield* Deferred.succeed(self, agent)
          const before = yield* alive
          yield* agent.followup("go")
          yield* advance(10)
          yield* settle
          const lines = brief(agent.log.events())
          expect(lines.slice(-2 - calls)).toEqual([
            ...(calls === 1 ? [] : ["tool/result w ABORTED"]),
            "tool/result x ABORTED",
            "step/end 1.1",
            "turn/end 1 aborted:disposed"
          ])
          expect(lines.filter((l) => l.startsWith("assistant"))).toHaveLength(1)
          expect(yield* alive).toBe(before)
          const refused = yield* Effect.flip(agent.followup("later"))
          expect(refused._tag).toBe("AgentDisposed")
          // The scope the agent was made in closes without waiting for anything.
          yield* Scope.close(scope, Exit.void)
        }).pipe(Effect.provide(layers(mode, model)))
      })
    }

    for (const how of ["dispose", "release"] as const) {
      it.scoped(`a tool that calls ${how} on its own agent from a fiber it forked (Effect.timeout): the agent ends, nothing hangs`, () => {
        const model = ScriptedModel.make([
          { toolCalls: [{ id: "w", name: "idle", arguments: {} }, { id: "x", name: "quit", arguments: {} }] },
          { text: "never asked" }
        ])
        return Effect.gen(function*() {
          const self = yield* Deferred.make<Agent.Agent>()
          const quit = Tool.make({
            name: "quit",
            description: "",
            parameters: Schema.Struct({}),
            execute: () =>
              Effect.as(
                Effect.exit(Effect.flatMap(Deferred.await(self), (agent) => agent[how]).pipe(Effect.timeout("2 seconds"))),
                { content: "unreachable" }
              )
          })
          const idle = Tool.make({ name: "idle", description: "", parameters: Schema.Struct({}), execute: () => Effect.never })
          const agent = yield* Agent.make({ tools: [quit, idle] })
          yield* Deferred.succeed(self, agent)
          const before = yield* alive
          yield* agent.followup("go")
          yield* advance(10)
          yield* settle
          expect(yield* agent.status).toBe("idle")
          expect(brief(agent.log.events()).slice(-2)).toEqual(
            how === "dispose" ? ["step/end 1.1", "turn/end 1 aborted:disposed"] : ["tool/call w idle", "tool/call x quit"]
          )
          expect(yield* alive).toBe(before)
        }).pipe(Effect.provide(layers(mode, model)))
      })
    }

    it.scoped("a tool that cancels its own agent from a call fiber: the turn ends aborted:user, the agent takes the next followup", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "w", name: "idle", arguments: {} }, { id: "x", name: "stop", arguments: {} }] },
        { text: "again" }
      ])
      return Effect.gen(function*() {
        const self = yield* Deferred.make<Agent.Agent>()
        const stop = Tool.make({
          name: "stop",
          description: "",
          parameters: Schema.Struct({}),
          execute: () =>
            Effect.as(Effect.orDie(Effect.flatMap(Deferred.await(self), (agent) => agent.cancel())), { content: "unreachable" })
        })
        const idle = Tool.make({ name: "idle", description: "", parameters: Schema.Struct({}), execute: () => Effect.never })
        const agent = yield* Agent.make({ tools: [stop, idle] })
        yield* Deferred.succeed(self, agent)
        const before = yield* alive
        yield* agent.followup("go")
        yield* advance(10)
        yield* settle
        expect(brief(agent.log.events()).slice(-4)).toEqual([
          "tool/result w ABORTED",
          "tool/result x ABORTED",
          "step/end 1.1",
          "turn/end 1 aborted:user"
        ])
        expect(yield* alive).toBe(before)
        const next = yield* agent.followup("more")
        yield* advance(10)
        expect(yield* next.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        expect(brief(agent.log.events()).at(-1)).toBe("turn/end 2 completed")
        const fiber = yield* Effect.fork(agent.awaitIdle)
        yield* Fiber.join(fiber)
      }).pipe(Effect.provide(layers(mode, model)))
    })
  })
}
