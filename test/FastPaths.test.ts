/**
 * Differential property tests of the fast paths (§24): each runs a random scenario of the
 * property test (`test/utils/scenarioArbitraries.ts`, with and without compaction) twice under
 * the simulator (§15), once on the fast path and once on the general form it must be
 * observably identical to, and compares what came out: the log's bytes (times are virtual),
 * every delivery's live outcome, the model requests, the `compact` reports, and the appends the
 * agent made up to its disposal after the run (each call of `append`/`appendSync` as the types
 * of its events, a result with its call id and error code; recorded by a wrapper of the store).
 * A call with no events is not recorded: every store answers it at once and writes nothing, and
 * the lock path makes one for a section that appends nothing (a `compact` request, the disposal
 * of an idle agent) where the synchronous path skips the call.
 *
 * 1. **The default pre-step ≡ a pass-through listener** (rule 3 of §24). With no listener
 *    (`PreStep.layer([])`, the default service: `fastPreStep`) a claim and the step it enters
 *    are one append; with one listener that enters every batch unchanged (`rejectIfTextIncludes`
 *    of a NUL character, which no text of the generator holds: it calls `next()` with the
 *    payload it got) the waterfall runs between the claim and the step, which is its own append
 *    (`enterStep`). What legitimately differs, and is normalised: the grouping of the appends
 *    alone. Each append of the default run that holds a `step/start` after other events (the
 *    claim's `turn/start` or `step/end` and splices) is split before it; the groups must then be
 *    the same. The log itself is compared unnormalised: grouping is not in it (no event says
 *    which append wrote it, and both appends happen at the same virtual instant). Not compared
 *    because the simulator does not see them: the listener's `pre_step` span (only with a tracer,
 *    §19) and the usage sums kept for listeners (§18), which change nothing in the log.
 * 2. **A synchronous store ≡ a locked store** (rule 2 of §24). The memory store's `appendSync`
 *    makes each critical section one `Ref.modify`; `layerMemoryLocked` (test/utils/agent.ts)
 *    has no `appendSync` and returns each append at the next group-commit flush, so every
 *    section takes the lock path (`SynchronizedRef`). Nothing else is normalised: the same
 *    bytes, outcomes, requests and appends.
 * 3. **One call ≡ a batch of one** (rule 4 of §24). A step with a single tool call runs it on
 *    the driver fiber; with `fastPaths.singleCall` off (`internal/agent/toolBatch.ts`) the same
 *    call runs through the batch path (`runBatch`: a fiber of its own, the driver waiting for
 *    its completion, the interruption of its fiber on a cancel). The scenarios keep the first
 *    call of each response only, so that every tool step is a single call. What legitimately
 *    differs, and is normalised: the batch path commits the result of an exclusive call as soon
 *    as it is done (the barrier before any later call, §8), the fast path with the step's end
 *    (rule 3 of §24); such a lone result is joined to the append after it.
 *
 * Each property also counts what its runs went through (steps entered with their claim, locked
 * appends, single calls that ran and calls a cancel cut short), and the last test of its block
 * checks that the runs did exercise the fast path. The last block pins, on small scenarios, the
 * two differences the properties found (both fixed).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, FastCheck as fc, Layer } from "effect"
import { fastPaths } from "../src/internal/agent/toolBatch.js"
import * as Scenario from "../src/Scenario.js"
import type { EventDraft, SessionEvent, ToolResultData } from "../src/SessionEvent.js"
import type * as SessionLog from "../src/SessionLog.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Simulator from "../src/Simulator.js"
import { layerMemoryLocked } from "./utils/agent.js"
import { PROPERTY_TEST_MS } from "./utils/bounds.js"
import { compactionArb, scenarioArb } from "./utils/scenarioArbitraries.js"
import { briefLog } from "./utils/scenarioChecks.js"

const PRE_STEP_RUNS = 250
const LOCKED_RUNS = 300
const SINGLE_CALL_RUNS = 300

/** A pre-step listener that enters every batch unchanged: no generated text holds a NUL. */
const PASS_THROUGH = { rejectIfTextIncludes: "\u0000" }

/** The scenarios of the property test, with and without compaction. */
const scenarios = fc.oneof(scenarioArb, compactionArb)

/** A run of the simulator and the appends its agent made, each as its events (`entry`). */
interface Recorded {
  readonly result: Simulator.RunResult
  readonly appends: ReadonlyArray<ReadonlyArray<string>>
}

/** An event of an append: its type; for a result, the id of its call and its error code (`tool/result CALL CODE`). */
const entry = (draft: EventDraft): string => {
  if (draft.type !== "tool/result") return draft.type
  const data = draft.data as ToolResultData
  const call = data.message.content.find((b) => b.type === "tool-result")?.toolCallId
  return `tool/result ${call}${data.error !== undefined ? ` ${data.error.code}` : ""}`
}

/** `store` with each append of its logs (`append` and `appendSync`) recorded as it is made. */
const recording = (store: Layer.Layer<SessionStore.SessionStore>) => {
  const appends: Array<ReadonlyArray<string>> = []
  const note = (drafts: ReadonlyArray<EventDraft>) => {
    if (drafts.length > 0) appends.push(drafts.map(entry))
  }
  const wrap = (log: SessionLog.SessionLog): SessionLog.SessionLog => {
    const appendSync = log.appendSync
    return {
      ...log,
      append: (drafts) =>
        Effect.suspend(() => {
          note(drafts)
          return log.append(drafts)
        }),
      appendSync: appendSync === undefined ? undefined : (drafts, time) => {
        note(drafts)
        return appendSync(drafts, time)
      }
    }
  }
  const layer = Layer.effect(
    SessionStore.SessionStore,
    Effect.map(SessionStore.SessionStore, (s) => ({
      ...s,
      create: (options) => Effect.map(s.create(options), wrap),
      open: (id) => Effect.map(s.open(id), wrap)
    }))
  ).pipe(Layer.provide(store))
  return { appends, layer }
}

/** Runs `scenario` on `store` (default: the memory store), recording the agent's appends. */
const run = (scenario: unknown, store: Layer.Layer<SessionStore.SessionStore> = SessionStore.layerMemory) =>
  Effect.suspend(() => {
    const recorder = recording(store)
    return Effect.map(
      Simulator.run(Either.getOrThrow(Scenario.decode(scenario)), { seed: 7, store: recorder.layer }),
      (result): Recorded => ({ result, appends: recorder.appends })
    )
  })

/** The two runs are observably the same: log bytes, live outcomes, requests, `compact` reports. */
const expectSame = (general: Simulator.RunResult, fast: Simulator.RunResult): void => {
  expect(fast.log).toBe(general.log)
  expect(fast.deliveries).toEqual(general.deliveries)
  expect(fast.requestLines).toBe(general.requestLines)
  expect(fast.compactions).toEqual(general.compactions)
}

/** The appends of a default pre-step run split before each `step/start` that does not begin one. */
const splitBeforeStepStart = (appends: ReadonlyArray<ReadonlyArray<string>>): Array<ReadonlyArray<string>> =>
  appends.flatMap((types) => {
    const at = types.indexOf("step/start")
    return at > 0 ? [types.slice(0, at), types.slice(at)] : [types]
  })

/**
 * The appends of a batch-of-one run with each lone result of an exclusive call that ran to its end
 * joined to the append after it: the batch path commits such a result once it is done (the
 * barrier before later calls), the fast path with the step's end. (A call cut short gets its
 * `ABORTED` result in an append of its own on both paths.)
 */
const joinExclusiveResults = (
  appends: ReadonlyArray<ReadonlyArray<string>>,
  exclusive: ReadonlySet<string>
): Array<ReadonlyArray<string>> => {
  const out: Array<ReadonlyArray<string>> = []
  for (let i = 0; i < appends.length; i++) {
    const types = appends[i]!
    const [type, call, code] = types.length === 1 ? types[0]!.split(" ") : []
    const lone = type === "tool/result" && exclusive.has(call!) && code !== "ABORTED"
    if (lone && i + 1 < appends.length) out.push([...types, ...appends[++i]!])
    else out.push(types)
  }
  return out
}

const count = (events: ReadonlyArray<SessionEvent>, pred: (e: SessionEvent) => boolean): number =>
  events.reduce((n, e) => (pred(e) ? n + 1 : n), 0)

describe("the default pre-step is a pass-through listener (§24 rule 3)", () => {
  const seen = { runs: 0, enteredWithClaim: 0, steps: 0 }
  it.live.prop(
    `${PRE_STEP_RUNS} runs: the same log, outcomes and requests; the appends differ only by the step entered with its claim`,
    [scenarios.map((s) => ({ ...s, preStep: [] }))],
    ([scenario]) =>
      Effect.gen(function*() {
        const fast = yield* run(scenario)
        const general = yield* run({ ...scenario, preStep: [PASS_THROUGH] })
        expectSame(general.result, fast.result)
        expect(splitBeforeStepStart(fast.appends)).toEqual(general.appends)
        seen.runs++
        seen.enteredWithClaim += fast.appends.filter((types) => types.indexOf("step/start") > 0).length
        seen.steps += count(fast.result.events, (e) => e.type === "step/start")
      }),
    { timeout: PROPERTY_TEST_MS, fastCheck: { numRuns: PRE_STEP_RUNS } }
  )
  it("the runs entered steps with their claim (the fast path), and the rest through the waterfall", () => {
    expect(seen.runs).toBe(PRE_STEP_RUNS)
    expect(seen.enteredWithClaim).toBeGreaterThan(0)
    // Some steps were not entered with their claim: after a compaction, or with an empty claim.
    expect(seen.steps).toBeGreaterThan(seen.enteredWithClaim)
  })
})

describe("a synchronous store is a locked store (§24 rule 2)", () => {
  const seen = { runs: 0, appends: 0 }
  it.live.prop(
    `${LOCKED_RUNS} runs: the same log bytes, outcomes, requests and appends`,
    [scenarios],
    ([scenario]) =>
      Effect.gen(function*() {
        const sync = yield* run(scenario)
        const locked = yield* run(scenario, layerMemoryLocked)
        expectSame(locked.result, sync.result)
        expect(sync.appends).toEqual(locked.appends)
        seen.runs++
        seen.appends += locked.appends.length
      }),
    { timeout: PROPERTY_TEST_MS, fastCheck: { numRuns: LOCKED_RUNS } }
  )
  it("the runs appended through the lock path", () => {
    expect(seen.runs).toBe(LOCKED_RUNS)
    expect(seen.appends).toBeGreaterThan(LOCKED_RUNS)
  })
})

describe("one call is a batch of one (§24 rule 4)", () => {
  /** The scenario with the first call of each response only: every tool step is a single call. */
  const singleCalls = scenarios.map((s) => ({
    ...s,
    model: s.model.map((m) => ("toolCalls" in m ? { ...m, toolCalls: m.toolCalls.slice(0, 1) } : m))
  }))
  /** The scenario with a single call through the batch path (`runBatch`), its flag restored after. */
  const batchOfOne = (scenario: unknown) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        fastPaths.singleCall = false
      }),
      () => run(scenario),
      () =>
        Effect.sync(() => {
          fastPaths.singleCall = true
        })
    )
  const seen = { runs: 0, calls: 0, ran: 0, aborted: 0 }
  it.live.prop(
    `${SINGLE_CALL_RUNS} runs: the same log, outcomes, requests and appends`,
    [singleCalls],
    ([scenario]) =>
      Effect.gen(function*() {
        const fast = yield* run(scenario)
        const batch = yield* batchOfOne(scenario)
        expectSame(batch.result, fast.result)
        const exclusive = new Set(
          scenario.model.flatMap((m) => ("toolCalls" in m ? m.toolCalls : []))
            .filter((c) => (scenario.tools as Record<string, { readonly exclusive?: boolean }>)[c.name]?.exclusive === true)
            .map((c) => c.id)
        )
        expect(fast.appends).toEqual(joinExclusiveResults(batch.appends, exclusive))
        const events = fast.result.events
        seen.runs++
        seen.calls += count(events, (e) => e.type === "tool/call")
        seen.ran += count(events, (e) => e.type === "tool/result" && (e.data as any).error === undefined)
        seen.aborted += count(events, (e) => e.type === "tool/result" && (e.data as any).error?.code === "ABORTED")
      }),
    { timeout: PROPERTY_TEST_MS, fastCheck: { numRuns: SINGLE_CALL_RUNS } }
  )
  it("the runs made single calls that completed and calls that a cancel cut short", () => {
    expect(seen.runs).toBe(SINGLE_CALL_RUNS)
    expect(seen.ran).toBeGreaterThan(0)
    expect(seen.aborted).toBeGreaterThan(0)
    expect(seen.calls).toBeGreaterThan(seen.ran)
  })
})

/** What the properties found (§17, §24), each pinned on a small scenario that shows it. */
describe("what the properties found", () => {
  const quick = { quick: { result: "quick ok" } }

  it.live("a turn opened with the last response of the turn before counts it in the step's pressure check", () =>
    Effect.gen(function*() {
      // 292 tokens of tool definitions: with the first turn's answer, turn 2's request is
      // above 312 − 10, so it compacts before its step enters, with a listener or without.
      const scenario = {
        compaction: { contextWindow: 312, reserve: 10, keepRecentTokens: 5 },
        model: [{ latencyMs: 1, text: "alpha" }, { text: "the user said alpha" }, { text: "done" }],
        tools: {
          quick: { result: "quick ok" },
          slow: { result: "slow ok" },
          ctx: { result: "ctx ok", additionalContexts: ["context one", "context two"] },
          excl: { result: "exclusive ok", exclusive: true },
          broken: { error: "it broke" }
        },
        actions: [{ at: 0, inject: "alpha" }, { at: 1, followup: "alpha" }, { at: 1, followup: "alpha" }]
      }
      const fast = yield* run(scenario)
      const general = yield* run({ ...scenario, preStep: [PASS_THROUGH] })
      expectSame(general.result, fast.result)
      expect(briefLog(fast.result.events).slice(14)).toEqual([
        "turn/end 1 completed",
        "turn/start 2",
        "splice next-turn 0 -1",
        "compaction/start 2 pressure 310",
        "compaction/summary the user said alpha [8,9,12] 18",
        "checkpoint 8..12 the user said alpha",
        "compaction/end compacted 316",
        "step/start 2.1",
        "user alpha",
        "assistant done",
        "step/end 2.1",
        "turn/end 2 completed"
      ])
    }))

  it.live("a compact request the run never served reports the estimate of the history as it is", () =>
    Effect.gen(function*() {
      // Requested during step 2's request, cut by the cancel: the history then holds the prompt,
      // the call and its result (79 tokens with the tool's definition), however far the
      // estimate had been counted on the path that ran.
      const scenario = {
        compaction: { contextWindow: 10_000 },
        model: [
          { latencyMs: 10, toolCalls: [{ id: "c1", name: "quick", arguments: {} }] },
          { latencyMs: 10, text: "done" }
        ],
        tools: quick,
        actions: [{ at: 0, followup: "alpha" }, { at: 15, compact: {} }, { at: 15, cancel: {} }]
      }
      const fast = yield* run(scenario)
      const general = yield* run({ ...scenario, preStep: [PASS_THROUGH] })
      expectSame(general.result, fast.result)
      expect(fast.result.compactions).toEqual([{
        action: 1,
        at: 15,
        report: { compactionId: "", outcome: "aborted", tokensBefore: 79, tokensAfter: 79 }
      }])
    }))
})
