/**
 * Sub-agents (§27): a `Subagent.tool` call runs a child agent on a new session of the parent's
 * store and answers with the child's final text. Pinned: the parent's and the child's logs
 * (header fields, `subagent/descriptor`, `subagent/start`/`end` between the call and its result),
 * the result's content, a child that calls tools, the depth limit (DSH's message), a failing
 * child (a typed error result, the parent goes on), cancel and disposal of the parent during the
 * child's tool call (the child's turn aborted `{kind:"parent"}`, the parent's call `ABORTED`), a
 * parent steer that stays in the parent, and a fork child seeded with the parent's completed
 * turns. Both store modes.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Layer, Ref, Schema, Scope } from "effect"
import * as Agent from "../src/Agent.js"
import * as History from "../src/History.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import { SessionStore } from "../src/SessionStore.js"
import * as Subagent from "../src/Subagent.js"
import * as Tool from "../src/Tool.js"
import { advance, brief, layerTracked, settle, storeLayer, type StoreMode, text } from "./utils/agent.js"

const layers = (mode: StoreMode, model: Model.ModelService) =>
  Layer.mergeAll(storeLayer(mode), IdGenerator.layerSeeded(11), Model.layer(model), layerTracked)

/** The child session's log, read from the store the parent uses. */
const childLog = (id: string) =>
  Effect.flatMap(
    SessionStore,
    (store) => Effect.map(store.open(id as never), (log) => ({ header: log.header, events: log.events() }))
  )

const dataOf = (events: ReadonlyArray<SessionEvent>, type: string): Array<any> =>
  events.filter((e) => e.type === type).map((e) => e.data)

const call = (id: string, prompt: string, name = "subagent") => ({ id, name, arguments: { prompt, description: "look it up" } })

const clock = Tool.make({
  name: "clock",
  description: "the time",
  parameters: Schema.Struct({}),
  execute: () => Effect.succeed({ content: "12:00" })
})

for (const mode of ["sync", "locked"] as const) {
  describe(`Subagent.tool (${mode} store)`, () => {
    it.scoped("a child that answers: its log names the parent, the parent's log brackets it, the result is its answer", () => {
      const parentModel = ScriptedModel.make([{ toolCalls: [call("c1", "What is 2+2?")] }, { text: "It is 4." }])
      const childModel = ScriptedModel.make([{ text: "4" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel, instructions: "Be exact." })] })
        yield* agent.followup("ask the child")
        yield* advance(10)
        yield* agent.awaitIdle
        const events = agent.log.events()
        expect(brief(events).slice(6)).toEqual([
          "assistant subagent({\"prompt\":\"What is 2+2?\",\"description\":\"look it up\"})",
          "tool/call c1 subagent",
          "subagent/start",
          "subagent/end",
          "tool/result c1",
          "step/end 1.1",
          "step/start 1.2",
          "assistant It is 4.",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
        const [start] = dataOf(events, "subagent/start")
        const childId: string = start.id
        const run = { runId: start.runId, provider: "spawn", id: childId, local: true, callId: "c1" }
        expect(typeof start.runId === "string" && start.runId !== childId).toBe(true)
        expect(start).toEqual({ ...run, depth: 1, label: "look it up" })
        expect(dataOf(events, "subagent/end")).toEqual([{
          ...run,
          stopReason: "completed",
          lastAssistantMessage: [{ type: "text", text: "4" }],
          reason: { kind: "completed" },
          // What the child spent: its scripted response reported no usage (counted 0, unknown).
          usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 },
          byModel: { script: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 } },
          unreported: 1
        }])
        const result = dataOf(events, "tool/result")[0]
        expect(result.message.content[0].content).toEqual([
          { type: "text", text: "4" },
          { type: "text", text: `[sub-agent session ${childId}]` }
        ])
        const child = yield* childLog(childId)
        expect(child.header).toMatchObject({
          id: childId,
          parentSession: agent.id,
          parentCallId: "c1",
          origin: "subagent",
          delegationDepth: 1
        })
        expect(brief(child.events)).toEqual([
          "subagent/descriptor",
          "splice next-turn 0 +[What is 2+2?]",
          "turn/start 1",
          "splice next-turn 0 -1",
          "step/start 1.1",
          "user What is 2+2? (subagent)",
          "request/header",
          "assistant 4",
          "step/end 1.1",
          "turn/end 1 completed"
        ])
        expect(dataOf(child.events, "subagent/descriptor")).toEqual([{
          version: 2,
          mode: "one-shot",
          provider: "spawn",
          label: "look it up"
        }])
        expect(dataOf(child.events, "user/message")[0].source).toEqual({
          kind: "subagent",
          parentSession: agent.id,
          callId: "c1"
        })
        expect(dataOf(child.events, "request/header")[0].instructions).toBe("Be exact.")
        expect(Invariant.check(events)).toEqual([])
        expect(Invariant.check(child.events, { header: child.header })).toEqual([])
        // The model saw the answer as the call's result.
        expect(History.derive(events).map(text).at(-2)).toBe(`result:4[sub-agent session ${childId}]`)
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })

    it.scoped("a child that calls tools runs them in its own session; the parent sees only the answer", () => {
      const parentModel = ScriptedModel.make([{ toolCalls: [call("c1", "What time is it?")] }, { text: "noon" }])
      const childModel = ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "clock", arguments: {} }] }, { text: "12:00" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel, tools: [clock] })] })
        yield* agent.followup("go")
        yield* advance(10)
        yield* agent.awaitIdle
        const events = agent.log.events()
        expect(brief(events).filter((l) => l.startsWith("tool/"))).toEqual(["tool/call c1 subagent", "tool/result c1"])
        const childId = dataOf(events, "subagent/start")[0].id
        const child = yield* childLog(childId)
        expect(brief(child.events).filter((l) => l.startsWith("tool/") || l.startsWith("assistant"))).toEqual([
          "assistant clock({})",
          "tool/call k1 clock",
          "tool/result k1",
          "assistant 12:00"
        ])
        expect(dataOf(events, "tool/result")[0].message.content[0].content[0]).toEqual({ type: "text", text: "12:00" })
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })

    it.scoped("depth: a child's own sub-agent call past maxDepth fails with DSH's message and starts no session", () => {
      const inner = Subagent.tool({ name: "deeper", maxDepth: 1, model: ScriptedModel.make([{ text: "never" }]) })
      const parentModel = ScriptedModel.make([{ toolCalls: [call("c1", "delegate")] }, { text: "done" }])
      const childModel = ScriptedModel.make([{ toolCalls: [call("k1", "go deeper", "deeper")] }, { text: "could not" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel, tools: [inner] })] })
        yield* agent.followup("go")
        yield* advance(10)
        yield* agent.awaitIdle
        const childId = dataOf(agent.log.events(), "subagent/start")[0].id
        const child = yield* childLog(childId)
        const result = dataOf(child.events, "tool/result")[0]
        expect(result.error).toEqual({ name: "ToolFailed", code: "TOOL_FAILED" })
        expect(result.message.content[0].content).toEqual([
          { type: "text", text: "Tool deeper failed: subagent depth 2 exceeds maxDepth 1" }
        ])
        expect(dataOf(child.events, "subagent/start")).toEqual([])
        expect(dataOf(agent.log.events(), "tool/result")[0].message.content[0].content[0].text).toBe("could not")
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })

    it.scoped("maxDepth is a whole number ≥ 0: NaN is the default (2), 0 forbids delegation, 1.5 is 1", () => {
      const parentModel = ScriptedModel.make([
        { toolCalls: [call("c1", "a", "zero"), call("c2", "b", "nan"), call("c3", "c", "frac")] },
        { text: "done" }
      ])
      const childModel = ScriptedModel.make([{ text: "ok" }, { text: "ok" }])
      return Effect.gen(function*() {
        const tools = [
          Subagent.tool({ name: "zero", maxDepth: 0, model: childModel }),
          Subagent.tool({ name: "nan", maxDepth: NaN, model: childModel }),
          Subagent.tool({ name: "frac", maxDepth: 1.5, model: childModel })
        ]
        const agent = yield* Agent.make({ tools })
        yield* agent.followup("go")
        yield* advance(10)
        yield* agent.awaitIdle
        const results = dataOf(agent.log.events(), "tool/result").map((
          r
        ) => [r.error?.code, r.message.content[0].content[0].text])
        expect(results[0]).toEqual(["TOOL_FAILED", "Tool zero failed: subagent depth 1 exceeds maxDepth 0"])
        expect(results.slice(1).map((r) => r[1])).toEqual(["ok", "ok"])
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })

    it.scoped("a child whose model fails: the parent's call gets a TOOL_FAILED result naming the child, the parent goes on", () => {
      const parentModel = ScriptedModel.make([{ toolCalls: [call("c1", "try")] }, { text: "it failed" }])
      const childModel = ScriptedModel.make([{ error: { code: "MODEL_FAILED", message: "overloaded", retryable: false } }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel })] })
        yield* agent.followup("go")
        yield* advance(10)
        yield* agent.awaitIdle
        const events = agent.log.events()
        const childId = dataOf(events, "subagent/start")[0].id
        const result = dataOf(events, "tool/result")[0]
        expect(result.error).toEqual({ name: "ToolFailed", code: "TOOL_FAILED" })
        expect(result.message.content[0].content[0].text).toMatch(
          new RegExp(`^Tool subagent failed: the sub-agent \\(session ${childId}\\) did not complete its task: error`)
        )
        expect(dataOf(events, "subagent/end")[0]).toMatchObject({ stopReason: "error", reason: { kind: "error" } })
        expect(brief(events).at(-1)).toBe("turn/end 1 completed")
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })

    for (const how of ["cancel", "dispose"] as const) {
      it.scoped(`${how} of the parent during the child's tool call: the child's turn aborted {parent}, the parent's call ABORTED`, () => {
        const parentModel = ScriptedModel.make([{ toolCalls: [call("c1", "wait")] }, { text: "unused" }])
        const childModel = ScriptedModel.make([
          { toolCalls: [{ id: "k1", name: "wait", arguments: {} }], usage: { inputTokens: 12, outputTokens: 3 } },
          { text: "unused" }
        ])
        return Effect.gen(function*() {
          const started = yield* Deferred.make<void>()
          const interrupted = yield* Ref.make(false)
          const wait = Tool.make({
            name: "wait",
            description: "",
            parameters: Schema.Struct({}),
            execute: () =>
              Effect.zipRight(
                Deferred.succeed(started, undefined),
                Effect.onInterrupt(Effect.never, () => Ref.set(interrupted, true))
              )
          })
          const scope = yield* Scope.make()
          const agent = yield* Scope.extend(Agent.make({ tools: [Subagent.tool({ model: childModel, tools: [wait] })] }), scope)
          yield* agent.followup("go")
          yield* advance(10)
          yield* Deferred.await(started)
          if (how === "cancel") yield* agent.cancel()
          else yield* Scope.close(scope, Exit.void)
          yield* settle
          expect(yield* Ref.get(interrupted)).toBe(true)
          const events = agent.log.events()
          const childId = dataOf(events, "subagent/start")[0].id
          expect(brief(events).slice(-5)).toEqual([
            "subagent/start",
            "subagent/end",
            "tool/result c1 ABORTED",
            "step/end 1.1",
            `turn/end 1 aborted:${how === "cancel" ? "user" : "disposed"}`
          ])
          const cause = { kind: "parent", parentSession: agent.id, callId: "c1" }
          const start = dataOf(events, "subagent/start")[0]
          expect(dataOf(events, "subagent/end")[0]).toEqual({
            runId: start.runId,
            provider: "spawn",
            id: childId,
            local: true,
            callId: "c1",
            stopReason: "aborted",
            reason: { kind: "aborted", reason: cause },
            // What the aborted child had spent: its one response.
            usage: { inputTokens: 12, outputTokens: 3, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 },
            byModel: {
              script: { inputTokens: 12, outputTokens: 3, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 }
            },
            unreported: 0
          })
          const child = yield* childLog(childId)
          expect(brief(child.events).slice(-3)).toEqual(["tool/result k1 ABORTED", "step/end 1.1", "turn/end 1 aborted:parent"])
          expect(dataOf(child.events, "turn/end")[0].reason).toEqual({ kind: "aborted", reason: cause })
          expect(Invariant.check(child.events, { header: child.header })).toEqual([])
          expect(Invariant.check(events)).toEqual([])
        }).pipe(Effect.provide(layers(mode, parentModel)))
      })
    }

    it.scoped("release of the parent during the child's tool call releases the child: both turns left open, nothing more written", () => {
      const parentModel = ScriptedModel.make([{ toolCalls: [call("c1", "wait")] }, { text: "unused" }])
      const childModel = ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "wait", arguments: {} }] }, { text: "unused" }])
      return Effect.gen(function*() {
        const started = yield* Deferred.make<void>()
        const wait = Tool.make({
          name: "wait",
          description: "",
          parameters: Schema.Struct({}),
          execute: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
        })
        const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel, tools: [wait] })] })
        yield* agent.followup("go")
        yield* advance(10)
        yield* Deferred.await(started)
        yield* agent.release
        yield* settle
        const events = agent.log.events()
        expect(brief(events).slice(-2)).toEqual(["tool/call c1 subagent", "subagent/start"])
        const child = yield* childLog(dataOf(events, "subagent/start")[0].id)
        expect(brief(child.events).slice(-2)).toEqual(["assistant wait({})", "tool/call k1 wait"])
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })

    it.scoped("a child's call that needs a person is listed and decided through the parent, which waits meanwhile", () => {
      const parentModel = ScriptedModel.make([{ toolCalls: [call("c1", "what time is it")] }, { text: "noon" }])
      const childModel = ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "guarded", arguments: {} }] }, { text: "12:00" }])
      const guarded = Tool.make({
        name: "guarded",
        description: "",
        parameters: Schema.Struct({}),
        approval: "always",
        execute: () => Effect.succeed({ content: "12:00" })
      })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel, tools: [guarded] })] })
        yield* agent.followup("go")
        yield* advance(10)
        const childId = dataOf(agent.log.events(), "subagent/start")[0].id
        const pending = yield* agent.pendingApprovals
        expect(pending.map((p) => ({ ...p, id: "q" }))).toEqual([
          { id: "q", toolName: "guarded", callId: "k1", arguments: {}, turn: 1, step: 1, askedAt: 0, sessionId: childId }
        ])
        expect(yield* agent.status).toBe("awaiting-approval")
        yield* agent.approve(pending[0]!.id, { name: "ana" })
        yield* advance(10)
        yield* agent.awaitIdle
        expect(yield* agent.pendingApprovals).toEqual([])
        expect(yield* agent.status).toBe("idle")
        const child = yield* childLog(childId)
        expect(brief(child.events).filter((l) => l.startsWith("asked") || l.startsWith("decided") || l.startsWith("tool/")))
          .toEqual([
            "tool/call k1 guarded",
            `asked ${pending[0]!.id} guarded k1`,
            `decided ${pending[0]!.id} allowed-once by person:ana`,
            "tool/result k1"
          ])
        expect(dataOf(agent.log.events(), "tool/result")[0].message.content[0].content[0].text).toBe("12:00")
        // Deciding it again, through the parent or not, is refused.
        const again = yield* Effect.flip(agent.approve(pending[0]!.id))
        expect(again._tag).toBe("ApprovalNotOpen")
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })

    it.scoped("the parent's approvalTimeoutMs is the child's: an unanswered child question is rejected by timeout", () => {
      const parentModel = ScriptedModel.make([{ toolCalls: [call("c1", "what time is it")] }, { text: "no time" }])
      const childModel = ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "guarded", arguments: {} }] }, { text: "denied" }])
      const guarded = Tool.make({
        name: "guarded",
        description: "",
        parameters: Schema.Struct({}),
        approval: "always",
        execute: () => Effect.succeed({ content: "12:00" })
      })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({
          approvalTimeoutMs: 100,
          tools: [Subagent.tool({ model: childModel, tools: [guarded] })]
        })
        yield* agent.followup("go")
        yield* advance(50)
        expect(yield* agent.status).toBe("awaiting-approval")
        yield* advance(60)
        yield* agent.awaitIdle
        const child = yield* childLog(dataOf(agent.log.events(), "subagent/start")[0].id)
        expect(dataOf(child.events, "approval/decided").map((d) => [d.outcome, d.by])).toEqual([["rejected", {
          kind: "timeout"
        }]])
        expect(dataOf(child.events, "tool/result")[0].error.code).toBe("DENIED")
        expect(brief(agent.log.events()).at(-1)).toBe("turn/end 1 completed")
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })

    it.scoped("the parent's live events carry the child's, wrapped with its session and the call", () => {
      const parentModel = ScriptedModel.make([{ toolCalls: [call("c1", "hi")] }, { text: "done" }])
      const childModel = ScriptedModel.make([{ text: "hello" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel })] })
        const queue = yield* agent.subscribe
        yield* agent.followup("go")
        yield* advance(10)
        yield* agent.awaitIdle
        const live = [...(yield* queue.takeAll)]
        const childId = dataOf(agent.log.events(), "subagent/start")[0].id
        const wrapped = live.flatMap((e) =>
          e.type === "subagent/event" ? [e as { readonly sessionId: string; readonly callId: string; readonly event: any }] : []
        )
        expect(new Set(wrapped.map((e) => `${e.sessionId} ${e.callId}`))).toEqual(new Set([`${childId} c1`]))
        const child = yield* childLog(childId)
        // Every durable event of the child from the task's delivery on (its descriptor is
        // appended as it is made, before the link), in order.
        expect(wrapped.flatMap((e) => ("seq" in e.event ? [e.event.type] : []))).toEqual(child.events.slice(1).map((e) => e.type))
        expect(wrapped.flatMap((e) => (e.event.type === "agent/status" ? [e.event.status] : []))).toEqual(["running", "idle"])
        // They come between the parent's subagent/start and subagent/end.
        const types = live.map((e) => e.type)
        expect(types.indexOf("subagent/start")).toBeLessThan(types.indexOf("subagent/event"))
        expect(types.lastIndexOf("subagent/event")).toBeLessThan(types.indexOf("subagent/end"))
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })

    it.scoped("a parent steer during the child's run enters the parent's next step, never the child", () => {
      const parentModel = ScriptedModel.make([{ toolCalls: [call("c1", "slow task")] }, { text: "ok" }])
      const childModel = ScriptedModel.make([{ latencyMs: 50, text: "child done" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel })] })
        yield* agent.followup("go")
        yield* advance(10)
        const steer = yield* agent.steer("also this")
        yield* advance(100)
        yield* agent.awaitIdle
        expect(yield* steer.outcome).toEqual({ _tag: "Entered", turn: 1, step: 2 })
        const childId = dataOf(agent.log.events(), "subagent/start")[0].id
        const child = yield* childLog(childId)
        expect(brief(child.events).filter((l) => l.startsWith("user"))).toEqual(["user slow task (subagent)"])
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })

    it.scoped("a fork child starts with the parent's completed turns (seedLength) and sees them in its request", () => {
      const parentModel = ScriptedModel.make([
        { text: "The code word is TEAL." },
        { toolCalls: [call("c1", "What is the code word?", "subagent_fork")] },
        { text: "The child said TEAL." }
      ])
      const childModel = ScriptedModel.make([{ text: "TEAL" }], { record: true })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel, fork: true })] })
        yield* agent.followup("remember the code word")
        yield* advance(10)
        yield* agent.awaitIdle
        yield* agent.followup("ask a fork")
        yield* advance(10)
        yield* agent.awaitIdle
        const events = agent.log.events()
        const start = dataOf(events, "subagent/start")[0]
        expect(start.provider).toBe("fork")
        const child = yield* childLog(start.id)
        const firstTurnEnd = events.findIndex((e) => e.type === "turn/end")
        expect(child.header.seedLength).toBeGreaterThan(firstTurnEnd)
        // The child's history starts with the parent's first turn, then its task.
        expect(History.derive(child.events, { header: child.header }).map(text)).toEqual([
          "remember the code word",
          "The code word is TEAL.",
          "What is the code word?",
          "TEAL"
        ])
        expect(Invariant.check(child.events, { header: child.header })).toEqual([])
        expect(dataOf(events, "tool/result")[0].message.content[0].content[0].text).toBe("TEAL")
      }).pipe(Effect.provide(layers(mode, parentModel)))
    })
  })
}
