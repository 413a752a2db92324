/**
 * `agent-loop acp` (§22), run as an editor runs it: `dist/cli/bin.js acp --store DIR` (the
 * offline model) in a child process, driven through the ACP SDK's own client side, which checks
 * every message it receives against the v1 schema (an update that fails it is not recorded: each
 * test compares the updates recorded with the `session/update` lines on stdout). Every test
 * checks that stdout held nothing but JSON-RPC lines, that the process exits 0 when its stdin
 * ends, and that the session logs pass `Invariant.check`, each prompt's delivery having the fate
 * its response said (`Delivery.fateOf`). Waits are bounded (`until`).
 */
import * as acp from "@agentclientprotocol/sdk"
import { describe, expect, it } from "@effect/vitest"
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Readable, Writable } from "node:stream"
import type { AgentEvent } from "../src/AgentEvent.js"
import { LINE_LIMIT } from "../src/cli/acp/agent.js"
import { answerId, limitLines, type Oversize } from "../src/cli/acp/lineLimit.js"
import { contentOf } from "../src/cli/acp/prompt.js"
import { replayUpdates } from "../src/cli/acp/replay.js"
import { stopReasonOf } from "../src/cli/acp/sessions.js"
import { projector } from "../src/cli/acp/updates.js"
import * as Delivery from "../src/Delivery.js"
import * as Invariant from "../src/Invariant.js"
import type { SessionEvent, SessionHeader } from "../src/SessionEvent.js"
import { endAcp } from "./utils/acpProcess.js"
import { CHILD_WAIT_MS, note } from "./utils/bounds.js"
import { pollUntil } from "./utils/poll.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const BIN = Path.resolve("dist/cli/bin.js")
const tmp = scratchDirs("agent-loop-acp-")
const CLIENT = { name: "acp-test-client", version: "1.0.0" }

/** Polls `check` every 10 ms until it holds, or fails after `CHILD_WAIT_MS`. */
const until = pollUntil("Acp")

/** A running `agent-loop acp`: its raw stdout lines, stderr, and exit. */
interface Proc {
  readonly child: ChildProcessWithoutNullStreams
  /** Every stdout line, in order. */
  readonly lines: Array<string>
  readonly stderr: () => string
  readonly exited: Promise<number | null>
  /** Ends stdin and waits (bounded) for the exit; checks stdout held JSON-RPC lines only. */
  readonly close: () => Promise<number | null>
}

const startProcess = (
  store: string,
  stdout: "lines" | "tee",
  args: ReadonlyArray<string> = []
): { proc: Proc; sdkOutput?: ReadableStream<Uint8Array> } => {
  const child = spawn(process.execPath, [BIN, "acp", "--store", store, ...args], { cwd: store, stdio: "pipe" })
  let stderr = ""
  child.stderr.setEncoding("utf8")
  child.stderr.on("data", (chunk: string) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const lines: Array<string> = []
  const web = Readable.toWeb(child.stdout) as unknown as ReadableStream<Uint8Array>
  const [forLines, forSdk] = stdout === "tee" ? web.tee() : [web, undefined]
  void (async () => {
    const decoder = new TextDecoder()
    let buffer = ""
    for await (const chunk of forLines as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true })
      let nl: number
      while ((nl = buffer.indexOf("\n")) >= 0) {
        lines.push(buffer.slice(0, nl))
        buffer = buffer.slice(nl + 1)
      }
    }
    if (buffer !== "") lines.push(buffer)
  })()
  const close = async () => {
    const start = Date.now()
    const code = await endAcp(child, exited, () => stderr)
    note("Acp: the exit after stdin ended", Date.now() - start)
    for (const line of lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: "2.0" })
    return code
  }
  return {
    proc: { child, lines, stderr: () => stderr, exited, close },
    ...(forSdk === undefined ? {} : { sdkOutput: forSdk })
  }
}

/** A process driven by the SDK's client: the connection and the updates it accepted. */
interface Client extends Proc {
  readonly agent: acp.ClientContext
  readonly updates: Array<acp.SessionNotification>
  readonly init: acp.InitializeResponse
}

const startClient = async (
  store: string,
  args: ReadonlyArray<string> = [],
  /** Offers `fs.readTextFile` and answers `fs/read_text_file` with this. */
  readTextFile?: (params: acp.ReadTextFileRequest) => acp.ReadTextFileResponse | Promise<acp.ReadTextFileResponse>
): Promise<Client> => {
  const { proc, sdkOutput } = startProcess(store, "tee", args)
  const updates: Array<acp.SessionNotification> = []
  let app = acp.client({ name: CLIENT.name }).onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params)
  })
  if (readTextFile !== undefined) app = app.onRequest(acp.methods.client.fs.readTextFile, ({ params }) => readTextFile(params))
  const input = Writable.toWeb(proc.child.stdin) as unknown as WritableStream<Uint8Array>
  const connection = app.connect(acp.ndJsonStream(input, sdkOutput!))
  const init = await connection.agent.request<acp.InitializeResponse>(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: readTextFile === undefined ? {} : { fs: { readTextFile: true } },
    clientInfo: CLIENT
  })
  return {
    ...proc,
    agent: connection.agent,
    updates,
    init,
    close: async () => {
      const code = await proc.close()
      // Every update on stdout passed the client's schema check.
      expect(updates.length).toBe(proc.lines.filter((l) => JSON.parse(l).method === "session/update").length)
      return code
    }
  }
}

const newSession = async (c: Client, cwd: string): Promise<string> =>
  (await c.agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] })).sessionId

const prompt = (c: Client, sessionId: string, text: string) =>
  c.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] })

const messageIdOf = (response: acp.PromptResponse): string =>
  (response._meta as { readonly "agent-loop": { readonly messageId: string } })["agent-loop"].messageId

/** The session's log: header and events, read from the store. */
const readLog = (store: string, sessionId: string): { header: SessionHeader; events: Array<SessionEvent> } => {
  const [first, ...rest] = Fs.readFileSync(Path.join(store, `${sessionId}.jsonl`), "utf8").split("\n").filter((l) => l !== "")
  return { header: JSON.parse(first!) as SessionHeader, events: rest.map((l) => JSON.parse(l) as SessionEvent) }
}

/** Whether the session's log (as far as it is written: a line being written is not read) has an event `holds`. */
const logHas = (store: string, sessionId: string, holds: (e: SessionEvent) => boolean): boolean =>
  Fs.readFileSync(Path.join(store, `${sessionId}.jsonl`), "utf8").split("\n").slice(1).some((l) => {
    try {
      return holds(JSON.parse(l) as SessionEvent)
    } catch {
      return false
    }
  })

/**
 * Checks the session log: the invariants hold, and each prompt's fate is what its stop reason
 * says (`end_turn`: it entered; `cancelled`: it entered a turn that ended aborted, or the cancel
 * dropped it while queued).
 */
const checkLog = (
  store: string,
  sessionId: string,
  prompts: ReadonlyArray<acp.PromptResponse>
): Array<SessionEvent> => {
  const { events, header } = readLog(store, sessionId)
  expect(Invariant.check(events, { header })).toEqual([])
  for (const response of prompts) {
    const fate = Delivery.fateOf(events, messageIdOf(response), { header })
    if (response.stopReason === "end_turn" || response.stopReason === "max_turn_requests") {
      expect(fate).toMatchObject({ _tag: "Entered" })
    } else if (response.stopReason === "cancelled") {
      if (fate?._tag === "Entered") {
        const end = events.find((e) => e.type === "turn/end" && (e.data as { turn: number }).turn === fate.turn)
        expect((end?.data as { reason: { kind: string } }).reason.kind).toBe("aborted")
      } else expect(fate).toEqual({ _tag: "Dropped", reason: "canceled" })
    } else throw new Error(`unexpected stop reason ${response.stopReason}`)
  }
  return events
}

const kinds = (updates: ReadonlyArray<acp.SessionNotification>) => updates.map((u) => u.update.sessionUpdate)
const textOf = (updates: ReadonlyArray<acp.SessionNotification>, kind: string) =>
  updates.map((u) => u.update).filter((u) => u.sessionUpdate === kind).map((u) =>
    (u as { content: { type: string; text?: string } }).content.text ?? ""
  ).join("")
const assistantText = (events: ReadonlyArray<SessionEvent>, turn: number) =>
  events.filter((e) => e.type === "assistant/message" && (e.data as { turn: number }).turn === turn).map((e) =>
    (e.data as { message: { content: ReadonlyArray<{ type: string; text?: string }> } }).message.content
      .filter((b) => b.type === "text").map((b) => b.text).join("")
  ).join("")

describe("agent-loop acp, through the SDK's client", () => {
  it("initialize, a new session, a text prompt: its chunks, then end_turn", async () => {
    const store = tmp()
    const c = await startClient(store)
    expect(c.init).toEqual({
      protocolVersion: 1,
      agentCapabilities: {
        loadSession: true,
        promptCapabilities: { image: true, audio: false, embeddedContext: true },
        mcpCapabilities: { http: true, sse: true },
        sessionCapabilities: { close: {} },
        _meta: { "agent-loop": { extensions: { steer: "_session/steer", inject: "_session/inject" } } }
      },
      authMethods: [],
      agentInfo: { name: "agent-loop", title: "effect-agent-loop", version: "0.1.0" }
    })
    const sessionId = await newSession(c, store)
    const response = await prompt(c, sessionId, "hello")
    expect(response.stopReason).toBe("end_turn")
    const events = checkLog(store, sessionId, [response])
    expect(new Set(kinds(c.updates))).toEqual(new Set(["agent_message_chunk"]))
    expect(c.updates.length).toBeGreaterThan(1)
    expect(textOf(c.updates, "agent_message_chunk")).toBe(assistantText(events, 1))
    expect(assistantText(events, 1)).toBe("I received 1 message in this step: 1 from you (\"hello\").")
    expect(await c.close()).toBe(0)
  })

  it("a tool prompt: tool_call pending, tool_call_update in_progress then completed, then the answer", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    const response = await prompt(c, sessionId, "wait 1 seconds")
    expect(response.stopReason).toBe("end_turn")
    checkLog(store, sessionId, [response])
    const tools = c.updates.map((u) => u.update).filter((u) => u.sessionUpdate.startsWith("tool_call"))
    expect(tools).toEqual([
      {
        sessionUpdate: "tool_call",
        toolCallId: "call_1_1_1",
        name: "wait",
        title: "wait 1s",
        kind: "other",
        status: "pending",
        rawInput: { seconds: 1 }
      },
      { sessionUpdate: "tool_call_update", toolCallId: "call_1_1_1", status: "in_progress" },
      {
        sessionUpdate: "tool_call_update",
        toolCallId: "call_1_1_1",
        status: "completed",
        content: [{ type: "content", content: { type: "text", text: "waited 1 second" } }],
        rawOutput: { isError: false, text: "waited 1 second" }
      }
    ])
    // The step's text, then the tool call; the next step's text after the result.
    const order = kinds(c.updates).filter((k, i, all) => i === 0 || all[i - 1] !== k)
    expect(order).toEqual(["agent_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"])
    expect(textOf(c.updates, "agent_message_chunk")).toBe(
      "I received 1 message in this step: 1 from you (\"wait 1 seconds\").Tool result (call_1_1_1): \"waited 1 second\""
    )
    expect(await c.close()).toBe(0)
  })

  it("a client that offers fs.readTextFile: read_file reads the editor's buffer through fs/read_text_file, not the disk", async () => {
    const store = tmp()
    const work = Path.join(store, "work")
    Fs.mkdirSync(work)
    Fs.writeFileSync(Path.join(work, "notes.txt"), "as saved on disk")
    const asked: Array<acp.ReadTextFileRequest> = []
    const c = await startClient(store, [], (params) => {
      asked.push(params)
      return { content: "unsaved buffer text" }
    })
    const sessionId = await newSession(c, work)
    const response = await prompt(c, sessionId, "read file notes.txt")
    expect(response.stopReason).toBe("end_turn")
    expect(asked).toEqual([{ sessionId, path: Path.join(work, "notes.txt") }])
    const events = checkLog(store, sessionId, [response])
    const result = events.find((e) => e.type === "tool/result")?.data as {
      message: { content: Array<{ content: Array<{ text: string }> }> }
    }
    expect(result.message.content.flatMap((b) => b.content.map((c) => c.text))).toEqual(["unsaved buffer text"])
    expect(c.updates.map((u) => u.update).filter((u) => u.sessionUpdate === "tool_call_update").at(-1)).toMatchObject({
      status: "completed",
      rawOutput: { isError: false, text: "unsaved buffer text" }
    })
    // A path outside the session's cwd is refused before the client is asked.
    const outside = await prompt(c, sessionId, "read file ../secret.txt")
    expect(outside.stopReason).toBe("end_turn")
    expect(asked.length).toBe(1)
    expect(await c.close()).toBe(0)
  })

  it("stdin closed while read_file waits on the client's fs/read_text_file: the turn ends aborted disposed, no further step", async () => {
    const store = tmp()
    const asked: Array<acp.ReadTextFileRequest> = []
    // A client that never answers the read.
    const c = await startClient(store, [], (params) => {
      asked.push(params)
      return new Promise<acp.ReadTextFileResponse>(() => {})
    })
    const sessionId = await newSession(c, store)
    void prompt(c, sessionId, "read file notes.txt").catch(() => {})
    await until("the client to be asked", () => asked.length === 1)
    expect(await c.close()).toBe(0)
    const events = checkLog(store, sessionId, [])
    expect(events.filter((e) => e.type === "turn/end").map((e) => (e.data as { reason: unknown }).reason)).toEqual([
      { kind: "aborted", reason: { kind: "disposed" } }
    ])
    // One model request only: the read's failure (the connection closed) was no tool result.
    expect(events.filter((e) => e.type === "assistant/message").length).toBe(1)
    expect(events.filter((e) => e.type === "tool/result").map((e) => (e.data as { error?: { code: string } }).error?.code))
      .not.toContain("TOOL_FAILED")
  })

  it("session/load of a session running on this connection: its running call is replayed in_progress, then completes live", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    // The tool's 1 s is the window for the load: it is answered within milliseconds (4 ms measured under load).
    const running = prompt(c, sessionId, "wait 1 seconds")
    await until("the tool to start", () => c.updates.some((u) => u.update.sessionUpdate === "tool_call_update"))
    const before = c.updates.length
    expect(await c.agent.request(acp.methods.agent.session.load, { sessionId, cwd: store, mcpServers: [] })).toEqual({})
    const replayed = c.updates.slice(before).map((u) => u.update)
    expect(replayed.filter((u) => u.sessionUpdate === "tool_call_update")).toEqual([
      { sessionUpdate: "tool_call_update", toolCallId: "call_1_1_1", status: "in_progress" }
    ])
    expect((await running).stopReason).toBe("end_turn")
    const updates = c.updates.map((u) => u.update).filter((u) => u.sessionUpdate === "tool_call_update")
    expect(updates.map((u) => (u as { status: string }).status)).toEqual(["in_progress", "in_progress", "completed"])
    expect(await c.close()).toBe(0)
  })

  it("session/load of a running session, as its call goes live: the replay is whole, then the call's tool_call, in_progress once, completed", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    // The tool's 2 s is the window for the load: it is answered within milliseconds (8 ms measured under load).
    const running = prompt(c, sessionId, "wait 2 seconds")
    // As soon as the call is shown (its in_progress may still be on its way).
    await until("the tool call", () => c.updates.some((u) => u.update.sessionUpdate === "tool_call"))
    const before = c.updates.length
    expect(await c.agent.request(acp.methods.agent.session.load, { sessionId, cwd: store, mcpServers: [] })).toEqual({})
    expect((await running).stopReason).toBe("end_turn")
    const { events, header } = readLog(store, sessionId)
    // The replay: the log as far as the call (its result came 2 s later), the call running.
    const result = events.findIndex((e) => e.type === "tool/result")
    const expected = replayUpdates(events.slice(0, result), { header, cwd: store, running: true })
    expect(expected.map((u) => u.sessionUpdate)).toEqual([
      "user_message_chunk",
      "agent_message_chunk",
      "tool_call",
      "tool_call_update"
    ])
    // It begins at the prompt's chunk (the live stream never echoes the client's prompt), and
    // nothing live comes between its first and last update.
    const start = c.updates.findIndex((u, i) => i >= before && u.update.sessionUpdate === "user_message_chunk")
    expect(start).toBeGreaterThanOrEqual(before)
    expect(c.updates.slice(start, start + expected.length).map((u) => u.update)).toEqual(expected)
    const call = c.updates.slice(start).map((u) => u.update).filter((u) =>
      (u as { toolCallId?: string }).toolCallId === "call_1_1_1"
    )
    expect(call.map((u) => `${u.sessionUpdate} ${(u as { status?: string }).status}`)).toEqual([
      "tool_call pending",
      "tool_call_update in_progress",
      "tool_call_update completed"
    ])
    checkLog(store, sessionId, [await running])
    expect(await c.close()).toBe(0)
  })

  it("cancel during a running tool: the prompt and the one queued behind it answer cancelled at once, nothing follows, the next prompt works", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    // 30 s: longer than any wait below, so that the answers are the cancel's, not the tool's end.
    const running = prompt(c, sessionId, "wait 30 seconds")
    await until("the tool to start", () => c.updates.some((u) => u.update.sessionUpdate === "tool_call_update"))
    const queued = prompt(c, sessionId, "hello")
    // The queued prompt is in the log before the cancel (its followup is durable then).
    await until("the queued prompt in the log", () =>
      logHas(store, sessionId, (e) =>
        e.type === "agent/inbox/spliced" &&
        (e.data as { inserted: ReadonlyArray<{ content: ReadonlyArray<{ text?: string }> }> }).inserted.some((m) =>
          m.content[0]?.text === "hello"
        )))
    const before = c.updates.length
    const t0 = Date.now()
    await c.agent.notify(acp.methods.agent.session.cancel, { sessionId })
    const [first, second] = await Promise.all([running, queued])
    // At once: not after the tool's 30 s (measured 15 ms under load).
    note("Acp: the answers to a cancel", Date.now() - t0)
    expect(Date.now() - t0).toBeLessThan(CHILD_WAIT_MS)
    expect([first.stopReason, second.stopReason]).toEqual(["cancelled", "cancelled"])
    // Only the cancelled tool's end came after the cancel, before the responses, and nothing since.
    expect(c.updates.slice(before).map((u) => u.update)).toEqual([
      expect.objectContaining({ sessionUpdate: "tool_call_update", toolCallId: "call_1_1_1", status: "failed" })
    ])
    const lastResponse = Math.max(
      ...c.lines.map((l, i) => ("result" in JSON.parse(l) && JSON.parse(l).result.stopReason === "cancelled" ? i : -1))
    )
    // An observation window: an update of the canceled turn would come within milliseconds of its
    // answers (they came 15 ms after the cancel, the tool's end in the same write); 300 ms is 20 times that.
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(c.lines.slice(lastResponse + 1)).toEqual([])
    const next = await prompt(c, sessionId, "hello again")
    expect(next.stopReason).toBe("end_turn")
    const events = checkLog(store, sessionId, [first, second, next])
    expect(Delivery.fateOf(events, messageIdOf(second))).toEqual({ _tag: "Dropped", reason: "canceled" })
    expect(events.filter((e) => e.type === "turn/end").map((e) => (e.data as { reason: unknown }).reason)).toEqual([
      { kind: "aborted", reason: { kind: "user" } },
      { kind: "completed" }
    ])
    expect(await c.close()).toBe(0)
  })

  it("a second prompt while one runs is queued and answered after its own turn", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    const answered: Array<string> = []
    // The tool's 1 s is the window for the second prompt: it is queued within milliseconds (10 ms measured under load).
    const first = prompt(c, sessionId, "wait 1 seconds").then((r) => (answered.push("first"), r))
    await until("the tool to start", () => c.updates.some((u) => u.update.sessionUpdate === "tool_call_update"))
    const second = prompt(c, sessionId, "hello").then((r) => (answered.push("second"), r))
    const responses = await Promise.all([first, second])
    expect(responses.map((r) => r.stopReason)).toEqual(["end_turn", "end_turn"])
    expect(answered).toEqual(["first", "second"])
    const events = checkLog(store, sessionId, responses)
    expect(responses.map((r) => Delivery.fateOf(events, messageIdOf(r)))).toEqual([
      { _tag: "Entered", turn: 1, step: 1 },
      { _tag: "Entered", turn: 2, step: 1 }
    ])
    // Each response came after the updates of its own turn: the second turn's text after the first response.
    const lineOf = (id: string) => c.lines.findIndex((l) => JSON.parse(l).result?._meta?.["agent-loop"]?.messageId === id)
    const firstLine = lineOf(messageIdOf(responses[0]))
    const secondLine = lineOf(messageIdOf(responses[1]))
    expect(firstLine).toBeLessThan(secondLine)
    const between = c.lines.slice(firstLine + 1, secondLine).map((l) => JSON.parse(l).params?.update?.content?.text ?? "").join(
      ""
    )
    expect(between).toBe(assistantText(events, 2))
    expect(await c.close()).toBe(0)
  })

  it("steer and inject through the extension methods: the model sees them after the whole tool batch, in arrival order", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    // The tool's 1 s is the window for the three requests: answered within 24 ms under load.
    const running = prompt(c, sessionId, "wait 1 seconds")
    await until("the tool to start", () => c.updates.some((u) => u.update.sessionUpdate === "tool_call_update"))
    const steer = await c.agent.request<{ messageId: string }>("_session/steer", {
      sessionId,
      prompt: [{ type: "text", text: "Also say hi." }]
    })
    const inject = await c.agent.request<{ messageId: string }>("_session/inject", {
      sessionId,
      prompt: [{ type: "text", text: "The user is on branch main." }]
    })
    const injectWithSource = await c.agent.request<{ messageId: string }>("_session/inject", {
      sessionId,
      prompt: [{ type: "text", text: "The network is metered." }],
      source: { kind: "plugin", plugin: "netwatch" }
    })
    const response = await running
    expect(response.stopReason).toBe("end_turn")
    const events = checkLog(store, sessionId, [response])
    // The model-visible order of turn 1 (§6, §8): the prompt; the tool result; then the steer and
    // the injections, in arrival order, in the step after the batch.
    const visible = events.filter((e) => e.type === "user/message" || e.type === "tool/result").map((e) =>
      e.type === "tool/result" ? `${(e.data as { step: number }).step}:result` : (e.data as { id: string }).id
    )
    expect(visible).toEqual([messageIdOf(response), "1:result", steer.messageId, inject.messageId, injectWithSource.messageId])
    for (const id of [steer.messageId, inject.messageId, injectWithSource.messageId]) {
      expect(Delivery.fateOf(events, id)).toEqual({ _tag: "Entered", turn: 1, step: 2 })
    }
    const sourceOf = (id: string) =>
      (events.find((e) => e.type === "user/message" && (e.data as { id: string }).id === id)!.data as { source: unknown }).source
    expect(sourceOf(inject.messageId)).toEqual({ kind: "plugin", plugin: "acp-test-client" })
    expect(sourceOf(injectWithSource.messageId)).toEqual({ kind: "plugin", plugin: "netwatch" })
    // The client is shown what entered the step, with its source; not its own prompt.
    expect(c.updates.map((u) => u.update).filter((u) => u.sessionUpdate === "user_message_chunk")).toEqual([
      {
        sessionUpdate: "user_message_chunk",
        content: { type: "text", text: "Also say hi." },
        messageId: steer.messageId,
        _meta: { "agent-loop": { messageId: steer.messageId, source: { kind: "user" }, via: "steer" } }
      },
      {
        sessionUpdate: "user_message_chunk",
        content: { type: "text", text: "The user is on branch main." },
        messageId: inject.messageId,
        _meta: {
          "agent-loop": { messageId: inject.messageId, source: { kind: "plugin", plugin: "acp-test-client" }, via: "inject" }
        }
      },
      {
        sessionUpdate: "user_message_chunk",
        content: { type: "text", text: "The network is metered." },
        messageId: injectWithSource.messageId,
        _meta: {
          "agent-loop": { messageId: injectWithSource.messageId, source: { kind: "plugin", plugin: "netwatch" }, via: "inject" }
        }
      }
    ])
    expect(assistantText(events, 1)).toContain(
      "I received 3 messages in this step: 1 from you (\"Also say hi.\"); context from plugin:acp-test-client (\"The user is on branch main.\"); context from plugin:netwatch (\"The network is metered.\")."
    )
    expect(await c.close()).toBe(0)
  })

  it("a turn ending error MAX_STEPS answers max_turn_requests; a model failure, a JSON-RPC error with its code and message", async () => {
    const store = tmp()
    const limited = await startClient(store, ["--max-steps", "1"])
    const sessionId = await newSession(limited, store)
    const response = await prompt(limited, sessionId, "wait 0 seconds")
    expect(response.stopReason).toBe("max_turn_requests")
    checkLog(store, sessionId, [response])
    expect(await limited.close()).toBe(0)
    // A provider nobody listens at: the model request fails (after its retries).
    const broken = await startClient(store, ["--provider", "openai-compat", "--base-url", "http://127.0.0.1:1", "--model", "m"])
    const other = await newSession(broken, store)
    const failed = await prompt(broken, other, "hello").then(() => undefined, (e: acp.RequestError) => e)
    const { events, header } = readLog(store, other)
    expect(Invariant.check(events, { header })).toEqual([])
    const end = events.find((e) => e.type === "turn/end")!.data as {
      reason: { kind: string; error: { code: string; message: string } }
    }
    expect(end.reason.kind).toBe("error")
    expect(failed).toMatchObject({
      code: -32603,
      message: `${end.reason.error.code}: ${end.reason.error.message}`,
      data: end.reason.error
    })
    const prompted = events.find((e) => e.type === "user/message")!.data as { id: string }
    expect(Delivery.fateOf(events, prompted.id)).toEqual({ _tag: "Entered", turn: 1, step: 1 })
    expect(await broken.close()).toBe(0)
  })

  it("session/load: a crashed session is repaired and goes on; a session another process writes is refused; an unknown one is -32002", async () => {
    const store = tmp()
    const first = await startClient(store)
    const sessionId = await newSession(first, store)
    const done = await prompt(first, sessionId, "hello")
    expect(done.stopReason).toBe("end_turn")
    // 30 s: the tool still runs at the kill, after another process has started (0.6 s under load).
    void prompt(first, sessionId, "wait 30 seconds").catch(() => {})
    await until("the tool to start", () => first.updates.some((u) => u.update.sessionUpdate === "tool_call_update"))
    // Input left pending by the crash: a queued prompt and a steer (both durable).
    void prompt(first, sessionId, "queued before the crash").catch(() => {})
    const steer = await first.agent.request<{ messageId: string }>("_session/steer", {
      sessionId,
      prompt: [{ type: "text", text: "steered before the crash" }]
    })
    await until("the queued prompt in the log", () =>
      logHas(store, sessionId, (e) =>
        e.type === "agent/inbox/spliced" &&
        (e.data as { target: string; inserted: ReadonlyArray<{ content: ReadonlyArray<{ text?: string }> }> }).inserted
          .some((m) => m.content[0]?.text === "queued before the crash")))
    // While the first process lives, another cannot load the session (one writer).
    const other = await startClient(store)
    const refused = await other.agent.request(acp.methods.agent.session.load, { sessionId, cwd: store, mcpServers: [] })
      .then(() => undefined, (e: acp.RequestError) => e)
    expect(refused).toMatchObject({ code: -32603, message: expect.stringContaining(`cannot load session ${sessionId}`) })
    expect(await other.close()).toBe(0)
    // A crash mid-turn.
    first.child.kill("SIGKILL")
    await first.exited
    const second = await startClient(store)
    const unknown = await second.agent.request(acp.methods.agent.session.load, {
      sessionId: "no-such-session",
      cwd: store,
      mcpServers: []
    }).then(() => undefined, (e: acp.RequestError) => e)
    expect(unknown).toMatchObject({ code: -32002 })
    expect(await second.agent.request(acp.methods.agent.session.load, { sessionId, cwd: store, mcpServers: [] })).toEqual({})
    // The conversation, replayed before the response (replay.ts): both prompts, the answer, the
    // crashed turn's text and its call, closed failed by the repair (TOOL_OUTCOME_UNKNOWN).
    const replayed = second.updates.map((u) => u.update)
    expect(replayed.map((u) => u.sessionUpdate)).toEqual([
      "user_message_chunk",
      "agent_message_chunk",
      "user_message_chunk",
      "agent_message_chunk",
      "tool_call",
      "tool_call_update"
    ])
    expect(replayed[0]).toMatchObject({ content: { type: "text", text: "hello" } })
    expect(replayed[2]).toMatchObject({ content: { type: "text", text: "wait 30 seconds" } })
    expect(replayed[5]).toMatchObject({
      toolCallId: "call_2_1_1",
      status: "failed",
      rawOutput: { error: { code: "TOOL_OUTCOME_UNKNOWN" } }
    })
    // The pending input runs at the next prompt, in its own turn before the prompt's; its
    // messages stream as they enter, with how they came (via), though no prompt here answers them.
    const loaded = second.updates.length
    const next = await prompt(second, sessionId, "hello again")
    expect(next.stopReason).toBe("end_turn")
    const events = checkLog(store, sessionId, [done, next])
    expect(events.filter((e) => e.type === "turn/end").map((e) => (e.data as { reason: unknown }).reason)).toEqual([
      { kind: "completed" },
      { kind: "interrupted" },
      { kind: "completed" },
      { kind: "completed" }
    ])
    const queuedId =
      (events.find((e) =>
        e.type === "user/message" && (e.data as { content: ReadonlyArray<{ text?: string }> }).content[0]?.text ===
          "queued before the crash"
      )!.data as { id: string }).id
    expect(Delivery.fateOf(events, steer.messageId)).toEqual({ _tag: "Entered", turn: 3, step: 1 })
    expect(Delivery.fateOf(events, queuedId)).toEqual({ _tag: "Entered", turn: 3, step: 1 })
    expect(Delivery.fateOf(events, messageIdOf(next))).toEqual({ _tag: "Entered", turn: 4, step: 1 })
    expect(second.updates.slice(loaded).map((u) => u.update).filter((u) => u.sessionUpdate === "user_message_chunk"))
      .toEqual([
        {
          sessionUpdate: "user_message_chunk",
          content: { type: "text", text: "steered before the crash" },
          messageId: steer.messageId,
          _meta: { "agent-loop": { messageId: steer.messageId, source: { kind: "user" }, via: "steer" } }
        },
        {
          sessionUpdate: "user_message_chunk",
          content: { type: "text", text: "queued before the crash" },
          messageId: queuedId,
          _meta: { "agent-loop": { messageId: queuedId, source: { kind: "user" }, via: "followup" } }
        }
      ])
    expect(await second.close()).toBe(0)
  })

  it("session/load of a log that is a fifo, or whose lock file is one: an error naming it at once; the agent serves on and exits when stdin ends", async () => {
    const store = tmp()
    const first = await startClient(store)
    const locked = await newSession(first, store)
    expect((await prompt(first, locked, "hello")).stopReason).toBe("end_turn")
    expect(await first.close()).toBe(0)
    // Opening a fifo for reading blocks until a writer comes; reading one opened read-write, for ever.
    execFileSync("mkfifo", [Path.join(store, "fifo-log.jsonl"), Path.join(store, `${locked}.jsonl.lock`)])
    const c = await startClient(store)
    /** The error a request answered within `CHILD_WAIT_MS`, or what else happened. */
    const noAnswer = () =>
      new Promise<string>((resolve) => setTimeout(() => resolve(`no answer within ${CHILD_WAIT_MS} ms`), CHILD_WAIT_MS).unref())
    const errorOf = (request: Promise<unknown>) =>
      Promise.race([
        request.then(() => "answered with a result", (e: acp.RequestError) => ({ code: e.code, message: e.message })),
        noAnswer()
      ])
    const load = (sessionId: string) =>
      errorOf(c.agent.request(acp.methods.agent.session.load, { sessionId, cwd: store, mcpServers: [] }))
    const fifoLog = await load("fifo-log")
    const fifoLock = await load(locked)
    // The store serves on: a new session and a prompt in it.
    const fresh = await Promise.race([
      newSession(c, store).then((id) => prompt(c, id, "hello")).then((r) => r.stopReason as string),
      noAnswer()
    ])
    // An exit held by a read of a fifo would hang: `close` gives up after `CHILD_WAIT_MS` (measured: 32 ms).
    const code = await c.close().catch((e: Error) => e.message)
    expect({ fifoLog, fifoLock, fresh, code }).toEqual({
      fifoLog: {
        code: -32603,
        message: `cannot load session fifo-log: cannot read ${store}/fifo-log.jsonl: not a regular file (a fifo)`
      },
      fifoLock: {
        code: -32603,
        message:
          `cannot load session ${locked}: cannot lock session "${locked}": ${store}/${locked}.jsonl.lock is not a regular file, not a lock file; remove it`
      },
      fresh: "end_turn",
      code: 0
    })
  })

  it("stdin closed while a prompt runs: the agent is disposed, the log closed valid, exit 0", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    // 30 s: `close` gives up after `CHILD_WAIT_MS` (10 s), so an exit that waited for the tool fails it
    // (the exit took 41 ms under load).
    void prompt(c, sessionId, "wait 30 seconds").catch(() => {})
    await until("the tool to start", () => c.updates.some((u) => u.update.sessionUpdate === "tool_call_update"))
    expect(await c.close()).toBe(0)
    const events = checkLog(store, sessionId, [])
    expect(events.filter((e) => e.type === "turn/end").map((e) => (e.data as { reason: unknown }).reason)).toEqual([
      { kind: "aborted", reason: { kind: "disposed" } }
    ])
  })
})

describe("agent-loop acp, bad input (raw lines on stdin)", () => {
  it("answers every bad line as JSON-RPC says and keeps serving", async () => {
    const store = tmp()
    const { proc } = startProcess(store, "lines")
    const write = (line: string) => proc.child.stdin.write(line + "\n")
    const request = (id: string, method: string, params: unknown) => write(JSON.stringify({ jsonrpc: "2.0", id, method, params }))
    const responseTo = async (id: string | null, after = 0) => {
      let found: Record<string, any> | undefined
      await until(`the response to ${id}`, () => {
        found = proc.lines.slice(after).map((l) => JSON.parse(l)).find((m) => m.id === id && !("method" in m))
        return found !== undefined
      })
      return found!
    }
    request("early", "session/new", { cwd: store, mcpServers: [] })
    expect((await responseTo("early")).error.code).toBe(-32600)
    request("init", "initialize", { protocolVersion: 1, clientInfo: CLIENT })
    expect((await responseTo("init")).result.protocolVersion).toBe(1)
    // Once per connection: a second initialize is refused, the first one's answer stands.
    request("init2", "initialize", { protocolVersion: 1, clientInfo: { name: "other", version: "2" } })
    expect((await responseTo("init2")).error).toEqual({
      code: -32600,
      message: "Invalid request: initialize was already answered on this connection"
    })
    write("{ not json")
    expect((await responseTo(null)).error).toEqual({ code: -32700, message: "Parse error" })
    request("m", "session/frobnicate", {})
    expect((await responseTo("m")).error.code).toBe(-32601)
    write(JSON.stringify({ jsonrpc: "2.0", method: "_unknown/notification", params: {} }))
    write(JSON.stringify({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId: "no-such-session" } }))
    request("u", "session/prompt", { sessionId: "no-such-session", prompt: [{ type: "text", text: "hi" }] })
    expect((await responseTo("u")).error).toMatchObject({ code: -32002, data: { sessionId: "no-such-session" } })
    request("p1", "session/new", { mcpServers: [] })
    expect((await responseTo("p1")).error.code).toBe(-32602)
    request("p2", "session/new", { cwd: "relative/dir", mcpServers: [] })
    expect((await responseTo("p2")).error).toMatchObject({ code: -32602, message: expect.stringContaining("absolute path") })
    // A cwd must be an existing directory.
    request("p3", "session/new", { cwd: Path.join(store, "missing"), mcpServers: [] })
    expect((await responseTo("p3")).error).toMatchObject({
      code: -32602,
      message: `Invalid params: cwd: no such directory ${JSON.stringify(Path.join(store, "missing"))}`
    })
    Fs.writeFileSync(Path.join(store, "a-file"), "")
    request("p4", "session/new", { cwd: Path.join(store, "a-file"), mcpServers: [] })
    expect((await responseTo("p4")).error).toMatchObject({
      code: -32602,
      message: `Invalid params: cwd: ${JSON.stringify(Path.join(store, "a-file"))} is not a directory`
    })
    // An MCP server that cannot start: a line on stderr (this client takes no notices), and the
    // session goes on without its tools.
    const noServer = Path.join(store, "mcp-files")
    request("s", "session/new", { cwd: store, mcpServers: [{ name: "files", command: noServer, args: [], env: [] }] })
    const sessionId = (await responseTo("s")).result.sessionId as string
    expect(proc.stderr()).toContain(
      `agent-loop acp: session ${sessionId}: MCP server "files" could not start: spawn ${noServer} ENOENT; ` +
        "the session goes on without its tools\n"
    )
    const logged = () => readLog(store, sessionId).events.length
    request("a", "session/prompt", { sessionId, prompt: [{ type: "audio", data: "AAAA", mimeType: "audio/wav" }] })
    expect((await responseTo("a")).error).toMatchObject({
      code: -32602,
      message: "Invalid params: prompt[0]: content block type \"audio\" is not supported"
    })
    // A block type outside ACP's schema is refused by the SDK's own check, without naming it.
    request("v", "session/prompt", { sessionId, prompt: [{ type: "video", url: "x" }] })
    expect((await responseTo("v")).error).toMatchObject({ code: -32602, message: "Invalid params" })
    request("b", "session/prompt", {
      sessionId,
      prompt: [{ type: "resource", resource: { uri: "file:///x.bin", blob: "AAAA" } }]
    })
    expect((await responseTo("b")).error).toMatchObject({ code: -32602, message: expect.stringContaining("blob") })
    request("e1", "_session/steer", { sessionId })
    expect((await responseTo("e1")).error.code).toBe(-32602)
    request("e2", "_session/steer", { sessionId: "no-such-session", prompt: [{ type: "text", text: "x" }] })
    expect((await responseTo("e2")).error.code).toBe(-32002)
    request("e3", "_session/inject", { sessionId, prompt: [{ type: "text", text: "x" }], source: "netwatch" })
    expect((await responseTo("e3")).error.code).toBe(-32602)
    request("e5", "_session/inject", { sessionId, prompt: [{ type: "text", text: "x" }], source: { kind: "nonsense-kind" } })
    expect((await responseTo("e5")).error).toMatchObject({
      code: -32602,
      message:
        "Invalid params: source.kind: \"nonsense-kind\" is not a source an injection can have (\"plugin\", \"hook\" or \"user\")"
    })
    request("e6", "_session/inject", { sessionId, prompt: [{ type: "text", text: "x" }], source: { kind: "plugin" } })
    expect((await responseTo("e6")).error).toMatchObject({
      code: -32602,
      message: "Invalid params: source.plugin: a non-empty string is required for a source of kind \"plugin\""
    })
    request("l1", "session/load", { sessionId, cwd: Path.join(store, "missing"), mcpServers: [] })
    expect((await responseTo("l1")).error).toMatchObject({ code: -32602, message: expect.stringContaining("no such directory") })
    request("e4", "_session/inject", { sessionId, prompt: [{ type: "video", url: "x" }] })
    expect((await responseTo("e4")).error).toMatchObject({ code: -32602, message: expect.stringContaining("\"video\"") })
    // Nothing of the refused prompts was logged.
    expect(logged()).toBe(0)
    request("ok", "session/prompt", { sessionId, prompt: [{ type: "text", text: "hello" }] })
    expect((await responseTo("ok")).result.stopReason).toBe("end_turn")
    // No notice update for the server: the client did not offer `session.notices`.
    expect(proc.lines.filter((l) => l.includes("\"notice\""))).toEqual([])
    // A line a little over the SDK's limit (32 MiB) while a prompt runs: dropped as it streams,
    // answered -32600 with its id, noticed; the running prompt is answered, the agent serves on.
    const big = JSON.stringify({
      jsonrpc: "2.0",
      id: "big",
      method: "session/prompt",
      params: { sessionId, prompt: [{ type: "text", text: "x".repeat(LINE_LIMIT + 1024) }] }
    })
    const after = proc.lines.length
    // The tool's 5 s is the window for the big line: written, dropped and answered in 0.3-0.5 s under load.
    request("w", "session/prompt", { sessionId, prompt: [{ type: "text", text: "wait 5 seconds" }] })
    await until("the tool to start", () => proc.lines.slice(after).some((l) => l.includes("\"in_progress\"")))
    write(big)
    const bytes = Buffer.byteLength(big)
    expect((await responseTo("big", after)).error).toEqual({
      code: -32600,
      message: `message too large: ${bytes} bytes, the limit is 32 MiB`,
      data: { bytes, limit: LINE_LIMIT }
    })
    expect((await responseTo("w", after)).result.stopReason).toBe("end_turn")
    // The big line was answered while the prompt ran, before the prompt's answer.
    const answerLine = (id: string) => proc.lines.findIndex((l, i) => i >= after && JSON.parse(l).id === id)
    expect(answerLine("big")).toBeLessThan(answerLine("w"))
    expect(proc.stderr()).toContain(
      `agent-loop acp: dropped a line of ${bytes} bytes (request "big"): message too large: ${bytes} bytes, the limit is 32 MiB`
    )
    request("ok2", "session/prompt", { sessionId, prompt: [{ type: "text", text: "hello" }] })
    expect((await responseTo("ok2", after)).result.stopReason).toBe("end_turn")
    expect(await proc.close()).toBe(0)
    const { events, header } = readLog(store, sessionId)
    expect(Invariant.check(events, { header })).toEqual([])
  })
})

describe("agent-loop acp, invalid JSON-RPC envelopes (raw lines on stdin)", () => {
  it("an object that is no request, notification or response is -32600 with its id, null only when it has none of a valid type; a response is never answered", async () => {
    const store = tmp()
    const { proc } = startProcess(store, "lines")
    let pings = 0
    /** What the agent wrote for `line`: every line before the answer to a request sent right behind it. */
    const answersTo = async (line: string): Promise<Array<unknown>> => {
      const before = proc.lines.length
      const ping = `ping-${++pings}`
      proc.child.stdin.write(line + "\n" + JSON.stringify({ jsonrpc: "2.0", id: ping, method: "_ping" }) + "\n")
      let at = -1
      await until(`the answer to ${ping}`, () => {
        at = proc.lines.slice(before).findIndex((l) => JSON.parse(l).id === ping)
        return at >= 0
      })
      return proc.lines.slice(before, before + at).map((l) => JSON.parse(l))
    }
    const invalid = (id: string | number | null, why: string) => [{
      jsonrpc: "2.0",
      id,
      error: { code: -32600, message: `Invalid request: ${why}` }
    }]
    const NO_METHOD = `a message with an "id" needs a "method" (a request), or a "result" or an "error" (a response)`
    // Before initialize too.
    const early = await answersTo(JSON.stringify({ jsonrpc: "2.0", id: "early" }))
    proc.child.stdin.write(
      JSON.stringify({ jsonrpc: "2.0", id: "init", method: "initialize", params: { protocolVersion: 1 } }) + "\n"
    )
    await until("the answer to initialize", () => proc.lines.some((l) => JSON.parse(l).id === "init"))
    const cases: ReadonlyArray<readonly [string, ReadonlyArray<unknown>]> = [
      // An id and no method, result or error: answered with that id (the SDK took it for a response).
      [`{"jsonrpc":"2.0","id":5}`, invalid(5, NO_METHOD)],
      [`{"jsonrpc":"2.0","id":"a"}`, invalid("a", NO_METHOD)],
      [`{"jsonrpc":"2.0","id":null}`, invalid(null, NO_METHOD)],
      [`{"id":6}`, invalid(6, `"jsonrpc" must be "2.0"`)],
      // A malformed request whose id can be read: answered with it (the SDK used null).
      [`{"jsonrpc":"2.0","id":"b","method":5}`, invalid("b", `"method" must be a string`)],
      [`{"id":7,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`, invalid(7, `"jsonrpc" must be "2.0"`)],
      [`{"jsonrpc":"1.0","id":8.5,"method":"initialize"}`, invalid(8.5, `"jsonrpc" must be "2.0"`)],
      // An id that cannot be determined: null.
      [`{"jsonrpc":"2.0","id":{"a":1},"method":"initialize"}`, invalid(null, `"id" must be a string, a number or null`)],
      [`{"jsonrpc":"2.0","id":true}`, invalid(null, `"id" must be a string, a number or null`)],
      [`{"jsonrpc":"2.0","method":1,"params":"bar"}`, invalid(null, `"method" must be a string`)],
      [
        `{"jsonrpc":"2.0"}`,
        invalid(
          null,
          `a message needs a "method" (a request or a notification), or an "id" and a "result" or an "error" (a response)`
        )
      ],
      [`{"foo":"boo"}`, invalid(null, `"jsonrpc" must be "2.0"`)],
      // Not an object, not JSON: the SDK's answers, null.
      [`42`, [{ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid request", data: 42 } }]],
      [`[{"jsonrpc":"2.0","id":9,"method":"initialize"}]`, [{
        jsonrpc: "2.0",
        id: null,
        error: { code: -32600, message: "Invalid request: JSON-RPC batches are not supported" }
      }]],
      [`{"jsonrpc":"2.0","id":10`, [{ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }]],
      // Responses, even malformed or to no request of ours: never answered.
      [`{"jsonrpc":"2.0","id":11,"result":{}}`, []],
      [`{"id":12,"error":"no"}`, []],
      // A valid request with a null id is the SDK's: answered with null.
      [`{"jsonrpc":"2.0","id":null,"method":"_frobnicate"}`, [{
        jsonrpc: "2.0",
        id: null,
        error: { code: -32601, message: "\"Method not found\": _frobnicate", data: { method: "_frobnicate" } }
      }]]
    ]
    const answered: Array<readonly [string, ReadonlyArray<unknown>]> = []
    for (const [line] of cases) answered.push([line, await answersTo(line)])
    expect({ early, answered }).toEqual({ early: invalid("early", NO_METHOD), answered: cases })
    // It serves on, and ends with stdin.
    proc.child.stdin.write(
      JSON.stringify({ jsonrpc: "2.0", id: "s", method: "session/new", params: { cwd: store, mcpServers: [] } }) + "\n"
    )
    await until("the new session", () => proc.lines.some((l) => JSON.parse(l).id === "s"))
    expect(await proc.close()).toBe(0)
  })
})

describe("the update projector (updates.ts) and the stop reasons", () => {
  const durable = (type: string, data: unknown, seq = 0) => ({ type, seq, time: 0, data }) as unknown as SessionEvent
  const delta = (fields: { text?: string; reasoning?: string }, step = 1) =>
    ({ type: "assistant/delta", turn: 1, step, ...fields }) as AgentEvent

  it("streams deltas, sends what the model did not stream, reports usage, shows tool calls as they start; the prompt is not echoed", () => {
    const p = projector({ cwd: "/work", isPrompt: (id) => id === "prompt-1", contextWindow: 128_000 })
    const out = [
      durable("user/message", {
        id: "prompt-1",
        role: "user",
        content: [{ type: "text", text: "hi" }],
        source: { kind: "user" }
      }),
      delta({ reasoning: "Think" }),
      delta({ text: "Hel" }),
      { type: "assistant/retry", turn: 1, step: 1, attempt: 2 } as AgentEvent,
      delta({ text: "Hello" }),
      durable("assistant/message", {
        turn: 1,
        step: 1,
        message: {
          id: "a1",
          role: "assistant",
          content: [
            { type: "reasoning", text: "Think" },
            { type: "text", text: "Hello world" },
            { type: "tool-call", id: "c1", name: "read_file", arguments: "{\"path\":\"src/a.ts\"}" }
          ],
          source: { kind: "model" }
        },
        usage: { inputTokens: 1000, outputTokens: 50 }
      }),
      durable("tool/call", { turn: 1, step: 1, callId: "c1", name: "read_file", arguments: "{\"path\":\"src/a.ts\"}" }),
      durable("tool/call", { turn: 1, step: 1, callId: "c2", name: "mystery", arguments: "not json" }),
      durable("tool/result", {
        turn: 1,
        step: 1,
        message: {
          id: "r2",
          role: "user",
          content: [{ type: "tool-result", toolCallId: "c2", content: [{ type: "text", text: "Unknown tool" }], isError: true }],
          source: { kind: "tool" }
        },
        error: { name: "ToolError", code: "UNKNOWN_TOOL" }
      })
    ].flatMap((e) => p.push(e))
    expect(out).toEqual([
      { sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "Think" } },
      { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "Hel" } },
      // The retry's attempt streams again (the withdrawn "Hel" cannot be taken back).
      { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "Hello" } },
      // What the logged response holds beyond what its attempt streamed.
      { sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "Think" } },
      { sessionUpdate: "agent_message_chunk", content: { type: "text", text: " world" } },
      {
        sessionUpdate: "usage_update",
        used: 1050,
        size: 128_000,
        _meta: { "agent-loop": { usage: { inputTokens: 1000, outputTokens: 50 }, turn: 1, step: 1 } }
      },
      // A call is shown when it is logged, as it starts (the replay's shapes, replay.ts).
      {
        sessionUpdate: "tool_call",
        toolCallId: "c1",
        name: "read_file",
        status: "pending",
        rawInput: { path: "src/a.ts" },
        title: "read_file src/a.ts",
        kind: "read",
        locations: [{ path: "/work/src/a.ts" }]
      },
      { sessionUpdate: "tool_call_update", toolCallId: "c1", status: "in_progress" },
      // Arguments that are not JSON: rawInput is their text.
      {
        sessionUpdate: "tool_call",
        toolCallId: "c2",
        name: "mystery",
        status: "pending",
        rawInput: "not json",
        title: "mystery",
        kind: "other"
      },
      { sessionUpdate: "tool_call_update", toolCallId: "c2", status: "in_progress" },
      {
        sessionUpdate: "tool_call_update",
        toolCallId: "c2",
        status: "failed",
        content: [{ type: "content", content: { type: "text", text: "Unknown tool" } }],
        rawOutput: { isError: true, text: "Unknown tool", error: { name: "ToolError", code: "UNKNOWN_TOOL" } }
      }
    ])
  })

  it("a response without usage reports none; without a context window the size is 0 (unknown)", () => {
    const p = projector({ cwd: "/", isPrompt: () => false })
    const message = { id: "a", role: "assistant", content: [], source: { kind: "model" } }
    expect(p.push(durable("assistant/message", { turn: 1, step: 1, message }))).toEqual([])
    expect(p.push(durable("assistant/message", { turn: 1, step: 2, message, usage: { inputTokens: 7 } }))).toEqual([
      {
        sessionUpdate: "usage_update",
        used: 7,
        size: 0,
        _meta: { "agent-loop": { usage: { inputTokens: 7 }, turn: 1, step: 2 } }
      }
    ])
  })

  it("maps every turn end reason", () => {
    const error = (code: string) => ({ kind: "error" as const, error: { code, message: "it broke" } })
    expect(stopReasonOf({ kind: "completed" })).toEqual({ stopReason: "end_turn" })
    expect(stopReasonOf({ kind: "max-tokens" })).toEqual({ stopReason: "max_tokens" })
    expect(stopReasonOf(error("MAX_STEPS"))).toEqual({ stopReason: "max_turn_requests" })
    expect(stopReasonOf({ kind: "blocked", reason: "budget" })).toEqual({ stopReason: "refusal" })
    expect(stopReasonOf({ kind: "aborted", reason: { kind: "user" } })).toEqual({ stopReason: "cancelled" })
    expect(stopReasonOf({ kind: "aborted", reason: { kind: "disposed" } })).toEqual({ stopReason: "cancelled" })
    expect(stopReasonOf({ kind: "interrupted" })).toEqual({ stopReason: "cancelled" })
    const failed = stopReasonOf(error("RATE_LIMITED"))
    expect("error" in failed && failed.error.toErrorResponse()).toEqual({
      code: -32603,
      message: "RATE_LIMITED: it broke",
      data: { code: "RATE_LIMITED", message: "it broke" }
    })
  })
})

describe("prompt blocks as message content (prompt.ts)", () => {
  it("takes text, images, resource links and embedded text resources; refuses the rest, naming the block", () => {
    expect(contentOf([
      { type: "text", text: "Look:" },
      { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
      { type: "resource_link", uri: "file:///p/notes.md", name: "notes.md" },
      { type: "resource", resource: { uri: "file:///p/a.ts", text: "const a = 1", mimeType: "text/x-typescript" } }
    ])).toEqual({
      ok: true,
      content: [
        { type: "text", text: "Look:" },
        { type: "image", mediaType: "image/png", data: "iVBORw0KGgo=" },
        { type: "text", text: "[notes.md](file:///p/notes.md)" },
        { type: "text", text: "<resource uri=\"file:///p/a.ts\">\nconst a = 1\n</resource>" }
      ]
    })
    expect(contentOf([])).toEqual({ ok: false, message: "prompt: the prompt is empty" })
    expect(contentOf([{ type: "text", text: "a" }, { type: "image", uri: "https://x/y.png", mimeType: "image/png" }])).toEqual({
      ok: false,
      message: "prompt[1]: an image block needs base64 data and a mimeType (an image by uri only is not supported)"
    })
  })
})

describe("the line limit (lineLimit.ts)", () => {
  /** Feeds `chunks` through `limitLines(limit)`: the lines out, and what was reported. */
  const through = async (limit: number, chunks: ReadonlyArray<string>) => {
    const seen: Array<Oversize> = []
    const input = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const c of chunks) controller.enqueue(new TextEncoder().encode(c))
        controller.close()
      }
    })
    let out = ""
    const decoder = new TextDecoder()
    for await (const b of input.pipeThrough(limitLines(limit, (o) => seen.push(o))) as unknown as AsyncIterable<Uint8Array>) {
      out += decoder.decode(b, { stream: true })
    }
    return { out, seen }
  }

  it("passes lines within the limit unchanged, across chunks; drops longer ones, reading their kind and id", async () => {
    const long = (head: string) => `${head}"pad":"${"x".repeat(40)}"}`
    const request = long("{\"jsonrpc\":\"2.0\",\"id\":\"r,1\",\"method\":\"m\",")
    const notification = long("{\"method\":\"n\",\"params\":{\"id\":9},")
    const response = long("{\"id\":5,\"result\":{\"content\":\"a}b\\\"\"},")
    const array = long("[1,")
    const { out, seen } = await through(30, [
      "{\"id\":1}\n{\"a\":",
      "2}\r\n",
      request.slice(0, 20),
      request.slice(20) + "\n" + notification + "\n",
      response,
      "\n",
      array,
      "\n{\"last\":true}"
    ])
    // A response over the limit is replaced by an error response to its id (the agent's own request fails).
    const tooLarge = `message too large: ${response.length} bytes, the limit is 30 bytes`
    expect(out).toBe(
      "{\"id\":1}\n{\"a\":2}\r\n" +
        JSON.stringify({
          jsonrpc: "2.0",
          id: 5,
          error: { code: -32600, message: tooLarge, data: { bytes: response.length, limit: 30 } }
        }) + "\n{\"last\":true}"
    )
    expect(seen).toEqual([
      { bytes: request.length, kind: "request", id: "r,1" },
      { bytes: notification.length, kind: "notification", id: undefined },
      { bytes: response.length, kind: "response", id: 5 },
      { bytes: array.length, kind: "unknown", id: undefined }
    ])
  })

  it("a line over the limit at the end of the input, without its newline, is reported too", async () => {
    const { out, seen } = await through(8, ["{\"id\":[1],", "\"method\":\"x\"}"])
    expect(out).toBe("")
    expect(seen).toEqual([{ bytes: 23, kind: "request", id: undefined }])
  })

  it("the id of the error answering a line over the limit: the line's when it was read, unless it is a response's; else null", async () => {
    const { seen } = await through(8, [
      "{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"m\"}\n",
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"params\":{}}\n",
      "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"m\"}\n",
      "{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n",
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n"
    ])
    expect(seen.map((o) => [o.kind, answerId(o)])).toEqual([
      ["request", "r"],
      ["unknown", 7],
      ["request", null],
      ["notification", null],
      ["response", null]
    ])
  })
})
