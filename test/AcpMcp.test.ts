/**
 * MCP servers in ACP sessions (§22 item 12): `agent-loop acp` run as an editor runs it (the
 * built CLI in a child process, the offline model), driven through the ACP SDK's own client.
 * A session's `mcpServers` are the published `@modelcontextprotocol/server-everything`, over
 * stdio (a child process of the agent) and over streamable HTTP (a child process of the test on
 * a free loopback port). The offline model calls `everything__echo` when asked to "call
 * everything__echo with {JSON}"; the call asks the editor (`session/request_permission`, MCP
 * tools ask by default), and its result reaches the client. `session/close` ends the stdio
 * server's process; a malformed `mcpServers` is -32602 naming the entry; a server that cannot
 * start is told on stderr and, to a client that takes notices, as a `notice`, and the session
 * goes on. First, the pure checks of `mcpServers.ts`. Waits are bounded (`until`).
 */
import * as acp from "@agentclientprotocol/sdk"
import { describe, expect, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import { Readable, Writable } from "node:stream"
import * as McpServers from "../src/cli/acp/mcpServers.js"
import * as Invariant from "../src/Invariant.js"
import type { SessionEvent, SessionHeader } from "../src/SessionEvent.js"
import { endAcp } from "./utils/acpProcess.js"
import { pollUntil } from "./utils/poll.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const BIN = Path.resolve("dist/cli/bin.js")
const EVERYTHING = Path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const tmp = scratchDirs("agent-loop-acp-mcp-")
const CLIENT = { name: "acp-test-client", version: "1.0.0" }
const ECHO = "call everything__echo with {\"message\":\"from the editor\"}"

/** Polls `check` every 10 ms until it holds, or fails after `CHILD_WAIT_MS`. */
const until = pollUntil("AcpMcp")

/** What the client received, in order: an update, or a permission request. */
type Received =
  | { readonly sessionId: string; readonly update: acp.SessionUpdate }
  | { readonly permission: acp.RequestPermissionRequest }

interface Client {
  readonly child: ChildProcess
  readonly agent: acp.ClientContext
  readonly received: Array<Received>
  /** The permission requests, each with its answer. */
  readonly asked: Array<{ readonly params: acp.RequestPermissionRequest; readonly answer: (r: unknown) => void }>
  /** The calls whose permission request the agent dropped (`$/cancel_request`), in order. */
  readonly dropped: Array<string>
  readonly stderr: () => string
  /** Ends the agent's stdin and waits (bounded) for its exit code. */
  readonly close: () => Promise<number | null>
}

/** `agent-loop acp --store STORE` in a child process, the SDK's client connected with `capabilities`. */
const startClient = async (
  store: string,
  capabilities: acp.ClientCapabilities = {},
  flags: ReadonlyArray<string> = []
): Promise<Client> => {
  const child = spawn(process.execPath, [BIN, "acp", "--store", store, ...flags], { cwd: store, stdio: "pipe" })
  let stderr = ""
  child.stderr.setEncoding("utf8")
  child.stderr.on("data", (chunk: string) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const received: Array<Received> = []
  const asked: Array<{ params: acp.RequestPermissionRequest; answer: (r: unknown) => void }> = []
  const dropped: Array<string> = []
  const app = acp.client({ name: CLIENT.name })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      received.push({ sessionId: params.sessionId, update: params.update })
    })
    .onRequest(
      acp.methods.client.session.requestPermission,
      ({ params, signal }) =>
        new Promise<acp.RequestPermissionResponse>((resolve) => {
          received.push({ permission: params })
          signal.addEventListener("abort", () => dropped.push(params.toolCall.toolCallId))
          asked.push({ params, answer: (r) => resolve(r as acp.RequestPermissionResponse) })
        })
    )
  const connection = app.connect(acp.ndJsonStream(
    Writable.toWeb(child.stdin) as unknown as WritableStream<Uint8Array>,
    Readable.toWeb(child.stdout) as unknown as ReadableStream<Uint8Array>
  ))
  await connection.agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: capabilities,
    clientInfo: CLIENT
  })
  const close = () => endAcp(child, exited, () => stderr)
  return { child, agent: connection.agent, received, asked, dropped, stderr: () => stderr, close }
}

/** An ACP stdio server entry running server-everything. */
const everythingStdio = (name = "everything"): acp.McpServer => ({
  name,
  command: process.execPath,
  args: [EVERYTHING, "stdio"],
  env: []
})

const prompt = (c: Client, sessionId: string, text: string) =>
  c.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] })

/** The JSON-RPC error a request fails with (`{code, message, data?}`), or a failure if it succeeds. */
const errorOf = async (request: Promise<unknown>): Promise<{ code: number; message: string; data?: unknown }> => {
  try {
    await request
  } catch (e) {
    const { code, message, data } = e as { code: number; message: string; data?: unknown }
    return data === undefined ? { code, message } : { code, message, data }
  }
  throw new Error("the request succeeded")
}

/** The pids of the processes whose parent is `pid` and whose command line holds `marker` (Linux `/proc`). */
const childrenOf = (pid: number, marker: string): Array<number> => {
  const out: Array<number> = []
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      // `pid (comm) state ppid …`: comm may hold spaces and parentheses; the last ")" ends it.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      if (ppid !== pid) continue
      if (Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(marker)) out.push(Number(entry))
    } catch {
      // The process ended meanwhile.
    }
  }
  return out
}

/** Whether process `pid` is still there (a zombie counts as gone: it has ended). */
const alive = (pid: number): boolean => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    return false
  }
}

/** The session's log, checked (`Invariant.check`). */
const checkedLog = (store: string, sessionId: string): Array<SessionEvent> => {
  const [first, ...rest] = Fs.readFileSync(Path.join(store, `${sessionId}.jsonl`), "utf8").split("\n").filter((l) => l !== "")
  const header = JSON.parse(first!) as SessionHeader
  const events = rest.map((l) => JSON.parse(l) as SessionEvent)
  expect(Invariant.check(events, { header })).toEqual([])
  return events
}

/** What the client received, one line each: `KIND [CALL] [STATUS]` of an update (chunks of a kind joined), `permission CALL`. */
const seen = (received: ReadonlyArray<Received>): Array<string> => {
  const out: Array<string> = []
  for (const r of received) {
    if ("update" in r) {
      const u = r.update as { sessionUpdate: string; status?: string; toolCallId?: string }
      const line = `${u.sessionUpdate}${u.toolCallId === undefined ? "" : ` ${u.toolCallId}`}${
        u.status === undefined ? "" : ` ${u.status}`
      }`
      if (u.sessionUpdate.endsWith("_chunk") && out.at(-1) === line) continue
      out.push(line)
    } else out.push(`permission ${r.permission.toolCall.toolCallId}`)
  }
  return out
}

/** The updates of one kind, in order. */
const updatesOf = (received: ReadonlyArray<Received>, kind: string): Array<Record<string, unknown>> =>
  received.flatMap((r) => ("update" in r && r.update.sessionUpdate === kind ? [r.update as Record<string, unknown>] : []))

/** The agent's text chunks joined. */
const agentText = (received: ReadonlyArray<Received>): string =>
  updatesOf(received, "agent_message_chunk").map((u) => (u.content as { text: string }).text).join("")

const OPTIONS = [
  { optionId: "allow_once", name: "Allow once", kind: "allow_once" },
  { optionId: "allow_always", name: "Always allow everything__echo", kind: "allow_always" },
  { optionId: "reject_once", name: "Reject", kind: "reject_once" },
  { optionId: "reject_always", name: "Always reject everything__echo", kind: "reject_always" }
]

const ECHO_CALL = {
  toolCallId: "call_1_1_1",
  title: "everything: echo",
  name: "everything__echo",
  kind: "other",
  status: "pending",
  rawInput: { message: "from the editor" }
}

/** A free loopback port (bound, read, released). */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

/**
 * server-everything over HTTP (`streamableHttp`: `/mcp`; `sse`: `/sse`) on a free loopback port,
 * a child process of the test, once it says it listens.
 */
const startHttpServer = async (
  mode: "streamableHttp" | "sse"
): Promise<{ readonly child: ChildProcess; readonly port: number }> => {
  const port = await freePort()
  const child = spawn(process.execPath, [EVERYTHING, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  for (const stream of [child.stdout!, child.stderr!]) {
    stream.setEncoding("utf8")
    stream.on("data", (chunk: string) => (output += chunk))
  }
  try {
    await until(`the ${mode} server's listening line`, () => new RegExp(`(listening|running) on port ${port}`, "i").test(output))
  } catch (e) {
    child.kill("SIGKILL")
    throw new Error(`${(e as Error).message}; its output: ${output}`, { cause: e })
  }
  return { child, port }
}

describe("mcpServers.ts: ACP's server entries as Mcp.ServerConfig", () => {
  it("converts stdio, http and sse entries; null or absent args, env and headers are none; null is no servers", () => {
    expect(McpServers.serversOf([
      { name: "files", command: "/usr/bin/mcp-files", args: ["/work"], env: [{ name: "TOKEN", value: "s3cret" }] },
      { type: "stdio", name: "plain", command: "mcp-plain", args: null, env: null, _meta: { x: 1 } },
      { type: "http", name: "api", url: "https://mcp.example.com/mcp", headers: [{ name: "Authorization", value: "Bearer t" }] },
      { type: "sse", name: "old", url: "http://127.0.0.1:3001/sse" }
    ])).toEqual({
      ok: true,
      servers: [
        { type: "stdio", name: "files", command: "/usr/bin/mcp-files", args: ["/work"], env: { TOKEN: "s3cret" } },
        { type: "stdio", name: "plain", command: "mcp-plain", args: [], env: {} },
        { type: "http", name: "api", url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer t" } },
        { type: "sse", name: "old", url: "http://127.0.0.1:3001/sse", headers: {} }
      ]
    })
    expect(McpServers.serversOf(null)).toEqual({ ok: true, servers: [] })
    expect(McpServers.serversOf([])).toEqual({ ok: true, servers: [] })
  })

  it("refuses a malformed entry, naming it by index and name, and never quotes an env or header value", () => {
    const message = (value: unknown) => {
      const result = McpServers.serversOf(value)
      return result.ok ? "ok" : result.message
    }
    const ok = { name: "a", command: "x", args: [], env: [] }
    expect([
      undefined,
      "everything",
      { name: "a" },
      [7],
      [{ command: "x", args: [], env: [] }],
      [{ name: "  ", command: "x" }],
      [ok, { type: "http", name: "a", url: "http://127.0.0.1:1/mcp", headers: [] }],
      [{ name: "a", args: [], env: [] }],
      [{ name: "a", command: "", args: [], env: [] }],
      [{ name: "a", command: "x", args: "--flag", env: [] }],
      [{ name: "a", command: "x", args: ["ok", 3], env: [] }],
      [{ name: "a", command: "x", args: [], env: { TOKEN: "s3cret" } }],
      [{ name: "a", command: "x", args: [], env: [{ name: "TOKEN", value: 5 }] }],
      [{ name: "a", command: "x", args: [], env: [{ name: "", value: "s3cret" }] }],
      [{ type: "ws", name: "a", url: "ws://127.0.0.1:1" }],
      [{ type: "http", name: "a", headers: [] }],
      [{ type: "sse", name: "a", url: "ftp://example.com/x", headers: [] }],
      [{ type: "http", name: "a", url: "not a url", headers: [] }],
      [{ type: "http", name: "a", url: "http://127.0.0.1:1/mcp", headers: [{ name: "Authorization" }] }]
    ].map(message)).toEqual([
      "mcpServers: an array of MCP servers is required (empty for none), got nothing",
      "mcpServers: an array of MCP servers is required (empty for none), got \"everything\"",
      "mcpServers: an array of MCP servers is required (empty for none), got {\"name\":\"a\"}",
      "mcpServers[0]: an object is required, got 7",
      "mcpServers[0]: \"name\" must be a non-empty string, got nothing",
      "mcpServers[0]: \"name\" must be a non-empty string, got \"  \"",
      "mcpServers[1] (\"a\"): mcpServers[0] has this name too; each server needs a name of its own",
      "mcpServers[0] (\"a\"): \"command\" must be a non-empty string, got nothing",
      "mcpServers[0] (\"a\"): \"command\" must be a non-empty string, got \"\"",
      "mcpServers[0] (\"a\"): \"args\" must be an array of strings, got \"--flag\"",
      "mcpServers[0] (\"a\"): \"args[1]\" must be a string, got 3",
      "mcpServers[0] (\"a\"): \"env\" must be an array of {name, value} objects",
      "mcpServers[0] (\"a\"): \"env[0]\" must be an object {name, value} of strings",
      "mcpServers[0] (\"a\"): \"env[0].name\" must be a non-empty string",
      "mcpServers[0] (\"a\"): \"type\" must be \"http\", \"sse\" or absent (stdio), got \"ws\"",
      "mcpServers[0] (\"a\"): \"url\" must be an http or https URL, got nothing",
      "mcpServers[0] (\"a\"): \"url\" must be an http or https URL, got \"ftp://example.com/x\"",
      "mcpServers[0] (\"a\"): \"url\" must be an http or https URL, got \"not a url\"",
      "mcpServers[0] (\"a\"): \"headers[0]\" must be an object {name, value} of strings"
    ])
  })
})

describe("MCP servers of ACP sessions, through the SDK's client", () => {
  it("a stdio server: its tool asks the editor, runs, and its result reaches the client; session/close ends its process; a load connects it again", async () => {
    const store = tmp()
    const c = await startClient(store)
    const { sessionId } = await c.agent.request(acp.methods.agent.session.new, { cwd: store, mcpServers: [everythingStdio()] })
    const [server, ...others] = childrenOf(c.child.pid!, EVERYTHING)
    expect(others).toEqual([])
    expect(alive(server!)).toBe(true)
    const running = prompt(c, sessionId, ECHO)
    await until("the permission request", () => c.asked.length === 1)
    expect(c.asked[0]!.params).toMatchObject({ sessionId, toolCall: ECHO_CALL, options: OPTIONS })
    c.asked[0]!.answer({ outcome: { outcome: "selected", optionId: "allow_once" } })
    expect((await running).stopReason).toBe("end_turn")
    expect(seen(c.received)).toEqual([
      "agent_message_chunk",
      "tool_call call_1_1_1 pending",
      "permission call_1_1_1",
      "tool_call_update call_1_1_1 in_progress",
      "tool_call_update call_1_1_1 completed",
      "agent_message_chunk"
    ])
    expect(updatesOf(c.received, "tool_call")).toEqual([{ sessionUpdate: "tool_call", ...ECHO_CALL }])
    expect(updatesOf(c.received, "tool_call_update").at(-1)).toEqual({
      sessionUpdate: "tool_call_update",
      toolCallId: "call_1_1_1",
      status: "completed",
      content: [{ type: "content", content: { type: "text", text: "Echo: from the editor" } }],
      rawOutput: { isError: false, text: "Echo: from the editor" }
    })
    expect(agentText(c.received)).toContain("Tool result (call_1_1_1): \"Echo: from the editor\"")
    const decided = checkedLog(store, sessionId).filter((e) => e.type === "approval/decided").map((e) => e.data)
    expect(decided).toMatchObject([{ outcome: "allowed-once", by: { kind: "person", name: "acp-test-client" } }])

    // session/close: the server's process ends; the session is gone from the connection.
    expect(await c.agent.request(acp.methods.agent.session.close, { sessionId })).toEqual({})
    await until("the stdio server's exit", () => !alive(server!))
    expect(await errorOf(prompt(c, sessionId, "hello"))).toMatchObject({ code: -32002 })

    // session/load with the server again: it starts anew, the replay titles the call as before,
    // and a call of the loaded session works.
    const before = c.received.length
    expect(await c.agent.request(acp.methods.agent.session.load, { sessionId, cwd: store, mcpServers: [everythingStdio()] }))
      .toEqual({})
    const replayed = c.received.slice(before)
    expect(updatesOf(replayed, "tool_call")).toEqual([{ sessionUpdate: "tool_call", ...ECHO_CALL }])
    const [again] = childrenOf(c.child.pid!, EVERYTHING)
    expect(again).not.toBe(server)
    const second = prompt(c, sessionId, ECHO)
    await until("the second permission request", () => c.asked.length === 2)
    expect(c.asked[1]!.params.toolCall).toEqual({ ...ECHO_CALL, toolCallId: "call_2_1_1" })
    c.asked[1]!.answer({ outcome: { outcome: "selected", optionId: "allow_once" } })
    expect((await second).stopReason).toBe("end_turn")
    expect(updatesOf(c.received.slice(before), "tool_call_update").at(-1)).toMatchObject({
      toolCallId: "call_2_1_1",
      status: "completed",
      rawOutput: { isError: false, text: "Echo: from the editor" }
    })
    // stdin's end ends the connection: the loaded session's server ends with it.
    expect(await c.close()).toBe(0)
    await until("the loaded session's server's exit", () => !alive(again!))
    checkedLog(store, sessionId)
  })

  it("session/close while a call waits for permission: the prompt answers cancelled, the request is dropped, the question decided cancelled, the server ends", async () => {
    const store = tmp()
    const c = await startClient(store)
    const { sessionId } = await c.agent.request(acp.methods.agent.session.new, { cwd: store, mcpServers: [everythingStdio()] })
    const [server] = childrenOf(c.child.pid!, EVERYTHING)
    const running = prompt(c, sessionId, ECHO)
    await until("the permission request", () => c.asked.length === 1)
    expect(c.asked[0]!.params.toolCall).toEqual(ECHO_CALL)
    expect(await c.agent.request(acp.methods.agent.session.close, { sessionId })).toEqual({})
    expect((await running).stopReason).toBe("cancelled")
    await until("the stdio server's exit", () => !alive(server!))
    expect(c.dropped).toEqual([ECHO_CALL.toolCallId])
    const events = checkedLog(store, sessionId)
    expect(events.filter((e) => e.type === "approval/decided").map((e) => e.data)).toMatchObject([
      { outcome: "cancelled", by: { kind: "cancel" } }
    ])
    expect(events.filter((e) => e.type === "turn/end").map((e) => e.data)).toEqual([
      { turn: 1, reason: { kind: "aborted", reason: { kind: "user" } } }
    ])
    expect(await c.close()).toBe(0)
  })

  it("a question left open by a killed process: a load that names the server asks again and the call runs; a load without it decides the question unavailable", async () => {
    const store = tmp()
    const first = await startClient(store)
    const sessions: Array<string> = []
    for (let i = 0; i < 2; i++) {
      const { sessionId } = await first.agent.request(acp.methods.agent.session.new, {
        cwd: store,
        mcpServers: [everythingStdio()]
      })
      sessions.push(sessionId)
      void prompt(first, sessionId, ECHO).catch(() => {})
      await until(`the permission request of session ${i + 1}`, () => first.asked.length === i + 1)
    }
    const servers = childrenOf(first.child.pid!, EVERYTHING)
    expect(servers).toHaveLength(2)
    const [withServer, without] = sessions as [string, string]
    first.child.kill("SIGKILL")
    // The servers' stdin closed with their parent: they end.
    await until("the orphaned servers' exit", () => servers.every((pid) => !alive(pid)))

    const c = await startClient(store)
    expect(
      await c.agent.request(acp.methods.agent.session.load, {
        sessionId: withServer,
        cwd: store,
        mcpServers: [everythingStdio()]
      })
    )
      .toEqual({})
    await until("the permission request asked again", () => c.asked.length === 1)
    expect(c.asked[0]!.params).toMatchObject({ sessionId: withServer, toolCall: ECHO_CALL, options: OPTIONS })
    c.asked[0]!.answer({ outcome: { outcome: "selected", optionId: "allow_once" } })
    await until("the call's result", () => updatesOf(c.received, "tool_call_update").some((u) => u.status === "completed"))
    expect(updatesOf(c.received, "tool_call_update").at(-1)).toMatchObject({
      toolCallId: "call_1_1_1",
      status: "completed",
      rawOutput: { isError: false, text: "Echo: from the editor" }
    })
    await until("the turn's end", () => checkedLog(store, withServer).some((e) => e.type === "turn/end"))
    expect(checkedLog(store, withServer).filter((e) => e.type === "approval/decided").map((e) => e.data)).toMatchObject([
      { outcome: "allowed-once", by: { kind: "person", name: "acp-test-client" } }
    ])

    // Loaded without its server: the tool is gone, so nobody may allow the call.
    expect(await c.agent.request(acp.methods.agent.session.load, { sessionId: without, cwd: store, mcpServers: [] })).toEqual({})
    await until("the turn's end", () => checkedLog(store, without).some((e) => e.type === "turn/end"))
    const events = checkedLog(store, without)
    expect(events.filter((e) => e.type === "approval/decided").map((e) => e.data)).toMatchObject([{ outcome: "unavailable" }])
    expect(events.filter((e) => e.type === "tool/result").map((e) => (e.data as { error?: unknown }).error)).toEqual([
      { name: "UnknownTool", code: "UNKNOWN_TOOL" }
    ])
    expect(c.asked).toHaveLength(1)
    expect(await c.close()).toBe(0)
  })

  it("--subagent: a sub-agent has the session's servers; its call asks the editor, and its answer reaches the parent", async () => {
    const store = tmp()
    const c = await startClient(store, {}, ["--subagent"])
    const { sessionId } = await c.agent.request(acp.methods.agent.session.new, { cwd: store, mcpServers: [everythingStdio()] })
    const running = prompt(c, sessionId, `ask a sub-agent to ${ECHO}`)
    await until("the child's permission request", () => c.asked.length === 1)
    expect(c.asked[0]!.params.toolCall).toMatchObject({ title: "everything: echo" })
    c.asked[0]!.answer({ outcome: { outcome: "selected", optionId: "allow_once" } })
    expect((await running).stopReason).toBe("end_turn")
    const result = checkedLog(store, sessionId).find((e) => e.type === "tool/result")!.data as any
    expect(result.error).toBeUndefined()
    expect(result.message.content[0].content[0].text).toMatch(/^Tool result \(call_1_1_1\): "Echo: from the editor"/)
    expect(await c.close()).toBe(0)
  })

  it("a streamable HTTP server on a loopback port: one call works", async () => {
    const store = tmp()
    const server = await startHttpServer("streamableHttp")
    try {
      const c = await startClient(store)
      const { sessionId } = await c.agent.request(acp.methods.agent.session.new, {
        cwd: store,
        mcpServers: [{ type: "http", name: "everything", url: `http://127.0.0.1:${server.port}/mcp`, headers: [] }]
      })
      const running = prompt(c, sessionId, ECHO)
      await until("the permission request", () => c.asked.length === 1)
      expect(c.asked[0]!.params.toolCall).toEqual(ECHO_CALL)
      c.asked[0]!.answer({ outcome: { outcome: "selected", optionId: "allow_once" } })
      expect((await running).stopReason).toBe("end_turn")
      expect(updatesOf(c.received, "tool_call_update").at(-1)).toMatchObject({
        toolCallId: "call_1_1_1",
        status: "completed",
        rawOutput: { isError: false, text: "Echo: from the editor" }
      })
      expect(await c.close()).toBe(0)
      checkedLog(store, sessionId)
    } finally {
      server.child.kill("SIGKILL")
    }
  })

  it("a legacy HTTP+SSE server (type sse): one call works", async () => {
    const store = tmp()
    const server = await startHttpServer("sse")
    try {
      const c = await startClient(store)
      const { sessionId } = await c.agent.request(acp.methods.agent.session.new, {
        cwd: store,
        mcpServers: [{ type: "sse", name: "legacy", url: `http://127.0.0.1:${server.port}/sse`, headers: [] }]
      })
      const running = prompt(c, sessionId, "call legacy__echo with {\"message\":\"over sse\"}")
      await until("the permission request", () => c.asked.length === 1)
      expect(c.asked[0]!.params.toolCall).toEqual({
        ...ECHO_CALL,
        title: "legacy: echo",
        name: "legacy__echo",
        rawInput: { message: "over sse" }
      })
      c.asked[0]!.answer({ outcome: { outcome: "selected", optionId: "allow_once" } })
      expect((await running).stopReason).toBe("end_turn")
      expect(updatesOf(c.received, "tool_call_update").at(-1)).toMatchObject({
        toolCallId: "call_1_1_1",
        status: "completed",
        rawOutput: { isError: false, text: "Echo: over sse" }
      })
      expect(await c.close()).toBe(0)
      checkedLog(store, sessionId)
    } finally {
      server.child.kill("SIGKILL")
    }
  })

  it("a malformed mcpServers is -32602 naming the entry, for session/new and session/load; nothing starts, the agent serves on", async () => {
    const store = tmp()
    const c = await startClient(store)
    const bad = [everythingStdio("a"), { name: "b", args: [], env: [] }]
    const refused = {
      code: -32602,
      message: "Invalid params: mcpServers[1] (\"b\"): \"command\" must be a non-empty string, got nothing",
      data: { message: "mcpServers[1] (\"b\"): \"command\" must be a non-empty string, got nothing" }
    }
    expect(await errorOf(c.agent.request(acp.methods.agent.session.new, { cwd: store, mcpServers: bad as never }))).toEqual(
      refused
    )
    expect(
      await errorOf(c.agent.request(acp.methods.agent.session.new, {
        cwd: store,
        mcpServers: [everythingStdio("a"), everythingStdio("a")]
      }))
    ).toEqual({
      code: -32602,
      message: "Invalid params: mcpServers[1] (\"a\"): mcpServers[0] has this name too; each server needs a name of its own",
      data: { message: "mcpServers[1] (\"a\"): mcpServers[0] has this name too; each server needs a name of its own" }
    })
    expect(await errorOf(c.agent.request(acp.methods.agent.session.new, { cwd: store, mcpServers: "a" as never }))).toEqual({
      code: -32602,
      message: "Invalid params: mcpServers: an array of MCP servers is required (empty for none), got \"a\"",
      data: { message: "mcpServers: an array of MCP servers is required (empty for none), got \"a\"" }
    })
    // Nothing started, no session made.
    expect(childrenOf(c.child.pid!, EVERYTHING)).toEqual([])
    expect(Fs.readdirSync(store).filter((f) => f.endsWith(".jsonl"))).toEqual([])
    const { sessionId } = await c.agent.request(acp.methods.agent.session.new, { cwd: store, mcpServers: [] })
    expect(await c.agent.request(acp.methods.agent.session.close, { sessionId })).toEqual({})
    expect(
      await errorOf(c.agent.request(acp.methods.agent.session.load, { sessionId, cwd: store, mcpServers: bad as never }))
    ).toEqual(refused)
    expect(await c.agent.request(acp.methods.agent.session.load, { sessionId, cwd: store, mcpServers: [] })).toEqual({})
    expect((await prompt(c, sessionId, "hello")).stopReason).toBe("end_turn")
    expect(await c.close()).toBe(0)
    expect(c.stderr()).toBe("")
  })

  it("a server that cannot start: a line on stderr and, to a client that takes notices, a notice; the session goes on without its tools", async () => {
    const store = tmp()
    const missing = Path.join(store, "no-such-server")
    const c = await startClient(store, { session: { notices: {} } })
    const { sessionId } = await c.agent.request(acp.methods.agent.session.new, {
      cwd: store,
      mcpServers: [{ name: "broken", command: missing, args: [], env: [{ name: "TOKEN", value: "s3cret" }] }, everythingStdio()]
    })
    const message = `MCP server "broken" could not start: spawn ${missing} ENOENT`
    await until("the notice", () => updatesOf(c.received, "notice").length === 1)
    expect(updatesOf(c.received, "notice")).toEqual([{
      sessionUpdate: "notice",
      severity: "warning",
      title: "MCP server \"broken\" is not available",
      description: `${message}; the session goes on without its tools.`
    }])
    expect(c.stderr()).toBe(`agent-loop acp: session ${sessionId}: ${message}; the session goes on without its tools\n`)
    // The other server's tools are there.
    const running = prompt(c, sessionId, ECHO)
    await until("the permission request", () => c.asked.length === 1)
    c.asked[0]!.answer({ outcome: { outcome: "selected", optionId: "allow_once" } })
    expect((await running).stopReason).toBe("end_turn")
    expect(updatesOf(c.received, "tool_call_update").at(-1)).toMatchObject({ status: "completed" })
    expect(await c.close()).toBe(0)
  })
})
