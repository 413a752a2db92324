/**
 * Helpers of the MCP tests (`Mcp.test.ts`, `McpFaults.test.ts`): the servers they start (the
 * published `server-everything` and `server-filesystem`, and the test's own under
 * `test/utils/mcp/`), bounded real-time waits for what those processes do, an agent's tool
 * results, and HTTP servers on loopback.
 */
import { McpServer, WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/server"
import { Effect, type Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Path from "node:path"
import { Readable } from "node:stream"
import { z } from "zod"
import type * as Mcp from "../../src/Mcp.js"
import type { SessionEvent } from "../../src/SessionEvent.js"
import { KILLED_EXIT_MS, MCP_WAIT_MS, note } from "./bounds.js"

/** The published servers' programs, run with `process.execPath` (never npx). */
export const EVERYTHING = Path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
/** server-everything's tools as the model sees them (`simulate-research-query` runs only as a task: left out). */
export const EVERYTHING_TOOLS = [
  "everything__echo",
  "everything__get-annotated-message",
  "everything__get-env",
  "everything__get-resource-links",
  "everything__get-resource-reference",
  "everything__get-structured-content",
  "everything__get-sum",
  "everything__get-tiny-image",
  "everything__gzip-file-as-resource",
  "everything__toggle-simulated-logging",
  "everything__toggle-subscriber-updates",
  "everything__trigger-long-running-operation"
]

export const FILESYSTEM = Path.resolve("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
/** The test's servers: raw JSON-RPC lines (`rawServer.mjs MODE LOG`), the SDK's server (`sdkServer.mjs LOG`). */
export const RAW_SERVER = Path.resolve("test/utils/mcp/rawServer.mjs")
export const SDK_SERVER = Path.resolve("test/utils/mcp/sdkServer.mjs")
/** Preloaded into an HTTP server so that it listens on 127.0.0.1 only. */
export const LOOPBACK = Path.resolve("test/utils/mcp/loopback.mjs")

/** `server-everything` on stdio, named `everything`. */
export const everything = (options: Partial<Omit<Mcp.StdioServer, "type">> = {}): Mcp.StdioServer => ({
  type: "stdio",
  name: "everything",
  command: process.execPath,
  args: [EVERYTHING, "stdio"],
  ...options
})

/** The test's SDK server on stdio, named `own`, logging to `log`. */
export const own = (log: string, options: Partial<Omit<Mcp.StdioServer, "type">> = {}): Mcp.StdioServer => ({
  type: "stdio",
  name: "own",
  command: process.execPath,
  args: [SDK_SERVER, log],
  ...options
})

/** The test's raw server in `mode` on stdio, named `raw`, logging to `log`. */
export const raw = (mode: string, log: string, options: Partial<Omit<Mcp.StdioServer, "type">> = {}): Mcp.StdioServer => ({
  type: "stdio",
  name: "raw",
  command: process.execPath,
  args: [RAW_SERVER, mode, log],
  ...options
})

/**
 * `effect`, or a defect naming `what` after `ms` of real time (a `setTimeout`, whatever clock
 * the test runs on): the bound of a wait for a process.
 */
export const within = (what: string, ms = MCP_WAIT_MS) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const started = Date.now()
  return Effect.raceFirst(
    Effect.tap(effect, () => Effect.sync(() => note(`Mcp: ${what}`, Date.now() - started))),
    Effect.async<never>((resume) => {
      const timer = setTimeout(() => resume(Effect.die(new Error(`${what}: not done within ${ms} ms`))), ms)
      return Effect.sync(() => clearTimeout(timer))
    })
  )
}

/** Waits in real time (polls every 10 ms) until `check` holds; dies naming `what` after `ms`. */
export const until = (what: string, check: () => boolean, ms = MCP_WAIT_MS): Effect.Effect<void> =>
  within(what, ms)(Effect.async<void>((resume) => {
    if (check()) return resume(Effect.void)
    const timer = setInterval(() => {
      if (!check()) return
      clearInterval(timer)
      resume(Effect.void)
    }, 10)
    return Effect.sync(() => clearInterval(timer))
  }))

/** The lines of a server's log (`rawServer.mjs`, `sdkServer.mjs`); none before it exists. */
export const lines = (log: string): Array<string> =>
  Fs.existsSync(log) ? Fs.readFileSync(log, "utf8").split("\n").filter((line) => line !== "") : []

/** The pids a server's log recorded, one per start. */
export const pids = (log: string): Array<number> =>
  lines(log).filter((line) => line.startsWith("pid ")).map((line) => Number(line.slice(4)))

/** Whether process `pid` is gone. */
export const gone = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return false
  } catch {
    return true
  }
}

/** SIGKILLs `pid` and waits (bounded) until it is gone. */
export const kill = (pid: number): Effect.Effect<void> =>
  Effect.zipRight(
    Effect.sync(() => process.kill(pid, "SIGKILL")),
    until(`process ${pid} gone after SIGKILL`, () => gone(pid), KILLED_EXIT_MS)
  )

/** A tool result of a log as `[callId, error code or null, content]`. */
export type Result = readonly [string, string | null, ReadonlyArray<unknown>]

/** The tool results of a log, in order. */
export const results = (events: ReadonlyArray<SessionEvent>): Array<Result> =>
  events.filter((e) => e.type === "tool/result").map((e) => {
    const d = e.data as any
    const block = d.message.content[0]
    return [block.toolCallId, d.error?.code ?? null, block.content] as const
  })

/** One text block. */
export const text = (value: string) => ({ type: "text", text: value })

/** A free TCP port on 127.0.0.1 (bound and released: nothing else here takes ports). */
export const freePort: Effect.Effect<number> = Effect.async<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** A child process's exit, awaited (bounded) unless it already exited. */
const exited = (child: ChildProcess, what: string): Effect.Effect<void> =>
  child.exitCode !== null || child.signalCode !== null
    ? Effect.void
    : within(what, KILLED_EXIT_MS)(Effect.async<void>((resume) => {
      child.once("exit", () => resume(Effect.void))
    }))

/**
 * `server-everything` over streamable HTTP on a free loopback port, as a child process: ready
 * once it says it listens (bounded); killed when the scope closes. `stop` kills it now.
 */
export const everythingHttp: Effect.Effect<
  { readonly url: string; readonly stop: Effect.Effect<void> },
  never,
  Scope.Scope
> = Effect.gen(function*() {
  const port = yield* freePort
  const child = spawn(process.execPath, ["--import", LOOPBACK, EVERYTHING, "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"]
  })
  let stderr = ""
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const stop = Effect.suspend(() => {
    child.kill("SIGKILL")
    return exited(child, "server-everything (HTTP) exited")
  })
  yield* Effect.addFinalizer(() => stop)
  yield* until(`server-everything listening on port ${port}`, () => stderr.includes(`listening on port ${port}`))
  return { url: `http://127.0.0.1:${port}/mcp`, stop }
})

/**
 * The test's own streamable HTTP server in this process, on a free loopback port: the SDK's
 * `McpServer` with a stateless `WebStandardStreamableHTTPServerTransport` (one of each per
 * request) mounted on `node:http`. Its tool `whoami` answers with the `Authorization` header it
 * got; a call of its tool `leak` is answered, as a broken proxy might, with HTTP 502 and a body
 * that repeats that header. Closed with the scope.
 */
export const ownHttp: Effect.Effect<{ readonly url: string }, never, Scope.Scope> = Effect.gen(function*() {
  const handle = async (req: Http.IncomingMessage, res: Http.ServerResponse): Promise<void> => {
    const chunks: Array<Buffer> = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks).toString("utf8")
    const authorization = req.headers.authorization ?? "(none)"
    const parsed = body === "" ? undefined : JSON.parse(body)
    if (parsed?.method === "tools/call" && parsed.params?.name === "leak") {
      res.writeHead(502, { "content-type": "text/plain" }).end(`upstream refused the credentials ${authorization}`)
      return
    }
    const server = new McpServer({ name: "own-http", version: "1.0.0" })
    server.registerTool("whoami", { description: "who you are", inputSchema: z.object({}) }, async () => ({
      content: [{ type: "text", text: `you sent ${authorization}` }]
    }))
    server.registerTool("leak", { description: "never answered", inputSchema: z.object({}) }, async () => ({
      content: []
    }))
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    await server.connect(transport)
    const headers = new Headers()
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === "string") headers.set(name, value)
    const request = new Request(`http://127.0.0.1${req.url ?? "/"}`, {
      method: req.method ?? "GET",
      headers,
      ...(body === "" ? {} : { body })
    })
    const response = await transport.handleRequest(request, parsed === undefined ? undefined : { parsedBody: parsed })
    res.writeHead(response.status, Object.fromEntries(response.headers))
    if (response.body === null) res.end()
    else Readable.fromWeb(response.body as any).pipe(res)
  }
  const http = Http.createServer((req, res) => {
    handle(req, res).catch((e) => res.writeHead(500).end(String(e)))
  })
  const port = yield* Effect.async<number>((resume) => {
    http.listen(0, "127.0.0.1", () => resume(Effect.succeed((http.address() as Net.AddressInfo).port)))
  })
  yield* Effect.addFinalizer(() =>
    Effect.async<void>((resume) => {
      http.closeAllConnections()
      http.close(() => resume(Effect.void))
    })
  )
  return { url: `http://127.0.0.1:${port}/mcp` }
})
