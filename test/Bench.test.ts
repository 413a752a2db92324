/**
 * The bench's smoke mode (bench/README.md) for the history-growth rows and (§24) the
 * streaming, concurrent-sessions and sessions-append rows: `bench/run.js --quick`
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

describe("bench --quick, §24", () => {
  it("streaming, concurrent-sessions and sessions-append: every side's counts hold, one row per peer", () => {
    // Each job throws when its counts are off (the streamed text and reasoning, one tool call
    // with the sent arguments, its run, the second step's text, the server's request count, the
    // events in every log and raw file); `FAILED` in stderr or a non-zero exit is a failed job.
    const r = spawnSync(
      process.execPath,
      ["--expose-gc", "bench/run.js", "--quick", "--only=streaming,concurrent-sessions,sessions-append"],
      { encoding: "utf8", timeout: 100_000 }
    )
    expect([r.status, r.stderr.includes("FAILED") ? r.stderr : ""]).toEqual([0, ""])
    const rows = r.stdout.split("\n").filter((l) => /^(streaming|concurrent-sessions|sessions-append) /.test(l))
    expect(rows.map((l) => [...l.split(/ {2,}/).slice(0, 3), l.split(/ {2,}/)[4]!.split(" ")[0]])).toEqual([
      ["streaming", "loopback", "µs CPU/delta, 200 text deltas", "pi"],
      ["streaming", "loopback", "µs CPU/delta, 200 text deltas", "ai-sdk"],
      ["streaming", "loopback", "µs CPU/delta, reasoning + text + tool call + step 2 (220 deltas)", "pi"],
      ["streaming", "loopback", "µs CPU/delta, reasoning + text + tool call + step 2 (220 deltas)", "ai-sdk"],
      ["concurrent-sessions", "loopback", "µs CPU/turn, 50 sessions", "pi"],
      ["concurrent-sessions", "loopback", "µs CPU/turn, 50 sessions", "ai-sdk"],
      ["concurrent-sessions", "loopback", "ms event-loop delay p99", "pi"],
      ["concurrent-sessions", "loopback", "ms event-loop delay p99", "ai-sdk"],
      ["concurrent-sessions", "loopback", "heap bytes/active session at the peak", "pi"],
      ["concurrent-sessions", "loopback", "heap bytes/active session at the peak", "ai-sdk"],
      ["sessions-append", "jsonl", "events/s, 64 sessions, fsync none", "raw"],
      ["sessions-append", "jsonl", "events/s, 64 sessions, fsync batch", "raw"]
    ])
  }, 120_000)
})

describe("bench arguments", () => {
  it("an unknown flag, an unknown workload or a baseline without dist/ stops the run with exit 2 before any job", () => {
    const run = (...args: Array<string>) => {
      const r = spawnSync(process.execPath, ["bench/run.js", ...args], { encoding: "utf8", timeout: 30_000 })
      return [r.status, r.stdout, r.stderr.split("\n")[0]]
    }
    expect(run("--quick", "--onyl=turns")).toEqual([2, "", "bench/run.js: unknown argument \"--onyl=turns\""])
    expect(run("--only=turns,stream")).toEqual([2, "", "bench/run.js: --only: unknown workload \"stream\""])
    expect(run("--baseline=/nonexistent")).toEqual([
      2,
      "",
      "bench/run.js: --baseline=/nonexistent: no built /nonexistent/dist/index.js (run npm run build there first)"
    ])
  })
})
