// A client-only process of a test cluster (test/ClusterFailover.test.ts): asks the fate of a
// message of a session and prints it as one JSON line `{"outcome": …}` (or `{"failed": …}`), after
// printing `waiting` once the client is built and the session's owner is known (a `status`).
//   node clusterClient.mjs URL SESSION MESSAGE_ID
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect } from "effect"
import { writeSync } from "node:fs"
import { AgentClient } from "../../dist/cluster/AgentClient.js"
import * as AgentRunner from "../../dist/cluster/AgentRunner.js"

const [url, sessionId, messageId] = process.argv.slice(2)

const program = Effect.gen(function*() {
  const client = yield* AgentClient
  yield* client.status(sessionId)
  writeSync(1, "waiting\n")
  const result = yield* Effect.either(client.outcome(sessionId, messageId))
  writeSync(
    1,
    JSON.stringify(result._tag === "Right" ? { outcome: result.right } : { failed: result.left._tag ?? String(result.left) }) +
      "\n"
  )
}).pipe(Effect.scoped, Effect.provide(AgentRunner.layerClient({ pg: url })))

NodeRuntime.runMain(program)
