/**
 * `--subagent` and `--subagent-fork`, shared by the agent commands (`run`, `chat`, `resume`,
 * `acp`): the agent gets DSH's sub-agent tools (§27), `subagent` (a child with a fresh context)
 * and `subagent_fork` (a child that starts with the parent's completed turns). A child has the
 * same model and the same tools as its parent, these included (a child may delegate again, down
 * to `Subagent.tool`'s `maxDepth`, 2), and the same `--ask` rules.
 */
import { Options } from "@effect/cli"
import * as Subagent from "../../Subagent.js"
import type * as Tool from "../../Tool.js"
import { withAsk } from "./askFlag.js"

/** `--subagent` and `--subagent-fork`: add the sub-agent tools (none by default). */
export const subagentOptions = {
  subagent: Options.boolean("subagent").pipe(
    Options.withDescription("add the subagent tool: a child agent with the same model and tools (§27)")
  ),
  subagentFork: Options.boolean("subagent-fork").pipe(
    Options.withDescription("add the subagent_fork tool: a child that starts with this conversation (§27)")
  )
}

/** Which sub-agent tools a command adds (its `--subagent`, `--subagent-fork`). */
export interface SubagentFlags {
  readonly subagent: boolean
  readonly subagentFork: boolean
}

/** The names of the sub-agent tools `flags` add, for `checkAsk`: `subagent`, `subagent_fork`. */
export const subagentNames = (flags: SubagentFlags): ReadonlyArray<string> => [
  ...(flags.subagent ? ["subagent"] : []),
  ...(flags.subagentFork ? ["subagent_fork"] : [])
]

/**
 * The agent's tools: `builtins` and the sub-agent tools `flags` add, each whose name is in `ask`
 * asking for approval (`withAsk`). A child's tools are this same list (one array, shared by
 * every depth), and its toolsets `toolsets` (the parent's: `--mcp-config`'s MCP servers, §28).
 */
export const withSubagents = (
  builtins: ReadonlyArray<Tool.Tool<any>>,
  flags: SubagentFlags,
  ask: ReadonlyArray<string>,
  toolsets?: ReadonlyArray<Tool.Toolset> | undefined
): ReadonlyArray<Tool.Tool<any>> => {
  const tools: Array<Tool.Tool<any>> = []
  const subagents = [
    ...(flags.subagent ? [Subagent.tool({ tools, toolsets })] : []),
    ...(flags.subagentFork ? [Subagent.tool({ tools, toolsets, fork: true })] : [])
  ]
  // Filled after the tools are made: `Subagent.tool` reads its `tools` when a call makes a child.
  for (const tool of withAsk([...builtins, ...subagents], ask)) tools.push(tool)
  return tools
}
