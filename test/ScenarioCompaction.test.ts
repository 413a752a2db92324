/**
 * Compaction scenarios (§17, "Tests"): the files of `test/scenarios/compaction/`, each run
 * by the simulator (§15) and checked against its exact log (brief form), the
 * invariants, the fates of its deliveries, the requests against the log's history at each point,
 * and what each compaction did to the model's view. Token figures follow
 * `Compaction.estimateTokens` (⌈characters / 4⌉ + 4 a message): P1 38, R1 39, P2 18, R2 9, P3 13;
 * the summary checkpoint 44 (its prefix is 60 characters).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as Compaction from "../src/Compaction.js"
import * as Delivery from "../src/Delivery.js"
import * as History from "../src/History.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import * as Scenario from "../src/Scenario.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Simulator from "../src/Simulator.js"
import { layerTracked } from "./utils/agent.js"
import { briefLog, checkCompactions, checkFates, checkRequests } from "./utils/scenarioChecks.js"

const DIRECTORY = Path.resolve(import.meta.dirname, "scenarios/compaction")

const P1 =
  "Please read the README of this repository and tell me what the project does, which commands it offers, and how its test suites are run."
const R1 =
  "It is an Effect-TS runtime for LLM agent loops, with a CLI (simulate, chat, resume, transcript) and vitest suites run one file at a time."
const P2 = "Now run the scenario tests and tell me which cases fail."
const SUMMARY = "The user asked what the project is: an Effect-TS agent loop runtime with a CLI and vitest suites."
const LABELS = { [P1]: "P1", [R1]: "R1", [P2]: "P2", [SUMMARY]: "SUMMARY" }

const load = (name: string) => {
  const text = Fs.readFileSync(Path.join(DIRECTORY, name), "utf8")
  return { text, scenario: Either.getOrThrow(Scenario.parse(text)) }
}

/** Runs a file; checks invariants, fates, requests and compactions; returns the result and its brief log. */
const runFile = (name: string) =>
  Effect.suspend(() => {
    const { scenario, text } = load(name)
    return Effect.map(Simulator.run(scenario, { seed: Scenario.seedOf(text) }), (result) => {
      checkFates(result)
      checkRequests(result, scenario.model)
      return { result, log: briefLog(result.events, LABELS), counts: checkCompactions(result.events) }
    })
  })

const outcomes = (result: Simulator.RunResult) => result.deliveries.map((d) => d.outcome ?? d.error ?? "pending")
const entered = (turn: number, step: number) => ({ _tag: "Entered", turn, step })

/** Turns 1 and 2 of the files that share them: P1 → R1, P2 → "All 14 cases pass." */
const TURNS_1_2 = [
  "splice next-turn 0 +[P1]",
  "turn/start 1",
  "splice next-turn 0 -1",
  "step/start 1.1",
  "user P1",
  "request/header",
  "assistant R1",
  "step/end 1.1",
  "turn/end 1 completed",
  "splice next-turn 0 +[P2]",
  "turn/start 2",
  "splice next-turn 0 -1",
  "step/start 2.1",
  "user P2",
  "assistant All 14 cases pass.",
  "step/end 2.1",
  "turn/end 2 completed"
]

/** The summarization request of those files: turns 1's prompt and answer, as plain text. */
const SUMMARIZATION = {
  turn: 3,
  step: 0,
  purpose: "compaction",
  messages: [{ role: "user", content: `<conversation>\n[user]\n${P1}\n\n[assistant]\n${R1}\n</conversation>` }]
}

/** The compacted history's request of turn 3: the summary checkpoint, then turn 2, then P3. */
const COMPACTED_3_1 = [
  { role: "user", content: Compaction.CHECKPOINT_PREFIX + SUMMARY },
  { role: "user", content: P2 },
  { role: "assistant", content: "All 14 cases pass." },
  { role: "user", content: "Finally write the changelog entry." }
]

describe("compaction scenarios (test/scenarios/compaction, §17)", () => {
  it.effect("pressure: turn 3's request would pass 150 − 40, so it compacts after its claim, before step/start", () =>
    Effect.gen(function*() {
      const { counts, log, result } = yield* runFile("pressure.json")
      expect(log).toEqual([
        ...TURNS_1_2,
        "splice next-turn 0 +[Finally write the changelog entry.]",
        "turn/start 3",
        "splice next-turn 0 -1",
        "compaction/start 3 pressure 104",
        "compaction/summary SUMMARY [4,6] 77",
        "checkpoint 4..6 SUMMARY",
        "compaction/end compacted 71",
        "step/start 3.1",
        "user Finally write the changelog entry.",
        "assistant Done.",
        "step/end 3.1",
        "turn/end 3 completed"
      ])
      expect(counts).toMatchObject({ compacted: 1, open: 0 })
      expect(result.requests.slice(2)).toEqual([SUMMARIZATION, { turn: 3, step: 1, messages: COMPACTED_3_1 }])
      expect(outcomes(result)).toEqual([entered(1, 1), entered(2, 1), entered(3, 1)])
      const summary = result.events.find((e) => e.type === "compaction/summary")!.data as Compaction.CompactionSummaryData
      expect(summary).toMatchObject({
        shadowedRange: { start: 4, end: 6 },
        provider: "scenario",
        model: "pressure: the step whose request would pass contextWindow - reserve compacts first, after its claim",
        instructions: Compaction.DEFAULT_INSTRUCTIONS
      })
    }))

  it.effect("usage: the reported inputTokens (90) replace the estimate, so turn 2 compacts though its text is 95 tokens", () =>
    Effect.gen(function*() {
      const { log } = yield* runFile("usage.json")
      // 90 reported + R1 39 = 129; + P2 18 = 147 > 110. From the text alone: 38 + 39 + 18 = 95.
      expect(log.slice(9)).toEqual([
        "splice next-turn 0 +[P2]",
        "turn/start 2",
        "splice next-turn 0 -1",
        "compaction/start 2 pressure 129",
        "compaction/summary SUMMARY [4,6] 77",
        "checkpoint 4..6 SUMMARY",
        "compaction/end compacted 44",
        "step/start 2.1",
        "user P2",
        "assistant All 14 cases pass.",
        "step/end 2.1",
        "turn/end 2 completed"
      ])
    }))

  it.effect("a steer and an inject during the summarization request stay pending and enter at the next boundary, in order", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("steer-inject-during.json")
      expect(log).toEqual([
        ...TURNS_1_2,
        "splice next-turn 0 +[Finally write the changelog entry.]",
        "turn/start 3",
        "splice next-turn 0 -1",
        "compaction/start 3 pressure 104",
        "splice next-step 0 +[branch: main]",
        "splice next-step 1 +[Add today's date to it.] wake",
        "compaction/summary SUMMARY [4,6] 77",
        "checkpoint 4..6 SUMMARY",
        "compaction/end compacted 71",
        "step/start 3.1",
        "user Finally write the changelog entry.",
        "assistant Done.",
        "step/end 3.1",
        "splice next-step 0 -2",
        "step/start 3.2",
        "user branch: main (plugin)",
        "user Add today's date to it.",
        "assistant Added the date.",
        "step/end 3.2",
        "turn/end 3 completed"
      ])
      expect(outcomes(result)).toEqual([entered(1, 1), entered(2, 1), entered(3, 1), entered(3, 2), entered(3, 2)])
      expect(result.requests.at(-1)!.messages.slice(-3)).toEqual([
        { role: "assistant", content: "Done." },
        { role: "user", content: "branch: main" },
        { role: "user", content: "Add today's date to it." }
      ])
    }))

  it.effect("a followup during the summarization request waits for the next turn", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("followup-during.json")
      expect(log.slice(17)).toEqual([
        "splice next-turn 0 +[Finally write the changelog entry.]",
        "turn/start 3",
        "splice next-turn 0 -1",
        "compaction/start 3 pressure 104",
        "splice next-turn 0 +[Then tag the release.]",
        "compaction/summary SUMMARY [4,6] 77",
        "checkpoint 4..6 SUMMARY",
        "compaction/end compacted 71",
        "step/start 3.1",
        "user Finally write the changelog entry.",
        "assistant Done.",
        "step/end 3.1",
        "turn/end 3 completed",
        "turn/start 4",
        "splice next-turn 0 -1",
        "step/start 4.1",
        "user Then tag the release.",
        "assistant Tagged v0.2.0.",
        "step/end 4.1",
        "turn/end 4 completed"
      ])
      expect(outcomes(result)).toEqual([entered(1, 1), entered(2, 1), entered(3, 1), entered(4, 1)])
    }))

  it.effect("a cancel during the summarization request aborts it: nothing kept; the next turn compacts with the next response", () =>
    Effect.gen(function*() {
      const { counts, log, result } = yield* runFile("cancel-during.json")
      expect(log.slice(17)).toEqual([
        "splice next-turn 0 +[Finally write the changelog entry.]",
        "turn/start 3",
        "splice next-turn 0 -1",
        "compaction/start 3 pressure 104",
        "splice next-step 0 +[build: green]",
        "splice next-step 0 -1 canceled cause=user",
        "compaction/end aborted",
        "turn/end 3 aborted:user",
        "splice next-turn 0 +[Write the changelog entry after all.]",
        "turn/start 4",
        "splice next-turn 0 -1",
        "compaction/start 4 pressure 104",
        "compaction/summary SUMMARY [4,6] 77",
        "checkpoint 4..6 SUMMARY",
        "compaction/end compacted 71",
        "step/start 4.1",
        "user Write the changelog entry after all.",
        "assistant Done.",
        "step/end 4.1",
        "turn/end 4 completed"
      ])
      expect(counts).toMatchObject({ compacted: 1, aborted: 1, open: 0 })
      // The aborted bracket changed nothing; its summarization request used its response.
      const aborted = log.indexOf("turn/end 3 aborted:user")
      expect(History.derive(result.events.slice(0, aborted + 1))).toEqual(History.derive(result.events.slice(0, 17)))
      expect(result.requests.map((q) => `${q.turn}.${q.step}${q.purpose ? ` ${q.purpose}` : ""}`)).toEqual([
        "1.1",
        "2.1",
        "3.0 compaction",
        "4.0 compaction",
        "4.1"
      ])
      expect(outcomes(result)).toEqual([
        entered(1, 1),
        entered(2, 1),
        { _tag: "Dropped", reason: "canceled" },
        { _tag: "Dropped", reason: "canceled" },
        entered(4, 1)
      ])
    }))

  it.effect("overflow: CONTEXT_OVERFLOW compacts once inside the step, before its assistant message, and the retry succeeds", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("overflow-retry.json")
      expect(log.slice(17)).toEqual([
        "splice next-turn 0 +[Finally write the changelog entry.]",
        "turn/start 3",
        "splice next-turn 0 -1",
        "step/start 3.1",
        "user Finally write the changelog entry.",
        "compaction/start 3 overflow 117",
        "compaction/summary SUMMARY [4,6] 77",
        "checkpoint 4..6 SUMMARY",
        "compaction/end compacted 84",
        "assistant Done.",
        "step/end 3.1",
        "turn/end 3 completed"
      ])
      const full = History.derive(result.events.slice(0, 22)).map(Simulator.requestMessage)
      expect(result.requests.slice(2)).toEqual([
        { turn: 3, step: 1, messages: full },
        SUMMARIZATION,
        { turn: 3, step: 1, messages: COMPACTED_3_1 }
      ])
      expect(full).toHaveLength(5)
    }))

  it.effect("a second overflow after the compaction ends the turn error CONTEXT_OVERFLOW; the next followup runs", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("overflow-twice.json")
      expect(log.slice(17)).toEqual([
        "splice next-turn 0 +[Finally write the changelog entry.]",
        "turn/start 3",
        "splice next-turn 0 -1",
        "step/start 3.1",
        "user Finally write the changelog entry.",
        "compaction/start 3 overflow 117",
        "compaction/summary SUMMARY [4,6] 77",
        "checkpoint 4..6 SUMMARY",
        "compaction/end compacted 84",
        "step/end 3.1",
        "turn/end 3 error:CONTEXT_OVERFLOW",
        "splice next-turn 0 +[Write just one line then.]",
        "turn/start 4",
        "splice next-turn 0 -1",
        "step/start 4.1",
        "user Write just one line then.",
        "assistant Done.",
        "step/end 4.1",
        "turn/end 4 completed"
      ])
      const end = result.events.find((e) => e.type === "turn/end" && (e.data as any).turn === 3)!
      expect((end.data as any).reason).toEqual({
        kind: "error",
        error: {
          code: "CONTEXT_OVERFLOW",
          status: 400,
          message: "prompt is too long: 212000 tokens > 200000 maximum; the request overflowed again after a compaction"
        }
      })
      expect(result.requests.map((q) => `${q.turn}.${q.step}${q.purpose ? ` ${q.purpose}` : ""}`)).toEqual([
        "1.1",
        "2.1",
        "3.1",
        "3.0 compaction",
        "3.1",
        "4.1"
      ])
    }))

  it.effect("a compact action on an idle agent: its own bracket (turn null), no turn opened; a followup during it waits", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("manual-idle.json")
      expect(log.slice(17)).toEqual([
        "compaction/start null manual 104",
        "splice next-turn 0 +[Finally write the changelog entry.]",
        "compaction/summary SUMMARY [4,6] 77",
        "checkpoint 4..6 SUMMARY",
        "compaction/end compacted 71",
        "turn/start 3",
        "splice next-turn 0 -1",
        "step/start 3.1",
        "user Finally write the changelog entry.",
        "assistant Done.",
        "step/end 3.1",
        "turn/end 3 completed"
      ])
      expect(result.compactions).toEqual([{
        action: 2,
        at: 200,
        report: {
          compactionId: (result.events[17]!.data as Compaction.CompactionStartData).compactionId,
          outcome: "compacted",
          tokensBefore: 104,
          tokensAfter: 71
        }
      }])
      expect(result.requests[2]).toEqual({
        ...SUMMARIZATION,
        turn: 0,
        messages: [{
          ...SUMMARIZATION.messages[0]!,
          content: `${SUMMARIZATION.messages[0]!.content}\n\nAlso: Keep the command names.`
        }]
      })
      expect(outcomes(result)).toEqual([entered(1, 1), entered(2, 1), entered(3, 1)])
    }))

  it.effect("a compact action on a running agent is served at its next pre-step boundary (between steps), reason manual", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("compact-running.json")
      expect(log.slice(9)).toEqual([
        "splice next-turn 0 +[P2]",
        "turn/start 2",
        "splice next-turn 0 -1",
        "step/start 2.1",
        "user P2",
        "assistant test({\"ms\":100})",
        "tool/call t1 test",
        "tool/result t1",
        "step/end 2.1",
        // 59 tokens of tool definitions + 38 + 39 + 18 + 8 + 9.
        "compaction/start 2 manual 171",
        "compaction/summary SUMMARY [4,6] 77",
        "checkpoint 4..6 SUMMARY",
        "compaction/end compacted 138",
        "step/start 2.2",
        "assistant All 14 cases pass.",
        "step/end 2.2",
        "turn/end 2 completed"
      ])
      expect(result.compactions.map((c) => c.report?.outcome)).toEqual(["compacted"])
    }))

  it.effect("the prune policy replaces an old tool result's body between steps, with no model request", () =>
    Effect.gen(function*() {
      const { counts, log, result } = yield* runFile("prune.json")
      expect(log).toEqual([
        "splice next-turn 0 +[Please read the README of this repository.]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "step/start 1.1",
        "user Please read the README of this repository.",
        "request/header",
        "assistant read({\"path\":\"README.md\"})",
        "tool/call r1 read",
        "tool/result r1",
        "step/end 1.1",
        "compaction/start 1 pressure 127",
        "checkpoint 8..8 result:[tool result removed by compaction: about 43 tokens]",
        "compaction/end compacted 103",
        "step/start 1.2",
        "assistant It is an agent loop runtime.",
        "step/end 1.2",
        "turn/end 1 completed",
        "splice next-turn 0 +[Finally write the changelog entry.]",
        "turn/start 2",
        "splice next-turn 0 -1",
        "step/start 2.1",
        "user Finally write the changelog entry.",
        "assistant Done.",
        "step/end 2.1",
        "turn/end 2 completed"
      ])
      expect(counts).toMatchObject({ compacted: 1 })
      expect(result.requests.every((q) => q.purpose === undefined)).toBe(true)
      expect(result.requests[1]!.messages[2]).toEqual({
        role: "tool",
        content: "[tool result removed by compaction: about 43 tokens]",
        toolCallId: "r1"
      })
    }))

  it.effect("every compaction file gives a byte-identical log and requests on a second run", () =>
    Effect.gen(function*() {
      for (const name of Fs.readdirSync(DIRECTORY).filter((f) => f.endsWith(".json"))) {
        const { scenario, text } = load(name)
        const a = yield* Simulator.run(scenario, { seed: Scenario.seedOf(text) })
        const b = yield* Simulator.run(scenario, { seed: Scenario.seedOf(text) })
        expect(b.log).toBe(a.log)
        expect(b.requestLines).toBe(a.requestLines)
        expect(a.events.some((e) => e.type === "compaction/start")).toBe(true)
      }
    }))
})

/**
 * Copies `cut` (a log a crash ended there) into a new session, resumes it (repair, §10) under the
 * scenario's compaction policy, and returns the repaired log and the resumed agent's history.
 */
const resumeCut = (cut: ReadonlyArray<SessionEvent>, policy: Scenario.Scenario["compaction"]) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* SessionStore.SessionStore
    const copy = yield* store.create({ id: "crashed" })
    yield* copy.append(cut.map((e) => ({ type: e.type, data: e.data })))
    const agent = yield* Agent.resume("crashed")
    return { events: agent.log.events().slice(), history: yield* agent.history }
  })).pipe(
    Effect.provide(Layer.mergeAll(
      SessionStore.layerMemory,
      IdGenerator.layerSeeded(5),
      Model.layer(ScriptedModel.make([])),
      Compaction.layer(policy),
      layerTracked
    ))
  )

describe("a crash mid-compaction (§17, §10)", () => {
  // PENDING on main: repair's closer for an open bracket (`compaction/end {outcome:"interrupted"}`,
  // first) and the invariants of a bracket come with the `invariant` branch; until it is merged
  // the closer assertions below fail.
  it.effect("in a turn: repair closes the bracket interrupted, then the turn; the history is the one before it", () =>
    Effect.gen(function*() {
      const { result } = yield* runFile("crash-mid-compaction.json")
      const events = result.events
      const at = events.findIndex((e) => e.type === "compaction/start")
      const { compactionId } = events[at]!.data as Compaction.CompactionStartData
      // The crash: the log ends after compaction/start and the steer that arrived during the
      // summarization request (the summary's append never happened).
      const cut = events.slice(0, at + 2)
      expect(briefLog(cut.slice(17), LABELS)).toEqual([
        "splice next-turn 0 +[Finally write the changelog entry.]",
        "turn/start 3",
        "splice next-turn 0 -1",
        "compaction/start 3 pressure 104",
        "splice next-step 0 +[Add today's date to it.] wake"
      ])
      const before = History.derive(events.slice(0, at))
      const repaired = yield* resumeCut(cut, load("crash-mid-compaction.json").scenario.compaction)
      expect(repaired.history).toEqual(before)
      expect(History.derive(repaired.events)).toEqual(before)
      expect(briefLog(repaired.events.slice(cut.length))).toEqual([
        "compaction/end interrupted",
        "turn/end 3 interrupted",
        "session/end-seed"
      ])
      expect(repaired.events[cut.length]!.data).toEqual({ compactionId, turn: 3, outcome: "interrupted" })
      expect(Invariant.check(repaired.events)).toEqual([])
      // The steer that arrived during it is still pending; the claimed prompt was never entered.
      expect(Delivery.fateOf(repaired.events, result.deliveries[3]!.messageId!)).toEqual({ _tag: "Pending" })
      expect(Delivery.fateOf(repaired.events, result.deliveries[2]!.messageId!)).toEqual({
        _tag: "Dropped",
        reason: "interrupted"
      })
    }))

  it.effect("between turns (a manual bracket, turn null): repair closes it interrupted; the history is the one before it", () =>
    Effect.gen(function*() {
      const { result } = yield* runFile("manual-idle.json")
      const events = result.events
      const at = events.findIndex((e) => e.type === "compaction/start")
      const { compactionId } = events[at]!.data as Compaction.CompactionStartData
      const cut = events.slice(0, at + 1)
      expect(briefLog(cut.slice(-2))).toEqual(["turn/end 2 completed", "compaction/start null manual 104"])
      const before = History.derive(cut)
      const repaired = yield* resumeCut(cut, load("manual-idle.json").scenario.compaction)
      expect(repaired.history).toEqual(before)
      expect(History.derive(repaired.events)).toEqual(before)
      expect(briefLog(repaired.events.slice(cut.length))).toEqual(["compaction/end interrupted", "session/end-seed"])
      expect(repaired.events[cut.length]!.data).toEqual({ compactionId, turn: null, outcome: "interrupted" })
      expect(Invariant.check(repaired.events)).toEqual([])
    }))
})

/** Runs an inline scenario (seed 1) with the checks of `runFile`. */
const runInline = (input: unknown) =>
  Effect.suspend(() => {
    const scenario = Either.getOrThrow(Scenario.decode(input))
    return Effect.map(Simulator.run(scenario, { seed: 1 }), (result) => {
      checkFates(result)
      checkRequests(result, scenario.model)
      return { result, log: briefLog(result.events), counts: checkCompactions(result.events) }
    })
  })

const TWO_TURNS = [
  "splice next-turn 0 +[first prompt]",
  "turn/start 1",
  "splice next-turn 0 -1",
  "step/start 1.1",
  "user first prompt",
  "request/header",
  "assistant ok one",
  "step/end 1.1",
  "turn/end 1 completed",
  "splice next-turn 0 +[second prompt]",
  "turn/start 2",
  "splice next-turn 0 -1",
  "step/start 2.1",
  "user second prompt",
  "assistant ok two",
  "step/end 2.1",
  "turn/end 2 completed"
]

describe("a cancel during a manual compaction the driver serves after a turn or another compaction", () => {
  // Found by these tests: the turn state that serves a pending `compact` between turns was not
  // the run's current one, so a cancel closed the turn before instead (a turn nobody opened, the
  // bracket left open). Fixed in driver.ts (`betweenTurns`).
  it.effect("compact requested during the last step: served between turns; a cancel during it ends it aborted, no turn", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runInline({
        compaction: { keepRecentTokens: 5 },
        model: [{ text: "ok one" }, { latencyMs: 100, text: "ok two" }, { latencyMs: 100, text: "SUMMARY" }],
        actions: [
          { at: 0, followup: "first prompt" },
          { at: 10, followup: "second prompt" },
          { at: 50, compact: {} },
          { at: 150, cancel: {} }
        ]
      })
      // Today: [..., "compaction/start null manual 27", "turn/start 3", "turn/end 3 aborted:user"].
      expect(log).toEqual([...TWO_TURNS, "compaction/start null manual 27", "compaction/end aborted"])
      expect(result.compactions.map((c) => c.report?.outcome)).toEqual(["aborted"])
    }))

  it.effect("two compacts on an idle agent: the second runs after the first; with only the first's summary to summarize it is skipped", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runInline({
        compaction: { keepRecentTokens: 5 },
        model: [{ text: "ok one" }, { text: "ok two" }, { latencyMs: 10, text: "SUMMARY1" }, {
          latencyMs: 100,
          text: "SUMMARY2"
        }],
        actions: [
          { at: 0, followup: "first prompt" },
          { at: 10, followup: "second prompt" },
          { at: 100, compact: {} },
          { at: 100, compact: {} },
          { at: 150, cancel: {} }
        ]
      })
      expect(log).toEqual([
        ...TWO_TURNS,
        "compaction/start null manual 27",
        "compaction/summary SUMMARY1 [4,6,13,14] 27",
        "checkpoint 4..14 SUMMARY1",
        "compaction/end compacted 21",
        "compaction/start null manual 21",
        "compaction/end skipped"
      ])
      expect(result.compactions.map((c) => c.report?.outcome)).toEqual(["compacted", "skipped"])
    }))
})
