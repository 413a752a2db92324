/**
 * Approvals over ACP (§26 rule 10, §22): `agent-loop acp --ask wait` run as an editor runs it
 * (the built CLI in a child process, the offline model), driven through the ACP SDK's own
 * client, which checks each request and update it receives against the v1 schema. A call of
 * `wait` waits for the client's answer to `session/request_permission`; the tests pin what the
 * client sees (the updates and requests in the order they came) and what the log records (the
 * question, its decision, the call's result, the turn's end), and check every log with
 * `Invariant.check`. The last test runs the agent in this process (`runAcp` over streams) with a
 * scripted model that makes two calls in one step. Waits are bounded (`until`). First, the
 * pure mapping of `permission.ts`: the request's shape and every kind of answer.
 */
import * as acp from "@agentclientprotocol/sdk"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { type ChildProcessWithoutNullStreams, execFile, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { PassThrough, Readable, Writable } from "node:stream"
import { runAcp } from "../src/cli/acp/agent.js"
import * as Permission from "../src/cli/acp/permission.js"
import { withAsk } from "../src/cli/commands/askFlag.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import * as OfflineTools from "../src/providers/OfflineTools.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent, SessionHeader } from "../src/SessionEvent.js"
import { endAcp } from "./utils/acpProcess.js"
import { checkPermissionRequest } from "./utils/acpSchema.js"
import { CLI_RUN_MS } from "./utils/bounds.js"
import { pollUntil } from "./utils/poll.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const BIN = Path.resolve("dist/cli/bin.js")
const tmp = scratchDirs("agent-loop-acp-approval-")
const CLIENT = { name: "acp-test-client", version: "1.0.0" }

/** Polls `check` every 10 ms until it holds, or fails after `CHILD_WAIT_MS`. */
const until = pollUntil("AcpApproval")

/** A permission request the client received: its params, and how to answer it. */
interface Asked {
  readonly sessionId: string
  readonly params: acp.RequestPermissionRequest
  /** Aborted when the agent drops the request (`$/cancel_request`). */
  readonly signal: AbortSignal
  readonly answer: (response: unknown) => void
}

/** What the client received, in order: an update, a permission request, or the drop of one. */
type Received =
  | { readonly update: acp.SessionUpdate }
  | { readonly permission: acp.RequestPermissionRequest }
  | { readonly dropped: string }

interface Client {
  readonly child: ChildProcessWithoutNullStreams | undefined
  readonly agent: acp.ClientContext
  readonly received: Array<Received>
  readonly asked: Array<Asked>
  readonly stderr: () => string
  /** Ends the agent's stdin and waits (bounded) for it to end; the exit code (0 in process). */
  readonly close: () => Promise<number | null>
}

/** Connects the SDK's client to an agent's streams; answers permission requests as the test says (`asked`). */
const connect = async (
  input: WritableStream<Uint8Array>,
  output: ReadableStream<Uint8Array>
): Promise<Pick<Client, "agent" | "received" | "asked">> => {
  const received: Array<Received> = []
  const asked: Array<Asked> = []
  const app = acp.client({ name: CLIENT.name })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      received.push({ update: params.update })
    })
    .onRequest(
      acp.methods.client.session.requestPermission,
      ({ params, signal }) =>
        new Promise<acp.RequestPermissionResponse>((resolve) => {
          received.push({ permission: params })
          const id = approvalIdOf(params)
          signal.addEventListener("abort", () => received.push({ dropped: id }))
          asked.push({ sessionId: params.sessionId, params, signal, answer: (r) => resolve(r as acp.RequestPermissionResponse) })
        })
    )
  const connection = app.connect(acp.ndJsonStream(input, output))
  await connection.agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: CLIENT
  })
  return { agent: connection.agent, received, asked }
}

/** `agent-loop acp --store STORE --ask wait` in a child process, with the SDK's client connected. */
const startClient = async (store: string, args: ReadonlyArray<string> = ["--ask", "wait"]): Promise<Client> => {
  const child = spawn(process.execPath, [BIN, "acp", "--store", store, ...args], { cwd: store, stdio: "pipe" })
  let stderr = ""
  child.stderr.setEncoding("utf8")
  child.stderr.on("data", (chunk: string) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const connected = await connect(
    Writable.toWeb(child.stdin) as unknown as WritableStream<Uint8Array>,
    Readable.toWeb(child.stdout) as unknown as ReadableStream<Uint8Array>
  )
  const close = () => endAcp(child, exited, () => stderr)
  return { child, ...connected, stderr: () => stderr, close }
}

const newSession = async (c: Pick<Client, "agent">, cwd: string): Promise<string> =>
  (await c.agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] })).sessionId

const prompt = (c: Pick<Client, "agent">, sessionId: string, text: string) =>
  c.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] })

const approvalIdOf = (params: acp.RequestPermissionRequest): string =>
  (params._meta as { readonly "agent-loop": { readonly approvalId: string } })["agent-loop"].approvalId

const selected = (optionId: string) => ({ outcome: { outcome: "selected", optionId } })

/** The session's log: header and events, read from the store. */
const readLog = (store: string, sessionId: string): { header: SessionHeader; events: Array<SessionEvent> } => {
  const [first, ...rest] = Fs.readFileSync(Path.join(store, `${sessionId}.jsonl`), "utf8").split("\n").filter((l) => l !== "")
  return { header: JSON.parse(first!) as SessionHeader, events: rest.map((l) => JSON.parse(l) as SessionEvent) }
}

/** Whether the session's log (as far as it is written) has an event `holds`. */
const logHas = (store: string, sessionId: string, holds: (e: SessionEvent) => boolean): boolean =>
  Fs.readFileSync(Path.join(store, `${sessionId}.jsonl`), "utf8").split("\n").slice(1).some((l) => {
    try {
      return holds(JSON.parse(l) as SessionEvent)
    } catch {
      return false
    }
  })

/** The log, checked (`Invariant.check`). */
const checkedLog = (store: string, sessionId: string): Array<SessionEvent> => {
  const { events, header } = readLog(store, sessionId)
  expect(Invariant.check(events, { header })).toEqual([])
  return events
}

/**
 * The approval story of a log, one line an event: `asked ID TOOL CALL`, `decided ID OUTCOME BY
 * [REASON]`, `result CALL [CODE]`, `end TURN KIND [CAUSE]`; the ids of questions as `q1`, `q2`…
 */
const story = (events: ReadonlyArray<SessionEvent>): Array<string> => {
  const ids = new Map<string, string>()
  const q = (id: string) => ids.get(id) ?? (ids.set(id, `q${ids.size + 1}`), ids.get(id)!)
  const out: Array<string> = []
  for (const e of events) {
    const d = e.data as any
    if (e.type === "approval/asked") out.push(`asked ${q(d.id)} ${d.toolName} ${d.callId}`)
    else if (e.type === "approval/decided") {
      const by = d.by === undefined
        ? "-"
        : d.by.kind === "person"
        ? `person:${d.by.name ?? ""}`
        : d.by.kind === "policy"
        ? `policy:${d.by.policy}`
        : d.by.kind
      out.push(`decided ${q(d.id)} ${d.outcome} ${by}${d.reason === undefined ? "" : ` ${d.reason}`}`)
    } else if (e.type === "tool/result") {
      out.push(`result ${d.message.source.callId}${d.error === undefined ? "" : ` ${d.error.code}`}`)
    } else if (e.type === "turn/end") {
      out.push(`end ${d.turn} ${d.reason.kind}${d.reason.reason === undefined ? "" : ` ${d.reason.reason.kind}`}`)
    }
  }
  return out
}

/** What the client received, one line each: `KIND [STATUS]` of an update, `permission TOOLCALL`, `dropped`. */
const seen = (received: ReadonlyArray<Received>): Array<string> => {
  const out: Array<string> = []
  for (const r of received) {
    if ("update" in r) {
      const u = r.update as { sessionUpdate: string; status?: string; toolCallId?: string }
      const line = `${u.sessionUpdate}${u.toolCallId === undefined ? "" : ` ${u.toolCallId}`}${
        u.status === undefined ? "" : ` ${u.status}`
      }`
      // Consecutive chunks of one kind are one line (their number depends on the streaming).
      if (u.sessionUpdate.endsWith("_chunk") && out.at(-1) === line) continue
      out.push(line)
    } else if ("permission" in r) out.push(`permission ${r.permission.toolCall.toolCallId}`)
    else out.push("dropped")
  }
  return out
}

/** The text of the last `tool_call_update` of a call. */
const resultText = (received: ReadonlyArray<Received>, callId: string): string | undefined => {
  const updates = received.flatMap((r) => ("update" in r ? [r.update] : [])).filter((u) =>
    u.sessionUpdate === "tool_call_update" && u.toolCallId === callId && u.rawOutput !== undefined
  )
  return (updates.at(-1) as { rawOutput?: { text: string } } | undefined)?.rawOutput?.text
}

const OPTIONS = [
  { optionId: "allow_once", name: "Allow once", kind: "allow_once" },
  { optionId: "allow_always", name: "Always allow wait", kind: "allow_always" },
  { optionId: "reject_once", name: "Reject", kind: "reject_once" },
  { optionId: "reject_always", name: "Always reject wait", kind: "reject_always" }
]

describe("permission.ts: the request and the decisions of the answers", () => {
  it("the request: the call's tool_call without sessionUpdate, the four options, the question in _meta; exactly ACP's schema", () => {
    const params = Permission.request("s1", {
      sessionUpdate: "tool_call",
      toolCallId: "c1",
      title: "read_file notes.txt",
      name: "read_file",
      kind: "read",
      status: "pending",
      rawInput: { path: "notes.txt" },
      locations: [{ path: "/work/notes.txt" }]
    }, { id: "q1", toolName: "read_file", turn: 2, step: 3, askedAt: 1_700_000_000_000 })
    expect(params).toEqual({
      sessionId: "s1",
      toolCall: {
        toolCallId: "c1",
        title: "read_file notes.txt",
        name: "read_file",
        kind: "read",
        status: "pending",
        rawInput: { path: "notes.txt" },
        locations: [{ path: "/work/notes.txt" }]
      },
      options: [
        { optionId: "allow_once", name: "Allow once", kind: "allow_once" },
        { optionId: "allow_always", name: "Always allow read_file", kind: "allow_always" },
        { optionId: "reject_once", name: "Reject", kind: "reject_once" },
        { optionId: "reject_always", name: "Always reject read_file", kind: "reject_always" }
      ],
      _meta: { "agent-loop": { approvalId: "q1", turn: 2, step: 3, askedAt: 1_700_000_000_000 } }
    })
    checkPermissionRequest(params)
  })

  it("each answer's decision; an unknown option or outcome rejects naming it; a malformed answer decides nothing", () => {
    const decide = (response: unknown) =>
      Either.match(Permission.decisionOf("q1", response), {
        onLeft: (e) => `${e._tag}: ${e.message}`,
        onRight: (d) => d
      })
    expect([
      selected("allow_once"),
      selected("allow_always"),
      selected("reject_once"),
      selected("reject_always"),
      { outcome: { outcome: "cancelled" }, _meta: { x: 1 } },
      selected("ALLOW_ONCE"),
      { outcome: { outcome: "approved" } }
    ].map(decide)).toEqual([
      { _tag: "Allow", always: false },
      { _tag: "Allow", always: true },
      { _tag: "Reject", always: false },
      { _tag: "Reject", always: true },
      { _tag: "Cancel" },
      { _tag: "Reject", always: false, reason: "the client selected an option this agent did not offer: \"ALLOW_ONCE\"" },
      { _tag: "Reject", always: false, reason: "the client answered an outcome this agent does not know: \"approved\"" }
    ])
    const prefix = "PermissionResponseInvalid: the client's answer to session/request_permission is malformed: "
    expect([
      null,
      {},
      { outcome: "allow_once" },
      { outcome: { outcome: 1 } },
      { outcome: { outcome: "selected" } },
      { outcome: { outcome: "selected", optionId: 7 } }
    ].map(decide)).toEqual([
      `${prefix}the response must be an object, got null`,
      `${prefix}"outcome" must be an object ({"outcome": "selected", "optionId": ID} or {"outcome": "cancelled"}), got nothing`,
      `${prefix}"outcome" must be an object ({"outcome": "selected", "optionId": ID} or {"outcome": "cancelled"}), got "allow_once"`,
      `${prefix}"outcome.outcome" must be a string, got 1`,
      `${prefix}a "selected" outcome needs a string "optionId", got nothing`,
      `${prefix}a "selected" outcome needs a string "optionId", got 7`
    ])
  })
})

describe("--ask TOOL", () => {
  it("withAsk gives the tools named approval \"always\", the others unchanged", () => {
    const tools = withAsk([OfflineTools.wait, OfflineTools.clock], ["wait", "nope"])
    expect(tools.map((t) => [t.name, t.approval])).toEqual([["wait", "always"], ["clock", "never"]])
    expect(tools[1]).toBe(OfflineTools.clock)
    expect(withAsk([OfflineTools.wait], [])[0]).toBe(OfflineTools.wait)
  })

  it("acp --ask with a name that is no tool of the session exits 2 naming it and the tools", async () => {
    const store = tmp()
    const result = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [BIN, "acp", "--store", store, "--ask", "wait", "--ask", "bash"],
        { cwd: store, timeout: CLI_RUN_MS, killSignal: "SIGKILL" },
        (error, _stdout, stderr) => resolve({ code: error === null ? 0 : (error as { code?: number }).code ?? 1, stderr })
      )
    )
    expect(result).toEqual({ code: 2, stderr: "--ask bash: no tool of that name (the tools are wait, clock, read_file)\n" })
  })
})

describe("approvals over ACP, through the SDK's client", () => {
  it("allow_once: the request names the call as its tool_call did; the call runs once and its result reaches the client", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    const running = prompt(c, sessionId, "wait 0.1 seconds")
    await until("the permission request", () => c.asked.length === 1)
    const { events: asked } = readLog(store, sessionId)
    const question = asked.find((e) => e.type === "approval/asked")!
    expect(c.asked[0]!.params).toEqual({
      sessionId,
      toolCall: {
        toolCallId: "call_1_1_1",
        title: "wait 0.1s",
        name: "wait",
        kind: "other",
        status: "pending",
        rawInput: { seconds: 0.1 }
      },
      options: OPTIONS,
      _meta: {
        "agent-loop": { approvalId: (question.data as { id: string }).id, turn: 1, step: 1, askedAt: question.time }
      }
    })
    c.asked[0]!.answer(selected("allow_once"))
    const response = await running
    expect(response.stopReason).toBe("end_turn")
    expect(seen(c.received)).toEqual([
      "agent_message_chunk",
      "tool_call call_1_1_1 pending",
      "permission call_1_1_1",
      "tool_call_update call_1_1_1 in_progress",
      "tool_call_update call_1_1_1 completed",
      "agent_message_chunk"
    ])
    expect(resultText(c.received, "call_1_1_1")).toBe("waited 0.1 seconds")
    expect(story(checkedLog(store, sessionId))).toEqual([
      "asked q1 wait call_1_1_1",
      "decided q1 allowed-once person:acp-test-client",
      "result call_1_1_1",
      "end 1 completed"
    ])
    expect(await c.close()).toBe(0)
  })

  it("reject_always: a DENIED result; a later call of the tool is rejected by the remembered answer, without a request", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    const first = prompt(c, sessionId, "wait 0.1 seconds")
    await until("the permission request", () => c.asked.length === 1)
    c.asked[0]!.answer(selected("reject_always"))
    expect((await first).stopReason).toBe("end_turn")
    expect((await prompt(c, sessionId, "wait 0.2 seconds")).stopReason).toBe("end_turn")
    expect(c.asked.length).toBe(1)
    expect(seen(c.received)).toEqual([
      "agent_message_chunk",
      "tool_call call_1_1_1 pending",
      "permission call_1_1_1",
      "tool_call_update call_1_1_1 failed",
      "agent_message_chunk",
      "tool_call call_2_1_1 pending",
      "tool_call_update call_2_1_1 failed",
      "agent_message_chunk"
    ])
    expect(resultText(c.received, "call_1_1_1")).toBe(
      "The call to wait was rejected (for every call of this tool in this session) by acp-test-client."
    )
    expect(resultText(c.received, "call_2_1_1")).toBe(
      "The call to wait was rejected by the policy remembered: a person rejected every call of this tool in this session"
    )
    expect(story(checkedLog(store, sessionId))).toEqual([
      "asked q1 wait call_1_1_1",
      "decided q1 rejected-always person:acp-test-client",
      "result call_1_1_1 DENIED",
      "end 1 completed",
      "asked q2 wait call_2_1_1",
      "decided q2 rejected policy:remembered a person rejected every call of this tool in this session",
      "result call_2_1_1 DENIED",
      "end 2 completed"
    ])
    expect(await c.close()).toBe(0)
  })

  it("the client answers cancelled: the turn is cancelled, the question decided cancelled, the call never started", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    const running = prompt(c, sessionId, "wait 0.1 seconds")
    await until("the permission request", () => c.asked.length === 1)
    c.asked[0]!.answer({ outcome: { outcome: "cancelled" } })
    expect((await running).stopReason).toBe("cancelled")
    expect(seen(c.received)).toEqual([
      "agent_message_chunk",
      "tool_call call_1_1_1 pending",
      "permission call_1_1_1",
      "tool_call_update call_1_1_1 failed"
    ])
    expect(story(checkedLog(store, sessionId))).toEqual([
      "asked q1 wait call_1_1_1",
      "decided q1 cancelled cancel",
      "result call_1_1_1 TOOL_ABORTED_BEFORE_DISPATCH",
      "end 1 aborted user"
    ])
    // The session goes on.
    expect((await prompt(c, sessionId, "hello")).stopReason).toBe("end_turn")
    expect(await c.close()).toBe(0)
  })

  it("session/cancel while the request is pending: the turn ends cancelled, the question is decided cancelled, the request dropped", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    const running = prompt(c, sessionId, "wait 0.1 seconds")
    await until("the permission request", () => c.asked.length === 1)
    await c.agent.notify(acp.methods.agent.session.cancel, { sessionId })
    expect((await running).stopReason).toBe("cancelled")
    await until("the request dropped", () => c.asked[0]!.signal.aborted)
    expect(seen(c.received)).toEqual([
      "agent_message_chunk",
      "tool_call call_1_1_1 pending",
      "permission call_1_1_1",
      "dropped",
      "tool_call_update call_1_1_1 failed"
    ])
    expect(story(checkedLog(store, sessionId))).toEqual([
      "asked q1 wait call_1_1_1",
      "decided q1 cancelled cancel",
      "result call_1_1_1 TOOL_ABORTED_BEFORE_DISPATCH",
      "end 1 aborted user"
    ])
    expect(await c.close()).toBe(0)
  })

  it("an option id or an outcome the agent does not know is a rejection naming it, never an approval", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    const first = prompt(c, sessionId, "wait 0.1 seconds")
    await until("the first permission request", () => c.asked.length === 1)
    c.asked[0]!.answer(selected("yes_please"))
    expect((await first).stopReason).toBe("end_turn")
    const second = prompt(c, sessionId, "wait 0.2 seconds")
    await until("the second permission request", () => c.asked.length === 2)
    c.asked[1]!.answer({ outcome: { outcome: "approved", optionId: "allow_once" } })
    expect((await second).stopReason).toBe("end_turn")
    expect(seen(c.received).filter((l) => l.startsWith("tool_call") || l.startsWith("permission"))).toEqual([
      "tool_call call_1_1_1 pending",
      "permission call_1_1_1",
      "tool_call_update call_1_1_1 failed",
      "tool_call call_2_1_1 pending",
      "permission call_2_1_1",
      "tool_call_update call_2_1_1 failed"
    ])
    expect(resultText(c.received, "call_1_1_1")).toBe(
      "The call to wait was rejected by acp-test-client: the client selected an option this agent did not offer: \"yes_please\""
    )
    expect(story(checkedLog(store, sessionId))).toEqual([
      "asked q1 wait call_1_1_1",
      "decided q1 rejected person:acp-test-client the client selected an option this agent did not offer: \"yes_please\"",
      "result call_1_1_1 DENIED",
      "end 1 completed",
      "asked q2 wait call_2_1_1",
      "decided q2 rejected person:acp-test-client the client answered an outcome this agent does not know: \"approved\"",
      "result call_2_1_1 DENIED",
      "end 2 completed"
    ])
    expect(await c.close()).toBe(0)
  })

  it("a malformed answer decides nothing: noticed, the question stays open, and a session/load asks again", async () => {
    const store = tmp()
    const c = await startClient(store)
    const sessionId = await newSession(c, store)
    const running = prompt(c, sessionId, "wait 0.1 seconds")
    await until("the permission request", () => c.asked.length === 1)
    c.asked[0]!.answer({ outcome: "allow_once" })
    await until("the notice", () => c.stderr().includes("malformed"))
    const id = approvalIdOf(c.asked[0]!.params)
    expect(c.stderr()).toBe(
      `agent-loop acp: session ${sessionId}: approval ${id}: the client's answer to session/request_permission is ` +
        `malformed: "outcome" must be an object ({"outcome": "selected", "optionId": ID} or {"outcome": "cancelled"}), ` +
        `got "allow_once"; the question stays open (a session/load asks again, session/cancel cancels the turn)\n`
    )
    expect(story(readLog(store, sessionId).events)).toEqual(["asked q1 wait call_1_1_1"])
    expect(await c.agent.request(acp.methods.agent.session.load, { sessionId, cwd: store, mcpServers: [] })).toEqual({})
    await until("the second permission request", () => c.asked.length === 2)
    expect(c.asked[1]!.params).toEqual(c.asked[0]!.params)
    c.asked[1]!.answer(selected("allow_once"))
    expect((await running).stopReason).toBe("end_turn")
    expect(story(checkedLog(store, sessionId))).toEqual([
      "asked q1 wait call_1_1_1",
      "decided q1 allowed-once person:acp-test-client",
      "result call_1_1_1",
      "end 1 completed"
    ])
    expect(await c.close()).toBe(0)
  })

  it("a client that never answers holds nothing else up: another session works meanwhile; stdin's end decides the question cancelled", async () => {
    const store = tmp()
    const c = await startClient(store)
    const waiting = await newSession(c, store)
    void prompt(c, waiting, "wait 0.1 seconds").catch(() => {})
    await until("the permission request", () => c.asked.length === 1)
    const other = await newSession(c, store)
    expect((await prompt(c, other, "hello")).stopReason).toBe("end_turn")
    expect((await prompt(c, other, "what time is it")).stopReason).toBe("end_turn")
    expect(story(checkedLog(store, other))).toEqual(["end 1 completed", "result call_2_1_1", "end 2 completed"])
    expect(story(readLog(store, waiting).events)).toEqual(["asked q1 wait call_1_1_1"])
    expect(await c.close()).toBe(0)
    expect(story(checkedLog(store, waiting))).toEqual([
      "asked q1 wait call_1_1_1",
      "decided q1 cancelled cancel",
      "result call_1_1_1 TOOL_ABORTED_BEFORE_DISPATCH",
      "end 1 aborted disposed"
    ])
  })

  it("session/load of a session whose process was killed with a question open: the client is asked again and the decision continues the turn", async () => {
    const store = tmp()
    const first = await startClient(store)
    const sessionId = await newSession(first, store)
    void prompt(first, sessionId, "wait 0.1 seconds").catch(() => {})
    await until("the permission request", () => first.asked.length === 1)
    first.child!.kill("SIGKILL")
    await new Promise((resolve) => first.child!.once("exit", resolve))
    const second = await startClient(store)
    expect(await second.agent.request(acp.methods.agent.session.load, { sessionId, cwd: store, mcpServers: [] })).toEqual({})
    // The replay: the prompt, the text, the call still pending (neither closed failed nor running).
    expect(seen(second.received)).toEqual(["user_message_chunk", "agent_message_chunk", "tool_call call_1_1_1 pending"])
    await until("the permission request after the load", () => second.asked.length === 1)
    expect(second.asked[0]!.params).toEqual(first.asked[0]!.params)
    second.asked[0]!.answer(selected("allow_once"))
    await until("the turn's end", () => logHas(store, sessionId, (e) => e.type === "turn/end"))
    await until(
      "the last update",
      () => seen(second.received).at(-1) === "agent_message_chunk" && seen(second.received).length > 3
    )
    expect(seen(second.received)).toEqual([
      "user_message_chunk",
      "agent_message_chunk",
      "tool_call call_1_1_1 pending",
      "permission call_1_1_1",
      "tool_call_update call_1_1_1 in_progress",
      "tool_call_update call_1_1_1 completed",
      "agent_message_chunk"
    ])
    expect(resultText(second.received, "call_1_1_1")).toBe("waited 0.1 seconds")
    expect(story(checkedLog(store, sessionId))).toEqual([
      "asked q1 wait call_1_1_1",
      "decided q1 allowed-once person:acp-test-client",
      "result call_1_1_1",
      "end 1 completed"
    ])
    expect(await second.close()).toBe(0)
  })

  it("several questions in one step: one request each, in the order asked; decided out of order, results in model order", async () => {
    const store = tmp()
    const model = ScriptedModel.make([
      {
        toolCalls: [
          { id: "c1", name: "wait", arguments: { seconds: 0 } },
          { id: "c2", name: "wait", arguments: { seconds: 0.01 } }
        ]
      },
      { text: "done" }
    ])
    // The agent in this process, over streams: stdin is `toAgent`, stdout `fromAgent`.
    const toAgent = new PassThrough()
    const fromAgent = new PassThrough()
    const served = Effect.runPromise(
      runAcp({
        directory: store,
        maxSteps: 10,
        contextWindow: undefined,
        model: Layer.succeed(Model.Model, model),
        compaction: undefined,
        version: "0.0.0",
        ask: ["wait"],
        input: toAgent,
        output: fromAgent
      }).pipe(Effect.provide(NodeContext.layer))
    )
    const c = await connect(
      Writable.toWeb(toAgent) as unknown as WritableStream<Uint8Array>,
      Readable.toWeb(fromAgent) as unknown as ReadableStream<Uint8Array>
    )
    const sessionId = await newSession(c, store)
    const running = prompt(c, sessionId, "two waits")
    await until("both permission requests", () => c.asked.length === 2)
    expect(c.asked.map((a) => a.params.toolCall.toolCallId)).toEqual(["c1", "c2"])
    c.asked[1]!.answer(selected("allow_once"))
    await until("the second call allowed", () => seen(c.received).includes("tool_call_update c2 in_progress"))
    c.asked[0]!.answer(selected("reject_once"))
    expect((await running).stopReason).toBe("end_turn")
    expect(seen(c.received)).toEqual([
      "tool_call c1 pending",
      "permission c1",
      "tool_call c2 pending",
      "permission c2",
      "tool_call_update c2 in_progress",
      "tool_call_update c1 failed",
      "tool_call_update c2 completed",
      "agent_message_chunk"
    ])
    expect(story(checkedLog(store, sessionId))).toEqual([
      "asked q1 wait c1",
      "asked q2 wait c2",
      "decided q2 allowed-once person:acp-test-client",
      "decided q1 rejected person:acp-test-client",
      "result c1 DENIED",
      "result c2",
      "end 1 completed"
    ])
    toAgent.end()
    await served
  })
})
