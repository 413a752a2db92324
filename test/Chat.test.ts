/**
 * `agent-loop chat` (§14) driven for real: the built binary runs in a tmux pane of a
 * fixed size on the offline model, keys are typed with `send-keys`, and each scenario asserts
 * on the captured screen and then on the session log it left (`SessionStore.readFile`,
 * `Invariant.check` clean, and the exact sequence of events). Real waits are unavoidable (a real
 * program in a real terminal): each is a short poll with a deadline (test/utils/tmux.ts).
 *
 * tmux is required: CI installs it (.ci/run). Without it the suite is skipped locally with a
 * message, and fails under CI.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Layer } from "effect"
import { render } from "ink"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { PassThrough } from "node:stream"
import { createElement } from "react"
import * as Agent from "../src/Agent.js"
import type { AgentEvent } from "../src/AgentEvent.js"
import { App } from "../src/cli/chat/App.js"
import { ChatModel, shown } from "../src/cli/chat/ChatModel.js"
import { answer } from "../src/cli/chat/runChat.js"
import { cleanInput } from "../src/cli/chat/stdin.js"
import { main } from "../src/cli/main.js"
import * as Compaction from "../src/Compaction.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import { textOf, type UserMessage } from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as Offline from "../src/providers/Offline.js"
import * as OfflineTools from "../src/providers/OfflineTools.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { EventDraft, SessionEvent, ToolResultData } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Transcript from "../src/Transcript.js"
import * as TranscriptText from "../src/TranscriptText.js"
import { advance, layer as agentLayer } from "./utils/agent.js"
import { CHAT_BIG_TEST_MS, CHAT_READY_MS, CLI_RUN_MS, IN_PROCESS_MS, note, TMUX_WAIT_MS } from "./utils/bounds.js"
import { frameOf } from "./utils/chatFrame.js"
import * as E from "./utils/events.js"
import { replayServer } from "./utils/replayServer.js"
import { scratchDirs } from "./utils/scratchDirs.js"
import * as Tmux from "./utils/tmux.js"

const bin = Path.resolve("dist/cli/bin.js")
const hasTmux = Tmux.available()
if (!hasTmux && process.env.CI === undefined) {
  console.warn("test/Chat.test.ts: skipped: tmux is not installed (apt-get install tmux); CI installs it and runs these tests")
}

const tmpDir = scratchDirs("agent-loop-chat-")

/** The idle status line: the chat is ready for keys (raw mode is on once it is drawn). */
const IDLE = /● idle · session (\S+)/

/**
 * Starts `agent-loop chat --store DIR [args]` in tmux and waits until it is idle and drawn.
 * `CI` is left as it is (CI sets it, and Ink would draw only the last frame if the chat did not
 * ignore it); `NODE_ENV` (vitest's "test") is removed, as in a user's shell.
 */
const startChat = (store: string, args: ReadonlyArray<string> = [], width?: number) =>
  Effect.gen(function*() {
    const pane = yield* Tmux.start({
      command: [process.execPath, bin, "chat", "--store", store, ...args],
      cwd: Path.dirname(store),
      unsetEnv: ["NODE_ENV"],
      width
    })
    const screen = yield* pane.waitFor(IDLE, CHAT_READY_MS)
    return { pane, sessionId: IDLE.exec(screen)![1]! }
  })

/** Types a line and presses `key` (Enter by default). */
const send = (pane: Tmux.Pane, text: string, key = "Enter") => Effect.zipRight(pane.type(text), pane.keys(key))

/** `/quit`, then the exit status and the log path the chat printed last (right before it exited). */
const quit = (pane: Tmux.Pane) =>
  Effect.gen(function*() {
    yield* send(pane, "/quit")
    const code = yield* pane.waitForExit()
    const screen = yield* pane.screen
    return { code, screen, logPath: /^session log: (\S+)\n\[exited \d+\]$/m.exec(screen)?.[1] }
  })

/** Reads a log with the real reader; checks the invariants of §12 (compaction brackets included). */
const readLog = (path: string) =>
  Effect.gen(function*() {
    const contents = yield* SessionStore.readFile(path)
    expect(Invariant.check(contents.events, { header: contents.header })).toEqual([])
    expect(contents.warnings).toEqual([])
    return contents.events
  }).pipe(Effect.provide(NodeContext.layer), Effect.orDie)

const texts = (messages: ReadonlyArray<UserMessage>) => messages.map((m) => textOf(m.content))

/** One line per event: the facts a scenario pins (ids and times left out). */
const facts = (events: ReadonlyArray<SessionEvent>): Array<string> =>
  events.map((e) => {
    const d = e.data as any
    switch (e.type) {
      case "agent/inbox/spliced":
        return `spliced ${d.target} @${d.start} -${d.removedCount ?? 0} +${JSON.stringify(texts(d.inserted))}` +
          (d.wake === true ? " wake" : "") + (d.outcome !== undefined ? ` ${d.outcome} (${d.cause?.kind})` : "")
      case "turn/start":
        return `turn/start ${d.turn}`
      case "turn/end":
        return `turn/end ${d.turn}: ${TranscriptText.reasonLabel(d.reason)}`
      case "step/start":
      case "step/end":
        return `${e.type} ${d.turn}.${d.step}`
      case "user/message":
        return (e as any).surfaceOp !== undefined
          ? `checkpoint ${(e as any).surfaceOp.start}..${(e as any).surfaceOp.end} ${textOf(d.content)}`
          : `user/message [${TranscriptText.sourceLabel(d.source)}] ${textOf(d.content)}`
      case "compaction/start":
        return `compaction/start ${d.reason} turn ${d.turn} ${d.tokens}`
      case "compaction/summary":
        return `compaction/summary [${d.shadowedSeqs.join(",")}] ${d.shadowedTokenCount}`
      case "compaction/end":
        return `compaction/end ${d.outcome}${d.tokens !== undefined ? ` ${d.tokens}` : ""}`
      case "assistant/message":
        return `assistant/message ${d.turn}.${d.step}${d.interrupted === true ? " (interrupted)" : ""}: ${
          textOf(d.message.content)
        }`
      case "tool/call":
        return `tool/call ${d.turn}.${d.step} ${d.callId} ${d.name}${d.arguments}`
      case "approval/asked":
        return `approval/asked ${d.toolName} ${d.callId}`
      case "approval/decided":
        return `approval/decided ${d.outcome} (${d.by?.kind})${d.reason !== undefined ? `: ${d.reason}` : ""}`
      case "tool/result": {
        const r = d as ToolResultData
        return `tool/result ${r.turn}.${r.step} ${
          Transcript.fromEvents([e]).map((x) => (x as Transcript.ToolResultEntry).text).join("")
        }` +
          (r.error !== undefined ? ` [${r.error.code}]` : "")
      }
      default:
        return e.type
    }
  })

/** The lines of `screen` that match, in screen order (to pin an order of lines). */
const linesOf = (screen: string, ...wanted: ReadonlyArray<string>) =>
  screen.split("\n").filter((line) => wanted.some((w) => line.startsWith(w)))

/** The events of one plain completed turn that answered `text` on the offline model. */
const plainTurn = (turn: number, text: string) => [
  `spliced next-turn @0 -0 +${JSON.stringify([text])}`,
  `turn/start ${turn}`,
  "spliced next-turn @0 -1 +[]",
  `step/start ${turn}.1`,
  `user/message [user] ${text}`,
  ...(turn === 1 ? ["request/header"] : []),
  `assistant/message ${turn}.1: I received 1 message in this step: 1 from you (${JSON.stringify(text)}).`,
  `step/end ${turn}.1`,
  `turn/end ${turn}: completed`
]

describe("ChatModel (the screen state fed by live events)", () => {
  it("shows history and live events: the queue by kind, context labelled, calls paired with results, control, bidi and zero-width characters escaped", () => {
    const ctx = E.ctx("m1", "net is \u001b]0;pwned\u0007 metered\u202e\u200b")
    const go = E.msg("m2", "go")
    const all = E.events(
      E.inject(ctx),
      E.followup(go),
      // Live from here.
      E.turnStart(1),
      E.claim("next-step", 1),
      E.claim("next-turn", 1),
      E.stepStart(1, 1),
      E.entered(ctx),
      E.entered(go),
      E.assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "wait", arguments: "{\"seconds\":3}" }] }),
      E.toolCall(1, 1, "c1", "wait", "{\"seconds\":3}"),
      E.steer(E.msg("m3", "also this")),
      // After the deltas.
      E.toolResult(1, 1, "c1", "waited"),
      E.stepEnd(1, 1),
      E.turnEnd(1, "aborted")
    )
    const model = new ChatModel(
      "s1",
      all.slice(0, 2),
      { nextStep: [{ message: ctx, waking: false }], nextTurn: [go] },
      "idle",
      () => 1000
    )
    expect(model.getSnapshot().pending).toEqual([
      {
        id: "m1",
        queue: "context",
        label: "plugin:netwatch",
        direct: false,
        text: "net is \\x1b]0;pwned\\x07 metered\\u202e\\u200b"
      },
      { id: "m2", queue: "followup", label: "you", direct: true, text: "go" }
    ])
    const before = model.getSnapshot()
    // Events already in the log at start (seq 0, 1) are skipped.
    model.apply([{ type: "agent/status", status: "running" }, ...all.slice(0, 11)])
    const running = model.getSnapshot()
    expect(running).not.toBe(before)
    expect(running.status).toBe("running")
    expect(running.runningSince).toBe(1000)
    expect([running.turn, running.step]).toEqual([1, 1])
    expect(running.tools).toEqual([{ callId: "c1", name: "wait", args: "{\"seconds\":3}", since: 1000 }])
    expect(running.pending.map((p) => [p.queue, p.text])).toEqual([["steer", "also this"]])
    model.apply([
      { type: "assistant/delta", turn: 1, step: 2, text: "hal" },
      { type: "assistant/delta", turn: 1, step: 2, text: "f\u001b[2J" }
    ])
    expect(model.getSnapshot().streaming).toEqual({ text: "half\\x1b[2J", reasoning: "" })
    model.apply(all.slice(11))
    model.apply([{ type: "agent/status", status: "idle" }])
    const done = model.getSnapshot()
    expect(done.streaming).toBeUndefined()
    expect(done.runningSince).toBeUndefined()
    expect(done.tools).toEqual([])
    expect(done.items.map(({ key: _key, ...item }) => item)).toEqual([
      { kind: "turn", turn: 1 },
      { kind: "context", label: "plugin:netwatch", text: "net is \\x1b]0;pwned\\x07 metered\\u202e\\u200b" },
      { kind: "user", text: "go" },
      { kind: "tool", name: "wait", args: "{\"seconds\":3}", result: "waited", isError: false },
      { kind: "turn-end", turn: 1, reason: "aborted (user)", tone: "warn" }
    ])
  })

  it("the status line's tokens and cost include the sub-agents' runs, from the parent's subagent/end (§27 rule 9)", () => {
    const go = E.msg("m1", "go")
    const step = E.assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "subagent" }] })
    const all = E.events(
      E.followup(go),
      E.turnStart(1),
      E.claim("next-turn", 1),
      E.stepStart(1, 1),
      E.entered(go),
      {
        ...step,
        data: { ...(step.data as object), usage: { inputTokens: 1000, outputTokens: 100 }, response: { model: "big" } }
      } as EventDraft,
      E.toolCall(1, 1, "c1", "subagent"),
      E.foreign("subagent/end", {
        runId: "r1",
        provider: "spawn",
        id: "k1",
        local: true,
        callId: "c1",
        stopReason: "completed",
        usage: { inputTokens: 400, outputTokens: 40 },
        byModel: { small: { inputTokens: 400, outputTokens: 40 } },
        unreported: 0
      })
    )
    const model = new ChatModel("s1", [], { nextStep: [], nextTurn: [] }, "idle", () => 0, {
      big: { input: 2, output: 10 },
      small: { input: 1, output: 5 }
    })
    model.apply(all.slice(0, 6))
    expect([model.getSnapshot().tokens, model.getSnapshot().cost]).toEqual([1100, "$0.003"])
    // + 440 tokens; + 400·1 + 40·5 = 600 µUSD
    model.apply(all.slice(6))
    expect([model.getSnapshot().tokens, model.getSnapshot().cost]).toEqual([1540, "$0.0036"])
  })

  it("shows a message's first 8 KiB and 100 lines, then how many lines and bytes were left out; never cuts a character", () => {
    const more = (n: number, lines = 0) =>
      `\n… ${lines === 0 ? "the rest of the line" : `${lines} more lines`} not shown (${
        n.toLocaleString("en-US")
      } bytes, see agent-loop transcript)`
    expect(shown("short\ttext \u001b[2J")).toBe("short  text \\x1b[2J")
    expect(shown("x".repeat(8192))).toBe("x".repeat(8192))
    expect(shown("x".repeat(10_000))).toBe("x".repeat(8192) + more(1808))
    // 2 and 4 bytes a character: the cut is at the last whole character within 8 KiB.
    expect(shown("é".repeat(5000))).toBe("é".repeat(4096) + more(1808))
    expect(shown("a" + "😀".repeat(3000))).toBe("a" + "😀".repeat(2047) + more(12_001 - 8189))
    const lines = Array.from({ length: 150 }, (_, i) => `line ${i}`)
    expect(shown(lines.join("\n"))).toBe(
      lines.slice(0, 100).join("\n") + more(Buffer.byteLength(lines.slice(100).join("\n")), 50)
    )
    // A tool result or a context shows 12 lines.
    expect(shown(lines.join("\n"), 12)).toBe(
      lines.slice(0, 12).join("\n") + more(Buffer.byteLength(lines.slice(12).join("\n")), 138)
    )
    expect(shown(lines.slice(0, 100).join("\n") + "\n")).toBe(lines.slice(0, 100).join("\n") + "\n")
    // Escaped after the cut: 8 KiB of the log's text, however long its escaped form.
    expect(shown("\u001b".repeat(9000))).toBe("\\x1b".repeat(8192) + more(808))
    // A 4 MiB message costs as much as a small one, in the history and live alike.
    const big = E.msg("big", "z".repeat(4 * 1024 * 1024))
    const model = new ChatModel("s1", E.events(E.followup(big)), { nextStep: [], nextTurn: [big] }, "idle", () => 0)
    expect(model.getSnapshot().pending[0]!.text).toBe("z".repeat(1024))
    model.apply(E.events(E.followup(big), E.turnStart(1), E.claim("next-turn", 1), E.stepStart(1, 1), E.entered(big)))
    expect(model.getSnapshot().items.at(-1)).toEqual({
      kind: "user",
      key: "1",
      text: "z".repeat(8192) + more(4 * 1024 * 1024 - 8192)
    })
    for (let i = 0; i < 100; i++) {
      model.apply([{ type: "assistant/delta", turn: 1, step: 1, text: "w".repeat(40_000) } as AgentEvent])
    }
    expect(model.getSnapshot().streaming!.text.length).toBeLessThanOrEqual(32_768)
  })

  it("a resumed session with a long history draws its last whole turns (about 64 KiB), the earlier ones named", () => {
    const drafts: Array<EventDraft> = []
    for (let turn = 1; turn <= 600; turn++) {
      const m = E.msg(`u${turn}`, "y".repeat(1000))
      drafts.push(
        E.followup(m),
        E.turnStart(turn),
        E.claim("next-turn", 1),
        E.stepStart(turn, 1),
        E.entered(m),
        E.assistant(turn, 1, "ok"),
        E.stepEnd(turn, 1),
        E.turnEnd(turn)
      )
    }
    const model = new ChatModel("s1", E.events(...drafts), { nextStep: [], nextTurn: [] }, "idle", () => 0)
    const items = model.getSnapshot().items
    // 3 entries a turn (1,080 + 82 + 80 of budget): 52 whole turns fit in 64 KiB.
    expect(items.slice(0, 3)).toEqual([
      {
        kind: "notice",
        key: "0",
        text: "… 1644 earlier transcript entries (turns 1–548) not shown, see agent-loop transcript",
        tone: "ok"
      },
      { kind: "turn", key: "1", turn: 549 },
      { kind: "user", key: "2", text: "y".repeat(1000) }
    ])
    expect(items.length).toBe(1 + 52 * 4)
    expect(items.at(-1)).toEqual({ kind: "turn-end", key: String(52 * 4), turn: 600, reason: "completed", tone: "ok" })
    expect(model.turns).toBe(600)
  })
})

/** Polls `check` every 10 ms until it holds; fails after `ms` naming `what`. */
const until = async (what: string, check: () => boolean, ms: number): Promise<void> => {
  const start = Date.now()
  while (!check()) {
    if (Date.now() - start > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  note(`Chat: ${what}`, Date.now() - start)
}

describe("chat view: several keys in one chunk", () => {
  // On a busy machine keys typed in a row reach the chat in one read: a tab in it is a Tab, as
  // each line break in it is an Enter.
  it.live("each tab completes the @session: id before it; each line break sends the line", () =>
    Effect.promise(async () => {
      const submitted: Array<string> = []
      const stdout = Object.assign(new PassThrough(), { columns: 100, rows: 30 })
      const stdin = Object.assign(new PassThrough(), {
        isTTY: true,
        setRawMode: () => stdin,
        ref: () => stdin,
        unref: () => stdin
      })
      const controller = {
        submit: (text: string) => void submitted.push(text),
        cancel: () => {},
        answer: () => {},
        quit: () => {},
        sessionIds: () => ["earlier", "other", "others"]
      }
      const model = new ChatModel("s1", [], { nextStep: [], nextTurn: [] }, "idle", () => 1000)
      const ink = render(createElement(App, { model, controller }), {
        stdout: stdout as unknown as NodeJS.WriteStream,
        stdin: stdin as unknown as NodeJS.ReadStream,
        debug: true,
        exitOnCtrlC: false,
        patchConsole: false
      })
      stdin.write("what did @session:ea\tsay?\r")
      stdin.write("compare @session:o\t and\t@session:\t\r")
      await until("two lines submitted", () => submitted.length >= 2, IN_PROCESS_MS)
      ink.unmount()
      expect(submitted).toEqual([
        "what did @session:earlier say?",
        // Several matches: as far as they agree; a tab elsewhere is dropped.
        "compare @session:other and@session:"
      ])
    }))
})

describe("ChatModel: compactions (§17)", () => {
  it.scoped("while a compaction runs the status line says so; after it a marker with the summary's first line; no checkpoint message", () => {
    const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, { text: "SUMMARY\nsecond line" }, { text: "ok3" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      for (const c of ["a", "b", "c"]) {
        yield* agent.followup(c.repeat(200))
        yield* advance(10)
      }
      const events = agent.log.events()
      const at = events.findIndex((e) => e.type === "compaction/start")
      const compactionId = (events[at]!.data as any).compactionId
      // Turns 1 and 2 are history; turn 3 comes live, up to the compaction's start.
      const chat = new ChatModel("s1", events.slice(0, 17), { nextStep: [], nextTurn: [] }, "idle", () => 1000)
      chat.apply([{ type: "agent/status", status: "running" }, ...events.slice(17, at + 1)])
      expect(chat.getSnapshot().compacting).toEqual({ compactionId, reason: "pressure", tokens: 118, turn: 3 })
      const during = (yield* frameOf(chat)).split("\n")
      expect(during.filter((l) => l.includes("compact"))).toEqual([
        expect.stringMatching(/^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] compacting… \(118 tokens, pressure\) · turn 3 · \d+\.\ds$/)
      ])
      chat.apply([...events.slice(at + 1), { type: "agent/status", status: "idle" }])
      const done = chat.getSnapshot()
      expect(done.compacting).toBeUndefined()
      const marker = {
        kind: "compaction",
        headline: "[compaction: pressure, turn 3] compacted 118 → 83 tokens: seq 4..6 (59 tokens) summarized",
        detail: "SUMMARY",
        tone: "ok"
      }
      expect(done.items.slice(-5).map(({ key: _key, ...item }) => item)).toEqual([
        { kind: "turn", turn: 3 },
        marker,
        { kind: "user", text: "c".repeat(200) },
        { kind: "assistant", text: "ok3", interrupted: false },
        { kind: "turn-end", turn: 3, reason: "completed", tone: "ok" }
      ])
      const after = (yield* frameOf(chat)).split("\n")
      expect(after.filter((l) => l.includes("compact") || l.includes("SUMMARY") || l.includes("second line"))).toEqual([
        marker.headline,
        "  SUMMARY",
        "Enter: send · /inject TEXT · /compact · /sessions · /quit · Ctrl-C: quit"
      ])
      expect(after.at(-3)).toBe("● idle · session s1 · 0 tokens")
      // A chat resumed on that log shows the same marker from its history.
      const resumed = new ChatModel("s1", events, { nextStep: [], nextTurn: [] }, "idle", () => 1000)
      expect(resumed.getSnapshot().items.filter((i) => i.kind === "compaction").map(({ key: _key, ...item }) => item))
        .toEqual([marker])
    }).pipe(
      Effect.provide(agentLayer(model)),
      Effect.provide(Compaction.layer({ contextWindow: 200, reserve: 50, keepRecentTokens: 60 }))
    )
  })
})

describe("ChatModel: input a turn claimed and never entered", () => {
  it.scoped("a cancel during the compaction before its step: the claimed prompt is said, not silently gone", () => {
    const model = ScriptedModel.make([{ text: "ok1" }, { text: "ok2" }, { text: "SUMMARY", latencyMs: 100 }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      for (const c of ["a", "b"]) {
        yield* agent.followup(c.repeat(200))
        yield* advance(10)
      }
      yield* agent.followup("the third prompt")
      yield* advance(50)
      yield* agent.cancel()
      yield* advance(10)
      const chat = new ChatModel("s1", [], { nextStep: [], nextTurn: [] }, "idle", () => 1000)
      chat.apply(agent.log.events())
      const notices = chat.getSnapshot().items.filter((i) => i.kind === "notice").map((i) => (i as any).text)
      expect(notices).toEqual([
        "turn 3 ended aborted before its input entered; not sent to the model:\n  followup > the third prompt"
      ])
    }).pipe(
      Effect.provide(agentLayer(model)),
      Effect.provide(Compaction.layer({ contextWindow: 160, reserve: 40, keepRecentTokens: 10 }))
    )
  })
})

describe("ChatModel: the session's tokens and cost in the status line (§18)", () => {
  it.scoped("tokens from the history and live responses; with prices the cost, unknown for a model without one", () =>
    Effect.gen(function*() {
      const answered = (turn: number, text: string, usage: object, model?: string): EventDraft => {
        const draft = E.assistant(turn, 1, text)
        return { ...draft, data: { ...(draft.data as object), usage, ...(model ? { response: { model } } : {}) } } as EventDraft
      }
      const turn = (n: number, usage: object, model?: string) => [
        E.followup(E.msg(`u${n}`, `q${n}`)),
        E.turnStart(n),
        E.claim("next-turn", 1),
        E.stepStart(n, 1),
        E.entered(E.msg(`u${n}`, `q${n}`)),
        answered(n, `a${n}`, usage, model),
        E.stepEnd(n, 1),
        E.turnEnd(n)
      ]
      const all = E.events(
        ...turn(1, { inputTokens: 1000, cacheReadTokens: 800, outputTokens: 100 }),
        ...turn(2, { inputTokens: 2000, cacheReadTokens: 1800, outputTokens: 300 }),
        ...turn(3, { inputTokens: 10, outputTokens: 5 }, "other-model")
      )
      const prices = { test: { input: 2, cachedInput: 0.5, output: 8 } }
      const chat = new ChatModel("s1", all.slice(0, 8), { nextStep: [], nextTurn: [] }, "idle", () => 1000, prices)
      // (200·2 + 800·0.5 + 100·8) / 1e6
      expect([chat.getSnapshot().tokens, chat.getSnapshot().cost]).toEqual([1100, "$0.0016"])
      chat.apply(all.slice(8, 16))
      // + (200·2 + 1,800·0.5 + 300·8) / 1e6 = $0.0053
      expect([chat.getSnapshot().tokens, chat.getSnapshot().cost]).toEqual([3400, "$0.0053"])
      expect((yield* frameOf(chat)).split("\n").at(-3)).toBe("● idle · session s1 · 3,400 tokens · $0.0053")
      chat.apply(all.slice(16))
      expect([chat.getSnapshot().tokens, chat.getSnapshot().cost]).toEqual([3415, "cost unknown"])
      // Without prices: tokens only.
      const plain = new ChatModel("s1", all, { nextStep: [], nextTurn: [] }, "idle", () => 1000)
      expect([plain.getSnapshot().tokens, plain.getSnapshot().cost]).toEqual([3415, undefined])
    }))
})

/** The events of a turn whose first step calls `read_file` (arguments `args`) and `clock`, both asked (§26). */
const twoQuestions = (args: string): Array<EventDraft> => [
  E.followup(E.msg("m1", "go")),
  E.turnStart(1),
  E.claim("next-turn", 1),
  E.stepStart(1, 1),
  E.entered(E.msg("m1", "go")),
  E.assistant(1, 1, undefined, {
    toolCalls: [{ id: "c1", name: "read_file", arguments: args }, { id: "c2", name: "clock", arguments: "{}" }]
  }),
  E.toolCall(1, 1, "c1", "read_file", args),
  { type: "approval/asked", data: { id: "q1", toolName: "read_file", callId: "c1" } },
  E.toolCall(1, 1, "c2", "clock"),
  { type: "approval/asked", data: { id: "q2", toolName: "clock", callId: "c2" } }
]

describe("ChatModel: approval questions (§26)", () => {
  // 300 characters after a bidi override: the JSON text keeps it raw.
  const args = JSON.stringify({ path: "a\u202eb" + "x".repeat(300) })
  // The first 160 code points of the arguments, escaped, then an ellipsis.
  const argsShown = `{"path":"a\\u202eb${"x".repeat(160 - 12)}…`

  it.scoped("live: each question under its call, arguments on one line (escaped, cut); the first gets the keys; decided, it goes", () =>
    Effect.gen(function*() {
      let now = 1000
      const model = new ChatModel("s1", [], { nextStep: [], nextTurn: [] }, "idle", () => now)
      model.apply([{ type: "agent/status", status: "running" }, ...E.events(...twoQuestions(args))])
      now = 3500
      model.apply([{ type: "agent/status", status: "awaiting-approval" }])
      const asked = model.getSnapshot()
      expect(asked.tools).toEqual([])
      expect(asked.questions).toEqual([
        { id: "q1", callId: "c1", toolName: "read_file", args: argsShown, since: 1000, answering: false },
        { id: "q2", callId: "c2", toolName: "clock", args: "{}", since: 1000, answering: false }
      ])
      expect([asked.status, asked.runningSince]).toEqual(["awaiting-approval", 1000])
      const frame = (yield* frameOf(model)).split("\n")
      expect(frame.slice(frame.indexOf("· ? clock needs approval") + 1)).toEqual([
        // (Cut at the width of the fake terminal, 100 columns.)
        expect.stringMatching(/^\? → read_file\(\{"path":"a\\u202ebx+…$/),
        "    allow read_file? y: once · a: always · n: reject · r: reject always (the letter + Enter)",
        expect.stringMatching(/^\? → clock\(\{\}\) awaiting approval \d+\.\ds$/),
        "    next, once the question above is answered",
        expect.stringMatching(/^\? awaiting approval \(2 questions\) · turn 1 step 1 · \d+\.\ds · 0 tokens$/),
        "steer ›",
        "y, a, n or r + Enter: answer · other text: steer · Alt+Enter: queue a followup · Esc: cancel"
      ])
      // An answer on its way: the next question is the one the keys answer.
      model.answering("q1", true)
      expect(model.firstQuestion()?.id).toBe("q2")
      model.apply(
        E.events(...twoQuestions(args), {
          type: "approval/decided",
          data: { id: "q1", outcome: "allowed-once", by: { kind: "person" } }
        }).slice(-1)
      )
      const decided = model.getSnapshot()
      expect(decided.questions.map((q) => q.id)).toEqual(["q2"])
      // The allowed call runs, timed from its decision.
      expect(decided.tools.map((t) => [t.callId, t.since])).toEqual([["c1", 3500]])
      expect(decided.items.filter((i) => i.kind === "notice").map((i) => (i as any).text)).toEqual([
        "? read_file needs approval",
        "? clock needs approval",
        "? read_file: allowed once by a person"
      ])
      // An answer that failed: the question can be answered again.
      model.answering("q2", true)
      model.answering("q2", false)
      expect(model.firstQuestion()?.id).toBe("q2")
    }))

  it.scoped("at start (a resumed session that waits): the questions the log leaves open, their calls kept live", () =>
    Effect.gen(function*() {
      const decidedFirst = E.events(...twoQuestions(args), {
        type: "approval/decided",
        data: { id: "q1", outcome: "rejected", by: { kind: "person" }, reason: "no" }
      })
      const model = new ChatModel("s1", decidedFirst, { nextStep: [], nextTurn: [] }, "awaiting-approval", () => 1000)
      const snap = model.getSnapshot()
      expect(snap.questions).toEqual([{ id: "q2", callId: "c2", toolName: "clock", args: "{}", since: 1000, answering: false }])
      // The rejected call's result comes with the step: not shown as a call without a result.
      expect(snap.tools.map((t) => t.callId)).toEqual(["c1"])
      expect(snap.items.some((i) => i.kind === "tool")).toBe(false)
      expect([snap.turn, snap.step, snap.runningSince]).toEqual([1, 1, 1000])
    }))
})

describe("chat view: answering questions (§26)", () => {
  it.live("a line of one letter answers the first open question; n then asks for a reason; other lines are sent", () =>
    Effect.promise(async () => {
      const submitted: Array<string> = []
      const answers: Array<unknown> = []
      const stdout = Object.assign(new PassThrough(), { columns: 100, rows: 30 })
      const stdin = Object.assign(new PassThrough(), {
        isTTY: true,
        setRawMode: () => stdin,
        ref: () => stdin,
        unref: () => stdin
      })
      const model = new ChatModel(
        "s1",
        E.events(...twoQuestions("{}")),
        { nextStep: [], nextTurn: [] },
        "awaiting-approval",
        () => 1000
      )
      const controller = {
        submit: (text: string) => void submitted.push(text),
        cancel: () => {},
        // As the chat's controller does: the question is marked answered at once.
        answer: (id: string, decision: unknown) => {
          answers.push([id, decision])
          model.answering(id, true)
        },
        quit: () => {},
        sessionIds: () => []
      }
      const ink = render(createElement(App, { model, controller }), {
        stdout: stdout as unknown as NodeJS.WriteStream,
        stdin: stdin as unknown as NodeJS.ReadStream,
        debug: true,
        exitOnCtrlC: false,
        patchConsole: false
      })
      // In one chunk: a message that starts with a letter of the keys, then an answer to each
      // question (the second with a reason), then a lone letter with no question left.
      stdin.write("yes, and also this\ry\rn\rnot that file\ry\r")
      await until("the lines handled", () => submitted.length >= 2, IN_PROCESS_MS)
      ink.unmount()
      expect(submitted).toEqual(["yes, and also this", "y"])
      expect(answers).toEqual([
        ["q1", { kind: "allow", always: false }],
        ["q2", { kind: "reject", always: false, reason: "not that file" }]
      ])
    }))
})

describe("ChatModel when its agent stops", () => {
  it("agent/disposed (the log could not be written) clears the running tool and says how to go on", () => {
    const all = E.events(
      E.followup(E.msg("m1", "go")),
      E.turnStart(1),
      E.claim("next-turn", 1),
      E.stepStart(1, 1),
      E.entered(E.msg("m1", "go")),
      E.assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "wait", arguments: "{}" }] }),
      E.toolCall(1, 1, "c1", "wait")
    )
    const model = new ChatModel("s1", [], { nextStep: [], nextTurn: [] }, "idle", () => 1000)
    model.apply([{ type: "agent/status", status: "running" }, ...all])
    expect(model.getSnapshot().tools.map((t) => t.callId)).toEqual(["c1"])
    model.apply([{ type: "agent/status", status: "idle" }, { type: "agent/disposed" }])
    const stopped = model.getSnapshot()
    expect(stopped.tools).toEqual([])
    expect(stopped.status).toBe("idle")
    expect(stopped.items.at(-1)).toMatchObject({
      kind: "notice",
      tone: "error",
      text: "the session stopped: its log cannot be written (see above), nothing more is sent; /quit, then " +
        "agent-loop chat --session s1 repairs it and goes on"
    })
  })
})

describe("agent-loop chat without a terminal", () => {
  it.effect("exits 2 with a message when stdin or stdout is not a TTY (as under vitest)", () =>
    Effect.gen(function*() {
      const errors: Array<string> = []
      const base = yield* Console.consoleWith(Effect.succeed)
      const code = yield* main(["chat", "--store", tmpDir()]).pipe(
        Effect.withConsole({
          ...base,
          error: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void errors.push(args.join(" ")))
        }),
        Effect.provide(NodeContext.layer)
      )
      expect(code).toBe(2)
      expect(errors).toEqual([
        "chat needs an interactive terminal (stdin and stdout must be a TTY); use run --prompt TEXT otherwise"
      ])
    }))

  it.effect("--ask with a name that is no tool exits 2 naming it and the tools", () =>
    Effect.gen(function*() {
      const errors: Array<string> = []
      const base = yield* Console.consoleWith(Effect.succeed)
      const code = yield* main(["chat", "--store", tmpDir(), "--ask", "clock", "--ask", "bash"]).pipe(
        Effect.withConsole({
          ...base,
          error: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void errors.push(args.join(" ")))
        }),
        Effect.provide(NodeContext.layer)
      )
      expect(code).toBe(2)
      expect(errors).toEqual(["--ask bash: no tool of that name (the tools are wait, clock, read_file)"])
    }))
})

describe("chat: an answer that comes too late (§26)", () => {
  it.scoped("ApprovalNotOpen (decided first elsewhere) is a notice that gives the reason back, not a failure", () => {
    const model = ScriptedModel.make([{ toolCalls: [{ id: "c1", name: "clock", arguments: {} }] }, { text: "ok" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [{ ...OfflineTools.clock, approval: "always" }] })
      yield* agent.followup("what time is it")
      yield* advance(10)
      const [question] = yield* agent.pendingApprovals
      const chat = new ChatModel(agent.id, agent.log.events(), yield* agent.inbox, yield* agent.status, () => 0)
      expect(chat.getSnapshot().questions.map((q) => q.id)).toEqual([question!.id])
      // Decided by someone else (the timeout, another client) while this answer was on its way.
      yield* agent.approve(question!.id)
      chat.answering(question!.id, true)
      yield* answer(agent, chat, question!.id, "clock", { kind: "reject", always: false, reason: "too slow" })
      expect(chat.getSnapshot().items.at(-1)).toMatchObject({
        kind: "notice",
        tone: "warn",
        text: "your answer (reject) to clock came too late: the question was decided already (the transcript shows how)\n" +
          "not sent: too slow"
      })
      yield* advance(10)
      expect(yield* agent.status).toBe("idle")
    }).pipe(Effect.provide(agentLayer(model)))
  })
})

describe.skipIf(!hasTmux && process.env.CI === undefined)("agent-loop chat in a terminal (tmux)", () => {
  it("keyboard input: escape sequences Ink cannot name are dropped (modified function keys, pasted colours); editing keys kept", () => {
    expect(cleanInput("a \u001b[31mR\u001b[0m b", "")).toEqual({ text: "a R b", carry: "" })
    expect(cleanInput("\u001b[1;5P", "")).toEqual({ text: "", carry: "" }) // Ctrl+F1
    expect(cleanInput("x\u001b[D\u001b[3~\u001b[H\u001b[Z\u001bOP\u001b\r\u001b", "")).toEqual({
      text: "x\u001b[D\u001b[3~\u001b[H\u001b[Z\u001bOP\u001b\r\u001b",
      carry: ""
    })
    expect(cleanInput("ab\u001b[1;", "")).toEqual({ text: "ab", carry: "\u001b[1;" })
    expect(cleanInput("2Pcd", "\u001b[1;")).toEqual({ text: "cd", carry: "" })
  })

  it.scopedLive(
    "a prompt is answered; /sessions lists the store; /quit exits 0 and prints the log path",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        // Another session in the store, for /sessions to list.
        const earlier = new Date(2026, 0, 2, 3, 4).getTime()
        yield* Effect.scoped(
          Effect.flatMap(SessionStore.SessionStore, (s) => s.create({ id: "an-earlier-session", createdAt: earlier }))
        ).pipe(
          Effect.provide(SessionStore.layerJsonl({ directory: store }).pipe(Layer.provide(NodeContext.layer))),
          Effect.orDie
        )
        const started = Date.now()
        const { pane, sessionId } = yield* startChat(store)
        // Keys Ink cannot name (Ctrl+F1, a pasted colour code) once crashed the chat: now dropped.
        yield* pane.keys("C-F1")
        yield* pane.type("hello \u001b[31mthere")
        yield* pane.keys("Enter")
        const screen = yield* pane.waitFor("turn 1 ended: completed")
        expect(linesOf(screen, "── turn", "> ", "I received", "turn ")).toEqual([
          "── turn 1 ──",
          "> hello there",
          "I received 1 message in this step: 1 from you (\"hello there\").",
          "turn 1 ended: completed"
        ])
        yield* send(pane, "/sessions")
        const listed = yield* pane.waitFor("sessions in the store (2):")
        // Oldest first, each with its creation time (local) and first prompt; this session marked.
        const pad = (n: number) => String(n).padStart(2, "0")
        const local = (ms: number) => {
          const d = new Date(ms)
          return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`
        }
        const listing = listed.slice(listed.indexOf("· sessions in the store (2):")).split("\n").slice(0, 3)
        expect(listing.slice(0, 2)).toEqual([
          "· sessions in the store (2):",
          "  2026-01-02 03:04  an-earlier-session  (no prompt yet)"
        ])
        // Created between the start of the test and now (a minute may turn meanwhile).
        expect([local(started), local(Date.now())].map((when) => `  ${when}  ${sessionId}  "hello there"  (this session)`))
          .toContain(listing[2])
        const { code, logPath } = yield* quit(pane)
        expect(code).toBe(0)
        expect(logPath).toBe(Path.join(store, `${sessionId}.jsonl`))
        expect(facts(yield* readLog(logPath!))).toEqual(plainTurn(1, "hello there"))
      })
  )

  it.scopedLive(
    "--prices: the status line shows the session's tokens and cost once a response reports usage",
    () =>
      Effect.gen(function*() {
        // A recorded vLLM stream whose usage chunk reports 46 prompt + 14 completion tokens.
        const server = yield* replayServer([{ file: "vllm-stream-text-usage-chunk.sse" }])
        const dir = tmpDir()
        const store = Path.join(dir, "sessions")
        const prices = Path.join(dir, "prices.json")
        Fs.writeFileSync(prices, JSON.stringify({ "meta-llama/Llama-3.3-70B": { input: 1, output: 2 } }))
        const { pane } = yield* startChat(store, [
          "--provider",
          "openai-compat",
          "--base-url",
          server.baseUrl,
          "--model",
          "m",
          "--prices",
          prices
        ])
        expect(yield* pane.screen).toMatch(/● idle · session \S+ · 0 tokens · \$0\.00(?!\d)/)
        yield* send(pane, "count")
        yield* pane.waitFor("turn 1 ended: completed")
        // (46·1 + 14·2) / 1e6, priced under the model that answered (a prefix key).
        yield* pane.waitFor(/● idle · session \S+ · 60 tokens · \$0\.000074/)
        expect((yield* quit(pane)).code).toBe(0)
      })
  )

  it.scopedLive(
    "@session:ID in a message adds a quoted snapshot of that session, entered right after it and labelled",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        yield* Effect.scoped(Effect.gen(function*() {
          const agent = yield* Agent.make({ sessionId: "earlier" })
          yield* agent.followup("the secret word is kiwi")
          yield* agent.awaitIdle
        })).pipe(
          Effect.provide(Layer.mergeAll(
            SessionStore.layerJsonl({ directory: store }).pipe(Layer.provide(NodeContext.layer)),
            Model.layer(Offline.make()),
            IdGenerator.layer
          )),
          Effect.orDie
        )
        const { pane } = yield* startChat(store)
        // Tab completes the id after "@session:".
        yield* pane.type("what did @session:ea")
        yield* pane.keys("Tab")
        yield* pane.waitFor("› what did @session:earlier ")
        yield* send(pane, "say?")
        const screen = yield* pane.waitFor("turn 1 ended: completed")
        expect(linesOf(screen, "── turn", "> ", "[injected", "  > ", "I received", "turn ")).toEqual([
          "── turn 1 ──",
          "> what did @session:earlier say?",
          // (Ink wraps lines at the pane's width.)
          expect.stringMatching(
            /^\[injected by session-reference:earlier@8, sent to the model as a user message\] Quoted transcript of session earlier/
          ),
          "  > the secret word is kiwi",
          expect.stringMatching(
            /^I received 2 messages in this step: 1 from you \("what did @session:earlier say\?"\); context from session:earlier \("Quoted/
          ),
          "turn 1 ended: completed"
        ])
        const { code, logPath } = yield* quit(pane)
        expect(code).toBe(0)
        const events = yield* readLog(logPath!)
        expect(facts(events)).toEqual([
          "spliced next-turn @0 -0 +[\"what did @session:earlier say?\"]",
          "turn/start 1",
          "spliced next-turn @0 -1 +[]",
          "step/start 1.1",
          "user/message [user] what did @session:earlier say?",
          // Returned by the pre-step right after its message (§13), never queued.
          expect.stringMatching(
            /^user\/message \[session-reference:earlier@8\] Quoted transcript of session earlier through seq 8\. [^]*\n> the secret word is kiwi\n/
          ),
          "request/header",
          expect.stringMatching(/^assistant\/message 1\.1: I received 2 messages in this step/),
          "step/end 1.1",
          "turn/end 1: completed"
        ])
      })
  )

  it.scopedLive(
    "a --store under /proc exits 2 at once with one line naming it (it hung, deaf to SIGTERM)",
    () =>
      Effect.gen(function*() {
        const store = "/proc/agent-loop-nope/sessions"
        const pane = yield* Tmux.start({
          command: [process.execPath, bin, "chat", "--store", store],
          cwd: tmpDir(),
          unsetEnv: ["NODE_ENV"]
        })
        expect(yield* pane.waitForExit(20_000)).toBe(2)
        // One line, then tmux's note of the exit (and of the dead pane, below).
        expect((yield* pane.screen).split("\n").slice(0, 2)).toEqual([
          `--store ${store}: cannot create the directory: /proc does not take new directories (ENOENT)`,
          "[exited 2]"
        ])
      }),
    40_000
  )

  it.scopedLive("--session with an unknown id exits 2 with a message", () =>
    Effect.gen(function*() {
      const store = Path.join(tmpDir(), "sessions")
      const pane = yield* Tmux.start({
        command: [process.execPath, bin, "chat", "--store", store, "--session", "nope"],
        cwd: Path.dirname(store),
        unsetEnv: ["NODE_ENV"]
      })
      expect(yield* pane.waitForExit(CLI_RUN_MS)).toBe(2)
      expect(yield* pane.screen).toContain(`no session "nope" in ${store}\n[exited 2]`)
    }))

  it.scopedLive(
    "a broken Ink install (a dependency of ink missing): exit 2 with Node's message and the packages to reinstall",
    () =>
      Effect.gen(function*() {
        // ink and react resolve, so the chat gets past its first check and the terminal check;
        // loading Ink then fails on yoga-layout, which the hook makes unresolvable.
        const store = Path.join(tmpDir(), "sessions")
        const pane = yield* Tmux.start({
          command: [
            "HIDE_PACKAGES=yoga-layout",
            process.execPath,
            "--import",
            Path.resolve("test/utils/moduleHooks.mjs"),
            bin,
            "chat",
            "--store",
            store
          ],
          cwd: Path.dirname(store),
          unsetEnv: ["NODE_ENV"]
        })
        expect(yield* pane.waitForExit(CLI_RUN_MS)).toBe(2)
        const screen = yield* pane.screen
        expect(screen).toMatch(
          /^agent-loop chat cannot load ink and react: Cannot find package 'yoga-layout' imported from \S+; reinstall them: npm install ink@6\.8\.0 react@19\.3\.1\n\[exited 2\]$/m
        )
        expect(screen).not.toMatch(/^\s+at /m)
      })
  )

  it.scopedLive("Enter while a tool runs steers: the steer enters the same turn at its next step", () =>
    Effect.gen(function*() {
      const store = Path.join(tmpDir(), "sessions")
      const { pane } = yield* startChat(store)
      yield* send(pane, "wait 3 seconds and tell me the time")
      yield* pane.waitFor("→ wait({\"seconds\":3}) running")
      yield* send(pane, "also say hi")
      // Waiting in the queue while the tool runs.
      yield* pane.waitFor("  steer    > also say hi")
      const screen = yield* pane.waitFor("turn 1 ended: completed")
      expect(linesOf(screen, "── turn", "> ", "→ ", "  ← ", "I received", "Tool result", "turn ")).toEqual([
        "── turn 1 ──",
        "> wait 3 seconds and tell me the time",
        "I received 1 message in this step: 1 from you (\"wait 3 seconds and tell me the time\").",
        "→ wait({\"seconds\":3})",
        "  ← waited 3 seconds",
        "> also say hi",
        "Tool result (call_1_1_1): \"waited 3 seconds\"",
        "I received 1 message in this step: 1 from you (\"also say hi\").",
        "turn 1 ended: completed"
      ])
      const { code, logPath } = yield* quit(pane)
      expect(code).toBe(0)
      expect(facts(yield* readLog(logPath!))).toEqual([
        "spliced next-turn @0 -0 +[\"wait 3 seconds and tell me the time\"]",
        "turn/start 1",
        "spliced next-turn @0 -1 +[]",
        "step/start 1.1",
        "user/message [user] wait 3 seconds and tell me the time",
        "request/header",
        "assistant/message 1.1: I received 1 message in this step: 1 from you (\"wait 3 seconds and tell me the time\").",
        "tool/call 1.1 call_1_1_1 wait{\"seconds\":3}",
        "spliced next-step @0 -0 +[\"also say hi\"] wake",
        "tool/result 1.1 waited 3 seconds",
        "step/end 1.1",
        "spliced next-step @0 -1 +[]",
        "step/start 1.2",
        "user/message [user] also say hi",
        "assistant/message 1.2: Tool result (call_1_1_1): \"waited 3 seconds\"\nI received 1 message in this step: 1 from you (\"also say hi\").",
        "step/end 1.2",
        "turn/end 1: completed"
      ])
    }))

  it.scopedLive(
    "Alt+Enter while running queues a followup: it waits in the queue and runs as the next turn",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const { pane } = yield* startChat(store)
        yield* send(pane, "wait 2 seconds")
        yield* pane.waitFor("→ wait({\"seconds\":2}) running")
        yield* send(pane, "second prompt", "M-Enter")
        yield* pane.waitFor("  followup > second prompt")
        const screen = yield* pane.waitFor("turn 2 ended: completed")
        expect(linesOf(screen, "── turn", "> ", "→ ", "  ← ", "turn ")).toEqual([
          "── turn 1 ──",
          "> wait 2 seconds",
          "→ wait({\"seconds\":2})",
          "  ← waited 2 seconds",
          "turn 1 ended: completed",
          "── turn 2 ──",
          "> second prompt",
          "turn 2 ended: completed"
        ])
        const { code, logPath } = yield* quit(pane)
        expect(code).toBe(0)
        expect(facts(yield* readLog(logPath!))).toEqual([
          "spliced next-turn @0 -0 +[\"wait 2 seconds\"]",
          "turn/start 1",
          "spliced next-turn @0 -1 +[]",
          "step/start 1.1",
          "user/message [user] wait 2 seconds",
          "request/header",
          "assistant/message 1.1: I received 1 message in this step: 1 from you (\"wait 2 seconds\").",
          "tool/call 1.1 call_1_1_1 wait{\"seconds\":2}",
          // Queued for the next turn (no `wake`: next-turn items always wake), not steered.
          "spliced next-turn @0 -0 +[\"second prompt\"]",
          "tool/result 1.1 waited 2 seconds",
          "step/end 1.1",
          "step/start 1.2",
          "assistant/message 1.2: Tool result (call_1_1_1): \"waited 2 seconds\"",
          "step/end 1.2",
          "turn/end 1: completed",
          "turn/start 2",
          "spliced next-turn @0 -1 +[]",
          "step/start 2.1",
          "user/message [user] second prompt",
          "assistant/message 2.1: I received 1 message in this step: 1 from you (\"second prompt\").",
          "step/end 2.1",
          "turn/end 2: completed"
        ])
      })
  )

  it.scopedLive(
    "/compact: idle, a bracket between turns; while running, at the turn's next step; each shown as a marker with its summary and reported",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        // No --context-window: no policy, `/compact` summarizes with `Compaction.summarize({})`.
        const { pane } = yield* startChat(store, [], 300)
        yield* send(pane, "apples are red")
        yield* pane.waitFor("turn 1 ended: completed")
        yield* send(pane, "pears are green")
        yield* pane.waitFor("turn 2 ended: completed")
        yield* send(pane, "/compact keep the fruit names")
        yield* pane.waitFor("· /compact: compacted ")
        yield* send(pane, "wait 3 seconds")
        yield* pane.waitFor("→ wait({\"seconds\":3}) running")
        yield* send(pane, "/compact")
        yield* pane.waitFor("· /compact: busy; it compacts at the next step boundary or after what runs now")
        yield* pane.waitFor("turn 3 ended: completed")
        yield* pane.waitFor((s) => s.split("· /compact: compacted ").length === 3)
        expect(linesOf(yield* pane.screen, "── turn", "> ", "[compaction", "  Earlier", "· /compact", "turn ")).toEqual([
          "── turn 1 ──",
          "> apples are red",
          "turn 1 ended: completed",
          "── turn 2 ──",
          "> pears are green",
          "turn 2 ended: completed",
          // (The offline model's summary is longer than this short exchange.)
          "[compaction: manual, between turns] compacted 274 → 285 tokens: seq 4..6 (29 tokens) summarized",
          "  Earlier: 1 prompt from you (\"apples are red\"), 0 tool results, 0 context messages.",
          "· /compact: compacted 274 → 285 tokens",
          "── turn 3 ──",
          "> wait 3 seconds",
          "· /compact: busy; it compacts at the next step boundary or after what runs now",
          // Surface order: the first checkpoint (seq 19), then turn 2 (seqs 13 and 14).
          "[compaction: manual, turn 3] compacted 328 → 319 tokens: seq 19..14 (69 tokens) summarized",
          "  Earlier: 1 prompt from you (\"apples are red\"), 0 tool results, 0 context messages. Then: 1 prompt from you (\"pears are green\"), 0 tool results, 0 context messages.",
          "· /compact: compacted 328 → 319 tokens",
          "turn 3 ended: completed"
        ])
        const { code, logPath } = yield* quit(pane)
        expect(code).toBe(0)
        const first = "Earlier: 1 prompt from you (\"apples are red\"), 0 tool results, 0 context messages."
        const second = `${first} Then: 1 prompt from you ("pears are green"), 0 tool results, 0 context messages.`
        expect(facts(yield* readLog(logPath!))).toEqual([
          ...plainTurn(1, "apples are red"),
          ...plainTurn(2, "pears are green"),
          // Idle: a bracket between turns (no turn opened).
          "compaction/start manual turn null 274",
          "compaction/summary [4,6] 29",
          `checkpoint 4..6 ${Compaction.CHECKPOINT_PREFIX}${first}`,
          "compaction/end compacted 285",
          "spliced next-turn @0 -0 +[\"wait 3 seconds\"]",
          "turn/start 3",
          "spliced next-turn @0 -1 +[]",
          "step/start 3.1",
          "user/message [user] wait 3 seconds",
          "assistant/message 3.1: I received 1 message in this step: 1 from you (\"wait 3 seconds\").",
          "tool/call 3.1 call_3_1_1 wait{\"seconds\":3}",
          "tool/result 3.1 waited 3 seconds",
          "step/end 3.1",
          // Running: at the turn's next pre-step boundary, inside the turn.
          "compaction/start manual turn 3 328",
          "compaction/summary [19,13,14] 69",
          `checkpoint 19..14 ${Compaction.CHECKPOINT_PREFIX}${second}`,
          "compaction/end compacted 319",
          "step/start 3.2",
          "assistant/message 3.2: Tool result (call_3_1_1): \"waited 3 seconds\"",
          "step/end 3.2",
          "turn/end 3: completed"
        ])
      })
  )

  it.scopedLive(
    "--context-window: the prompt that would pass the window less its reserve compacts first; the marker shows it",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const { pane } = yield* startChat(store, ["--context-window", "520"], 300)
        const prompts = ["apples", "pears", "plums"].map((f, i) =>
          `prompt ${i + 1} is about ${f}: ${`${f} and ${f}, `.repeat(12)}`
        )
        for (const [i, prompt] of prompts.entries()) {
          yield* send(pane, prompt)
          yield* pane.waitFor(`turn ${i + 1} ended: completed`)
        }
        expect(linesOf(yield* pane.screen, "── turn", "[compaction", "  Earlier", "turn ")).toEqual([
          "── turn 1 ──",
          "turn 1 ended: completed",
          "── turn 2 ──",
          "turn 2 ended: completed",
          "── turn 3 ──",
          // (The chat trims what was typed: each prompt is one character shorter than the runner's.)
          "[compaction: pressure, turn 3] compacted 409 → 360 tokens: seq 4..6 (100 tokens) summarized",
          "  Earlier: 1 prompt from you (\"prompt 1 is about apples: apples and apples, apples and app…\"), 0 tool results, 0 context messages.",
          "turn 3 ended: completed"
        ])
        const { code, logPath } = yield* quit(pane)
        expect(code).toBe(0)
        const third = prompts[2]!.trim()
        expect(facts(yield* readLog(logPath!)).slice(16)).toEqual([
          "turn/end 2: completed",
          `spliced next-turn @0 -0 +${JSON.stringify([third])}`,
          "turn/start 3",
          "spliced next-turn @0 -1 +[]",
          // After the claim, before the step it makes room for.
          "compaction/start pressure turn 3 409",
          "compaction/summary [4,6] 100",
          `checkpoint 4..6 ${Compaction.CHECKPOINT_PREFIX}Earlier: 1 prompt from you ("prompt 1 is about apples: apples and apples, apples and app…"), 0 tool results, 0 context messages.`,
          "compaction/end compacted 360",
          "step/start 3.1",
          `user/message [user] ${third}`,
          "assistant/message 3.1: I received 1 message in this step: 1 from you (\"prompt 3 is about plums: plums and plums, plums and plums, …\").",
          "step/end 3.1",
          "turn/end 3: completed"
        ])
      })
  )

  it.scopedLive("bad compaction flags exit 2 with one line naming the flag", () =>
    Effect.gen(function*() {
      const store = Path.join(tmpDir(), "sessions")
      const pane = yield* Tmux.start({
        command: [process.execPath, bin, "chat", "--store", store, "--context-window", "1000", "--compaction-reserve", "2000"],
        cwd: Path.dirname(store),
        unsetEnv: ["NODE_ENV"]
      })
      expect(yield* pane.waitForExit(CLI_RUN_MS)).toBe(2)
      expect(yield* pane.screen).toContain(
        "--compaction-reserve: 2000 must be less than --context-window 1000 (it is the part of the window kept free)\n[exited 2]"
      )
      expect(Fs.existsSync(store)).toBe(false)
    }))

  it.scopedLive(
    "/inject shows the context pending, then entered and labelled with its source, apart from what was typed",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const { pane } = yield* startChat(store)
        yield* send(pane, "/inject the build is green")
        // Idle injection starts nothing: it waits in the queue as context.
        yield* pane.waitFor("  context  [plugin:chat] the build is green")
        expect(yield* pane.screen).not.toContain("── turn")
        yield* send(pane, "what do you know?")
        const screen = yield* pane.waitFor("turn 1 ended: completed")
        expect(linesOf(screen, "── turn", "> ", "[injected", "I received", "turn ")).toEqual([
          "── turn 1 ──",
          "[injected by plugin:chat, sent to the model as a user message] the build is green",
          "> what do you know?",
          "I received 2 messages in this step: 1 from you (\"what do you know?\"); context from plugin:chat (\"the build is green\").",
          "turn 1 ended: completed"
        ])
        const { code, logPath } = yield* quit(pane)
        expect(code).toBe(0)
        expect(facts(yield* readLog(logPath!))).toEqual([
          "spliced next-step @0 -0 +[\"the build is green\"]",
          "spliced next-turn @0 -0 +[\"what do you know?\"]",
          "turn/start 1",
          "spliced next-step @0 -1 +[]",
          "spliced next-turn @0 -1 +[]",
          "step/start 1.1",
          "user/message [plugin:chat] the build is green",
          "user/message [user] what do you know?",
          "request/header",
          "assistant/message 1.1: I received 2 messages in this step: 1 from you (\"what do you know?\"); context from plugin:chat (\"the build is green\").",
          "step/end 1.1",
          "turn/end 1: completed"
        ])
      })
  )

  it.scopedLive(
    "nothing typed is lost silently: refused messages and unknown commands are given back; // sends a leading /",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const { pane, sessionId } = yield* startChat(store)
        yield* send(pane, "see @session:../x please")
        yield* pane.waitFor("not sent: see @session:../x please")
        yield* send(pane, "/frobnicate the thing")
        yield* pane.waitFor(
          "· unknown command /frobnicate (/help lists them; start a message with // to send a leading /)\n  not sent: /frobnicate the thing"
        )
        yield* send(pane, "//usr/bin/env is a path")
        yield* pane.waitFor("turn 1 ended: completed")
        const { code } = yield* quit(pane)
        expect(code).toBe(0)
        expect(facts(yield* readLog(Path.join(store, `${sessionId}.jsonl`)))).toEqual(plainTurn(1, "/usr/bin/env is a path"))
      })
  )

  it.scopedLive(
    "SIGTERM from outside while a tool runs: the agent is disposed, the log's path printed, exit 130",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const { pane, sessionId } = yield* startChat(store)
        yield* send(pane, "wait 30 seconds")
        yield* pane.waitFor("→ wait({\"seconds\":30}) running")
        const logPath = Path.join(store, `${sessionId}.jsonl`)
        // The writer's lock names the chat's process.
        const { pid } = JSON.parse(Fs.readFileSync(`${logPath}.lock`, "utf8")) as { pid: number }
        process.kill(pid, "SIGTERM")
        expect(yield* pane.waitForExit()).toBe(130)
        expect(yield* pane.screen).toContain(`\nsession log: ${logPath}\n[exited 130]`)
        expect(Fs.existsSync(`${logPath}.lock`)).toBe(false)
        expect(facts(yield* readLog(logPath)).slice(-3)).toEqual([
          "tool/result 1.1 The turn was canceled while this tool call was running. [ABORTED]",
          "step/end 1.1",
          "turn/end 1: aborted (disposed)"
        ])
      })
  )

  it.scopedLive(
    "Esc cancels the running turn (aborted, the queue cleared); Ctrl-C exits 130 and prints the log path; Alt+Enter refuses a mention",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const { pane, sessionId } = yield* startChat(store)
        yield* send(pane, "wait 30 seconds")
        yield* pane.waitFor("→ wait({\"seconds\":30}) running")
        // A queued message may not mention a session (its snapshot must enter with it): refused, nothing logged.
        yield* send(pane, "compare with @session:other", "M-Enter")
        yield* pane.waitFor(
          "· not queued: a message that mentions a session goes with Enter (its snapshot enters with it):\n  compare with @session:other"
        )
        yield* send(pane, "later, please", "M-Enter")
        yield* pane.waitFor("  followup > later, please")
        yield* pane.keys("Escape")
        const screen = yield* pane.waitFor("turn 1 ended: aborted (user)")
        // What the cancel removed from the queue is said on screen.
        expect(screen).toContain("· canceled (user), not sent to the model:\n    followup > later, please")
        expect(linesOf(screen, "── turn", "> ", "→ ", "  ← ", "turn ", "pending")).toEqual([
          "── turn 1 ──",
          "> wait 30 seconds",
          "→ wait({\"seconds\":30})",
          "  ← error: The turn was canceled while this tool call was running.",
          "turn 1 ended: aborted (user)"
        ])
        yield* pane.waitFor(IDLE)
        yield* pane.keys("C-c")
        const code = yield* pane.waitForExit()
        expect(code).toBe(130)
        const logPath = Path.join(store, `${sessionId}.jsonl`)
        expect(yield* pane.screen).toContain(`\nsession log: ${logPath}\n[exited 130]`)
        expect(facts(yield* readLog(logPath))).toEqual([
          "spliced next-turn @0 -0 +[\"wait 30 seconds\"]",
          "turn/start 1",
          "spliced next-turn @0 -1 +[]",
          "step/start 1.1",
          "user/message [user] wait 30 seconds",
          "request/header",
          "assistant/message 1.1: I received 1 message in this step: 1 from you (\"wait 30 seconds\").",
          "tool/call 1.1 call_1_1_1 wait{\"seconds\":30}",
          "spliced next-turn @0 -0 +[\"later, please\"]",
          // Esc = cancel (§9): the queue is cleared durably first, then the turn aborts.
          "spliced next-turn @0 -1 +[] canceled (user)",
          "tool/result 1.1 The turn was canceled while this tool call was running. [ABORTED]",
          "step/end 1.1",
          "turn/end 1: aborted (user)"
        ])
      })
  )

  it.scopedLive(
    "a long tool result shows its first 12 lines, then how many more lines it has",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        Fs.writeFileSync(
          Path.join(Path.dirname(store), "notes.txt"),
          Array.from({ length: 1_500 }, (_, i) => `note ${i + 1}`).join("\n")
        )
        const { pane } = yield* startChat(store)
        yield* send(pane, "read file notes.txt")
        const screen = yield* pane.waitFor("turn 1 ended: completed")
        expect(linesOf(screen, "  ← ", "    ")).toEqual([
          "  ← note 1",
          ...Array.from({ length: 11 }, (_, i) => `    note ${i + 2}`),
          `    … 1,488 more lines not shown (${
            Buffer.byteLength(Array.from({ length: 1_488 }, (_, i) => `note ${i + 13}`).join("\n"))
              .toLocaleString("en-US")
          } bytes, see agent-loop transcript)`
        ])
        expect((yield* quit(pane)).code).toBe(0)
      })
  )

  it.scopedLive(
    "resizing the terminal while the answer streams leaves each line on screen once (no fragments of earlier frames)",
    () =>
      Effect.gen(function*() {
        // 24 lines of 96 characters, one a chunk every 120 ms: one row each at 120 columns, two at 60.
        const lines = Array.from(
          { length: 24 },
          (_, i) => `line ${String(i + 1).padStart(2, "0")}: ${"lorem ipsum dolor sit amet ".repeat(4).slice(0, 86)}`
        )
        const chunk = (delta: object) => `data: ${JSON.stringify({ choices: [{ index: 0, ...delta }] })}\n\n`
        const body = lines.map((line, i) => chunk({ delta: { content: (i === 0 ? "" : "\n") + line } })).join("") +
          chunk({ delta: {}, finish_reason: "stop" }) + "data: [DONE]\n\n"
        const starts = [0]
        for (let i = 0, at = 0; i < lines.length; i++) starts.push(at += Buffer.byteLength(body.split("\n\n")[i]! + "\n\n"))
        const server = yield* replayServer({ body, splitAt: starts.slice(1), delayMs: 120 })
        const store = Path.join(tmpDir(), "sessions")
        const { pane } = yield* startChat(store, [
          "--provider",
          "openai-compat",
          "--base-url",
          server.baseUrl,
          "--model",
          "m"
        ])
        yield* send(pane, "stream")
        yield* pane.waitFor("line 04:")
        yield* pane.resize(60, 40)
        yield* pane.waitFor("line 09:")
        yield* pane.resize(90, 30)
        yield* pane.waitFor("line 14:")
        yield* pane.resize(50, 40)
        yield* pane.waitFor("line 19:")
        yield* pane.resize(120, 40)
        const screen = yield* pane.waitFor("turn 1 ended: completed")
        // Every line once, whole (wrapped rows joined), in order; no part of one elsewhere.
        for (const line of lines) {
          const label = line.slice(0, 8)
          expect([label, screen.split(label).length - 1]).toEqual([label, 1])
          expect(screen).toContain(line)
        }
        expect(screen.split("turn 1 ended: completed").length - 1).toBe(1)
        expect((yield* quit(pane)).code).toBe(0)
      })
  )

  it.scopedLive(
    "Ctrl-C while a turn runs cancels the turn (the chat stays); Ctrl-C twice in a turn quits 130",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const { pane, sessionId } = yield* startChat(store)
        yield* send(pane, "wait 30 seconds")
        yield* pane.waitFor("→ wait({\"seconds\":30}) running")
        yield* pane.waitFor("Esc or Ctrl-C: cancel")
        yield* pane.keys("C-c")
        yield* pane.waitFor("turn 1 ended: aborted (user)")
        // Still there, idle, and it takes the next prompt.
        yield* pane.waitFor(IDLE)
        yield* send(pane, "wait 30 seconds")
        yield* pane.waitFor("turn 2 ──")
        yield* pane.waitFor("→ wait({\"seconds\":30}) running")
        yield* pane.keys("C-c")
        yield* pane.keys("C-c")
        expect(yield* pane.waitForExit()).toBe(130)
        const logPath = Path.join(store, `${sessionId}.jsonl`)
        expect(yield* pane.screen).toContain(`\nsession log: ${logPath}\n[exited 130]`)
        const events = facts(yield* readLog(logPath))
        expect(events.slice(0, 12)).toEqual([
          "spliced next-turn @0 -0 +[\"wait 30 seconds\"]",
          "turn/start 1",
          "spliced next-turn @0 -1 +[]",
          "step/start 1.1",
          "user/message [user] wait 30 seconds",
          "request/header",
          "assistant/message 1.1: I received 1 message in this step: 1 from you (\"wait 30 seconds\").",
          "tool/call 1.1 call_1_1_1 wait{\"seconds\":30}",
          "tool/result 1.1 The turn was canceled while this tool call was running. [ABORTED]",
          "step/end 1.1",
          "turn/end 1: aborted (user)",
          "spliced next-turn @0 -0 +[\"wait 30 seconds\"]"
        ])
        // The second turn ends canceled by the first Ctrl-C, or by the quit (whichever came first).
        expect(events.at(-1)).toMatch(/^turn\/end 2: aborted \((user|disposed)\)$/)
      })
  )

  it.scopedLive(
    "--session ID resumes a session: its history from the log (control characters escaped), then turn numbering goes on",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        // A session written by the library, whose model answered with terminal escapes.
        const hostile = "\u001b[2J\u001b[31mred\u001b[0m and a bell\u0007"
        const sessionId = yield* Effect.scoped(Effect.gen(function*() {
          const agent = yield* Agent.make({})
          yield* agent.followup("an earlier question")
          yield* agent.awaitIdle
          return agent.id
        })).pipe(
          Effect.provide(Layer.mergeAll(
            SessionStore.layerJsonl({ directory: store }).pipe(Layer.provide(NodeContext.layer)),
            Model.layer(ScriptedModel.make([{ text: hostile }])),
            IdGenerator.layer
          )),
          Effect.orDie
        )
        const { pane, sessionId: shown } = yield* startChat(store, ["--session", sessionId])
        expect(shown).toBe(sessionId)
        const history = yield* pane.screen
        expect(linesOf(history, "── turn", "> ", "\\x1b", "turn ", "· ", "  log: ")).toEqual([
          "── turn 1 ──",
          "> an earlier question",
          "\\x1b[2J\\x1b[31mred\\x1b[0m and a bell\\x07",
          "turn 1 ended: completed",
          `· resumed session ${sessionId}: 1 turn so far`,
          `  log: ${Path.join(store, `${sessionId}.jsonl`)}`
        ])
        yield* send(pane, "and now?")
        yield* pane.waitFor("turn 2 ended: completed")
        const { code, logPath } = yield* quit(pane)
        expect(code).toBe(0)
        expect(facts(yield* readLog(logPath!))).toEqual([
          ...plainTurn(1, "an earlier question").map((f) =>
            f.startsWith("assistant/message") ? `assistant/message 1.1: ${hostile}` : f
          ),
          "session/end-seed",
          // Another provider than the log's last header: a new header (§3.2).
          ...plainTurn(2, "and now?").flatMap((f) => f === "user/message [user] and now?" ? [f, "request/header"] : [f])
        ])
      })
  )

  /** The sizes of the big session: a 4 MiB user message (one line) and a 4 MiB answer (64-byte lines). */
  const BIG_PROMPT = "x".repeat(4 * 1024 * 1024)
  const BIG_ANSWER = ("0123456789abcdef".repeat(4) + "\n").repeat(65_536)
  let bigLog: string | undefined
  /**
   * A fresh store holding a copy of one session written by the library (on the scripted model)
   * whose log has a 4 MiB message and a 4 MiB answer. The first test to use it writes it (65,536
   * text deltas: most of its time), hence `CHAT_BIG_TEST_MS`.
   */
  const bigSession = Effect.gen(function*() {
    if (bigLog === undefined) {
      const started = Date.now()
      const dir = Path.join(tmpDir(), "big")
      const id = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make({ sessionId: "big" })
        yield* agent.followup(BIG_PROMPT)
        yield* agent.awaitIdle
        return agent.id
      })).pipe(
        Effect.provide(Layer.mergeAll(
          SessionStore.layerJsonl({ directory: dir }).pipe(Layer.provide(NodeContext.layer)),
          Model.layer(ScriptedModel.make([{ text: BIG_ANSWER }])),
          IdGenerator.layer
        )),
        Effect.orDie
      )
      bigLog = Path.join(dir, `${id}.jsonl`)
      expect(Fs.statSync(bigLog).size).toBeGreaterThan(8 * 1024 * 1024)
      note("Chat: the big session written", Date.now() - started)
    }
    const store = Path.join(tmpDir(), "sessions")
    Fs.mkdirSync(store)
    Fs.copyFileSync(bigLog, Path.join(store, "big.jsonl"))
    return { store, logPath: Path.join(store, "big.jsonl") }
  })

  /** Polls until the lock file `file` is gone (dies after `TMUX_WAIT_MS`, as a wait for the program's exit). */
  const waitGone = (file: string) =>
    Effect.promise(() => until("the session's lock file gone", () => !Fs.existsSync(file), TMUX_WAIT_MS))

  /** Polls until the process `pid` has exited (gone, or a zombie nobody reaped yet); dies after `TMUX_WAIT_MS`. */
  const waitExited = (pid: number) =>
    Effect.promise(() =>
      until("the chat's process to exit", () => {
        try {
          return /^\d+ \(.*\) Z/.test(Fs.readFileSync(`/proc/${pid}/stat`, "utf8"))
        } catch {
          return true
        }
      }, TMUX_WAIT_MS)
    )

  it.scopedLive(
    "--session on a log with a 4 MiB message and a 4 MiB answer becomes ready: each is shown cut, with a line saying how much more there is",
    () =>
      Effect.gen(function*() {
        const { logPath, store } = yield* bigSession
        const { pane } = yield* startChat(store, ["--session", "big"])
        const screen = yield* pane.screen
        // The first 8 KiB of the prompt (one line, wrapped by Ink), then what was left out.
        expect(screen).toContain(`> ${"x".repeat(100)}`)
        expect(screen).toContain(
          `\n> … the rest of the line not shown (${
            (4 * 1024 * 1024 - 8192).toLocaleString("en-US")
          } bytes, see agent-loop transcript)\n`
        )
        // Counted in the prompt's lines only (a temporary directory's name may hold an "x" too).
        const promptLines = screen.split("\n").filter((line) => /^(> |\s+)?x+$/.test(line))
        expect(promptLines.join("").split("x").length - 1).toBe(8192)
        // The first 100 lines of the answer.
        const answerLines = screen.split("\n").filter((line) => line === "0123456789abcdef".repeat(4))
        expect(answerLines.length).toBe(100)
        expect(screen).toContain(
          `\n… 65,436 more lines not shown (${
            (BIG_ANSWER.length - 100 * 65).toLocaleString("en-US")
          } bytes, see agent-loop transcript)\n`
        )
        expect(screen).toContain("turn 1 ended: completed")
        const { code } = yield* quit(pane)
        expect(code).toBe(0)
        expect(Fs.existsSync(`${logPath}.lock`)).toBe(false)
      }),
    CHAT_BIG_TEST_MS
  )

  it.scopedLive(
    "SIGTERM while a big session loads: the chat exits 130 and releases the writer's lock",
    () =>
      Effect.gen(function*() {
        const { logPath, store } = yield* bigSession
        const pane = yield* Tmux.start({
          command: [process.execPath, bin, "chat", "--store", store, "--session", "big"],
          cwd: Path.dirname(store),
          unsetEnv: ["NODE_ENV"]
        })
        const pid = yield* pane.pid()
        // The lock is taken when the session is opened, before its history is drawn: part of the
        // chat's start, bounded as its first screen is.
        yield* Effect.promise(() => until("the session's lock", () => Fs.existsSync(`${logPath}.lock`), CHAT_READY_MS))
        process.kill(pid, "SIGTERM")
        expect(yield* pane.waitForExit()).toBe(130)
        expect(Fs.existsSync(`${logPath}.lock`)).toBe(false)
        yield* readLog(logPath)
      }),
    CHAT_BIG_TEST_MS
  )

  it.scopedLive(
    "the terminal gone (its tmux killed) while a tool runs: the chat disposes the agent, releases the lock and exits",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const { pane, sessionId } = yield* startChat(store)
        yield* send(pane, "wait 30 seconds")
        yield* pane.waitFor("→ wait({\"seconds\":30}) running")
        const logPath = Path.join(store, `${sessionId}.jsonl`)
        const pid = yield* pane.pid()
        expect(JSON.parse(Fs.readFileSync(`${logPath}.lock`, "utf8")).pid).toBe(pid)
        yield* pane.kill
        yield* waitGone(`${logPath}.lock`)
        yield* waitExited(pid)
        expect(facts(yield* readLog(logPath)).slice(-3)).toEqual([
          "tool/result 1.1 The turn was canceled while this tool call was running. [ABORTED]",
          "step/end 1.1",
          "turn/end 1: aborted (disposed)"
        ])
      })
  )

  it.scopedLive(
    "the terminal gone without a SIGHUP (not the chat's controlling terminal): its closed stdin ends the chat; Node does not abort at exit",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const errFile = Path.join(tmpDir(), "stderr.txt")
        // In a session of its own the pane is not the chat's controlling terminal: the kernel sends
        // it no SIGHUP when the pty closes (Node resets an ignored SIGHUP, so nohup is no test).
        const pane = yield* Tmux.start({
          command: ["sh", "-c", `exec setsid "$@" 2>${errFile}`, "sh", process.execPath, bin, "chat", "--store", store],
          cwd: Path.dirname(store),
          unsetEnv: ["NODE_ENV"]
        })
        const sessionId = IDLE.exec(yield* pane.waitFor(IDLE, CHAT_READY_MS))![1]!
        const logPath = Path.join(store, `${sessionId}.jsonl`)
        const pid = yield* pane.pid()
        // /proc/PID/stat: its session is its own pid, and it has no controlling terminal (tty_nr 0).
        const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "").split(" ")
        expect([stat[3], stat[4]]).toEqual([String(pid), "0"])
        yield* pane.kill
        yield* waitGone(`${logPath}.lock`)
        yield* waitExited(pid)
        // Node 20 asserted in ResetStdio (EIO from the closed pty) and aborted: exit 134, a core dump.
        expect(Fs.readFileSync(errFile, "utf8")).toBe("")
        yield* readLog(logPath)
      })
  )

  /** The status line while `n` questions are open in turn 1 at `step`. */
  const awaiting = (n: number, step: number) =>
    `? awaiting approval (${n} question${n === 1 ? "" : "s"}) · turn 1 step ${step} · `

  /** The answer keys under the question they answer. */
  const keysFor = (tool: string) => `    allow ${tool}? y: once · a: always · n: reject · r: reject always (the letter + Enter)`

  it.scopedLive(
    "--ask clock: the question under its call with the keys, the status line awaiting approval; y allows once: the tool runs, the answer appears",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const { pane } = yield* startChat(store, ["--ask", "clock"])
        yield* send(pane, "what time is it")
        const asked = yield* pane.waitFor(awaiting(1, 1))
        expect(linesOf(asked, "· ?", "? ", "    allow", "steer ›", "y, a")).toEqual([
          "· ? clock needs approval",
          expect.stringMatching(/^\? → clock\(\{\}\) awaiting approval \d+\.\ds$/),
          keysFor("clock"),
          expect.stringMatching(/^\? awaiting approval \(1 question\) · turn 1 step 1 · \d+\.\ds · 0 tokens$/),
          // (The cursor: an inverse space.)
          "steer ›  ",
          "y, a, n or r + Enter: answer · other text: steer · Alt+Enter: queue a followup · Esc: cancel"
        ])
        yield* send(pane, "y")
        const screen = yield* pane.waitFor("turn 1 ended: completed")
        expect(linesOf(screen, "── turn", "> ", "· ?", "→ ", "  ← ", "Tool", "turn ")).toEqual([
          "── turn 1 ──",
          "> what time is it",
          "· ? clock needs approval",
          "· ? clock: allowed once by a person",
          "→ clock({})",
          expect.stringMatching(/^ {2}← \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
          expect.stringMatching(/^Tool result \(call_1_1_1\): "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$/),
          "turn 1 ended: completed"
        ])
        yield* pane.waitFor(IDLE)
        const { code, logPath } = yield* quit(pane)
        expect(code).toBe(0)
        expect(facts(yield* readLog(logPath!))).toEqual([
          "spliced next-turn @0 -0 +[\"what time is it\"]",
          "turn/start 1",
          "spliced next-turn @0 -1 +[]",
          "step/start 1.1",
          "user/message [user] what time is it",
          "request/header",
          "assistant/message 1.1: I received 1 message in this step: 1 from you (\"what time is it\").",
          "tool/call 1.1 call_1_1_1 clock{}",
          "approval/asked clock call_1_1_1",
          "approval/decided allowed-once (person)",
          expect.stringMatching(/^tool\/result 1\.1 \d{4}-\d\d-\d\dT\S+Z$/),
          "step/end 1.1",
          "step/start 1.2",
          expect.stringMatching(/^assistant\/message 1\.2: Tool result \(call_1_1_1\): "\d{4}-\S+Z"$/),
          "step/end 1.2",
          "turn/end 1: completed"
        ])
      })
  )

  it.scopedLive(
    "while a question is open, Enter steers and Alt+Enter queues a followup (both shown queued); n with a reason rejects: the model gets DENIED, then both run",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const { pane } = yield* startChat(store, ["--ask", "clock"])
        yield* send(pane, "what time is it")
        yield* pane.waitFor(awaiting(1, 1))
        // A message that starts with a key letter is a message: only a letter alone answers.
        yield* send(pane, "now also say hi")
        yield* send(pane, "and then this", "M-Enter")
        const queued = yield* pane.waitFor("  followup > and then this")
        expect(linesOf(queued, "pending", "  steer", "  followup", "? awaiting")).toEqual([
          "pending (2):",
          "  steer    > now also say hi",
          "  followup > and then this",
          expect.stringMatching(/^\? awaiting approval \(1 question\) · turn 1 step 1 · /)
        ])
        yield* send(pane, "n")
        yield* pane.waitFor("Enter: reject clock with this reason (empty: none) · Esc: back to the question")
        yield* send(pane, "not now")
        const screen = yield* pane.waitFor("turn 2 ended: completed")
        expect(linesOf(screen, "── turn", "> ", "· ?", "→ ", "  ← ", "Tool", "I received", "turn ")).toEqual([
          "── turn 1 ──",
          "> what time is it",
          "I received 1 message in this step: 1 from you (\"what time is it\").",
          "· ? clock needs approval",
          "· ? clock: rejected by a person: not now",
          "→ clock({})",
          "  ← error: The call to clock was rejected by a person: not now",
          "> now also say hi",
          "Tool error (call_1_1_1): \"The call to clock was rejected by a person: not now\"",
          "I received 1 message in this step: 1 from you (\"now also say hi\").",
          "turn 1 ended: completed",
          "── turn 2 ──",
          "> and then this",
          "I received 1 message in this step: 1 from you (\"and then this\").",
          "turn 2 ended: completed"
        ])
        yield* pane.waitFor(IDLE)
        const { code, logPath } = yield* quit(pane)
        expect(code).toBe(0)
        expect(facts(yield* readLog(logPath!))).toEqual([
          "spliced next-turn @0 -0 +[\"what time is it\"]",
          "turn/start 1",
          "spliced next-turn @0 -1 +[]",
          "step/start 1.1",
          "user/message [user] what time is it",
          "request/header",
          "assistant/message 1.1: I received 1 message in this step: 1 from you (\"what time is it\").",
          "tool/call 1.1 call_1_1_1 clock{}",
          "approval/asked clock call_1_1_1",
          "spliced next-step @0 -0 +[\"now also say hi\"] wake",
          "spliced next-turn @0 -0 +[\"and then this\"]",
          "approval/decided rejected (person): not now",
          "tool/result 1.1 The call to clock was rejected by a person: not now [DENIED]",
          "step/end 1.1",
          "spliced next-step @0 -1 +[]",
          "step/start 1.2",
          "user/message [user] now also say hi",
          "assistant/message 1.2: Tool error (call_1_1_1): \"The call to clock was rejected by a person: not now\"\nI received 1 message in this step: 1 from you (\"now also say hi\").",
          "step/end 1.2",
          "turn/end 1: completed",
          "turn/start 2",
          "spliced next-turn @0 -1 +[]",
          "step/start 2.1",
          "user/message [user] and then this",
          "assistant/message 2.1: I received 1 message in this step: 1 from you (\"and then this\").",
          "step/end 2.1",
          "turn/end 2: completed"
        ])
      })
  )

  it.scopedLive(
    "two questions in one step are answered in order, the first shown with the keys (arguments escaped and cut on one line); n and an empty reason rejects without one",
    () =>
      Effect.gen(function*() {
        // A bidi override (JSON keeps it raw) and 300 characters: escaped, cut after 160 code points.
        const path = "a\u202eb" + "x".repeat(300)
        const args = JSON.stringify({ path })
        const chunk = (delta: object, finish: string | null = null) =>
          `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
        const call = (index: number, id: string, name: string, argsText: string) =>
          chunk({ tool_calls: [{ index, id, type: "function", function: { name, arguments: argsText } }] })
        const server = yield* replayServer([
          {
            body: call(0, "call_a", "read_file", args) + call(1, "call_b", "clock", "{}") + chunk({}, "tool_calls") +
              "data: [DONE]\n\n"
          },
          { body: chunk({ content: "done" }) + chunk({}, "stop") + "data: [DONE]\n\n" }
        ])
        const store = Path.join(tmpDir(), "sessions")
        const { pane } = yield* startChat(store, [
          "--provider",
          "openai-compat",
          "--base-url",
          server.baseUrl,
          "--model",
          "m",
          "--ask",
          "read_file",
          "--ask",
          "clock"
        ], 300)
        yield* send(pane, "look")
        const asked = yield* pane.waitFor(awaiting(2, 1))
        expect(linesOf(asked, "? ", "    ")).toEqual([
          expect.stringMatching(
            new RegExp(`^\\? → read_file\\(\\{"path":"a\\\\u202eb${"x".repeat(148)}…\\) awaiting approval \\d+\\.\\ds$`)
          ),
          keysFor("read_file"),
          expect.stringMatching(/^\? → clock\(\{\}\) awaiting approval \d+\.\ds$/),
          "    next, once the question above is answered",
          expect.stringMatching(/^\? awaiting approval \(2 questions\) · turn 1 step 1 · /)
        ])
        // n, then an empty reason: the first question is rejected without one; the second gets the keys.
        yield* send(pane, "n")
        yield* pane.keys("Enter")
        // (Once its result is committed: the order of the log below does not depend on timing.)
        yield* pane.waitFor("  ← error: The call to read_file was rejected by a person.")
        const second = yield* pane.waitFor(awaiting(1, 1))
        expect(linesOf(second, "? ", "    ")).toEqual([
          expect.stringMatching(/^\? → clock\(\{\}\) awaiting approval \d+\.\ds$/),
          keysFor("clock"),
          expect.stringMatching(/^\? awaiting approval \(1 question\) · turn 1 step 1 · /)
        ])
        yield* send(pane, "y")
        const screen = yield* pane.waitFor("turn 1 ended: completed")
        expect(linesOf(screen, "· ?", "→ ", "  ← ", "done", "turn ")).toEqual([
          "· ? read_file needs approval",
          "· ? clock needs approval",
          "· ? read_file: rejected by a person",
          // (The whole arguments, in the transcript.)
          expect.stringMatching(/^→ read_file\(\{"path":"a\\u202ebx+/),
          "  ← error: The call to read_file was rejected by a person.",
          "· ? clock: allowed once by a person",
          "→ clock({})",
          expect.stringMatching(/^ {2}← \d{4}-\d\d-\d\dT\S+Z$/),
          "done",
          "turn 1 ended: completed"
        ])
        yield* pane.waitFor(IDLE)
        const { code, logPath } = yield* quit(pane)
        expect(code).toBe(0)
        expect(facts(yield* readLog(logPath!)).slice(6)).toEqual([
          "assistant/message 1.1: ",
          `tool/call 1.1 call_a read_file${args}`,
          "approval/asked read_file call_a",
          "tool/call 1.1 call_b clock{}",
          "approval/asked clock call_b",
          "approval/decided rejected (person)",
          "tool/result 1.1 The call to read_file was rejected by a person. [DENIED]",
          "approval/decided allowed-once (person)",
          expect.stringMatching(/^tool\/result 1\.1 \d{4}-\S+Z$/),
          "step/end 1.1",
          "step/start 1.2",
          "assistant/message 1.2: done",
          "step/end 1.2",
          "turn/end 1: completed"
        ])
      })
  )

  it.scopedLive(
    "a chat killed (SIGKILL) while a question is open: --session shows the question again at start; y goes on with the same turn and step",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const first = yield* startChat(store, ["--ask", "clock"])
        yield* send(first.pane, "wait 1 seconds and tell me the time")
        yield* first.pane.waitFor(awaiting(1, 2))
        const pid = yield* first.pane.pid()
        process.kill(pid, "SIGKILL")
        yield* waitExited(pid)
        yield* first.pane.kill
        const logPath = Path.join(store, `${first.sessionId}.jsonl`)
        const pane = yield* Tmux.start({
          command: [process.execPath, bin, "chat", "--store", store, "--session", first.sessionId, "--ask", "clock"],
          cwd: Path.dirname(store),
          unsetEnv: ["NODE_ENV"]
        })
        const resumed = yield* pane.waitFor(awaiting(1, 2), CHAT_READY_MS)
        expect(linesOf(resumed, "── turn", "> ", "→ ", "  ← ", "Tool", "· ", "? ", "    allow")).toEqual([
          "── turn 1 ──",
          "> wait 1 seconds and tell me the time",
          "→ wait({\"seconds\":1})",
          "  ← waited 1 second",
          "Tool result (call_1_1_1): \"waited 1 second\"",
          "· ? clock needs approval",
          `· resumed session ${first.sessionId}: 1 turn so far`,
          expect.stringMatching(/^\? → clock\(\{\}\) awaiting approval \d+\.\ds$/),
          keysFor("clock"),
          expect.stringMatching(/^\? awaiting approval \(1 question\) · turn 1 step 2 · /)
        ])
        yield* send(pane, "y")
        yield* pane.waitFor("turn 1 ended: completed")
        yield* pane.waitFor(IDLE)
        const { code } = yield* quit(pane)
        expect(code).toBe(0)
        expect(facts(yield* readLog(logPath)).slice(7)).toEqual([
          "tool/call 1.1 call_1_1_1 wait{\"seconds\":1}",
          "tool/result 1.1 waited 1 second",
          "step/end 1.1",
          "step/start 1.2",
          "assistant/message 1.2: Tool result (call_1_1_1): \"waited 1 second\"",
          "tool/call 1.2 call_1_2_1 clock{}",
          "approval/asked clock call_1_2_1",
          // The resumed chat: the same turn and step go on.
          "approval/decided allowed-once (person)",
          expect.stringMatching(/^tool\/result 1\.2 \d{4}-\S+Z$/),
          "step/end 1.2",
          "step/start 1.3",
          expect.stringMatching(/^assistant\/message 1\.3: Tool result \(call_1_2_1\): "\d{4}-\S+Z"$/),
          "step/end 1.3",
          "turn/end 1: completed"
        ])
      })
  )

  it.scopedLive(
    "simulate writing its log to a terminal: the code points JSON leaves raw are JSON escapes there",
    () =>
      Effect.gen(function*() {
        const dir = tmpDir()
        const scenario = Path.join(dir, "hostile.json")
        Fs.writeFileSync(
          scenario,
          JSON.stringify({ model: [{ text: "a\u202eb\u009bc\u2028d\u200be" }], actions: [{ at: 0, followup: "hi" }] })
        )
        const pane = yield* Tmux.start({ command: [process.execPath, bin, "simulate", scenario], cwd: dir })
        expect(yield* pane.waitForExit(CLI_RUN_MS)).toBe(0)
        const screen = yield* pane.screen
        expect(screen).toContain("\"text\":\"a\\u202eb\\u009bc\\u2028d\\u200be\"")
        expect(screen).not.toMatch(/[\u009b\u200b\u202e\u2028]/)
      })
  )
})
