/**
 * The log shapes of approvals (§26): DSH's `approval/asked` / `approval/decided`, the questions a
 * log leaves open, and the rules `Invariant.check` holds them to (under rule 3 of §12).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Approval from "../src/Approval.js"
import * as Invariant from "../src/Invariant.js"
import type { EventDraft } from "../src/SessionEvent.js"
import * as Transcript from "../src/Transcript.js"
import * as TranscriptText from "../src/TranscriptText.js"
import {
  assistant,
  claim,
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

const asked = (id: string, callId: string | undefined, toolName = "bash", reason?: string): EventDraft =>
  foreign("approval/asked", {
    id,
    toolName,
    ...(callId === undefined ? {} : { callId }),
    ...(reason === undefined ? {} : { reason })
  })
const decided = (id: string, outcome: string, extra: Record<string, unknown> = {}): EventDraft =>
  foreign("approval/decided", { id, outcome, ...extra })

/** Turn 1 up to a step whose assistant asks for two calls, c1 (asked about) and c2. */
const opening: ReadonlyArray<EventDraft> = [
  followup(msg("u1", "write notes.txt")),
  turnStart(1),
  claim("next-turn", 1),
  stepStart(1, 1),
  entered(msg("u1", "write notes.txt")),
  assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "bash" }, { id: "c2", name: "clock" }] }),
  toolCall(1, 1, "c1", "bash"),
  asked("q1", "c1", "bash", "writes a file"),
  toolCall(1, 1, "c2", "clock")
]
const closing: ReadonlyArray<EventDraft> = [
  stepStart(1, 2),
  assistant(1, 2, "done"),
  stepEnd(1, 2),
  turnEnd(1)
]

describe("the approval events", () => {
  it("decode DSH's shapes and ours; an unknown outcome is not an outcome", () => {
    // As DSH writes them (its web app's approval snapshot, in shape).
    expect(
      Schema.decodeUnknownSync(Approval.AskedData)({
        id: "c9284e32-66fe-40d1-baba-a4a467d00f0d",
        toolName: "bash",
        callId: "call_00_Oa8HTzXO89hDxPkAtKSn1634",
        reason: "escalate sandbox to workspace-write"
      })
    ).toEqual({
      id: "c9284e32-66fe-40d1-baba-a4a467d00f0d",
      toolName: "bash",
      callId: "call_00_Oa8HTzXO89hDxPkAtKSn1634",
      reason: "escalate sandbox to workspace-write"
    })
    expect(Schema.decodeUnknownSync(Approval.DecidedData)({ id: "q", outcome: "allowed-once" })).toEqual({
      id: "q",
      outcome: "allowed-once"
    })
    expect(
      Schema.decodeUnknownSync(Approval.DecidedData)({
        id: "q",
        outcome: "rejected-always",
        by: { kind: "person", name: "ana" },
        reason: "not on main"
      })
    ).toEqual({ id: "q", outcome: "rejected-always", by: { kind: "person", name: "ana" }, reason: "not on main" })
    expect(Schema.is(Approval.DecidedData)({ id: "q", outcome: "allowed" })).toBe(false)
    expect(Schema.is(Approval.DecidedData)({ id: "q", outcome: "allowed-once", by: { kind: "robot" } })).toBe(false)
    expect(Approval.Outcome.literals.filter(Approval.isAllowed)).toEqual(["allowed-once", "allowed-always"])
  })
})

describe("Approval.openQuestions", () => {
  it("lists the questions without a decision, in the order asked, with the seq and time of the question", () => {
    const log = events(opening, asked("q2", "c2", "clock"), decided("q2", "rejected"))
    expect(Approval.openQuestions(log)).toEqual([
      { id: "q1", toolName: "bash", callId: "c1", reason: "writes a file", seq: 7, time: 70 }
    ])
    expect(Approval.openQuestions(events(opening, decided("q1", "allowed-once")))).toEqual([])
  })
})

describe("Invariant.check of approvals", () => {
  it("a question decided before its call's result, in a closed step: no violation", () => {
    const log = events(
      opening,
      decided("q1", "allowed-once", { by: { kind: "person" } }),
      toolResult(1, 1, "c1", "written"),
      toolResult(1, 1, "c2", "12:00"),
      stepEnd(1, 1),
      closing
    )
    expect(Invariant.check(log)).toEqual([])
  })

  it("a log that stops while a question is open (a crash, or a person not yet answered): no violation", () => {
    expect(Invariant.check(events(opening))).toEqual([])
  })

  it("names each broken rule: the result before the decision, a step ended with a question open, two decisions, two questions, strangers", () => {
    const resultFirst = events(
      opening,
      toolResult(1, 1, "c1", "written"),
      decided("q1", "allowed-once"),
      toolResult(1, 1, "c2", "12:00"),
      stepEnd(1, 1)
    )
    expect(Invariant.check(resultFirst)).toEqual([
      { seq: 9, rule: 3, message: "tool/result c1 before approval q1 is decided" }
    ])
    const stepEndsOpen = events(opening, toolResult(1, 1, "c2", "12:00"), stepEnd(1, 1))
    expect(Invariant.check(stepEndsOpen)).toEqual([
      { seq: 10, rule: 3, message: "tool/call c1 has no tool/result before step/end" }
    ])
    const twice = events(
      opening,
      decided("q1", "allowed-once"),
      decided("q1", "rejected"),
      asked("q1", "c2"),
      asked("q3", "c1"),
      asked("q4", "c9"),
      decided("q5", "rejected"),
      decided("q4", "maybe")
    )
    expect(Invariant.check(twice)).toEqual([
      { seq: 10, rule: 3, message: "approval/decided q1 decides a question a second time" },
      { seq: 11, rule: 3, message: "approval/asked q1 is asked a second time" },
      { seq: 12, rule: 3, message: "approval/asked q3 is a second question about c1" },
      { seq: 13, rule: 3, message: "approval/asked q4 names c9, not a tool/call of this step" },
      { seq: 14, rule: 3, message: "approval/decided q5 names no question asked before it" },
      {
        seq: 15,
        rule: 3,
        message:
          "approval/decided data is not {id, outcome, by?, reason?} with a known outcome: {\"id\":\"q4\",\"outcome\":\"maybe\"}"
      }
    ])
    const outside = events(
      opening.slice(0, 3),
      asked("q1", "c1"),
      foreign("approval/asked", { id: 5 })
    )
    expect(Invariant.check(outside)).toEqual([
      { seq: 3, rule: 2, message: "approval/asked q1 outside an open step" },
      { seq: 4, rule: 3, message: "approval/asked data is not {id, toolName, callId?, reason?}: {\"id\":5}" }
    ])
  })
})

describe("DSH's recorded logs with approvals", () => {
  it.effect("read as DSH wrote them: the pair after the tool/call and before its result, valid, nothing left open", () =>
    Effect.gen(function*() {
      for (
        const [file, toolName, outcome] of [
          ["acp__escalation-rejected__session.jsonl", "bash", "rejected"],
          ["acp__fs-escalation-approved__session.jsonl", "write", "allowed-once"]
        ] as const
      ) {
        const log = yield* Effect.promise(() => readDsh(file))
        const around = log.events.flatMap((e, i) =>
          e.type === "approval/asked" ? log.events.slice(i - 1, i + 3).map((x) => x.type) : []
        )
        expect([file, around]).toEqual([file, ["tool/call", "approval/asked", "approval/decided", "tool/result"]])
        const asked = log.events.filter((e) => e.type === "approval/asked").map((e) =>
          Schema.decodeUnknownSync(Approval.AskedData)(e.data)
        )
        const decided = log.events.filter((e) => e.type === "approval/decided").map((e) =>
          Schema.decodeUnknownSync(Approval.DecidedData)(e.data)
        )
        expect([file, asked.map((q) => q.toolName), decided.map((d) => [d.id === asked[0]!.id, d.outcome])]).toEqual([
          file,
          [toolName],
          [[true, outcome]]
        ])
        expect([file, Invariant.check(log.events, { header: log.header })]).toEqual([file, []])
        expect([file, Approval.openQuestions(log.events)]).toEqual([file, []])
        // Cut right after the question, as a crash while a person decides leaves it: one question open.
        const cut = log.events.slice(0, log.events.findIndex((e) => e.type === "approval/decided"))
        expect([file, Approval.openQuestions(cut).map((q) => [q.toolName, q.callId === undefined])]).toEqual([
          file,
          [[toolName, false]]
        ])
        expect([file, Invariant.check(cut, { header: log.header })]).toEqual([file, []])
      }
    }))
})

describe("the transcript of approvals", () => {
  it("an entry when asked and one when decided, each in its turn and step; the text names the tool, the outcome, who decided and why", () => {
    const log = events(
      opening,
      asked("q2", "c2", "clock"),
      decided("q1", "rejected-always", { by: { kind: "person", name: "ana" }, reason: "not on main" }),
      decided("q2", "allowed-once", { by: { kind: "policy", policy: "remembered" } }),
      decided("q9", "unavailable")
    )
    const entries = Transcript.fromEvents(log).filter((e) => e.kind === "approval")
    expect(entries).toEqual([
      {
        kind: "approval",
        event: "asked",
        turn: 1,
        step: 1,
        id: "q1",
        toolName: "bash",
        callId: "c1",
        reason: "writes a file"
      },
      { kind: "approval", event: "asked", turn: 1, step: 1, id: "q2", toolName: "clock", callId: "c2", reason: undefined },
      {
        kind: "approval",
        event: "decided",
        turn: 1,
        step: 1,
        id: "q1",
        toolName: "bash",
        callId: "c1",
        outcome: "rejected-always",
        by: { kind: "person", name: "ana" },
        reason: "not on main"
      },
      {
        kind: "approval",
        event: "decided",
        turn: 1,
        step: 1,
        id: "q2",
        toolName: "clock",
        callId: "c2",
        outcome: "allowed-once",
        by: { kind: "policy", policy: "remembered" },
        reason: undefined
      },
      {
        kind: "approval",
        event: "decided",
        turn: 1,
        step: 1,
        id: "q9",
        toolName: undefined,
        callId: undefined,
        outcome: "unavailable",
        by: undefined,
        reason: undefined
      }
    ])
    expect(TranscriptText.render(entries).split("\n")).toEqual([
      "── turn 1 ──",
      "? bash needs approval: writes a file",
      "? clock needs approval",
      "? bash: rejected always by ana: not on main",
      "? clock: allowed once by the policy remembered",
      "? question q9: unavailable (no one could answer; refused)",
      ""
    ])
  })

  it.effect("DSH's recorded approval, between the call and its result", () =>
    Effect.gen(function*() {
      const log = yield* Effect.promise(() => readDsh("acp__escalation-rejected__session.jsonl"))
      const lines = TranscriptText.render(Transcript.fromEvents(log.events)).split("\n")
      const at = lines.findIndex((l) => l.startsWith("? bash needs approval"))
      expect(lines.slice(at - 1, at + 3).map((l) => l.slice(0, 60))).toEqual([
        "→ bash({\"command\": \"printf 'escalated\\\\n' > /tmp/dsh-escalat",
        "? bash needs approval: escalate sandbox to danger-full-acces",
        "? bash: rejected",
        "← error: Error: the user rejected escalating this command to"
      ])
    }))
})
