/**
 * The chat and sub-agents (§27): a running child's progress under the call that runs it, from
 * the parent's `subagent/event`s (`children.ts`, `ChatModel`), bounded and escaped; a child's
 * question listed with the parent's and answered through the parent. First the screen state fed
 * by hand-made events (and the Ink frame it draws), then `agent-loop chat --subagent --ask wait`
 * in a real terminal (tmux): the child's question answered with `y`, its wait shown running.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { AgentEvent } from "../src/AgentEvent.js"
import { ChatModel } from "../src/cli/chat/ChatModel.js"
import type { EventDraft, SessionEvent } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import { CHAT_READY_MS } from "./utils/bounds.js"
import { frameOf } from "./utils/chatFrame.js"
import * as E from "./utils/events.js"
import { scratchDirs } from "./utils/scratchDirs.js"
import * as Tmux from "./utils/tmux.js"

const bin = Path.resolve("dist/cli/bin.js")
const hasTmux = Tmux.available()
const tmpDir = scratchDirs("agent-loop-chat-subagent-")

/** The view's first whole frame for `model` (Ink in debug mode on fake streams of 100 × 30), colours removed. */

/** The events of a child session, each as the parent publishes it: wrapped with the child and the call. */
const wrapped = (sessionId: string, callId: string, events: ReadonlyArray<AgentEvent>): Array<AgentEvent> =>
  events.map((event) => ({ type: "subagent/event", sessionId, callId, event }))

/** The parent's turn up to its `subagent` call `c1` (running). */
const parentCall: Array<EventDraft> = [
  E.followup(E.msg("m1", "delegate")),
  E.turnStart(1),
  E.claim("next-turn", 1),
  E.stepStart(1, 1),
  E.entered(E.msg("m1", "delegate")),
  E.assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "subagent", arguments: "{\"prompt\":\"x\"}" }] }),
  E.toolCall(1, 1, "c1", "subagent", "{\"prompt\":\"x\"}")
]

describe("ChatModel: sub-agents (§27)", () => {
  it.scoped("a child's progress under its call, a grandchild indented; the child's question listed and decided; gone with the call's result", () =>
    Effect.gen(function*() {
      const model = new ChatModel("p", [], { nextStep: [], nextTurn: [] }, "idle", () => 1000)
      const parent = E.events(...parentCall)
      model.apply([{ type: "agent/status", status: "running" }, ...parent])
      // The child's own log: its calls are numbered as the parent's (call_1_1_1 is both).
      const childDrafts: Array<EventDraft> = [
        E.turnStart(1),
        E.stepStart(1, 1),
        E.toolCall(1, 1, "c1", "wait", "{\"seconds\":3}"),
        { type: "approval/asked", data: { id: "q1", toolName: "wait", callId: "c1" } }
      ]
      const child = E.events(...childDrafts)
      const text = () => model.getSnapshot().children.map((c) => [c.sessionId, c.callId, c.depth, c.text])
      model.apply(wrapped("kid-0123456789", "c1", child.slice(0, 2)))
      expect(text()).toEqual([["kid-0123456789", "c1", 1, "turn 1, step 1"]])
      model.apply([
        ...wrapped("kid-0123456789", "c1", [{ type: "assistant/delta", turn: 1, step: 1, text: "let me\nwait " }]),
        ...wrapped("kid-0123456789", "c1", [{ type: "assistant/delta", turn: 1, step: 1, text: "a bit \u001b[2J" }])
      ])
      // The last line of what it streams (raw here; the view escapes it).
      expect(text()).toEqual([["kid-0123456789", "c1", 1, "wait a bit \u001b[2J"]])
      model.apply(wrapped("kid-0123456789", "c1", child.slice(2)))
      const asked = model.getSnapshot()
      expect(text()).toEqual([["kid-0123456789", "c1", 1, "? wait awaiting approval"]])
      expect(asked.questions).toEqual([{
        id: "q1",
        callId: "c1",
        toolName: "wait",
        args: "{\"seconds\":3}",
        since: 1000,
        answering: false,
        sessionId: "kid-0123456789"
      }])
      // The parent's call runs on: the child's question is about the child's call, not this one.
      expect(asked.tools.map((t) => t.callId)).toEqual(["c1"])
      expect(model.firstQuestion()?.id).toBe("q1")
      model.apply([{ type: "agent/status", status: "awaiting-approval" }])
      const frame = (yield* frameOf(model)).split("\n")
      expect(frame.slice(frame.indexOf("> delegate") + 1)).toEqual([
        expect.stringMatching(/^. → subagent\(\{"prompt":"x"\}\) running \d+\.\ds$/),
        "  ↳ sub-agent kid-0123: ? wait awaiting approval",
        expect.stringMatching(/^\? → wait\(\{"seconds":3\}\) awaiting approval \d+\.\ds · sub-agent kid-0123$/),
        "    allow wait? y: once · a: always · n: reject · r: reject always (the letter + Enter)",
        expect.stringMatching(/^\? awaiting approval \(1 question\) · turn 1 step 1 · \d+\.\ds · 0 tokens$/),
        "steer ›",
        "y, a, n or r + Enter: answer · other text: steer · Alt+Enter: queue a followup · Esc: cancel"
      ])

      // Allowed: the call runs; a grandchild (wrapped twice) is shown under it, indented.
      const decided = E.events(...childDrafts, {
        type: "approval/decided",
        data: { id: "q1", outcome: "allowed-once", by: { kind: "person" } }
      }).slice(-1)
      model.apply(wrapped("kid-0123456789", "c1", decided))
      expect(model.getSnapshot().questions).toEqual([])
      expect(text()).toEqual([["kid-0123456789", "c1", 1, "→ wait({\"seconds\":3})"]])
      const grand = E.events(E.turnStart(1), E.stepStart(1, 1), E.toolCall(1, 1, "c1", "read_file", "{\"path\":\"a\"}"))
      model.apply(
        wrapped(
          "kid-0123456789",
          "c1",
          grand.map((event) => ({ type: "subagent/event", sessionId: "grandkid", callId: "c9", event }))
        )
      )
      expect(text()).toEqual([
        ["kid-0123456789", "c1", 1, "→ wait({\"seconds\":3})"],
        ["grandkid", "c1", 2, "→ read_file({\"path\":\"a\"})"]
      ])
      // The child's result of its call c9: the grandchild is done.
      model.apply(wrapped("kid-0123456789", "c1", E.events(E.toolResult(1, 1, "c9", "fine\nmore"))))
      expect(text()).toEqual([["kid-0123456789", "c1", 1, "← ?: fine"]])
      // The parent's result of c1: the child is done.
      model.apply(E.events(...parentCall, E.toolResult(1, 1, "c1", "ok")).slice(-1))
      expect(model.getSnapshot().children).toEqual([])
    }))
})

/** Polls the screen for a sub-agent line and reads its id prefix. */
const SUBAGENT_LINE = /↳ sub-agent (\S{8}): (.*)$/m

describe.skipIf(!hasTmux && process.env.CI === undefined)("agent-loop chat --subagent in a terminal (tmux)", () => {
  it.scopedLive(
    "the child's question is shown under the parent's call and answered with y; the child's wait runs under its call; the turn completes",
    () =>
      Effect.gen(function*() {
        const store = Path.join(tmpDir(), "sessions")
        const pane = yield* Tmux.start({
          command: [process.execPath, bin, "chat", "--store", store, "--subagent", "--ask", "wait"],
          cwd: Path.dirname(store),
          unsetEnv: ["NODE_ENV"]
        })
        yield* pane.waitFor(/● idle · session \S+/, CHAT_READY_MS)
        yield* pane.type("ask a sub-agent to wait 2 seconds")
        yield* pane.keys("Enter")
        const asked = yield* pane.waitFor("? awaiting approval (1 question)")
        const id8 = SUBAGENT_LINE.exec(asked)![1]!
        expect(asked.split("\n").filter((l) => /^(\S )?(→| {2}↳|\? →| {4}allow|\? awaiting)/.test(l))).toEqual([
          expect.stringMatching(/^. → subagent\(\{"prompt":"wait 2 seconds"\}\) running \d+\.\ds$/),
          `  ↳ sub-agent ${id8}: ? wait awaiting approval`,
          expect.stringMatching(
            new RegExp(`^\\? → wait\\(\\{"seconds":2\\}\\) awaiting approval \\d+\\.\\ds · sub-agent ${id8}$`)
          ),
          "    allow wait? y: once · a: always · n: reject · r: reject always (the letter + Enter)",
          expect.stringMatching(/^\? awaiting approval \(1 question\) · turn 1 step 1 · \d+\.\ds · 0 tokens$/)
        ])
        yield* pane.type("y")
        yield* pane.keys("Enter")
        // The allowed wait runs in the child, shown under the parent's call.
        yield* pane.waitFor(`  ↳ sub-agent ${id8}: → wait({"seconds":2})`)
        const done = yield* pane.waitFor("turn 1 ended: completed")
        expect(done.split("\n").filter((l) => /^(· )?(⇒|⇐|→| {2}←| {4}\[sub-agent)/.test(l))).toEqual([
          expect.stringMatching(new RegExp(`^· ⇒ subagent ${id8}\\S+ started via spawn$`)),
          expect.stringMatching(
            new RegExp(`^· ⇐ subagent ${id8}\\S+ ended: completed: Tool result \\(call_1_1_1\\): "waited 2 seconds"$`)
          ),
          "→ subagent({\"prompt\":\"wait 2 seconds\"})",
          expect.stringMatching(new RegExp(`^  ← Tool result \\(call_1_1_1\\): "waited 2 seconds"$`)),
          expect.stringMatching(new RegExp(`^    \\[sub-agent session ${id8}\\S+\\]$`))
        ])
        expect(done).not.toContain("↳ sub-agent")
        yield* pane.waitFor(/● idle/)
        yield* pane.type("/quit")
        yield* pane.keys("Enter")
        expect(yield* pane.waitForExit()).toBe(0)
        // The child's log: the question decided by a person, through the parent.
        const childFile = Fs.readdirSync(store).find((f) => f.startsWith(id8))!
        const events: ReadonlyArray<SessionEvent> = (yield* SessionStore.readFile(Path.join(store, childFile)).pipe(
          Effect.provide(NodeContext.layer),
          Effect.orDie
        )).events
        expect(events.filter((e) => e.type === "approval/decided").map((e) => [(e.data as any).outcome, (e.data as any).by]))
          .toEqual([["allowed-once", { kind: "person" }]])
      })
  )
})
