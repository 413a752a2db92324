import { describe, expect, it } from "@effect/vitest"
import { escapeLine, escapeText } from "../src/internal/terminalText.js"
import * as Transcript from "../src/Transcript.js"
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
    expect(Transcript.render(entries)).toBe(
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
    expect(Transcript.render([])).toBe("")
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
    expect(Transcript.render(hostileEntries).split("\n")).toEqual([
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
    expect(Transcript.escapeControl("\u202e\n")).toBe("\\u202e\n")
  })

  it("labels producers and end reasons", () => {
    expect(Transcript.sourceLabel({ kind: "tool", callId: "c1" })).toBe("tool:c1")
    expect(Transcript.sourceLabel({ kind: "hook", hook: "audit" })).toBe("hook:audit")
    expect(Transcript.sourceLabel({ kind: "session-reference", sessionId: "s9", throughSeq: 41 }))
      .toBe("session-reference:s9@41")
    expect(Transcript.sourceLabel({ kind: "plugin", plugin: "@deepseek-ai/dsh-system-prompt", form: "snapshot" }))
      .toBe("plugin:@deepseek-ai/dsh-system-prompt (snapshot)")
    expect(Transcript.sourceLabel({ kind: "goal", goalId: "g1" })).toBe("goal")
    expect(Transcript.reasonLabel({ kind: "error", error: { code: "AUTH", message: "HTTP 401" } })).toBe(
      "error: AUTH: HTTP 401"
    )
    expect(Transcript.reasonLabel({ kind: "blocked" })).toBe("blocked")
    expect(Transcript.reasonLabel({ kind: "aborted", reason: { kind: "disposed" } })).toBe("aborted (disposed)")
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
    expect(Transcript.render(t).split("\n")[2]).toMatch(
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
      expect(kinds("user", "context"), name).toBe(count("user/message"))
      expect(kinds("tool-call"), name).toBe(count("tool/call"))
      expect(kinds("tool-result"), name).toBe(count("tool/result"))
      expect(kinds("turn-end"), name).toBe(count("turn/end"))
      expect(kinds("assistant"), name).toBeLessThanOrEqual(count("assistant/message"))
      expect(Transcript.toJsonLines(t).split("\n").length, name).toBe(t.length + 1)
      expect(typeof Transcript.render(t)).toBe("string")
    }
  })
})
