// One process of bench/instructions.js, run under valgrind's callgrind: for each item in turn, a
// warm-up run, then measured segments of sizes A, B, A, B (B = 2A), each followed by a mark. A
// mark is `os.loadavg()`, a full GC (`gc()`: every segment starts from the same heap), then
// `os.loadavg()` again. `os.loadavg()` is the only caller of libuv's `uv_loadavg` here: callgrind
// runs with `--dump-before=uv_loadavg`, so each call writes the instructions counted since the
// previous one and zeroes the counters; a segment and the GC after it are counted apart. Item i
// owns 2 dumps per mark: its warm-up (for the first item also the process's start and imports)
// and that GC, then each segment and its GC. bench/instructions.js takes (the least of the B
// segments − the least of the A segments) / (B − A units): what does not grow with the size (a
// run's agent, store and server) cancels out.
//
//   valgrind --tool=callgrind --dump-before=uv_loadavg … node --expose-gc --predictable … \
//     bench/instructions-job.js '{"side": "ours", "items": [ITEM, …]}'
//
// ITEM: { kind: "prompts", workload, store, tracer?, warmup: {prompts, runs}, sizes: [A, B, A, B] }
//       { kind: "streaming", scenario: "text", tickMs, turns, warmup: {deltas, turns}, sizes: [deltasA, …] }
//       { kind: "concurrent", deltas, tickMs, sessions, warmup: {sessions}, sizes: [runsA, …] }
// Each segment is a whole call of the side's run, its checks included (a run whose counts are
// off throws: exit 1). Prints `RESULT {"units": [[A, B, A, B], …]}`: the units of each segment.
import { loadavg } from "node:os"
import { WORKLOADS } from "./workloads.js"

const spec = JSON.parse(process.argv[2])
const mark = () => {
  loadavg()
  globalThis.gc()
  loadavg()
}

const items = {
  prompts: async (item) => {
    const side = await import(spec.side === "pi" ? "./pi.js" : "./ours.js")
    const base = { workload: item.workload, store: item.store, fsync: "none", tracer: item.tracer }
    const run = (prompts) => side.runPrompts({ ...base, prompts })
    return { warm: () => run(item.warmup.prompts), warmRuns: item.warmup.runs, run, units: WORKLOADS[item.workload].units }
  },
  streaming: async (item) => {
    const { runStreaming } = await import("./stream.js")
    const base = { side: spec.side, scenario: item.scenario, tickMs: item.tickMs, warmupTurns: 0 }
    return {
      warm: () => runStreaming({ ...base, deltas: item.warmup.deltas, turns: item.warmup.turns }),
      warmRuns: 1,
      run: (deltas) => runStreaming({ ...base, deltas, turns: item.turns }),
      // text: the server sends `deltas` deltas a turn
      units: (deltas) => deltas * item.turns
    }
  },
  concurrent: async (item) => {
    const { runConcurrent } = await import("./stream.js")
    const base = { side: spec.side, deltas: item.deltas, tickMs: item.tickMs, heap: false }
    return {
      warm: () => runConcurrent({ ...base, sessions: item.warmup.sessions, warmupSessions: 0, runs: 1 }),
      warmRuns: 1,
      run: (runs) => runConcurrent({ ...base, sessions: item.sessions, warmupSessions: 0, runs }),
      units: (runs) => runs * item.sessions
    }
  }
}

try {
  if (typeof globalThis.gc !== "function") throw new Error("run with node --expose-gc")
  const units = []
  for (const item of spec.items) {
    const s = await items[item.kind](item)
    for (let i = 0; i < s.warmRuns; i++) await s.warm()
    mark()
    for (const size of item.sizes) {
      await s.run(size)
      mark()
    }
    units.push(item.sizes.map(s.units))
  }
  process.stdout.write(`RESULT ${JSON.stringify({ units })}\n`)
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exit(1)
}
