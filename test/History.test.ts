import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import * as History from "../src/History.js"
import type { Message } from "../src/Message.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import {
  assistant,
  claim,
  ctx,
  dshDir,
  dshFixtures,
  entered,
  events,
  followup,
  foreign,
  inject,
  msg,
  readDsh,
  stepEnd,
  stepStart,
  toolCall,
  toolResult,
  toolResultMessage,
  turnEnd,
  turnStart
} from "./utils/events.js"

const u1 = msg("u1", "check the network")
const n1 = ctx("n1", "link flapped at 12:03")

const smallLog = events(
  followup(u1),
  turnStart(1),
  claim("next-turn", 1),
  stepStart(1, 1),
  entered(u1),
  { type: "request/header", data: { turn: 1, step: 1, provider: "test", model: "test", tools: [], settings: {} } },
  assistant(1, 1, "Let me look.", { toolCalls: [{ id: "c1", name: "ping", arguments: "{\"host\":\"a\"}" }] }),
  toolCall(1, 1, "c1", "ping", "{\"host\":\"a\"}"),
  toolResult(1, 1, "c1", "pong"),
  inject(n1),
  foreign("netwatch/sample", { rtt: 12 }),
  stepEnd(1, 1),
  claim("next-step", 1),
  stepStart(1, 2),
  entered(n1),
  assistant(1, 2, "All good", { interrupted: true }),
  stepEnd(1, 2),
  turnEnd(1, "aborted")
)

const assistantMessage = (e: SessionEvent): Message => (e.data as { readonly message: Message }).message

describe("History.derive", () => {
  it("is the user/message, assistant/message and tool/result messages in log order", () => {
    expect(History.derive(smallLog)).toEqual([
      u1,
      assistantMessage(smallLog[6]!),
      toolResultMessage("c1", "pong", false),
      n1,
      assistantMessage(smallLog[15]!)
    ])
  })

  it("honours surfaceOp: replace swaps a span of the surface (in surface order) for one message", () => {
    const a = msg("a", "A")
    const b = msg("b", "B")
    const c = msg("c", "C")
    const d = msg("d", "D")
    const summary = msg("sum", "summary of A and B")
    const summary2 = msg("sum2", "summary of everything so far")
    const log = events(
      { type: "user/message", data: a, surfaceOp: "append" } as never,
      { type: "user/message", data: b, surfaceOp: "append" } as never,
      { type: "user/message", data: c, surfaceOp: "append" } as never,
      { type: "user/message", data: summary, surfaceOp: { op: "replace", start: 0, end: 1 } } as never,
      { type: "user/message", data: d, surfaceOp: "append" } as never,
      // the surface is now [3, 2, 4]: a span from seq 3 through seq 2 (start > end numerically)
      { type: "user/message", data: summary2, surfaceOp: { op: "replace", startSeq: 3, endSeq: 2 } } as never
    )
    expect(History.derive(log.slice(0, 5), { dsh: true })).toEqual([summary, c, d])
    expect(History.derive(log, { dsh: true })).toEqual([summary2, d])
    // the same surface operations apply to our logs
    expect(History.derive(log)).toEqual([summary2, d])
  })

  it("a replace naming seqs that are not on the surface appends", () => {
    const log = events(
      { type: "user/message", data: msg("a", "A"), surfaceOp: "append" } as never,
      { type: "user/message", data: msg("b", "B"), surfaceOp: { op: "replace", start: 7, end: 7 } } as never
    )
    expect(History.derive(log, { dsh: true }).map((m) => m.id)).toEqual(["a", "b"])
  })

  it("in a DSH v0 log, a message event without surfaceOp is log-only; in ours it is visible", () => {
    const log = events(
      { type: "user/message", data: msg("a", "A"), surfaceOp: "append" } as never,
      entered(msg("b", "B"))
    )
    expect(History.derive(log, { header: { type: "session", version: 0, id: "x", createdAt: 0 } }).map((m) => m.id))
      .toEqual(["a"])
    expect(History.derive(log).map((m) => m.id)).toEqual(["a", "b"])
  })

  it("a foreign event with a surfaceOp holds a surface position but yields no message", () => {
    const log = events(
      { type: "system/message", data: { text: "sys" }, surfaceOp: "append" } as never,
      { type: "user/message", data: msg("a", "A"), surfaceOp: "append" } as never,
      { type: "user/message", data: msg("b", "B"), surfaceOp: "append" } as never,
      { type: "user/message", data: msg("s", "S"), surfaceOp: { op: "replace", start: 0, end: 1 } } as never
    )
    expect(History.derive(log, { dsh: true }).map((m) => m.id)).toEqual(["s", "b"])
  })
})

const rawSurface = (name: string): Array<{ readonly type: string; readonly message: unknown; readonly surfaceOp: unknown }> =>
  readFileSync(join(dshDir, name), "utf8").split("\n").filter((l) => l !== "").slice(1).map((l) => JSON.parse(l))
    .filter((e: { type: string }) => ["user/message", "assistant/message", "tool/result"].includes(e.type))
    .map((e: { type: string; data: { message?: unknown }; surfaceOp?: unknown }) => ({
      type: e.type,
      message: e.type === "user/message" ? e.data : e.data.message,
      surfaceOp: e.surfaceOp
    }))

const summary = (m: Message) => [
  m.id,
  m.role,
  m.source.kind,
  m.content.map((b) =>
    b.type === "text"
      ? `text:${b.text.slice(0, 41)}`
      : b.type === "tool-call"
      ? `tool-call:${b.name}`
      : b.type === "tool-result"
      ? `tool-result:${b.toolCallId}:${JSON.stringify(b.content)}`
      : b.type
  )
]

describe("History.derive on DSH v0 fixtures", () => {
  it("acp__tool-call-turn: prompt, runtime snapshot, tool call, its result, answer", async () => {
    const { events: log, header } = await readDsh("acp__tool-call-turn__session.jsonl")
    const history = History.derive(log, { header })
    expect(history).toEqual(rawSurface("acp__tool-call-turn__session.jsonl").map((e) => e.message))
    expect(history.map(summary)).toEqual([
      ["fe479aa0-1194-40fb-897b-bc7f99b54148", "user", "user", ["text:Use the bash tool to run exactly: echo SN"]],
      ["11ca1551-2073-4990-bf8c-828c614d47a8", "user", "plugin", ["text:Current runtime context. This snapshot su"]],
      ["1d5e73ab-6aea-4555-ae64-00e2772e3b82", "assistant", "model", ["reasoning", "tool-call:bash"]],
      [
        "ce8a3629-ce77-49bb-b426-eeeefb120c90",
        "user",
        "tool",
        ["tool-result:call_00_Rn2Mz1y8uZN62ukEXiNO2077:[{\"type\":\"text\",\"text\":\"SNAPSHOT_OK\\n\"}]"]
      ],
      ["ad76b9dd-271f-4b2b-bcda-80bb9e169513", "assistant", "model", ["reasoning", "text:DONE"]]
    ])
  })

  it("acp__hook-cc-posttool-context: the hook's context enters the next step, after the tool result", async () => {
    const { events: log, header } = await readDsh("acp__hook-cc-posttool-context__session.jsonl")
    const history = History.derive(log, { header })
    expect(history).toEqual(rawSurface("acp__hook-cc-posttool-context__session.jsonl").map((e) => e.message))
    expect(history.map(summary)).toEqual([
      ["f13c12f8-c187-4bae-bab7-a63d04e66f38", "user", "user", ["text:Use the bash tool to run exactly: echo HE"]],
      ["6bba4af4-6406-410c-b730-541278dcdbd7", "user", "plugin", ["text:Current runtime context. This snapshot su"]],
      ["3f69acce-e9e4-484d-9f67-a3be89ac6b0d", "assistant", "model", ["reasoning", "tool-call:bash"]],
      [
        "cb4649d1-9c25-40de-820c-7c7719f8a938",
        "user",
        "tool",
        ["tool-result:call_00_HbCMzTslWBZTSphWN0z97382:[{\"type\":\"text\",\"text\":\"HELLO\\n\"}]"]
      ],
      ["61e6c6d6-872c-4dd7-9771-53ced14a120d", "user", "plugin", [
        "text:Note: command output has been verified ag"
      ]],
      ["33bc2b6b-1d60-4143-971a-8ea2dab595bd", "assistant", "model", [
        "reasoning",
        "text:The tool result was:\n\n```\nHELLO\n```\n\nIt c"
      ]]
    ])
  })

  it("acp__agent-instructions: the compaction checkpoint replaces the instructions it shadows, in place", async () => {
    const { events: log, header } = await readDsh("acp__agent-instructions__session.jsonl")
    const raw = rawSurface("acp__agent-instructions__session.jsonl").map((e) => e.message as Message)
    const checkpoint = raw.find((m) => m.id === "162c764f-f01d-484d-ad81-1481dc29792a")!
    // surface: [prompt, instructions (replaced), snapshot, ...]; the checkpoint takes position 1
    const expected = raw.filter((m) => m !== checkpoint && m.id !== "4cba1848-cbb7-46fd-8cea-8497d54d0e63")
    expected.splice(1, 0, checkpoint)
    expect(History.derive(log, { header })).toEqual(expected)
    expect(History.derive(log, { header }).map((m) => m.id).slice(0, 3)).toEqual([
      "81078e7a-6837-45c2-a6b4-a5a3dfce0d4a",
      "162c764f-f01d-484d-ad81-1481dc29792a",
      "e4406554-e400-49c6-b8a3-0fe36841160b"
    ])
  })

  it("acp__subagent-fork-in-process.1: the inherited seed is part of the history", async () => {
    const { events: log, header } = await readDsh("acp__subagent-fork-in-process__session.1.jsonl")
    expect(header.seedLength).toBe(42)
    const history = History.derive(log, { header })
    expect(history.map((m) => [m.role, m.source.kind])).toEqual([
      ["user", "user"],
      ["user", "plugin"],
      ["assistant", "model"],
      ["user", "user"],
      ["user", "plugin"],
      ["assistant", "model"]
    ])
    expect(history[5]!.content.at(-1)).toEqual({ type: "text", text: "MARMALADE" })
  })

  it("every fixture: the appended messages in log order (the one replace aside)", async () => {
    let total = 0
    for (const name of dshFixtures) {
      const { events: log, header } = await readDsh(name)
      const history = History.derive(log, { header })
      const raw = rawSurface(name)
      if (raw.every((e) => e.surfaceOp === "append")) {
        expect(history, name).toEqual(raw.map((e) => e.message))
      } else {
        expect(name).toBe("acp__agent-instructions__session.jsonl")
      }
      total += history.length
    }
    expect(total).toBe(431)
  })
})
