/**
 * `--mcp-config FILE`, shared by the agent commands (`run`, `chat`, `acp`, `runner`, `resume`): the MCP
 * servers of a configuration file (`mcpConfig.ts`: the `mcpServers` format of Claude Desktop,
 * Claude Code, Cursor) are connected in the command's scope (`Mcp.connect`, §28) and their tools
 * are the agent's, named `SERVER__TOOL`, through one toolset read at each step's start.
 *
 * - The file is read and checked first, with the command's other arguments: a bad one exits 2
 *   with one line per problem (`--mcp-config mcp.json: mcpServers.files.args: expected an array
 *   of strings`).
 * - The MCP client SDK (`@modelcontextprotocol/client`, an optional peer) and `Mcp.ts` are loaded
 *   only then (a chunk of the bundle); a missing SDK exits 2 with the `npm install` line.
 * - A server that fails to start (or to initialize, or in time) is one warning line on stderr,
 *   `mcp: server "files" failed: could not start: spawn npx ENOENT`, and the command goes on
 *   without its tools (`chat`'s `/mcp` shows it with its error).
 * - Each call of a server's tools asks for approval (§26) unless its entry says `"approval":
 *   "never"` or names the tool in `autoApprove`; `--ask SERVER__TOOL` makes the calls of that
 *   tool ask whatever the file says. A name `--ask` gives is checked against the tools the
 *   servers listed once connected (exit 2 for none of that name); a tool of a server that failed
 *   cannot be checked and is taken as it is.
 */
import { Options } from "@effect/cli"
import { Console, Effect, Option, type Scope } from "effect"
import { toolName } from "../../internal/mcp/names.js"
import { escapeLine } from "../../internal/terminalText.js"
import type * as Mcp from "../../Mcp.js"
import type * as Tool from "../../Tool.js"
import { type CliExit, exit } from "../exit.js"
import * as McpConfig from "../mcpConfig.js"
import { loadWith } from "../optional.js"
import { VERSION } from "../version.js"
import { checkAsk, withAsk } from "./askFlag.js"

/** `--mcp-config FILE`: connect the MCP servers of this file (none by default). */
export const mcpConfigOption = Options.text("mcp-config").pipe(
  Options.withPseudoName("file"),
  Options.optional,
  Options.withDescription(
    "connect the MCP servers of this JSON file (its \"mcpServers\", as Claude Desktop, Claude Code or Cursor write it): their tools are the agent's, named SERVER__TOOL; each call asks for approval unless the entry says \"approval\": \"never\" (§28)"
  )
)

/**
 * The servers of `--mcp-config FILE` (`undefined` without the flag), or exit 2 with each
 * problem on a line of its own: `--mcp-config mcp.json: mcpServers.files.args: expected an array
 * of strings`.
 */
export const readMcpServers = (file: Option.Option<string>) =>
  Option.isNone(file)
    ? Effect.succeed(undefined)
    : McpConfig.read(file.value).pipe(
      Effect.catchTag("McpConfigError", (e) =>
        exit(2, e.message.split("\n").map((line) => escapeLine(`--mcp-config ${line}`)).join("\n")))
    )

/** Connected servers, as a command gives them to its agents and views. */
export interface McpTools {
  /** The servers' tools (those `--ask` names asking for approval), for `Agent.make({ toolsets })`. */
  readonly toolset: Tool.Toolset
  /** Each server's state, tools and error (`chat`'s `/mcp`). */
  readonly servers: () => ReadonlyArray<Mcp.ServerStatus>
}

/** Whether `name` may be a tool of one of `servers` (`SERVER__…`). */
const mcpToolName = (servers: ReadonlyArray<Mcp.ServerConfig>) => (name: string): boolean =>
  servers.some((server) => name.startsWith(toolName(server.name, "")))

/**
 * The options of `checkAsk` for a command with `servers` (`--mcp-config`): a name of their form
 * (`SERVER__…`) is checked once they are connected (`connectMcp`), not with the command's other
 * tools, and the list of tools says they come too. None without servers.
 */
export const askLater = (servers: ReadonlyArray<Mcp.ServerConfig> | undefined) =>
  servers === undefined || servers.length === 0 ? undefined : {
    later: mcpToolName(servers),
    more: `and the MCP servers' tools (${servers.map((server) => `${toolName(server.name, "")}TOOL`).join(", ")})`
  }

/**
 * A server's `McpError` message without its leading `MCP server "NAME" `, for a line that names
 * the server already (the warning here, the chat's `/mcp`).
 */
export const faultText = (status: Mcp.ServerStatus): string => {
  const message = status.error?.message ?? "failed"
  const prefix = `MCP server "${status.name}" `
  return message.startsWith(prefix) ? message.slice(prefix.length) : message
}

/**
 * Connects `servers` (the file's, from `readMcpServers`) in the current scope, for `command`
 * (named in a missing package's message): `undefined` when there are none (nothing loaded). One
 * warning line on stderr for each server that failed. Then checks the names of `ask` that are
 * not among `tools` (the command's other tools) against the servers' tools: exit 2 naming the
 * first that is none of them (the tools listed), unless it names a tool of a server that failed.
 */
export const connectMcp = (
  command: string,
  servers: ReadonlyArray<Mcp.ServerConfig> | undefined,
  ask: ReadonlyArray<string>,
  tools: ReadonlyArray<string>
): Effect.Effect<McpTools | undefined, CliExit, Scope.Scope> =>
  Effect.gen(function*() {
    if (servers === undefined) return undefined
    const Mcp = yield* loadWith(`${command} --mcp-config`, ["@modelcontextprotocol/client"], () => import("../../Mcp.js"))
      .pipe(Effect.catchTag("MissingPackages", (e) => exit(2, e.message)))
    const connection = yield* Mcp.connect(servers, { clientName: "agent-loop", clientVersion: VERSION }).pipe(
      Effect.catchTag("McpError", (e) => exit(2, escapeLine(`--mcp-config: ${e.message}`)))
    )
    const failed = connection.servers().filter((server) => server.state === "failed")
    for (const server of failed) yield* Console.error(escapeLine(`mcp: server "${server.name}" failed: ${faultText(server)}`))
    const names = connection.tools().map((tool) => tool.name)
    const unchecked = mcpToolName(servers.filter((server) => failed.some((f) => f.name === server.name)))
    yield* checkAsk(ask.filter((name) => !tools.includes(name) && !unchecked(name)), [...tools, ...names])
    const set = connection.toolset
    return {
      toolset: ask.length === 0
        ? set
        : { name: set.name, version: set.version, tools: () => withAsk(set.tools(), ask) },
      servers: connection.servers
    }
  })
