// Profiling helper: `node --expose-gc --cpu-prof --cpu-prof-dir=DIR bench/profile.js WORKLOAD [ARGS…]`
// runs one of our workloads repeatedly so the profile shows the steady state; then
// `node bench/profile-top.js DIR/*.cpuprofile` lists the functions by self time.
//
//   profile.js turns|tool-steps|… [STORE] [PROMPTS] [RUNS] [TRACER]   a prompt workload (bench/ours.js);
//                                   TRACER: record | drop (ours.js), none by default
//   profile.js streaming [SCENARIO] [DELTAS] [TURNS] [SIDE]   bench/stream.js (text | reasoning-tool)
//   profile.js concurrent-sessions [SESSIONS] [RUNS] [SIDE]
//   profile.js sessions-append [FSYNC] [TOTAL] [RUNS]
const [workload = "turns", ...rest] = process.argv.slice(2)
if (workload === "streaming") {
  const { runStreaming } = await import("./stream.js")
  const [scenario = "text", deltas = "2000", turns = "8", side = "ours"] = rest
  const r = await runStreaming({ side, scenario, deltas: Number(deltas), warmupTurns: 0, turns: Number(turns) })
  process.stdout.write(`${side} streaming ${scenario}: ${JSON.stringify(r.samples.map((s) => s.perUnit))}\n`)
} else if (workload === "concurrent-sessions") {
  const { runConcurrent } = await import("./stream.js")
  const [sessions = "1000", runs = "2", side = "ours"] = rest
  const r = await runConcurrent({ side, sessions: Number(sessions), deltas: 200, warmupSessions: 50, runs: Number(runs) })
  process.stdout.write(`${side} concurrent-sessions: ${JSON.stringify(r.samples)}\n`)
} else if (workload === "sessions-append") {
  const { runSessionsAppend } = await import("./append.js")
  const [fsync = "none", total = "20000", runs = "5"] = rest
  for (let i = 0; i < Number(runs); i++) {
    const r = await runSessionsAppend({ sessions: 64, total: Number(total), fsync })
    process.stdout.write(`sessions-append fsync ${fsync}: ${JSON.stringify(r)}\n`)
  }
} else {
  const { runPrompts } = await import("./ours.js")
  const [store = "memory", prompts = "2000", runs = "5", tracer] = rest
  for (let i = 0; i < Number(runs); i++) {
    const r = await runPrompts({ workload, store, prompts: Number(prompts), tracer })
    process.stdout.write(`${workload} ${store}${tracer === undefined ? "" : ` tracer=${tracer}`}: ${JSON.stringify(r)}\n`)
  }
}
