/**
 * `agent-loop chat`: the interactive terminal UI (§14; `src/cli/chat/`), loaded with Ink and
 * React only when this command runs.
 */
import { Command, Options } from "@effect/cli"
import { Effect, Option } from "effect"
import * as OfflineTools from "../../providers/OfflineTools.js"
import { exit } from "../exit.js"
import { loadWith, requirePackages } from "../optional.js"
import { otlpOptions, withOtlp } from "../otlp.js"
import { compactionLayer, modelLayer, providerOptions } from "../providerFlags.js"
import { askOption, checkAsk } from "./askFlag.js"
import { askLater, connectMcp, mcpConfigOption, readMcpServers } from "./mcpFlag.js"
import { instructionsOptions, readInstructions, readPrices, storeDirectory, storeOption } from "./shared.js"
import { subagentNames, subagentOptions, withSubagents } from "./subagentFlag.js"

/**
 * `chat [--session ID] [--prices FILE] [--ask TOOL]…`: the interactive terminal UI (§14;
 * `src/cli/chat/`), on a new session of the JSONL store or, with `--session ID`, on that session
 * resumed (its history shown from the log). Its status line shows the session's tokens, and with
 * `--prices` its cost (a price table that is not one: exit 2). Each `--ask TOOL` makes every
 * call of that offline tool wait for an answer in the chat (§26; a name that is no tool: exit 2).
 * `--subagent` and `--subagent-fork` add the sub-agent tools (§27): a running child is shown under
 * its call, its questions answered in the chat. `--mcp-config FILE` connects the file's MCP
 * servers (§28; `mcpFlag.ts`) before the view is drawn (a server that fails is a line on
 * stderr): their tools are the agent's, their calls ask for approval in the chat unless the
 * file says otherwise, a call's progress shows under it, and `/mcp` lists the servers. Needs a terminal on stdin and stdout (exit 2 otherwise). Ink and React are
 * loaded only here, in production mode unless NODE_ENV says otherwise. Exits 0 on `/quit`, 130
 * on Ctrl-C or SIGTERM, 129 when the terminal is gone (the agent disposed and its lock released
 * first), 2 when the session cannot be made or resumed; prints the log's path at exit.
 */
export const chat = Command.make(
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
    ask: askOption,
    ...subagentOptions,
    mcpConfig: mcpConfigOption,
    ...instructionsOptions,
    ...providerOptions,
    ...otlpOptions,
    store: storeOption
  },
  (options) =>
    Effect.gen(function*() {
      // Ink and React are optional peers: a missing one is named (with the version to install)
      // before anything else is checked, so that no other error hides it.
      yield* requirePackages("chat", ["ink", "react"]).pipe(Effect.catchTag("MissingPackages", (e) => exit(2, e.message)))
      const instructions = yield* readInstructions(options)
      const servers = yield* readMcpServers(options.mcpConfig)
      const offline = yield* OfflineTools.all()
      const toolNames = [...offline.map((tool) => tool.name), ...subagentNames(options)]
      yield* checkAsk(options.ask, toolNames, askLater(servers))
      if (!process.stdin.isTTY || !process.stdout.isTTY) {
        return yield* exit(
          2,
          "chat needs an interactive terminal (stdin and stdout must be a TTY); use run --prompt TEXT otherwise"
        )
      }
      const prices = Option.isSome(options.prices) ? yield* readPrices(options.prices.value) : undefined
      const model = yield* modelLayer(options)
      const compaction = yield* compactionLayer(options)
      const directory = yield* storeDirectory(options.store)
      // Read once when React and Ink are first loaded (below): React's development build is slow
      // and chatty; Ink draws only the last frame when CI is set, and a chat on a TTY is not CI.
      if (process.env.NODE_ENV === undefined) process.env.NODE_ENV = "production"
      delete process.env.CI
      delete process.env.CONTINUOUS_INTEGRATION
      const { runChat } = yield* loadWith("chat", ["ink", "react"], () => import("../chat/runChat.js")).pipe(
        Effect.catchTag("MissingPackages", (e) => exit(2, e.message))
      )
      // The servers live as long as the chat: connected before the view is drawn (their warnings
      // on stderr above it), closed after the agent is disposed.
      const code = yield* Effect.scoped(Effect.gen(function*() {
        const mcp = yield* connectMcp("chat", servers, options.ask, toolNames)
        const tools = withSubagents(offline, options, options.ask, mcp === undefined ? undefined : [mcp.toolset])
        return yield* runChat({
          directory,
          model,
          compaction,
          prices,
          instructions,
          tools,
          mcp,
          sessionId: Option.getOrUndefined(options.session)
        })
      })).pipe(
        Effect.catchTags({
          SessionStoreError: (e) => exit(2, `cannot open the session: ${e.message}`),
          SessionLogError: (e) => exit(2, e.message),
          SessionNotFound: (e) => exit(2, `${e.message} in ${directory}`)
        })
      )
      if (code !== 0) return yield* exit(code)
    }).pipe(withOtlp("chat", options.otlpEndpoint, { deferReports: true }))
).pipe(Command.withDescription("Chat with an agent in the terminal: followup, steer, inject, cancel, approve (§14)."))
