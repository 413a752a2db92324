/**
 * The MCP servers of an ACP session (§22 item 12, §28): the `mcpServers` of `session/new` and
 * `session/load` checked and converted to `Mcp.ServerConfig`s (pure: no I/O, and only the types
 * of `Mcp`, whose SDK the agent loads when a session has servers), the params of those two
 * methods (`newSessionParams`, `loadSessionParams`: the SDK's check of them is replaced by ours,
 * which names the entry that is wrong), the titles of the servers' tools, and the notice of a
 * server that could not start.
 *
 * - ACP's shapes: stdio `{name, command, args, env: [{name, value}]}` (a `type: "stdio"` is
 *   taken too), `{type: "http", name, url, headers: [{name, value}]}` and `{type: "sse", …}`
 *   → `{type: "stdio", name, command, args, env: {NAME: VALUE}}` and `{type: "http" | "sse",
 *   name, url, headers: {NAME: VALUE}}`. `args`, `env` and `headers` may be `null` or left
 *   out (none); `_meta` is ignored. Every server takes the defaults of `Mcp.connect`: its calls
 *   ask for approval (`approval: "always"`), through the editor's `session/request_permission`.
 * - Refused, naming the entry by its index and name (the caller answers -32602 and starts
 *   nothing): `mcpServers` that is not an array, an entry that is not an object, a name that is
 *   not a non-empty string or that an earlier entry has, a `type` other than `http`, `sse`,
 *   `stdio` or none, a command that is not a non-empty string, an `args` that is not an array of
 *   strings, a URL that is not `http:` or `https:`, an `env` or `headers` entry that is not
 *   `{name, value}` strings with a non-empty name. The values of `env` and `headers` are
 *   secrets: no message quotes them.
 *
 * @since 0.1.0
 */
import type { McpConnection, ServerConfig } from "../../Mcp.js"

/**
 * The checked servers, or why they are refused (one line naming the entry).
 *
 * @since 0.1.0
 * @category models
 */
export type Servers =
  | { readonly ok: true; readonly servers: ReadonlyArray<ServerConfig> }
  | { readonly ok: false; readonly message: string }

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A value in a message: `nothing` when absent, else its JSON cut to 60 characters. */
const shown = (value: unknown): string => {
  if (value === undefined) return "nothing"
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    text = String(value)
  }
  return text.length > 60 ? `${text.slice(0, 59)}…` : text
}

const isName = (value: unknown): value is string => typeof value === "string" && value.trim() !== ""

/** `env` or `headers`: `[{name, value}]` (null or absent: none) as a record; a message naming the bad entry. */
const pairsOf = (
  value: unknown,
  field: "env" | "headers"
): { readonly ok: true; readonly pairs: Record<string, string> } | { readonly ok: false; readonly message: string } => {
  const pairs: Record<string, string> = {}
  if (value === undefined || value === null) return { ok: true, pairs }
  if (!Array.isArray(value)) return { ok: false, message: `"${field}" must be an array of {name, value} objects` }
  for (let i = 0; i < value.length; i++) {
    const entry: unknown = value[i]
    if (!isRecord(entry) || typeof entry.name !== "string" || typeof entry.value !== "string") {
      return { ok: false, message: `"${field}[${i}]" must be an object {name, value} of strings` }
    }
    if (entry.name.trim() === "") return { ok: false, message: `"${field}[${i}].name" must be a non-empty string` }
    pairs[entry.name] = entry.value
  }
  return { ok: true, pairs }
}

/** One entry, or a message about it (without its prefix). */
const serverOf = (
  entry: Record<string, unknown>,
  name: string
): { readonly ok: true; readonly server: ServerConfig } | { readonly ok: false; readonly message: string } => {
  const type = entry.type
  if (type === undefined || type === null || type === "stdio") {
    if (!isName(entry.command)) return { ok: false, message: `"command" must be a non-empty string, got ${shown(entry.command)}` }
    const args = entry.args ?? []
    if (!Array.isArray(args)) return { ok: false, message: `"args" must be an array of strings, got ${shown(args)}` }
    const bad = args.findIndex((a) => typeof a !== "string")
    if (bad !== -1) return { ok: false, message: `"args[${bad}]" must be a string, got ${shown(args[bad])}` }
    const env = pairsOf(entry.env, "env")
    if (!env.ok) return env
    return { ok: true, server: { type: "stdio", name, command: entry.command, args: args as Array<string>, env: env.pairs } }
  }
  if (type !== "http" && type !== "sse") {
    return { ok: false, message: `"type" must be "http", "sse" or absent (stdio), got ${shown(type)}` }
  }
  const url = entry.url
  let parsed: URL | undefined
  try {
    parsed = typeof url === "string" ? new URL(url) : undefined
  } catch {
    parsed = undefined
  }
  if (parsed === undefined || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
    return { ok: false, message: `"url" must be an http or https URL, got ${shown(url)}` }
  }
  const headers = pairsOf(entry.headers, "headers")
  if (!headers.ok) return headers
  return { ok: true, server: { type, name, url: url as string, headers: headers.pairs } }
}

/**
 * The servers of `mcpServers` (ACP's shapes) as `Mcp.ServerConfig`s, or the message of the
 * first entry that is wrong (`mcpServers[1] ("files"): "command" must be a non-empty string, got
 * nothing`; see the module comment). `null` is no servers, as the SDK's schema reads it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const serversOf = (value: unknown): Servers => {
  if (value === null) return { ok: true, servers: [] }
  if (!Array.isArray(value)) {
    return { ok: false, message: `mcpServers: an array of MCP servers is required (empty for none), got ${shown(value)}` }
  }
  const servers: Array<ServerConfig> = []
  const seen = new Map<string, number>()
  for (let i = 0; i < value.length; i++) {
    const entry: unknown = value[i]
    if (!isRecord(entry)) return { ok: false, message: `mcpServers[${i}]: an object is required, got ${shown(entry)}` }
    if (!isName(entry.name)) {
      return { ok: false, message: `mcpServers[${i}]: "name" must be a non-empty string, got ${shown(entry.name)}` }
    }
    const name = entry.name
    const at = `mcpServers[${i}] (${JSON.stringify(name)})`
    const earlier = seen.get(name)
    if (earlier !== undefined) {
      return { ok: false, message: `${at}: mcpServers[${earlier}] has this name too; each server needs a name of its own` }
    }
    seen.set(name, i)
    const server = serverOf(entry, name)
    if (!server.ok) return { ok: false, message: `${at}: ${server.message}` }
    servers.push(server.server)
  }
  return { ok: true, servers }
}

/**
 * The params of `session/new` as the handler takes them: `cwd` (checked further by the
 * handler), the servers converted. A failure is thrown by the parser as -32602.
 *
 * @since 0.1.0
 * @category models
 */
export interface NewSessionParams {
  readonly cwd: string
  readonly servers: ReadonlyArray<ServerConfig>
}

/**
 * The params of `session/load`: `sessionId` and those of `session/new`.
 *
 * @since 0.1.0
 * @category models
 */
export interface LoadSessionParams extends NewSessionParams {
  readonly sessionId: string
}

/**
 * Reads the params of `session/new` (`{cwd, mcpServers, …}`; ACP's other fields are not used),
 * or the message of what is wrong.
 *
 * @since 0.1.0
 * @category constructors
 */
export const newSessionParams = (
  params: unknown
): { readonly ok: true; readonly params: NewSessionParams } | { readonly ok: false; readonly message: string } => {
  if (!isRecord(params)) return { ok: false, message: `the params must be an object, got ${shown(params)}` }
  if (typeof params.cwd !== "string") return { ok: false, message: `cwd: a string is required, got ${shown(params.cwd)}` }
  const servers = serversOf(params.mcpServers)
  if (!servers.ok) return servers
  return { ok: true, params: { cwd: params.cwd, servers: servers.servers } }
}

/**
 * Reads the params of `session/load` (`{sessionId, cwd, mcpServers, …}`), or the message of what
 * is wrong.
 *
 * @since 0.1.0
 * @category constructors
 */
export const loadSessionParams = (
  params: unknown
): { readonly ok: true; readonly params: LoadSessionParams } | { readonly ok: false; readonly message: string } => {
  if (isRecord(params) && typeof params.sessionId !== "string") {
    return { ok: false, message: `sessionId: a string is required, got ${shown(params.sessionId)}` }
  }
  const rest = newSessionParams(params)
  if (!rest.ok) return rest
  return { ok: true, params: { ...rest.params, sessionId: (params as { readonly sessionId: string }).sessionId } }
}

/**
 * The label of a tool of `connections` in a call's title (`replay.ts`'s `toolTitle`): `SERVER:
 * TOOL`, the server's name and the tool's own name on it (the model's name for it,
 * `SERVER__TOOL`, is the call's `name`); undefined for a tool of no connected server.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolLabel = (connections: () => ReadonlyArray<McpConnection>) => (name: string): string | undefined => {
  for (const connection of connections()) {
    for (const server of connection.servers()) {
      for (const tool of server.tools) if (tool.name === name) return `${server.name}: ${tool.remoteName}`
    }
  }
  return undefined
}

/**
 * The `notice` session update of a server that could not start, `message` its `McpError`'s
 * (ACP's `notice`: information
 * for the user that is not part of the session's history, sent only to a client that offers
 * `clientCapabilities.session.notices`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const failedNotice = (server: string, message: string) => ({
  sessionUpdate: "notice" as const,
  severity: "warning" as const,
  title: `MCP server ${JSON.stringify(server)} is not available`,
  description: `${message}; the session goes on without its tools.`
})
