/**
 * The cluster commands of the `agent-loop` CLI (§21; `main.ts` puts them in the command
 * tree): `runner` and `send`. Their packages are loaded only when they run (`cluster.ts` is a
 * dynamic import, a chunk of the bundle).
 *
 * Decisions:
 * - `runner --pg URL [--host H] [--port P] [--listen-host H] [--table-prefix P] [provider flags,
 *   compaction flags and --max-steps, as `run`] [--instructions TEXT] [--health-check MS] [--lock-refresh MS]
 *   [--lock-expiry MS] [--message-poll MS] [--max-idle MS] [--ask TOOL]… [--subagent] [--subagent-fork]
 *   [--mcp-config FILE]` runs `AgentRunner.layer`: the model of
 *   the provider flags (default offline), the offline tools `run` gives (`wait`, `clock`,
 *   `read_file` in the working directory; those `--ask` names ask for approval, §26), with
 *   `--subagent`/`--subagent-fork` also the sub-agent tools of `run` (`subagentFlag.ts`, §27: a
 *   child with the same model and tools; its session in the same database, §21 rule 9), with
 *   `--mcp-config FILE` the tools of that file's MCP servers (§28; `commands/mcpFlag.ts`:
 *   connected once by the runner before it serves, shared by all its sessions; their calls ask
 *   for approval, answered with `send --approve`, unless the file says otherwise), the sharding defaults of `AgentRunner.defaults` unless
 *   a flag says otherwise. `--host` (else `AGENT_LOOP_RUNNER_HOST`, else 127.0.0.1) is the address
 *   other processes reach it at, `--port` (else `AGENT_LOOP_RUNNER_PORT`, else 7431: `defaultPort`) its port;
 *   `HOST`/`PORT` are never read. Once the runner holds the lock of at least one shard (so it is
 *   registered, listening and serving) it prints exactly one line on stdout, `runner ready
 *   <host>:<port>`; everything else (log lines: one line each, `storeFailures.ts`) goes to stderr.
 *   SIGTERM and SIGINT stop it gracefully (its shards released, its agents released with their
 *   inboxes kept, the runner unregistered) and it exits 0. An unreachable PostgreSQL, a database
 *   the role may not use (no CREATE on the schema, statements timing out: the server's message),
 *   a port in use or a session store that cannot be built: one line on stderr, exit 2.
 * - `send --pg URL --session ID (--followup TEXT | --steer TEXT | --inject TEXT) [--message-id ID]
 *   [--source-plugin NAME] [--wait] [--timeout T] [--table-prefix P]` is a client-only process
 *   (`AgentRunner.layerClient`, no shards): one delivery through `AgentClient`, its message id
 *   printed as one line once durable; with `--wait` then the fate (`AgentClient.outcome`), one
 *   JSON line in `DeliveryOutcome`'s encoding (`{"_tag":"Entered","turn":1,"step":1}`; a dropped
 *   message's fate is printed too, exit 0; an injection's fate comes when a later step takes it, so
 *   `--inject --wait` on an idle session waits for the next followup). `--message-id` makes a
 *   retry idempotent (the session answers a retried id with the delivery it has, and logs
 *   nothing); the same id with other text or source is refused (`DuplicateMessageId`, exit 1). The
 *   session id follows the stores' rule and the cluster's 255-character limit (else exit 2).
 *   `--source-plugin NAME` gives the message the source `{kind:"plugin", plugin: NAME}` (default:
 *   the user; `inject` text `plugin:"cluster"`). `--table-prefix` is accepted for symmetry with
 *   `runner` (a client reads no session table). While it waits (no runner alive, a wrong
 *   database, a session busy with a long turn under `--wait`) it says so on stderr after 5 s and
 *   every 10 s (`send: waiting for a runner of session s1 to answer (none alive, or its database failing) (5 s) …`); `--timeout T` (milliseconds,
 *   or `500ms`, `90s`, `2m`; default 60 s, `0` for no limit) bounds the whole command, after
 *   which it stops with one line saying what it waited for and whether the message may still be
 *   delivered (`cluster.ts`'s `send`), exit 3. Exit 0 on success; 2 for bad arguments (not
 *   exactly one of the three, an empty text, message id or plugin name (empty or only
 *   whitespace), a `--timeout` that is not a duration, a message the agent refuses) or a
 *   PostgreSQL it cannot use; 1 when the cluster or the session fails the call (a store failure,
 *   an unreadable log, a full mailbox, a message storage error: one line naming the error); 3 on
 *   the timeout; 130 on Ctrl-C (which stops as the timeout does).
 * - `send --pg URL --session ID (--approve QID | --reject QID [--reason TEXT]) [--always] [--name
 *   NAME] [--timeout T]` decides an open question (§26) through `AgentClient.approve`/`reject`
 *   and prints `decided QID: OUTCOME` once the decision is durable; exit 4 when the question is
 *   not open (never asked, decided by someone else, closed by a cancel), 2 for a decision flag
 *   without a decision or a delivery flag with one (`--message-id`, `--source-plugin`, `--wait`),
 *   `--reason` with `--approve`, an empty question id, name or reason.
 *
 * @since 0.1.0
 */
import { Command, HelpDoc, Options } from "@effect/cli"
import { Effect, Option } from "effect"
import { isSessionId } from "../internal/store/common.js"
import { escapeLine } from "../internal/terminalText.js"
import * as OfflineTools from "../providers/OfflineTools.js"
import { askOption, checkAsk } from "./commands/askFlag.js"
import { askLater, connectMcp, mcpConfigOption, readMcpServers } from "./commands/mcpFlag.js"
import { subagentNames, subagentOptions } from "./commands/subagentFlag.js"
import { type CliExit, exit } from "./exit.js"
import { otlpOptions, withOtlp } from "./otlp.js"
import { compactionLayer, modelLayer, runOptions } from "./providerFlags.js"

/**
 * `--pg URL` (optional: each command says when it is required).
 *
 * @since 0.1.0
 */
export const pgOption = (description: string) =>
  Options.text("pg").pipe(
    // Checked here, before anything connects: the driver's own error for a URL that is not one
    // names a host it made up (`getaddrinfo ENOTFOUND base`). The message never repeats the URL,
    // which may carry a password.
    Options.mapTryCatch(
      (url) => {
        if (!/^postgres(ql)?:\/\//.test(url)) throw new Error("not a PostgreSQL URL")
        new URL(url)
        return url
      },
      () => HelpDoc.p("--pg: not a PostgreSQL URL (postgres://user[:password]@host[:port]/database)")
    ),
    Options.optional,
    Options.withDescription(description)
  )

/** What an interrupted CLI exits with (`bin.ts`): 130, or 0 once `runner` or `inspect` runs (SIGTERM/SIGINT is its normal stop). */
let interruptCode = 130

/**
 * The exit code of a run of `main` that was interrupted (SIGINT, SIGTERM): 130, except for
 * `runner` and `inspect`, whose normal stop is a signal: 0 once its shutdown is done.
 *
 * @since 0.1.0
 */
export const interruptExitCode = (): number => interruptCode

/** From now on a signal is the command's normal stop: the process exits 0 once its scope has closed. */
export const signalIsNormalStop = (): void => {
  interruptCode = 0
}

const millisOption = (name: string, description: string) =>
  Options.integer(name).pipe(Options.optional, Options.withDescription(`${description} (milliseconds)`))

/** A positive number of milliseconds, or a bad-arguments exit. */
const positiveMs = (name: string, value: Option.Option<number>): Effect.Effect<number | undefined, CliExit> =>
  Option.isNone(value)
    ? Effect.succeed(undefined)
    : value.value > 0
    ? Effect.succeed(value.value)
    : exit(2, `--${name}: must be a positive number of milliseconds`)

/**
 * The runner's port when neither `--port` nor `AGENT_LOOP_RUNNER_PORT` gives one: 7431. Below
 * Linux's ephemeral port range (`net.ipv4.ip_local_port_range`, 32768–60999 by default), where the
 * outgoing connections of any process on the host (a runner's own PostgreSQL connections) take
 * their local ports, so a listener there may find its port taken (EADDRINUSE); and no service we
 * know of registers it.
 *
 * @since 0.1.0
 */
export const defaultPort = 7431

/** The port of `--port` or `AGENT_LOOP_RUNNER_PORT`, else `defaultPort`. */
const runnerPort = (flag: Option.Option<number>): Effect.Effect<number, CliExit> => {
  const env = process.env["AGENT_LOOP_RUNNER_PORT"]
  const port = Option.isSome(flag) ? flag.value : env === undefined || env === "" ? defaultPort : Number(env)
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    return exit(
      2,
      Option.isSome(flag)
        ? `--port: not a TCP port (1-65535): ${port}`
        : `AGENT_LOOP_RUNNER_PORT: not a TCP port (1-65535): ${escapeLine(env ?? "")}`
    )
  }
  return Effect.succeed(port)
}

/**
 * `runner --pg URL …` (§21): a runner process of the cluster whose state is in `URL`
 * (`AgentRunner.layer`), serving sessions with the model of the provider flags and the offline
 * tools of `run`. See the module's comment for the ready line, the signals and the exit codes.
 */
export const runnerCommand = Command.make(
  "runner",
  {
    pg: pgOption("the PostgreSQL database of the cluster (postgres://…): sessions, shard locks, messages"),
    host: Options.text("host").pipe(
      Options.optional,
      Options.withDescription(
        "the address other processes reach this runner at (default $AGENT_LOOP_RUNNER_HOST, else 127.0.0.1)"
      )
    ),
    port: Options.integer("port").pipe(
      Options.optional,
      Options.withDescription(`the runner's TCP port (default $AGENT_LOOP_RUNNER_PORT, else ${defaultPort})`)
    ),
    listenHost: Options.text("listen-host").pipe(
      Options.optional,
      Options.withDescription("the address to listen on (default: --host), e.g. 0.0.0.0")
    ),
    tablePrefix: Options.text("table-prefix").pipe(
      Options.optional,
      Options.withDescription("the session store's table prefix (default agent_loop_)")
    ),
    instructions: Options.text("instructions").pipe(Options.optional, Options.withDescription("the agents' instructions")),
    ...runOptions,
    ask: askOption,
    ...subagentOptions,
    mcpConfig: mcpConfigOption,
    ...otlpOptions,
    healthCheck: millisOption("health-check", "how often a runner pings the others (default 2000)"),
    lockRefresh: millisOption("lock-refresh", "the most time between shard lock refreshes (default 2500)"),
    lockExpiry: millisOption("lock-expiry", "shard lock expiration (default 8000)"),
    messagePoll: millisOption("message-poll", "how often the runner reads unprocessed messages from storage (default 1000)"),
    maxIdle: millisOption("max-idle", "how long an idle session stays activated before it is passivated (default 300000)")
  },
  (options) =>
    Effect.gen(function*() {
      if (Option.isNone(options.pg)) return yield* exit(2, "runner: --pg URL is required (the cluster's PostgreSQL database)")
      const envHost = process.env["AGENT_LOOP_RUNNER_HOST"]
      const host = Option.getOrElse(options.host, () => envHost === undefined || envHost === "" ? "127.0.0.1" : envHost)
      if (host.trim() === "") return yield* exit(2, "--host: the address is empty")
      const port = yield* runnerPort(options.port)
      const healthCheck = yield* positiveMs("health-check", options.healthCheck)
      const lockRefresh = yield* positiveMs("lock-refresh", options.lockRefresh)
      const lockExpiry = yield* positiveMs("lock-expiry", options.lockExpiry)
      const messagePoll = yield* positiveMs("message-poll", options.messagePoll)
      const maxIdle = yield* positiveMs("max-idle", options.maxIdle)
      const model = yield* modelLayer(options)
      const compaction = yield* compactionLayer(options)
      const servers = yield* readMcpServers(options.mcpConfig)
      const toolNames = [...(yield* OfflineTools.all()).map((tool) => tool.name), ...subagentNames(options)]
      yield* checkAsk(options.ask, toolNames, askLater(servers))
      const { runner } = yield* Effect.promise(() => import("./cluster.js"))
      // The servers live as long as the runner (closed after its sessions are released).
      const mcp = yield* connectMcp("runner", servers, options.ask, toolNames)
      // From here a signal is the runner's normal stop: its scope closes (shards released,
      // agents released, the runner unregistered), then the process exits 0.
      signalIsNormalStop()
      yield* runner({
        pg: options.pg.value,
        host,
        port,
        listenHost: Option.getOrUndefined(options.listenHost),
        tablePrefix: Option.getOrUndefined(options.tablePrefix),
        instructions: Option.getOrUndefined(options.instructions),
        maxSteps: options.maxSteps,
        maxIdleMs: maxIdle,
        sharding: {
          runnerHealthCheckInterval: healthCheck,
          shardLockRefreshInterval: lockRefresh,
          shardLockExpiration: lockExpiry,
          entityMessagePollInterval: messagePoll
        },
        model,
        compaction,
        ask: options.ask,
        subagent: options.subagent,
        subagentFork: options.subagentFork,
        toolsets: mcp === undefined ? undefined : [mcp.toolset],
        onReady: () => {}
      })
    }).pipe(Effect.scoped, withOtlp("runner", options.otlpEndpoint))
).pipe(
  Command.withDescription("Run a runner of an agent cluster on PostgreSQL (§21): serves sessions until SIGTERM/SIGINT.")
)

/**
 * How long `send` waits in all by default before it gives up (exit 3): 60 s, well above a
 * failover (`AgentRunner`'s module comment) and a cold client's first delivery.
 *
 * @since 0.1.0
 */
export const defaultSendTimeoutMs = 60_000

/** `--timeout`'s value in milliseconds: `1500`, `500ms`, `90s`, `2m` (0: no limit); undefined when it is none of these. */
const durationMs = (text: string): number | undefined => {
  const m = /^(\d+)(ms|s|m)?$/.exec(text.trim())
  if (m === null) return undefined
  const value = Number(m[1]) * (m[2] === "s" ? 1000 : m[2] === "m" ? 60_000 : 1)
  return Number.isSafeInteger(value) ? value : undefined
}

/**
 * `send --pg URL --session ID (--followup|--steer|--inject TEXT) …` (§21): one delivery
 * from a client-only process (`AgentRunner.layerClient`); prints the message id, and with
 * `--wait` the fate. See the module's comment for the exit codes.
 */
export const sendCommand = Command.make(
  "send",
  {
    pg: pgOption("the PostgreSQL database of the cluster (postgres://…)"),
    session: Options.text("session").pipe(Options.optional, Options.withDescription("the session id")),
    followup: Options.text("followup").pipe(Options.optional, Options.withDescription("deliver TEXT as a followup")),
    steer: Options.text("steer").pipe(Options.optional, Options.withDescription("deliver TEXT as steering")),
    inject: Options.text("inject").pipe(Options.optional, Options.withDescription("deliver TEXT as injected context")),
    approve: Options.text("approve").pipe(
      Options.withPseudoName("QID"),
      Options.optional,
      Options.withDescription("allow the call that open question QID is about (§26; agent-loop pending lists them)")
    ),
    reject: Options.text("reject").pipe(
      Options.withPseudoName("QID"),
      Options.optional,
      Options.withDescription("refuse the call that open question QID is about: it gets a DENIED result (§26)")
    ),
    reason: Options.text("reason").pipe(
      Options.optional,
      Options.withDescription("with --reject: why, for the model (in the call's DENIED result)")
    ),
    always: Options.boolean("always").pipe(
      Options.withDescription("with --approve or --reject: the same answer for every later call of that tool in the session")
    ),
    name: Options.text("name").pipe(
      Options.optional,
      Options.withDescription("with --approve or --reject: who decides (logged as {kind:\"person\", name})")
    ),
    messageId: Options.text("message-id").pipe(
      Options.optional,
      Options.withDescription("the message's id (default: a random UUID); a retry with the same id is answered once")
    ),
    sourcePlugin: Options.text("source-plugin").pipe(
      Options.optional,
      Options.withDescription(
        "the message's source: {kind:\"plugin\", plugin: NAME} (default: user; for --inject plugin \"cluster\")"
      )
    ),
    wait: Options.boolean("wait").pipe(Options.withDescription("then wait for the message's fate and print it (JSON)")),
    timeout: Options.text("timeout").pipe(
      Options.optional,
      Options.withDescription(
        "give up after this long in all, exit 3: milliseconds, or with a unit (500ms, 90s, 2m); 0 for no limit (default 60s)"
      )
    ),
    tablePrefix: Options.text("table-prefix").pipe(
      Options.optional,
      Options.withDescription("accepted as the runner's (a client reads no session table)")
    )
  },
  (options) =>
    Effect.gen(function*() {
      if (Option.isNone(options.pg)) return yield* exit(2, "send: --pg URL is required (the cluster's PostgreSQL database)")
      if (Option.isNone(options.session) || options.session.value === "") {
        return yield* exit(2, "send: --session ID is required")
      }
      // The stores' id rule, and the cluster's: its entity ids are at most 255 characters.
      if (!isSessionId(options.session.value) || options.session.value.length > 255) {
        return yield* exit(
          2,
          `send: invalid session id ${
            JSON.stringify(options.session.value)
          } ([A-Za-z0-9_-][A-Za-z0-9._-]*, at most 255 characters)`
        )
      }
      // Blank (empty or only whitespace), as the texts: an id or a plugin name nobody could read back.
      if (Option.isSome(options.messageId) && options.messageId.value.trim() === "") {
        return yield* exit(2, "send: --message-id: the id is empty")
      }
      if (Option.isSome(options.sourcePlugin) && options.sourcePlugin.value.trim() === "") {
        return yield* exit(2, "send: --source-plugin: the plugin name is empty")
      }
      const given = (["followup", "steer", "inject", "approve", "reject"] as const).flatMap((kind) => {
        const text = options[kind]
        return Option.isSome(text) ? [{ kind, text: text.value }] : []
      })
      if (given.length !== 1) {
        return yield* exit(
          2,
          "send: give exactly one of --followup TEXT, --steer TEXT, --inject TEXT, --approve QID, --reject QID"
        )
      }
      const { kind, text } = given[0]!
      const decides = kind === "approve" || kind === "reject"
      if (text.trim() === "") return yield* exit(2, `send: --${kind}: the ${decides ? "question id" : "text"} is empty`)
      // The flags of the other kind of send: refused rather than ignored.
      const misplaced = decides
        ? (
          [
            ["message-id", Option.isSome(options.messageId)],
            ["source-plugin", Option.isSome(options.sourcePlugin)],
            ["wait", options.wait]
          ] as const
        ).find(([, given]) => given)
        : (
          [
            ["always", options.always],
            ["name", Option.isSome(options.name)],
            ["reason", Option.isSome(options.reason)]
          ] as const
        ).find(([, given]) => given)
      if (misplaced !== undefined) {
        return yield* exit(
          2,
          decides
            ? `send: --${misplaced[0]} goes with --followup, --steer or --inject, not --${kind}`
            : `send: --${misplaced[0]} goes with --approve or --reject`
        )
      }
      if (kind === "approve" && Option.isSome(options.reason)) return yield* exit(2, "send: --reason goes with --reject")
      if (Option.isSome(options.name) && options.name.value.trim() === "") {
        return yield* exit(2, "send: --name: the name is empty")
      }
      if (Option.isSome(options.reason) && options.reason.value.trim() === "") {
        return yield* exit(2, "send: --reason: the reason is empty")
      }
      const timeoutMs = Option.isNone(options.timeout) ? defaultSendTimeoutMs : durationMs(options.timeout.value)
      if (timeoutMs === undefined) {
        return yield* exit(
          2,
          `send: --timeout: not a duration (milliseconds, or a number with ms, s or m: 90s, 2m; 0 for no limit): ${
            JSON.stringify(options.timeout.pipe(Option.getOrElse(() => "")))
          }`
        )
      }
      const { send } = yield* Effect.promise(() => import("./cluster.js"))
      yield* send({
        pg: options.pg.value,
        session: options.session.value,
        kind,
        text,
        always: options.always,
        name: Option.getOrUndefined(options.name),
        reason: Option.getOrUndefined(options.reason),
        messageId: Option.getOrUndefined(options.messageId),
        sourcePlugin: Option.getOrUndefined(options.sourcePlugin),
        wait: options.wait,
        tablePrefix: Option.getOrUndefined(options.tablePrefix),
        timeoutMs: timeoutMs === 0 ? undefined : timeoutMs
      })
    })
).pipe(
  Command.withDescription(
    "Send one followup, steer or inject to a session of an agent cluster, or a decision on one of its open questions (§21, §26)."
  )
)
