// A runner process for the multi-process cluster tests (test/ClusterFailover.test.ts), with the
// flags of `agent-loop runner`: sharding over PostgreSQL, the offline model and the offline tools.
// Prints `runner ready <host>:<port>` once serving; SIGTERM → exit 0.
//   node clusterRunner.mjs --pg URL [--host H] [--port P] [--table-prefix P] [--health-check MS]
//     [--lock-refresh MS] [--lock-expiry MS] [--message-poll MS] [--max-idle MS]
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Duration, Effect, Layer } from "effect"
import { writeSync } from "node:fs"
import * as AgentRunner from "../../dist/cluster/AgentRunner.js"
import * as Model from "../../dist/Model.js"
import * as OfflineTools from "../../dist/OfflineTools.js"

const flags = new Map()
const argv = process.argv.slice(2)
for (let i = 0; i < argv.length; i += 2) flags.set(argv[i].replace(/^--/, ""), argv[i + 1])
const ms = (name) => flags.has(name) ? Duration.millis(Number(flags.get(name))) : undefined

const host = flags.get("host") ?? "127.0.0.1"
const port = Number(flags.get("port") ?? 34431)

const program = Effect.gen(function*() {
  const tools = yield* OfflineTools.all()
  const runner = AgentRunner.layer({
    pg: flags.get("pg"),
    host,
    port,
    tablePrefix: flags.get("table-prefix"),
    tools,
    maxIdleTime: ms("max-idle"),
    sharding: {
      runnerHealthCheckInterval: ms("health-check"),
      shardLockRefreshInterval: ms("lock-refresh"),
      shardLockExpiration: ms("lock-expiry"),
      entityMessagePollInterval: ms("message-poll")
    }
  }).pipe(Layer.provide(Model.layer(Model.offline())))
  yield* Layer.build(runner)
  writeSync(1, `runner ready ${host}:${port}\n`)
  return yield* Effect.never
}).pipe(Effect.scoped, Effect.provide(NodeContext.layer))

NodeRuntime.runMain(program)
