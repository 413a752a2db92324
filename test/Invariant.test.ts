import { describe, expect, it } from "@effect/vitest"
import * as Invariant from "../src/Invariant.js"
import type { EventDraft, SessionEvent } from "../src/SessionEvent.js"
import {
  assistant,
  cancel,
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
  splice,
  steer,
  stepEnd,
  stepStart,
  toolCall,
  toolResult,
  turnEnd,
  turnStart
} from "./utils/events.js"

const m = (id: string) => msg(id, `text of ${id}`)
const header = (turn: number, step: number): EventDraft => ({
  type: "request/header",
  data: { turn, step, provider: "test", model: "test", tools: [], settings: {} }
})

/** One complete turn entering `id` at step 1 (its followup first). */
const simpleTurn = (turn: number, id: string): Array<EventDraft> => [
  followup(m(id)),
  turnStart(turn),
  claim("next-turn", 1),
  stepStart(turn, 1),
  entered(m(id)),
  assistant(turn, 1, "ok"),
  stepEnd(turn, 1),
  turnEnd(turn)
]

const clean = events(
  // turn 1: context + prompt, a pre-step addition, two tool calls, a steer and a tool context
  followup(m("u1")),
  inject(ctx("i1", "fyi")),
  turnStart(1),
  claim("next-step", 1),
  claim("next-turn", 1),
  stepStart(1, 1),
  entered(ctx("i1", "fyi")),
  entered(m("u1")),
  entered(ctx("p1", "added by the pre-step", "scenario-pre-step")),
  header(1, 1),
  assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "wait" }, { id: "c2", name: "clock" }] }),
  toolCall(1, 1, "c1", "wait"),
  toolCall(1, 1, "c2", "clock"),
  steer(m("s1")),
  toolResult(1, 1, "c1", "waited"),
  splice("next-step", 0, 0, [msg("t1", "wait finished", { kind: "tool", callId: "c1" })]),
  toolResult(1, 1, "c2", "12:00"),
  foreign("netwatch/sample", { rtt: 3 }),
  followup(m("u2")),
  stepEnd(1, 1),
  claim("next-step", 2),
  stepStart(1, 2),
  entered(msg("t1", "wait finished", { kind: "tool", callId: "c1" })),
  entered(m("s1")),
  assistant(1, 2, "done"),
  stepEnd(1, 2),
  // u2 is pending: turn 2 follows at once (a plugin event may come between)
  turnEnd(1),
  foreign("title/set", { title: "network" }),
  turnStart(2),
  claim("next-turn", 1),
  stepStart(2, 1),
  entered(m("u2")),
  assistant(2, 1, "ok"),
  stepEnd(2, 1),
  turnEnd(2),
  // turn 3: blocked by the pre-step
  followup(m("u3")),
  turnStart(3),
  claim("next-turn", 1),
  turnEnd(3, "blocked"),
  // turn 4: cancel({keepInbox}) leaves u5 pending; not owed a turn until a new waking delivery
  followup(m("u4")),
  turnStart(4),
  claim("next-turn", 1),
  stepStart(4, 1),
  entered(m("u4")),
  followup(m("u5")),
  assistant(4, 1, "parti", { interrupted: true }),
  stepEnd(4, 1),
  turnEnd(4, "aborted"),
  inject(ctx("i3", "idle context")),
  followup(m("u6"), 1),
  turnStart(5),
  claim("next-step", 1),
  claim("next-turn", 1),
  stepStart(5, 1),
  entered(ctx("i3", "idle context")),
  entered(m("u5")),
  assistant(5, 1, "ok"),
  stepEnd(5, 1),
  turnEnd(5),
  turnStart(6),
  claim("next-turn", 1),
  stepStart(6, 1),
  entered(m("u6")),
  assistant(6, 1, "ok"),
  stepEnd(6, 1),
  turnEnd(6),
  // a cancel on an idle agent clears; a plugin replace keeps the id
  inject(ctx("i4", "old")),
  splice("next-step", 0, 1, [ctx("i4", "new")], { outcome: "canceled" }),
  cancel("next-step", 0, 1, { kind: "user" }),
  simpleTurn(7, "u7"),
  { type: "session/end-seed", data: {} }
)

describe("Invariant.check", () => {
  it("finds nothing in a valid log", () => {
    expect(Invariant.check(clean)).toEqual([])
  })

  describe("rule 1: seq, turn and step structure", () => {
    it("seq must be contiguous", () => {
      const log = events(simpleTurn(1, "u1")).filter((e) => e.seq !== 5)
      expect(Invariant.check(log)).toEqual([{ seq: 6, rule: 1, message: "seq 6 where 5 was expected" }])
    })

    it("turns are numbered 1, 2, …", () => {
      const log = events(simpleTurn(2, "u1"))
      expect(Invariant.check(log)).toEqual([
        { seq: 1, rule: 1, message: "turn/start of turn 2 where turn 1 was expected" }
      ])
    })

    it("turn/start only when no turn is open", () => {
      const log = events(followup(m("u1")), turnStart(1), turnStart(2), turnEnd(2))
      expect(Invariant.check(log)).toEqual([{ seq: 2, rule: 1, message: "turn/start of turn 2 while turn 1 is open" }])
    })

    it("turn/end names the open turn, with no step open", () => {
      expect(Invariant.check(events(turnStart(1), turnEnd(2)))).toEqual([
        { seq: 1, rule: 1, message: "turn/end names turn 2 but turn 1 is open" }
      ])
      expect(Invariant.check(events(turnStart(1), stepStart(1, 1), turnEnd(1)))).toEqual([
        { seq: 2, rule: 1, message: "turn/end of turn 1 while step 1 is open" }
      ])
    })

    it("steps are numbered 1, 2, … within a turn and step/end names the open step", () => {
      expect(Invariant.check(events(turnStart(1), stepStart(1, 2), stepEnd(1, 2), turnEnd(1)))).toEqual([
        { seq: 1, rule: 1, message: "step/start of step 2 where step 1 was expected" }
      ])
      expect(Invariant.check(events(turnStart(1), stepStart(1, 1), stepEnd(1, 2), turnEnd(1)))).toEqual([
        { seq: 2, rule: 1, message: "step/end names turn 1 step 2 but turn 1 step 1 is open" }
      ])
    })
  })

  describe("rule 2: enclosure", () => {
    it("assistant/message only inside the open step", () => {
      const log = events(turnStart(1), stepStart(1, 1), stepEnd(1, 1), assistant(1, 1, "late"), turnEnd(1))
      expect(Invariant.check(log)).toEqual([{ seq: 3, rule: 2, message: "assistant/message outside an open step" }])
    })

    it("a tool/call naming another step", () => {
      const log = events(
        turnStart(1),
        stepStart(1, 1),
        toolCall(1, 2, "c1", "wait"),
        toolResult(1, 1, "c1", "ok"),
        stepEnd(1, 1),
        turnEnd(1)
      )
      expect(Invariant.check(log)).toEqual([
        { seq: 2, rule: 2, message: "tool/call names turn 1 step 2 but turn 1 step 1 is open" }
      ])
    })

    it("user/message only inside the open step (not checked for DSH v0)", () => {
      const log = events(turnStart(1), entered(ctx("x", "x")), turnEnd(1))
      expect(Invariant.check(log)).toEqual([{ seq: 1, rule: 2, message: "user/message x outside an open step" }])
      expect(Invariant.check(log, { dsh: true })).toEqual([])
    })

    it("request/header only inside a turn", () => {
      expect(Invariant.check(events(header(1, 1)))).toEqual([
        { seq: 0, rule: 2, message: "request/header outside a turn" }
      ])
    })
  })

  describe("rule 3: tool calls and results", () => {
    const step = (...inner: Array<EventDraft>) =>
      events(
        turnStart(1),
        stepStart(1, 1),
        assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "a" }, { id: "c2", name: "b" }] }),
        ...inner,
        stepEnd(1, 1),
        turnEnd(1)
      )

    it("a tool/result pairs with a tool/call of the same step", () => {
      expect(Invariant.check(step(toolResult(1, 1, "c1", "ok")))).toEqual([
        { seq: 3, rule: 3, message: "tool/result c1 has no tool/call in this step" }
      ])
    })

    it("every tool/call has its tool/result before step/end (DSH allows unresolved calls)", () => {
      const log = step(toolCall(1, 1, "c1", "a"), toolCall(1, 1, "c2", "b"), toolResult(1, 1, "c1", "ok"))
      expect(Invariant.check(log)).toEqual([
        { seq: 6, rule: 3, message: "tool/call c2 has no tool/result before step/end" }
      ])
      expect(Invariant.check(log, { dsh: true })).toEqual([])
    })

    it("results come in the order of the calls", () => {
      const log = step(
        toolCall(1, 1, "c1", "a"),
        toolCall(1, 1, "c2", "b"),
        toolResult(1, 1, "c2", "ok"),
        toolResult(1, 1, "c1", "ok")
      )
      expect(Invariant.check(log)).toEqual([
        { seq: 6, rule: 3, message: "tool/result c1 is out of the order of the calls" }
      ])
    })

    it("DSH: a TOOL_NOT_STARTED repair result needs no call", () => {
      const log = step(toolResult(1, 1, "c1", "not started", { name: "RepairError", code: "TOOL_NOT_STARTED" }))
      expect(Invariant.check(log, { dsh: true })).toEqual([])
      expect(Invariant.check(log)).toEqual([{ seq: 3, rule: 3, message: "tool/result c1 has no tool/call in this step" }])
    })
  })

  describe("rule 4: splices", () => {
    it("coordinates in range of the replayed inbox", () => {
      const log = events(followup(m("u1")), splice("next-turn", 2, 0, [m("u2")]))
      expect(Invariant.check(log)).toEqual([
        { seq: 1, rule: 4, message: "splice on next-turn at start 2 removing 0 is out of range of 1 pending items" }
      ])
    })

    it("ids unique per session (DSH: among pending items only)", () => {
      const log = events(simpleTurn(1, "u1"), inject(m("u1")))
      expect(Invariant.check(log)).toEqual([
        { seq: 8, rule: 4, message: "message id u1 is already used in this session" }
      ])
      expect(Invariant.check(log, { dsh: true })).toEqual([])
      expect(Invariant.check(events(inject(m("x")), inject(m("x"))), { dsh: true })).toEqual([
        { seq: 1, rule: 4, message: "message id x is already pending" }
      ])
    })

    it("claims only inside a turn, before its first step or between steps", () => {
      expect(Invariant.check(events(followup(m("u1")), claim("next-turn", 1)))).toEqual([
        { seq: 1, rule: 4, message: "claim of next-turn outside a turn" }
      ])
      const log = events(
        followup(m("u1")),
        turnStart(1),
        claim("next-turn", 1),
        stepStart(1, 1),
        entered(m("u1")),
        steer(m("s1")),
        claim("next-step", 1),
        entered(m("s1")),
        assistant(1, 1, "ok"),
        stepEnd(1, 1),
        turnEnd(1)
      )
      expect(Invariant.check(log)).toEqual([
        { seq: 6, rule: 4, message: "claim of next-step while step 1 of turn 1 is open" }
      ])
    })
  })

  describe("rule 5: no lost wake-up", () => {
    it("a non-aborted turn/end with a queued followup must be followed by turn/start", () => {
      // DSH's behaviour (§16, point 2): the blocked turn leaves u2 queued until some later send
      const log = events(
        followup(m("u1")),
        followup(m("u2"), 1),
        turnStart(1),
        claim("next-turn", 1),
        turnEnd(1, "blocked"),
        followup(m("u3"), 1),
        simpleTurn(2, "u2").slice(1)
      )
      expect(Invariant.check(log)).toEqual([
        {
          seq: 4,
          rule: 5,
          message: "turn/end at seq 4 left waking work pending but agent/inbox/spliced at seq 5 came before any turn/start"
        }
      ])
    })

    it("a pending steer is waking; injected context is not", () => {
      const steered = events(simpleTurn(1, "u1").slice(0, 7), steer(m("s1")), turnEnd(1), inject(m("i1")))
      expect(Invariant.check(steered).map((v) => [v.seq, v.rule])).toEqual([[8, 5]])
      const injected = events(simpleTurn(1, "u1").slice(0, 7), inject(m("s1")), turnEnd(1), inject(m("i1")))
      expect(Invariant.check(injected)).toEqual([])
    })

    it("excused when the log ends there, at a resume boundary, or after an aborted turn", () => {
      const pendingAtEnd = (reason: Parameters<typeof turnEnd>[1]) => [
        followup(m("u1")),
        followup(m("u2"), 1),
        turnStart(1),
        claim("next-turn", 1),
        turnEnd(1, reason)
      ]
      expect(Invariant.check(events(pendingAtEnd("blocked"), foreign("title/set")))).toEqual([])
      expect(Invariant.check(events(pendingAtEnd("error"), { type: "session/end-seed", data: {} }, inject(m("i")))))
        .toEqual([])
      expect(Invariant.check(events(pendingAtEnd("aborted"), inject(m("i")), followup(m("u3"), 1)))).toEqual([])
    })
  })

  describe("rule 6: entered messages were claimed or are new", () => {
    it("a pending message entered without a claim", () => {
      const log = events(
        inject(ctx("i1", "fyi")),
        followup(m("u1")),
        turnStart(1),
        claim("next-turn", 1),
        stepStart(1, 1),
        entered(m("u1")),
        entered(ctx("i1", "fyi")),
        assistant(1, 1, "ok"),
        stepEnd(1, 1),
        turnEnd(1)
      )
      expect(Invariant.check(log)).toEqual([
        { seq: 6, rule: 6, message: "user/message i1 was neither claimed in this turn nor new" }
      ])
    })

    it("a message entered twice", () => {
      const log = events(simpleTurn(1, "u1").slice(0, 5), entered(m("u1")), assistant(1, 1, "ok"), stepEnd(1, 1), turnEnd(1))
      expect(Invariant.check(log)).toEqual([
        { seq: 5, rule: 6, message: "user/message u1 was neither claimed in this turn nor new" }
      ])
    })
  })

  it("reports several violations sorted by seq", () => {
    const log = events(
      followup(m("u1")),
      followup(m("u2"), 1),
      turnStart(1),
      claim("next-turn", 1),
      turnEnd(1, "blocked"),
      assistant(1, 1, "stray"),
      turnStart(3)
    )
    expect(Invariant.check(log).map((v) => [v.seq, v.rule])).toEqual([[4, 5], [5, 2], [6, 1]])
  })
})

describe("Invariant.check on DSH v0 fixtures", () => {
  it("finds nothing with DSH's own rules in any fixture", async () => {
    const found: Array<[string, Array<Invariant.Violation>]> = []
    let checked = 0
    for (const name of dshFixtures) {
      const { events: log, header } = await readDsh(name)
      expect(header.version).toBe(0)
      const violations = Invariant.check(log, { header })
      if (violations.length > 0) found.push([name, violations])
      checked += log.length
    }
    expect(found).toEqual([])
    expect(checked).toBeGreaterThan(5000)
  })

  it("our stricter rules do flag DSH's own behaviour: a checkpoint with no compaction bracket, a staged context re-entered after its removal", async () => {
    const { events: log } = await readDsh("acp__agent-instructions__session.jsonl")
    expect(Invariant.check(log as Array<SessionEvent>, { dsh: false })).toEqual([
      // DSH logs its compaction checkpoint bare; ours sits in a compaction/start … end bracket (§17).
      { seq: 17, rule: 2, message: "checkpoint user/message 162c764f-f01d-484d-ad81-1481dc29792a outside a compaction" },
      {
        seq: 23,
        rule: 6,
        message: "user/message 09640903-80ea-4eb6-8635-90ddfb4e24e4 was neither claimed in this turn nor new"
      },
      {
        seq: 36,
        rule: 6,
        message: "user/message cd19663e-c8b5-46a5-9eeb-1386dcb1c609 was neither claimed in this turn nor new"
      }
    ])
  })
})
