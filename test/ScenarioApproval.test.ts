/**
 * Approvals in scenarios (§26, §15): the files of `test/scenarios/approval/`, each run by the
 * simulator and checked against its exact log (with the times of its events), its fates, its
 * decisions and the model requests that follow a decision; then the actions that name no open
 * question (refused when the scenario is decoded where that is known, else recorded as the
 * action's `ApprovalNotOpen`), and the ways an action names its question.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Scenario from "../src/Scenario.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import * as Simulator from "../src/Simulator.js"
import { briefLog, checkFates } from "./utils/scenarioChecks.js"

const DIRECTORY = Path.resolve(import.meta.dirname, "scenarios/approval")

/**
 * The brief log, each line with its event's time, question ids replaced by `q1`, `q2`, … in the
 * order they were asked (they are generated: the file cannot know them).
 */
const timedLog = (events: ReadonlyArray<SessionEvent>): Array<string> => {
  const labels: Record<string, string> = {}
  for (const e of events) {
    if (e.type === "approval/asked") labels[(e.data as { id: string }).id] = `q${Object.keys(labels).length + 1}`
  }
  return briefLog(events, labels).map((line, i) => `${events[i]!.time} ${line}`)
}

const load = (name: string) => {
  const text = Fs.readFileSync(Path.join(DIRECTORY, name), "utf8")
  return { text, scenario: Either.getOrThrow(Scenario.parse(text)) }
}

const runFile = (name: string) =>
  Effect.suspend(() => {
    const { scenario, text } = load(name)
    return Effect.map(Simulator.run(scenario, { seed: Scenario.seedOf(text) }), (result) => {
      checkFates(result)
      return { result, log: timedLog(result.events) }
    })
  })

/** The id of the n-th question asked (1-based). */
const questionId = (events: ReadonlyArray<SessionEvent>, n: number): string =>
  (events.filter((e) => e.type === "approval/asked")[n - 1]!.data as { id: string }).id

const decided = (events: ReadonlyArray<SessionEvent>) => events.filter((e) => e.type === "approval/decided").map((e) => e.data)

const outcomes = (result: Simulator.RunResult) => result.deliveries.map((d) => d.outcome ?? d.error ?? "pending")
const entered = (turn: number, step: number) => ({ _tag: "Entered", turn, step })

describe("approval scenarios (test/scenarios/approval, §26)", () => {
  it.effect("one call of three waits: the free ones run meanwhile, all results commit in model order once it is approved", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("batch-one-waiting.json")
      expect(log).toEqual([
        "0 splice next-turn 0 +[Read both files, then update the notes.]",
        "0 turn/start 1",
        "0 splice next-turn 0 -1",
        "0 step/start 1.1",
        "0 user Read both files, then update the notes.",
        "0 request/header",
        "10 assistant write_file({\"path\":\"NOTES.md\"}) read_file({\"ms\":20}) read_file({\"ms\":40})",
        "10 tool/call w write_file",
        "10 asked q1 write_file w",
        "10 tool/call a read_file",
        "10 tool/call b read_file",
        // a (done at 30) and b (done at 50) wait for w, which runs 5 ms once allowed at 100.
        "100 decided q1 allowed-once by person:ana",
        "105 tool/result w",
        "105 tool/result a",
        "105 tool/result b",
        "105 step/end 1.1",
        "105 step/start 1.2",
        "115 assistant Notes written.",
        "115 step/end 1.2",
        "115 turn/end 1 completed"
      ])
      const id = questionId(result.events, 1)
      expect(result.decisions).toEqual([{ action: 1, kind: "approve", at: 100, id, callId: "w" }])
      expect(decided(result.events)).toEqual([
        { id, outcome: "allowed-once", by: { kind: "person", name: "ana" } }
      ])
      expect(result.requests[1]!.messages.slice(-3)).toEqual([
        { role: "tool", content: "wrote NOTES.md", toolCallId: "w" },
        { role: "tool", content: "file contents", toolCallId: "a" },
        { role: "tool", content: "file contents", toolCallId: "b" }
      ])
      expect(outcomes(result)).toEqual([entered(1, 1)])
    }))

  it.effect("a steer, an injection and a followup while a call waits: accepted at once; steer and inject enter step 2, the followup turn 2", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("steer-inject-followup-waiting.json")
      expect(log).toEqual([
        "0 splice next-turn 0 +[Update the notes.]",
        "0 turn/start 1",
        "0 splice next-turn 0 -1",
        "0 step/start 1.1",
        "0 user Update the notes.",
        "0 request/header",
        "10 assistant write_file({\"path\":\"NOTES.md\"})",
        "10 tool/call w write_file",
        "10 asked q1 write_file w",
        "20 splice next-step 0 +[Also check the tests.] wake",
        "30 splice next-step 1 +[CI is green.]",
        "40 splice next-turn 0 +[Then summarize.]",
        "100 decided q1 allowed-once by person",
        "105 tool/result w",
        "105 step/end 1.1",
        "105 splice next-step 0 -2",
        "105 step/start 1.2",
        "105 user Also check the tests.",
        "105 user CI is green. (plugin)",
        "115 assistant Written, with the tests checked.",
        "115 step/end 1.2",
        "115 turn/end 1 completed",
        "115 turn/start 2",
        "115 splice next-turn 0 -1",
        "115 step/start 2.1",
        "115 user Then summarize.",
        "125 assistant Here is the summary.",
        "125 step/end 2.1",
        "125 turn/end 2 completed"
      ])
      expect(outcomes(result)).toEqual([entered(1, 1), entered(1, 2), entered(1, 2), entered(2, 1)])
    }))

  it.effect("a cancel while a call waits: decided cancelled by the cancel, the call never starts, the free call's result is kept", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("cancel-waiting.json")
      expect(log).toEqual([
        "0 splice next-turn 0 +[Read the file, then update the notes.]",
        "0 turn/start 1",
        "0 splice next-turn 0 -1",
        "0 step/start 1.1",
        "0 user Read the file, then update the notes.",
        "0 request/header",
        "10 assistant write_file({\"path\":\"NOTES.md\"}) read_file({\"ms\":20})",
        "10 tool/call w write_file",
        "10 asked q1 write_file w",
        "10 tool/call a read_file",
        "50 decided q1 cancelled by cancel",
        "50 tool/result w TOOL_ABORTED_BEFORE_DISPATCH",
        "50 tool/result a",
        "50 step/end 1.1",
        "50 turn/end 1 aborted:user",
        "100 splice next-turn 0 +[Never mind, just stop.]",
        "100 turn/start 2",
        "100 splice next-turn 0 -1",
        "100 step/start 2.1",
        "100 user Never mind, just stop.",
        "110 assistant Stopped as asked.",
        "110 step/end 2.1",
        "110 turn/end 2 completed"
      ])
      expect(decided(result.events)).toEqual([{ id: questionId(result.events, 1), outcome: "cancelled", by: { kind: "cancel" } }])
      // The next turn's request carries both results.
      expect(result.requests[1]!.messages.slice(1, 4)).toEqual([
        {
          role: "assistant",
          content: "",
          toolCalls: [
            { id: "w", name: "write_file", arguments: "{\"path\":\"NOTES.md\"}" },
            { id: "a", name: "read_file", arguments: "{\"ms\":20}" }
          ]
        },
        { role: "tool", content: "The turn was canceled before this tool call started.", toolCallId: "w" },
        { role: "tool", content: "file contents", toolCallId: "a" }
      ])
      expect(result.decisions).toEqual([])
    }))

  it.effect("a rejection with a reason: the call gets DENIED with who and why, and the model's next step sees it", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("reject.json")
      expect(log).toEqual([
        "0 splice next-turn 0 +[Clean the build.]",
        "0 turn/start 1",
        "0 splice next-turn 0 -1",
        "0 step/start 1.1",
        "0 user Clean the build.",
        "0 request/header",
        "10 assistant bash({\"command\":\"rm -rf build\"})",
        "10 tool/call rm bash",
        "10 asked q1 bash rm",
        "50 decided q1 rejected by person:ana",
        "50 tool/result rm DENIED",
        "50 step/end 1.1",
        "50 step/start 1.2",
        "60 assistant Understood, I will leave the build directory alone.",
        "60 step/end 1.2",
        "60 turn/end 1 completed"
      ])
      const id = questionId(result.events, 1)
      expect(decided(result.events)).toEqual([
        { id, outcome: "rejected", by: { kind: "person", name: "ana" }, reason: "keep the build cache" }
      ])
      expect(result.decisions).toEqual([{ action: 1, kind: "reject", at: 50, id, callId: "rm" }])
      expect(result.requests.map((r) => `${r.turn}.${r.step}`)).toEqual(["1.1", "1.2"])
      expect(result.requests[1]!.messages.at(-1)).toEqual({
        role: "tool",
        content: "The call to bash was rejected by ana: keep the build cache",
        toolCallId: "rm"
      })
    }))

  it.effect("a question open across a resume is answered there (allow always); after another resume the remembered answer decides the next call", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("always-across-resume.json")
      expect(log).toEqual([
        "0 splice next-turn 0 +[Update the notes.]",
        "0 turn/start 1",
        "0 splice next-turn 0 -1",
        "0 step/start 1.1",
        "0 user Update the notes.",
        "0 request/header",
        "10 assistant write_file({\"path\":\"NOTES.md\"})",
        "10 tool/call w1 write_file",
        "10 asked q1 write_file w1",
        // The resume at 50 appended nothing: the question stayed open, the step goes on.
        "60 decided q1 allowed-always by person",
        "65 tool/result w1",
        "65 step/end 1.1",
        "65 step/start 1.2",
        "75 assistant Notes written.",
        "75 step/end 1.2",
        "75 turn/end 1 completed",
        // The resume at 200 of a log that ends between turns.
        "75 session/end-seed",
        "300 splice next-turn 0 +[Now the TODO list.]",
        "300 turn/start 2",
        "300 splice next-turn 0 -1",
        "300 step/start 2.1",
        "300 user Now the TODO list.",
        "310 assistant write_file({\"path\":\"TODO.md\"})",
        "310 tool/call w2 write_file",
        "310 asked q2 write_file w2",
        "310 decided q2 allowed-once by policy:remembered",
        "315 tool/result w2",
        "315 step/end 2.1",
        "315 step/start 2.2",
        "325 assistant TODO written.",
        "325 step/end 2.2",
        "325 turn/end 2 completed"
      ])
      expect(decided(result.events)).toEqual([
        { id: questionId(result.events, 1), outcome: "allowed-always", by: { kind: "person" } },
        {
          id: questionId(result.events, 2),
          outcome: "allowed-once",
          by: { kind: "policy", policy: "remembered" },
          reason: "a person allowed every call of this tool in this session"
        }
      ])
      expect(result.decisions).toEqual([
        { action: 2, kind: "approve", at: 60, id: questionId(result.events, 1), callId: "w1" }
      ])
      expect(outcomes(result)).toEqual([entered(1, 1), entered(2, 1)])
    }))

  it.effect("approvalTimeoutMs: a question nobody answers is rejected by the timeout, on the virtual clock", () =>
    Effect.gen(function*() {
      const { log, result } = yield* runFile("timeout.json")
      expect(log.slice(7)).toEqual([
        "10 tool/call w write_file",
        "10 asked q1 write_file w",
        "60010 decided q1 rejected by timeout",
        "60010 tool/result w DENIED",
        "60010 step/end 1.1",
        "60010 step/start 1.2",
        "60020 assistant Nobody approved; I did not write.",
        "60020 step/end 1.2",
        "60020 turn/end 1 completed"
      ])
      expect(decided(result.events)).toEqual([
        { id: questionId(result.events, 1), outcome: "rejected", by: { kind: "timeout" }, reason: "no decision within 60000 ms" }
      ])
      expect(result.requests[1]!.messages.at(-1)!.content).toBe(
        "The call to write_file was rejected by the approval timeout: no decision within 60000 ms"
      )
    }))
})

describe("approve and reject actions (§15, §26)", () => {
  const write = { result: "written", approval: "always" }
  const script = [
    { latencyMs: 10, toolCalls: [{ id: "w", name: "write", arguments: {} }] },
    { latencyMs: 10, text: "done" }
  ]
  const invalid = (input: unknown) => {
    const decoded = Scenario.decode(input)
    return Either.isLeft(decoded) ? { path: decoded.left.path, message: decoded.left.message } : undefined
  }

  it("what is wrong before anything runs is refused at its path: an unknown call id, a call that never asks, no or two names", () => {
    const base = { model: script, tools: { write, read: { result: "r" } } }
    const action = (approve: unknown) => ({ ...base, actions: [{ at: 0, followup: "go" }, { at: 50, approve }] })
    expect(invalid(action({ callId: "x" }))).toEqual({
      path: "$.actions[1].approve.callId",
      message: "no tool call of the model script has the id \"x\""
    })
    const other = {
      model: [{ toolCalls: [{ id: "r", name: "read" }, { id: "u", name: "nope" }] }],
      tools: base.tools
    }
    expect(invalid({ ...other, actions: [{ at: 0, reject: { callId: "r" } }] })).toEqual({
      path: "$.actions[0].reject.callId",
      message: "the call \"r\" is to \"read\", which needs no approval (its tool has no approval: \"always\")"
    })
    expect(invalid({ ...other, actions: [{ at: 0, approve: { callId: "u" } }] })).toEqual({
      path: "$.actions[0].approve.callId",
      message: "the call \"u\" is to \"nope\", which is not a tool of the scenario"
    })
    expect(invalid(action({}))).toEqual({
      path: "$.actions[1].approve",
      message: "names its question by one of callId, id, index"
    })
    expect(invalid(action({ callId: "w", index: 0 }))).toEqual({
      path: "$.actions[1].approve",
      message: "names its question by one of callId, id, index, this one by callId and index"
    })
    expect(invalid(action({ index: -1 }))).toEqual({
      path: "$.actions[1].approve.index",
      message: "Expected a non-negative number, actual -1"
    })
    expect(invalid(action({ index: 0, reason: "no" }))).toEqual({
      path: "$.actions[1].approve.reason",
      message: "is unexpected, expected: \"callId\" | \"id\" | \"index\" | \"always\" | \"name\""
    })
    expect(invalid({ ...base, actions: [{ at: 0, resume: { now: true } }] })).toEqual({
      path: "$.actions[0].resume.now",
      message: "is unexpected, resume takes no fields"
    })
    expect(invalid({ ...base, tools: { write: { approval: "sometimes" } }, actions: [] })).toEqual({
      path: "$.tools.write.approval",
      message: "Expected \"never\" or \"always\", actual \"sometimes\""
    })
    expect(invalid({ ...base, approvalTimeoutMs: -1, actions: [] })).toEqual({
      path: "$.approvalTimeoutMs",
      message: "Expected a non-negative number, actual -1"
    })
    expect(invalid(action({ callId: "w", always: true, name: "ana" }))).toBeUndefined()
    expect(invalid({ ...base, actions: [{ at: 0, reject: { id: "q", reason: "r", always: false, name: "bo" } }] }))
      .toBeUndefined()
  })

  it.effect("deciding twice, or naming no open question, is recorded as the action's ApprovalNotOpen; the run goes on", () =>
    Effect.gen(function*() {
      const scenario = Either.getOrThrow(Scenario.decode({
        model: script,
        tools: { write },
        actions: [
          { at: 0, followup: "go" },
          { at: 5, approve: { index: 0 } },
          { at: 50, approve: { callId: "w" } },
          { at: 60, reject: { callId: "w", reason: "too late" } },
          { at: 70, approve: { id: "never-asked" } }
        ]
      }))
      const result = yield* Simulator.run(scenario, { seed: 1 })
      const id = questionId(result.events, 1)
      expect(result.decisions).toEqual([
        // At 5 the model has not answered yet: nothing is open.
        { action: 1, kind: "approve", at: 5, index: 0, error: "ApprovalNotOpen" },
        { action: 2, kind: "approve", at: 50, id, callId: "w" },
        { action: 3, kind: "reject", at: 60, callId: "w", error: "ApprovalNotOpen" },
        { action: 4, kind: "approve", at: 70, id: "never-asked", error: "ApprovalNotOpen" }
      ])
      expect(decided(result.events)).toEqual([{ id, outcome: "allowed-once", by: { kind: "person" } }])
      expect(timedLog(result.events).slice(-3)).toEqual(["60 assistant done", "60 step/end 1.2", "60 turn/end 1 completed"])
      checkFates(result)
    }))

  it.effect("a question named by its place among the open ones or by its id (from an earlier run) gives the same log", () =>
    Effect.gen(function*() {
      const run = (approve: unknown) =>
        Simulator.run(
          Either.getOrThrow(Scenario.decode({
            model: [
              {
                latencyMs: 10,
                toolCalls: [{ id: "w1", name: "write", arguments: {} }, { id: "w2", name: "write", arguments: {} }]
              },
              { latencyMs: 10, text: "done" }
            ],
            tools: { write },
            actions: [{ at: 0, followup: "go" }, { at: 50, approve }, { at: 60, reject: { index: 0 } }]
          })),
          { seed: 7 }
        )
      const byIndex = yield* run({ index: 1 })
      const second = questionId(byIndex.events, 2)
      const byId = yield* run({ id: second })
      expect(byId.log).toBe(byIndex.log)
      expect(timedLog(byIndex.events).slice(7, 14)).toEqual([
        "10 tool/call w1 write",
        "10 asked q1 write w1",
        "10 tool/call w2 write",
        "10 asked q2 write w2",
        "50 decided q2 allowed-once by person",
        "60 decided q1 rejected by person",
        "60 tool/result w1 DENIED"
      ])
      expect(byIndex.decisions.map((d) => d.callId)).toEqual(["w2", "w1"])
    }))
})
