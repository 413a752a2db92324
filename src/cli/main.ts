/**
 * The `agent-loop` command line (§14), built with @effect/cli:
 * `chat [--session ID]`, `run --prompt TEXT`, `transcript FILE [--json]`, `check FILE`,
 * `stats FILE [--json] [--prices FILE]`,
 * `resume FILE [--continue-pending]`, `simulate SCENARIO`, `demo` and `acp` (an ACP agent for
 * editors, §22: `acp/agent.ts`); and, for an agent cluster on
 * PostgreSQL (§21), `runner`, `send`, `transcript --pg URL --session ID [--json]` and
 * `check --pg URL --session ID`.
 *
 * Cluster commands (decisions): `runner` and `send` in `clusterCommands.ts`.
 * - `transcript` and `check` take exactly one of FILE or `--pg URL --session ID` (else exit 2),
 *   reading the session through `SqlSessionStore.layerPg` (`read` only: no writer taken, nothing
 *   fenced; building the store runs its migrations). A session that does not exist exits 2.
 * - None of these load the cluster's packages until they run: `cluster.ts` and
 *   `SqlSessionStore.ts` are dynamic imports (chunks of the bundle), so `--help`, `run` and the
 *   file forms never parse `@effect/cluster`, `@effect/rpc`, `@effect/sql`, `@effect/sql-pg` or `pg`.
 *   A PostgreSQL URL is named in messages as `host:port/db` (never its password).
 *
 * Trace export (§19): `run`, `chat`, `resume`, `simulate` and `runner` take
 * `--otlp-endpoint URL` (and read `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`/`OTEL_EXPORTER_OTLP_ENDPOINT`):
 * the whole command runs under an OTLP/HTTP tracer (`otlp.ts`), loaded only then.
 *
 * Compaction flags (§17) of `run`, `chat`, `resume` and `runner` (`providerFlags.ts`):
 * `--context-window N` gives the agents `Compaction.layer({contextWindow: N, reserve,
 * keepRecentTokens})` from `--compaction-reserve N` and `--keep-recent-tokens N` (defaults of
 * `Compaction.summarize`); without it no policy is provided (no automatic compaction; the chat's
 * `/compact` uses `Compaction.summarize({})`). A value that is not a positive integer, a reserve
 * not below the window, or either of the other two without `--context-window`: exit 2.
 *
 * Exit codes: `chat` exits 0 on `/quit`, 130 on Ctrl-C, 129 when its terminal is gone; `run` exits 0 for `completed` or
 * `max-tokens`, 3 `blocked`, 4 `error`, 130 `aborted` (also on Ctrl-C); `check` exits 1 when an
 * invariant is violated; every command exits 2 for bad arguments, an unreadable log (the error
 * names the line), a missing file, or a session log that cannot be written (`run` and `resume`
 * also when an append fails mid-turn: a full disk, a read-only store, a log deleted or cut under
 * the session; one line on stderr, `storeFailures.ts`).
 *
 * Terminal safety (§23): every line printed here that carries text from a log, a model, a
 * provider or a file name goes through `src/internal/terminalText.ts` at the print site:
 * transcripts through `Transcript.render` (which escapes), one-line messages (error lines,
 * `check`'s violations, warnings, paths) through `escapeLine`, exit messages through
 * `escapeText`. ESC, the other C0/C1 controls, bidi, zero-width and separator characters are
 * shown as `\x1b`, `\u202e`, … and never reach the terminal raw. Under them, `main` prints
 * through `terminalConsole`, which escapes every string (the logger's lines too).
 *
 * @since 0.1.0
 */
import { Args, Command, Options, ValidationError } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import type * as NodeContext from "@effect/platform-node/NodeContext"
import { isPlatformError } from "@effect/platform/Error"
import { Console, Context, Effect, Either, Layer, Option, Queue } from "effect"
import * as Agent from "../Agent.js"
import * as IdGenerator from "../IdGenerator.js"
import * as Inbox from "../Inbox.js"
import { pgWhere } from "../internal/pgUrl.js"
import { repairDrafts, unrepairable, unrepairableMessage } from "../internal/repair.js"
import { fileKind, ownHeader } from "../internal/store/common.js"
import { escapeJson, escapeLine, escapeText, terminalConsole } from "../internal/terminalText.js"
import * as Invariant from "../Invariant.js"
import { UserMessage } from "../Message.js"
import * as Model from "../Model.js"
import * as OfflineTools from "../OfflineTools.js"
import * as Scenario from "../Scenario.js"
import type { SessionEvent, TurnEndReason } from "../SessionEvent.js"
import type * as SessionLog from "../SessionLog.js"
import * as SessionStore from "../SessionStore.js"
import * as Transcript from "../Transcript.js"
import * as Usage from "../Usage.js"
import { interruptExitCode, pgOption, runnerCommand, sendCommand } from "./clusterCommands.js"
import { CliExit, exit } from "./exit.js"
import { loadWith, requirePackages } from "./optional.js"
import { otlpOptions, withOtlp } from "./otlp.js"
import { compactionLayer, modelLayer, providerOptions, runOptions } from "./providerFlags.js"
import { renderStats, statsOf } from "./stats.js"
import { oneLineLogger, watchAppends } from "./storeFailures.js"
import { VERSION } from "./version.js"

export {
  /**
   * A command's requested exit (`exit.ts`).
   *
   * @since 0.1.0
   * @category errors
   */
  CliExit
} from "./exit.js"

/** The CLI's version (`--version`, the ACP agent's `agentInfo`). */

const storeOption = Options.directory("store").pipe(
  Options.withDefault(".agent-loop/sessions"),
  Options.withDescription("directory of the session logs (one <id>.jsonl per session)")
)

/** Exit code of a turn end reason (§14). */
export const exitCodeOf = (reason: TurnEndReason | undefined): number => {
  switch (reason?.kind) {
    case "blocked":
      return 3
    case "error":
      return 4
    case "aborted":
    case "interrupted":
      return 130
    default:
      return 0
  }
}

const lastTurnEnd = (events: ReadonlyArray<SessionEvent>): TurnEndReason | undefined => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!
    if (e.type === "turn/end") return (e.data as { reason: TurnEndReason }).reason
  }
  return undefined
}

const printTranscript = (events: ReadonlyArray<SessionEvent>) =>
  Console.log(Transcript.render(Transcript.fromEvents(events)).trimEnd())

/**
 * Prints the transcript of a live log as it grows: each call prints the lines that are new
 * since the last call (rendering is prefix-stable: appending events only appends lines). The
 * events go through one `Transcript.projector`, without its `end()`: a compaction still running
 * is printed once it ends, never as "no end in the log".
 */
const livePrinter = (events: () => ReadonlyArray<SessionEvent>) => {
  let printed = 0
  let projected = 0
  const projector = Transcript.projector()
  const entries: Array<Transcript.Entry> = []
  return Effect.suspend(() => {
    const all = events()
    for (; projected < all.length; projected++) for (const entry of projector.push(all[projected]!)) entries.push(entry)
    const text = Transcript.render(entries).trimEnd()
    const lines = text === "" ? [] : text.split("\n")
    const fresh = lines.slice(printed)
    printed = lines.length
    return fresh.length === 0 ? Effect.void : Console.log(fresh.join("\n"))
  })
}

/**
 * `run --prompt TEXT`: one followup on a new session of the JSONL store. Prints the transcript
 * as the log grows (model retries on stderr), then the log's path, also when interrupted
 * (Ctrl-C cancels the turn first); exits with the code of the turn's end reason.
 */
const run = Command.make(
  "run",
  {
    prompt: Options.text("prompt").pipe(Options.withDescription("the prompt to send")),
    ...runOptions,
    ...otlpOptions,
    store: storeOption
  },
  (options) =>
    Effect.gen(function*() {
      if (options.prompt.trim() === "") return yield* exit(2, "--prompt: the prompt is empty")
      if (options.maxSteps < 1) return yield* exit(2, "--max-steps: must be at least 1")
      const model = yield* modelLayer(options)
      const compaction = yield* compactionLayer(options)
      const path = yield* Path.Path
      const directory = path.resolve(options.store)
      const store = watchAppends(SessionStore.layerJsonl({ directory }))
      let logPath: string | undefined
      const events = yield* Effect.scoped(Effect.gen(function*() {
        const tools = yield* OfflineTools.all()
        const agent = yield* Agent.make({ tools, cwd: process.cwd(), maxSteps: options.maxSteps })
        logPath = agent.log.path
        const print = livePrinter(() => agent.log.events())
        // Runs on success and on Ctrl-C alike, before the agent is disposed.
        yield* Effect.addFinalizer(() =>
          Effect.zipRight(print, Console.log(`\nsession log: ${escapeLine(agent.log.path ?? agent.id)}`))
        )
        const queue = yield* agent.subscribe
        yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(queue), (event) =>
          event.type === "assistant/retry"
            ? Console.error(`retrying the model request (attempt ${(event as { attempt: number }).attempt})`)
            : "seq" in event
            ? print
            : Effect.void)))
        yield* agent.followup(options.prompt)
        yield* agent.awaitIdle.pipe(Effect.onInterrupt(() => Effect.orDie(agent.cancel({ kind: "user" }))))
        return agent.log.events()
      })).pipe(
        Effect.provide(Layer.mergeAll(model, compaction ?? Layer.empty, store.layer, IdGenerator.layer, oneLineLogger)),
        Effect.catchTags({
          SessionStoreError: (e) => exit(2, `cannot write the session log: ${e.message}`),
          InvalidMessage: (e) => exit(2, `invalid prompt: ${e.message}`),
          DuplicateMessageId: (e) => exit(2, e.message),
          AgentDisposed: (e) => exit(2, e.message)
        })
      )
      // A turn that ended because its log could not be written is a store failure (exit 2).
      const failed = store.failure()
      if (failed !== undefined) return yield* exit(2, `cannot write the session log ${logPath ?? ""}: ${failed.message}`)
      const reason = lastTurnEnd(events)
      const code = exitCodeOf(reason)
      if (reason?.kind === "error") yield* Console.error(escapeLine(`error: ${reason.error.code}: ${reason.error.message}`))
      if (code !== 0) return yield* exit(code)
    }).pipe(withOtlp("run", options.otlpEndpoint))
).pipe(Command.withDescription("Send one prompt and print the transcript (§14)."))

/**
 * `chat [--session ID] [--prices FILE]`: the interactive terminal UI (§14;
 * `src/cli/chat/`), on a new session of the JSONL store or, with `--session ID`, on that session
 * resumed (its history shown from the log). Its status line shows the session's tokens, and with
 * `--prices` its cost (a price table that is not one: exit 2). Needs a terminal on stdin and stdout (exit 2 otherwise). Ink and React are
 * loaded only here, in production mode unless NODE_ENV says otherwise. Exits 0 on `/quit`, 130
 * on Ctrl-C or SIGTERM, 129 when the terminal is gone (the agent disposed and its lock released
 * first), 2 when the session cannot be made or resumed; prints the log's path at exit.
 */
const chat = Command.make(
  "chat",
  {
    session: Options.text("session").pipe(
      Options.optional,
      Options.withDescription("resume this session of the store (DIR/<ID>.jsonl) and show its history")
    ),
    prices: Options.text("prices").pipe(
      Options.optional,
      Options.withDescription("a price table (JSON, USD per 1e6 tokens by model): the status line shows the session's cost")
    ),
    ...providerOptions,
    ...otlpOptions,
    store: storeOption
  },
  (options) =>
    Effect.gen(function*() {
      // Ink and React are optional peers: a missing one is named (with the version to install)
      // before anything else is checked, so that no other error hides it.
      yield* requirePackages("chat", ["ink", "react"]).pipe(Effect.catchTag("MissingPackages", (e) => exit(2, e.message)))
      if (!process.stdin.isTTY || !process.stdout.isTTY) {
        return yield* exit(
          2,
          "chat needs an interactive terminal (stdin and stdout must be a TTY); use run --prompt TEXT otherwise"
        )
      }
      const prices = Option.isSome(options.prices) ? yield* readPrices(options.prices.value) : undefined
      const model = yield* modelLayer(options)
      const compaction = yield* compactionLayer(options)
      const path = yield* Path.Path
      const directory = path.resolve(options.store)
      // Read once when React and Ink are first loaded (below): React's development build is slow
      // and chatty; Ink draws only the last frame when CI is set, and a chat on a TTY is not CI.
      if (process.env.NODE_ENV === undefined) process.env.NODE_ENV = "production"
      delete process.env.CI
      delete process.env.CONTINUOUS_INTEGRATION
      const { runChat } = yield* loadWith("chat", ["ink", "react"], () => import("./chat/runChat.js")).pipe(
        Effect.catchTag("MissingPackages", (e) => exit(2, e.message))
      )
      const code = yield* runChat({
        directory,
        model,
        compaction,
        prices,
        sessionId: Option.getOrUndefined(options.session)
      }).pipe(
        Effect.catchTags({
          SessionStoreError: (e) => exit(2, `cannot open the session: ${e.message}`),
          SessionLogError: (e) => exit(2, e.message),
          SessionNotFound: (e) => exit(2, `${e.message} in ${directory}`)
        })
      )
      if (code !== 0) return yield* exit(code)
    }).pipe(withOtlp("chat", options.otlpEndpoint, { deferReports: true }))
).pipe(Command.withDescription("Chat with an agent in the terminal: followup, steer, inject, cancel (§14)."))

/**
 * `resume FILE [--continue-pending]`: reopens a session log of ours after a crash (docs/design.md
 * §10): a torn tail is cut, an open last turn gets its synthetic closers (printed), and state is
 * rebuilt. With `--continue-pending` the work the log left pending (queued followups, steering)
 * runs, its transcript printed as it grows; exits with the code of the last turn's end reason.
 * Without it nothing runs (exit 0). DSH v0 logs are refused (exit 2): we read them, we do not
 * append to them; so is a log that breaks an invariant of §12 its closers cannot fix (one line
 * naming the first violation: its rule, seq and line; `check` lists them all). A log that needs no repair, with nothing pending to continue, is only read
 * (no writer lock), so that resume succeeds on a read-only file system.
 */
const resumeCommand = Command.make(
  "resume",
  {
    file: Args.text({ name: "FILE" }).pipe(Args.withDescription("a session log of ours: DIR/<id>.jsonl")),
    continuePending: Options.boolean("continue-pending").pipe(
      Options.withDescription("run the work the log left pending (queued followups, steering)")
    ),
    ...runOptions,
    ...otlpOptions
  },
  (options) =>
    Effect.gen(function*() {
      if (options.maxSteps < 1) return yield* exit(2, "--max-steps: must be at least 1")
      const model = yield* modelLayer(options)
      const compaction = yield* compactionLayer(options)
      const path = yield* Path.Path
      const file = path.resolve(options.file)
      if (!file.endsWith(".jsonl")) return yield* exit(2, `${options.file}: not a session log (<id>.jsonl)`)
      const contents = yield* readLog(file)
      if (contents.header.version === 0) {
        return yield* exit(2, `${options.file}: a DSH v0 log is read here (transcript, check), never appended to`)
      }
      const directory = path.dirname(file)
      const id = path.basename(file, ".jsonl")
      const before = contents.events.length
      // Opening the log for writing cuts a torn last line (§3.1): said before what was appended.
      const size = contents.tornTail ? (yield* Effect.orDie((yield* FileSystem.FileSystem).stat(file))).size : 0
      const cut = contents.tornTail ? `cut a torn last line (${Number(size) - (contents.validBytes ?? 0)} bytes)` : ""
      const repairReport = (appended: ReadonlyArray<SessionEvent>) =>
        escapeLine(
          appended.length > 0
            ? `${options.file}: ${cut === "" ? "" : `${cut}, `}appended ${appended.map((e) => e.type).join(", ")}`
            : cut === ""
            ? `${options.file}: nothing to repair`
            : `${options.file}: ${cut}, nothing to append`
        )
      const store = watchAppends(SessionStore.layerJsonl({ directory }))
      const layers = Layer.mergeAll(model, compaction ?? Layer.empty, store.layer, IdGenerator.layer, oneLineLogger)
      const failures = {
        SessionStoreError: (e: SessionLog.SessionStoreError) => exit(2, `${options.file}: ${e.message}`),
        SessionLogError: (e: SessionLog.SessionLogError) => exit(2, e.message),
        SessionNotFound: (e: SessionLog.SessionNotFound) => exit(2, `${options.file}: ${e.message}`)
      }
      // A log that its closers cannot make valid (§12; edited by hand, say) is refused before it
      // is opened, so not even a torn tail is cut: `Agent.resume` and `Agent.repair` refuse it too.
      const drafts = repairDrafts(contents.events, () => "")
      const violation = unrepairable(contents.events, drafts, { header: contents.header })
      if (violation !== undefined) return yield* exit(2, unrepairableMessage(id, violation, contents.events.length))
      // A log that needs no repair (no torn tail, nothing to close, already ends with its
      // session/end-seed) and has nothing pending to continue is answered from the read above,
      // without opening it for writing: no lock is taken, so this works on a read-only file system.
      if (
        !contents.tornTail && drafts.length === 0 &&
        !(options.continuePending && Inbox.hasWakingWork(Inbox.replay(contents.events)))
      ) {
        yield* ownHeader(id, file, contents).pipe(Effect.catchTag("SessionLogError", failures.SessionLogError))
        yield* Console.log(`${options.file}: nothing to repair`)
        if (options.continuePending) yield* Console.log("no queued followup or steering to run")
        return
      }
      if (!options.continuePending) {
        // Repair only: no agent, so nothing is disposed and pending work stays pending.
        const appended = yield* Agent.repair(id).pipe(Effect.provide(layers), Effect.catchTags(failures))
        yield* Console.log(repairReport(appended))
        return
      }
      const ran = yield* Effect.scoped(Effect.gen(function*() {
        const tools = yield* OfflineTools.all()
        const agent = yield* Agent.resume(id, { tools, maxSteps: options.maxSteps, continuePending: options.continuePending })
        // The repair, if any, is what was appended up to its `session/end-seed`.
        const tail = agent.log.events().slice(before)
        const seed = tail.findIndex((e) => e.type === "session/end-seed")
        const repaired = seed < 0 ? [] : tail.slice(0, seed + 1)
        yield* Console.log(repairReport(repaired))
        const print = livePrinter(() => agent.log.events().slice(before + repaired.length))
        yield* Effect.addFinalizer(() => print)
        const queue = yield* agent.subscribe
        yield* Effect.forkScoped(
          Effect.forever(Effect.flatMap(Queue.take(queue), (event) => ("seq" in event ? print : Effect.void)))
        )
        yield* agent.awaitIdle.pipe(Effect.onInterrupt(() => Effect.orDie(agent.cancel({ kind: "user" }))))
        if (agent.log.events().length === before + repaired.length) yield* Console.log("no queued followup or steering to run")
        return agent.log.events().slice(before + repaired.length)
      })).pipe(Effect.provide(layers), Effect.catchTags(failures))
      const failed = store.failure()
      if (failed !== undefined) return yield* exit(2, `${options.file}: cannot write the session log: ${failed.message}`)
      if (ran.length === 0) return
      const reason = lastTurnEnd(ran)
      const code = exitCodeOf(reason)
      if (reason?.kind === "error") yield* Console.error(escapeLine(`error: ${reason.error.code}: ${reason.error.message}`))
      if (code !== 0) return yield* exit(code)
    }).pipe(withOtlp("resume", options.otlpEndpoint))
).pipe(
  Command.withDescription("Resume a session log after a crash: repair, then optionally run what was pending (§10).")
)

/** Reads a log or exits 2 with the reader's message (naming the line). */
const readLog = (file: string) =>
  SessionStore.readFile(file).pipe(
    Effect.catchTags({
      SessionStoreError: (e) => exit(2, `${file}: ${e.message}`),
      SessionLogError: (e) => exit(2, e.message)
    })
  )

/** The options of `transcript` and `check` that name a session in PostgreSQL instead of a FILE. */
const pgReadOptions = {
  pg: pgOption("read the session from this PostgreSQL database (postgres://…) instead of a FILE; with --session"),
  session: Options.text("session").pipe(Options.optional, Options.withDescription("the session id (with --pg)")),
  tablePrefix: Options.text("table-prefix").pipe(
    Options.optional,
    Options.withDescription("the session store's table prefix (with --pg; default agent_loop_)")
  )
}

/**
 * The session a `transcript` or `check` reads: a FILE, or `--pg URL --session ID` (exactly one
 * of them, else exit 2). From PostgreSQL it is read through `SqlSessionStore.layerPg` (loaded
 * here, on first use): `read` only, no writer taken. `label` names it in the output lines: the
 * FILE as given, or `session ID`.
 */
const readSession = (
  command: string,
  options: {
    readonly file: Option.Option<string>
    readonly pg: Option.Option<string>
    readonly session: Option.Option<string>
    readonly tablePrefix: Option.Option<string>
  }
) =>
  Effect.gen(function*() {
    const fromPg = Option.isSome(options.pg) || Option.isSome(options.session) || Option.isSome(options.tablePrefix)
    if (Option.isSome(options.file)) {
      if (fromPg) return yield* exit(2, `${command}: give either FILE or --pg URL --session ID, not both`)
      return { label: options.file.value, contents: yield* readLog(options.file.value) }
    }
    if (Option.isNone(options.pg) || Option.isNone(options.session)) {
      return yield* exit(2, `${command}: give a FILE, or --pg URL and --session ID`)
    }
    const url = options.pg.value
    const id = options.session.value
    const Sql = yield* Effect.promise(() => import("../SqlSessionStore.js"))
    const contents = yield* Effect.scoped(
      Effect.flatMap(
        Layer.build(Sql.layerPg({ url, tablePrefix: Option.getOrUndefined(options.tablePrefix), maxConnections: 1 })),
        (context) => Context.get(context, SessionStore.SessionStore).read(id)
      )
    ).pipe(
      Effect.catchTags({
        SessionStoreError: (e) => exit(2, `${command}: ${e.message}`),
        SessionLogError: (e) => exit(2, `${command}: ${pgWhere(url)}: ${e.message}`),
        SessionNotFound: () => exit(2, `${command}: no session ${id} in ${pgWhere(url)}`)
      })
    )
    return { label: `session ${id}`, contents }
  })

const optionalFile = Args.text({ name: "FILE" }).pipe(
  Args.withDescription("a session log (ours or DSH v0); or --pg URL --session ID"),
  Args.optional
)

const transcript = Command.make(
  "transcript",
  {
    file: optionalFile,
    json: Options.boolean("json").pipe(Options.withDescription("one JSON object a line")),
    ...pgReadOptions
  },
  (options) =>
    Effect.gen(function*() {
      const { contents, label } = yield* readSession("transcript", options)
      for (const w of contents.warnings) yield* Console.error(escapeLine(`warning: ${label}: ${w}`))
      const entries = Transcript.fromEvents(contents.events)
      if (options.json) {
        const lines = Transcript.toJsonLines(entries)
        if (lines.length > 0) yield* Console.log(lines.trimEnd())
      } else {
        const text = Transcript.render(entries)
        if (text.length > 0) yield* Console.log(text.trimEnd())
      }
    })
).pipe(Command.withDescription("Print the transcript of a session log, a FILE or a session in PostgreSQL (§14)."))

const check = Command.make(
  "check",
  { file: optionalFile, ...pgReadOptions },
  (options) =>
    Effect.gen(function*() {
      const { contents, label } = yield* readSession("check", options)
      for (const w of contents.warnings) yield* Console.error(escapeLine(`warning: ${label}: ${w}`))
      const violations = Invariant.check(contents.events, { header: contents.header })
      if (violations.length === 0) {
        yield* Console.log(escapeLine(`${label}: ok (${contents.events.length} events)`))
        return
      }
      for (const v of violations) yield* Console.log(escapeLine(`${label}: seq ${v.seq}: rule ${v.rule}: ${v.message}`))
      return yield* exit(1)
    })
).pipe(
  Command.withDescription("Check a session log (a FILE or a session in PostgreSQL) against the invariants of §12.")
)

/**
 * `stats FILE [--json] [--prices FILE]` (§18, `stats.ts`): turns, steps, model requests,
 * tool calls by name, tokens by kind and model, cost with a price table, time per turn and per
 * model request. A log that cannot be read, a missing file, or a price table that is not one:
 * one line on stderr, exit 2.
 */
const stats = Command.make(
  "stats",
  {
    file: Args.text({ name: "FILE" }).pipe(Args.withDescription("a session log (ours or DSH v0)")),
    json: Options.boolean("json").pipe(Options.withDescription("one JSON object")),
    prices: Options.text("prices").pipe(
      Options.optional,
      Options.withDescription("a price table (JSON: {model: {input, cachedInput?, cacheWrite?, output}}, USD per 1e6 tokens)")
    )
  },
  (options) =>
    Effect.gen(function*() {
      const prices = Option.isSome(options.prices) ? yield* readPrices(options.prices.value) : undefined
      const contents = yield* readLog(options.file)
      for (const w of contents.warnings) yield* Console.error(escapeLine(`warning: ${options.file}: ${w}`))
      const result = statsOf(contents, prices)
      if (options.json) yield* Console.log(escapeJson(JSON.stringify(result)))
      else yield* Console.log(escapeText(renderStats(result, options.file)))
    })
).pipe(Command.withDescription("Print what a session log did and used: turns, steps, tools, tokens, cost, times (§18)."))

/** Reads and decodes a price table (`--prices`), or exits 2 naming the file and the problem. */
const readPrices = (file: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(file).pipe(Effect.catchAll((e) => exit(2, `--prices ${file}: cannot read: ${e.message}`)))
    if (info.type !== "File") return yield* exit(2, `--prices ${file}: cannot read: not a regular file (${fileKind(info.type)})`)
    const text = yield* fs.readFileString(file).pipe(
      Effect.catchAll((e) => exit(2, `--prices ${file}: cannot read: ${e.message}`))
    )
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (e) {
      return yield* exit(2, escapeLine(`--prices ${file}: not JSON: ${e instanceof Error ? e.message : String(e)}`))
    }
    const decoded = Usage.decodePrices(json)
    if (Either.isLeft(decoded)) {
      return yield* exit(2, `--prices ${file}: not a price table at ${decoded.left.path}: ${decoded.left.message}`)
    }
    return decoded.right
  })

/**
 * `acp [--store DIR] [provider flags, compaction flags and --max-steps, as run]` (§22;
 * `acp/agent.ts`, §22): an Agent Client Protocol v1 agent on stdin/stdout for
 * editors, until stdin ends (exit 0). stdout carries ACP messages only; notices go to stderr.
 * The ACP SDK and zod are bundled into the chunk this command loads (no other command loads it).
 */
const acpCommand = Command.make(
  "acp",
  { ...runOptions, store: storeOption },
  (options) =>
    Effect.gen(function*() {
      if (options.maxSteps < 1) return yield* exit(2, "--max-steps: must be at least 1")
      const model = yield* modelLayer(options)
      const compaction = yield* compactionLayer(options)
      const path = yield* Path.Path
      const { runAcp } = yield* Effect.promise(() => import("./acp/agent.js"))
      yield* runAcp({
        directory: path.resolve(options.store),
        maxSteps: options.maxSteps,
        // Checked by compactionLayer above.
        contextWindow: Option.getOrUndefined(Option.map(options.contextWindow, (text) => Number(text.trim()))),
        model,
        compaction,
        version: VERSION
      })
    })
).pipe(Command.withDescription("Serve the Agent Client Protocol (ACP v1) on stdin/stdout, for editors such as Zed (§22)."))

/**
 * `demo`: a session on the offline model in which a context is injected while idle, a prompt
 * runs two tools, a steer arrives while the `wait` tool runs, and another context is injected.
 */
const demo = Command.make(
  "demo",
  { store: storeOption },
  ({ store }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const directory = path.resolve(store)
      const log = yield* Effect.scoped(Effect.gen(function*() {
        const tools = yield* OfflineTools.all()
        const agent = yield* Agent.make({ tools, cwd: process.cwd(), instructions: "You are the effect-agent-loop demo." })
        yield* agent.inject(
          yield* UserMessage.make({ text: "The user is on branch main.", source: { kind: "plugin", plugin: "git" } })
        )
        yield* agent.followup("Please wait 1 second and tell me the time.")
        yield* Effect.sleep("300 millis")
        yield* agent.steer("Also read file package.json, please.")
        yield* agent.inject(
          yield* UserMessage.make({ text: "The network is metered.", source: { kind: "plugin", plugin: "netwatch" } })
        )
        yield* agent.awaitIdle
        return agent.log
      })).pipe(
        Effect.provide(Layer.mergeAll(Model.layer(Model.offline()), SessionStore.layerJsonl({ directory }), IdGenerator.layer)),
        Effect.catchAll((e) => exit(2, `demo failed: ${e.message}`))
      )
      yield* printTranscript(log.events())
      yield* Console.log("")
      yield* Console.log(escapeLine(`session log: ${log.path ?? log.id}`))
      yield* Console.log(escapeLine(`replay it with: npx agent-loop transcript ${log.path ?? log.id}`))
    })
).pipe(Command.withDescription("Run a short offline demo session and print its transcript."))

/**
 * `simulate SCENARIO [--out FILE] [--requests FILE]` (§15): runs a scenario on the
 * virtual clock; writes the session log (default stdout) and, optionally, the model requests.
 * An invalid scenario exits 2 with the JSON path of the problem, before anything runs; so does a
 * scenario over `Scenario.MAX_ACTIONS` actions. A delivery that failed (anything but
 * `AgentDisposed` after a `dispose` action) exits 2 after the log is written; recorded requests
 * over `Scenario.MAX_REQUEST_MESSAGES` messages exit 2 with nothing written.
 */
const simulate = Command.make(
  "simulate",
  {
    scenario: Args.text({ name: "SCENARIO" }).pipe(Args.withDescription("a scenario JSON file (§15)")),
    out: Options.text("out").pipe(Options.optional, Options.withDescription("where to write the session log (default: stdout)")),
    requests: Options.text("requests").pipe(
      Options.optional,
      Options.withDescription("where to write the model requests, one JSON line each")
    ),
    ...otlpOptions
  },
  ({ otlpEndpoint, out, requests, scenario }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // Stat first: opening a fifo blocks, and a device such as /dev/zero never ends.
      const info = yield* fs.stat(scenario).pipe(Effect.catchAll((e) => exit(2, `${scenario}: cannot read: ${e.message}`)))
      if (info.type !== "File") return yield* exit(2, `${scenario}: cannot read: not a regular file (${fileKind(info.type)})`)
      const text = yield* fs.readFileString(scenario).pipe(
        Effect.catchAll((e) => exit(2, `${scenario}: cannot read: ${e.message}`))
      )
      const decoded = Scenario.parse(text)
      if (Either.isLeft(decoded)) {
        return yield* exit(2, escapeLine(`${scenario}: invalid scenario at ${decoded.left.path}: ${decoded.left.message}`))
      }
      const result = yield* Scenario.run(decoded.right, { seed: Scenario.seedOf(text), requests: Option.isSome(requests) })
        .pipe(Effect.catchTag("RequestsTooLarge", (e) => exit(2, `${scenario}: --requests: ${e.message}`)))
      // A delivery the scenario could not make is a failed run (exit 2), except `AgentDisposed`
      // after a `dispose` action, which is what the scenario asked for.
      let unexpected = 0
      for (const d of result.deliveries) {
        if (d.error !== undefined) {
          if (d.error !== "AgentDisposed") unexpected++
          yield* Console.error(escapeLine(`${scenario}: action ${d.action} (${d.kind} at ${d.at} ms) failed: ${d.error}`))
        }
      }
      const write = (file: string, content: string) =>
        fs.writeFileString(file, content).pipe(Effect.catchAll((e) => exit(2, `${file}: cannot write: ${e.message}`)))
      if (Option.isSome(out)) yield* write(out.value, result.log)
      // On a terminal, the code points JSON leaves raw (C1, bidi, U+2028) as JSON escapes: the same values.
      else yield* Effect.sync(() => process.stdout.write(process.stdout.isTTY ? escapeJson(result.log) : result.log))
      if (Option.isSome(requests)) yield* writeLines(requests.value, result.requests)
      if (unexpected > 0) {
        return yield* exit(2, `${scenario}: ${unexpected} deliver${unexpected === 1 ? "y" : "ies"} failed (see above)`)
      }
    }).pipe(withOtlp("simulate", otlpEndpoint))
).pipe(Command.withDescription("Run a scenario on a virtual clock and write its session log (§15)."))

/**
 * Writes `items` as JSON lines to `file` a chunk at a time (the requests of a long scenario can
 * be more than one string can hold).
 */
const writeLines = (file: string, items: ReadonlyArray<unknown>) =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const handle = yield* fs.open(file, { flag: "w" })
    const encoder = new TextEncoder()
    for (let i = 0; i < items.length;) {
      let chunk = ""
      while (i < items.length && chunk.length < 1 << 20) chunk += JSON.stringify(items[i++]) + "\n"
      yield* handle.writeAll(encoder.encode(chunk))
    }
  })).pipe(Effect.catchAll((e) => exit(2, `${file}: cannot write: ${e.message}`)))

/**
 * A command whose handler prints through `terminalConsole`: under the print sites' own escaping,
 * a net for every line it prints (the logger's too). Only the handlers: `--help` and the
 * wizard are `@effect/cli`'s own text, whose ANSI styling must reach the terminal as it is.
 */
const escaped = <Name extends string, R, E, A>(command: Command.Command<Name, R, E, A>) =>
  Command.transformHandler(
    command,
    (handler: Effect.Effect<void, E, R>) => Console.consoleWith((base) => Effect.withConsole(handler, terminalConsole(base)))
  )

const root = Command.make("agent-loop").pipe(
  Command.withDescription("An Effect-TS runtime for LLM agent loops."),
  Command.withSubcommands([
    escaped(chat),
    escaped(run),
    escaped(resumeCommand),
    escaped(transcript),
    escaped(check),
    escaped(stats),
    escaped(demo),
    escaped(simulate),
    escaped(runnerCommand),
    escaped(sendCommand),
    escaped(acpCommand)
  ])
)

const cli = Command.run(root, { name: "agent-loop", version: VERSION })

/**
 * Runs the CLI on `argv` (without the node and script entries) and returns the exit code.
 * Needs the Node context (file system, path, terminal).
 *
 * @since 0.1.0
 */
export const main = (argv: ReadonlyArray<string>): Effect.Effect<number, never, NodeContext.NodeContext> =>
  cli(["node", "agent-loop", ...argv]).pipe(
    Effect.as(0),
    Effect.catchAll((e): Effect.Effect<number> => {
      // Exit messages carry file names, log lines and provider texts: escaped (§23).
      if (e instanceof CliExit) return Effect.as(e.message === "" ? Effect.void : Console.error(escapeText(e.message)), e.code)
      if (ValidationError.isValidationError(e)) return Effect.succeed(ValidationError.isHelpRequested(e) ? 0 : 2)
      return Effect.as(Console.error(escapeText(`agent-loop: ${String(e)}`)), 2)
    }),
    // A file-system error that @effect/cli's own checks of a path option raise as a defect (a
    // `--store` under a regular file: ENOTDIR from `access`) is bad input too: one line, exit 2.
    Effect.catchSomeDefect((d) =>
      isPlatformError(d) ? Option.some(Effect.as(Console.error(escapeText(`agent-loop: ${d.message}`)), 2)) : Option.none()
    )
  )

export { interruptExitCode }
