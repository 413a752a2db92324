import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Schema } from "effect"
import * as Agent from "../src/Agent.js"
import * as Compaction from "../src/Compaction.js"
import { escapeLine, escapeText } from "../src/internal/terminalText.js"
import * as Invariant from "../src/Invariant.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { EventDraft } from "../src/SessionEvent.js"
import * as Tool from "../src/Tool.js"
import * as Transcript from "../src/Transcript.js"
import * as TranscriptText from "../src/TranscriptText.js"
import { advance, layer } from "./utils/agent.js"
import {
  assistant,
  claim,
  ctx,
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
  turnEnd,
  turnStart
} from "./utils/events.js"

const u1 = msg("u1", "check the network")
const n1 = ctx("n1", "link flapped at 12:03\nand again at 12:05")

const smallLog = events(
  followup(u1),
  turnStart(1),
  claim("next-turn", 1),
  stepStart(1, 1),
  entered(u1),
  assistant(1, 1, "Let me look.", { toolCalls: [{ id: "c1", name: "ping", arguments: "{\"host\":\"a\"}" }] }),
  toolCall(1, 1, "c1", "ping", "{\"host\":\"a\"}"),
  toolResult(1, 1, "c1", "pong"),
  inject(n1),
  foreign("netwatch/sample", { rtt: 12 }),
  stepEnd(1, 1),
  claim("next-step", 1),
  stepStart(1, 2),
  entered(n1),
  assistant(1, 2, undefined, { toolCalls: [{ id: "c2", name: "nope" }] }),
  toolCall(1, 2, "c2", "nope"),
  toolResult(1, 2, "c2", "unknown tool nope", { name: "ToolError", code: "UNKNOWN_TOOL" }),
  stepEnd(1, 2),
  stepStart(1, 3),
  assistant(1, 3, "All good"),
  stepEnd(1, 3),
  turnEnd(1),
  followup(msg("u2", "and now?")),
  turnStart(2),
  claim("next-turn", 1),
  stepStart(2, 1),
  entered(msg("u2", "and now?")),
  assistant(2, 1, "Still", { interrupted: true }),
  stepEnd(2, 1),
  turnEnd(2, "aborted")
)

const entries: Array<Transcript.Entry> = [
  { kind: "user", turn: 1, step: 1, id: "u1", text: "check the network", source: { kind: "user" } },
  { kind: "assistant", turn: 1, step: 1, text: "Let me look." },
  { kind: "tool-call", turn: 1, step: 1, callId: "c1", name: "ping", arguments: "{\"host\":\"a\"}" },
  { kind: "tool-result", turn: 1, step: 1, callId: "c1", text: "pong", isError: false },
  {
    kind: "context",
    turn: 1,
    step: 2,
    id: "n1",
    text: "link flapped at 12:03\nand again at 12:05",
    source: { kind: "plugin", plugin: "netwatch" }
  },
  { kind: "tool-call", turn: 1, step: 2, callId: "c2", name: "nope", arguments: "{}" },
  { kind: "tool-result", turn: 1, step: 2, callId: "c2", text: "unknown tool nope", isError: true },
  { kind: "assistant", turn: 1, step: 3, text: "All good" },
  { kind: "turn-end", turn: 1, reason: { kind: "completed" } },
  { kind: "user", turn: 2, step: 1, id: "u2", text: "and now?", source: { kind: "user" } },
  { kind: "assistant", turn: 2, step: 1, text: "Still", interrupted: true },
  { kind: "turn-end", turn: 2, reason: { kind: "aborted", reason: { kind: "user" } } }
]

describe("Transcript", () => {
  it("fromEvents gives the §14 entries in log order, context marked with its producer", () => {
    expect(Transcript.fromEvents(smallLog)).toEqual(entries)
  })

  it("toJsonLines writes one §14 JSON object a line", () => {
    const lines = Transcript.toJsonLines(entries).split("\n")
    expect(lines.length).toBe(13)
    expect(lines[0]).toBe(
      "{\"kind\":\"user\",\"turn\":1,\"step\":1,\"id\":\"u1\",\"text\":\"check the network\",\"source\":{\"kind\":\"user\"}}"
    )
    expect(lines[4]).toBe(
      "{\"kind\":\"context\",\"turn\":1,\"step\":2,\"id\":\"n1\",\"text\":\"link flapped at 12:03\\nand again at 12:05\",\"source\":{\"kind\":\"plugin\",\"plugin\":\"netwatch\"}}"
    )
    expect(lines[10]).toBe("{\"kind\":\"assistant\",\"turn\":2,\"step\":1,\"text\":\"Still\",\"interrupted\":true}")
    expect(lines[11]).toBe("{\"kind\":\"turn-end\",\"turn\":2,\"reason\":{\"kind\":\"aborted\",\"reason\":{\"kind\":\"user\"}}}")
    expect(lines[12]).toBe("")
    expect(lines.slice(0, 12).map((l) => JSON.parse(l))).toEqual(entries)
  })

  it("render shows turns, direct input, labelled context, tool calls and results, end reasons", () => {
    expect(TranscriptText.render(entries)).toBe(
      [
        "── turn 1 ──",
        "> check the network",
        "Let me look.",
        "→ ping({\"host\":\"a\"})",
        "← pong",
        "[context from plugin:netwatch] link flapped at 12:03",
        "  and again at 12:05",
        "→ nope({})",
        "← error: unknown tool nope",
        "All good",
        "turn 1 ended: completed",
        "── turn 2 ──",
        "> and now?",
        "Still [interrupted]",
        "turn 2 ended: aborted (user)",
        ""
      ].join("\n")
    )
    expect(TranscriptText.render([])).toBe("")
  })

  it("render and toJsonLines escape what could drive or disguise the terminal: C0/C1, bidi, zero-width, separators", () => {
    // Every kind of hidden or controlling code point the issue names, in a model's text, a
    // producer's label and a tool's name; newline and tab are layout and stay.
    const hostile = "a\u202eb\u2066c\u2067d\u2068e\u2069f\u202ag\u202dh\u200ei\u200fj" +
      "\u200bk\u200cl\u200dm\ufeffn\u2028o\u2029p\u001b[2Jq\u009br\u007fs\u0007t\rv\tw\nx\u{e0041}y"
    const shown = "a\\u202eb\\u2066c\\u2067d\\u2068e\\u2069f\\u202ag\\u202dh\\u200ei\\u200fj" +
      "\\u200bk\\u200cl\\u200dm\\ufeffn\\u2028o\\u2029p\\x1b[2Jq\\x9br\\x7fs\\x07t\\x0dv\tw"
    const hostileEntries: Array<Transcript.Entry> = [
      { kind: "assistant", turn: 1, step: 1, text: hostile },
      { kind: "context", turn: 1, step: 1, id: "c", text: "ok", source: { kind: "plugin", plugin: "p\u202egnp" } },
      { kind: "tool-call", turn: 1, step: 1, callId: "c1", name: "rm\u200b", arguments: "{}" }
    ]
    expect(TranscriptText.render(hostileEntries).split("\n")).toEqual([
      "── turn 1 ──",
      shown,
      "x\\u{e0041}y",
      "[context from plugin:p\\u202egnp] ok",
      "→ rm\\u200b({})",
      ""
    ])
    // JSON lines stay equal in value, with those code points as JSON escapes.
    const json = Transcript.toJsonLines(hostileEntries)
    // eslint-disable-next-line no-control-regex -- the characters that must not reach a terminal
    expect(json).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u2028\u2029]/)
    expect(json).not.toMatch(/\u{e0041}/u)
    expect(json.split("\n")[0]).toContain("a\\u202eb\\u2066c")
    expect(json.split("\n")[0]).toContain("x\\udb40\\udc41y")
    expect(json.trimEnd().split("\n").map((l) => JSON.parse(l))).toEqual(hostileEntries)
    // The shared rule, one line at a time (ids, paths, error lines).
    expect(escapeLine("id\u202e\n\tx\u001b")).toBe("id\\u202e\\n\\tx\\x1b")
    expect(escapeText("two\nlines\tand\u2028")).toBe("two\nlines\tand\\u2028")
    expect(TranscriptText.escapeControl("\u202e\n")).toBe("\\u202e\n")
  })

  it("labels producers and end reasons", () => {
    expect(TranscriptText.sourceLabel({ kind: "tool", callId: "c1" })).toBe("tool:c1")
    expect(TranscriptText.sourceLabel({ kind: "hook", hook: "audit" })).toBe("hook:audit")
    expect(TranscriptText.sourceLabel({ kind: "session-reference", sessionId: "s9", throughSeq: 41 }))
      .toBe("session-reference:s9@41")
    expect(TranscriptText.sourceLabel({ kind: "plugin", plugin: "@deepseek-ai/dsh-system-prompt", form: "snapshot" }))
      .toBe("plugin:@deepseek-ai/dsh-system-prompt (snapshot)")
    expect(TranscriptText.sourceLabel({ kind: "goal", goalId: "g1" })).toBe("goal")
    expect(TranscriptText.reasonLabel({ kind: "error", error: { code: "AUTH", message: "HTTP 401" } })).toBe(
      "error: AUTH: HTTP 401"
    )
    expect(TranscriptText.reasonLabel({ kind: "blocked" })).toBe("blocked")
    expect(TranscriptText.reasonLabel({ kind: "aborted", reason: { kind: "disposed" } })).toBe("aborted (disposed)")
  })
})

describe("Transcript on DSH v0 fixtures", () => {
  it("acp__cancel: the prompt, the runtime snapshot as context, the interrupted prefix, the aborted end", async () => {
    const { events: log } = await readDsh("acp__cancel__session.jsonl")
    const t = Transcript.fromEvents(log)
    expect(t.map((e) => [e.kind, e.turn, "step" in e ? e.step : undefined])).toEqual([
      ["user", 1, 1],
      ["context", 1, 1],
      ["assistant", 1, 1],
      ["turn-end", 1, undefined]
    ])
    expect(t[0]).toEqual({
      kind: "user",
      turn: 1,
      step: 1,
      id: "f74653c2-8793-4004-ab0d-833a8dfd42bf",
      text: "Start a long task; this turn will be cancelled mid-stream.",
      source: { kind: "user" }
    })
    expect(t[2]).toEqual({ kind: "assistant", turn: 1, step: 1, text: "partial", interrupted: true })
    expect(t[3]).toEqual({ kind: "turn-end", turn: 1, reason: { kind: "aborted", reason: { kind: "user" } } })
    expect(TranscriptText.render(t).split("\n")[2]).toMatch(
      /^\[context from plugin:@deepseek-ai\/dsh-system-prompt \(snapshot\)\] Current runtime context/
    )
  })

  it("acp__tool-call-turn: tool call and result entries", async () => {
    const { events: log } = await readDsh("acp__tool-call-turn__session.jsonl")
    const t = Transcript.fromEvents(log)
    expect(t.filter((e) => e.kind === "tool-call" || e.kind === "tool-result")).toEqual([
      {
        kind: "tool-call",
        turn: 1,
        step: 1,
        callId: "call_00_Rn2Mz1y8uZN62ukEXiNO2077",
        name: "bash",
        arguments: "{\"command\": \"echo SNAPSHOT_OK\", \"description\": \"Run echo SNAPSHOT_OK\"}"
      },
      {
        kind: "tool-result",
        turn: 1,
        step: 1,
        callId: "call_00_Rn2Mz1y8uZN62ukEXiNO2077",
        text: "SNAPSHOT_OK\n",
        isError: false
      }
    ])
    expect(t.at(-2)).toEqual({ kind: "assistant", turn: 1, step: 2, text: "DONE" })
  })

  it("runs on every fixture: one entry per message, call and result, one turn-end per turn", async () => {
    for (const name of dshFixtures) {
      const { events: log } = await readDsh(name)
      const t = Transcript.fromEvents(log)
      const count = (type: string) => log.filter((e) => e.type === type).length
      const kinds = (...k: Array<string>) => t.filter((e) => k.includes(e.kind)).length
      expect(kinds("user", "context", "checkpoint"), name).toBe(count("user/message"))
      expect(kinds("tool-call"), name).toBe(count("tool/call"))
      expect(kinds("tool-result"), name).toBe(count("tool/result"))
      expect(kinds("turn-end"), name).toBe(count("turn/end"))
      expect(kinds("assistant"), name).toBeLessThanOrEqual(count("assistant/message"))
      expect(Transcript.toJsonLines(t).split("\n").length, name).toBe(t.length + 1)
      expect(typeof TranscriptText.render(t)).toBe("string")
    }
  })
})

describe("Transcript of compactions (§17)", () => {
  const a200 = "a".repeat(200)
  const b200 = "b".repeat(200)
  const c200 = "c".repeat(200)

  it.scoped("a compacted bracket is one marker with the token figures and the summary; its checkpoint is no message", () => {
    const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, { text: "SUMMARY\nsecond line" }, { text: "ok3" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      for (const text of [a200, b200, c200]) {
        yield* agent.followup(text)
        yield* advance(10)
      }
      const events = agent.log.events()
      const entries = Transcript.fromEvents(events)
      const compactionId = (events.find((e) => e.type === "compaction/start")!.data as any).compactionId
      expect(entries.slice(6)).toEqual([
        {
          kind: "compaction",
          turn: 3,
          step: 0,
          compactionId,
          reason: "pressure",
          outcome: "compacted",
          tokensBefore: 118,
          tokensAfter: 83,
          shadowedRange: { start: 4, end: 6 },
          shadowedTokenCount: 59,
          summary: "SUMMARY\nsecond line"
        },
        { kind: "user", turn: 3, step: 1, id: expect.any(String), text: c200, source: { kind: "user" } },
        { kind: "assistant", turn: 3, step: 1, text: "ok3" },
        { kind: "turn-end", turn: 3, reason: { kind: "completed" } }
      ])
      expect(TranscriptText.render(entries)).toBe(
        [
          "── turn 1 ──",
          `> ${a200}`,
          "ok1",
          "turn 1 ended: completed",
          "── turn 2 ──",
          `> ${b200}`,
          "ok2",
          "turn 2 ended: completed",
          "── turn 3 ──",
          "[compaction: pressure, turn 3] compacted 118 → 83 tokens: seq 4..6 (59 tokens) summarized",
          "  SUMMARY",
          "  second line",
          `> ${c200}`,
          "ok3",
          "turn 3 ended: completed",
          ""
        ].join("\n")
      )
      expect(Transcript.toJsonLines(entries).split("\n")[6]).toBe(
        `{"kind":"compaction","turn":3,"step":0,"compactionId":"${compactionId}","reason":"pressure","outcome":"compacted",` +
          `"tokensBefore":118,"tokensAfter":83,"shadowedRange":{"start":4,"end":6},"shadowedTokenCount":59,` +
          `"summary":"SUMMARY\\nsecond line"}`
      )
      // Fed one event at a time, the projection gives the same entries (the chat's live view).
      const projector = Transcript.projector()
      expect([...events.flatMap((e) => projector.push(e)), ...projector.end()]).toEqual(entries)
    }).pipe(
      Effect.provide(layer(model)),
      Effect.provide(Compaction.layer({ contextWindow: 200, reserve: 50, keepRecentTokens: 60 }))
    )
  })

  it.scoped("skipped and aborted manual brackets between turns; a failed one with its error", () => {
    const model = ScriptedModel.make([
      { text: "ok1" },
      { text: "SUMMARY", latencyMs: 100 },
      { error: { code: "HTTP_401", message: "HTTP 401: bad key", status: 401 } }
    ])
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      expect((yield* agent.compact()).outcome).toBe("skipped")
      yield* agent.followup(a200)
      yield* advance(10)
      const fiber = yield* Effect.fork(agent.compact())
      yield* advance(50)
      yield* agent.cancel()
      expect((yield* Fiber.join(fiber)).outcome).toBe("aborted")
      expect((yield* agent.compact({ instructions: "again" })).outcome).toBe("failed")
      expect(TranscriptText.render(Transcript.fromEvents(agent.log.events())).split("\n")).toEqual([
        "[compaction: manual, between turns] skipped at 0 tokens: nothing to compact",
        "── turn 1 ──",
        `> ${a200}`,
        "ok1",
        "turn 1 ended: completed",
        "[compaction: manual, between turns] aborted at 59 tokens: nothing kept",
        "[compaction: manual, between turns] failed at 59 tokens: nothing kept" +
        " (error: HTTP_401: the summarization request failed: HTTP 401: bad key)",
        ""
      ])
      const markers = Transcript.fromEvents(agent.log.events()).filter((e) => e.kind === "compaction")
      expect(markers.map((m) => [m.turn, m.step, m.outcome, m.tokensBefore, m.error])).toEqual([
        [0, 0, "skipped", 0, undefined],
        [0, 0, "aborted", 59, undefined],
        [0, 0, "failed", 59, { code: "HTTP_401", message: "the summarization request failed: HTTP 401: bad key" }]
      ])
    }).pipe(Effect.provide(layer(model)), Effect.provide(Compaction.layer({ keepRecentTokens: 1 })))
  })

  it.scoped("a pruning bracket counts the tool results it pruned", () => {
    const reader = Tool.make({
      name: "read",
      description: "reads",
      parameters: Schema.Struct({}),
      execute: () => Effect.succeed({ content: "d".repeat(200) })
    })
    const model = ScriptedModel.make([{ toolCalls: [{ id: "r1", name: "read" }] }, { text: "ok1" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [reader] })
      yield* agent.followup("read it")
      yield* advance(10)
      expect((yield* agent.compact()).outcome).toBe("compacted")
      expect(TranscriptText.render(Transcript.fromEvents(agent.log.events())).split("\n")).toEqual([
        "── turn 1 ──",
        "> read it",
        "→ read({})",
        `← ${"d".repeat(200)}`,
        "ok1",
        "turn 1 ended: completed",
        "[compaction: manual, between turns] compacted 108 → 71 tokens: 1 tool result pruned",
        ""
      ])
    }).pipe(Effect.provide(layer(model)), Effect.provide(Compaction.layerPolicy(Compaction.prune({ keepRecentTokens: 5 }))))
  })

  const start = (id: string, turn: number | null, reason: string, tokens: number): EventDraft =>
    foreign("compaction/start", { compactionId: id, turn, reason, tokens })
  const end = (id: string, turn: number | null, outcome: string, extra: object = {}): EventDraft =>
    foreign("compaction/end", { compactionId: id, turn, outcome, ...extra })

  it("a bracket repair closed interrupted, one a log leaves open, an end without its start", () => {
    const u1 = msg("u1", "hello")
    const log = events(
      followup(u1),
      turnStart(1),
      claim("next-turn", 1),
      start("k1", 1, "pressure", 900),
      end("k1", 1, "interrupted", { error: { code: "CRASHED", message: "the process died" } }),
      stepStart(1, 1),
      entered(u1),
      assistant(1, 1, "hi"),
      stepEnd(1, 1),
      turnEnd(1),
      end("k0", null, "skipped"),
      start("k2", null, "manual", 120)
    )
    const entries = Transcript.fromEvents(log)
    expect(entries.filter((e) => e.kind === "compaction")).toEqual([
      {
        kind: "compaction",
        turn: 1,
        step: 0,
        compactionId: "k1",
        reason: "pressure",
        outcome: "interrupted",
        tokensBefore: 900,
        error: { code: "CRASHED", message: "the process died" }
      },
      { kind: "compaction", turn: 0, step: 0, compactionId: "k0", outcome: "skipped" },
      { kind: "compaction", turn: 0, step: 0, compactionId: "k2", reason: "manual", tokensBefore: 120 }
    ])
    expect(TranscriptText.render(entries).split("\n")).toEqual([
      "── turn 1 ──",
      "[compaction: pressure, turn 1] interrupted at 900 tokens: nothing kept (error: CRASHED: the process died)",
      "> hello",
      "hi",
      "turn 1 ended: completed",
      "[compaction, between turns] skipped: nothing to compact",
      "[compaction: manual, between turns] started at 120 tokens: no end in the log",
      ""
    ])
    // Live, an open bracket is not shown until it ends (`end()` is for a log that stops there).
    const p = Transcript.projector()
    expect(log.flatMap((e) => p.push(e)).filter((e) => e.kind === "compaction").length).toBe(2)
  })

  it("a DSH log's checkpoint outside any bracket: a compaction checkpoint line with its text", async () => {
    const { events: log } = await readDsh("acp__agent-instructions__session.jsonl")
    const t = Transcript.fromEvents(log)
    const checkpoint = t.find((e) => e.kind === "checkpoint")
    expect(checkpoint).toEqual({
      kind: "checkpoint",
      turn: 1,
      step: 1,
      id: "162c764f-f01d-484d-ad81-1481dc29792a",
      compactionId: "workspace-context-fixture",
      replaces: { start: 5, end: 5 },
      text: "Earlier context was compacted for this snapshot.",
      source: { kind: "plugin", plugin: "compact", compactionId: "workspace-context-fixture" }
    })
    expect(t.filter((e) => e.kind === "context" && (e.source as any).plugin === "compact")).toEqual([])
    const lines = TranscriptText.render(t).split("\n")
    expect(lines.filter((l) => l.includes("compact"))).toEqual([
      "[compaction checkpoint replacing seq 5] Earlier context was compacted for this snapshot."
    ])
    expect(lines[lines.indexOf("[compaction checkpoint replacing seq 5] Earlier context was compacted for this snapshot.") - 1])
      .toBe("→ read({\"file_path\":\"nested/task.txt\"})")
  })
})

/**
 * Gaps on the loop side found while building the compaction views, now closed: a checkpoint is
 * valid inside its bracket, a manual compaction's extra instructions are in `compaction/start`,
 * an aborted one's report names its bracket.
 */
describe("compaction: the loop side the views rely on (§17)", () => {
  const a200 = "a".repeat(200)

  it.scoped("Invariant.check accepts a compaction's checkpoint user/message (it is logged outside any step)", () => {
    const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, { text: "SUMMARY" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      for (const text of [a200, "b".repeat(200)]) {
        yield* agent.followup(text)
        yield* advance(10)
      }
      expect((yield* agent.compact()).outcome).toBe("compacted")
      expect(Invariant.check(agent.log.events())).toEqual([])
    }).pipe(Effect.provide(layer(model)))
  })

  it.scoped("the extra instructions of a manual compaction (agent.compact({instructions}), /compact TEXT) are in the log", () => {
    const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, { text: "SUMMARY" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      for (const text of [a200, "b".repeat(200)]) {
        yield* agent.followup(text)
        yield* advance(10)
      }
      yield* agent.compact({ instructions: "keep the fruit names" })
      // They reach the summarization request ("Also: keep the fruit names") and `compaction/start`.
      const start = agent.log.events().find((e) => e.type === "compaction/start")!
      expect((start.data as any).instructions).toBe("keep the fruit names")
    }).pipe(Effect.provide(layer(model)))
  })

  it.scoped("the report of an aborted manual compaction names the compaction the log holds", () => {
    const model = ScriptedModel.make([{ text: "ok1" }, { text: "SUMMARY", latencyMs: 100 }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      yield* agent.followup(a200)
      yield* advance(10)
      const fiber = yield* Effect.fork(agent.compact())
      yield* advance(50)
      yield* agent.cancel()
      const report = yield* Fiber.join(fiber)
      const start = agent.log.events().find((e) => e.type === "compaction/start")!
      expect(report).toEqual({
        compactionId: (start.data as any).compactionId,
        outcome: "aborted",
        tokensBefore: 59,
        tokensAfter: 59
      })
    }).pipe(Effect.provide(layer(model)), Effect.provide(Compaction.layer({ keepRecentTokens: 1 })))
  })
})

describe("TranscriptText.render with children (§27: transcript --follow-children)", () => {
  /** A parent's sub-agent call: its `tool/call`, `subagent/start` of `child`, `subagent/end`, result. */
  const delegation = (callId: string, child: string, answer: string) => [
    toolCall(1, 1, callId, "subagent", JSON.stringify({ prompt: answer })),
    foreign("subagent/start", { runId: `r.${child}`, provider: "spawn", id: child, local: true, callId, depth: 1 }),
    foreign("subagent/end", {
      runId: `r.${child}`,
      provider: "spawn",
      id: child,
      local: true,
      callId,
      stopReason: "completed",
      lastAssistantMessage: [{ type: "text", text: answer }]
    }),
    toolResult(1, 1, callId, `${answer}\n[sub-agent session ${child}]`)
  ]
  const session = (id: string, parent: string, ...drafts: Array<EventDraft | ReadonlyArray<EventDraft>>) =>
    Transcript.fromEvents(events(...drafts), {
      header: {
        type: "session",
        format: "effect-agent-loop",
        version: 1,
        id,
        createdAt: 0,
        parentSession: parent,
        origin: "subagent",
        delegationDepth: 1
      } as any
    })
  const parent = Transcript.fromEvents(events(
    followup(msg("u", "delegate")),
    turnStart(1),
    claim("next-turn", 1),
    stepStart(1, 1),
    entered(msg("u", "delegate")),
    delegation("c1", "kid", "done"),
    delegation("c2", "gone", "lost"),
    stepEnd(1, 1),
    turnEnd(1)
  ))
  const kid = session(
    "kid",
    "p",
    foreign("subagent/descriptor", { version: 2, mode: "one-shot", provider: "spawn", label: "do it" }),
    turnStart(1),
    stepStart(1, 1),
    entered(msg("t", "do it", { kind: "subagent", parentSession: "p", callId: "c1" } as any)),
    delegation("k1", "grandkid", "deep\nanswer"),
    assistant(1, 2, "done \u001b[31m"),
    turnEnd(1)
  )
  const grandkid = session("grandkid", "kid", turnStart(1), assistant(1, 1, "deep\nanswer"), turnEnd(1))

  it("nests each child under its start line, indented a level, recursively; a child not there is one line", () => {
    const children = new Map<string, TranscriptText.ChildTranscript>([
      ["kid", { _tag: "Entries", entries: kid }],
      ["grandkid", { _tag: "Entries", entries: grandkid }],
      ["gone", { _tag: "Unavailable", reason: "not in the store (no gone.jsonl in /s)" }]
    ])
    const text = TranscriptText.render(parent, { child: (id) => children.get(id), sessionId: "p" })
    expect(text.split("\n")).toEqual([
      "── turn 1 ──",
      "> delegate",
      "→ subagent({\"prompt\":\"done\"})",
      "⇒ subagent kid started via spawn",
      "  │ [subagent session kid of p, depth 1]",
      "  │ [subagent: one-shot via spawn, \"do it\"]",
      "  │ ── turn 1 ──",
      "  │ [context from subagent:c1] do it",
      "  │ → subagent({\"prompt\":\"deep\\nanswer\"})",
      "  │ ⇒ subagent grandkid started via spawn",
      "  │   │ [subagent session grandkid of kid, depth 1]",
      "  │   │ ── turn 1 ──",
      "  │   │ deep",
      "  │   │ answer",
      "  │   │ turn 1 ended: completed",
      "  │ ⇐ subagent grandkid ended: completed: deep",
      "  │   answer",
      "  │ ← deep",
      "  │   answer",
      "  │   [sub-agent session grandkid]",
      "  │ done \\x1b[31m",
      "  │ turn 1 ended: completed",
      "⇐ subagent kid ended: completed: done",
      "← done",
      "  [sub-agent session kid]",
      "→ subagent({\"prompt\":\"lost\"})",
      "⇒ subagent gone started via spawn",
      "  │ [subagent session gone: not in the store (no gone.jsonl in /s)]",
      "⇐ subagent gone ended: completed: lost",
      "← lost",
      "  [sub-agent session gone]",
      "turn 1 ended: completed",
      ""
    ])
    // Without `child`, or with children not followed (undefined), the text is the plain one.
    const plain = TranscriptText.render(parent)
    expect(TranscriptText.render(parent, { child: () => undefined })).toBe(plain)
    expect(plain).not.toContain("│")
    expect(Transcript.childSessions(parent)).toEqual(["kid", "gone"])
    expect(Transcript.childSessions(kid)).toEqual(["grandkid"])
  })

  it("stops below maxDepth and at a cycle, with a line each", () => {
    const children = new Map<string, TranscriptText.ChildTranscript>([
      ["kid", { _tag: "Entries", entries: kid }],
      // A hand-made log whose grandchild names its own grandparent.
      ["grandkid", { _tag: "Entries", entries: Transcript.fromEvents(events(turnStart(1), delegation("g1", "p", "loop"))) }]
    ])
    const lines = (options: TranscriptText.RenderOptions) =>
      TranscriptText.render(parent, { child: (id) => children.get(id), ...options }).split("\n").filter((l) =>
        l.includes("[subagent session") && l.includes(": ")
      )
    // "gone" is not followed (`child` gives undefined): nothing is nested under it.
    expect(lines({ maxDepth: 1 })).toEqual(["  │   │ [subagent session grandkid: not shown, deeper than 1 level]"])
    expect(lines({ sessionId: "p" })).toEqual([
      "  │   │   │ [subagent session p: not shown again, it is one of its own parents (a cycle in the logs)]"
    ])
  })
})
