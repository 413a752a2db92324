/**
 * MCP tools (§28): the tools of Model Context Protocol servers as `Tool`s of an agent, over the
 * official TypeScript SDK (`@modelcontextprotocol/client`, an optional peer: install it to use
 * this module; nothing else of the package loads it).
 *
 * - `Mcp.connect(servers)` connects each server (stdio: a command with arguments and
 *   environment; `http`: a streamable HTTP URL with headers; `sse`: the legacy HTTP+SSE
 *   transport) in the current `Scope`, and closes them all when the scope closes. `Mcp.layer`
 *   does the same as a layer of the `Mcp` service.
 * - Its `toolset` goes in `Agent.make({ toolsets })`: each server tool is a tool named
 *   `SERVER__TOOL` (`Mcp.toolName`), whose parameters are the server's JSON Schema, checked
 *   before the call (a bad call gets the §8 `INVALID_ARGUMENTS` result); a tool that runs only
 *   as an MCP task (`taskSupport: "required"`) is left out. A server that says its tool list
 *   changed is listed again at once; the agent sees the new list from its next step (§8).
 * - A call's result maps onto content blocks (text, images; resources and links as text;
 *   structured content as JSON text when the server wrote no text), its text bounded
 *   (`maxResultBytes`, 64 KiB by default); an `isError` result is an error result
 *   (`TOOL_FAILED`) with the server's content.
 * - Cancelling the turn aborts the request (the SDK sends `notifications/cancelled`); each call
 *   has a timeout (`timeoutMs`, 120 s by default); the server's progress notifications are the
 *   call's `tool/progress` events.
 * - Faults are `McpError`s with a `reason` and an error result for the call, never a failed
 *   agent: a server that cannot start, refuses initialization or does not answer it is `failed`
 *   (its status says why; it offers no tools); one that exits or sends a malformed message
 *   mid-call fails that call and is started again on the next call of one of its tools, at most
 *   `maxRestarts` times in a row (3 by default) without a call that succeeds between; the call
 *   after that fails `gave-up`, and the server is `failed` (its tools are withdrawn).
 * - Servers are untrusted: every call of their tools asks for approval (§26) unless the server's
 *   `approval` is `"never"` or the tool is in its `autoApprove`; the question names the tool, and
 *   so the server (`SERVER__TOOL`).
 * - The values of `env` and `headers` are secrets: they are replaced by `***` in every error,
 *   status and result text, so that no log, span or transcript shows them.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent } from "effect-agent-loop"
 * import * as Mcp from "effect-agent-loop/mcp"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const mcp = yield* Mcp.connect([
 *     { type: "stdio", name: "files", command: "npx", args: ["@modelcontextprotocol/server-filesystem", "/tmp/work"] },
 *     { type: "http", name: "issues", url: "http://127.0.0.1:3001/mcp", headers: { Authorization: "Bearer …" } }
 *   ])
 *   const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
 *   yield* agent.followup("List the files of /tmp/work")
 * }))
 * ```
 *
 * @since 0.1.0
 */
import { Client, SSEClientTransport, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/client/stdio"
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/client/validators/ajv"
import { Context, Deferred, Duration, Effect, Layer, Schema, type Scope } from "effect"
import { messageOf } from "./internal/cause.js"
import { toolName as nameOf } from "./internal/mcp/names.js"
import { closeClient, pidOf, stderrTail } from "./internal/mcp/processes.js"
import { redactor, resultOf } from "./internal/mcp/results.js"
import type { ToolDefinition } from "./Model.js"
import * as Tool from "./Tool.js"

/**
 * A server started as a child process speaking MCP on its stdin and stdout. `env` is added to
 * the SDK's default environment (`HOME`, `PATH`, `USER`… of this process); its values are secrets.
 *
 * @since 0.1.0
 * @category models
 */
export interface StdioServer extends ServerOptions {
  readonly type: "stdio"
  readonly name: string
  readonly command: string
  readonly args?: ReadonlyArray<string> | undefined
  readonly env?: { readonly [name: string]: string } | undefined
  readonly cwd?: string | undefined
}

/**
 * A server over HTTP: `"http"` is the streamable HTTP transport, `"sse"` the legacy HTTP+SSE
 * one. `headers` go with every request; their values are secrets.
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpServer extends ServerOptions {
  readonly type: "http" | "sse"
  readonly name: string
  readonly url: string
  readonly headers?: { readonly [name: string]: string } | undefined
}

/**
 * What every server may set.
 *
 * @since 0.1.0
 * @category models
 */
export interface ServerOptions {
  /**
   * Whether a call of this server's tools needs approval (§26 rule 1): `"always"` (the default:
   * servers are untrusted) or `"never"` (a server you trust).
   */
  readonly approval?: "always" | "never" | undefined
  /** Tools (by their name on the server) whose calls need no approval, whatever `approval` says. */
  readonly autoApprove?: ReadonlyArray<string> | undefined
  /** Milliseconds a call may take before it is cancelled and fails (`timeout`); default 120,000. */
  readonly timeoutMs?: number | undefined
  /** Milliseconds to start and initialize the server; default 30,000. */
  readonly connectTimeoutMs?: number | undefined
  /** Restarts in a row (without a call that succeeds between) of a server that died; default 3. */
  readonly maxRestarts?: number | undefined
  /** The most UTF-8 bytes of text a result keeps (the rest is cut, with a note); default 65,536. */
  readonly maxResultBytes?: number | undefined
}

/**
 * One MCP server to connect.
 *
 * @since 0.1.0
 * @category models
 */
export type ServerConfig = StdioServer | HttpServer

/**
 * Why an MCP server failed (§28): `config` (a bad configuration: duplicate or empty names, a
 * bad URL), `start` (the process or the connection could not be made), `initialize` (the server
 * refused or broke the handshake), `timeout` (no answer in time), `exited` (the server's process
 * or connection ended), `malformed` (a message that is not JSON-RPC), `protocol` (an error
 * response), `gave-up` (it was restarted `maxRestarts` times in a row and failed again),
 * `closed` (its connection was closed with its scope). The message never contains a secret.
 *
 * @since 0.1.0
 * @category errors
 */
export class McpError extends Schema.TaggedError<McpError>()("McpError", {
  server: Schema.String,
  reason: Schema.Literal("config", "start", "initialize", "timeout", "exited", "malformed", "protocol", "gave-up", "closed"),
  message: Schema.String
}) {}

/**
 * A tool of a connected server: its name for the model (`SERVER__TOOL`), its own name on the
 * server, and its description.
 *
 * @since 0.1.0
 * @category models
 */
export interface ServerTool {
  readonly name: string
  readonly remoteName: string
  readonly description: string
}

/**
 * A server as it stands: `connected`; `exited` (its process or connection ended, or it sent a
 * message that is not JSON-RPC: its tools stay offered, and the next call of one starts it again,
 * `error` says what happened); `failed` (it could not start, or gave up: it offers no tools;
 * `error` says why); or `closed` (its scope closed); its tools; the name and version it reported; how many times it was
 * restarted in a row; the last fault, if any.
 *
 * @since 0.1.0
 * @category models
 */
export interface ServerStatus {
  readonly name: string
  readonly type: ServerConfig["type"]
  readonly state: "connected" | "exited" | "failed" | "closed"
  readonly tools: ReadonlyArray<ServerTool>
  readonly server?: { readonly name: string; readonly version: string } | undefined
  readonly restarts: number
  readonly error?: McpError | undefined
}

/**
 * Connected MCP servers: the `toolset` for `Agent.make({ toolsets })`, the current tools, and
 * each server's status (for a `/mcp` view).
 *
 * @since 0.1.0
 * @category models
 */
export interface McpConnection {
  readonly toolset: Tool.Toolset
  readonly tools: () => ReadonlyArray<Tool.Tool<any>>
  readonly servers: () => ReadonlyArray<ServerStatus>
}

/**
 * The `Mcp` service: connected servers (`Mcp.layer`).
 *
 * @since 0.1.0
 * @category tags
 */
export class Mcp extends Context.Tag("effect-agent-loop/Mcp")<Mcp, McpConnection>() {}

/** A server's connection and what is known of it. */
interface Server {
  readonly options: ConnectOptions
  readonly config: ServerConfig
  readonly redact: (text: string) => string
  readonly lock: Effect.Semaphore
  readonly timeoutMs: number
  readonly connectTimeoutMs: number
  readonly maxRestarts: number
  readonly maxResultBytes: number
  /** The live client, or none (not yet, failed, or died: the next call starts it again). */
  client: Client | undefined
  /** The live stdio server's process (its launcher, when started through one). */
  pid: number | null
  /** Fails when the live client dies or breaks, so that its calls in flight fail at once. */
  broken: Deferred.Deferred<never, McpError> | undefined
  state: ServerStatus["state"]
  tools: ReadonlyArray<Tool.Tool<any>>
  listed: ReadonlyArray<ServerTool>
  info: { readonly name: string; readonly version: string } | undefined
  restarts: number
  error: McpError | undefined
  /** The last 2,000 characters a stdio server wrote on stderr. */
  stderr: string
  /** The progress reports' receivers of the calls in flight, by their progress token. */
  readonly progress: Map<string, (report: Tool.ToolProgress) => void>
  /** The last progress token given. */
  tokens: number
  /** The listing of the tools after the server said they changed, while it runs (`relist`). */
  refreshing: Promise<void> | undefined
  /** How many listings `relist` started (only the last one's list is kept). */
  relists: number
}

/** `options.timeoutMs` and the like: a positive number, or the default. */
const positive = (value: number | undefined, fallback: number): number => value === undefined || !(value > 0) ? fallback : value

/** `maxRestarts`: a whole number ≥ 0, or 3. */
const restartsOption = (value: number | undefined): number =>
  value === undefined || Number.isNaN(value) ? 3 : Math.max(0, Math.floor(value))

/** The checks of `connect` before anything starts: names, commands, URLs. */
const checkConfig = (servers: ReadonlyArray<ServerConfig>): McpError | undefined => {
  const seen = new Set<string>()
  const prefixes = new Map<string, string>()
  for (const server of servers) {
    const name = typeof server.name === "string" ? server.name : ""
    const bad = (message: string) => new McpError({ server: name, reason: "config", message: `MCP server "${name}": ${message}` })
    if (name.trim() === "") return bad("the name is empty")
    if (seen.has(name)) return bad("two servers have this name")
    seen.add(name)
    const prefix = nameOf(name, "")
    const other = [...prefixes.entries()].find(([p]) => p === prefix)
    if (other !== undefined) return bad(`its tools would have the names of server "${other[1]}"'s (both are ${prefix}TOOL)`)
    prefixes.set(prefix, name)
    if (server.type === "stdio") {
      if (typeof server.command !== "string" || server.command.trim() === "") return bad("the command is empty")
    } else if (server.type === "http" || server.type === "sse") {
      let url: URL
      try {
        url = new URL(server.url)
      } catch {
        return bad("the url is not a URL")
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") return bad("the url is not http or https")
      if (url.username !== "" || url.password !== "") {
        return bad("the url has a user name or password (fetch refuses them): give credentials in headers")
      }
    } else {
      return bad(`the type is not "stdio", "http" or "sse"`)
    }
  }
  return undefined
}

/** The secrets of a server's configuration: the values of its `env` and `headers`. */
const secretsOf = (config: ServerConfig): ReadonlyArray<string> => {
  const values = Object.values((config.type === "stdio" ? config.env : config.headers) ?? {})
  if (config.type !== "stdio") {
    // A URL's query values too (`?token=…`): the URL parsed in `checkConfig` already.
    for (const value of new URL(config.url).searchParams.values()) values.push(value)
  }
  return values.filter((v) => typeof v === "string")
}

const errorCode = (e: unknown): string | undefined => {
  const code = (e as { code?: unknown } | null)?.code ?? (e as { cause?: { code?: unknown } } | null)?.cause?.code
  return typeof code === "string" ? code : undefined
}

/**
 * Whether `e` is a message the transport could not read as JSON-RPC: the SDK's schema check of
 * each message it reads (a `ZodError`), or a message of no JSON-RPC kind. What else the SDK
 * reports on `onerror` is not the server's fault: a late answer to a call that was cancelled (a
 * response for an unknown id), a progress report of a finished call.
 */
const notJsonRpc = (e: unknown): boolean => {
  const name = (e as { name?: unknown } | null)?.name
  return e instanceof SyntaxError || name === "ZodError" || /^Unknown message type/.test(messageOf(e))
}

/** Whether `e` says a result was not what MCP says it is (a JSON-RPC answer of the wrong shape). */
const isMalformed = (e: unknown): boolean => notJsonRpc(e) || errorCode(e) === "INVALID_RESULT"

/**
 * The message of a schema error on one line: the SDK's messages end with the JSON of the
 * schema's issues, each written here as `path: message`.
 */
const schemaMessage = (e: unknown): string => {
  let text = messageOf(e)
  const at = text.indexOf("[")
  if (at >= 0) {
    try {
      const issues: unknown = JSON.parse(text.slice(at))
      if (Array.isArray(issues)) {
        const parts = issues.map((issue: { path?: unknown; message?: unknown }) =>
          `${Array.isArray(issue?.path) && issue.path.length > 0 ? `${issue.path.join(".")}: ` : ""}${String(issue?.message)}`
        )
        text = `${text.slice(0, at)}${parts.join("; ")}`
      }
    } catch {
      // Not JSON: the message as it is.
    }
  }
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > 300 ? `${line.slice(0, 299)}…` : line
}

/** A fault of `server` as an `McpError`: its reason and a redacted message with stderr's tail. */
const faultOf = (server: Server, reason: McpError["reason"], detail: string): McpError => {
  const tail = stderrTail(server.stderr)
  const text = `MCP server "${server.config.name}" ${detail}${tail === "" ? "" : ` (stderr: ${tail})`}`
  return new McpError({ server: server.config.name, reason, message: server.redact(text) })
}

/** An error while connecting: the process or connection could not be made, or the handshake failed. */
const connectFault = (server: Server, e: unknown): McpError => {
  if (e instanceof McpError) return e
  const code = errorCode(e)
  const message = messageOf(e)
  if (code === "CONNECTION_CLOSED" || /connection closed/i.test(message)) {
    const what = server.config.type === "stdio" ? "exited" : "closed the connection"
    return faultOf(server, "start", `${what} before it initialized`)
  }
  if (
    code === "ENOENT" || code === "EACCES" || code === "ECONNREFUSED" || code === "ENOTFOUND" ||
    /closed|spawn|fetch failed|ECONNREFUSED/i.test(message)
  ) {
    const what = server.config.type === "stdio" ? "could not start" : "could not connect"
    return faultOf(server, "start", `${what}: ${withCode(message, code)}`)
  }
  if (isMalformed(e)) return faultOf(server, "malformed", `sent a malformed message while initializing: ${schemaMessage(e)}`)
  return faultOf(server, "initialize", `refused initialization: ${message}`)
}

/** `message`, and a system error's `code` after it unless it says it already ("fetch failed (ECONNREFUSED)"). */
const withCode = (message: string, code: string | undefined): string =>
  code === undefined || !/^(?:E[A-Z]+|UND_ERR_[A-Z_]+)$/.test(code) || message.includes(code) ? message : `${message} (${code})`

/** The codes of an HTTP server that cannot be reached (any more): refused, reset, gone. */
const UNREACHABLE = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "UND_ERR_SOCKET", "UND_ERR_CLOSED"])

/** An error of a call in flight. */
const callFault = (server: Server, e: unknown): McpError => {
  if (e instanceof McpError) return e
  const code = errorCode(e)
  const message = messageOf(e)
  if (code === "CONNECTION_CLOSED" || /connection closed/i.test(message)) {
    return faultOf(server, "exited", `exited during the call: ${message}`)
  }
  if ((code !== undefined && UNREACHABLE.has(code)) || /fetch failed/i.test(message)) {
    return faultOf(server, "exited", `could not be reached: ${withCode(message, code)}`)
  }
  if (isMalformed(e)) return faultOf(server, "malformed", `sent a malformed result: ${schemaMessage(e)}`)
  return faultOf(server, "protocol", `answered with an error: ${message}`)
}

/** The transport of a server's configuration (a stdio server's stderr tail kept on `server`). */
const transportOf = (server: Server) => {
  const config = server.config
  if (config.type === "stdio") {
    const transport = new StdioClientTransport({
      command: config.command,
      args: [...(config.args ?? [])],
      env: { ...getDefaultEnvironment(), ...(config.env ?? {}) },
      ...(config.cwd !== undefined ? { cwd: config.cwd } : {}),
      stderr: "pipe"
    })
    transport.stderr?.on("data", (chunk: Buffer | string) => {
      server.stderr = (server.stderr + chunk.toString()).slice(-2000)
    })
    return transport
  }
  const requestInit = { headers: { ...(config.headers ?? {}) } }
  return config.type === "http"
    ? new StreamableHTTPClientTransport(new URL(config.url), { requestInit })
    : new SSEClientTransport(new URL(config.url), { requestInit })
}

const validator = new AjvJsonSchemaValidator()

/** `inputSchema` as provider parameters: an object schema, without `$schema`. */
const parametersOf = (input: unknown): ToolDefinition["parameters"] => {
  const schema = (typeof input === "object" && input !== null ? input : {}) as Record<string, unknown>
  const { $schema: _, ...rest } = schema
  return rest.type === "object" ? rest : { ...rest, type: "object", properties: rest.properties ?? {} }
}

/**
 * The parameters `Schema` of a server tool: an object, checked against the server's JSON Schema
 * (a schema the validator cannot compile checks nothing more: the server checks its own input).
 */
const argumentsSchema = (input: unknown): Schema.Schema<{ readonly [key: string]: unknown }> => {
  let check: ((value: unknown) => { readonly valid: boolean; readonly errorMessage?: string | undefined }) | undefined
  try {
    check = validator.getValidator(input as never)
  } catch {
    check = undefined
  }
  const base = Schema.Record({ key: Schema.String, value: Schema.Unknown })
  return check === undefined ? base : base.pipe(Schema.filter((value) => {
    const verdict = check(value)
    return verdict.valid || (verdict.errorMessage ?? "the arguments do not match the tool's schema")
  }))
}

/** One server tool as a `Tool`. */
const toolOf = (server: Server, listed: ServerTool, input: unknown, bump: () => void): Tool.Tool<any> => {
  const parameters = argumentsSchema(input)
  return {
    name: listed.name,
    description: listed.description,
    parameters,
    exclusive: false,
    approval: server.config.approval === "never" || (server.config.autoApprove ?? []).includes(listed.remoteName)
      ? "never"
      : "always",
    definition: { name: listed.name, description: listed.description, parameters: parametersOf(input) },
    execute: (args, ctx) =>
      call(server, listed.remoteName, args, ctx, bump).pipe(
        Effect.mapError((e) => new Tool.ToolError({ message: e.message, cause: e }))
      )
  }
}

/** Records a server's listed tools (`tools/list`). */
const setTools = (server: Server, tools: ReadonlyArray<unknown>, bump: () => void): void => {
  const listed: Array<ServerTool> = []
  const mapped: Array<Tool.Tool<any>> = []
  for (const raw of tools) {
    const t = raw as {
      name?: unknown
      description?: unknown
      title?: unknown
      inputSchema?: unknown
      execution?: { taskSupport?: unknown } | undefined
    }
    if (typeof t.name !== "string" || t.name === "") continue
    // A tool that runs only as an MCP task refuses a plain `tools/call`, the only call made here.
    if (t.execution?.taskSupport === "required") continue
    const description = typeof t.description === "string" && t.description !== ""
      ? t.description
      : typeof t.title === "string"
      ? t.title
      : `${t.name} (MCP server ${server.config.name})`
    const entry = { name: nameOf(server.config.name, t.name), remoteName: t.name, description: server.redact(description) }
    listed.push(entry)
    mapped.push(toolOf(server, entry, t.inputSchema, bump))
  }
  server.listed = listed
  server.tools = mapped
  bump()
}

/**
 * Lists a server's tools again after it said they changed (`notifications/tools/list_changed`);
 * `refreshing` is the listing while it runs, for `call` to wait for. A listing that fails keeps
 * the tools listed before.
 */
const relist = (server: Server, client: Client, bump: () => void): void => {
  const mine = ++server.relists
  const listing: Promise<void> = client.listTools(undefined, { cacheMode: "refresh" }).then(
    (listed) => {
      if (server.client === client && server.relists === mine) setTools(server, listed.tools, bump)
    },
    () => {}
  ).finally(() => {
    if (server.refreshing === listing) server.refreshing = undefined
  })
  server.refreshing = listing
}

/** A live connection ended (`exited` in `servers()`): the next call starts the server again. */
const broke = (server: Server, error: McpError): void => {
  server.client = undefined
  server.error = error
  if (server.state === "connected") server.state = "exited"
}

/** Starts and initializes a server, and lists its tools. */
const open = (server: Server, options: ConnectOptions, bump: () => void): Effect.Effect<void, McpError> =>
  Effect.gen(function*() {
    const broken = yield* Deferred.make<never, McpError>()
    server.stderr = ""
    const transport = transportOf(server)
    const client: Client = new Client(
      { name: options.clientName ?? "effect-agent-loop", version: options.clientVersion ?? "0.1.0" },
      {
        capabilities: {},
        listChanged: {
          tools: {
            // Listed again at once (the SDK waits 300 ms by default) and by `relist`, so that a
            // call during which the server said its tools changed returns once the new list is
            // known: the agent's next step offers it (§8).
            autoRefresh: false,
            debounceMs: 0,
            onChanged: () => {
              if (server.client === client) relist(server, client, bump)
            }
          }
        }
      }
    )
    client.onclose = () => {
      if (server.client !== client) return
      const error = faultOf(server, "exited", "exited")
      broke(server, error)
      Deferred.unsafeDone(broken, Effect.fail(error))
    }
    let opening = true
    // A message that is not JSON-RPC breaks the connection (the SDK only reports it: the request
    // it answered would wait for its timeout); the next call starts the server again.
    client.onerror = (e) => {
      if ((server.client !== client && !opening) || !notJsonRpc(e)) return
      const error = faultOf(server, "malformed", `sent a message that is not JSON-RPC (${schemaMessage(e)})`)
      if (server.client === client) broke(server, error)
      Deferred.unsafeDone(broken, Effect.fail(error))
      Effect.runFork(closeClient(client, pidOf(transport)))
    }
    // The server's progress reports go to their call by our own token (`call`): the SDK's
    // `onprogress` loses a report read together with its call's answer (the answer is handled at
    // once and forgets the call, a notification on a later microtask), so a call's last report
    // would come or not by chance. A report of a call that ended is ignored.
    client.setNotificationHandler("notifications/progress", (notification) => {
      const { message, progress, progressToken, total } = notification.params
      server.progress.get(String(progressToken))?.({ progress, total, message })
    })
    // A failure or an interruption (a signal while connecting) leaves no process behind.
    const closeQuietly = closeClient(client, pidOf(transport))
    const timeout = Duration.millis(server.connectTimeoutMs)
    const listed = yield* Effect.tryPromise({
      try: async (signal) => {
        await client.connect(transport, { signal })
        return client.listTools(undefined, { signal })
      },
      catch: (e) => connectFault(server, e)
    }).pipe(
      Effect.raceFirst(Deferred.await(broken)),
      Effect.ensuring(Effect.sync(() => (opening = false))),
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () => faultOf(server, "timeout", `did not initialize within ${server.connectTimeoutMs} ms`)
      }),
      Effect.onError(() => closeQuietly)
    )
    server.pid = pidOf(transport)
    const info = client.getServerVersion()
    server.info = info === undefined ? undefined : { name: info.name, version: info.version }
    server.client = client
    server.broken = broken
    server.state = "connected"
    server.error = undefined
    setTools(server, listed.tools, bump)
  })

/**
 * The live client of a server: the one open, or a new one when it died (at most `maxRestarts`
 * times in a row without a call that succeeds between).
 */
const live = (server: Server, options: ConnectOptions, bump: () => void) =>
  server.lock.withPermits(1)(
    Effect.suspend((): Effect.Effect<readonly [Client, Deferred.Deferred<never, McpError>], McpError> => {
      if (server.state === "closed") {
        return Effect.fail(
          new McpError({ server: server.config.name, reason: "closed", message: `MCP server "${server.config.name}" is closed` })
        )
      }
      if (server.client !== undefined && server.broken !== undefined) {
        return Effect.succeed([server.client, server.broken] as const)
      }
      if (server.restarts >= server.maxRestarts) {
        // It is `failed` from now on, and its tools are withdrawn from the agent's next step.
        const failures = server.restarts + 1
        const error = faultOf(
          server,
          "gave-up",
          `failed ${
            failures === 1 ? "once" : `${failures} times`
          } in a row and is not started again (maxRestarts: ${server.maxRestarts})`
        )
        if (server.state !== "failed") {
          server.state = "failed"
          server.tools = []
          server.listed = []
          bump()
        }
        server.error = error
        return Effect.fail(error)
      }
      server.restarts++
      return Effect.flatMap(
        Effect.tapError(open(server, options, bump), (e) => Effect.sync(() => (server.error = e))),
        () => Effect.succeed([server.client!, server.broken!] as const)
      )
    })
  )

/** Calls `name` on a server: cancelled with the fiber, bounded by `timeoutMs`, failed at once when the server dies. */
const call = (
  server: Server,
  name: string,
  args: unknown,
  ctx: Tool.ToolContext,
  bump: () => void
): Effect.Effect<Tool.ToolOutput, McpError> =>
  Effect.gen(function*() {
    const [client, broken] = yield* live(server, server.options, bump)
    const token = `${++server.tokens}`
    const request = Effect.tryPromise({
      try: (signal) => {
        server.progress.set(token, (p) => {
          Effect.runSync(ctx.progress({
            progress: p.progress,
            total: p.total,
            message: p.message === undefined ? undefined : server.redact(p.message)
          }))
        })
        return client.callTool({ name, arguments: args as Record<string, unknown>, _meta: { progressToken: token } }, {
          signal,
          // Our own timeout bounds the call (below); the SDK's would fire at its default of 60 s.
          timeout: 2_147_483_647
        })
      },
      catch: (e) => callFault(server, e)
    }).pipe(Effect.ensuring(Effect.sync(() => server.progress.delete(token))))
    // A list of tools that changed during the call is known before the call returns (`relist`).
    const relisted = Effect.suspend(() => {
      const listing = server.refreshing
      return listing === undefined ? Effect.void : Effect.promise(() => listing)
    })
    const result = yield* Effect.raceFirst(request, Deferred.await(broken)).pipe(
      Effect.tap(() => relisted),
      Effect.timeoutFail({
        duration: Duration.millis(server.timeoutMs),
        onTimeout: () =>
          faultOf(server, "timeout", `did not answer ${name} within ${server.timeoutMs} ms; the call was cancelled`)
      }),
      Effect.tapError((e) =>
        Effect.sync(() => {
          server.error = e
          // A server that cannot be reached is connected again on the next call (an HTTP
          // connection does not close by itself as a stdio server's process does).
          if (e.reason === "exited" && server.client === client) {
            broke(server, e)
            Effect.runFork(closeClient(client, null))
          }
        })
      )
    )
    server.restarts = 0
    const mapped = resultOf(result, server.maxResultBytes, server.redact)
    return mapped.isError ? { content: mapped.content, isError: true } : { content: mapped.content }
  })

/** `connect`'s work (see there). */
const connectAll = (
  servers: ReadonlyArray<ServerConfig>,
  options: ConnectOptions
): Effect.Effect<McpConnection, McpError, Scope.Scope> =>
  Effect.gen(function*() {
    const bad = checkConfig(servers)
    if (bad !== undefined) return yield* bad
    let version = 0
    const bump = () => {
      version++
    }
    const all: Array<Server> = servers.map((config) => ({
      config,
      options,
      redact: redactor(secretsOf(config)),
      lock: Effect.unsafeMakeSemaphore(1),
      timeoutMs: positive(config.timeoutMs, 120_000),
      connectTimeoutMs: positive(config.connectTimeoutMs, 30_000),
      maxRestarts: restartsOption(config.maxRestarts),
      maxResultBytes: positive(config.maxResultBytes, 65_536),
      client: undefined,
      broken: undefined,
      state: "failed",
      tools: [],
      listed: [],
      info: undefined,
      restarts: 0,
      error: undefined,
      stderr: "",
      progress: new Map(),
      tokens: 0,
      refreshing: undefined,
      relists: 0,
      pid: null
    }))
    yield* Effect.addFinalizer(() =>
      Effect.forEach(all, (server) =>
        Effect.suspend(() => {
          server.state = "closed"
          const client = server.client
          server.client = undefined
          if (server.broken !== undefined) {
            Deferred.unsafeDone(
              server.broken,
              Effect.fail(
                new McpError({
                  server: server.config.name,
                  reason: "closed",
                  message: `MCP server "${server.config.name}" was closed`
                })
              )
            )
          }
          return client === undefined ? Effect.void : closeClient(client, server.pid)
        }), { concurrency: "unbounded", discard: true })
    )
    yield* Effect.forEach(
      all,
      (server) =>
        open(server, options, bump).pipe(
          Effect.catchAll((e) =>
            Effect.sync(() => {
              server.state = "failed"
              server.error = e
            })
          )
        ),
      { concurrency: "unbounded", discard: true }
    )
    const tools = () => all.flatMap((server) => (server.state === "closed" ? [] : server.tools))
    return {
      toolset: { name: "mcp", tools, version: () => version },
      tools,
      servers: () =>
        all.map((server): ServerStatus => ({
          name: server.config.name,
          type: server.config.type,
          state: server.state,
          tools: server.listed,
          server: server.info,
          restarts: server.restarts,
          error: server.error
        }))
    }
  })

/**
 * Options of `connect`: the client's name and version as the servers see them (default
 * `effect-agent-loop`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ConnectOptions {
  readonly clientName?: string | undefined
  readonly clientVersion?: string | undefined
}

/**
 * Connects `servers` (concurrently) in the current scope; closing the scope closes them (a
 * stdio server's process is ended). Fails only for a bad configuration (`reason: "config"`:
 * two servers of one name, an empty name or command, a URL that does not parse); a server that
 * cannot start is `failed` in `servers()` and offers no tools.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as Mcp from "effect-agent-loop/mcp"
 *
 * const names = Effect.scoped(Effect.map(
 *   Mcp.connect([{ type: "stdio", name: "everything", command: "npx", args: ["@modelcontextprotocol/server-everything"] }]),
 *   (mcp) => mcp.tools().map((tool) => tool.name) // ["everything__echo", …]
 * ))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const connect = (
  servers: ReadonlyArray<ServerConfig>,
  options?: ConnectOptions
): Effect.Effect<McpConnection, McpError, Scope.Scope> => connectAll(servers, options ?? {})

/**
 * `connect` as a layer of the `Mcp` service: the servers live as long as the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (servers: ReadonlyArray<ServerConfig>, options?: ConnectOptions): Layer.Layer<Mcp, McpError> =>
  Layer.scoped(Mcp, connect(servers, options))

/**
 * The `Mcp` service's toolset, for `Agent.make({ toolsets: [yield* Mcp.toolset] })`.
 *
 * @since 0.1.0
 * @category accessors
 */
export const toolset: Effect.Effect<Tool.Toolset, never, Mcp> = Effect.map(Mcp, (mcp) => mcp.toolset)

/**
 * The name the model sees for `tool` of `server`: `SERVER__TOOL`, each part with characters
 * other than letters, digits, `_` and `-` replaced by `_`, and cut to 64 characters in all (the
 * providers' limit) with a short hash of the full name when longer.
 *
 * @since 0.1.0
 * @category utils
 */
export const toolName: (server: string, tool: string) => string = nameOf
