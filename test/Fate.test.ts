import { describe, expect, it } from "@effect/vitest"
import {
  dropped as Dropped,
  dropReasonOfTurnEnd,
  entered as Entered,
  fateOf,
  fatesOf,
  pending as Pending,
  storiesOf
} from "../src/Delivery.js"
import { MutableInbox, replay as replayInbox } from "../src/Inbox.js"
import type { SessionEvent, SplicedData } from "../src/SessionEvent.js"
import {
  assistant,
  cancel,
  claim,
  ctx,
  dshFixtures,
  entered,
  events,
  followup,
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

const u1 = msg("u1", "first")
const u2 = msg("u2", "second")
const s1 = msg("s1", "also check B")
const i1 = ctx("i1", "fyi")

describe("fateOf", () => {
  it("a followup claimed and entered at step 1 is Entered {turn, step}", () => {
    const log = events(
      followup(u1),
      turnStart(1),
      claim("next-turn", 1),
      stepStart(1, 1),
      entered(u1),
      assistant(1, 1, "hi"),
      stepEnd(1, 1),
      turnEnd(1)
    )
    expect(fateOf(log, "u1")).toEqual({ _tag: "Entered", turn: 1, step: 1 })
  })

  it("a steer claimed between steps enters the next step", () => {
    const log = events(
      followup(u1),
      turnStart(1),
      claim("next-turn", 1),
      stepStart(1, 1),
      entered(u1),
      assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "wait" }] }),
      toolCall(1, 1, "c1", "wait"),
      steer(s1),
      toolResult(1, 1, "c1", "ok"),
      stepEnd(1, 1),
      claim("next-step", 1),
      stepStart(1, 2),
      entered(s1),
      assistant(1, 2, "done"),
      stepEnd(1, 2),
      turnEnd(1)
    )
    expect(fateOf(log, "s1")).toEqual(Entered(1, 2))
    expect(fateOf(log, "u1")).toEqual(Entered(1, 1))
  })

  it("a message still in the inbox, or claimed by a pre-step that has not decided, is Pending", () => {
    expect(fateOf(events(followup(u1)), "u1")).toEqual({ _tag: "Pending" })
    expect(fateOf(events(followup(u1), turnStart(1), claim("next-turn", 1)), "u1")).toEqual(Pending)
  })

  it("a message never inserted has no fate", () => {
    const log = events(
      followup(u1),
      turnStart(1),
      claim("next-turn", 1),
      stepStart(1, 1),
      entered(u1),
      entered(ctx("p1", "returned by the pre-step")),
      assistant(1, 1, "hi"),
      stepEnd(1, 1),
      turnEnd(1)
    )
    expect(fateOf(log, "p1")).toBeUndefined()
    expect(fateOf(log, "nope")).toBeUndefined()
  })

  it("canceled splices: cause disposed → disposed, another cause → canceled, no cause → discarded", () => {
    const log = events(
      inject(msg("a", "a")),
      inject(msg("b", "b")),
      inject(msg("c", "c")),
      cancel("next-step", 0, 1),
      cancel("next-step", 0, 1, { kind: "user" }),
      cancel("next-step", 0, 1, { kind: "disposed" })
    )
    expect(fateOf(log, "c")).toEqual({ _tag: "Dropped", reason: "discarded" })
    expect(fateOf(log, "b")).toEqual({ _tag: "Dropped", reason: "canceled" })
    expect(fateOf(log, "a")).toEqual({ _tag: "Dropped", reason: "disposed" })
  })

  it("a claimed message left out of the batch its pre-step entered is discarded", () => {
    const log = events(
      inject(i1),
      followup(u1),
      turnStart(1),
      claim("next-step", 1),
      claim("next-turn", 1),
      stepStart(1, 1),
      entered(u1),
      assistant(1, 1, "hi"),
      stepEnd(1, 1),
      turnEnd(1)
    )
    expect(fateOf(log, "i1")).toEqual(Dropped("discarded"))
    expect(fateOf(log, "u1")).toEqual(Entered(1, 1))
  })

  it("a pre-step that entered an empty batch discards the whole claim", () => {
    const log = events(
      followup(u1),
      turnStart(1),
      claim("next-turn", 1),
      stepStart(1, 1),
      assistant(1, 1, "hi"),
      stepEnd(1, 1),
      turnEnd(1)
    )
    expect(fateOf(log, "u1")).toEqual(Dropped("discarded"))
  })

  it("a claim whose pre-step never entered takes its turn's end reason", () => {
    const claimedThen = (reason: Parameters<typeof turnEnd>[1]) =>
      fateOf(events(followup(u1), turnStart(1), claim("next-turn", 1), turnEnd(1, reason)), "u1")
    expect(claimedThen("blocked")).toEqual(Dropped("rejected"))
    expect(claimedThen("error")).toEqual(Dropped("failed"))
    expect(claimedThen("aborted")).toEqual(Dropped("canceled"))
    expect(claimedThen({ kind: "aborted", reason: { kind: "disposed" } })).toEqual(Dropped("disposed"))
    expect(claimedThen("interrupted")).toEqual(Dropped("interrupted"))
    // the empty batch of §6.1: the turn closes completed with no step
    expect(claimedThen("completed")).toEqual(Dropped("discarded"))
  })

  it("a steer claimed between steps and rejected by the second pre-step is rejected", () => {
    const log = events(
      followup(u1),
      turnStart(1),
      claim("next-turn", 1),
      stepStart(1, 1),
      entered(u1),
      steer(s1),
      assistant(1, 1, "hi"),
      stepEnd(1, 1),
      claim("next-step", 1),
      turnEnd(1, "blocked")
    )
    expect(fateOf(log, "s1")).toEqual(Dropped("rejected"))
    expect(fateOf(log, "u1")).toEqual(Entered(1, 1))
  })

  it("a replace that keeps the id leaves the message pending (latest insertion wins)", () => {
    const log = events(
      inject(i1),
      splice("next-step", 0, 1, [ctx("i1", "fyi, corrected")], { outcome: "canceled" })
    )
    expect(fateOf(log, "i1")).toEqual(Pending)
  })
})

describe("fatesOf", () => {
  it("gives every inserted message its fate in one pass", () => {
    const log = events(
      followup(u1),
      followup(u2, 1),
      inject(i1),
      turnStart(1),
      claim("next-step", 1),
      claim("next-turn", 1),
      stepStart(1, 1),
      entered(i1),
      entered(u1),
      assistant(1, 1, "hi"),
      stepEnd(1, 1),
      turnEnd(1),
      turnStart(2),
      claim("next-turn", 1),
      turnEnd(2, "aborted"),
      inject(msg("late", "late"))
    )
    expect([...fatesOf(log)]).toEqual([
      ["u1", Entered(1, 1)],
      ["u2", Dropped("canceled")],
      ["i1", Entered(1, 1)],
      ["late", Pending]
    ])
  })

  it("skips the inherited prefix of a DSH child session (seedLength)", () => {
    const seed = events(
      followup(u1),
      turnStart(1),
      claim("next-turn", 1),
      stepStart(1, 1),
      entered(u1),
      assistant(1, 1, "ok"),
      stepEnd(1, 1),
      turnEnd(1),
      { type: "session/end-seed", data: {} },
      followup(u2),
      turnStart(2),
      claim("next-turn", 1),
      stepStart(2, 1),
      entered(u2),
      assistant(2, 1, "ok"),
      stepEnd(2, 1),
      turnEnd(2)
    )
    expect([...fatesOf(seed, { dsh: true, seedLength: 8 })]).toEqual([["u2", Entered(2, 1)]])
    expect([...fatesOf(seed)]).toEqual([["u1", Entered(1, 1)], ["u2", Entered(2, 1)]])
  })
})

describe("storiesOf", () => {
  it("each step of every message's life with the seq that proves it; the last step's fate is fatesOf's", () => {
    const log = events(
      followup(u1), // 0
      inject(i1), // 1
      turnStart(1), // 2
      claim("next-step", 1), // 3
      claim("next-turn", 1), // 4
      stepStart(1, 1), // 5
      entered(u1), // 6
      assistant(1, 1, "hi"), // 7: ends the batch: i1 was left out
      steer(s1), // 8
      stepEnd(1, 1), // 9
      claim("next-step", 1), // 10
      turnEnd(1, "blocked"), // 11
      followup(u2), // 12
      cancel("next-turn", 0, 1, { kind: "user" }) // 13
    )
    expect(Object.fromEntries(storiesOf(log))).toEqual({
      u1: [
        { what: "inserted", seq: 0, fate: Pending },
        { what: "claimed", seq: 4, fate: Pending },
        { what: "entered", seq: 6, fate: Entered(1, 1) }
      ],
      i1: [
        { what: "inserted", seq: 1, fate: Pending },
        { what: "claimed", seq: 3, fate: Pending },
        { what: "dropped", seq: 7, fate: Dropped("discarded") }
      ],
      s1: [
        { what: "inserted", seq: 8, fate: Pending },
        { what: "claimed", seq: 10, fate: Pending },
        { what: "dropped", seq: 11, fate: Dropped("rejected") }
      ],
      u2: [
        { what: "inserted", seq: 12, fate: Pending },
        { what: "dropped", seq: 13, fate: Dropped("canceled") }
      ]
    })
    const fates = fatesOf(log)
    for (const [id, steps] of storiesOf(log)) expect(steps.at(-1)!.fate).toEqual(fates.get(id))
  })

  it("on every DSH fixture, each message's last step is fatesOf's fate", async () => {
    for (const file of dshFixtures) {
      const log = await readDsh(file)
      const fates = fatesOf(log.events, { header: log.header })
      const stories = storiesOf(log.events, { header: log.header })
      expect([file, [...stories.keys()]]).toEqual([file, [...fates.keys()]])
      for (const [id, steps] of stories) expect([file, id, steps.at(-1)!.fate]).toEqual([file, id, fates.get(id)])
    }
  })
})

describe("dropReasonOfTurnEnd", () => {
  it("maps end reasons", () => {
    expect(dropReasonOfTurnEnd({ kind: "max-tokens" })).toBe("discarded")
    expect(dropReasonOfTurnEnd({ kind: "aborted", reason: { kind: "parent" } })).toBe("canceled")
  })
})

describe("replayInbox", () => {
  it("rebuilds both queues with waking flags: steer waking, inject not, a replace keeps the flag", () => {
    const log = events(
      followup(u1),
      followup(u2, 1),
      steer(s1),
      inject(i1, 1),
      splice("next-step", 0, 1, [msg("s1b", "check B, not C")], { outcome: "canceled" }),
      splice("next-step", 1, 1, [ctx("i1b", "fyi 2")], { outcome: "canceled" }),
      turnStart(1),
      claim("next-turn", 1)
    )
    const inbox = replayInbox(log)
    expect(inbox.nextTurn.map((m) => m.id)).toEqual(["u2"])
    expect(inbox.nextStep.map((p) => [p.message.id, p.waking])).toEqual([["s1b", true], ["i1b", false]])
  })

  it("DSH v0 next-step items are never waking", () => {
    const log = events(steer(s1))
    expect(replayInbox(log, { dsh: true }).nextStep).toEqual([{ message: s1, waking: false }])
    expect(replayInbox(log, { header: { type: "session", version: 0, id: "x", createdAt: 0 } }).nextStep[0]!.waking)
      .toBe(false)
  })

  it("MutableInbox reports out-of-range coordinates and clamps them", () => {
    const inbox = new MutableInbox()
    inbox.apply({ target: "next-turn", start: 0, inserted: [u1] })
    const applied = inbox.apply({ target: "next-turn", start: 0, removedCount: 3, inserted: [] })
    expect(applied.inRange).toBe(false)
    expect(applied.removed.map((p) => p.message.id)).toEqual(["u1"])
    expect(inbox.apply({ target: "next-step", start: 2, inserted: [i1] } as SplicedData).inRange).toBe(false)
    expect(inbox.nextStep.map((p) => p.message.id)).toEqual(["i1"])
    expect(inbox.hasWakingWork).toBe(false)
  })
})

describe("DSH v0 fixtures", () => {
  it("acp__cancel: the prompt entered turn 1 step 1 (the turn was then aborted)", async () => {
    const { events: log, header } = await readDsh("acp__cancel__session.jsonl")
    expect([...fatesOf(log, { header })]).toEqual([["f74653c2-8793-4004-ab0d-833a8dfd42bf", Entered(1, 1)]])
  })

  it("acp__agent-instructions: staged context removed with outcome canceled (no cause) is discarded", async () => {
    const { events: log, header } = await readDsh("acp__agent-instructions__session.jsonl")
    expect([...fatesOf(log, { header })]).toEqual([
      ["81078e7a-6837-45c2-a6b4-a5a3dfce0d4a", Entered(1, 1)],
      ["09640903-80ea-4eb6-8635-90ddfb4e24e4", Dropped("discarded")],
      ["cd19663e-c8b5-46a5-9eeb-1386dcb1c609", Dropped("discarded")]
    ])
  })

  it("acp__subagent-continuable.1: a followup claimed by a turn that failed before its step is failed", async () => {
    const { events: log, header } = await readDsh("acp__subagent-continuable__session.1.jsonl")
    expect([...fatesOf(log, { header })].map(([, fate]) => fate)).toEqual([
      Entered(1, 1),
      Entered(2, 1),
      Dropped("failed")
    ])
  })

  it("every message inserted after the seed has a fate; Pending exactly when still in the inbox", async () => {
    let inserted = 0
    for (const name of dshFixtures) {
      const { events: log, header } = await readDsh(name)
      const seed = header.seedLength ?? 0
      const ids = new Set<string>()
      for (const e of log) {
        if (e.type === "agent/inbox/spliced" && e.seq >= seed) {
          for (const m of (e as Extract<SessionEvent, { type: "agent/inbox/spliced" }>).data.inserted) ids.add(m.id)
        }
      }
      const fates = fatesOf(log, { header })
      const inbox = replayInbox(log, { header })
      const stillPending = new Set<string>([...inbox.nextTurn.map((m) => m.id), ...inbox.nextStep.map((p) => p.message.id)])
      expect([...fates.keys()].sort(), name).toEqual([...ids].sort())
      for (const [id, fate] of fates) {
        expect(fate._tag === "Pending", `${name} ${id}`).toBe(stillPending.has(id))
      }
      inserted += ids.size
    }
    expect(inserted).toBe(94)
  })
})
