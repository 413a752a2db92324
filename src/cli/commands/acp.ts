/** `agent-loop acp`: an Agent Client Protocol agent for editors on stdin/stdout (§22). */
import { Command } from "@effect/cli"
import { Effect, Option } from "effect"
import * as OfflineTools from "../../providers/OfflineTools.js"
import { compactionLayer, modelLayer, runOptions } from "../providerFlags.js"
import { VERSION } from "../version.js"
import { askOption, checkAsk } from "./askFlag.js"
import { askLater, connectMcp, mcpConfigOption, readMcpServers } from "./mcpFlag.js"
import { storeDirectory, storeOption } from "./shared.js"
import { subagentNames, subagentOptions } from "./subagentFlag.js"

/**
 * `acp [--store DIR] [--ask TOOL]… [provider flags, compaction flags and --max-steps, as run]`
 * (§22; `acp/agent.ts`): an Agent Client Protocol v1 agent on stdin/stdout for editors, until
 * stdin ends (exit 0). stdout carries ACP messages only; notices go to stderr. `--ask TOOL`
 * makes the calls of that tool wait for approval, asked with `session/request_permission`
 * (§26); a name that is no tool of the session exits 2. `--subagent` and `--subagent-fork` add
 * the sub-agent tools (§27), whose children are reported to the client (`acp/children.ts`).
 * `--mcp-config FILE` connects the file's MCP servers once, before the first message is read
 * (§28; `mcpFlag.ts`: a server that fails is a line on stderr), and every session's agent gets
 * their tools; their calls ask for approval through the client unless the file says otherwise.
 * The ACP SDK and zod are bundled into the chunk this command loads (no other command loads it).
 */
export const acp = Command.make(
  "acp",
  { ...runOptions, store: storeOption, ask: askOption, ...subagentOptions, mcpConfig: mcpConfigOption },
  (options) =>
    Effect.gen(function*() {
      const servers = yield* readMcpServers(options.mcpConfig)
      const toolNames = [...(yield* OfflineTools.all()).map((tool) => tool.name), ...subagentNames(options)]
      yield* checkAsk(options.ask, toolNames, askLater(servers))
      const model = yield* modelLayer(options)
      const compaction = yield* compactionLayer(options)
      const directory = yield* storeDirectory(options.store)
      const { runAcp } = yield* Effect.promise(() => import("../acp/agent.js"))
      // The servers live until stdin ends: runAcp's sessions are disposed first.
      const mcp = yield* connectMcp("acp", servers, options.ask, toolNames)
      yield* runAcp({
        directory,
        maxSteps: options.maxSteps,
        // Checked by compactionLayer above.
        contextWindow: Option.getOrUndefined(Option.map(options.contextWindow, (text) => Number(text.trim()))),
        model,
        compaction,
        ask: options.ask,
        subagents: { subagent: options.subagent, subagentFork: options.subagentFork },
        mcpConfigToolset: mcp?.toolset,
        version: VERSION
      })
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Serve the Agent Client Protocol (ACP v1) on stdin/stdout, for editors such as Zed (§22)."))
