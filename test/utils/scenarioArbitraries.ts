/**
 * The random scenarios of the property tests (§15): scripted models of text, tool calls, errors
 * and truncation; followup/steer/inject/cancel (and a rare dispose) at random virtual times;
 * random pre-step listeners; and the compaction variant (§17) with a small window, reported
 * usage and `CONTEXT_OVERFLOW` errors. Shared by `test/Property.test.ts` and the differential
 * tests of the fast paths (`test/FastPaths.test.ts`).
 */
import { FastCheck as fc } from "effect"

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

/** A scenario as `Scenario.decode` takes it: 1–8 responses, 1–8 actions, 0–2 pre-step listeners, five tools. */
export const scenarioArb = fc.record({
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

/** A scenario with a `compaction` block: 3–12 responses (usage, overflows), 3–10 actions (and `compact`). */
export const compactionArb = fc.record({
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
