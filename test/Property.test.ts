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
import { Effect, Either, FastCheck as fc } from "effect"
import * as Delivery from "../src/Delivery.js"
import * as Invariant from "../src/Invariant.js"
import * as Scenario from "../src/Scenario.js"
import * as Simulator from "../src/Simulator.js"
import { PROPERTY_TEST_MS } from "./utils/bounds.js"
import { checkCompactions, checkRequests, type CompactionCounts } from "./utils/scenarioChecks.js"

const RUNS = 1000
const COMPACTION_RUNS = 400

const word = fc.constantFrom("alpha", "beta", "gamma", "delta", "rm", "ok")
const text = fc.array(word, { minLength: 1, maxLength: 3 }).map((ws) => ws.join(" "))
const latency = fc.integer({ min: 0, max: 60 })

const toolCall = fc.record({
  name: fc.constantFrom("quick", "slow", "ctx", "excl", "broken", "nope"),
  ms: fc.integer({ min: 0, max: 80 })
})

const response = fc.oneof(
  { weight: 4, arbitrary: fc.record({ latencyMs: latency, text }) },
  {
    weight: 3,
    arbitrary: fc.record({ latencyMs: latency, calls: fc.array(toolCall, { minLength: 1, maxLength: 3 }) })
  },
  { weight: 1, arbitrary: fc.record({ latencyMs: latency, error: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ latencyMs: latency, text, truncated: fc.constant(true) }) }
)

const action = fc.oneof(
  { weight: 4, arbitrary: fc.record({ at: fc.integer({ min: 0, max: 400 }), followup: text }) },
  { weight: 3, arbitrary: fc.record({ at: fc.integer({ min: 0, max: 400 }), steer: text }) },
  { weight: 3, arbitrary: fc.record({ at: fc.integer({ min: 0, max: 400 }), inject: text }) },
  {
    weight: 2,
    arbitrary: fc.record({ at: fc.integer({ min: 0, max: 400 }), cancel: fc.record({ keepInbox: fc.boolean() }) })
  },
  { weight: 1, arbitrary: fc.record({ at: fc.integer({ min: 300, max: 400 }), dispose: fc.constant({}) }) }
)

const preStep = fc.constantFrom<ReadonlyArray<unknown>>(
  [],
  [],
  [{ rejectIfTextIncludes: "rm" }],
  [{ failIfTextIncludes: "delta" }],
  [{ appendText: "note" }, { rejectIfTextIncludes: "rm" }]
)

const tools = {
  quick: { result: "quick ok" },
  slow: { result: "slow ok" },
  ctx: { result: "ctx ok", additionalContexts: ["context one", "context two"] },
  excl: { result: "exclusive ok", exclusive: true },
  broken: { error: "it broke" }
}

const scenarioArb = fc.record({
  responses: fc.array(response, { minLength: 1, maxLength: 8 }),
  actions: fc.array(action, { minLength: 1, maxLength: 8 }),
  preStep
}).map(({ actions, preStep, responses }) => ({
  name: "property",
  model: responses.map((r, i) =>
    "calls" in r
      ? {
        latencyMs: r.latencyMs,
        toolCalls: r.calls.map((c, j) => ({ id: `r${i}_c${j}`, name: c.name, arguments: { ms: c.ms } }))
      }
      : "error" in r
      ? { latencyMs: r.latencyMs, error: { code: "HTTP_503", message: "overloaded", retryable: r.error } }
      : "truncated" in r
      ? { latencyMs: r.latencyMs, text: r.text, finish: "length" as const }
      : r
  ),
  tools,
  preStep,
  actions
}))

// The compaction variant (§17). The five tools' definitions are estimated at 292 tokens
// (`Compaction.estimateFixed`); the window leaves 10–60 tokens of history above them and the
// reserve (a turn is ~15–30), or is absent (overflow and manual compactions only).
const TOOL_TOKENS = 292
const usage = fc.option(fc.integer({ min: 200, max: 450 }), { freq: 4, nil: undefined })
const compactionResponse = fc.oneof(
  { weight: 5, arbitrary: fc.record({ latencyMs: latency, text, usage }) },
  {
    weight: 3,
    arbitrary: fc.record({ latencyMs: latency, calls: fc.array(toolCall, { minLength: 1, maxLength: 3 }), usage })
  },
  { weight: 1, arbitrary: fc.record({ latencyMs: latency, error: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ latencyMs: latency, text, truncated: fc.constant(true) }) },
  { weight: 2, arbitrary: fc.record({ latencyMs: latency, overflow: fc.constant(true) }) }
)

const compactionAction = fc.oneof(
  { weight: 12, arbitrary: action },
  {
    weight: 2,
    arbitrary: fc.record({
      at: fc.integer({ min: 0, max: 400 }),
      compact: fc.option(text, { nil: undefined }).map((instructions) => (instructions === undefined ? {} : { instructions }))
    })
  }
)

const compactionArb = fc.record({
  responses: fc.array(compactionResponse, { minLength: 3, maxLength: 12 }),
  actions: fc.array(compactionAction, { minLength: 3, maxLength: 10 }),
  preStep,
  budget: fc.option(fc.integer({ min: 10, max: 60 }), { freq: 5, nil: undefined }),
  reserve: fc.integer({ min: 10, max: 30 }),
  keepRecentTokens: fc.integer({ min: 5, max: 40 }),
  policy: fc.constantFrom("summarize" as const, "summarize" as const, "prune" as const)
}).map(({ actions, budget, keepRecentTokens, policy, preStep, reserve, responses }) => ({
  name: "property-compaction",
  compaction: {
    ...(budget !== undefined ? { contextWindow: TOOL_TOKENS + reserve + budget } : {}),
    reserve,
    keepRecentTokens,
    policy
  },
  model: responses.map((r, i) => {
    const withUsage = (u: number | undefined) => (u === undefined ? {} : { usage: { inputTokens: u } })
    return "calls" in r
      ? {
        latencyMs: r.latencyMs,
        toolCalls: r.calls.map((c, j) => ({ id: `r${i}_c${j}`, name: c.name, arguments: { ms: c.ms } })),
        ...withUsage(r.usage)
      }
      : "overflow" in r
      ? { latencyMs: r.latencyMs, error: { code: "CONTEXT_OVERFLOW", message: "prompt is too long", status: 400 } }
      : "error" in r
      ? { latencyMs: r.latencyMs, error: { code: "HTTP_503", message: "overloaded", retryable: r.error } }
      : "truncated" in r
      ? { latencyMs: r.latencyMs, text: r.text, finish: "length" as const }
      : { latencyMs: r.latencyMs, text: r.text, ...withUsage(r.usage) }
  }),
  tools,
  preStep,
  actions
}))

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
