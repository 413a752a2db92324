/**
 * Sub-agents over ACP (§27, §22): `agent-loop acp --subagent --ask wait` run as an editor runs
 * it (the built CLI in a child process, the offline model), driven through the ACP SDK's own
 * client. The prompt "ask a sub-agent to wait 1 second" makes a child whose `wait` needs
 * approval. A client of the stable protocol sees the child's progress as the content of the
 * parent's `subagent` call and its question as a `session/request_permission` on the parent's
 * session; a client that offers sub-agent sessions (the SDK's unstable v1 schema,
 * `clientCapabilities.subagents`) gets `subagent_update`s and the child's own updates and
 * question on the child's session. Each update and request is checked against the SDK's schema
 * (stable or unstable). The answer, given through the parent, decides the child's question in
 * the child's log. Waits are bounded (`until`).
 */
import * as acp from "@agentclientprotocol/sdk"
import * as unstable from "@agentclientprotocol/sdk/unstable"
import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Readable, Writable } from "node:stream"
import {
  zRequestPermissionRequest as zUnstableRequestPermission,
  zSessionNotification as zUnstableNotification
} from "../node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js"
import type { SessionEvent, SessionHeader } from "../src/SessionEvent.js"
import { endAcp } from "./utils/acpProcess.js"
import { checkNotification, checkPermissionRequest } from "./utils/acpSchema.js"
import { CHILD_WAIT_MS } from "./utils/bounds.js"
import { pollUntil } from "./utils/poll.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const BIN = Path.resolve("dist/cli/bin.js")
const tmp = scratchDirs("agent-loop-acp-subagent-")
const until = pollUntil("AcpSubagent")

/** What the client received, in order. */
type Received =
  | { readonly sessionId: string; readonly update: any }
  | { readonly permission: any }

interface Client {
  readonly received: Array<Received>
  readonly answer: (response: unknown) => void
  readonly request: (method: string, params: unknown) => Promise<any>
  readonly close: () => Promise<number | null>
  readonly stderr: () => string
}

/**
 * `agent-loop acp --store STORE --subagent --ask wait` in a child process with the SDK's client
 * connected (the unstable one, offering sub-agent sessions, with `sessions`). Permission requests
 * wait until the test answers (`answer`, the oldest first).
 */
const startClient = async (store: string, sessions: boolean): Promise<Client> => {
  const child = spawn(process.execPath, [BIN, "acp", "--store", store, "--subagent", "--ask", "wait"], {
    cwd: store,
    stdio: "pipe"
  })
  let stderr = ""
  child.stderr.setEncoding("utf8")
  child.stderr.on("data", (chunk: string) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const received: Array<Received> = []
  const waiting: Array<(response: unknown) => void> = []
  const sdk = (sessions ? unstable : acp) as typeof acp
  const app = sdk.client({ name: "acp-subagent-test" })
    .onNotification(sdk.methods.client.session.update, ({ params }) => {
      received.push({ sessionId: params.sessionId, update: params.update })
    })
    .onRequest(
      sdk.methods.client.session.requestPermission,
      ({ params }) =>
        new Promise<acp.RequestPermissionResponse>((resolve) => {
          received.push({ permission: params })
          waiting.push((r) => resolve(r as acp.RequestPermissionResponse))
        })
    )
  const connection = app.connect(sdk.ndJsonStream(
    Writable.toWeb(child.stdin) as unknown as WritableStream<Uint8Array>,
    Readable.toWeb(child.stdout) as unknown as ReadableStream<Uint8Array>
  ))
  const request = (method: string, params: unknown) => connection.agent.request(method as any, params as any)
  await request(sdk.methods.agent.initialize, {
    protocolVersion: sdk.PROTOCOL_VERSION,
    clientCapabilities: sessions ? { subagents: {} } : {},
    clientInfo: { name: "acp-subagent-test", version: "1.0.0" }
  })
  const close = () => endAcp(child, exited, () => stderr)
  return { received, answer: (r) => waiting.shift()!(r), request, close, stderr: () => stderr }
}

/** The session's log, read from the store. */
const readLog = (store: string, sessionId: string): { header: SessionHeader; events: Array<SessionEvent> } => {
  const [first, ...rest] = Fs.readFileSync(Path.join(store, `${sessionId}.jsonl`), "utf8").split("\n").filter((l) => l !== "")
  return { header: JSON.parse(first!) as SessionHeader, events: rest.map((l) => JSON.parse(l) as SessionEvent) }
}

/** The one child session of the store (its header names `parent`). */
const childOf = (store: string, parent: string): string =>
  Fs.readdirSync(store).filter((f) => f.endsWith(".jsonl")).map((f) => f.slice(0, -6)).find((id) =>
    readLog(store, id).header.parentSession === parent
  )!

/** `value` as JSON with its keys sorted, at every level (the client's parse orders them by its schema). */
const sorted = (value: unknown): string =>
  JSON.stringify(value, (_, v) =>
    typeof v === "object" && v !== null && !Array.isArray(v)
      ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]]))
      : v)

/** What a received message is, on one line: the kinds of updates, without chunks and usage. */
const shape = (r: Received, parent: string, child: string): string | undefined => {
  const who = (id: string) => (id === parent ? "P" : id === child ? "C" : id)
  if ("permission" in r) {
    return `permission on ${who(r.permission.sessionId)}: ${r.permission.toolCall.toolCallId.replace(child, "C")} ${
      JSON.stringify(r.permission.toolCall.rawInput)
    } meta ${who(r.permission._meta["agent-loop"].sessionId)}`
  }
  const u = r.update
  switch (u.sessionUpdate) {
    case "agent_message_chunk":
    case "user_message_chunk":
    case "usage_update":
      return undefined
    case "tool_call":
      return `${who(r.sessionId)} tool_call ${u.toolCallId} ${u.name} ${u.status}`
    case "tool_call_update":
      return `${who(r.sessionId)} tool_call_update ${u.toolCallId}${u.status === undefined ? "" : ` ${u.status}`}${
        u.content === undefined ? "" : `: ${u.content.map((c: any) => c.content?.text).join(" | ").replaceAll(child, "C")}`
      }`
    case "subagent_update":
      return `${who(r.sessionId)} subagent_update ${who(u.sessionId)} ${
        sorted({ ...u, sessionUpdate: undefined, sessionId: undefined })
      }`
    default:
      return `${who(r.sessionId)} ${u.sessionUpdate}`
  }
}

const selected = (optionId: string) => ({ outcome: { outcome: "selected", optionId } })

describe("agent-loop acp --subagent", () => {
  it(
    "a stable client: the child's progress is the content of the subagent call, its question asked on the parent's session",
    async () => {
      const store = tmp()
      const client = await startClient(store, false)
      try {
        const parent = (await client.request(acp.methods.agent.session.new, { cwd: store, mcpServers: [] })).sessionId
        const answered = client.request(acp.methods.agent.session.prompt, {
          sessionId: parent,
          prompt: [{ type: "text", text: "ask a sub-agent to wait 1 second" }]
        })
        await until("the child's permission request", () => client.received.some((r) => "permission" in r))
        const child = childOf(store, parent)
        client.answer(selected("allow_once"))
        expect(await answered).toEqual({ stopReason: "end_turn", _meta: { "agent-loop": { messageId: expect.any(String) } } })
        for (const r of client.received) {
          if ("permission" in r) checkPermissionRequest(r.permission)
          else checkNotification(r.sessionId, r.update)
        }
        expect(client.received.map((r) => shape(r, parent, child)).filter((s) => s !== undefined)).toEqual([
          "P tool_call call_1_1_1 subagent pending",
          "P tool_call_update call_1_1_1 in_progress",
          "P tool_call_update call_1_1_1: ↳ sub-agent C: starting",
          "P tool_call_update call_1_1_1: ↳ sub-agent C: turn 1, step 1",
          "P tool_call_update call_1_1_1: ↳ sub-agent C: I received 1 message in this step: a task from the parent session (\"wait 1 second\").",
          "P tool_call_update call_1_1_1: ↳ sub-agent C: → wait({\"seconds\":1})",
          "P tool_call_update call_1_1_1: ↳ sub-agent C: ? wait awaiting approval",
          "permission on P: C/call_1_1_1 {\"seconds\":1} meta C",
          "P tool_call_update call_1_1_1: ↳ sub-agent C: → wait({\"seconds\":1})",
          "P tool_call_update call_1_1_1: ↳ sub-agent C: ← wait: waited 1 second",
          "P tool_call_update call_1_1_1: ↳ sub-agent C: turn 1, step 2",
          "P tool_call_update call_1_1_1: ↳ sub-agent C: Tool result (call_1_1_1): \"waited 1 second\"",
          "P tool_call_update call_1_1_1: ↳ sub-agent C: turn ended: completed",
          "P tool_call_update call_1_1_1 completed: Tool result (call_1_1_1): \"waited 1 second\" | [sub-agent session C]"
        ])
        // The answer, given on the parent's session, decided the child's question in the child's log.
        const decided = readLog(store, child).events.filter((e) => e.type === "approval/decided").map((e) => e.data)
        expect(decided).toEqual([{
          id: expect.any(String),
          outcome: "allowed-once",
          by: { kind: "person", name: "acp-subagent-test" }
        }])
      } finally {
        expect(await client.close()).toBe(0)
      }
    },
    4 * CHILD_WAIT_MS
  )

  it(
    "a client that offers sub-agent sessions: subagent_update on the parent's session, the child's updates and question on its own",
    async () => {
      const store = tmp()
      const client = await startClient(store, true)
      try {
        const parent = (await client.request(acp.methods.agent.session.new, { cwd: store, mcpServers: [] })).sessionId
        const answered = client.request(acp.methods.agent.session.prompt, {
          sessionId: parent,
          prompt: [{ type: "text", text: "ask a sub-agent to wait 1 second" }]
        })
        await until("the child's permission request", () => client.received.some((r) => "permission" in r))
        const child = childOf(store, parent)
        client.answer(selected("allow_once"))
        expect((await answered).stopReason).toBe("end_turn")
        for (const r of client.received) {
          const parsed = "permission" in r
            ? zUnstableRequestPermission.safeParse(r.permission)
            : zUnstableNotification.safeParse({ sessionId: r.sessionId, update: r.update })
          expect([parsed.success, parsed.success ? "" : parsed.error.message]).toEqual([true, ""])
        }
        const state = (s: string) => `P subagent_update C ${sorted({ state: { state: s } })}`
        expect(client.received.map((r) => shape(r, parent, child)).filter((s) => s !== undefined)).toEqual([
          "P tool_call call_1_1_1 subagent pending",
          "P tool_call_update call_1_1_1 in_progress",
          `P subagent_update C ${
            sorted({
              title: "wait 1 second",
              cwd: store,
              state: { state: "running" },
              _meta: { "agent-loop": { callId: "call_1_1_1", depth: 1, provider: "spawn" } }
            })
          }`,
          "C tool_call call_1_1_1 wait pending",
          state("requires_action"),
          "permission on C: call_1_1_1 {\"seconds\":1} meta C",
          "C tool_call_update call_1_1_1 in_progress",
          state("running"),
          "C tool_call_update call_1_1_1 completed: waited 1 second",
          `P subagent_update C ${sorted({ state: { state: "idle", stopReason: "end_turn" } })}`,
          "P tool_call_update call_1_1_1 completed: Tool result (call_1_1_1): \"waited 1 second\" | [sub-agent session C]"
        ])
        // The child's task and its answer, as messages of its own session.
        const chunks = (sessionId: string, kind: string) =>
          client.received.filter((r): r is Extract<Received, { update: any }> =>
            "update" in r && r.sessionId === sessionId && r.update.sessionUpdate === kind
          ).map((r) => r.update.content.text).join("")
        expect(chunks(child, "user_message_chunk")).toBe("wait 1 second")
        expect(chunks(child, "agent_message_chunk")).toBe(
          "I received 1 message in this step: a task from the parent session (\"wait 1 second\").Tool result (call_1_1_1): \"waited 1 second\""
        )
        expect(readLog(store, child).events.filter((e) => e.type === "approval/decided").map((e) => (e.data as any).outcome))
          .toEqual(["allowed-once"])
      } finally {
        expect(await client.close()).toBe(0)
      }
    },
    4 * CHILD_WAIT_MS
  )
})
