// A runner process for the idle-memory figure of the `cluster` section (bench/cluster.js):
// `AgentRunner.layer` built in this process (so that it can report its own heap, which the CLI
// runner cannot), with the offline model and no tools (tools are shared by all the entities of a
// runner; an inject runs none). Started with --expose-gc and `{url, port}` as its argument; prints
// `ready` once it holds every shard (it is the only runner), then on each stdin line `mem` runs
// the GC twice and prints `MEM {rss, heapUsed, external, arrayBuffers}` (bytes).
import { Context, Effect, Layer, Schedule } from "effect"
import { createInterface } from "node:readline"

const { url, port } = JSON.parse(process.argv[2])
const { Model, Offline } = await import("../dist/index.js")
const { AgentRunner } = await import("../dist/cluster/index.js")
const { Sharding } = await import("@effect/cluster/Sharding")
const ShardId = await import("@effect/cluster/ShardId")

const shards = AgentRunner.defaults.shardsPerGroup

const main = Effect.scoped(Effect.gen(function*() {
  const layer = AgentRunner.layer({ pg: url, host: "127.0.0.1", port }).pipe(Layer.provide(Model.layer(Offline.make())))
  const context = yield* Layer.build(layer)
  const sharding = Context.get(context, Sharding)
  yield* Effect.suspend(() => {
    for (let i = 1; i <= shards; i++) if (!sharding.hasShardId(ShardId.make("default", i))) return Effect.fail("not all shards")
    return Effect.void
  }).pipe(Effect.retry(Schedule.spaced("100 millis")), Effect.timeout("60 seconds"))
  process.stdout.write("ready\n")
  yield* Effect.async(() => {
    const lines = createInterface({ input: process.stdin })
    lines.on("line", (line) => {
      if (line.trim() !== "mem") return
      globalThis.gc?.()
      globalThis.gc?.()
      const m = process.memoryUsage()
      process.stdout.write(
        `MEM ${JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers })}\n`
      )
    })
    // The orchestrator closes stdin (or dies): stop.
    lines.on("close", () => process.exit(0))
  })
}))

Effect.runPromise(main).catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack ?? e.message : String(e)}\n`)
  process.exit(1)
})
