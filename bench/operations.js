// Effect operations per unit (§24 rule 10): how many operations Effect's fiber runtime evaluates
// per turn, model step, tool call or streamed delta of our side. Unlike a time, the count does
// not move with the load of the machine: the same build and workload give the same figure (the
// streamed rows within a fraction of a percent: how the server's writes fall into reads), so a
// change's effect on the per-step path shows on a busy 2-core machine. It counts ours only (the
// peers do not run on Effect); `bench/instructions.js` counts instructions on every side.
//
//   node bench/operations.js [--baseline=DIR] [--json]
//
// Counting: every method of the runtime's fiber class that evaluates one operation (its name is
// the operation's tag: `OnSuccess`, `Sync`, `Async`, …) is wrapped once, in this process, before
// the measured run; a warm-up run of the same workload comes first. `--baseline=DIR` runs the
// same counts on `DIR/dist` (a child process with `BENCH_DIST`) and prints before, after and
// after/before. `--json`: `RESULT <json>` as the last line. Nothing is asserted but the
// workloads' own checks (a run whose counts are off throws).
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const args = process.argv.slice(2)
const baseline = args.find((a) => a.startsWith("--baseline="))?.slice(11)
const json = args.includes("--json")
for (const a of args) {
  if (a !== "--json" && !a.startsWith("--baseline=")) {
    process.stderr.write(`bench/operations.js: unknown argument ${JSON.stringify(a)}\n`)
    process.exit(2)
  }
}
if (baseline !== undefined && !existsSync(join(resolve(baseline), "dist", "index.js"))) {
  process.stderr.write(`bench/operations.js: --baseline=${baseline} has no built dist/\n`)
  process.exit(2)
}

/** The rows: [workload, label, unit, units of one run, run]. */
const ROWS = [
  ["turns", "memory", "turn", 500, (m) => m.prompts({ workload: "turns", prompts: 500 })],
  ["turns", "memory, recording tracer", "turn", 500, (m) => m.prompts({ workload: "turns", prompts: 500, tracer: "record" })],
  ["tool-steps", "memory", "model step", 50 * 11, (m) => m.prompts({ workload: "tool-steps", prompts: 50 })],
  [
    "tool-steps",
    "memory, recording tracer",
    "model step",
    50 * 11,
    (m) => m.prompts({ workload: "tool-steps", prompts: 50, tracer: "record" })
  ],
  ["parallel-tools", "memory", "tool call", 50 * 8, (m) => m.prompts({ workload: "parallel-tools", prompts: 50 })],
  ["steer-during-tools", "memory", "turn", 50, (m) => m.prompts({ workload: "steer-during-tools", prompts: 50 })],
  ["turns", "jsonl", "turn", 500, (m) => m.prompts({ workload: "turns", store: "jsonl", prompts: 500 })],
  ["streaming", "text", "delta", 2 * 2000, (m) => m.streaming({ scenario: "text", deltas: 2000, turns: 2 })],
  [
    "streaming",
    "reasoning + tool call",
    "delta",
    2 * 2020,
    (m) => m.streaming({ scenario: "reasoning-tool", deltas: 2000, turns: 2 })
  ]
]

/** Wraps the fiber class's operation methods; returns the counter. */
const instrument = async (Effect) => {
  const fiber = await Effect.runPromise(Effect.withFiberRuntime((f) => Effect.succeed(f)))
  const proto = Object.getPrototypeOf(fiber)
  const counter = { on: false, total: 0 }
  for (const name of Object.getOwnPropertyNames(proto)) {
    if (!/^[A-Z]/.test(name) || typeof proto[name] !== "function") continue
    const evaluate = proto[name]
    proto[name] = function(op) {
      if (counter.on) counter.total++
      return evaluate.call(this, op)
    }
  }
  return counter
}

/** Counts every row in this process (on the build `bench/dist.js` picks). */
const countHere = async () => {
  const { Effect } = await import("effect")
  const counter = await instrument(Effect)
  const ours = await import("./ours.js")
  const stream = await import("./stream.js")
  const m = {
    prompts: ({ workload, store = "memory", prompts, tracer }) => ours.runPrompts({ workload, store, prompts, tracer }),
    streaming: ({ scenario, deltas, turns }) => stream.runStreaming({ side: "ours", scenario, deltas, warmupTurns: 0, turns })
  }
  const out = []
  for (const [workload, label, unit, units, run] of ROWS) {
    await run(m) // warm-up (and the row's own checks)
    counter.total = 0
    counter.on = true
    await run(m)
    counter.on = false
    out.push({ workload, label, unit, perUnit: counter.total / units })
  }
  return out
}

const here = fileURLToPath(import.meta.url)
if (process.env.BENCH_OPERATIONS_CHILD === "1") {
  console.log(`RESULT ${JSON.stringify(await countHere())}`)
} else {
  const after = await countHere()
  let before
  if (baseline !== undefined) {
    const r = spawnSync(process.execPath, [here], {
      encoding: "utf8",
      env: { ...process.env, BENCH_DIST: join(resolve(baseline), "dist"), BENCH_OPERATIONS_CHILD: "1" },
      maxBuffer: 64 * 1024 * 1024
    })
    const line = r.stdout.split("\n").find((l) => l.startsWith("RESULT "))
    if (r.status !== 0 || line === undefined) {
      process.stderr.write(`bench/operations.js: the baseline run failed (${r.status}):\n${r.stderr}\n`)
      process.exit(1)
    }
    before = JSON.parse(line.slice(7))
  }
  const fmt = (n) => n.toFixed(1)
  console.log(`Effect operations per unit (ours; node ${process.version})`)
  for (let i = 0; i < after.length; i++) {
    const a = after[i]
    const name = `${a.workload} ${a.label}`.padEnd(44) + `per ${a.unit}`.padEnd(16)
    if (before === undefined) console.log(`${name}${fmt(a.perUnit).padStart(9)}`)
    else {
      const b = before[i]
      console.log(`${name}${fmt(b.perUnit).padStart(9)} → ${fmt(a.perUnit).padStart(9)}  ${(a.perUnit / b.perUnit).toFixed(2)}`)
    }
  }
  if (json) console.log(`RESULT ${JSON.stringify({ after, before })}`)
}
