/**
 * Sub-agents in scenarios (§27, §15): the files of `test/scenarios/subagent/`, each run by the
 * simulator on a store that records every append of every session as it is made, so that each
 * file pins one timeline: the events of the parent (`P`) and of its child (named by the parent's
 * call id, `c1`) in the exact order they were appended, with their virtual times. The run's own
 * result is checked against it: the parent's log, each child's log (and header lineage) and model
 * requests as `Simulator.run` returns them. Then a grandchild's path, the decoding of `subagent`
 * blocks, and a second run of each file, byte for byte.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Invariant from "../src/Invariant.js"
import * as Scenario from "../src/Scenario.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import type * as SessionLog from "../src/SessionLog.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Simulator from "../src/Simulator.js"
import { briefLog, checkFates } from "./utils/scenarioChecks.js"

const DIRECTORY = Path.resolve(import.meta.dirname, "scenarios/subagent")

/** The memory store with each write of each session recorded in the order made: the events it committed. */
const recording = () => {
  const writes: Array<{ readonly session: string; readonly events: ReadonlyArray<SessionEvent> }> = []
  const wrap = (log: SessionLog.SessionLog): SessionLog.SessionLog => {
    const appendSync = log.appendSync
    const session = log.header.id
    return {
      ...log,
      append: (drafts) => Effect.tap(log.append(drafts), (events) => Effect.sync(() => writes.push({ session, events }))),
      appendSync: appendSync === undefined ? undefined : (drafts, time) => {
        const events = appendSync(drafts, time)
        if (Array.isArray(events)) writes.push({ session, events })
        return events
      }
    }
  }
  const layer = Layer.effect(
    SessionStore.SessionStore,
    Effect.map(SessionStore.SessionStore, (s) => ({
      ...s,
      create: (options) =>
        Effect.map(s.create(options), (log) => {
          // A fork child is created with its seed in the same write.
          if (log.events().length > 0) writes.push({ session: log.header.id, events: log.events().slice() })
          return wrap(log)
        })
    }))
  ).pipe(Layer.provide(SessionStore.layerMemory))
  return { writes, layer }
}

/** `briefLog` with the sub-agent events spelled out, question ids replaced by `q1`, `q2`, … as asked. */
const lines = (events: ReadonlyArray<SessionEvent>, labels: Readonly<Record<string, string>>): Array<string> =>
  briefLog(events, labels).map((line, i) => {
    const e = events[i]!
    const d = e.data as any
    if (e.type === "subagent/start") line = `subagent/start ${d.callId} ${d.provider} depth ${d.depth}: ${d.label}`
    if (e.type === "subagent/end") line = `subagent/end ${d.callId} ${d.stopReason}`
    if (e.type === "subagent/descriptor") line = `subagent/descriptor ${d.provider}: ${d.label}`
    return `${e.time} ${line}`
  })

const questionLabels = (events: ReadonlyArray<SessionEvent>, labels: Record<string, string>) => {
  for (const e of events) {
    if (e.type === "approval/asked") labels[(e.data as { id: string }).id] = `q${Object.keys(labels).length + 1}`
  }
  return labels
}

const load = (name: string) => {
  const text = Fs.readFileSync(Path.join(DIRECTORY, name), "utf8")
  return { text, scenario: Either.getOrThrow(Scenario.parse(text)) }
}

/**
 * Runs a file on the recording store. `timeline`: every session's events in the order they were
 * written, each line `WHO TIME EVENT` (`P`: the scenario's agent; a child: its path). Checks that
 * the run's result is that timeline, session by session, and that every log is clean.
 */
const runFile = (name: string) =>
  Effect.suspend(() => {
    const { scenario, text } = load(name)
    const recorder = recording()
    return Effect.map(Simulator.run(scenario, { seed: Scenario.seedOf(text), store: recorder.layer }), (result) => {
      checkFates(result)
      const who = new Map([[result.header.id, "P"], ...result.children.map((c) => [c.header.id, c.path] as const)])
      const labels: Record<string, string> = {}
      for (const session of [result, ...result.children]) questionLabels(session.events, labels)
      const timeline = recorder.writes.flatMap((w) => lines(w.events, labels).map((line) => `${who.get(w.session)} ${line}`))
      // The result holds the same events as the store, session by session.
      const of = (tag: string) => timeline.filter((l) => l.startsWith(`${tag} `)).map((l) => l.slice(tag.length + 1))
      expect(lines(result.events, labels)).toEqual(of("P"))
      for (const child of result.children) {
        expect(lines(child.events, labels)).toEqual(of(child.path))
        expect(Invariant.check(child.events, { header: child.header })).toEqual([])
      }
      return { result, timeline, labels }
    })
  })

/** The child's header without its generated ids. */
const lineage = (result: Simulator.RunResult, child: Simulator.ChildResult) => {
  const { createdAt, id, parentSession, ...rest } = child.header as any
  expect(parentSession).toBe(result.header.id)
  expect(typeof id).toBe("string")
  return { createdAt, ...rest }
}

/** The `subagent/end` data of the parent with its generated ids checked and dropped. */
const ends = (result: Simulator.RunResult) =>
  result.events.filter((e) => e.type === "subagent/end").map((e) => {
    const { id, runId, ...rest } = e.data as any
    expect(id).toBe(result.children.find((c) => c.callId === rest.callId)!.header.id)
    expect(typeof runId).toBe("string")
    return rest
  })

const resultText = (result: Simulator.RunResult, callId: string) =>
  result.requests.flatMap((r) => r.messages).find((m) => m.role === "tool" && m.toolCallId === callId)?.content

const zeroUsage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 }

describe("sub-agent scenarios (test/scenarios/subagent, §27)", () => {
  it.effect("a child that answers: the parent's call brackets the child's whole turn, the answer is the call's result", () =>
    Effect.gen(function*() {
      const { result, timeline } = yield* runFile("answers.json")
      expect(timeline).toEqual([
        "P 0 splice next-turn 0 +[Ask the research sub-agent what 2+2 is.]",
        "P 0 turn/start 1",
        "P 0 splice next-turn 0 -1",
        "P 0 step/start 1.1",
        "P 0 user Ask the research sub-agent what 2+2 is.",
        "P 0 request/header",
        "P 10 assistant research({\"prompt\":\"What is 2+2?\",\"description\":\"add two numbers\"})",
        "P 10 tool/call c1 research",
        "P 10 subagent/start c1 spawn depth 1: add two numbers",
        "c1 10 subagent/descriptor spawn: add two numbers",
        "c1 10 splice next-turn 0 +[What is 2+2?]",
        "c1 10 turn/start 1",
        "c1 10 splice next-turn 0 -1",
        "c1 10 step/start 1.1",
        "c1 10 user What is 2+2? (subagent)",
        "c1 10 request/header",
        "c1 30 assistant 4",
        "c1 30 step/end 1.1",
        "c1 30 turn/end 1 completed",
        "P 30 subagent/end c1 completed",
        "P 30 tool/result c1",
        "P 30 step/end 1.1",
        "P 30 step/start 1.2",
        "P 40 assistant It is 4.",
        "P 40 step/end 1.2",
        "P 40 turn/end 1 completed"
      ])
      const [child] = result.children
      expect(result.children.map((c) => c.path)).toEqual(["c1"])
      expect(lineage(result, child!)).toEqual({
        type: "session",
        format: "effect-agent-loop",
        version: 1,
        createdAt: 10,
        parentCallId: "c1",
        origin: "subagent",
        delegationDepth: 1
      })
      expect(ends(result)).toEqual([{
        provider: "spawn",
        local: true,
        callId: "c1",
        stopReason: "completed",
        lastAssistantMessage: [{ type: "text", text: "4" }],
        reason: { kind: "completed" },
        usage: { ...zeroUsage, inputTokens: 12, outputTokens: 1 },
        byModel: { "a sub-agent that answers/research": { ...zeroUsage, inputTokens: 12, outputTokens: 1 } },
        unreported: 0
      }])
      // The child's request: its instructions are in its request header; its task is its only message.
      expect(child!.requests).toEqual([{ turn: 1, step: 1, messages: [{ role: "user", content: "What is 2+2?" }] }])
      const header = child!.events.find((e) => e.type === "request/header")!.data as any
      expect([header.instructions, header.model]).toEqual(["Answer with the number only.", "a sub-agent that answers/research"])
      expect(result.requests.map((r) => `${r.turn}.${r.step}`)).toEqual(["1.1", "1.2"])
      expect(resultText(result, "c1")).toBe(`4\n[sub-agent session ${child!.header.id}]`)
    }))

  it.effect("a child that calls tools: its batch, results and contexts are in its own log; the parent sees its answer", () =>
    Effect.gen(function*() {
      const { result, timeline } = yield* runFile("tools.json")
      expect(timeline).toEqual([
        "P 0 splice next-turn 0 +[Which file is longer?]",
        "P 0 turn/start 1",
        "P 0 splice next-turn 0 -1",
        "P 0 step/start 1.1",
        "P 0 user Which file is longer?",
        "P 0 request/header",
        "P 10 assistant research({\"prompt\":\"Read NOTES.md and TODO.md and say which is longer.\",\"description\":\"compare two files\"})",
        "P 10 tool/call c1 research",
        "P 10 subagent/start c1 spawn depth 1: compare two files",
        "c1 10 subagent/descriptor spawn: compare two files",
        "c1 10 splice next-turn 0 +[Read NOTES.md and TODO.md and say which is longer.]",
        "c1 10 turn/start 1",
        "c1 10 splice next-turn 0 -1",
        "c1 10 step/start 1.1",
        "c1 10 user Read NOTES.md and TODO.md and say which is longer. (subagent)",
        "c1 10 request/header",
        "c1 20 assistant read_file({\"path\":\"NOTES.md\",\"ms\":30}) read_file({\"path\":\"TODO.md\",\"ms\":20})",
        "c1 20 tool/call k1 read_file",
        "c1 20 tool/call k2 read_file",
        // k2 is done at 40, k1 at 50: the results commit in call order, each with its context.
        "c1 50 tool/result k1",
        "c1 50 splice next-step 0 +[files are read from the main branch]",
        "c1 50 tool/result k2",
        "c1 50 splice next-step 1 +[files are read from the main branch]",
        "c1 50 step/end 1.1",
        "c1 50 splice next-step 0 -2",
        "c1 50 step/start 1.2",
        "c1 50 user files are read from the main branch (tool)",
        "c1 50 user files are read from the main branch (tool)",
        "c1 60 assistant TODO.md",
        "c1 60 step/end 1.2",
        "c1 60 turn/end 1 completed",
        "P 60 subagent/end c1 completed",
        "P 60 tool/result c1",
        "P 60 step/end 1.1",
        "P 60 step/start 1.2",
        "P 70 assistant TODO.md is longer.",
        "P 70 step/end 1.2",
        "P 70 turn/end 1 completed"
      ])
      const child = result.children[0]!
      expect(child.requests.map((r) => r.messages.slice(1))).toEqual([
        [],
        [
          {
            role: "assistant",
            content: "",
            toolCalls: [
              { id: "k1", name: "read_file", arguments: "{\"path\":\"NOTES.md\",\"ms\":30}" },
              { id: "k2", name: "read_file", arguments: "{\"path\":\"TODO.md\",\"ms\":20}" }
            ]
          },
          { role: "tool", content: "file contents", toolCallId: "k1" },
          { role: "tool", content: "file contents", toolCallId: "k2" },
          { role: "user", content: "files are read from the main branch" },
          { role: "user", content: "files are read from the main branch" }
        ]
      ])
      // None of the child's calls reach the parent's requests.
      expect(result.requests[1]!.messages.flatMap((m) => m.toolCalls ?? []).map((c) => c.id)).toEqual(["c1"])
      expect(resultText(result, "c1")).toBe(`TODO.md\n[sub-agent session ${child.header.id}]`)
    }))

  it.effect("a cancel of the parent while the child's tool runs: the child's call and turn end first (aborted by the parent), then the parent's call is ABORTED", () =>
    Effect.gen(function*() {
      const { result, timeline } = yield* runFile("cancel-during-child-tool.json")
      expect(timeline).toEqual([
        "P 0 splice next-turn 0 +[Have a sub-agent run the tests.]",
        "P 0 turn/start 1",
        "P 0 splice next-turn 0 -1",
        "P 0 step/start 1.1",
        "P 0 user Have a sub-agent run the tests.",
        "P 0 request/header",
        "P 10 assistant research({\"prompt\":\"Run the test suite.\",\"description\":\"run the tests\"})",
        "P 10 tool/call c1 research",
        "P 10 subagent/start c1 spawn depth 1: run the tests",
        "c1 10 subagent/descriptor spawn: run the tests",
        "c1 10 splice next-turn 0 +[Run the test suite.]",
        "c1 10 turn/start 1",
        "c1 10 splice next-turn 0 -1",
        "c1 10 step/start 1.1",
        "c1 10 user Run the test suite. (subagent)",
        "c1 10 request/header",
        "c1 20 assistant run_tests({})",
        "c1 20 tool/call k1 run_tests",
        // The cancel at 100 (run_tests would end at 1020).
        "c1 100 tool/result k1 ABORTED",
        "c1 100 step/end 1.1",
        "c1 100 turn/end 1 aborted:parent",
        "P 100 subagent/end c1 aborted",
        "P 100 tool/result c1 ABORTED",
        "P 100 step/end 1.1",
        "P 100 turn/end 1 aborted:user",
        "P 200 splice next-turn 0 +[Never mind, stop there.]",
        "P 200 turn/start 2",
        "P 200 splice next-turn 0 -1",
        "P 200 step/start 2.1",
        "P 200 user Never mind, stop there.",
        "P 210 assistant Stopped.",
        "P 210 step/end 2.1",
        "P 210 turn/end 2 completed"
      ])
      const cause = { kind: "parent", parentSession: result.header.id, callId: "c1" }
      expect(ends(result)).toEqual([{
        provider: "spawn",
        local: true,
        callId: "c1",
        stopReason: "aborted",
        reason: { kind: "aborted", reason: cause },
        // What the child had spent when it was cancelled: its one response, which reported no usage.
        usage: zeroUsage,
        byModel: { "the parent is cancelled while its sub-agent's tool runs/research": zeroUsage },
        unreported: 1
      }])
      const child = result.children[0]!
      expect(child.events.filter((e) => e.type === "turn/end").map((e) => e.data)).toEqual([
        { turn: 1, reason: { kind: "aborted", reason: cause } }
      ])
      // The child's model was asked once: the cancel came during its tool call.
      expect(child.requests.map((r) => `${r.turn}.${r.step}`)).toEqual(["1.1"])
      expect(resultText(result, "c1")).toBe("The turn was canceled while this tool call was running.")
    }))

  it.effect("a child whose model fails: its turn ends error, the parent's call gets TOOL_FAILED naming it, the parent's turn goes on", () =>
    Effect.gen(function*() {
      const { result, timeline } = yield* runFile("child-fails.json")
      expect(timeline).toEqual([
        "P 0 splice next-turn 0 +[Summarize docs/design.md with a sub-agent.]",
        "P 0 turn/start 1",
        "P 0 splice next-turn 0 -1",
        "P 0 step/start 1.1",
        "P 0 user Summarize docs/design.md with a sub-agent.",
        "P 0 request/header",
        "P 10 assistant research({\"prompt\":\"Summarize the design document.\"})",
        "P 10 tool/call c1 research",
        // No description: the label is the prompt's first line.
        "P 10 subagent/start c1 spawn depth 1: Summarize the design document.",
        "c1 10 subagent/descriptor spawn: Summarize the design document.",
        "c1 10 splice next-turn 0 +[Summarize the design document.]",
        "c1 10 turn/start 1",
        "c1 10 splice next-turn 0 -1",
        "c1 10 step/start 1.1",
        "c1 10 user Summarize the design document. (subagent)",
        "c1 10 request/header",
        "c1 25 step/end 1.1",
        "c1 25 turn/end 1 error:MODEL_FAILED",
        "P 25 subagent/end c1 error",
        "P 25 tool/result c1 TOOL_FAILED",
        "P 25 step/end 1.1",
        "P 25 step/start 1.2",
        "P 35 assistant The sub-agent failed; I will summarize it myself.",
        "P 35 step/end 1.2",
        "P 35 turn/end 1 completed"
      ])
      const error = { kind: "error", error: { message: "overloaded", code: "MODEL_FAILED" } }
      expect(ends(result)).toEqual([
        {
          provider: "spawn",
          local: true,
          callId: "c1",
          stopReason: "error",
          reason: error,
          // Its only request failed: nothing was spent.
          usage: zeroUsage,
          byModel: {},
          unreported: 0
        }
      ])
      expect(resultText(result, "c1")).toBe(
        `Tool research failed: the sub-agent (session ${
          result.children[0]!.header.id
        }) did not complete its task: error MODEL_FAILED: overloaded`
      )
    }))

  it.effect("a fork child: its log starts with a copy of the parent's completed turn (seedLength), its own turn is numbered after it", () =>
    Effect.gen(function*() {
      const { result, timeline } = yield* runFile("fork.json")
      const seed = [
        "0 splice next-turn 0 +[Remember the code word TEAL.]",
        "0 turn/start 1",
        "0 splice next-turn 0 -1",
        "0 step/start 1.1",
        "0 user Remember the code word TEAL.",
        "0 request/header",
        "10 assistant The code word is TEAL.",
        "10 step/end 1.1",
        "10 turn/end 1 completed"
      ]
      expect(timeline).toEqual([
        ...seed.map((l) => `P ${l}`),
        "P 100 splice next-turn 0 +[Ask a fork of yourself for the code word.]",
        "P 100 turn/start 2",
        "P 100 splice next-turn 0 -1",
        "P 100 step/start 2.1",
        "P 100 user Ask a fork of yourself for the code word.",
        "P 110 assistant fork({\"prompt\":\"What is the code word?\",\"description\":\"recall the code word\"})",
        "P 110 tool/call c1 fork",
        "P 110 subagent/start c1 fork depth 1: recall the code word",
        // Created in one write: the seed (the parent's events keep their times) and its end.
        ...seed.map((l) => `c1 ${l}`),
        "c1 10 session/end-seed",
        "c1 110 subagent/descriptor fork: recall the code word",
        "c1 110 splice next-turn 0 +[What is the code word?]",
        "c1 110 turn/start 2",
        "c1 110 splice next-turn 0 -1",
        "c1 110 step/start 2.1",
        "c1 110 user What is the code word? (subagent)",
        "c1 110 request/header",
        "c1 120 assistant TEAL",
        "c1 120 step/end 2.1",
        "c1 120 turn/end 2 completed",
        "P 120 subagent/end c1 completed",
        "P 120 tool/result c1",
        "P 120 step/end 2.1",
        "P 120 step/start 2.2",
        "P 130 assistant The fork said TEAL.",
        "P 130 step/end 2.2",
        "P 130 turn/end 2 completed"
      ])
      const child = result.children[0]!
      expect(lineage(result, child)).toMatchObject({ createdAt: 110, parentCallId: "c1", delegationDepth: 1, seedLength: 9 })
      // Its request holds the parent's first turn, then its task.
      expect(child.requests).toEqual([{
        turn: 2,
        step: 1,
        messages: [
          { role: "user", content: "Remember the code word TEAL." },
          { role: "assistant", content: "The code word is TEAL." },
          { role: "user", content: "What is the code word?" }
        ]
      }])
    }))

  it.effect("a child's call that needs approval: decided by the parent's approve action naming the child's call id; the parent's call waits meanwhile", () =>
    Effect.gen(function*() {
      const { result, timeline } = yield* runFile("approval.json")
      expect(timeline).toEqual([
        "P 0 splice next-turn 0 +[Have a sub-agent write the notes.]",
        "P 0 turn/start 1",
        "P 0 splice next-turn 0 -1",
        "P 0 step/start 1.1",
        "P 0 user Have a sub-agent write the notes.",
        "P 0 request/header",
        "P 10 assistant research({\"prompt\":\"Write the notes to NOTES.md.\",\"description\":\"write the notes\"})",
        "P 10 tool/call c1 research",
        "P 10 subagent/start c1 spawn depth 1: write the notes",
        "c1 10 subagent/descriptor spawn: write the notes",
        "c1 10 splice next-turn 0 +[Write the notes to NOTES.md.]",
        "c1 10 turn/start 1",
        "c1 10 splice next-turn 0 -1",
        "c1 10 step/start 1.1",
        "c1 10 user Write the notes to NOTES.md. (subagent)",
        "c1 10 request/header",
        "c1 20 assistant write_file({\"path\":\"NOTES.md\"})",
        "c1 20 tool/call k1 write_file",
        "c1 20 asked q1 write_file k1",
        // The approve action at 100, applied to the parent agent.
        "c1 100 decided q1 allowed-once by person:ana",
        "c1 105 tool/result k1",
        "c1 105 step/end 1.1",
        "c1 105 step/start 1.2",
        "c1 115 assistant Written.",
        "c1 115 step/end 1.2",
        "c1 115 turn/end 1 completed",
        "P 115 subagent/end c1 completed",
        "P 115 tool/result c1",
        "P 115 step/end 1.1",
        "P 115 step/start 1.2",
        "P 125 assistant The notes are written.",
        "P 125 step/end 1.2",
        "P 125 turn/end 1 completed"
      ])
      const child = result.children[0]!
      const asked = child.events.find((e) => e.type === "approval/asked")!.data as { id: string }
      expect(result.decisions).toEqual([
        { action: 1, kind: "approve", at: 100, id: asked.id, callId: "k1", sessionId: child.header.id }
      ])
      expect(child.events.filter((e) => e.type === "approval/decided").map((e) => e.data)).toEqual([
        { id: asked.id, outcome: "allowed-once", by: { kind: "person", name: "ana" } }
      ])
      expect(result.events.some((e) => e.type.startsWith("approval/"))).toBe(false)
    }))

  it.effect("every sub-agent file gives byte-identical logs and requests, the children's too, on a second run", () =>
    Effect.gen(function*() {
      const names = Fs.readdirSync(DIRECTORY).filter((f) => f.endsWith(".json")).sort()
      expect(names).toEqual([
        "answers.json",
        "approval.json",
        "cancel-during-child-tool.json",
        "child-fails.json",
        "fork.json",
        "tools.json"
      ])
      for (const name of names) {
        const { scenario, text } = load(name)
        const a = yield* Simulator.run(scenario, { seed: Scenario.seedOf(text) })
        const b = yield* Simulator.run(scenario, { seed: Scenario.seedOf(text) })
        expect(b.log).toBe(a.log)
        expect(b.requestLines).toBe(a.requestLines)
        expect(a.children).toHaveLength(1)
        expect(b.children.map((c) => [c.path, c.log, c.requestLines])).toEqual(
          a.children.map((c) => [c.path, c.log, c.requestLines])
        )
      }
    }))
})

describe("sub-agent tools in scenarios (§15, §27)", () => {
  it.effect("a child's child is named by the path of call ids from the parent; past maxDepth a call starts no session", () =>
    Effect.gen(function*() {
      const scenario = Either.getOrThrow(Scenario.decode({
        model: [
          { toolCalls: [{ id: "c1", name: "outer", arguments: { prompt: "delegate twice" } }] },
          { text: "done" }
        ],
        tools: {
          outer: {
            subagent: {
              model: [
                { toolCalls: [{ id: "k1", name: "inner", arguments: { prompt: "answer" } }] },
                { toolCalls: [{ id: "k2", name: "inner", arguments: { prompt: "answer again" } }] },
                { text: "inner said yes" }
              ],
              tools: {
                inner: {
                  subagent: {
                    model: [
                      { toolCalls: [{ id: "d1", name: "deepest", arguments: { prompt: "answer" } }] },
                      { text: "yes" }
                    ],
                    tools: { deepest: { subagent: { maxDepth: 2, model: [{ text: "never asked" }] } } }
                  }
                }
              }
            }
          }
        },
        actions: [{ at: 0, followup: "go" }]
      }))
      const result = yield* Simulator.run(scenario, { seed: 3 })
      // `inner`'s two children share its script: the first takes both responses (its call d1 of
      // `deepest` would make depth 3), the second finds it used up and its turn fails.
      expect(result.children.map((c) => [c.path, c.header.delegationDepth, c.requests.length])).toEqual([
        ["c1", 1, 3],
        ["c1/k1", 2, 2],
        ["c1/k2", 2, 1]
      ])
      const grandchild = result.children[1]!
      expect(grandchild.events.some((e) => e.type === "subagent/start")).toBe(false)
      expect(grandchild.requests[1]!.messages.at(-1)).toEqual({
        role: "tool",
        content: "Tool deepest failed: subagent depth 3 exceeds maxDepth 2",
        toolCallId: "d1"
      })
      expect(result.children.map((c) => c.header.parentSession)).toEqual([
        result.header.id,
        result.children[0]!.header.id,
        result.children[0]!.header.id
      ])
      expect(result.children[2]!.events.at(-1)!.data).toMatchObject({ reason: { error: { code: "SCRIPT_EXHAUSTED" } } })
      const model = (c: Simulator.ChildResult) => (c.events.find((e) => e.type === "request/header")!.data as any).model
      expect(result.children.map(model)).toEqual(["script/outer", "script/outer/inner", "script/outer/inner"])
    }))

  it.effect("a child's question named by its index among the parent's open questions, or by its id, gives the same logs as by its call id", () =>
    Effect.gen(function*() {
      const { scenario, text } = load("approval.json")
      const seed = Scenario.seedOf(text)
      const byCall = yield* Simulator.run(scenario, { seed })
      const asked = byCall.children[0]!.events.find((e) => e.type === "approval/asked")!.data as { id: string }
      for (const name of [{ index: 0 }, { id: asked.id }]) {
        const approve = { ...name, name: "ana" }
        const other = yield* Simulator.run({ ...scenario, actions: [scenario.actions[0]!, { at: 100, approve }] }, { seed })
        expect(other.log).toBe(byCall.log)
        expect(other.children.map((c) => c.log)).toEqual(byCall.children.map((c) => c.log))
        // The record names the question it decided, whatever name the action gave.
        expect(other.decisions).toEqual(byCall.decisions)
      }
    }))

  it.effect("a fork after a spawn: the fork's seed holds the parent's subagent/start, yet each child is listed once", () =>
    Effect.gen(function*() {
      const result = yield* Simulator.run(
        Either.getOrThrow(Scenario.decode({
          model: [
            { toolCalls: [{ id: "c1", name: "spawn", arguments: { prompt: "first" } }] },
            { text: "one" },
            { toolCalls: [{ id: "c2", name: "fork", arguments: { prompt: "second" } }] },
            { text: "two" }
          ],
          tools: {
            spawn: { subagent: { model: [{ text: "spawned" }] } },
            fork: { subagent: { fork: true, model: [{ text: "forked" }] } }
          },
          actions: [{ at: 0, followup: "go" }, { at: 10, followup: "again" }]
        })),
        { seed: 5 }
      )
      expect(result.children.map((c) => [c.path, c.header.seedLength])).toEqual([["c1", undefined], ["c2", 16]])
      const fork = result.children[1]!
      expect(fork.events.filter((e) => e.type === "subagent/start").map((e) => (e.data as any).callId)).toEqual(["c1"])
      expect(fork.requests.map((r) => r.messages.at(-1)!.content)).toEqual(["second"])
    }))

  const invalid = (input: unknown) => {
    const decoded = Scenario.decode(input)
    return Either.isLeft(decoded) ? { path: decoded.left.path, message: decoded.left.message } : undefined
  }
  const child = { model: [{ text: "ok" }] }

  it("a subagent block is checked field by field, at its path, down the nested tools", () => {
    expect(invalid({ model: [], tools: { r: { subagent: {} } }, actions: [] })).toEqual({
      path: "$.tools.r.subagent.model",
      message: "is missing"
    })
    expect(invalid({ model: [], tools: { r: { subagent: { ...child, fork: "yes" } } }, actions: [] })).toEqual({
      path: "$.tools.r.subagent.fork",
      message: "Expected boolean, actual \"yes\""
    })
    expect(invalid({ model: [], tools: { r: { subagent: { ...child, maxDepth: -1 } } }, actions: [] })).toEqual({
      path: "$.tools.r.subagent.maxDepth",
      message: "Expected a non-negative number, actual -1"
    })
    expect(invalid({ model: [], tools: { r: { subagent: { ...child, maxSteps: 0 } } }, actions: [] })).toEqual({
      path: "$.tools.r.subagent.maxSteps",
      message: "Expected a positive number, actual 0"
    })
    expect(invalid({ model: [], tools: { r: { subagent: { ...child, toolz: {} } } }, actions: [] })).toEqual({
      path: "$.tools.r.subagent.toolz",
      message:
        "is unexpected, expected: \"model\" | \"tools\" | \"fork\" | \"maxDepth\" | \"maxSteps\" | \"instructions\" | \"description\" | \"approvalTimeoutMs\""
    })
    const nested = { ...child, tools: { s: { subagent: { model: [{ txt: "x" }] } } } }
    expect(invalid({ model: [], tools: { r: { subagent: nested } }, actions: [] })).toEqual({
      path: "$.tools.r.subagent.tools.s.subagent.model[0].txt",
      message:
        "is unexpected, expected: \"text\" | \"reasoning\" | \"toolCalls\" | \"finish\" | \"error\" | \"usage\" | \"latencyMs\""
    })
    expect(invalid({ model: [], tools: { r: { subagent: 5 } }, actions: [] })).toEqual({
      path: "$.tools.r.subagent",
      message:
        "Expected a sub-agent object {model, tools?, fork?, maxDepth?, maxSteps?, instructions?, description?, approvalTimeoutMs?}, actual 5"
    })
    expect(invalid({ model: [], tools: { r: { result: "x", subagent: child } }, actions: [] })).toEqual({
      path: "$.tools.r.result",
      message: "is for a scripted tool: a sub-agent tool answers with its child's answer (§27)"
    })
    const deep = { ...child, tools: { s: { durationMs: 5, subagent: child } } }
    expect(invalid({ model: [], tools: { r: { subagent: deep } }, actions: [] })).toEqual({
      path: "$.tools.r.subagent.tools.s.durationMs",
      message: "is for a scripted tool: a sub-agent tool answers with its child's answer (§27)"
    })
    expect(
      invalid({ model: [], tools: { r: { approval: "always", subagent: { ...child, fork: true, maxDepth: 1 } } }, actions: [] })
    )
      .toBeUndefined()
  })

  it("an approve or reject callId may name a call of a child's script; one in two scripts, or to a tool that never asks, is refused", () => {
    const write = { result: "w", approval: "always" }
    const childScript = { model: [{ toolCalls: [{ id: "k1", name: "write" }, { id: "k2", name: "read" }] }] }
    const base = {
      model: [{ toolCalls: [{ id: "c1", name: "r", arguments: { prompt: "p" } }] }],
      tools: { r: { subagent: { ...childScript, tools: { write, read: { result: "r" } } } } }
    }
    const approve = (callId: string, scenario: object = base) =>
      invalid({ ...scenario, actions: [{ at: 5, approve: { callId } }] })
    expect(approve("k1")).toBeUndefined()
    expect(approve("k2")).toEqual({
      path: "$.actions[0].approve.callId",
      message: "the call \"k2\" is to \"read\", which needs no approval (its tool has no approval: \"always\")"
    })
    expect(approve("zz")).toEqual({
      path: "$.actions[0].approve.callId",
      message: "no tool call of the model scripts ($.model, $.tools.r.subagent.model) has the id \"zz\""
    })
    // A call of the child's script to a tool only the parent has.
    expect(approve("k1", { ...base, tools: { write, r: { subagent: { ...childScript, tools: {} } } } })).toEqual({
      path: "$.actions[0].approve.callId",
      message: "the call \"k1\" is to \"write\", which is not a tool of the sub-agent of $.tools.r.subagent.model"
    })
    const twice = { ...base, model: [{ toolCalls: [{ id: "k1", name: "write" }] }], tools: { ...base.tools, write } }
    expect(approve("k1", twice)).toEqual({
      path: "$.actions[0].approve.callId",
      message:
        "the call id \"k1\" is in more than one model script ($.model, $.tools.r.subagent.model): give the calls their own ids, or name the question by index or id"
    })
  })
})
