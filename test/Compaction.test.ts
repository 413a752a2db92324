/**
 * Compaction (§17): pressure before a step, overflow and its one retry, manual brackets,
 * cancel, deliveries during a compaction, pruning, resume. Token figures follow the estimate of
 * `Compaction.estimateTokens`: a 200-character message is 54 tokens, "okN" 5.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema } from "effect"
import * as Agent from "../src/Agent.js"
import * as Compaction from "../src/Compaction.js"
import * as Delivery from "../src/Delivery.js"
import * as History from "../src/History.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import { UserMessage } from "../src/Message.js"
import type * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import * as Tool from "../src/Tool.js"
import { advance, brief, layer as agentLayer, type StoreMode, text } from "./utils/agent.js"

const big = (c: string) => c.repeat(200)

/** `brief` with the compaction bracket spelled out and long texts cut. */
const log = (events: ReadonlyArray<SessionEvent>): Array<string> =>
  brief(events).map((line, i) => {
    const e = events[i]!
    const d = e.data as any
    if (e.type === "compaction/start") return `compaction/start ${d.turn} ${d.reason} ${d.tokens}`
    if (e.type === "compaction/summary") {
      return `compaction/summary ${d.summary} [${d.shadowedSeqs.join(",")}] ${d.shadowedTokenCount}`
    }
    if (e.type === "compaction/end") return `compaction/end ${d.outcome}${d.tokens !== undefined ? ` ${d.tokens}` : ""}`
    if (e.type === "user/message" && (e as any).surfaceOp !== undefined) {
      return `checkpoint ${(e as any).surfaceOp.start}..${(e as any).surfaceOp.end} ${
        text(d).replace(Compaction.CHECKPOINT_PREFIX, "")
      }`
    }
    return line.replace(/(a|b|c|d){200}/g, "$1×200")
  })

/** What each recorded request carried: `turn.step purpose: messages`. */
const requests = (model: ScriptedModel.ScriptedModel) =>
  model.requests.map((r) =>
    `${r.turn}.${r.step}${r.purpose ? ` ${r.purpose}` : ""}: ${
      r.messages.map((m) => text(m).replace(Compaction.CHECKPOINT_PREFIX, "").replace(/(a|b|c|d){200}/g, "$1×200")).join(" | ")
    }`
  )

const policy = Compaction.layer({ contextWindow: 200, reserve: 50, keepRecentTokens: 60 })

/** Three turns of 54-token prompts: the third passes 150 tokens (118 + 54) and compacts first. */
const threeTurns = (agent: Agent.Agent) =>
  Effect.gen(function*() {
    for (const c of ["a", "b", "c"]) {
      yield* agent.followup(big(c))
      yield* advance(10)
    }
  })

const TURNS_1_2 = [
  "splice next-turn 0 +[a×200]",
  "turn/start 1",
  "splice next-turn 0 -1",
  "step/start 1.1",
  "user a×200",
  "request/header",
  "assistant ok1",
  "step/end 1.1",
  "turn/end 1 completed",
  "splice next-turn 0 +[b×200]",
  "turn/start 2",
  "splice next-turn 0 -1",
  "step/start 2.1",
  "user b×200",
  "assistant ok2",
  "step/end 2.1",
  "turn/end 2 completed"
]

const ctx = (t: string) =>
  UserMessage.make({ text: t, source: { kind: "plugin", plugin: "watch" } }).pipe(Effect.provide(IdGenerator.layerSeeded(9)))

for (const mode of ["sync", "locked"] as ReadonlyArray<StoreMode>) {
  const layer = (model: Model.ModelService) => agentLayer(model, undefined, mode)
  describe(`Compaction (${mode} store)`, () => {
    it.scoped("pressure: the step that would pass contextWindow − reserve compacts first, after its claim", () => {
      const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, { text: "SUMMARY" }, { text: "ok3" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* threeTurns(agent)
        const events = agent.log.events()
        expect(log(events)).toEqual([
          ...TURNS_1_2,
          "splice next-turn 0 +[c×200]",
          "turn/start 3",
          "splice next-turn 0 -1",
          "compaction/start 3 pressure 118",
          "compaction/summary SUMMARY [4,6] 59",
          "checkpoint 4..6 SUMMARY",
          "compaction/end compacted 80",
          "step/start 3.1",
          "user c×200",
          "assistant ok3",
          "step/end 3.1",
          "turn/end 3 completed"
        ])
        expect(requests(model)).toEqual([
          "1.1: a×200",
          "2.1: a×200 | ok1 | b×200",
          "3.0 compaction: <conversation>\n[user]\na×200\n\n[assistant]\nok1\n</conversation>",
          "3.1: SUMMARY | b×200 | ok2 | c×200"
        ])
        expect(model.requests[2]!.instructions).toBe(Compaction.DEFAULT_INSTRUCTIONS)
        expect(model.requests[2]!.tools).toEqual([])
        // The request equals the log's history at that point; the live history equals the log's.
        expect(History.derive(events.slice(0, 26))).toEqual(model.requests[3]!.messages)
        expect(yield* agent.history).toEqual(History.derive(events))
      }).pipe(Effect.provide(layer(model)), Effect.provide(policy))
    })

    it.scoped("a steer, an inject and a followup during the summarization request wait for the next boundary, in order", () => {
      const model = ScriptedModel.make([
        { text: "ok1" },
        { text: "ok2" },
        { text: "SUMMARY", latencyMs: 100 },
        { text: "ok3" },
        { text: "ok4" },
        { text: "ok5" }
      ])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup(big("a"))
        yield* advance(10)
        yield* agent.followup(big("b"))
        yield* advance(10)
        yield* agent.followup(big("c"))
        yield* advance(50)
        const i = yield* agent.inject(yield* ctx("context I"))
        const s = yield* agent.steer("steer S")
        const f = yield* agent.followup("followup F")
        yield* advance(200)
        expect(log(agent.log.events()).slice(17)).toEqual([
          "splice next-turn 0 +[c×200]",
          "turn/start 3",
          "splice next-turn 0 -1",
          "compaction/start 3 pressure 118",
          "splice next-step 0 +[context I]",
          "splice next-step 1 +[steer S] wake",
          "splice next-turn 0 +[followup F]",
          "compaction/summary SUMMARY [4,6] 59",
          "checkpoint 4..6 SUMMARY",
          "compaction/end compacted 80",
          "step/start 3.1",
          "user c×200",
          "assistant ok3",
          "step/end 3.1",
          "splice next-step 0 -2",
          "step/start 3.2",
          "user context I (plugin)",
          "user steer S",
          "assistant ok4",
          "step/end 3.2",
          "turn/end 3 completed",
          "turn/start 4",
          "splice next-turn 0 -1",
          "step/start 4.1",
          "user followup F",
          "assistant ok5",
          "step/end 4.1",
          "turn/end 4 completed"
        ])
        expect(yield* i.outcome).toEqual({ _tag: "Entered", turn: 3, step: 2 })
        expect(yield* s.outcome).toEqual({ _tag: "Entered", turn: 3, step: 2 })
        expect(yield* f.outcome).toEqual({ _tag: "Entered", turn: 4, step: 1 })
        expect(requests(model)[4]).toBe("3.2: SUMMARY | b×200 | ok2 | c×200 | ok3 | context I | steer S")
      }).pipe(
        Effect.provide(layer(model)),
        // The line at 165 tokens: turn 3 (172) compacts to 80; step 3.2 (152) and turn 4 (163) do not.
        Effect.provide(Compaction.layer({ contextWindow: 215, reserve: 50, keepRecentTokens: 60 }))
      )
    })

    it.scoped("a cancel during the summarization request aborts it: nothing kept, the claimed prompt dropped canceled", () => {
      const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, { text: "SUMMARY", latencyMs: 100 }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup(big("a"))
        yield* advance(10)
        yield* agent.followup(big("b"))
        yield* advance(10)
        const before = yield* agent.history
        const c = yield* agent.followup(big("c"))
        yield* advance(50)
        yield* agent.cancel()
        yield* advance(200)
        expect(log(agent.log.events()).slice(17)).toEqual([
          "splice next-turn 0 +[c×200]",
          "turn/start 3",
          "splice next-turn 0 -1",
          "compaction/start 3 pressure 118",
          "compaction/end aborted",
          "turn/end 3 aborted:user"
        ])
        expect(yield* c.outcome).toEqual({ _tag: "Dropped", reason: "canceled" })
        expect(yield* agent.history).toEqual(before)
        expect(History.derive(agent.log.events())).toEqual(before)
        expect(yield* agent.status).toBe("idle")
      }).pipe(Effect.provide(layer(model)), Effect.provide(policy))
    })

    const overflow = { error: { code: "CONTEXT_OVERFLOW" as const, message: "prompt is too long", status: 400 } }

    it.scoped("overflow: the step compacts once and retries its request once", () => {
      const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, overflow, { text: "SUMMARY" }, { text: "ok3" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* threeTurns(agent)
        expect(log(agent.log.events()).slice(17)).toEqual([
          "splice next-turn 0 +[c×200]",
          "turn/start 3",
          "splice next-turn 0 -1",
          "step/start 3.1",
          "user c×200",
          "compaction/start 3 overflow 172",
          "compaction/summary SUMMARY [4,6] 59",
          "checkpoint 4..6 SUMMARY",
          "compaction/end compacted 134",
          "assistant ok3",
          "step/end 3.1",
          "turn/end 3 completed"
        ])
        expect(requests(model).slice(2)).toEqual([
          "3.1: a×200 | ok1 | b×200 | ok2 | c×200",
          "3.0 compaction: <conversation>\n[user]\na×200\n\n[assistant]\nok1\n</conversation>",
          "3.1: SUMMARY | b×200 | ok2 | c×200"
        ])
      }).pipe(Effect.provide(layer(model)), Effect.provide(Compaction.layer({ keepRecentTokens: 120 })))
    })

    it.scoped("a second overflow after the compaction ends the turn error CONTEXT_OVERFLOW; no policy: no compaction", () => {
      const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, overflow, { text: "SUMMARY" }, overflow, overflow])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* threeTurns(agent)
        const end = agent.log.events().at(-1)!
        expect(log(agent.log.events()).slice(-4)).toEqual([
          "checkpoint 4..6 SUMMARY",
          "compaction/end compacted 134",
          "step/end 3.1",
          "turn/end 3 error:CONTEXT_OVERFLOW"
        ])
        expect((end.data as any).reason.error).toEqual({
          code: "CONTEXT_OVERFLOW",
          status: 400,
          message: "prompt is too long; the request overflowed again after a compaction"
        })
      }).pipe(Effect.provide(layer(model)), Effect.provide(Compaction.layer({ keepRecentTokens: 120 })))
    })

    it.scoped("without a Compaction layer an overflow ends the turn at once", () => {
      const model = ScriptedModel.make([overflow])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("hi")
        yield* advance(10)
        expect(log(agent.log.events()).slice(-2)).toEqual(["step/end 1.1", "turn/end 1 error:CONTEXT_OVERFLOW"])
        expect(model.requests.length).toBe(1)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("manual compaction on an idle agent: its own bracket (turn null), no turn opened; a followup during it waits", () => {
      const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, { text: "SUMMARY", latencyMs: 100 }, { text: "ok3" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup(big("a"))
        yield* advance(10)
        yield* agent.followup(big("b"))
        yield* advance(10)
        const fiber = yield* Effect.fork(agent.compact({ instructions: "keep the letters" }))
        yield* advance(50)
        expect(yield* agent.status).toBe("running")
        const f = yield* agent.followup("after")
        yield* advance(200)
        const report = yield* Fiber.join(fiber)
        expect(report).toEqual({
          compactionId: report.compactionId,
          outcome: "compacted",
          tokensBefore: 118,
          tokensAfter: 80
        })
        expect(log(agent.log.events()).slice(17)).toEqual([
          "compaction/start null manual 118",
          "splice next-turn 0 +[after]",
          "compaction/summary SUMMARY [4,6] 59",
          "checkpoint 4..6 SUMMARY",
          "compaction/end compacted 80",
          "turn/start 3",
          "splice next-turn 0 -1",
          "step/start 3.1",
          "user after",
          "assistant ok3",
          "step/end 3.1",
          "turn/end 3 completed"
        ])
        expect(yield* f.outcome).toEqual({ _tag: "Entered", turn: 3, step: 1 })
        expect(requests(model)[2]).toBe(
          "0.0 compaction: <conversation>\n[user]\na×200\n\n[assistant]\nok1\n</conversation>\n\nAlso: keep the letters"
        )
      }).pipe(Effect.provide(layer(model)), Effect.provide(Compaction.layer({ keepRecentTokens: 60 })))
    })

    it.scoped("manual compaction with nothing old enough ends skipped; a cancel during a manual one aborts it, no turn", () => {
      const model = ScriptedModel.make([{ text: "ok1" }, { text: "SUMMARY", latencyMs: 100 }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const skipped = yield* agent.compact()
        expect(skipped.outcome).toBe("skipped")
        yield* agent.followup(big("a"))
        yield* advance(10)
        const fiber = yield* Effect.fork(agent.compact())
        yield* advance(50)
        yield* agent.cancel()
        const report = yield* Fiber.join(fiber)
        expect(report.outcome).toBe("aborted")
        expect(log(agent.log.events())).toEqual([
          "compaction/start null manual 0",
          "compaction/end skipped",
          "splice next-turn 0 +[a×200]",
          "turn/start 1",
          "splice next-turn 0 -1",
          "step/start 1.1",
          "user a×200",
          "request/header",
          "assistant ok1",
          "step/end 1.1",
          "turn/end 1 completed",
          "compaction/start null manual 59",
          "compaction/end aborted"
        ])
        expect(yield* agent.status).toBe("idle")
      }).pipe(Effect.provide(layer(model)), Effect.provide(Compaction.layer({ keepRecentTokens: 1 })))
    })

    it.scoped("compact on a running agent is served at its next pre-step boundary, inside the turn", () => {
      const sleeper = Tool.make({
        name: "sleep",
        description: "sleeps",
        parameters: Schema.Struct({}),
        execute: () => Effect.as(Effect.sleep(100), { content: "slept" })
      })
      const model = ScriptedModel.make([
        { text: "ok1" },
        { toolCalls: [{ id: "t1", name: "sleep" }] },
        { text: "SUMMARY" },
        { text: "done" }
      ])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [sleeper] })
        yield* agent.followup(big("a"))
        yield* advance(10)
        yield* agent.followup(big("b"))
        yield* advance(10)
        const fiber = yield* Effect.fork(agent.compact())
        yield* advance(200)
        expect((yield* Fiber.join(fiber)).outcome).toBe("compacted")
        expect(log(agent.log.events()).slice(9)).toEqual([
          "splice next-turn 0 +[b×200]",
          "turn/start 2",
          "splice next-turn 0 -1",
          "step/start 2.1",
          "user b×200",
          "assistant sleep({})",
          "tool/call t1 sleep",
          "tool/result t1",
          "step/end 2.1",
          "compaction/start 2 manual 162",
          "compaction/summary SUMMARY [4,6] 59",
          "checkpoint 4..6 SUMMARY",
          "compaction/end compacted 124",
          "step/start 2.2",
          "assistant done",
          "step/end 2.2",
          "turn/end 2 completed"
        ])
      }).pipe(Effect.provide(layer(model)), Effect.provide(Compaction.layer({ keepRecentTokens: 80 })))
    })

    it.scoped("resume after a compaction keeps it: the resumed history is the compacted one, nothing compacts again", () => {
      const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, { text: "SUMMARY" }, { text: "ok3" }, { text: "ok4" }])
      return Effect.gen(function*() {
        const first = yield* Agent.make()
        yield* threeTurns(first)
        const history = yield* first.history
        yield* first.release
        const again = yield* Agent.resume(first.id)
        expect(yield* again.history).toEqual(history)
        yield* again.followup("more")
        yield* advance(10)
        expect(requests(model).at(-1)).toBe("4.1: SUMMARY | b×200 | ok2 | c×200 | ok3 | more")
      }).pipe(Effect.provide(layer(model)), Effect.provide(policy))
    })

    it.scoped("a pruning policy replaces old tool-result bodies one by one; a policy may prune and summarize", () => {
      const reader = Tool.make({
        name: "read",
        description: "reads",
        parameters: Schema.Struct({}),
        execute: () => Effect.succeed({ content: big("d") })
      })
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "r1", name: "read" }] },
        { text: "ok1" },
        { text: "ok2" }
      ])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [reader] })
        yield* agent.followup("read it")
        yield* advance(10)
        const report = yield* agent.compact()
        expect(report.outcome).toBe("compacted")
        const pruned = "[tool result removed by compaction: about 56 tokens]"
        expect(log(agent.log.events()).slice(-3)).toEqual([
          "compaction/start null manual 108",
          `checkpoint 8..8 result:${pruned}`,
          "compaction/end compacted 71"
        ])
        yield* agent.followup("again")
        yield* advance(10)
        expect(requests(model).at(-1)).toBe(`2.1: read it | read({}) | result:${pruned} | ok1 | again`)
        expect(Delivery.fateOf(agent.log.events(), "x")).toBeUndefined()
      }).pipe(
        Effect.provide(layer(model)),
        Effect.provide(Compaction.layerPolicy(Compaction.prune({ keepRecentTokens: 5 })))
      )
    })
  })
}

describe("Compaction: what the loop refuses or keeps (§17, found by a review)", () => {
  const overflow = { error: { code: "CONTEXT_OVERFLOW" as const, message: "prompt is too long", status: 400 } }

  it.scoped("an overflow compaction never summarizes the step's own prompt: the retry carries it verbatim", () => {
    const model = ScriptedModel.make([{ text: "ok1" }, overflow, { text: "SUMMARY" }, { text: "ok2" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      yield* agent.followup(big("a"))
      yield* advance(10)
      yield* agent.followup(big("b"))
      yield* advance(10)
      expect(requests(model).slice(1)).toEqual([
        "2.1: a×200 | ok1 | b×200",
        "2.0 compaction: <conversation>\n[user]\na×200\n\n[assistant]\nok1\n</conversation>",
        "2.1: SUMMARY | b×200"
      ])
    }).pipe(Effect.provide(agentLayer(model)), Effect.provide(Compaction.layer({ keepRecentTokens: 1 })))
  })

  it.scoped("a usage that reports no input tokens (0, as the adapters give an unreported count) leaves the estimate: turn 3 still compacts", () => {
    const noInput = { inputTokens: 0, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 }
    const model = ScriptedModel.make([
      { text: "ok1", usage: noInput },
      { text: "ok2", usage: noInput },
      { text: "SUMMARY" },
      { text: "ok3", usage: noInput }
    ])
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      yield* threeTurns(agent)
      expect(log(agent.log.events()).filter((line) => line.startsWith("compaction/"))).toEqual([
        "compaction/start 3 pressure 118",
        "compaction/summary SUMMARY [4,6] 59",
        "compaction/end compacted 80"
      ])
    }).pipe(Effect.provide(agentLayer(model)), Effect.provide(policy))
  })

  const policyOf = (compact: Compaction.CompactionPolicy["compact"]) =>
    Compaction.layerPolicy({ contextWindow: undefined, reserve: 0, compact })

  it.scoped("a plan that changes a tool result's call, has no content or bad blocks fails INVALID_PLAN; a plain failure is POLICY_FAILED", () => {
    const reader = Tool.make({
      name: "read",
      description: "reads",
      parameters: Schema.Struct({}),
      execute: () => Effect.succeed({ content: big("d") })
    })
    const model = ScriptedModel.make([{ toolCalls: [{ id: "r1", name: "read" }] }, { text: "ok1" }])
    const plans: Array<Compaction.CompactionPlan | "fail"> = [
      { replace: [{ index: 2, content: [{ type: "text", text: "gone" }] }] },
      { replace: [{ index: 2, content: [] }] },
      { replace: [{ index: 2, content: [{ type: "bogus" } as never] }] },
      "fail"
    ]
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [reader] })
      yield* agent.followup("read it")
      yield* advance(10)
      const before = yield* agent.history
      const reports = []
      for (let i = 0; i < 4; i++) reports.push(yield* agent.compact())
      expect(reports.map((r) => [r.outcome, r.error])).toEqual([
        ["failed", { code: "INVALID_PLAN", message: "replace index 2 changes the tool results it holds (r1 → none)" }],
        ["failed", { code: "INVALID_PLAN", message: "replace index 2 has no content blocks" }],
        ["failed", { code: "INVALID_PLAN", message: "replace index 2: its content is not well-formed content blocks" }],
        ["failed", { code: "POLICY_FAILED", message: "the compaction policy failed with plain string" }]
      ])
      expect(yield* agent.history).toEqual(before)
      expect(Invariant.check(agent.log.events())).toEqual([])
    }).pipe(
      Effect.provide(agentLayer(model)),
      Effect.provide(policyOf(() => {
        const plan = plans.shift()!
        return plan === "fail" ? Effect.fail("plain string" as never) : Effect.succeed(plan)
      }))
    )
  })

  it.scoped("a plan that is not a plan's shape (null, replace not an array, a null replacement) fails INVALID_PLAN", () => {
    const model = ScriptedModel.make([{ text: "ok1" }])
    const plans: Array<unknown> = [null, { replace: { index: 0 } }, { replace: [null] }, { summary: 5 }]
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      yield* agent.followup(big("a"))
      yield* advance(10)
      const reports = []
      for (let i = 0; i < 4; i++) reports.push(yield* agent.compact())
      expect(reports.map((r) => [r.outcome, r.error?.message])).toEqual([
        ["failed", "the plan is null, not an object"],
        ["failed", "replace is not an array"],
        ["failed", "replace holds something that is not an object"],
        ["failed", "summary is not an object"]
      ])
      expect(Invariant.check(agent.log.events())).toEqual([])
    }).pipe(Effect.provide(agentLayer(model)), Effect.provide(policyOf(() => Effect.succeed(plans.shift() as never))))
  })

  it.scoped("at a tool continuation the last response's tool calls and their results are kept: the step continues from them", () => {
    const reader = Tool.make({
      name: "read",
      description: "reads",
      parameters: Schema.Struct({}),
      execute: () => Effect.succeed({ content: big("d") })
    })
    const model = ScriptedModel.make([
      { text: "ok1" },
      { toolCalls: [{ id: "r1", name: "read" }] },
      { text: "SUMMARY" },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [reader] })
      yield* agent.followup(big("a"))
      yield* advance(10)
      yield* agent.followup(big("b"))
      yield* advance(10)
      expect(requests(model).slice(2)).toEqual([
        "2.0 compaction: <conversation>\n[user]\na×200\n\n[assistant]\nok1\n\n[user]\nb×200\n</conversation>",
        "2.2: SUMMARY | read({}) | result:d×200"
      ])
      expect(Invariant.check(agent.log.events())).toEqual([])
    }).pipe(
      Effect.provide(agentLayer(model)),
      // The line at 200: the result (56 tokens) passes it before step 2.2; keep almost nothing.
      Effect.provide(Compaction.layer({ contextWindow: 300, reserve: 100, keepRecentTokens: 1 }))
    )
  })

  it.effect("invalid options fail the layer with CompactionError INVALID_OPTIONS", () =>
    Effect.gen(function*() {
      for (
        const options of [{ contextWindow: 0 }, { contextWindow: Number.NaN }, { contextWindow: 100, reserve: 500 }, {
          keepRecentTokens: -1
        }]
      ) {
        const error = yield* Effect.flip(Effect.scoped(Layer.build(Compaction.layer(options))))
        expect([error._tag, error.code]).toEqual(["CompactionError", "INVALID_OPTIONS"])
      }
      expect(() => Compaction.prune({ reserve: 1.5 })).toThrow("reserve must be a whole number ≥ 0 of tokens, not 1.5")
    }))

  it.scoped("a cancel during a second manual compaction, served after the first, ends it aborted and opens no turn", () => {
    const model = ScriptedModel.make([{ text: "ok1" }])
    let calls = 0
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      yield* agent.followup(big("a"))
      yield* advance(10)
      const first = yield* Effect.fork(agent.compact())
      yield* advance(50)
      // Requested while the first runs: a request of its own, served after it (afterManual).
      const second = yield* Effect.fork(agent.compact({ instructions: "again" }))
      yield* advance(150)
      yield* agent.cancel()
      expect([(yield* Fiber.join(first)).outcome, (yield* Fiber.join(second)).outcome]).toEqual(["skipped", "aborted"])
      expect(log(agent.log.events()).slice(9)).toEqual([
        "compaction/start null manual 59",
        "compaction/end skipped",
        "compaction/start null manual 59",
        "compaction/end aborted"
      ])
      expect(Invariant.check(agent.log.events())).toEqual([])
    }).pipe(
      Effect.provide(agentLayer(model)),
      // The first is skipped after 100 ms; the second waits (a slow policy) until the cancel.
      Effect.provide(policyOf(() => Effect.as(Effect.sleep(calls++ === 0 ? 100 : 1_000), {})))
    )
  })
})
