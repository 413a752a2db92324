// A writer of one PostgreSQL session in a child process, for the fencing test
// (test/Fencing.test.ts): makes session ID through an exclusive store, then appends a plugin
// event `test/tick {n}` every 20 ms through its agent and prints `tick <n>` (synchronously)
// once each is durable. When an append fails it prints the error as one JSON line
// (`{"failed": tag, "epoch", "current", "message"}`) and exits 3.
//   node fenceChild.mjs URL ID
import { Effect, Layer } from "effect"
import { writeSync } from "node:fs"
import { Agent, Model, Offline } from "../../dist/index.js"
import * as SqlSessionStore from "../../dist/SqlSessionStore.js"

const [url, sessionId] = process.argv.slice(2)
const layers = Layer.merge(SqlSessionStore.layerPg({ url, maxConnections: 2 }), Model.layer(Offline.make()))

const program = Effect.scoped(Effect.gen(function*() {
  const agent = yield* Agent.make({ sessionId })
  for (let n = 0;; n++) {
    const failed = yield* Effect.flip(agent.appendEvent("test/tick", { n }))
      .pipe(Effect.map((e) => ({ e })), Effect.orElseSucceed(() => undefined))
    if (failed !== undefined) {
      const { e } = failed
      writeSync(1, JSON.stringify({ failed: e._tag, epoch: e.epoch, current: e.current, message: e.message }) + "\n")
      process.exit(3)
    }
    writeSync(1, `tick ${n}\n`)
    yield* Effect.sleep("20 millis")
  }
}))

Effect.runPromise(program.pipe(Effect.provide(layers))).catch((error) => {
  writeSync(2, `${error}\n`)
  process.exit(1)
})
