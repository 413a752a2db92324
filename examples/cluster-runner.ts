/**
 * Agents as `@effect/cluster` entities on PostgreSQL (`effect-agent-loop/cluster`, §21): one
 * runner process (sharding over PostgreSQL storage, the runner-to-runner transport on a TCP port)
 * serves the sessions; `AgentClient` delivers to a session by id from any process of the cluster.
 * A followup is answered with its message id once durable, a retry with the same id gets the same
 * answer without a second copy, an injection waits in the inbox and enters with the next followup,
 * and `outcome` waits for each message's fate. The session's log is then read from the same
 * database through `SqlSessionStore.layerPg`: valid by the invariants of §12, and its transcript.
 *
 * Run: npm run example -- cluster-runner URL [PORT]
 *   (URL: a PostgreSQL database, e.g. the one `scripts/pg-server.sh` prints; PORT default 7431)
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { Invariant, Model, Offline, SessionStore, Transcript, TranscriptText } from "effect-agent-loop"
import { AgentClient, AgentRunner } from "effect-agent-loop/cluster"
import * as SqlSessionStore from "effect-agent-loop/sql"
import { fileURLToPath } from "node:url"

/** Runs a runner on `url` (port `port`), talks to session "demo" through its client, reads the log back. */
export const main = (url: string, port: number) =>
  Effect.gen(function*() {
    const outcomes = yield* Effect.gen(function*() {
      const client = yield* AgentClient.AgentClient
      const first = yield* client.followup("demo", "hello", { messageId: "demo-1" })
      // A retry (the caller did not see the answer): the same delivery, one copy in the log.
      const retried = yield* client.followup("demo", "hello", { messageId: "demo-1" })
      yield* client.outcome("demo", first.messageId)
      const context = yield* client.inject("demo", {
        content: [{ type: "text", text: "the user is on a train" }],
        source: { kind: "plugin", plugin: "example" }
      })
      const second = yield* client.followup("demo", "where am I?")
      return {
        first,
        retried,
        entered: yield* client.outcome("demo", first.messageId),
        context: yield* client.outcome("demo", context.messageId),
        second: yield* client.outcome("demo", second.messageId)
      }
    }).pipe(
      Effect.scoped,
      Effect.provide(
        AgentRunner.layer({ pg: url, host: "127.0.0.1", port }).pipe(Layer.provide(Model.layer(Offline.make())))
      )
    )
    // The runner is gone (its scope ended): read the session from the database, as any process can.
    const contents = yield* Effect.flatMap(SessionStore.SessionStore, (store) => store.read("demo")).pipe(
      Effect.provide(SqlSessionStore.layerPg({ url }))
    )
    console.log(`outcomes: ${JSON.stringify(outcomes)}`)
    console.log(`invariant violations: ${JSON.stringify(Invariant.check(contents.events))}`)
    console.log(TranscriptText.render(Transcript.fromEvents(contents.events)))
    return { outcomes, contents }
  })

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [url, port] = process.argv.slice(2)
  const portNumber = Number(port ?? 7431)
  if (
    url === undefined || !/^postgres(ql)?:\/\//.test(url) || !Number.isInteger(portNumber) || portNumber < 1 || portNumber > 65535
  ) {
    console.error(
      "usage: npm run example -- cluster-runner URL [PORT]\n" +
        "  URL: a PostgreSQL database, postgres://user@host:port/db; PORT: the runner's TCP port, 1-65535 (default 7431)"
    )
    process.exit(2)
  }
  NodeRuntime.runMain(main(url, portNumber))
}
