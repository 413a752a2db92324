/**
 * Runner processes and client-only processes of an agent cluster (§21): `layer` starts a
 * runner (sharding over PostgreSQL storage, runner-to-runner transport over TCP sockets from
 * `@effect/platform-node`, the `AgentEntity` registered), `layerClient` a process that only sends
 * (no shards). Both provide `AgentClient`. The model is the caller's (`Model` stays in the
 * requirements), as are the agent's tools and instructions (options).
 *
 * Sharding settings (`ShardingSettings`, defaults in `defaults`) are chosen so that a runner that
 * dies (SIGKILL) has its sessions answering again on another runner within about 10 s without
 * flapping under load: the runner health check runs every 2 s (a dead runner fails its pings in
 * about 3 s; the cluster's 1-minute default gave 15–37 s). The health check is a cluster
 * singleton: when the dead runner was the one running it, nobody pings until its runner row
 * expires with `shardLockExpiration` (the runners' heartbeats are the shard lock refreshes), so
 * the expiry bounds the failover: refreshed every 2.5 s, expiring after 8 s (with 5 s and 15 s a
 * runner killed while it held the health check came back after 12.5 s; a 1 s refresh made a loaded
 * runner drop all its shards). Assignments are re-read every 2 s and message storage is polled
 * every 1 s (a cold client's first message).
 *
 * A runner that is paused (SIGSTOP, a frozen VM, a partition) rather than dead fails no ping at
 * the socket level: the kernel accepts connections and data for it. Once its PostgreSQL
 * connections end (and with them its advisory shard locks), its runner row expiring bounds the
 * failover as above: measured 9.1–9.5 s from the SIGSTOP to a `status` or a new `send` answered by
 * another runner (3 runners, 2 cores). A call that went to the paused runner waited for the rpc
 * client's own ping timeout (a ping every 10 s, failing at the second unanswered one): 19–21 s.
 * So every socket to a runner is pinged every second and dropped after 4 s without any data
 * (`answering`); its calls then go to the shard's new owner, or wait for their reply in storage.
 *
 * Message storage (`cluster_messages`, `cluster_replies`) grows with every persisted message: a
 * cluster singleton deletes processed messages and their replies older than `retention` (default
 * 1 hour). A retry older than that is still answered once, by the entity (its id is in the log).
 *
 * PostgreSQL logs each failed statement as an ERROR. A start logs none, except on a fresh database
 * the migrator's probe of its own table (`relation "cluster_migrations" does not exist`, and the
 * session store's `agent_loop_migrations`), once per database; the cluster's probe for the tables
 * of its old releases, which failed on every start, runs only when they exist (`oldTablesProbeGuarded`).
 *
 * No environment variable is read (the cluster's `ShardingConfig.layerFromEnv` reads `HOST` and
 * `PORT`; it is not used): a CLI maps its own flags (`AGENT_LOOP_RUNNER_*`) to these options.
 *
 * @since 0.1.0
 */
import * as MachineId from "@effect/cluster/MachineId"
import { RunnerAddress } from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import { RunnerStorage } from "@effect/cluster/RunnerStorage"
import { Sharding } from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as Snowflake from "@effect/cluster/Snowflake"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import * as Socket from "@effect/platform/Socket"
import type { SocketServerError } from "@effect/platform/SocketServer"
import * as RpcClient from "@effect/rpc/RpcClient"
import * as RpcMessage from "@effect/rpc/RpcMessage"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Clock, Duration, Effect, Layer, Option, Predicate, Redacted, Schedule, type Scope } from "effect"
import type { Model } from "../Model.js"
import type { SessionStoreError } from "../SessionLog.js"
import * as SqlSessionStore from "../SqlSessionStore.js"
import { type AgentClient, layer as clientLayer } from "./AgentClient.js"
import * as AgentEntity from "./AgentEntity.js"

/**
 * The sharding settings a deployment may tune (the cluster's `ShardingConfig` names; durations
 * as `Duration.DurationInput`). Every process of a cluster must use the same `shardsPerGroup`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ShardingSettings {
  /** Shards per group (default 300; the same on every process). */
  readonly shardsPerGroup?: number | undefined
  /** Most time between shard lock refreshes (default 2.5 s; effective: at most a third of the expiration). */
  readonly shardLockRefreshInterval?: Duration.DurationInput | undefined
  /** Shard lock expiration, the backstop when the health check cannot decide (default 8 s). */
  readonly shardLockExpiration?: Duration.DurationInput | undefined
  /** Row locks instead of PostgreSQL advisory locks (default false: advisory locks go with a dead runner's connection). */
  readonly shardLockDisableAdvisory?: boolean | undefined
  /** How often one runner pings the others (default 2 s). */
  readonly runnerHealthCheckInterval?: Duration.DurationInput | undefined
  /** How often a process re-reads the runners and shard assignments (default 2 s). */
  readonly refreshAssignmentsInterval?: Duration.DurationInput | undefined
  /** How often a runner reads unprocessed messages from storage (default 1 s). */
  readonly entityMessagePollInterval?: Duration.DurationInput | undefined
  /** How often a waiting client reads replies from storage (default 200 ms). */
  readonly entityReplyPollInterval?: Duration.DurationInput | undefined
  /** How long a stopping entity may take (default 15 s). */
  readonly entityTerminationTimeout?: Duration.DurationInput | undefined
}

/**
 * The defaults of `ShardingSettings` (see the module's comment for why).
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaults = {
  shardsPerGroup: 300,
  shardLockRefreshInterval: Duration.millis(2500),
  shardLockExpiration: Duration.seconds(8),
  shardLockDisableAdvisory: false,
  runnerHealthCheckInterval: Duration.seconds(2),
  refreshAssignmentsInterval: Duration.seconds(2),
  entityMessagePollInterval: Duration.seconds(1),
  entityReplyPollInterval: Duration.millis(200),
  entityTerminationTimeout: Duration.seconds(15)
} as const satisfies ShardingSettings

/**
 * Where the cluster's state is: `pg`, the PostgreSQL URL (sessions, shard locks, runners,
 * messages); `tablePrefix`, the session store's table prefix (`SqlSessionStore`); `clusterPrefix`,
 * the cluster's (default `"cluster"`: `cluster_messages`, …); `sharding`, the settings.
 *
 * @since 0.1.0
 * @category models
 */
export interface StorageOptions {
  readonly pg: string | Redacted.Redacted<string>
  readonly tablePrefix?: string | undefined
  readonly clusterPrefix?: string | undefined
  readonly sharding?: ShardingSettings | undefined
}

/**
 * Options of a runner: storage, the address other processes reach it at (`host`, `port`), where it
 * listens (default: the same), the entity's options (instructions, tools, `maxIdleTime`, …; a
 * `Subagent.tool` among the tools puts its children's sessions in the runner's store, §21 rule 9), and
 * the retention of processed cluster messages (`retention`, default 1 hour; `pruneInterval`,
 * default 5 minutes).
 *
 * @since 0.1.0
 * @category models
 */
export interface RunnerOptions extends StorageOptions, AgentEntity.EntityOptions {
  readonly host: string
  readonly port: number
  readonly listenHost?: string | undefined
  readonly listenPort?: number | undefined
  readonly retention?: Duration.DurationInput | undefined
  readonly pruneInterval?: Duration.DurationInput | undefined
}

/**
 * What starting a runner can fail with: PostgreSQL (connecting, migrations: a role without
 * CREATE on the schema, a statement timeout, as the `SqlError` with the server's message, also
 * where the cluster's storage would die with it), the listening socket, the session store.
 *
 * @since 0.1.0
 * @category errors
 */
export type RunnerError = SqlError | SocketServerError | SessionStoreError

const configOf = (
  options: StorageOptions,
  address: Option.Option<{ host: string; port: number }>,
  listen?: { host: string; port: number }
) =>
  ShardingConfig.layer({
    ...defaults,
    ...Object.fromEntries(Object.entries(options.sharding ?? {}).filter(([, v]) => v !== undefined)),
    runnerAddress: Option.map(address, (a) => RunnerAddress.make({ host: a.host, port: a.port })),
    runnerListenAddress: listen === undefined ? Option.none() : Option.some(RunnerAddress.make(listen))
  })

/**
 * How often this process pings each runner it has a socket to, and how long such a socket may
 * stay silent (no answer, not even to the pings) before it is dropped: see `answering`.
 */
const PING_EVERY = Duration.seconds(1)
const SILENT_AT_MOST = Duration.seconds(4)

/**
 * `socket` (to another runner), dropped with a read error once nothing has arrived on it for
 * `SILENT_AT_MOST` while it is pinged every `PING_EVERY` (an rpc `Ping`, which a live runner answers
 * at once with a `Pong`). A runner that is paused (SIGSTOP, a frozen VM) or cut off keeps its
 * sockets open: the kernel accepts connections and data for it. The rpc client's own pinger
 * (every 10 s, failing at the second unanswered ping) took 10–20 s to notice, and until then every
 * call to that runner waited, a `status` or a delivery of a session whose shard had already moved:
 * a `send` after the SIGSTOP of a session's owner answered after 21 s where the shard lock expiry
 * gives about 10. (A socket `timeout` option does not help: Node only emits an event, which
 * nothing handles.) Dropped, the socket fails the calls in flight (`RunnerUnavailable`: a
 * persisted call then waits for its reply in storage, another is sent again to the shard's owner);
 * a runner whose event loop is blocked for 4 s is treated the same, and reconnected to after.
 * The ping is encoded once: a msgpack message carries its own record definitions, so it can be
 * written between the rpc client's.
 */
const answering = (socket: Socket.Socket, ping: Uint8Array | string): Effect.Effect<Socket.Socket, never, Scope.Scope> =>
  Effect.map(socket.writer, (write) => {
    const silentAtMost = Duration.toMillis(SILENT_AT_MOST)
    const guarded =
      <H>(run: (handler: H, options?: { readonly onOpen?: Effect.Effect<void> | undefined }) => Effect.Effect<void, any, any>) =>
      (handler: H, options?: { readonly onOpen?: Effect.Effect<void> | undefined }) =>
        Effect.suspend(() => {
          let heard = Date.now()
          const open = Effect.unsafeMakeLatch(false)
          const watch = Effect.zipRight(
            open.await,
            Effect.suspend(() =>
              Date.now() - heard >= silentAtMost
                ? Effect.fail(
                  new Socket.SocketGenericError({
                    reason: "Read",
                    cause: new Error(`no answer for ${Duration.format(SILENT_AT_MOST)}`)
                  })
                )
                : write(ping)
            ).pipe(Effect.delay(PING_EVERY), Effect.forever)
          )
          const onData = (data: unknown) => {
            heard = Date.now()
            return (handler as (data: unknown) => unknown)(data)
          }
          return Effect.raceFirst(
            run(onData as H, {
              onOpen: Effect.zipRight(
                Effect.sync(() => {
                  heard = Date.now()
                  open.unsafeOpen()
                }),
                options?.onOpen ?? Effect.void
              )
            }),
            watch
          )
        })
    return Socket.Socket.of({
      [Socket.TypeId]: Socket.TypeId,
      run: guarded(socket.run) as Socket.Socket["run"],
      runRaw: guarded(socket.runRaw) as Socket.Socket["runRaw"],
      writer: socket.writer
    })
  })

/** TCP sockets to other runners (msgpack), as `@effect/platform-node`'s NodeClusterSocket makes them, watched by `answering`. */
const clientProtocol = Layer.effect(
  Runners.RpcClientProtocol,
  Effect.map(RpcSerialization.RpcSerialization, (serialization) => {
    const ping = serialization.unsafeMake().encode(RpcMessage.constPing)
    return (address) =>
      Effect.flatMap(
        Effect.orDie(NodeSocket.makeNet({ openTimeout: 1000, host: address.host, port: address.port })),
        (socket) =>
          Effect.flatMap(ping === undefined ? Effect.succeed(socket) : answering(socket, ping), (watched) =>
            RpcClient.makeProtocolSocket().pipe(
              Effect.provideService(Socket.Socket, watched),
              Effect.provideService(RpcSerialization.RpcSerialization, serialization)
            ))
      )
  })
)

/**
 * `layer` built while this process holds a PostgreSQL advisory lock (session-level, on a reserved
 * connection, released as soon as the layer is built): the migrations of the cluster's tables and
 * of the session store run one process at a time. Runners started together on a fresh database
 * otherwise ran `CREATE TABLE IF NOT EXISTS` of the same table at once, and PostgreSQL failed one
 * of them (duplicate_table, or a unique_violation of `pg_type`): about one start in two of three
 * runners started together failed so. A process that dies holding the lock loses it with its
 * connection.
 */
const oneAtATime = <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E | SqlError, R | SqlClient.SqlClient> =>
  Layer.scopedContext(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const scope = yield* Effect.scope
    return yield* Effect.scoped(Effect.gen(function*() {
      const connection = yield* sql.reserve
      yield* Effect.acquireRelease(
        connection.executeRaw("SELECT pg_advisory_lock(hashtext($1))", [MIGRATION_LOCK]),
        () => Effect.ignore(connection.executeRaw("SELECT pg_advisory_unlock(hashtext($1))", [MIGRATION_LOCK]))
      )
      return yield* Layer.buildWithScope(layer, scope)
    }))
  }))

const MIGRATION_LOCK = "effect-agent-loop/migrations"

/**
 * The `SqlError` a defect is (or, a failed migration's `MigrationError`, wraps): the cluster's
 * storage dies with it while it is built (its migrations and its shard lock connection are
 * `Effect.orDie`), where a role without CREATE on the schema or a statement timeout would
 * otherwise end a process with a bare stack trace.
 */
const sqlErrorOf = (defect: unknown): Option.Option<SqlError> =>
  defect instanceof SqlError
    ? Option.some(defect)
    : Predicate.isTagged(defect, "MigrationError") && Predicate.hasProperty(defect, "cause") &&
        defect.cause instanceof SqlError
    ? Option.some(defect.cause)
    : Option.none()

/** `layer`, with an `SqlError` defect raised while it is built made the failure it is (see `sqlErrorOf`). */
const sqlDefectsAsFailures = <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E | SqlError, R> =>
  Layer.catchAllCause(
    layer,
    (cause): Layer.Layer<A, E | SqlError> =>
      Option.match(Cause.find(cause, (c) => Cause.isDieType(c) ? sqlErrorOf(c.defect) : Option.none()), {
        onNone: () => Layer.failCause(cause),
        onSome: (error) => Layer.fail(error)
      })
  )

/**
 * The cluster's runner storage with its shard lock operations (`acquire`, `refresh`, `release`,
 * `releaseAll`) one at a time. `SqlRunnerStorage` runs them all on one reserved PostgreSQL
 * connection, and the sharding calls them concurrently (a release per shard, each in its own fiber,
 * when a runner joins and shards move; refreshes meanwhile): `pg` queued them on its client and
 * printed "DeprecationWarning: Calling client.query() when the client is already executing a query
 * is deprecated" (pg 8; pg 9 drops that queue). Worse, `@effect/sql-pg` cancels an interrupted query
 * with `pg_cancel_backend` of the connection, which cancels whatever that connection runs, another
 * fiber's query when the interrupted one was still queued. A semaphore keeps the order and the
 * latency of pg's queue (its timeouts, the sharding's, count the wait as they counted the queue).
 */
const lockOperationsOneAtATime = Layer.effect(
  RunnerStorage,
  Effect.gen(function*() {
    const storage = yield* RunnerStorage
    const one = (yield* Effect.makeSemaphore(1)).withPermits(1)
    return RunnerStorage.of({
      ...storage,
      acquire: (address, shardIds) => one(storage.acquire(address, shardIds)),
      refresh: (address, shardIds) => one(storage.refresh(address, shardIds)),
      release: (address, shardId) => one(storage.release(address, shardId)),
      releaseAll: (address) => one(storage.releaseAll(address))
    })
  })
)

/**
 * The SQL client of `SqlRunnerStorage`, with its probe for the tables of older releases guarded.
 * Each start ran `SELECT shard_id FROM "cluster_shards" LIMIT 1` (to drop `cluster_shards` and
 * `cluster_runners` where an old release left them; "remove in next major version"), which fails
 * on every database this runtime made, and PostgreSQL logs every failed statement: an ERROR
 * `relation "cluster_shards" does not exist` in the server's log for each runner and each `send`.
 * Here the probe runs only when `to_regclass` finds the table; otherwise it fails at once, which
 * means to the storage what the server's error meant (no old tables). Every other statement is
 * the client's own. (On a fresh database the migrations' `select '<prefix>_migrations'::regclass`
 * fails once per set of migrations, `cluster_` and the session store's: the migrator's way to
 * find that its table is missing; that ERROR is logged once, not per start.)
 */
const oldTablesProbeGuarded = Layer.effect(
  SqlClient.SqlClient,
  Effect.map(SqlClient.SqlClient, (client) => {
    const sql = client.withoutTransforms()
    const isProbe = (strings: unknown, args: ReadonlyArray<unknown>): args is readonly [{ readonly value: string }] =>
      Array.isArray(strings) && "raw" in strings && strings.length === 2 && strings[0] === "SELECT shard_id FROM " &&
      strings[1] === " LIMIT 1" && Predicate.isTagged(args[0], "Identifier") && Predicate.hasProperty(args[0], "value") &&
      typeof args[0].value === "string"
    const guarded = function(strings: unknown, ...args: Array<unknown>): unknown {
      if (!isProbe(strings, args)) return (sql as (strings: unknown, ...args: Array<unknown>) => unknown)(strings, ...args)
      const quoted = `"${args[0].value.replaceAll("\"", "\"\"")}"`
      return Effect.flatMap(
        sql<{ present: boolean }>`SELECT to_regclass(${quoted}) IS NOT NULL AS present`,
        (rows) =>
          rows[0]?.present === true
            ? sql(strings as TemplateStringsArray, ...args)
            : Effect.fail(new SqlError({ message: `relation ${quoted} does not exist` }))
      )
    }
    const copy = Object.assign(guarded, sql, { withoutTransforms: () => copy, safe: undefined as unknown })
    copy.safe = copy
    return copy as unknown as SqlClient.SqlClient
  })
)

/** PostgreSQL client, message and runner storage (after the config). */
const storage = (options: StorageOptions) =>
  sqlDefectsAsFailures(oneAtATime(Layer.mergeAll(
    SqlMessageStorage.layerWith({ prefix: options.clusterPrefix }),
    lockOperationsOneAtATime.pipe(
      Layer.provide(SqlRunnerStorage.layerWith({ prefix: options.clusterPrefix })),
      Layer.provide(oldTablesProbeGuarded)
    )
  )))

const pgLayer = (options: StorageOptions) =>
  PgClient.layer({ url: typeof options.pg === "string" ? Redacted.make(options.pg) : options.pg })

/** Deletes processed messages (and their replies) older than `retention`; one runner of the cluster does it. */
const pruner = (options: RunnerOptions) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const sharding = yield* Sharding
    const sql = yield* SqlClient.SqlClient
    const prefix = options.clusterPrefix ?? "cluster"
    const messages = sql(`${prefix}_messages`)
    const replies = sql(`${prefix}_replies`)
    const retention = Duration.toMillis(options.retention ?? Duration.hours(1))
    const prune = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      // Snowflake ids carry their time: every id below this one is older than the retention.
      const cutoff = String(Snowflake.make({ timestamp: now - retention, machineId: MachineId.make(0), sequence: 0 }))
      yield* sql`DELETE FROM ${replies} WHERE request_id IN (SELECT id FROM ${messages} WHERE processed AND id < ${cutoff})`
      yield* sql`DELETE FROM ${messages} WHERE processed AND id < ${cutoff}`
    }).pipe(sql.withTransaction, Effect.catchAllCause((cause) => Effect.logWarning("pruning cluster messages failed", cause)))
    yield* sharding.registerSingleton(
      "effect-agent-loop/prune-messages",
      Effect.repeat(prune, Schedule.spaced(options.pruneInterval ?? Duration.minutes(5)))
    )
  }))

/**
 * A runner: sharding over PostgreSQL storage, sockets between runners (listening on
 * `listenHost:listenPort`, default `host:port`), `AgentEntity` registered with `options` (its
 * sessions in `SqlSessionStore` on the same database), processed messages pruned. Provides
 * `AgentClient` (and the `Sharding`). Requires the `Model` the agents use.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { NodeRuntime } from "@effect/platform-node"
 * import { Model, Offline } from "effect-agent-loop"
 * import { AgentRunner } from "effect-agent-loop/cluster"
 *
 * const runner = AgentRunner.layer({ pg: "postgres://localhost/agents", host: "10.0.0.5", port: 7431, instructions: "Be brief." })
 * Layer.launch(runner.pipe(Layer.provide(Model.layer(Offline.make())))).pipe(NodeRuntime.runMain)
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: RunnerOptions): Layer.Layer<AgentClient | Sharding, RunnerError, Model> => {
  const config = configOf(
    options,
    Option.some({ host: options.host, port: options.port }),
    options.listenHost === undefined && options.listenPort === undefined
      ? undefined
      : { host: options.listenHost ?? options.host, port: options.listenPort ?? options.port }
  )
  const server = Layer.unwrapEffect(Effect.map(ShardingConfig.ShardingConfig, (c) => {
    const listen = Option.getOrThrow(Option.orElse(c.runnerListenAddress, () => c.runnerAddress))
    return NodeSocketServer.layer({ host: listen.host, port: listen.port })
  }))
  const health = RunnerHealth.layerPing.pipe(Layer.provide(Runners.layerRpc), Layer.provide(clientProtocol))
  const sharding = SocketRunner.layer.pipe(
    Layer.provide([server, clientProtocol, health]),
    Layer.provide(storage(options))
  )
  // The session logs on the cluster's own PostgreSQL client. A runner that the shard lock made an
  // entity's owner takes its session over (`writers: "takeover"`): the former owner, if it is
  // only paused, is fenced by the new writer epoch (§3.3).
  const sessions = oneAtATime(SqlSessionStore.layer({ tablePrefix: options.tablePrefix, writers: "takeover" }))
  // An rpc that meets a fenced agent waits two shard lock refreshes (as the cluster computes
  // the refresh: at most a third of the expiration) before it reopens the session: a runner that
  // lost the shard is interrupted by then (AgentEntity's `fencedGrace`).
  const setting = (key: "shardLockRefreshInterval" | "shardLockExpiration") =>
    Duration.decode(options.sharding?.[key] ?? defaults[key])
  const refresh = Duration.min(
    setting("shardLockRefreshInterval"),
    Duration.unsafeDivide(setting("shardLockExpiration"), 3)
  )
  const entity = AgentEntity.layer({ ...options, fencedGrace: options.fencedGrace ?? Duration.times(refresh, 2) })
  const app = Layer.mergeAll(entity, pruner(options), clientLayer).pipe(
    Layer.provide(sessions),
    Layer.provideMerge(sharding)
  )
  return app.pipe(
    Layer.provide(config),
    Layer.provide(RpcSerialization.layerMsgPack),
    Layer.provide(pgLayer(options))
  ) as Layer.Layer<AgentClient | Sharding, RunnerError, Model>
}

/**
 * A client-only process (no shards, no listening socket): `AgentClient` over the cluster whose
 * state is at `options.pg`. Use the same `clusterPrefix` and `shardsPerGroup` as the runners.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClient = (options: StorageOptions): Layer.Layer<AgentClient | Sharding, SqlError> =>
  clientLayer.pipe(
    Layer.provideMerge(SocketRunner.layerClientOnly),
    Layer.provide([clientProtocol, storage(options)]),
    Layer.provide(configOf(options, Option.none())),
    Layer.provide(RpcSerialization.layerMsgPack),
    Layer.provide(pgLayer(options))
  )
