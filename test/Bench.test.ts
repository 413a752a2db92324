/**
 * The bench's smoke mode (bench/README.md) for the history-growth rows: `bench/run.js --quick`
 * runs them on `dist/` (built by the global setup) and fails a job whose counts are off (model
 * calls, messages, turns; with compaction: every bracket compacted, one summarization request
 * each, about one per 200 turns). Timings are never asserted.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"

describe("bench --quick", () => {
  it("history-growth and history-growth-compaction: the counts hold, 4 compactions in 1,000 turns", () => {
    const r = spawnSync(
      process.execPath,
      ["--expose-gc", "bench/run.js", "--quick", "--only=history-growth,history-growth-compaction"],
      { encoding: "utf8", timeout: 100_000 }
    )
    expect([r.status, r.stderr.includes("FAILED") ? r.stderr : ""]).toEqual([0, ""])
    const rows = r.stdout.split("\n").filter((l) => l.startsWith("history-growth"))
    expect(rows.map((l) => l.split(/ {2,}/).slice(0, 3))).toEqual([
      ["history-growth", "memory", "µs/turn, first 10%"],
      ["history-growth", "memory", "µs/turn, last 10%"],
      ["history-growth-compaction", "memory", "µs/turn, first 10%"],
      ["history-growth-compaction", "memory", "µs/turn, last 10%"],
      ["history-growth-compaction", "memory", "µs/turn, first 10%, turns without a compaction"],
      ["history-growth-compaction", "memory", "µs/turn, last 10%, turns without a compaction"],
      ["history-growth-compaction", "memory", "compactions per run"]
    ])
    expect(rows.at(-1)!.split(/ {2,}/)[3]).toBe("4 [4–4]")
  }, 120_000)
})
