// Profiling helper: `node --cpu-prof --cpu-prof-dir=DIR bench/profile.js WORKLOAD [STORE] [PROMPTS] [RUNS]`
// runs one side's prompt workload repeatedly so the profile shows the steady state.
import { runPrompts } from "./ours.js"
const [workload = "turns", store = "memory", prompts = "2000", runs = "5"] = process.argv.slice(2)
for (let i = 0; i < Number(runs); i++) {
  const r = await runPrompts({ workload, store, prompts: Number(prompts) })
  process.stdout.write(`${workload} ${store}: ${JSON.stringify(r)}\n`)
}
