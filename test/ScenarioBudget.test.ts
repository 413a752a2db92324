/**
 * Budgets (§18): the files of `test/scenarios/budget/`, each run by the simulator (docs/design.md
 * §15) and checked against its exact brief log, end reasons, fates and invariants; then the
 * budget's other paths: `PreStepPayload.usage` as the driver keeps it (equal to `Usage.fromEvents`
 * of the log at each step), rebuilt on resume so that a session budget stays reached, and invalid
 * options as a typed error.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as Budget from "../src/Budget.js"
import * as Compaction from "../src/Compaction.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Model from "../src/Model.js"
import * as PreStep from "../src/PreStep.js"
import type * as Prices from "../src/Prices.js"
import * as Scenario from "../src/Scenario.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent, TurnEndReason } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Simulator from "../src/Simulator.js"
import * as Usage from "../src/Usage.js"
import { advance, layerTracked } from "./utils/agent.js"
import { briefLog, checkFates } from "./utils/scenarioChecks.js"

const DIRECTORY = Path.resolve(import.meta.dirname, "scenarios/budget")

const runFile = (name: string) =>
  Effect.suspend(() => {
    const text = Fs.readFileSync(Path.join(DIRECTORY, name), "utf8")
    const scenario = Either.getOrThrow(Scenario.parse(text))
    return Effect.map(Simulator.run(scenario, { seed: Scenario.seedOf(text) }), (result) => {
      checkFates(result)
      return { result, log: briefLog(result.events) }
    })
  })

const ends = (events: ReadonlyArray<SessionEvent>): Array<TurnEndReason> =>
  events.flatMap((e) => (e.type === "turn/end" ? [(e.data as { reason: TurnEndReason }).reason] : []))
const outcomes = (result: Simulator.RunResult) => result.deliveries.map((d) => d.outcome ?? d.error ?? "pending")
const entered = (turn: number, step: number) => ({ _tag: "Entered", turn, step })
const rejected = { _tag: "Dropped", reason: "rejected" }
const blocked = (reason: string): TurnEndReason => ({ kind: "blocked", reason })

describe("budget scenarios (test/scenarios/budget, §18)", () => {
  it.effect("session tokens: turn 1 uses 300 ≥ 250, so turns 2 and 3 are blocked before any step; their followups rejected", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("session-tokens.json")
      expect(log).toEqual([
        "splice next-turn 0 +[Is the build green?]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "step/start 1.1",
        "user Is the build green?",
        "request/header",
        "assistant The build is green.",
        "step/end 1.1",
        "turn/end 1 completed",
        "splice next-turn 0 +[Then deploy it.]",
        "turn/start 2",
        "splice next-turn 0 -1",
        "turn/end 2 blocked",
        "splice next-turn 0 +[Deploy it now, please.]",
        "turn/start 3",
        "splice next-turn 0 -1",
        "turn/end 3 blocked"
      ])
      const reason = "budget reached: the session has used 300 tokens (maxTokens 250)"
      expect(ends(result.events)).toEqual([{ kind: "completed" }, blocked(reason), blocked(reason)])
      expect(outcomes(result)).toEqual([entered(1, 1), rejected, rejected])
      // One model request: the script's second entry was never asked for.
      expect(result.requests.length).toBe(1)
    }))

  it.effect("turn tokens: step 1 uses 300, so the tool continuation is blocked; the next followup starts at 0 and runs", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("turn-tokens.json")
      expect(log).toEqual([
        "splice next-turn 0 +[Look up the answer.]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "step/start 1.1",
        "user Look up the answer.",
        "request/header",
        "assistant lookup({\"q\":\"answer\"})",
        "tool/call c1 lookup",
        "tool/result c1",
        "step/end 1.1",
        "turn/end 1 blocked",
        "splice next-turn 0 +[What was it?]",
        "turn/start 2",
        "splice next-turn 0 -1",
        "step/start 2.1",
        "user What was it?",
        "assistant The answer is 42.",
        "step/end 2.1",
        "turn/end 2 completed"
      ])
      expect(ends(result.events)).toEqual([
        blocked("budget reached: this turn has used 300 tokens (maxTokens 250)"),
        { kind: "completed" }
      ])
      expect(outcomes(result)).toEqual([entered(1, 1), entered(2, 1)])
      const usage = Usage.fromEvents(result.events)
      expect(usage.turns.map((t) => Usage.total(t.usage))).toEqual([300, 170])
      expect(Usage.total(usage.usage)).toBe(470)
    }))

  it.effect("cost: 200 uncached·$2 + 800 cached·$0.5 + 100 output·$8 per 1e6 = $0.0016 ≥ maxCost $0.001 blocks turn 2", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("cost.json")
      expect(log.slice(8)).toEqual([
        "turn/end 1 completed",
        "splice next-turn 0 +[Now the changelog.]",
        "turn/start 2",
        "splice next-turn 0 -1",
        "turn/end 2 blocked"
      ])
      expect(ends(result.events)).toEqual([
        { kind: "completed" },
        blocked("budget reached: the session has cost $0.0016 (maxCost $0.001)")
      ])
      expect(outcomes(result)).toEqual([entered(1, 1), rejected])
    }))

  it.effect("unpriced: a model with no price makes the cost unknown, and a maxCost budget refuses the next step", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("cost-unpriced.json")
      expect(log.slice(8)).toEqual([
        "turn/end 1 completed",
        "splice next-turn 0 +[Now the changelog.]",
        "turn/start 2",
        "splice next-turn 0 -1",
        "turn/end 2 blocked"
      ])
      expect(ends(result.events)[1]).toEqual(
        blocked("budget: the cost is unknown, no price for model \"unpriced model\" (maxCost $0.01)")
      )
      expect(outcomes(result)).toEqual([entered(1, 1), rejected])
    }))

  it("a budget block is validated when the scenario is decoded (path of the problem)", () => {
    const base = { model: [], actions: [] }
    const error = (budget: unknown) => {
      const decoded = Scenario.decode({ ...base, budget })
      return Either.isLeft(decoded) ? { path: decoded.left.path, message: decoded.left.message } : undefined
    }
    expect(error({})).toEqual({ path: "$.budget", message: "give maxTokens, maxCost or both" })
    expect(error({ maxCost: 1 })).toEqual({
      path: "$.budget.prices",
      message: "maxCost needs prices (USD per 1e6 tokens by model)"
    })
    expect(error({ maxTokens: 0 })?.path).toBe("$.budget.maxTokens")
    expect(error({ maxTokens: 5, scope: "week" })).toEqual({
      path: "$.budget.scope",
      message: "Expected \"session\" or \"turn\", actual \"week\""
    })
    expect(error({ maxCost: 1, prices: { m: { input: 1 } } })?.path).toBe("$.budget.prices.m.output")
    // A price table's `$` keys are comments, in a scenario as in a --prices file.
    expect(error({ maxCost: 1, prices: { $comment: "example figures", m: { input: 1, output: 1 } } })).toBeUndefined()
  })
})

/** A listener that records each payload's usage and enters. */
const recorder = () => {
  const seen: Array<{ turn: number; step: number; usage: PreStep.PreStepUsage }> = []
  const listener: PreStep.Listener = (payload, next) => {
    seen.push({ turn: payload.turn, step: payload.step, usage: payload.usage })
    return next()
  }
  return { seen, listener }
}

const u = (inputTokens: number, outputTokens: number, cacheReadTokens = 0, cacheWriteTokens = 0, reasoningTokens = 0) => ({
  inputTokens,
  outputTokens,
  cacheReadTokens,
  cacheWriteTokens,
  reasoningTokens
})

describe("PreStepPayload.usage (§18)", () => {
  it.effect("the driver's sums before each step equal Usage.fromEvents of the log up to that step, by model too", () =>
    Effect.gen(function*() {
      const { listener, seen } = recorder()
      const events = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("first")
        yield* agent.awaitIdle
        yield* agent.followup("second")
        yield* agent.awaitIdle
        return agent.log.events()
      })).pipe(Effect.provide(PreStep.layer([listener])))
      // Each step's payload: the usage of the log before that step's step/start.
      const starts = events.filter((e) => e.type === "step/start")
      expect(seen.map((s) => `${s.turn}.${s.step}`)).toEqual(["1.1", "1.2", "2.1"])
      seen.forEach((s, i) => {
        const before = Usage.fromEvents(events.filter((e) => e.seq < starts[i]!.seq))
        const turn = before.turns.find((t) => t.turn === s.turn)
        expect(s.usage.session).toEqual(before.usage)
        expect(s.usage.sessionByModel).toEqual(before.byModel)
        expect(s.usage.turn).toEqual(turn?.usage ?? Usage.zero)
        expect(s.usage.turnByModel).toEqual(turn?.byModel ?? {})
        expect(s.usage.unreported).toEqual({ session: before.unreported, turn: turn?.unreported ?? 0 })
      })
      const none = { session: 0, turn: 0 }
      expect(seen.map((s) => s.usage)).toEqual([
        { session: Usage.zero, turn: Usage.zero, sessionByModel: {}, turnByModel: {}, unreported: none },
        {
          session: u(100, 10, 60),
          turn: u(100, 10, 60),
          sessionByModel: { "m-1": u(100, 10, 60) },
          turnByModel: { "m-1": u(100, 10, 60) },
          unreported: none
        },
        {
          session: u(220, 15, 60, 0, 2),
          turn: Usage.zero,
          sessionByModel: { "m-1": u(220, 15, 60, 0, 2) },
          turnByModel: {},
          unreported: none
        }
      ])
    }).pipe(Effect.provide(Layer.mergeAll(
      SessionStore.layerMemory,
      IdGenerator.layerSeeded(7),
      layerTracked,
      Model.layer(ScriptedModel.make([
        {
          toolCalls: [{ id: "c1", name: "none", arguments: {} }],
          usage: { inputTokens: 100, outputTokens: 10, cacheReadTokens: 60 }
        },
        { text: "one", usage: { inputTokens: 120, outputTokens: 5, reasoningTokens: 2 } },
        { text: "two", usage: { inputTokens: 200, outputTokens: 7, cacheWriteTokens: 50 } }
      ], { model: "m-1" }))
    ))))

  it.effect("resume rebuilds the session's sums from the log: a reached session budget stays reached", () =>
    Effect.gen(function*() {
      const budget = Budget.layer({ maxTokens: 250 }).pipe(Layer.provide(PreStep.layer([])), Layer.orDie)
      yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make({ sessionId: "budgeted" })
        yield* agent.followup("first")
        yield* advance(10)
        yield* agent.awaitIdle
      })).pipe(Effect.provide(budget))
      const end = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("budgeted")
        const d = yield* agent.followup("second")
        yield* advance(10)
        yield* agent.awaitIdle
        const events = agent.log.events()
        return { reason: ends(events)[1], outcome: yield* d.outcome }
      })).pipe(Effect.provide(budget))
      expect(end).toEqual({
        reason: blocked("budget reached: the session has used 300 tokens (maxTokens 250)"),
        outcome: rejected
      })
    }).pipe(Effect.provide(Layer.mergeAll(
      SessionStore.layerMemory,
      IdGenerator.layerSeeded(7),
      layerTracked,
      Model.layer(ScriptedModel.make([{ text: "ok", usage: { inputTokens: 200, outputTokens: 100 } }, { text: "never" }]))
    ))))

  it.effect("a compaction's summary counts in the session (a manual one between turns in no turn): the next payload includes it", () =>
    Effect.gen(function*() {
      const { listener, seen } = recorder()
      yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("first question, long enough to be worth a summary later on")
        yield* agent.awaitIdle
        yield* agent.compact()
        yield* agent.followup("second")
        yield* agent.awaitIdle
        const usage = Usage.fromEvents(agent.log.events())
        expect(usage.requests.map((r) => `${r.kind} ${r.turn} ${Usage.total(r.usage)}`)).toEqual([
          "step 1 15",
          "compaction null 33",
          "step 2 0"
        ])
      })).pipe(Effect.provide(PreStep.layer([listener])))
      // The manual compaction ran between turns: in the session, not in turn 2.
      expect(seen.map((s) => [Usage.total(s.usage.session), Usage.total(s.usage.turn)])).toEqual([[0, 0], [48, 0]])
    }).pipe(Effect.provide(Layer.mergeAll(
      SessionStore.layerMemory,
      IdGenerator.layerSeeded(7),
      layerTracked,
      Compaction.layerPolicy(Compaction.summarize({ keepRecentTokens: 1 })),
      Model.layer(ScriptedModel.make([
        { text: "an answer", usage: { inputTokens: 12, outputTokens: 3 } },
        { text: "the summary", usage: { inputTokens: 30, outputTokens: 3 } },
        { text: "two" }
      ]))
    ))))

  it.effect("a response that reported no usage makes it unknown: a token budget refuses the next step, the turn scope from its next turn on", () =>
    Effect.gen(function*() {
      const run = (options: Budget.BudgetOptions) =>
        Effect.scoped(Effect.gen(function*() {
          const agent = yield* Agent.make()
          const first = yield* agent.followup("first")
          yield* advance(10)
          yield* agent.awaitIdle
          const second = yield* agent.followup("second")
          yield* advance(10)
          yield* agent.awaitIdle
          return {
            ends: ends(agent.log.events()),
            outcomes: [yield* first.outcome, yield* second.outcome]
          }
        })).pipe(
          Effect.provide(Budget.layer(options).pipe(Layer.provide(PreStep.layer([])), Layer.orDie)),
          Effect.provide(Model.layer(ScriptedModel.make([
            { toolCalls: [{ id: "c1", name: "none", arguments: {} }] },
            { text: "two", usage: { inputTokens: 20, outputTokens: 2 } },
            { text: "three", usage: { inputTokens: 20, outputTokens: 2 } }
          ], { model: "scripted" })))
        )
      // Step 1.1 answers with tool calls and no usage: the continuation 1.2 is refused.
      expect(yield* run({ maxTokens: 1_000_000 })).toEqual({
        ends: [
          blocked("budget: the usage is unknown, 1 model response reported no token counts (maxTokens 1000000)"),
          blocked("budget: the usage is unknown, 1 model response reported no token counts (maxTokens 1000000)")
        ],
        outcomes: [entered(1, 1), rejected]
      })
      // A turn budget: unknown within turn 1, and turn 2 starts afresh (its one response is known).
      expect(yield* run({ maxCost: 1, prices: { scripted: { input: 1, output: 1 } }, scope: "turn" })).toEqual({
        ends: [
          blocked("budget: the usage is unknown, 1 model response reported no token counts (maxCost $1.00)"),
          { kind: "completed" }
        ],
        outcomes: [entered(1, 1), entered(2, 1)]
      })
    }).pipe(Effect.provide(Layer.mergeAll(
      SessionStore.layerMemory,
      IdGenerator.layerSeeded(7),
      layerTracked
    ))))

  it.effect("invalid budget options fail the layer with InvalidBudget naming the option", () =>
    Effect.gen(function*() {
      const error = (options: Budget.BudgetOptions) =>
        Effect.flip(Effect.scoped(Layer.build(Budget.layer(options).pipe(Layer.provide(PreStep.layer([]))))))
      expect(yield* error({})).toMatchObject({
        _tag: "InvalidBudget",
        field: "maxTokens",
        message: "budget: give maxTokens, maxCost or both"
      })
      expect(yield* error({ maxTokens: -1 })).toMatchObject({
        field: "maxTokens",
        message: "budget: maxTokens must be a positive number, got -1"
      })
      expect(yield* error({ maxCost: Number.NaN, prices: {} })).toMatchObject({ field: "maxCost" })
      expect(yield* error({ maxCost: 1 })).toMatchObject({ field: "prices" })
      expect(yield* error({ maxCost: 1, prices: { "gpt-4o": { input: -1, output: 1 } } })).toMatchObject({
        field: "prices",
        message: "budget: prices: $[\"gpt-4o\"].input: Expected a non-negative number, actual -1"
      })
      expect(yield* error({ maxTokens: 1, scope: "day" as "turn" })).toMatchObject({ field: "scope" })
      // A price table is checked whenever it is given, and a value of the wrong type is shown as it is.
      expect(yield* error({ maxTokens: 10, prices: "garbage" as unknown as Prices.Prices })).toMatchObject({ field: "prices" })
      expect(yield* error({ maxTokens: "100" as unknown as number })).toMatchObject({
        field: "maxTokens",
        message: "budget: maxTokens must be a positive number, got \"100\""
      })
    }))
})
