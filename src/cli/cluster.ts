/**
 * The cluster commands of the CLI (§21): `runner` (a runner process, `AgentRunner.layer`)
 * and `send` (a client-only process, `AgentRunner.layerClient`: a delivery, or a decision on an
 * open question, §26). `main.ts` checks the arguments
 * and imports this module only when one of them runs, so that no other command loads
 * `@effect/cluster`, `@effect/rpc`, `@effect/sql`, `@effect/sql-pg` or `pg` (the build bundles
 * them into chunks of `dist/cli/`). Failures are `CliExit`s with one line (see `main.ts`).
 *
 * @since 0.1.0
 */
import * as ShardId from "@effect/cluster/ShardId"
import { Sharding } from "@effect/cluster/Sharding"
import { Console, Context, Duration, Effect, Exit, Fiber, Layer, Option, Schedule, Schema, Scope } from "effect"
import { randomUUID } from "node:crypto"
import { AgentClient } from "../cluster/AgentClient.js"
import { DeliveryOutcome } from "../cluster/AgentEntity.js"
import * as AgentRunner from "../cluster/AgentRunner.js"
import type * as Compaction from "../Compaction.js"
import { pgWhere } from "../internal/pgUrl.js"
import { escapeLine } from "../internal/terminalText.js"
import type * as Model from "../Model.js"
import * as OfflineTools from "../providers/OfflineTools.js"
import type * as Tool from "../Tool.js"
import { withSubagents } from "./commands/subagentFlag.js"
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
  /** The offline tools whose calls ask for approval (`--ask TOOL`, §26). */
  readonly ask: ReadonlyArray<string>
  /** Whether the agents have the sub-agent tools (`--subagent`, `--subagent-fork`, §27). */
  readonly subagent: boolean
  readonly subagentFork: boolean
  /** Tools whose list may change, for every session (`--mcp-config`'s MCP servers, §28), or none. */
  readonly toolsets?: ReadonlyArray<Tool.Toolset> | undefined
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
 * offline tools (and with `subagent` a sub-agent tool), waits until it holds a shard, prints `runner ready <host>:<port>` and serves
 * until interrupted (SIGTERM, SIGINT),
 * when its scope closes: the sharding releases its shards and unregisters, the entities release
 * their agents (their inboxes stay in the log).
 */
export const runner = (args: RunnerArgs) =>
  Effect.scoped(Effect.gen(function*() {
    // A child's session goes to the runner's store, as the parent's (§21 rule 9).
    const tools = withSubagents(yield* OfflineTools.all(), args, args.ask, args.toolsets)
    const layer = AgentRunner.layer({
      pg: args.pg,
      host: args.host,
      port: args.port,
      listenHost: args.listenHost,
      tablePrefix: args.tablePrefix,
      sharding: args.sharding,
      tools,
      toolsets: args.toolsets,
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
  /** A delivery, or a decision on an open question (`approve`, `reject`: `text` is the question's id). */
  readonly kind: "followup" | "steer" | "inject" | "approve" | "reject"
  readonly text: string
  /** A decision's `always`, `name` and (`reject`) `reason`. */
  readonly always: boolean
  readonly name: string | undefined
  readonly reason: string | undefined
  readonly messageId: string | undefined
  readonly sourcePlugin: string | undefined
  readonly wait: boolean
  readonly tablePrefix: string | undefined
  /** Milliseconds `send` waits in all before it gives up (exit 3); undefined: no limit. */
  readonly timeoutMs: number | undefined
}

/** What `send` waits for: its progress lines and its timeout line name it. */
type Waiting = "database" | "runner" | "delivery" | "fate"

/** The first progress line comes after this long, the next ones as often. */
const PROGRESS_AFTER = Duration.seconds(5)
const PROGRESS_EVERY = Duration.seconds(10)
/** The most a stopping `send` waits for its client to close (a database that stopped answering would hold it). */
const CLOSE_WITHIN = Duration.seconds(2)

/** `1500` → `1.5 s`. */
const seconds = (ms: number): string => `${Math.round(ms / 100) / 10} s`

/**
 * The delivery itself, on the client built in `scope`: the session's owner first (`status`, not
 * persisted), then the persisted call (the message id printed once it is durable), then with
 * `wait` the fate. `at` tells what it waits for.
 */
const deliver = (args: SendArgs, messageId: string, scope: Scope.Scope, at: (waiting: Waiting) => void) =>
  Effect.gen(function*() {
    const context = yield* Layer.buildWithScope(
      AgentRunner.layerClient({ pg: args.pg, tablePrefix: args.tablePrefix }),
      scope
    ).pipe(
      Effect.catchTag("SqlError", (e) => exit(2, `send: cannot use the PostgreSQL database ${pgWhere(args.pg)}: ${reasonOf(e)}`))
    )
    const client = Context.get(context, AgentClient)
    // Until a runner answers for the session nothing is sent: `status` is not persisted (it is
    // what `AgentClient` asks before its first persisted call; its failure is the delivery's to report).
    at("runner")
    yield* Effect.ignore(client.status(args.session))
    at("delivery")
    if (args.kind === "approve" || args.kind === "reject") return yield* decide(args, client)
    const message = args.sourcePlugin === undefined
      ? args.text
      : { content: [{ type: "text" as const, text: args.text }], source: { kind: "plugin", plugin: args.sourcePlugin } }
    const failed = (e: { readonly _tag: string; readonly message: string }) =>
      e._tag === "InvalidMessage" ? exit(2, `send: ${e.message}`) : exit(1, `send: ${e._tag}: ${reasonOf(e)}`)
    const kind = args.kind
    const delivered = yield* client[kind](args.session, message, { messageId }).pipe(Effect.catchAll(failed))
    yield* Console.log(escapeLine(delivered.messageId))
    if (!args.wait) return
    at("fate")
    const outcome = yield* client.outcome(args.session, delivered.messageId).pipe(Effect.catchAll(failed))
    const encoded = yield* Schema.encode(DeliveryOutcome)(outcome).pipe(Effect.orDie)
    yield* Console.log(escapeLine(JSON.stringify(encoded)))
  })

/**
 * A decision on an open question (§26 rule 5): `approve` or `reject` through `AgentClient`, then
 * one line, `decided QID: OUTCOME`. A question that is not open (never asked in the session,
 * decided by someone else, closed by a cancel) exits 4 with one line saying so.
 */
const decide = (args: SendArgs, client: Context.Tag.Service<typeof AgentClient>) =>
  Effect.gen(function*() {
    const id = args.text
    const decided = args.kind === "approve"
      ? client.approve(args.session, id, { always: args.always, name: args.name })
      : client.reject(args.session, id, { always: args.always, name: args.name, reason: args.reason })
    yield* decided.pipe(
      Effect.catchAll((e) =>
        e._tag === "ApprovalNotOpen"
          ? exit(
            4,
            escapeLine(
              `send: question ${id} is not open in session ${args.session}: never asked there, already decided, or closed by a cancel (agent-loop pending --pg URL --session ${args.session} lists the open ones)`
            )
          )
          : e._tag === "InvalidDecision"
          ? exit(2, escapeLine(`send: ${e.message}`))
          : exit(1, escapeLine(`send: ${e._tag}: ${reasonOf(e)}`))
      )
    )
    const outcome = args.kind === "approve"
      ? args.always ? "allowed-always" : "allowed-once"
      : args.always
      ? "rejected-always"
      : "rejected"
    yield* Console.log(escapeLine(`decided ${id}: ${outcome}`))
  })

/**
 * `send`: one delivery through `AgentClient` from a client-only process; prints the message id,
 * then, with `wait`, the fate (`DeliveryOutcome`'s JSON encoding) as a second line.
 *
 * While it waits, a line on stderr after 5 s and then every 10 s says for what (`send: waiting
 * for a runner of session s1 to answer (none alive, or its database failing) (5 s) …`). After `timeoutMs` in all it stops with one line and
 * exit 3, saying what it waited for and whether the message may still be delivered: nothing was
 * sent while no runner had answered for the session; once the persisted call was made the message
 * may be in the cluster's storage, where a runner takes it later (a retry with the same message id
 * is answered once); with `wait`, the message was delivered and only its fate is unknown.
 *
 * How it stops matters: the call runs in a fiber of its own that is never interrupted. The client
 * is closed instead (its scope, bounded by `CLOSE_WITHIN`), so that the sharding shuts down
 * first: `@effect/cluster` ignores the interruption of a persisted call that a shutdown causes,
 * where interrupting the call's fiber would send the entity an interrupt, and the cluster would
 * store an interrupted reply for the delivery (the answer a retry would then get). A persisted
 * message so stays unprocessed in storage until a runner takes it. Ctrl-C stops the same way.
 */
export const send = (args: SendArgs) =>
  Effect.gen(function*() {
    // Chosen here rather than by the client, so that the timeout line can name it.
    const messageId = args.messageId ?? randomUUID()
    const decides = args.kind === "approve" || args.kind === "reject"
    let waiting: Waiting = "database"
    const waitingFor = () =>
      waiting === "database"
        ? `the PostgreSQL database ${pgWhere(args.pg)}`
        : waiting === "runner"
        ? `a runner of session ${args.session} to answer (none alive, or its database failing)`
        : waiting === "delivery"
        ? decides
          ? `session ${args.session} to record the decision on question ${args.text}`
          : `session ${args.session} to acknowledge message ${messageId}`
        : `the fate of message ${messageId}`
    const scope = yield* Scope.make()
    const call = yield* Effect.forkDaemon(deliver(args, messageId, scope, (w) => (waiting = w)))
    // Each line says how long it has waited so far: 5 s, 15 s, … (the schedule's figures).
    const progress = yield* Effect.fork(Effect.zipRight(
      Effect.sleep(PROGRESS_AFTER),
      Effect.iterate(Duration.toMillis(PROGRESS_AFTER), {
        while: () => true,
        body: (ms) =>
          Console.error(escapeLine(`send: waiting for ${waitingFor()} (${seconds(ms)}) …`)).pipe(
            Effect.zipRight(Effect.sleep(PROGRESS_EVERY)),
            Effect.as(ms + Duration.toMillis(PROGRESS_EVERY))
          )
      })
    ))
    const close = Scope.close(scope, Exit.void).pipe(Effect.disconnect, Effect.interruptible, Effect.timeoutOption(CLOSE_WITHIN))
    const done = yield* Fiber.join(call).pipe(
      args.timeoutMs === undefined ? Effect.asSome : Effect.timeoutOption(Duration.millis(args.timeoutMs)),
      Effect.ensuring(Effect.zipRight(Fiber.interrupt(progress), close))
    )
    if (Option.isSome(done)) return
    const after = `send: timed out after ${seconds(args.timeoutMs!)} waiting for ${waitingFor()}`
    return yield* exit(
      3,
      escapeLine(
        waiting === "database" || waiting === "runner"
          ? `${after}; nothing was sent`
          : waiting === "delivery" && decides
          ? `${after}; it may still be recorded (a runner takes it from the cluster's storage): agent-loop pending --pg URL --session ${args.session} shows whether the question is still open`
          : waiting === "delivery"
          ? `${after}; it may still be delivered (a runner takes it from the cluster's storage): the same send with --message-id ${messageId} learns its fate (it is delivered once)`
          : `${after}; the message was delivered (to wait again: the same send with --message-id ${messageId} --wait)`
      )
    )
  }).pipe(Effect.provide(oneLineLogger))
