/**
 * Approvals in the loop (§26): a call that needs approval waits for a decision while the other
 * calls of its batch run; decisions are appended first, then honoured; refusals reach the model
 * as `DENIED` results; cancel decides `cancelled`; the timeout decides `rejected`; remembered
 * answers apply to later calls. Both store modes: a synchronous append, and one that waits for a
 * flush (every append takes the lock path).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Schema } from "effect"
import * as Agent from "../src/Agent.js"
import * as Approval from "../src/Approval.js"
import * as Message from "../src/Message.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as Tool from "../src/Tool.js"
import { advance, brief, checkLog, layer as agentLayer, type StoreMode, text } from "./utils/agent.js"

/** A tool that sleeps `ms` (virtual time) and returns "NAME ok"; counts its runs. */
const sleeper = (name: string, approval: Tool.ToolApproval<{ readonly ms: number }> = "never") => {
  const runs: Array<number> = []
  const tool = Tool.make({
    name,
    description: "sleeps",
    parameters: Schema.Struct({ ms: Schema.Number }),
    approval,
    execute: ({ ms }) => Effect.as(Effect.zipRight(Effect.sync(() => runs.push(ms)), Effect.sleep(ms)), { content: `${name} ok` })
  })
  return { tool, runs }
}

/** The decided events' data of a log. */
const decisions = (agent: Agent.Agent) =>
  agent.log.events().filter((e) => e.type === "approval/decided").map((e) => e.data as Approval.DecidedData)

/** The text of the tool results of a log, by call id. */
const results = (agent: Agent.Agent) =>
  agent.log.events().filter((e) => e.type === "tool/result").map((e) => {
    const d = e.data as any
    return [d.message.content[0].toolCallId, d.error?.code ?? null, text(d.message)]
  })

for (const mode of ["sync", "locked"] as const satisfies ReadonlyArray<StoreMode>) {
  const layer = (model: ScriptedModel.ScriptedModel, policy?: Layer.Layer<Approval.Approval>) =>
    policy === undefined ? agentLayer(model, undefined, mode) : Layer.merge(agentLayer(model, undefined, mode), policy)

  describe(`approvals in the loop (${mode})`, () => {
    it.scoped("a batch with one waiting call and two free ones: the free ones run, results commit in model order after the decision", () => {
      const model = ScriptedModel.make([
        {
          toolCalls: [
            { id: "w", name: "write", arguments: { ms: 5 } },
            { id: "a", name: "read", arguments: { ms: 10 } },
            { id: "b", name: "read", arguments: { ms: 20 } }
          ]
        },
        { text: "done" }
      ])
      const write = sleeper("write", "always")
      const read = sleeper("read")
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [write.tool, read.tool] })
        yield* agent.followup("go")
        yield* advance(50)
        // The free calls ran; nothing is committed after the waiting call.
        expect(read.runs).toEqual([10, 20])
        expect(write.runs).toEqual([])
        expect(yield* agent.status).toBe("awaiting-approval")
        const pending = yield* agent.pendingApprovals
        expect(pending.map((p) => [p.toolName, p.callId, p.arguments, p.turn, p.step, p.askedAt])).toEqual([
          ["write", "w", { ms: 5 }, 1, 1, 0]
        ])
        const id = pending[0]!.id
        expect(brief(agent.log.events()).slice(-5)).toEqual([
          "assistant write({\"ms\":5}) read({\"ms\":10}) read({\"ms\":20})",
          "tool/call w write",
          `asked ${id} write w`,
          "tool/call a read",
          "tool/call b read"
        ])
        yield* agent.approve(id, { name: "ana" })
        expect(yield* agent.status).toBe("running")
        yield* advance(10)
        expect(write.runs).toEqual([5])
        expect(brief(agent.log.events()).slice(-13)).toEqual([
          "tool/call w write",
          `asked ${id} write w`,
          "tool/call a read",
          "tool/call b read",
          `decided ${id} allowed-once by person:ana`,
          "tool/result w",
          "tool/result a",
          "tool/result b",
          "step/end 1.1",
          "step/start 1.2",
          "assistant done",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
        expect(yield* agent.status).toBe("idle")
        expect(yield* agent.pendingApprovals).toEqual([])
        // A second decision of the same question: ApprovalNotOpen, nothing appended.
        const length = agent.log.events().length
        const again = yield* Effect.exit(agent.reject(id))
        expect(Exit.isFailure(again) && JSON.stringify(again.cause)).toContain("ApprovalNotOpen")
        expect(agent.log.events().length).toBe(length)
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a rejection reaches the model as a DENIED result with the reason; the turn goes on", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "w", name: "write", arguments: { ms: 5 } }] },
        { text: "understood" }
      ])
      const write = sleeper("write", "always")
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [write.tool] })
        yield* agent.followup("go")
        yield* advance(1)
        const [question] = yield* agent.pendingApprovals
        yield* agent.reject(question!.id, { reason: "not on main", name: "ana" })
        yield* advance(1)
        expect(write.runs).toEqual([])
        expect(results(agent)).toEqual([
          ["w", "DENIED", "result:The call to write was rejected by ana: not on main"]
        ])
        expect(decisions(agent)).toEqual([
          { id: question!.id, outcome: "rejected", by: { kind: "person", name: "ana" }, reason: "not on main" }
        ])
        // The model's next request carries the refusal.
        expect(text(model.requests[1]!.messages.at(-1)!)).toBe("result:The call to write was rejected by ana: not on main")
        expect(brief(agent.log.events()).slice(-3)).toEqual(["assistant understood", "step/end 1.2", "turn/end 1 completed"])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("steer, inject and followup while a question is open: nothing waits on the person but the call", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "w", name: "write", arguments: { ms: 5 } }] },
        { text: "step two" },
        { text: "turn two" }
      ])
      const write = sleeper("write", "always")
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [write.tool] })
        yield* agent.followup("go")
        yield* advance(1)
        const [question] = yield* agent.pendingApprovals
        const steer = yield* agent.steer("also check the tests")
        const inject = yield* agent.inject(
          yield* Effect.orDie(Message.UserMessage.make({ text: "ci is green", source: { kind: "plugin", plugin: "ci" } }))
        )
        const followup = yield* agent.followup("next task")
        yield* advance(100)
        // Accepted at once, pending; the turn still waits.
        expect(yield* agent.status).toBe("awaiting-approval")
        expect((yield* agent.inbox).nextStep.map((p) => text(p.message))).toEqual(["also check the tests", "ci is green"])
        yield* agent.approve(question!.id)
        yield* advance(10)
        expect(yield* steer.outcome).toEqual({ _tag: "Entered", turn: 1, step: 2 })
        expect(yield* inject.outcome).toEqual({ _tag: "Entered", turn: 1, step: 2 })
        expect(yield* followup.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        const events = brief(agent.log.events())
        expect(events.slice(events.indexOf(`decided ${question!.id} allowed-once by person`))).toEqual([
          `decided ${question!.id} allowed-once by person`,
          "tool/result w",
          "step/end 1.1",
          "splice next-step 0 -2",
          "step/start 1.2",
          "user also check the tests",
          "user ci is green (plugin)",
          "assistant step two",
          "step/end 1.2",
          "turn/end 1 completed",
          "turn/start 2",
          "splice next-turn 0 -1",
          "step/start 2.1",
          "user next task",
          "assistant turn two",
          "step/end 2.1",
          "turn/end 2 completed"
        ])
        yield* checkLog(agent, [steer, inject, followup])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("cancel while waiting: the question is decided cancelled, the call never started, the turn ends aborted", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "w", name: "write", arguments: { ms: 5 } }, { id: "a", name: "read", arguments: { ms: 5 } }] }
      ])
      const write = sleeper("write", "always")
      const read = sleeper("read")
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [write.tool, read.tool] })
        yield* agent.followup("go")
        yield* advance(10)
        const [question] = yield* agent.pendingApprovals
        yield* agent.cancel()
        expect(write.runs).toEqual([])
        expect(results(agent)).toEqual([
          ["w", "TOOL_ABORTED_BEFORE_DISPATCH", "result:The turn was canceled before this tool call started."],
          ["a", null, "result:read ok"]
        ])
        expect(decisions(agent)).toEqual([{ id: question!.id, outcome: "cancelled", by: { kind: "cancel" } }])
        expect(brief(agent.log.events()).slice(-2)).toEqual(["step/end 1.1", "turn/end 1 aborted:user"])
        expect(yield* agent.status).toBe("idle")
        // A decision after the cancel: the question is closed.
        const late = yield* Effect.exit(agent.approve(question!.id))
        expect(Exit.isFailure(late) && JSON.stringify(late.cause)).toContain("ApprovalNotOpen")
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("approvalTimeoutMs decides rejected by timeout on the Effect clock", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "w", name: "write", arguments: { ms: 5 } }] },
        { text: "ok" }
      ])
      const write = sleeper("write", "always")
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [write.tool], approvalTimeoutMs: 60_000 })
        yield* agent.followup("go")
        yield* advance(59_999)
        expect(yield* agent.status).toBe("awaiting-approval")
        yield* advance(1)
        const [decided] = decisions(agent)
        expect(decided).toEqual({
          id: decided!.id,
          outcome: "rejected",
          by: { kind: "timeout" },
          reason: "no decision within 60000 ms"
        })
        expect(results(agent)).toEqual([
          ["w", "DENIED", "result:The call to write was rejected by the approval timeout: no decision within 60000 ms"]
        ])
        expect(agent.log.events().find((e) => e.type === "approval/decided")!.time).toBe(60_000)
        expect(yield* agent.status).toBe("idle")
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a policy that never answers is bounded by approvalTimeoutMs too: unavailable, the call refused", () => {
      const model = ScriptedModel.make([{ toolCalls: [{ id: "w", name: "write", arguments: { ms: 5 } }] }, { text: "ok" }])
      const write = sleeper("write", "always")
      const policy = Approval.layer([() => Effect.never])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [write.tool], approvalTimeoutMs: 1000 })
        yield* agent.followup("go")
        yield* advance(999)
        expect(agent.log.events().some((e) => e.type === "tool/call")).toBe(false)
        yield* advance(1)
        expect(decisions(agent).map((d) => [d.outcome, d.by, d.reason])).toEqual([
          ["unavailable", undefined, "the approval check did not answer within 1000 ms"]
        ])
        expect(results(agent)).toEqual([[
          "w",
          "DENIED",
          "result:The call to write was refused: no approval was available: the approval check did not answer within 1000 ms"
        ]])
        expect(write.runs).toEqual([])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model, policy)))
    })

    it.scoped("allow always: later calls of the tool are decided by the remembered answer, without asking", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "w1", name: "write", arguments: { ms: 1 } }] },
        { toolCalls: [{ id: "w2", name: "write", arguments: { ms: 2 } }, { id: "d1", name: "drop", arguments: { ms: 3 } }] },
        { toolCalls: [{ id: "d2", name: "drop", arguments: { ms: 4 } }] },
        { text: "done" }
      ])
      const write = sleeper("write", "always")
      const drop = sleeper("drop", "always")
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [write.tool, drop.tool] })
        yield* agent.followup("go")
        yield* advance(1)
        const [first] = yield* agent.pendingApprovals
        yield* agent.approve(first!.id, { always: true })
        yield* advance(10)
        // w2 is decided at once by the remembered answer; d1 is asked.
        const [second] = yield* agent.pendingApprovals
        expect(second!.callId).toBe("d1")
        yield* agent.reject(second!.id, { always: true, reason: "never drop" })
        yield* advance(10)
        expect(write.runs).toEqual([1, 2])
        expect(drop.runs).toEqual([])
        expect(decisions(agent).map((d) => [d.outcome, d.by, d.reason])).toEqual([
          ["allowed-always", { kind: "person" }, undefined],
          ["allowed-once", { kind: "policy", policy: "remembered" }, "a person allowed every call of this tool in this session"],
          ["rejected-always", { kind: "person" }, "never drop"],
          ["rejected", { kind: "policy", policy: "remembered" }, "a person rejected every call of this tool in this session"]
        ])
        expect(results(agent).map((r) => r.slice(0, 2))).toEqual([
          ["w1", null],
          ["w2", null],
          ["d1", "DENIED"],
          ["d2", "DENIED"]
        ])
        expect(yield* agent.status).toBe("idle")
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("the policy decides without asking: allow and deny by name; a failing policy or approval function decides unavailable", () => {
      const model = ScriptedModel.make([
        {
          toolCalls: [
            { id: "r", name: "read", arguments: { ms: 1 } },
            { id: "x", name: "rm", arguments: { ms: 1 } },
            { id: "f", name: "flaky", arguments: { ms: 1 } },
            { id: "b", name: "broken", arguments: { ms: 1 } }
          ]
        },
        { text: "done" }
      ])
      const read = sleeper("read", "always")
      const rm = sleeper("rm", "always")
      const flaky = sleeper("flaky", "always")
      const broken = sleeper("broken", () => Effect.die(new Error("no answer")))
      const failing: Approval.Listener = (request, next) =>
        request.toolName === "flaky" ? Effect.fail(new Error("policy store down")) : next()
      const policy = Approval.layer([failing, Approval.byName({ allow: [{ tool: "read" }], deny: [{ tool: "rm" }] })])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [read.tool, rm.tool, flaky.tool, broken.tool] })
        yield* agent.followup("go")
        yield* advance(10)
        expect(read.runs).toEqual([1])
        expect(rm.runs.concat(flaky.runs, broken.runs)).toEqual([])
        expect(decisions(agent).map((d) => [d.outcome, d.by, d.reason])).toEqual([
          ["allowed-once", { kind: "policy", policy: "byName" }, undefined],
          ["rejected", { kind: "policy", policy: "byName" }, "it matches the deny rule tool \"rm\""],
          ["unavailable", undefined, "the approval policy failed: policy store down"],
          ["unavailable", undefined, "the approval check of tool \"broken\" failed: no answer"]
        ])
        expect(results(agent)).toEqual([
          ["r", null, "result:read ok"],
          ["x", "DENIED", "result:The call to rm was rejected by the policy byName: it matches the deny rule tool \"rm\""],
          [
            "f",
            "DENIED",
            "result:The call to flaky was refused: no approval was available: the approval policy failed: policy store down"
          ],
          [
            "b",
            "DENIED",
            "result:The call to broken was refused: no approval was available: the approval check of tool \"broken\" failed: no answer"
          ]
        ])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model, policy)))
    })

    it.scoped("two decisions at once: exactly one is appended, the other fails ApprovalNotOpen; an unknown id fails too", () => {
      const model = ScriptedModel.make([{ toolCalls: [{ id: "w", name: "write", arguments: { ms: 5 } }] }, { text: "ok" }])
      const write = sleeper("write", "always")
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [write.tool] })
        yield* agent.followup("go")
        yield* advance(1)
        const [question] = yield* agent.pendingApprovals
        const both = yield* Effect.all([
          Effect.either(agent.approve(question!.id, { name: "ana" })),
          Effect.either(agent.reject(question!.id, { name: "bo" }))
        ], { concurrency: "unbounded" })
        expect(both.map((e) => e._tag)).toEqual(["Right", "Left"])
        expect(both[1]!._tag === "Left" && both[1]!.left._tag).toBe("ApprovalNotOpen")
        const unknown = yield* Effect.either(agent.approve("never-asked"))
        expect(unknown._tag === "Left" && unknown.left.message).toBe(
          `approval "never-asked" is not open in session "${agent.id}": it was never asked here, or it is already decided`
        )
        yield* advance(10)
        expect(decisions(agent)).toHaveLength(1)
        expect(write.runs).toEqual([5])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a process that stops while a question is open: resume keeps it open, a decision continues the same turn and step", () => {
      const model = ScriptedModel.make([
        {
          toolCalls: [
            { id: "w", name: "write", arguments: { ms: 5 } },
            { id: "a", name: "read", arguments: { ms: 10 } },
            { id: "b", name: "read", arguments: { ms: 1 } }
          ]
        },
        { text: "done" }
      ])
      const write = sleeper("write", "always")
      const read = sleeper("read")
      return Effect.gen(function*() {
        const first = yield* Agent.make({ tools: [write.tool, read.tool] })
        const id = first.id
        yield* first.followup("go")
        yield* advance(5)
        // b finished (its result not committed: it comes after w), a is running: then the process stops.
        expect(read.runs).toEqual([10, 1])
        yield* first.release
        const before = agentEvents(first)
        expect(before.slice(-4)).toEqual([
          "tool/call w write",
          `asked ${before.at(-3)!.split(" ")[1]} write w`,
          "tool/call a read",
          "tool/call b read"
        ])
        const agent = yield* Agent.resume(id, { tools: [write.tool, read.tool] })
        // Nothing was appended by the repair; the question is open again.
        expect(agent.log.events().length).toBe(first.log.events().length)
        expect(yield* agent.status).toBe("awaiting-approval")
        const [question] = yield* agent.pendingApprovals
        expect([question!.toolName, question!.callId, question!.arguments, question!.turn, question!.step, question!.askedAt])
          .toEqual(["write", "w", { ms: 5 }, 1, 1, 0])
        yield* agent.approve(question!.id)
        yield* advance(10)
        expect(write.runs).toEqual([5])
        // a and b had started: their outcome is unknown, they never run twice.
        expect(read.runs).toEqual([10, 1])
        expect(results(agent)).toEqual([
          ["w", null, "result:write ok"],
          [
            "a",
            "TOOL_OUTCOME_UNKNOWN",
            "result:The session stopped while this tool call was running; whether it took effect is unknown. Check before calling it again."
          ],
          [
            "b",
            "TOOL_OUTCOME_UNKNOWN",
            "result:The session stopped while this tool call was running; whether it took effect is unknown. Check before calling it again."
          ]
        ])
        expect(brief(agent.log.events()).slice(-9)).toEqual([
          `decided ${question!.id} allowed-once by person`,
          "tool/result w",
          "tool/result a TOOL_OUTCOME_UNKNOWN",
          "tool/result b TOOL_OUTCOME_UNKNOWN",
          "step/end 1.1",
          "step/start 1.2",
          "assistant done",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
        expect(yield* agent.status).toBe("idle")
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a waiting call whose tool the resumed agent does not have: its question is decided unavailable, UNKNOWN_TOOL", () => {
      const model = ScriptedModel.make([{ toolCalls: [{ id: "w", name: "write", arguments: { ms: 5 } }] }, { text: "ok" }])
      const write = sleeper("write", "always")
      return Effect.gen(function*() {
        const first = yield* Agent.make({ tools: [write.tool] })
        yield* first.followup("go")
        yield* advance(1)
        yield* first.release
        const agent = yield* Agent.resume(first.id, { tools: [] })
        // Not open again: nobody may allow a call whose tool is gone.
        expect(yield* agent.pendingApprovals).toEqual([])
        expect(yield* agent.status).toBe("running")
        yield* advance(1)
        expect(decisions(agent).map((d) => [d.outcome, d.by, d.reason])).toEqual([
          ["unavailable", undefined, "Unknown tool \"write\". Available tools: none."]
        ])
        expect(results(agent)).toEqual([["w", "UNKNOWN_TOOL", "result:Unknown tool \"write\". Available tools: none."]])
        expect(yield* agent.status).toBe("idle")
        expect(write.runs).toEqual([])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("an answer remembered before a resume still applies after it", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "w1", name: "write", arguments: { ms: 1 } }] },
        { text: "one" },
        { toolCalls: [{ id: "w2", name: "write", arguments: { ms: 2 } }] },
        { text: "two" }
      ])
      const write = sleeper("write", "always")
      return Effect.gen(function*() {
        const first = yield* Agent.make({ tools: [write.tool] })
        yield* first.followup("go")
        yield* advance(1)
        const [question] = yield* first.pendingApprovals
        yield* first.approve(question!.id, { always: true })
        yield* advance(10)
        expect(yield* first.status).toBe("idle")
        yield* first.release
        const agent = yield* Agent.resume(first.id, { tools: [write.tool] })
        expect(yield* agent.status).toBe("idle")
        yield* agent.followup("again")
        yield* advance(10)
        expect(write.runs).toEqual([1, 2])
        expect(decisions(agent).map((d) => [d.outcome, d.by])).toEqual([
          ["allowed-always", { kind: "person" }],
          ["allowed-once", { kind: "policy", policy: "remembered" }]
        ])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })
  })
}

const agentEvents = (agent: Agent.Agent) => brief(agent.log.events())
