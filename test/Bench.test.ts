/**
 * The bench's smoke mode (bench/README.md) for the history-growth rows and (§24) the streaming,
 * concurrent-sessions and sessions-append rows: `bench/run.js --quick` runs them on `dist/`
 * (built by the global setup) and fails a job whose counts are off (model calls, messages,
 * turns; with compaction: every bracket compacted, one summarization request each, about one
 * per 200 turns). Timings are never asserted. Each run is a child process the test awaits
 * (`run`), so the worker stays responsive while the bench takes its minutes.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { run } from "./utils/child.js"

/**
 * Real-time bounds of one `bench/run.js --quick --only=…` run, in ms, from its wall time measured
 * 4 times on 2 cores loaded by two busy loops and other test runs (load average 12 to 19):
 * history-growth with history-growth-compaction 40 to 59 s, streaming 65 to 104 s,
 * concurrent-sessions 76 to 102 s, sessions-append 16 to 28 s, a refused argument 0.7 to 1.1 s.
 * Each bound is about three times the slowest run (the arguments: 30 s); a run past it is stuck.
 * With the LTS Node's rows (pi 1.6.0 and the AI SDK beside pi 0.73: two more jobs per row) the four
 * runs took 139 s together in a CI run at load 10 to 14, well inside these bounds.
 */
const BOUND_MS = {
  historyGrowth: 180_000,
  streaming: 300_000,
  concurrentSessions: 300_000,
  sessionsAppend: 90_000,
  arguments: 30_000
} as const

/**
 * The node column of the rows the bench runs on its own Node (pi 0.73, raw writes, ours beside
 * them): the Node running the suite (20, or the LTS line in CI's second run); the peers of the
 * LTS line (pi 1.6.0, the AI SDK) run on Node 26 whatever runs the bench.
 */
const home = process.versions.node.split(".")[0]!

/** vitest's own limit for a test that runs the bench: after the child's bound, which names what it printed. */
const testTimeout = (boundMs: number) => boundMs + 30_000

/** `bench/run.js --quick --only=<only>`: fails on a non-zero exit or a `FAILED` job; its stdout. */
const quick = (only: string, withinMs: number) =>
  Effect.gen(function*() {
    const r = yield* run(process.execPath, ["--expose-gc", "bench/run.js", "--quick", `--only=${only}`], { withinMs })
    expect([r.status, r.stderr.includes("FAILED") ? r.stderr : ""]).toEqual([0, ""])
    return r.stdout
  })

/** The rows of the results table whose workload is one of `workloads`, split at its column gaps. */
const rowsOf = (stdout: string, workloads: ReadonlyArray<string>) =>
  stdout.split("\n").filter((l) => workloads.includes(l.split(" ")[0]!)).map((l) => l.split(/ {2,}/))

/**
 * Workload, store, node (20 or the LTS line), unit and the peer's name (`pi` for pi 0.73,
 * `pi 1.6.0`, `ai-sdk`, `raw`: the peer cell without its figures) of a row of a workload with peers.
 */
const peerRow = (cells: ReadonlyArray<string>) => [...cells.slice(0, 4), cells[5]!.replace(/ [\d,.]+ \[.*$/, "")]

describe("bench --quick", () => {
  it.live(
    "history-growth and history-growth-compaction: the counts hold, 4 compactions in 1,000 turns",
    () =>
      Effect.gen(function*() {
        const rows = rowsOf(
          yield* quick("history-growth,history-growth-compaction", BOUND_MS.historyGrowth),
          ["history-growth", "history-growth-compaction"]
        )
        expect(rows.map((cells) => cells.slice(0, 4))).toEqual([
          ["history-growth", "memory", home, "µs/turn, first 10%"],
          ["history-growth", "memory", "26", "µs/turn, first 10%"],
          ["history-growth", "memory", home, "µs/turn, last 10%"],
          ["history-growth", "memory", "26", "µs/turn, last 10%"],
          ["history-growth-compaction", "memory", home, "µs/turn, first 10%"],
          ["history-growth-compaction", "memory", home, "µs/turn, last 10%"],
          ["history-growth-compaction", "memory", home, "µs/turn, first 10%, turns without a compaction"],
          ["history-growth-compaction", "memory", home, "µs/turn, last 10%, turns without a compaction"],
          ["history-growth-compaction", "memory", home, "compactions per run"]
        ])
        expect(rows.at(-1)![4]).toBe("4 [4–4]")
      }),
    testTimeout(BOUND_MS.historyGrowth)
  )

  // Each job below throws when its counts are off (the streamed text and reasoning, one tool
  // call with the sent arguments, its run, the second step's text, the server's request count,
  // the events in every log and raw file); `FAILED` in stderr or a non-zero exit is a failed job.

  it.live(
    "streaming: every side's counts hold, one row per peer",
    () =>
      Effect.gen(function*() {
        const rows = rowsOf(yield* quick("streaming", BOUND_MS.streaming), ["streaming"])
        expect(rows.map(peerRow)).toEqual([
          ["streaming", "loopback", home, "µs CPU/delta, 200 text deltas", "pi"],
          ["streaming", "loopback", "26", "µs CPU/delta, 200 text deltas", "pi 1.6.0"],
          ["streaming", "loopback", "26", "µs CPU/delta, 200 text deltas", "ai-sdk"],
          ["streaming", "loopback", home, "µs CPU/delta, 200 text deltas", "raw"],
          ["streaming", "loopback", "26", "µs CPU/delta, 200 text deltas", "raw"],
          ["streaming", "loopback", home, "µs CPU/delta, reasoning + text + tool call + step 2 (220 deltas)", "pi"],
          ["streaming", "loopback", "26", "µs CPU/delta, reasoning + text + tool call + step 2 (220 deltas)", "pi 1.6.0"],
          ["streaming", "loopback", "26", "µs CPU/delta, reasoning + text + tool call + step 2 (220 deltas)", "ai-sdk"],
          ["streaming", "loopback", home, "µs CPU/delta, reasoning + text + tool call + step 2 (220 deltas)", "raw"],
          ["streaming", "loopback", "26", "µs CPU/delta, reasoning + text + tool call + step 2 (220 deltas)", "raw"]
        ])
      }),
    testTimeout(BOUND_MS.streaming)
  )

  it.live(
    "concurrent-sessions: every side's counts hold, one row per peer",
    () =>
      Effect.gen(function*() {
        const rows = rowsOf(yield* quick("concurrent-sessions", BOUND_MS.concurrentSessions), ["concurrent-sessions"])
        expect(rows.map(peerRow)).toEqual([
          ["concurrent-sessions", "loopback", home, "µs CPU/turn, 50 sessions", "pi"],
          ["concurrent-sessions", "loopback", "26", "µs CPU/turn, 50 sessions", "pi 1.6.0"],
          ["concurrent-sessions", "loopback", "26", "µs CPU/turn, 50 sessions", "ai-sdk"],
          ["concurrent-sessions", "loopback", home, "µs CPU/turn, 50 sessions", "raw"],
          ["concurrent-sessions", "loopback", "26", "µs CPU/turn, 50 sessions", "raw"],
          ["concurrent-sessions", "loopback", home, "ms event-loop delay p99", "pi"],
          ["concurrent-sessions", "loopback", "26", "ms event-loop delay p99", "pi 1.6.0"],
          ["concurrent-sessions", "loopback", "26", "ms event-loop delay p99", "ai-sdk"],
          ["concurrent-sessions", "loopback", home, "ms event-loop delay p99", "raw"],
          ["concurrent-sessions", "loopback", "26", "ms event-loop delay p99", "raw"],
          ["concurrent-sessions", "loopback", home, "heap bytes/active session at the peak", "pi"],
          ["concurrent-sessions", "loopback", "26", "heap bytes/active session at the peak", "pi 1.6.0"],
          ["concurrent-sessions", "loopback", "26", "heap bytes/active session at the peak", "ai-sdk"],
          ["concurrent-sessions", "loopback", home, "heap bytes/active session at the peak", "raw"],
          ["concurrent-sessions", "loopback", "26", "heap bytes/active session at the peak", "raw"]
        ])
      }),
    testTimeout(BOUND_MS.concurrentSessions)
  )

  it.live(
    "sessions-append: the counts hold, one row per fsync mode against raw writes",
    () =>
      Effect.gen(function*() {
        const rows = rowsOf(yield* quick("sessions-append", BOUND_MS.sessionsAppend), ["sessions-append"])
        expect(rows.map(peerRow)).toEqual([
          ["sessions-append", "jsonl", home, "events/s, 64 sessions, fsync none", "raw"],
          ["sessions-append", "jsonl", home, "events/s, 64 sessions, fsync batch", "raw"]
        ])
      }),
    testTimeout(BOUND_MS.sessionsAppend)
  )
})

describe("bench arguments", () => {
  it.live(
    "an unknown flag, an unknown workload or a baseline without dist/ stops the run with exit 2 before any job",
    () =>
      Effect.gen(function*() {
        const refused = (...args: Array<string>) =>
          Effect.map(
            run(process.execPath, ["bench/run.js", ...args], { withinMs: BOUND_MS.arguments }),
            (r) => [r.status, r.stdout, r.stderr.split("\n")[0]]
          )
        expect(yield* refused("--quick", "--onyl=turns")).toEqual([2, "", "bench/run.js: unknown argument \"--onyl=turns\""])
        expect(yield* refused("--only=turns,stream")).toEqual([2, "", "bench/run.js: --only: unknown workload \"stream\""])
        expect(yield* refused("--baseline=/nonexistent")).toEqual([
          2,
          "",
          "bench/run.js: --baseline=/nonexistent: no built /nonexistent/dist/index.js (run npm run build there first)"
        ])
      }),
    testTimeout(BOUND_MS.arguments)
  )
})
