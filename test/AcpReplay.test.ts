/**
 * The `session/load` replay of §22 (`src/cli/acp/replay.ts`): a session log as ACP v1
 * `session/update`s. A log written by the runtime itself (a scenario: reasoning, text, a batch of
 * two tool calls, a steer and an inject during the batch, a manual compaction, a second turn),
 * hand-made logs for the edges, and real DSH v0 logs; every update is checked against the SDK's
 * own zod schema of `SessionNotification`, exactly (see `utils/acpSchema.ts`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Replay from "../src/cli/acp/replay.js"
import * as Invariant from "../src/Invariant.js"
import type { UserMessage } from "../src/Message.js"
import * as Scenario from "../src/Scenario.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import * as Simulator from "../src/Simulator.js"
import { checkNotification } from "./utils/acpSchema.js"
import {
  assistant,
  checkpoint,
  claim,
  compactionEnd,
  compactionStart,
  compactionSummary,
  ctx,
  dshFixtures,
  entered,
  events,
  followup,
  foreign,
  msg,
  readDsh,
  stepEnd,
  stepStart,
  toolCall,
  toolResult,
  turnEnd,
  turnStart
} from "./utils/events.js"

const checkAll = (updates: ReadonlyArray<Replay.SessionUpdate>): void => {
  for (const u of updates) checkNotification("s1", u)
}

/** The id of the `user/message` whose first text is `text`. */
const idOf = (log: ReadonlyArray<SessionEvent>, text: string): string => {
  const e = log.find((e) =>
    e.type === "user/message" && (e.data as UserMessage).content[0]?.type === "text" &&
    ((e.data as UserMessage).content[0] as { readonly text: string }).text === text
  )
  if (e === undefined) throw new Error(`no user/message ${text}`)
  return (e.data as UserMessage).id
}

const userChunk = (messageId: string, text: string, source: unknown, extra: Record<string, unknown> = {}) => ({
  sessionUpdate: "user_message_chunk",
  content: { type: "text", text },
  messageId,
  _meta: { "agent-loop": { messageId, source, ...extra } }
})
const thought = (text: string) => ({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text } })
const said = (text: string) => ({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } })

// ---------------------------------------------------------------------------------------------
// A log the runtime wrote
// ---------------------------------------------------------------------------------------------

const SCRIPT = JSON.stringify({
  name: "acp-replay",
  compaction: { keepRecentTokens: 30 },
  model: [
    {
      latencyMs: 10,
      reasoning: "Notes first, then a pause.",
      text: "Reading and waiting.",
      toolCalls: [
        { id: "c1", name: "read_file", arguments: "{\"path\":\"notes.txt\"}" },
        { id: "c2", name: "wait", arguments: "{\"seconds\":1}" }
      ]
    },
    { latencyMs: 10, text: "Done, hi." },
    { latencyMs: 10, text: "The user had notes read and a pause." },
    { latencyMs: 10, text: "You are welcome." }
  ],
  tools: { read_file: { error: "no such file: notes.txt" }, wait: { durationMs: 1000, result: "waited 1 second" } },
  actions: [
    { at: 0, followup: "read notes.txt, then wait a second" },
    { at: 500, steer: "also say hi" },
    { at: 600, inject: { text: "branch: main", source: { kind: "plugin", plugin: "git" } } },
    { at: 5000, compact: {} },
    { at: 6000, followup: "thanks" }
  ]
})

const runScript = Effect.suspend(() => Simulator.run(Either.getOrThrow(Scenario.parse(SCRIPT)), { seed: 17 }))

/** What the scripted log replays as, before the compaction marker (`compaction` is its updates). */
const expectedScript = (log: ReadonlyArray<SessionEvent>, compaction: ReadonlyArray<unknown>) => [
  userChunk(idOf(log, "read notes.txt, then wait a second"), "read notes.txt, then wait a second", { kind: "user" }, {
    via: "followup"
  }),
  thought("Notes first, then a pause."),
  said("Reading and waiting."),
  {
    sessionUpdate: "tool_call",
    toolCallId: "c1",
    title: "read_file notes.txt",
    name: "read_file",
    kind: "read",
    status: "pending",
    rawInput: { path: "notes.txt" },
    locations: [{ path: "/work/project/notes.txt" }]
  },
  {
    sessionUpdate: "tool_call",
    toolCallId: "c2",
    title: "wait 1s",
    name: "wait",
    kind: "other",
    status: "pending",
    rawInput: { seconds: 1 }
  },
  {
    sessionUpdate: "tool_call_update",
    toolCallId: "c1",
    status: "failed",
    content: [{ type: "content", content: { type: "text", text: "Tool read_file failed: no such file: notes.txt" } }],
    rawOutput: {
      isError: true,
      text: "Tool read_file failed: no such file: notes.txt",
      error: { name: "ToolFailed", code: "TOOL_FAILED" }
    }
  },
  {
    sessionUpdate: "tool_call_update",
    toolCallId: "c2",
    status: "completed",
    content: [{ type: "content", content: { type: "text", text: "waited 1 second" } }],
    rawOutput: { isError: false, text: "waited 1 second" }
  },
  // The steer and the inject arrived during the batch: they enter the next step, in order (§6, §8).
  userChunk(idOf(log, "also say hi"), "also say hi", { kind: "user" }, { via: "steer" }),
  userChunk(idOf(log, "branch: main"), "branch: main", { kind: "plugin", plugin: "git" }, { via: "inject" }),
  said("Done, hi."),
  ...compaction,
  userChunk(idOf(log, "thanks"), "thanks", { kind: "user" }, { via: "followup" }),
  said("You are welcome.")
]

const compactionOf = (log: ReadonlyArray<SessionEvent>) => {
  const start = log.find((e) => e.type === "compaction/start")!
  const compactionId = (start.data as { readonly compactionId: string }).compactionId
  const cp = log.find((e) => e.type === "user/message" && (e.data as UserMessage).source.plugin === "compact")!
  return { compactionId, checkpointId: (cp.data as UserMessage).id }
}

describe("replayUpdates over a log the runtime wrote", () => {
  it.effect("the whole conversation in log order: prompt, reasoning, text, the batch, steer, inject, the compaction marker, turn 2", () =>
    Effect.gen(function*() {
      const result = yield* runScript
      expect(Invariant.check(result.events)).toEqual([])
      const { checkpointId, compactionId } = compactionOf(result.events)
      const updates = Replay.replayUpdates(result.events, { header: result.header, cwd: "/work/project" })
      const figures = {
        turn: 0,
        step: 0,
        compactionId,
        reason: "manual",
        outcome: "compacted",
        tokensBefore: 208,
        tokensAfter: 168,
        shadowedRange: { start: 4, end: 12 },
        shadowedTokenCount: 68
      }
      expect(updates).toStrictEqual(expectedScript(result.events, [
        userChunk(
          checkpointId,
          "[compaction: manual, between turns] compacted 208 → 168 tokens: seq 4..12 (68 tokens) summarized\n\n" +
            "The user had notes read and a pause.",
          { kind: "plugin", plugin: "compact", compactionId },
          { compaction: figures }
        )
      ]))
      checkAll(updates)
    }))

  it.effect("a client with the session.compaction capability gets the marker as compaction_update", () =>
    Effect.gen(function*() {
      const result = yield* runScript
      const { compactionId } = compactionOf(result.events)
      const updates = Replay.replayUpdates(result.events, {
        header: result.header,
        cwd: "/work/project",
        compaction: true
      })
      expect(updates).toStrictEqual(expectedScript(result.events, [{
        sessionUpdate: "compaction_update",
        compactionId,
        status: "completed",
        summary: [{ type: "text", text: "The user had notes read and a pause." }],
        _meta: {
          "agent-loop": {
            compaction: {
              turn: 0,
              step: 0,
              compactionId,
              reason: "manual",
              outcome: "compacted",
              tokensBefore: 208,
              tokensAfter: 168,
              shadowedRange: { start: 4, end: 12 },
              shadowedTokenCount: 68
            }
          }
        }
      }]))
      checkAll(updates)
    }))

  it.effect("the live projection: no assistant chunks (they stream from deltas), in_progress after each tool_call, nothing closed at the end", () =>
    Effect.gen(function*() {
      const result = yield* runScript
      const p = Replay.projector({ header: result.header, cwd: "/work/project", live: true })
      const updates = result.events.flatMap((e) => [...p.push(e)])
      expect(p.end()).toEqual([])
      const replayed = Replay.replayUpdates(result.events, { header: result.header, cwd: "/work/project" })
      const withoutAssistant = replayed.flatMap((u) =>
        u.sessionUpdate === "agent_message_chunk" || u.sessionUpdate === "agent_thought_chunk"
          ? []
          : u.sessionUpdate === "tool_call"
          ? [u, Replay.toolCallStarted(u.toolCallId)]
          : [u]
      )
      expect(updates).toStrictEqual(withoutAssistant)
      expect(updates.map((u) => u.sessionUpdate === "tool_call_update" ? `${u.toolCallId} ${u.status}` : u.sessionUpdate))
        .toEqual([
          "user_message_chunk",
          "tool_call",
          "c1 in_progress",
          "tool_call",
          "c2 in_progress",
          "c1 failed",
          "c2 completed",
          "user_message_chunk",
          "user_message_chunk",
          "user_message_chunk",
          "user_message_chunk"
        ])
      checkAll(updates)
    }))
})

// ---------------------------------------------------------------------------------------------
// Edges, on hand-made logs
// ---------------------------------------------------------------------------------------------

describe("replayUpdates: edges", () => {
  it("a compaction that did not take effect shows nothing, or its status to a client with the capability", () => {
    const log = events(
      followup(msg("u1", "hi")),
      turnStart(1),
      claim("next-turn", 1),
      stepStart(1, 1),
      entered(msg("u1", "hi")),
      assistant(1, 1, "hello"),
      stepEnd(1, 1),
      turnEnd(1),
      compactionStart("k1", null),
      compactionEnd("k1", null, "skipped"),
      compactionStart("k2", null),
      {
        type: "compaction/end",
        data: { compactionId: "k2", turn: null, outcome: "failed", error: { code: "EMPTY_SUMMARY", message: "no text" } }
      },
      compactionStart("k3", null),
      compactionSummary("k3", [4, 5]),
      checkpoint("k3", "cp3", 4, 5),
      compactionEnd("k3", null, "aborted")
    )
    const plain = Replay.replayUpdates(log)
    expect(plain).toStrictEqual([userChunk("u1", "hi", { kind: "user" }, { via: "followup" }), said("hello")])
    const capable = Replay.replayUpdates(log, { compaction: true })
    expect(capable.slice(2)).toStrictEqual([
      {
        sessionUpdate: "compaction_update",
        compactionId: "k2",
        status: "failed",
        error: "EMPTY_SUMMARY: no text",
        _meta: {
          "agent-loop": {
            compaction: {
              turn: 0,
              step: 0,
              compactionId: "k2",
              reason: "manual",
              outcome: "failed",
              tokensBefore: 1000,
              error: { code: "EMPTY_SUMMARY", message: "no text" }
            }
          }
        }
      },
      {
        sessionUpdate: "compaction_update",
        compactionId: "k3",
        status: "cancelled",
        _meta: {
          "agent-loop": {
            compaction: {
              turn: 0,
              step: 0,
              compactionId: "k3",
              reason: "manual",
              outcome: "aborted",
              tokensBefore: 1000,
              shadowedRange: { start: 4, end: 5 },
              shadowedTokenCount: 200
            }
          }
        }
      }
    ])
    checkAll([...plain, ...capable])
  })

  it("a call without a result is closed failed at the end; a result without its call gets the call first", () => {
    const log = events(
      turnStart(1),
      stepStart(1, 1),
      entered(ctx("n1", "pre-step note")),
      assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "bash", arguments: "{\"command\":\"ls\\n-la\"}" }] }),
      toolResult(1, 1, "c0", "stray"),
      toolCall(1, 1, "c1", "bash", "{\"command\":\"ls\\n-la\"}")
    )
    const updates = Replay.replayUpdates(log)
    expect(updates).toStrictEqual([
      // Entered without a splice (a pre-step addition): no `via`.
      userChunk("n1", "pre-step note", { kind: "plugin", plugin: "netwatch" }),
      {
        sessionUpdate: "tool_call",
        toolCallId: "c0",
        title: "tool",
        name: "tool",
        kind: "other",
        status: "pending",
        rawInput: {}
      },
      {
        sessionUpdate: "tool_call_update",
        toolCallId: "c0",
        status: "completed",
        content: [{ type: "content", content: { type: "text", text: "stray" } }],
        rawOutput: { isError: false, text: "stray" }
      },
      {
        sessionUpdate: "tool_call",
        toolCallId: "c1",
        title: "bash ls -la",
        name: "bash",
        kind: "execute",
        status: "pending",
        rawInput: { command: "ls\n-la" }
      },
      {
        sessionUpdate: "tool_call_update",
        toolCallId: "c1",
        status: "failed",
        content: [{ type: "content", content: { type: "text", text: "the session log holds no result for this call" } }],
        rawOutput: { isError: true, text: "the session log holds no result for this call" }
      }
    ])
    checkAll(updates)
    // The replay of a session whose agent is live: the call without a result is running.
    const running = Replay.replayUpdates(log, { running: true })
    expect(running.slice(0, -1)).toStrictEqual(updates.slice(0, -1))
    expect(running.at(-1)).toStrictEqual({ sessionUpdate: "tool_call_update", toolCallId: "c1", status: "in_progress" })
    checkAll(running)
  })

  it("approvals (§26): a call waiting for a decision stays pending; live, its in_progress comes with a decision that allows it", () => {
    const asked = (id: string, callId: string) => foreign("approval/asked", { id, toolName: "wait", callId })
    const decided = (id: string, outcome: string) => foreign("approval/decided", { id, outcome, by: { kind: "person" } })
    const log = events(
      turnStart(1),
      stepStart(1, 1),
      toolCall(1, 1, "c1", "wait", "{\"seconds\":1}"),
      asked("q1", "c1"),
      toolCall(1, 1, "c2", "wait", "{\"seconds\":2}"),
      asked("q2", "c2"),
      decided("q2", "allowed-once"),
      toolCall(1, 1, "c3", "clock"),
      toolCall(1, 1, "c4", "wait", "{\"seconds\":4}"),
      asked("q4", "c4"),
      decided("q4", "rejected"),
      toolResult(1, 1, "c4", "The call to wait was rejected by a person.", { name: "ToolError", code: "DENIED" })
    )
    const brief = (updates: ReadonlyArray<Replay.SessionUpdate>) =>
      updates.map((u) =>
        u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update"
          ? `${u.sessionUpdate} ${u.toolCallId} ${u.status}`
          : u.sessionUpdate
      )
    // A replay: c1 waits (pending, not closed), c2 was allowed and has no result (closed failed),
    // c3 has none (closed failed), c4 was refused.
    const replayed = Replay.replayUpdates(log)
    expect(brief(replayed)).toEqual([
      "tool_call c1 pending",
      "tool_call c2 pending",
      "tool_call c3 pending",
      "tool_call c4 pending",
      "tool_call_update c4 failed",
      "tool_call_update c2 failed",
      "tool_call_update c3 failed"
    ])
    checkAll(replayed)
    // The replay of a session open and running here: c2 and c3 are running, c1 still waits.
    expect(brief(Replay.replayUpdates(log, { running: true }))).toEqual([
      "tool_call c1 pending",
      "tool_call c2 pending",
      "tool_call c3 pending",
      "tool_call c4 pending",
      "tool_call_update c4 failed",
      "tool_call_update c2 in_progress",
      "tool_call_update c3 in_progress"
    ])
    // Live, reading the event after each tool/call: no in_progress for a call whose question
    // follows it, until a decision allows it; none for the refused one.
    const live = Replay.projector({ live: true, next: (seq) => log[seq + 1] })
    expect(log.map((e) => brief(live.push(e)))).toEqual([
      [],
      [],
      ["tool_call c1 pending"],
      [],
      ["tool_call c2 pending"],
      [],
      ["tool_call_update c2 in_progress"],
      ["tool_call c3 pending", "tool_call_update c3 in_progress"],
      ["tool_call c4 pending"],
      [],
      [],
      ["tool_call_update c4 failed"]
    ])
    expect(live.end()).toEqual([])
    // Without `next`, every live tool_call is followed by in_progress (the projection before §26).
    expect(brief(Replay.projector({ live: true }).push(log[2]!))).toEqual([
      "tool_call c1 pending",
      "tool_call_update c1 in_progress"
    ])
    // A loaded log primed (session/load), then decided live: the waiting call starts and completes,
    // shown once (no stand-in tool_call for a result of a call the projection did not show).
    const primed = Replay.projector({ live: true, next: (seq) => log[seq + 1] })
    for (const e of log) primed.prime(e)
    const later = events(
      ...log.map(({ type, data }) => ({ type, data })),
      decided("q1", "allowed-always"),
      toolResult(1, 1, "c1", "waited 1 second")
    )
    expect(brief(later.slice(log.length).flatMap((e) => [...primed.push(e)]))).toEqual([
      "tool_call_update c1 in_progress",
      "tool_call_update c1 completed"
    ])
  })

  it("images, empty blocks, malformed arguments, an interrupted prefix", () => {
    const image = { type: "image" as const, mediaType: "image/png", data: "iVBORw0KGgo=" }
    const log = events(
      entered({ ...msg("u1", "look"), content: [{ type: "text", text: "look" }, image, { type: "text", text: "" }] }),
      {
        type: "assistant/message",
        data: {
          turn: 1,
          step: 1,
          message: {
            id: "a1",
            role: "assistant",
            content: [
              { type: "reasoning", text: "", providerState: { encrypted: "x" } },
              { type: "reasoning", text: "hmm" },
              { type: "text", text: "A cat" },
              { type: "tool-call", id: "c1", name: "read_file", arguments: "{not json" }
            ],
            source: { kind: "model", provider: "test", model: "test" }
          },
          interrupted: true
        }
      },
      toolCall(1, 1, "c1", "read_file", "{not json"),
      {
        type: "tool/result",
        data: {
          turn: 1,
          step: 1,
          message: {
            id: "r1",
            role: "user",
            content: [{
              type: "tool-result",
              toolCallId: "c1",
              content: [{ type: "text", text: "a" }, image, { type: "text", text: "b" }]
            }],
            source: { kind: "tool", callId: "c1" }
          }
        }
      }
    )
    const updates = Replay.replayUpdates(log)
    const meta = { "agent-loop": { messageId: "u1", source: { kind: "user" } } }
    expect(updates).toStrictEqual([
      { sessionUpdate: "user_message_chunk", content: { type: "text", text: "look" }, messageId: "u1", _meta: meta },
      {
        sessionUpdate: "user_message_chunk",
        content: { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" },
        messageId: "u1",
        _meta: meta
      },
      thought("hmm"),
      said("A cat"),
      {
        sessionUpdate: "tool_call",
        toolCallId: "c1",
        title: "read_file",
        name: "read_file",
        kind: "read",
        status: "pending",
        rawInput: "{not json"
      },
      {
        sessionUpdate: "tool_call_update",
        toolCallId: "c1",
        status: "completed",
        content: [
          { type: "content", content: { type: "text", text: "a" } },
          { type: "content", content: { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" } },
          { type: "content", content: { type: "text", text: "b" } }
        ],
        rawOutput: { isError: false, text: "a\nb" }
      }
    ])
    checkAll(updates)
  })

  it("the mapping helpers", () => {
    expect(
      [
        "read_file",
        "Read",
        "write",
        "str_replace_editor",
        "bash",
        "pwsh",
        "grep",
        "web_fetch",
        "todo_write",
        "wait",
        "clock",
        "subagent"
      ]
        .map(Replay.toolKind)
    ).toEqual(["read", "read", "edit", "edit", "execute", "execute", "search", "fetch", "think", "other", "other", "other"])
    expect(Replay.toolTitle("clock", {})).toBe("clock")
    expect(Replay.toolTitle("web_fetch", { url: "https://example.com" })).toBe("web_fetch https://example.com")
    expect(Replay.toolTitle("bash", { command: "x".repeat(200) })).toBe(`bash ${"x".repeat(94)}…`)
    expect(Replay.toolTitle("bash", { command: "x".repeat(200) }).length).toBe(100)
    expect(Replay.rawInputOf("{\"a\":[1]}")).toEqual({ a: [1] })
    expect(Replay.rawInputOf("nope")).toBe("nope")
    expect(Replay.toolCall({ callId: "c9", name: "read_file", arguments: "{\"path\":\"/etc/hosts\"}" }, { cwd: "/w" }))
      .toStrictEqual({
        sessionUpdate: "tool_call",
        toolCallId: "c9",
        title: "read_file /etc/hosts",
        name: "read_file",
        kind: "read",
        status: "pending",
        rawInput: { path: "/etc/hosts" },
        locations: [{ path: "/etc/hosts" }]
      })
  })

  it("the schema check catches a shape error the SDK's lenient parser would drop", () => {
    expect(() => checkNotification("s1", { ...Replay.toolCallStarted("c1"), status: "running" })).toThrow()
    expect(() => checkNotification("s1", { ...said("x"), extra: 1 })).toThrow()
    expect(() => checkNotification("s1", { sessionUpdate: "agent_message_chunk", content: { type: "txt", text: "x" } }))
      .toThrow()
  })
})

// ---------------------------------------------------------------------------------------------
// Real DSH v0 logs (../shared/fixtures/dsh)
// ---------------------------------------------------------------------------------------------

describe("replayUpdates over DSH v0 logs", () => {
  it("acp__fs-read: prompt, the runtime-context snapshot, reasoning, the read call and its result, reasoning, DONE", async () => {
    const log = await readDsh("acp__fs-read__session.jsonl")
    const updates = Replay.replayUpdates(log.events, { header: log.header, cwd: "/w" })
    const snapshot = log.events.find((e) => e.type === "user/message" && (e.data as UserMessage).source.kind === "plugin")!
      .data as UserMessage
    const prompt =
      "Use the read tool (NOT bash) to read the file greeting.txt in the current directory, then reply with exactly the single word DONE."
    const result =
      "<path>{{cwd}}/greeting.txt</path>\n<type>file</type>\n<content>\n1: hello\n\n(End of file - total 1 lines)\n</content>"
    expect(updates).toStrictEqual([
      userChunk("3b9f093c-8fed-49d1-8252-7e6560033ebd", prompt, { kind: "user" }, { via: "followup" }),
      // Entered by the system-prompt plugin without a splice.
      userChunk(snapshot.id, (snapshot.content[0] as { readonly text: string }).text, snapshot.source),
      thought(
        "The user wants me to read the file greeting.txt using the read tool (not bash), then reply with exactly the single word \"DONE\"."
      ),
      {
        sessionUpdate: "tool_call",
        toolCallId: "call_00_hHPZCcivsIkXAGS9jTGy8417",
        title: "read greeting.txt",
        name: "read",
        kind: "read",
        status: "pending",
        rawInput: { file_path: "greeting.txt" },
        locations: [{ path: "/w/greeting.txt" }]
      },
      {
        sessionUpdate: "tool_call_update",
        toolCallId: "call_00_hHPZCcivsIkXAGS9jTGy8417",
        status: "completed",
        content: [{ type: "content", content: { type: "text", text: result } }],
        rawOutput: { isError: false, text: result }
      },
      thought(
        "The user asked me to read the file and then reply with exactly the single word \"DONE\". I've read the file. Now I just need to reply with \"DONE\"."
      ),
      said("DONE")
    ])
    expect(snapshot.source).toMatchObject({ kind: "plugin", plugin: "@deepseek-ai/dsh-system-prompt" })
    checkAll(updates)
  })

  it("acp__hook-cc-posttool-context: the hook's context after the bash result enters the next step (via inject)", async () => {
    const log = await readDsh("acp__hook-cc-posttool-context__session.jsonl")
    const updates = Replay.replayUpdates(log.events, { header: log.header })
    const note = "Note: command output has been verified against the audit log."
    expect(updates.map((u) => u.sessionUpdate)).toEqual([
      "user_message_chunk",
      "user_message_chunk",
      "agent_thought_chunk",
      "tool_call",
      "tool_call_update",
      "user_message_chunk",
      "agent_thought_chunk",
      "agent_message_chunk"
    ])
    expect(updates.slice(3)).toStrictEqual([
      {
        sessionUpdate: "tool_call",
        toolCallId: "call_00_HbCMzTslWBZTSphWN0z97382",
        title: "bash echo HELLO",
        name: "bash",
        kind: "execute",
        status: "pending",
        rawInput: { command: "echo HELLO", description: "Run echo HELLO" }
      },
      {
        sessionUpdate: "tool_call_update",
        toolCallId: "call_00_HbCMzTslWBZTSphWN0z97382",
        status: "completed",
        content: [{ type: "content", content: { type: "text", text: "HELLO\n" } }],
        rawOutput: { isError: false, text: "HELLO\n" }
      },
      userChunk("61e6c6d6-872c-4dd7-9771-53ced14a120d", note, { kind: "plugin", plugin: "hooks-claude-code" }, {
        via: "inject"
      }),
      thought("The user asked me to report the tool result verbatim. The result was \"HELLO\" with an exit code of 0 (success)."),
      said("The tool result was:\n\n```\nHELLO\n```\n\nIt completed successfully with exit code 0.")
    ])
    checkAll(updates)
  })

  it("acp__agent-instructions: a DSH checkpoint outside any bracket is a marker where it stands, not a message", async () => {
    const log = await readDsh("acp__agent-instructions__session.jsonl")
    const updates = Replay.replayUpdates(log.events, { header: log.header })
    const marker = updates.filter((u) =>
      u.sessionUpdate === "user_message_chunk" &&
      (u._meta?.["agent-loop"] as Replay.MessageMeta).source.kind === "plugin" &&
      (u._meta?.["agent-loop"] as { readonly source: { readonly plugin?: string } }).source.plugin === "compact"
    )
    const source = { kind: "plugin", plugin: "compact", compactionId: "workspace-context-fixture" }
    expect(marker).toStrictEqual([{
      sessionUpdate: "user_message_chunk",
      content: {
        type: "text",
        text: "[compaction checkpoint replacing seq 5]\n\nEarlier context was compacted for this snapshot."
      },
      messageId: "162c764f-f01d-484d-ad81-1481dc29792a",
      _meta: { "agent-loop": { messageId: "162c764f-f01d-484d-ad81-1481dc29792a", source, replaces: { start: 5, end: 5 } } }
    }])
    // Between the first read's call and its result, where the log has it.
    const i = updates.indexOf(marker[0]!)
    expect(updates[i - 1]).toMatchObject({ sessionUpdate: "tool_call", toolCallId: "call_workspace_read" })
    expect(updates[i + 1]).toMatchObject({ sessionUpdate: "tool_call_update", toolCallId: "call_workspace_read" })
    expect(Replay.replayUpdates(log.events, { header: log.header, compaction: true })[i]).toStrictEqual({
      sessionUpdate: "compaction_update",
      compactionId: "workspace-context-fixture",
      status: "completed",
      summary: [{ type: "text", text: "Earlier context was compacted for this snapshot." }]
    })
    checkAll(updates)
  })

  it("acp__inline-image-prompt: an image the log holds only as an attachment reference is a text placeholder", async () => {
    const log = await readDsh("acp__inline-image-prompt__session.jsonl")
    const updates = Replay.replayUpdates(log.events, { header: log.header })
    const id = "0c0c0c0c-0000-4000-8000-000000000001"
    expect(updates.slice(0, 3)).toStrictEqual([
      userChunk(id, "Inspect this image, then reply with exactly ", { kind: "user" }, { via: "followup" }),
      userChunk(
        id,
        "[image sha256:b1ff9c8ea3a780bad09b346c423d2d0e46815926879b18e841d928376a946640 (image/png), not in the session log]",
        { kind: "user" },
        { via: "followup" }
      ),
      userChunk(id, "the single word DONE.", { kind: "user" }, { via: "followup" })
    ])
    checkAll(updates)
  })

  it("every fixture: each update is a SessionNotification, each tool_call_update follows its own tool_call, every tool/call shown once", async () => {
    let total = 0
    for (const name of dshFixtures) {
      const log = await readDsh(name)
      for (const compaction of [false, true]) {
        const updates = Replay.replayUpdates(log.events, { header: log.header, cwd: "/w", compaction })
        checkAll(updates)
        const calls = new Set<string>()
        for (const u of updates) {
          if (u.sessionUpdate === "tool_call") {
            expect(calls.has(u.toolCallId)).toBe(false)
            calls.add(u.toolCallId)
          } else if (u.sessionUpdate === "tool_call_update") expect(calls.has(u.toolCallId)).toBe(true)
        }
        total += updates.length
      }
      // Every surface tool call of the log is shown once.
      const logged = log.events.filter((e) => e.type === "tool/call").length
      const shown = Replay.replayUpdates(log.events, { header: log.header }).filter((u) => u.sessionUpdate === "tool_call").length
      expect([name, shown]).toEqual([name, logged])
    }
    expect(total).toBeGreaterThan(500)
  })
})
