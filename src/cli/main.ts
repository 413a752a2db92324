/**
 * The `agent-loop` command line (§14), built with @effect/cli:
 * `chat [--session ID]`, `run --prompt TEXT`, `transcript FILE [--json]`, `check FILE`,
 * `stats FILE [--json] [--prices FILE]`, `pending [--store DIR | --sqlite FILE | --pg URL]
 * [--session ID] [--json]` (the sessions that wait for approval, §26),
 * `resume FILE [--continue-pending]`, `simulate SCENARIO`, `demo` and `acp` (an ACP agent for
 * editors, §22: `acp/agent.ts`); and, for an agent cluster on
 * PostgreSQL (§21), `runner`, `send`, `transcript --pg URL --session ID [--json]` and
 * `check --pg URL --session ID`.
 *
 * Each command is a module of `commands/` (what several share is in `commands/shared.ts`);
 * this module assembles them. Cluster commands (decisions): `runner` and `send` in `clusterCommands.ts`.
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
 * MCP servers (§28): `run`, `chat`, `acp` and `runner` take `--mcp-config FILE`
 * (`commands/mcpFlag.ts`, the file read by `mcpConfig.ts`): the file's servers connected for the
 * command, their tools the agent's; the MCP client SDK and `Mcp.ts` loaded only then.
 *
 * Compaction flags (§17) of `run`, `chat`, `resume` and `runner` (`providerFlags.ts`):
 * `--context-window N` gives the agents `Compaction.layer({contextWindow: N, reserve,
 * keepRecentTokens})` from `--compaction-reserve N` and `--keep-recent-tokens N` (defaults of
 * `Compaction.summarize`); without it no policy is provided (no automatic compaction; the chat's
 * `/compact` uses `Compaction.summarize({})`). A value that is not a positive integer, a reserve
 * not below the window, or either of the other two without `--context-window`: exit 2.
 *
 * Exit codes: `chat` exits 0 on `/quit`, 130 on Ctrl-C, 129 when its terminal is gone; `run` exits 0 for `completed` or
 * `max-tokens`, 3 `blocked`, 4 `error`, 130 `aborted` (also on Ctrl-C), 5 when the turn waits for
 * approval (`--ask`, §26: the session left waiting, as `resume --continue-pending` does); `check` exits 1 when an
 * invariant is violated; every command exits 2 for bad arguments, an unreadable log (the error
 * names the line), a missing file, or a session log that cannot be written (`run` and `resume`
 * also when an append fails mid-turn: a full disk, a read-only store, a log deleted or cut under
 * the session; one line on stderr, `storeFailures.ts`).
 *
 * Terminal safety (§23): every line printed here that carries text from a log, a model, a
 * provider or a file name goes through `src/internal/terminalText.ts` at the print site:
 * transcripts through `TranscriptText.render` (which escapes), one-line messages (error lines,
 * `check`'s violations, warnings, paths) through `escapeLine`, exit messages through
 * `escapeText`. ESC, the other C0/C1 controls, bidi, zero-width and separator characters are
 * shown as `\x1b`, `\u202e`, … and never reach the terminal raw. Under them, `main` prints
 * through `terminalConsole`, which escapes every string (the logger's lines too).
 *
 * @since 0.1.0
 */
import { Command, ValidationError } from "@effect/cli"
import type * as NodeContext from "@effect/platform-node/NodeContext"
import { Console, Effect } from "effect"
import { escapeText, terminalConsole } from "../internal/terminalText.js"
import { interruptExitCode, runnerCommand, sendCommand } from "./clusterCommands.js"
import { acp } from "./commands/acp.js"
import { chat } from "./commands/chat.js"
import { check } from "./commands/check.js"
import { demo } from "./commands/demo.js"
import { inspect } from "./commands/inspect.js"
import { pending } from "./commands/pending.js"
import { resume } from "./commands/resume.js"
import { run } from "./commands/run.js"
import { simulate } from "./commands/simulate.js"
import { stats } from "./commands/stats.js"
import { transcript } from "./commands/transcript.js"
import { CliExit } from "./exit.js"
import { colourFor, handlerConsole, libraryConsole } from "./libraryText.js"
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

export {
  /**
   * Exit code of a turn end reason (§14).
   *
   * @since 0.1.0
   */
  exitCodeOf
} from "./commands/shared.js"

/**
 * A command whose handler prints through `terminalConsole`: under the print sites' own escaping,
 * a net for every line it prints (the logger's too), over the Console `main` was given (not the
 * `libraryConsole` that fits @effect/cli's own text). Only the handlers: `--help` and the wizard
 * are `@effect/cli`'s own text, whose ANSI styling must reach a terminal as it is.
 */
const escaped = <Name extends string, R, E, A>(command: Command.Command<Name, R, E, A>) =>
  Command.transformHandler(
    command,
    (handler: Effect.Effect<void, E, R>) =>
      Console.consoleWith((current) => Effect.withConsole(handler, terminalConsole(handlerConsole(current))))
  )

const subcommands = [
  escaped(chat),
  escaped(run),
  escaped(resume),
  escaped(transcript),
  escaped(check),
  escaped(stats),
  escaped(pending),
  escaped(inspect),
  escaped(demo),
  escaped(simulate),
  escaped(runnerCommand),
  escaped(sendCommand),
  escaped(acp)
] as const

const root = Command.make("agent-loop").pipe(
  Command.withDescription("An Effect-TS runtime for LLM agent loops."),
  Command.withSubcommands([...subcommands])
)

type NameOf<C> = C extends Command.Command<infer Name, any, any, any> ? Name : never

/**
 * The one line each command has in the top-level help, in the order it lists them (a
 * newcomer's order: try, use, inspect, then the cluster). Typed by the commands' names, so that
 * a command added to `subcommands` does not compile until it has its line here.
 */
const summaries: { readonly [Name in NameOf<(typeof subcommands)[number]>]: string } = {
  demo: "run a short offline demo session and print its transcript",
  run: "send one prompt and print the transcript as it happens",
  chat: "chat with an agent in the terminal",
  resume: "repair a crashed session log; optionally run what was pending",
  transcript: "print the transcript of a session log (a file or PostgreSQL)",
  check: "check a session log against the invariants of §12",
  stats: "turns, steps, tools, tokens, cost and times of a session log",
  pending: "list the sessions of a store that wait for approval",
  inspect: "a web page of a store's sessions: timelines, inbox, fates",
  simulate: "run a scenario on a virtual clock and write its session log",
  acp: "serve the Agent Client Protocol on stdin/stdout, for editors",
  runner: "run a runner of an agent cluster on PostgreSQL",
  send: "deliver a message or a decision to a session of an agent cluster"
}

const NAME = "agent-loop"

const cli = Command.run(root, { name: NAME, version: VERSION })

/**
 * The top-level help (`agent-loop`, `agent-loop --help`, `agent-loop -h`): what the tool is, the
 * commands one line each, and where their options are, on one 80-column screen. @effect/cli's
 * own (the built-in flags' boilerplate first, then every command's whole usage on one line of
 * 400 to 570 columns) has no setting for this, so `main` prints this one instead; a command's
 * `--help` is still @effect/cli's.
 */
const topLevelHelp = (): string => {
  const width = Math.max(...Object.keys(summaries).map((name) => name.length)) + 2
  return [
    `${NAME} ${VERSION}: an Effect-TS runtime for LLM agent loops.`,
    "",
    `USAGE ${NAME} <command> [options]`,
    "",
    "COMMANDS",
    ...Object.entries(summaries).map(([name, summary]) => `  ${name.padEnd(width)}${summary}`),
    "",
    `${NAME} <command> --help shows a command's options.`,
    "Built-in flags: --version, --log-level LEVEL, --completions SHELL, --wizard."
  ].join("\n")
}

/** Whether `argv` asks for the top-level help: nothing, `--help` or `-h`. */
const asksTopLevelHelp = (argv: ReadonlyArray<string>): boolean =>
  argv.length === 0 || (argv.length === 1 && (argv[0] === "--help" || argv[0] === "-h"))

/**
 * Runs the CLI on `argv` (without the node and script entries) and returns the exit code.
 * Needs the Node context (file system, path, terminal). What @effect/cli prints itself (help,
 * its parse errors) is coloured only where the process's stdout or stderr is a terminal and
 * `NO_COLOR` is unset or empty (`libraryText.ts`).
 *
 * @since 0.1.0
 */
export const main = (argv: ReadonlyArray<string>): Effect.Effect<number, never, NodeContext.NodeContext> =>
  asksTopLevelHelp(argv) ? Effect.as(Console.log(topLevelHelp()), 0) : Console.consoleWith((base) =>
    Effect.withConsole(
      cli(["node", NAME, ...argv]),
      libraryConsole(base, {
        name: NAME,
        stdout: colourFor(process.stdout, process.env),
        stderr: colourFor(process.stderr, process.env)
      })
    )
  ).pipe(
    Effect.as(0),
    Effect.catchAll((e): Effect.Effect<number> => {
      // Exit messages carry file names, log lines and provider texts: escaped (§23).
      if (e instanceof CliExit) return Effect.as(e.message === "" ? Effect.void : Console.error(escapeText(e.message)), e.code)
      if (ValidationError.isValidationError(e)) return Effect.succeed(ValidationError.isHelpRequested(e) ? 0 : 2)
      return Effect.as(Console.error(escapeText(`agent-loop: ${String(e)}`)), 2)
    })
  )

export { interruptExitCode }
