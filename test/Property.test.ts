/**
 * The property test (§15): random sequences of followup/steer/inject/cancel (and a rare
 * dispose) at random virtual times against random scripted models (text, tool calls, errors,
 * truncation) and random pre-step listeners. For every run: the invariants hold; every delivery
 * has exactly one fate and it matches its live `Delivery.outcome`; no waking delivery is lost;
 * no two followups share a turn; each model request equals the history derived from the log at
 * that point; and a second run gives the same bytes.
 *
 * Its compaction variant (§17): the same with a small context window (or none: overflow
 * only), a summarizing or pruning policy, `compact` actions, reported usage, and scripts whose
 * responses serve as summaries (or fail them) and include `CONTEXT_OVERFLOW` errors; besides
 * the above, no message visible before a compaction leaves the model's view unless its summary
 * or a prune checkpoint covers it (`checkCompactions`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Delivery from "../src/Delivery.js"
import * as Invariant from "../src/Invariant.js"
import * as Scenario from "../src/Scenario.js"
import * as Simulator from "../src/Simulator.js"
import { PROPERTY_TEST_MS } from "./utils/bounds.js"
import { compactionArb, scenarioArb } from "./utils/scenarioArbitraries.js"
import { checkCompactions, checkRequests, type CompactionCounts } from "./utils/scenarioChecks.js"

const RUNS = 1000
const COMPACTION_RUNS = 400

/** What the compaction runs went through, in all. */
type Tally = CompactionCounts & {
  retries: number
  pressure: number
  overflows: number
  manual: number
}

const check = (scenario: unknown, counts?: Tally) =>
  Effect.gen(function*() {
    const decoded = Either.getOrThrow(Scenario.decode(scenario))
    const r = yield* Simulator.run(decoded, { seed: 7 })
    const events = r.events
    // 1. Invariants (§12).
    expect(Invariant.check(events)).toEqual([])
    // 2. Exactly one fate per delivery, equal to its live outcome.
    const fates = Delivery.fatesOf(events)
    const order = decoded.actions.map((a, i) => [a, i] as const).sort(([a, i], [b, j]) => a.at - b.at || i - j)
    const position = new Map(order.map(([, i], p) => [i, p]))
    for (const d of r.deliveries) {
      if (d.messageId === undefined) {
        expect(d.error).toBe("AgentDisposed")
        continue
      }
      const fate = fates.get(d.messageId)
      expect(fate).toBeDefined()
      expect(Delivery.fateOf(events, d.messageId)).toEqual(fate)
      if (d.outcome !== undefined) expect(d.outcome).toEqual(fate)
      else {
        expect(fate).toEqual({ _tag: "Pending" })
        // 3. No lost wake-up: a waking delivery still pending was kept by a later keepInbox cancel.
        if (d.kind !== "inject") {
          const keptBy = order.slice(position.get(d.action)! + 1).some(([a]) => "cancel" in a && a.cancel.keepInbox === true)
          expect(keptBy).toBe(true)
        }
      }
    }
    // 4. No two followups share a turn.
    const followups = new Set(r.deliveries.filter((d) => d.kind === "followup").map((d) => d.messageId))
    const perTurn = new Map<number, number>()
    for (const [id, fate] of fates) {
      if (fate._tag === "Entered" && followups.has(id)) perTurn.set(fate.turn, (perTurn.get(fate.turn) ?? 0) + 1)
    }
    for (const count of perTurn.values()) expect(count).toBe(1)
    // 5. Each request equals the history derived from the log at that point (a retry after an
    // overflow compaction: the compacted one).
    const requests = checkRequests(r, decoded.model)
    // 6. Compactions (§17): nothing leaves the model's view without a summary or a prune
    // checkpoint covering it; a bracket that does not compact changes nothing.
    const seen = checkCompactions(events)
    if (counts !== undefined) {
      for (const k of Object.keys(seen) as Array<keyof CompactionCounts>) counts[k] += seen[k]
      counts.retries += requests.retries
      counts.overflows += events.filter((e) => e.type === "compaction/start" && (e.data as any).reason === "overflow").length
      counts.manual += events.filter((e) => e.type === "compaction/start" && (e.data as any).reason === "manual").length
      counts.pressure += events.filter((e) => e.type === "compaction/start" && (e.data as any).reason === "pressure").length
    }
    expect(seen.open).toBe(0)
    // A compact action's report is the outcome its bracket logged ("" when none was opened:
    // the run stopped first, aborted).
    for (const c of r.compactions) {
      if (c.report === undefined) continue
      const end = events.find((e) => e.type === "compaction/end" && (e.data as any).compactionId === c.report!.compactionId)
      if (c.report.compactionId === "") expect(c.report.outcome).toBe("aborted")
      else expect((end?.data as any)?.outcome).toBe(c.report.outcome)
    }
    // 7. Determinism.
    const again = yield* Simulator.run(decoded, { seed: 7 })
    expect(again.log).toBe(r.log)
    expect(again.requestLines).toBe(r.requestLines)
  })

describe("property: random deliveries against random scripted models", () => {
  // Each run a fresh fast-check seed, as before; a failure prints the seed and path to replay
  // it (`fastCheck: { seed, path }`). `it.live`: the simulator has its own virtual clock.
  it.live.prop(
    `${RUNS} runs: invariants, fates, no lost wake-up, one followup per turn, requests = history, determinism`,
    [scenarioArb],
    ([scenario]) => check(scenario),
    { timeout: PROPERTY_TEST_MS, fastCheck: { numRuns: RUNS } }
  )
})

describe("property: the same with compaction on a small window (§17)", () => {
  const counts: Tally = {
    compacted: 0,
    skipped: 0,
    aborted: 0,
    failed: 0,
    interrupted: 0,
    open: 0,
    retries: 0,
    overflows: 0,
    pressure: 0,
    manual: 0
  }
  it.live.prop(
    `${COMPACTION_RUNS} runs: the above, and nothing leaves the model's view without a summary or prune covering it`,
    [compactionArb],
    ([scenario]) => check(scenario, counts),
    { timeout: PROPERTY_TEST_MS, fastCheck: { numRuns: COMPACTION_RUNS } }
  )
  // Run after the property (tests of a file run in order): the runs went through every path
  // (each count is ~10–100 per 400 runs; aborted ones are rarer and not required).
  it("the runs compacted on pressure, on overflow (and retried) and on demand; none was left open", () => {
    expect(counts.compacted).toBeGreaterThan(0)
    expect(counts.skipped).toBeGreaterThan(0)
    expect(counts.failed).toBeGreaterThan(0)
    expect(counts.pressure).toBeGreaterThan(0)
    expect(counts.overflows).toBeGreaterThan(0)
    expect(counts.retries).toBeGreaterThan(0)
    expect(counts.manual).toBeGreaterThan(0)
    expect(counts.open).toBe(0)
  })
})
