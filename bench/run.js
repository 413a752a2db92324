// Benchmarks of the loop's overhead (issue 4 grows this into the side-by-side table with
// pi-agent-core). Run with `npm run bench` (builds dist/ first). Figures go to stdout; they are
// never asserted in tests.
import { Effect, Layer } from "effect"
import { Agent, IdGenerator, Model, SessionStore } from "../dist/index.js"

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}

/** `turns`: N prompts awaited one after another, one text step each, memory store. */
const turns = (n) =>
  Effect.gen(function*() {
    const model = Model.scripted([{ text: "ok" }], { loop: true, record: false })
    return yield* Effect.scoped(Effect.gen(function*() {
      const agent = yield* Agent.make()
      const start = performance.now()
      for (let i = 0; i < n; i++) {
        const d = yield* agent.followup(`prompt ${i}`)
        yield* d.outcome
        yield* agent.awaitIdle
      }
      const elapsed = performance.now() - start
      const turnEnds = agent.log.events().filter((e) => e.type === "turn/end").length
      if (turnEnds !== n || model.consumed() !== n) throw new Error(`turns: expected ${n} turns, got ${turnEnds}`)
      return (elapsed * 1000) / n
    })).pipe(Effect.provide(Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layer, Model.layer(model))))
  })

const runs = []
await Effect.runPromise(turns(500)) // warm-up
for (let i = 0; i < 5; i++) runs.push(await Effect.runPromise(turns(2000)))
console.log(`turns (memory store): median ${median(runs).toFixed(1)} µs/turn, min ${Math.min(...runs).toFixed(1)}, max ${Math.max(...runs).toFixed(1)} (5 runs × 2000 turns)`)
