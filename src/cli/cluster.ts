/**
 * The cluster commands of the CLI (issue 14 §3): `runner` (a runner process, `AgentRunner.layer`)
 * and `send` (a client-only process, `AgentRunner.layerClient`). `main.ts` checks the arguments
 * and imports this module only when one of them runs, so that no other command loads
 * `@effect/cluster`, `@effect/rpc`, `@effect/sql`, `@effect/sql-pg` or `pg` (the build bundles
 * them into chunks of `dist/cli/`). Failures are `CliExit`s with one line (see `main.ts`).
 *
 * @since 0.1.0
 */
import * as ShardId from "@effect/cluster/ShardId"
import { Sharding } from "@effect/cluster/Sharding"
import { Console, Context, Effect, Layer, Schedule, Schema } from "effect"
import { AgentClient } from "../cluster/AgentClient.js"
import { DeliveryOutcome } from "../cluster/AgentEntity.js"
import * as AgentRunner from "../cluster/AgentRunner.js"
import type * as Compaction from "../Compaction.js"
import { pgWhere } from "../internal/pgUrl.js"
import { escapeLine } from "../internal/terminalText.js"
import type * as Model from "../Model.js"
import * as OfflineTools from "../OfflineTools.js"
import { exit } from "./exit.js"
import { oneLineLogger } from "./storeFailures.js"

/** The first line of an error's message, and of its cause's when it has one. */
const reasonOf = (error: { readonly message: string; readonly cause?: unknown }): string => {
  const cause = error.cause
  const inner = cause instanceof Error ? cause.message : typeof cause === "string" ? cause : ""
  const text = inner === "" || error.message.includes(inner) ? error.message : `${error.message}: ${inner}`
  return text.split("\n")[0]!
}

/** What `runner` takes (checked by `main.ts`). */
export interface RunnerArgs {
  readonly pg: string
  readonly host: string
  readonly port: number
  readonly listenHost: string | undefined
  readonly tablePrefix: string | undefined
  readonly instructions: string | undefined
  readonly maxSteps: number
  readonly maxIdleMs: number | undefined
  readonly sharding: AgentRunner.ShardingSettings
  readonly model: Layer.Layer<Model.Model>
  /** The agents' compaction policy (`--context-window`), or none. */
  readonly compaction: Layer.Layer<Compaction.Compaction> | undefined
  /** Called once the runner serves (before the ready line). */
  readonly onReady: () => void
}

/** Waits until the runner holds the lock of at least one shard (it is registered and serving). */
const servingShard = (sharding: Context.Tag.Service<typeof Sharding>, shards: number) =>
  Effect.suspend(() => {
    for (let i = 1; i <= shards; i++) if (sharding.hasShardId(ShardId.make("default", i))) return Effect.void
    return Effect.fail("no shard yet" as const)
  }).pipe(Effect.retry(Schedule.spaced("50 millis")))

/**
 * `runner`: builds `AgentRunner.layer` with the model, the compaction policy if any and the
 * offline tools, waits until it holds a shard, prints `runner ready <host>:<port>` and serves
 * until interrupted (SIGTERM, SIGINT),
 * when its scope closes: the sharding releases its shards and unregisters, the entities release
 * their agents (their inboxes stay in the log).
 */
export const runner = (args: RunnerArgs) =>
  Effect.scoped(Effect.gen(function*() {
    const tools = yield* OfflineTools.all()
    const layer = AgentRunner.layer({
      pg: args.pg,
      host: args.host,
      port: args.port,
      listenHost: args.listenHost,
      tablePrefix: args.tablePrefix,
      sharding: args.sharding,
      tools,
      instructions: args.instructions,
      maxSteps: args.maxSteps,
      maxIdleTime: args.maxIdleMs
    }).pipe(
      // The policy reaches the entity's agents through the layer's context (`Agent.make`/`resume`
      // read it when each session is opened).
      Layer.provide(args.compaction === undefined ? args.model : Layer.merge(args.model, args.compaction))
    )
    const context = yield* Layer.build(layer).pipe(
      Effect.catchTags({
        SqlError: (e) => exit(2, `runner: cannot use the PostgreSQL database ${pgWhere(args.pg)}: ${reasonOf(e)}`),
        SocketServerError: (e) =>
          exit(2, `runner: cannot listen on ${args.listenHost ?? args.host}:${args.port}: ${reasonOf(e)}`),
        SessionStoreError: (e) => exit(2, `runner: ${reasonOf(e)}`)
      })
    )
    yield* servingShard(Context.get(context, Sharding), args.sharding.shardsPerGroup ?? AgentRunner.defaults.shardsPerGroup)
    args.onReady()
    yield* Console.log(escapeLine(`runner ready ${args.host}:${args.port}`))
    return yield* Effect.never
  })).pipe(Effect.provide(oneLineLogger))

/** What `send` takes (checked by `main.ts`). */
export interface SendArgs {
  readonly pg: string
  readonly session: string
  readonly kind: "followup" | "steer" | "inject"
  readonly text: string
  readonly messageId: string | undefined
  readonly sourcePlugin: string | undefined
  readonly wait: boolean
  readonly tablePrefix: string | undefined
}

/**
 * `send`: one delivery through `AgentClient` from a client-only process; prints the message id,
 * then, with `wait`, the fate (`DeliveryOutcome`'s JSON encoding) as a second line.
 */
export const send = (args: SendArgs) =>
  Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(AgentRunner.layerClient({ pg: args.pg, tablePrefix: args.tablePrefix })).pipe(
      Effect.catchTag("SqlError", (e) => exit(2, `send: cannot use the PostgreSQL database ${pgWhere(args.pg)}: ${reasonOf(e)}`))
    )
    const client = Context.get(context, AgentClient)
    const message = args.sourcePlugin === undefined
      ? args.text
      : { content: [{ type: "text" as const, text: args.text }], source: { kind: "plugin", plugin: args.sourcePlugin } }
    const failed = (e: { readonly _tag: string; readonly message: string }) =>
      e._tag === "InvalidMessage" ? exit(2, `send: ${e.message}`) : exit(1, `send: ${e._tag}: ${reasonOf(e)}`)
    const delivered = yield* client[args.kind](args.session, message, { messageId: args.messageId }).pipe(
      Effect.catchAll(failed)
    )
    yield* Console.log(escapeLine(delivered.messageId))
    if (!args.wait) return
    const outcome = yield* client.outcome(args.session, delivered.messageId).pipe(Effect.catchAll(failed))
    const encoded = yield* Schema.encode(DeliveryOutcome)(outcome).pipe(Effect.orDie)
    yield* Console.log(escapeLine(JSON.stringify(encoded)))
  })).pipe(Effect.provide(oneLineLogger))
