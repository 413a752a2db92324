// The workloads of §24, shared by both runtimes (bench/ours.js, bench/pi.js): sizes, units
// and the counts every run must reproduce exactly (model calls, tool runs, transcript messages).
// Each agent is prompted `prompts` times, one prompt awaited after another; the transcript grows.

/**
 * Per workload: `prompts`, and per prompt the exact `modelCalls`, `toolRuns` and `messages` (the
 * transcript entries one prompt adds: the prompt, assistant messages, tool results, steers).
 * `units(prompts)` is how many units one run measures (what the per-unit figure divides by).
 * `warmupRuns`, where given, replaces the bench's ten warm-up runs (bench/README.md, §24).
 */
export const WORKLOADS = {
  // One text step per prompt.
  turns: { prompts: 2000, unit: "turn", modelCalls: 1, toolRuns: 0, messages: 2, units: (p) => p },
  // 10 steps with one trivial tool call each, then a text step.
  "tool-steps": {
    prompts: 200,
    unit: "model step",
    toolSteps: 10,
    modelCalls: 11,
    toolRuns: 10,
    messages: 22,
    units: (p) => p * 11
  },
  // One step with 8 tool calls, then a text step.
  "parallel-tools": {
    prompts: 200,
    warmupRuns: 30,
    unit: "tool call",
    calls: 8,
    modelCalls: 2,
    toolRuns: 8,
    messages: 11,
    units: (p) => p * 8
  },
  // One step with 4 tool calls (the second steers while it runs), then a text step that must
  // see the steer after all 4 results: prompt, assistant, 4 results, steer, assistant.
  "steer-during-tools": {
    prompts: 200,
    warmupRuns: 30,
    unit: "turn",
    calls: 4,
    steerer: 1,
    modelCalls: 2,
    toolRuns: 4,
    messages: 8,
    units: (p) => p
  },
  // 10,000 text turns; per-turn cost over the first and the last 10%.
  "history-growth": { prompts: 10000, unit: "turn", modelCalls: 1, toolRuns: 0, messages: 2, units: (p) => p },
  // The same turns with `Compaction.layer(compaction)` (§17, ours only). A turn adds ~13
  // tokens by the loop's estimate (a prompt "prompt 1234" 7, an answer "ok:123" 6; the fake model
  // reports that estimate as `inputTokens`): compaction starts above 4,096 − 1,200 tokens and
  // keeps the last ~260 verbatim, so it runs about every `turnsPerCompaction` turns.
  // `messages` counts the prompts and answers logged (checkpoints aside), `modelCalls` the turns'
  // requests (summarization requests aside: one per compaction).
  "history-growth-compaction": {
    prompts: 10000,
    unit: "turn",
    modelCalls: 1,
    toolRuns: 0,
    messages: 2,
    units: (p) => p,
    compaction: { contextWindow: 4096, reserve: 1200, keepRecentTokens: 260 },
    turnsPerCompaction: 200
  }
}

/**
 * The compactions a run of `prompts` turns of a compaction workload must make: about one per
 * `turnsPerCompaction` (the exact cadence follows the token estimate of the texts, whose lengths
 * vary with their numbers): between 0.8× and 1.25× `prompts / turnsPerCompaction`, rounded out.
 */
export const compactionRange = (workload, prompts) => {
  const per = WORKLOADS[workload].turnsPerCompaction
  return { min: Math.floor((0.8 * prompts) / per), max: Math.ceil((1.25 * prompts) / per) }
}

/** Throws when a run's counts differ from what its workload must produce. */
export const checkCounts = (side, workload, prompts, got) => {
  const w = WORKLOADS[workload]
  const want = { modelCalls: w.modelCalls * prompts, toolRuns: w.toolRuns * prompts, messages: w.messages * prompts }
  const bad = []
  for (const k of Object.keys(want)) {
    if (got[k] !== want[k]) bad.push(`${k}: expected ${want[k]}, got ${got[k]}`)
  }
  if (got.errors !== undefined && got.errors.length > 0) {
    bad.push(`the fake model saw a wrong context ${got.errors.length} time(s), first: ${got.errors[0]}`)
  }
  if (bad.length > 0) throw new Error(`${side} ${workload} (${prompts} prompts): counts are off: ${bad.join("; ")}`)
}

/** Median, min and max of a list of numbers. */
export const summarize = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const n = s.length
  const median = n % 2 === 1 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2
  return { median, min: s[0], max: s[n - 1], runs: s.length }
}
