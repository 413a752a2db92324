/**
 * A parent's usage includes its sub-agents' (§18, §27): a child's `subagent/end` records what its
 * run spent (by model, responses without usage), the parent's `PreStepPayload.usage` counts it
 * from the end on (and again after a resume, from the log), and a child's payload starts from its
 * parent's usage at the call, so that one budget covers the whole delegation: a child is stopped
 * by its parent's budget (its turn `blocked`, the call `TOOL_FAILED`; the child runs its parent's
 * pre-step waterfall wherever that was provided), and the parent's next step is refused. A turn budget counts the children that ran in the turn, and starts each turn at 0.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import * as Agent from "../src/Agent.js"
import * as Budget from "../src/Budget.js"
import * as PreStep from "../src/PreStep.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import { SessionStore } from "../src/SessionStore.js"
import * as Subagent from "../src/Subagent.js"
import * as Tool from "../src/Tool.js"
import * as Usage from "../src/Usage.js"
import { advance, brief, layer } from "./utils/agent.js"

const dataOf = (events: ReadonlyArray<SessionEvent>, type: string): Array<any> =>
  events.filter((e) => e.type === type).map((e) => e.data)

const call = (id: string, prompt: string) => ({ id, name: "subagent", arguments: { prompt } })

const clock = Tool.make({
  name: "clock",
  description: "the time",
  parameters: Schema.Struct({}),
  execute: () => Effect.succeed({ content: "12:00" })
})

const t = (inputTokens: number, outputTokens: number) => ({
  inputTokens,
  outputTokens,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  reasoningTokens: 0
})

/** What each pre-step saw: whose (parent or child), the step, the session's and the turn's total tokens. */
interface Seen {
  readonly who: string
  readonly step: string
  readonly session: number
  readonly turn: number
}

/** A budget with a listener outside it that notes every payload (`parent` is the parent's session id, once known). */
const watched = (options: Budget.BudgetOptions, seen: Array<Seen>, parent: { id?: string }) =>
  PreStep.listener((payload, next) => {
    seen.push({
      who: payload.agentId === parent.id ? "parent" : "child",
      step: `${payload.turn}.${payload.step}`,
      session: Usage.total(payload.usage.session),
      turn: Usage.total(payload.usage.turn)
    })
    return next()
  }).pipe(Layer.provide(Budget.layer(options)), Layer.provide(PreStep.layer([])))

const childLog = (id: string) =>
  Effect.flatMap(SessionStore, (store) => Effect.map(store.open(id as never), (log) => log.events()))

describe("sub-agents' usage counts in the parent's (§18, §27)", () => {
  it.scoped("a session budget covers the child: it is stopped at the parent's limit, and so is the parent's next step", () => {
    const seen: Array<Seen> = []
    const parent: { id?: string } = {}
    const parentModel = ScriptedModel.make([
      { toolCalls: [call("c1", "look it up")], usage: { inputTokens: 500, outputTokens: 100 } },
      { text: "never asked", usage: { inputTokens: 1, outputTokens: 1 } }
    ])
    const childModel = ScriptedModel.make([
      { toolCalls: [{ id: "k1", name: "clock", arguments: {} }], usage: { inputTokens: 400, outputTokens: 100 } },
      { text: "never asked either" }
    ], { model: "small" })
    return Effect.gen(function*() {
      // The waterfall is the parent's alone (provided to its make, not around the test): the child runs it too.
      const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel, tools: [clock] })] }).pipe(
        Effect.provide(watched({ maxTokens: 1000 }, seen, parent))
      )
      parent.id = agent.id
      yield* agent.followup("go")
      yield* advance(10)
      yield* agent.awaitIdle
      const reason = "budget reached: the session has used 1100 tokens (maxTokens 1000)"
      // The child starts from the parent's 600: its second step would pass 1000.
      expect(seen).toEqual([
        { who: "parent", step: "1.1", session: 0, turn: 0 },
        { who: "child", step: "1.1", session: 600, turn: 600 },
        { who: "child", step: "1.2", session: 1100, turn: 1100 },
        { who: "parent", step: "1.2", session: 1100, turn: 1100 }
      ])
      const events = agent.log.events()
      const [end] = dataOf(events, "subagent/end")
      const child = yield* childLog(end.id)
      expect(dataOf(child, "turn/end")).toEqual([{ turn: 1, reason: { kind: "blocked", reason } }])
      // The end records the child's own spending only (not the 600 it started from).
      expect(end).toMatchObject({
        stopReason: "blocked",
        usage: t(400, 100),
        byModel: { small: t(400, 100) },
        unreported: 0
      })
      expect(dataOf(events, "tool/result")[0].message.content[0].content[0].text).toBe(
        `Tool subagent failed: the sub-agent (session ${end.id}) did not complete its task: blocked (${reason})`
      )
      expect(brief(events).slice(-5)).toEqual([
        "subagent/start",
        "subagent/end",
        "tool/result c1 TOOL_FAILED",
        "step/end 1.1",
        "turn/end 1 blocked"
      ])
      expect(dataOf(events, "turn/end")).toEqual([{ turn: 1, reason: { kind: "blocked", reason } }])
      const u = Usage.fromEvents(events)
      expect([Usage.total(u.usage), Usage.total(u.subagents.usage), Usage.total(Usage.withSubagents(u).usage)]).toEqual([
        600,
        500,
        1100
      ])
    }).pipe(Effect.provide(layer(parentModel)))
  })

  it.scoped("a turn budget counts the children that ran in the turn; the next turn starts at 0; a resume rebuilds the sums", () => {
    const seen: Array<Seen> = []
    const parent: { id?: string } = {}
    const parentModel = ScriptedModel.make([
      { toolCalls: [call("c1", "look it up")], usage: { inputTokens: 500, outputTokens: 100 } },
      { text: "noon", usage: { inputTokens: 150, outputTokens: 50 } },
      { text: "bye", usage: { inputTokens: 10, outputTokens: 5 } },
      { text: "again", usage: { inputTokens: 1, outputTokens: 1 } }
    ])
    const childModel = ScriptedModel.make([{ text: "12:00", usage: { inputTokens: 250, outputTokens: 50 } }], {
      model: "small"
    })
    return Effect.gen(function*() {
      const scope = yield* Scope.make()
      const agent = yield* Scope.extend(Agent.make({ tools: [Subagent.tool({ model: childModel })] }), scope)
      parent.id = agent.id
      yield* agent.followup("what time is it?")
      yield* advance(10)
      yield* agent.followup("thanks")
      yield* advance(10)
      yield* agent.awaitIdle
      expect(dataOf(agent.log.events(), "turn/end").map((e) => e.reason.kind)).toEqual(["completed", "completed"])
      // Resumed, the session's sums are the log's: its own 875 and the child's 300.
      yield* Scope.close(scope, Exit.void)
      const resumed = yield* Agent.resume(agent.id, { tools: [Subagent.tool({ model: childModel })] })
      yield* resumed.followup("once more")
      yield* advance(10)
      yield* resumed.awaitIdle
      expect(seen).toEqual([
        { who: "parent", step: "1.1", session: 0, turn: 0 },
        { who: "child", step: "1.1", session: 600, turn: 600 },
        { who: "parent", step: "1.2", session: 900, turn: 900 },
        { who: "parent", step: "2.1", session: 1100, turn: 0 },
        { who: "parent", step: "3.1", session: 1115, turn: 0 }
      ])
    }).pipe(Effect.provide(layer(parentModel, Layer.orDie(watched({ maxTokens: 1000, scope: "turn" }, seen, parent)))))
  })
})
