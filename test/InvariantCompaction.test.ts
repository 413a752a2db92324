/**
 * The compaction bracket in `Invariant.check` (rules 1, 2, 4), §17: hand-built logs, exact
 * violations (crash repair of open brackets: test/Resume.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Invariant from "../src/Invariant.js"
import type { EventDraft } from "../src/SessionEvent.js"
import {
  assistant,
  cancel,
  checkpoint as checkpointEvent,
  claim,
  compactionEnd,
  compactionStart,
  compactionSummary,
  entered,
  events,
  followup,
  msg,
  steer,
  stepEnd,
  stepStart,
  toolCall,
  toolResult,
  turnEnd,
  turnStart
} from "./utils/events.js"

const start = compactionStart
const summary = compactionSummary
const end = (id: string, turn: number | null, outcome = "compacted"): EventDraft =>
  compactionEnd(id, turn, outcome as Parameters<typeof compactionEnd>[2])
/** A checkpoint `cp.<id>` over `from..to`, its source naming `compactionId`. */
const checkpoint = (id: string, from: number, to: number, compactionId = id): EventDraft =>
  checkpointEvent(id, `cp.${id}`, from, to, { kind: "plugin", plugin: "compact", compactionId })

/** Turn 1 (seqs 0–7): a prompt and an answer; its messages are seqs 4 and 5. */
const turn1: ReadonlyArray<EventDraft> = [
  followup(msg("u1", "one")),
  turnStart(1),
  claim("next-turn", 1),
  stepStart(1, 1),
  entered(msg("u1", "one")),
  assistant(1, 1, "ok"),
  stepEnd(1, 1),
  turnEnd(1)
]

const check = (...drafts: ReadonlyArray<EventDraft | ReadonlyArray<EventDraft>>) => Invariant.check(events(...drafts))

describe("Invariant.check: compaction brackets", () => {
  it("valid brackets: pressure after the claim, between steps, overflow inside a step, manual between turns, aborted by a cancel", () => {
    // pressure at turn start
    expect(
      check(
        turn1,
        followup(msg("u2", "two")),
        turnStart(2),
        claim("next-turn", 1),
        start("c1", 2),
        summary("c1", [4, 5]),
        checkpoint("c1", 4, 5),
        end("c1", 2),
        stepStart(2, 1),
        entered(msg("u2", "two")),
        assistant(2, 1, "ok"),
        stepEnd(2, 1),
        turnEnd(2)
      )
    ).toEqual([])
    // between steps of a tool turn, with a steer spliced in during it and claimed after
    expect(check(
      turn1,
      followup(msg("u2", "two")),
      turnStart(2),
      claim("next-turn", 1),
      stepStart(2, 1),
      entered(msg("u2", "two")),
      assistant(2, 1, undefined, { toolCalls: [{ id: "t", name: "x" }] }),
      toolCall(2, 1, "t", "x"),
      toolResult(2, 1, "t", "r"),
      stepEnd(2, 1),
      start("c1", 2),
      steer(msg("s", "steer")),
      summary("c1", [4, 5]),
      checkpoint("c1", 4, 5),
      end("c1", 2),
      claim("next-step", 1),
      stepStart(2, 2),
      entered(msg("s", "steer")),
      assistant(2, 2, "done"),
      stepEnd(2, 2),
      turnEnd(2)
    )).toEqual([])
    // overflow: inside the step, before its assistant/message
    expect(
      check(
        turn1,
        followup(msg("u2", "two")),
        turnStart(2),
        claim("next-turn", 1),
        stepStart(2, 1),
        entered(msg("u2", "two")),
        start("c1", 2, "overflow"),
        summary("c1", [4, 5]),
        checkpoint("c1", 4, 5),
        end("c1", 2),
        assistant(2, 1, "ok"),
        stepEnd(2, 1),
        turnEnd(2)
      )
    ).toEqual([])
    // manual, between turns
    expect(check(turn1, start("c1", null, "manual"), summary("c1", [4, 5]), checkpoint("c1", 4, 5), end("c1", null))).toEqual([])
    // a cancel: the bracket ends aborted before the turn ends
    expect(
      check(
        turn1,
        followup(msg("u2", "two")),
        turnStart(2),
        claim("next-turn", 1),
        start("c1", 2),
        end("c1", 2, "aborted"),
        turnEnd(2, { kind: "aborted", reason: { kind: "user" } })
      )
    ).toEqual([])
    // a log that ends inside a bracket (a crash) is not a violation by itself
    expect(check(turn1, start("c1", null, "manual"))).toEqual([])
  })

  it("rule 1: brackets do not nest, name the open one, and no turn or step event comes while one is open", () => {
    expect(check(turn1, start("c1", null), start("c2", null), end("c2", null))).toEqual([
      { seq: 9, rule: 1, message: "compaction/start c2 while compaction c1 is open" }
    ])
    expect(check(turn1, end("c1", null))).toEqual([
      { seq: 8, rule: 1, message: "compaction/end c1 while no compaction is open" }
    ])
    expect(check(turn1, start("c1", null), summary("c2", [4]), end("c1", 3))).toEqual([
      { seq: 9, rule: 1, message: "compaction/summary c2 while compaction c1 is open" },
      { seq: 10, rule: 1, message: "compaction/end c1 names turn 3 but its start named null" }
    ])
    expect(
      check(
        turn1,
        followup(msg("u2", "two")),
        turnStart(2),
        claim("next-turn", 1),
        start("c1", 2),
        stepStart(2, 1),
        entered(msg("u2", "two")),
        end("c1", 2),
        assistant(2, 1, "ok"),
        stepEnd(2, 1),
        turnEnd(2)
      )
    ).toEqual([
      { seq: 12, rule: 1, message: "step/start while compaction c1 is open" },
      { seq: 13, rule: 2, message: "user/message u2 while compaction c1 is open (only its checkpoints)" }
    ])
    expect(check(turn1, followup(msg("u2", "two")), turnStart(2), claim("next-turn", 1), start("c1", 2), turnEnd(2))).toEqual([
      { seq: 12, rule: 1, message: "turn/end while compaction c1 is open" }
    ])
  })

  it("rule 2: the turn it names, not after the step's response, no model or tool event inside, checkpoints only inside with its source", () => {
    expect(check(turn1, start("c1", 1))).toEqual([
      { seq: 8, rule: 2, message: "compaction/start c1 names turn 1 but no turn is open" }
    ])
    expect(
      check(
        turn1,
        followup(msg("u2", "two")),
        turnStart(2),
        claim("next-turn", 1),
        start("c1", null),
        end("c1", null),
        turnEnd(2)
      )
    ).toEqual([
      { seq: 11, rule: 2, message: "compaction/start c1 names turn null but turn 2 is open" }
    ])
    expect(
      check(
        turn1,
        followup(msg("u2", "two")),
        turnStart(2),
        claim("next-turn", 1),
        stepStart(2, 1),
        entered(msg("u2", "two")),
        assistant(2, 1, "ok"),
        start("c1", 2),
        end("c1", 2),
        stepEnd(2, 1),
        turnEnd(2)
      )
    ).toEqual([
      { seq: 14, rule: 2, message: "compaction/start c1 after the assistant/message of step 1" }
    ])
    expect(
      check(
        turn1,
        followup(msg("u2", "two")),
        turnStart(2),
        claim("next-turn", 1),
        stepStart(2, 1),
        entered(msg("u2", "two")),
        start("c1", 2, "overflow"),
        assistant(2, 1, "ok"),
        end("c1", 2),
        stepEnd(2, 1),
        turnEnd(2)
      )
    ).toEqual([
      { seq: 14, rule: 2, message: "assistant/message while compaction c1 is open" }
    ])
    expect(
      check(
        turn1,
        followup(msg("u2", "two")),
        turnStart(2),
        claim("next-turn", 1),
        stepStart(2, 1),
        start("c1", 2, "overflow"),
        entered(msg("u2", "two")),
        end("c1", 2),
        assistant(2, 1, "ok"),
        stepEnd(2, 1),
        turnEnd(2)
      )
    ).toEqual([
      { seq: 13, rule: 2, message: "user/message u2 while compaction c1 is open (only its checkpoints)" }
    ])
    expect(check(turn1, checkpoint("c1", 4, 5))).toEqual([
      { seq: 8, rule: 2, message: "checkpoint user/message cp.c1 outside a compaction" }
    ])
    expect(check(turn1, start("c1", null), checkpoint("c1", 4, 5, "other"), end("c1", null))).toEqual([
      { seq: 9, rule: 2, message: "checkpoint user/message cp.c1 does not name compaction c1 as its source" }
    ])
  })

  it("a checkpoint names seqs of model-visible messages not replaced yet; compaction/end names a known outcome", () => {
    expect(check(turn1, start("c1", null), checkpoint("c1", 9999, 10000), end("c1", null))).toEqual([
      {
        seq: 9,
        rule: 2,
        message: "checkpoint user/message cp.c1 replaces 9999..10000, which are not seqs of model-visible messages on the surface"
      }
    ])
    // seq 3 is step/start, not a message; seq 4 was replaced by the first checkpoint.
    expect(check(turn1, start("c1", null), checkpoint("c1", 3, 5), end("c1", null))).toEqual([
      {
        seq: 9,
        rule: 2,
        message: "checkpoint user/message cp.c1 replaces 3..5, which are not seqs of model-visible messages on the surface"
      }
    ])
    expect(
      check(
        turn1,
        start("c1", null),
        checkpoint("c1", 4, 5),
        end("c1", null),
        start("c2", null),
        checkpoint("c2", 4, 4),
        end("c2", null)
      )
    ).toEqual([
      {
        seq: 12,
        rule: 2,
        message: "checkpoint user/message cp.c2 replaces 4..4, which are not seqs of model-visible messages on the surface"
      }
    ])
    expect(check(turn1, start("c1", null), end("c1", null, "bogus"))).toEqual([
      {
        seq: 9,
        rule: 1,
        message: "compaction/end c1 has outcome \"bogus\", not one of compacted, skipped, aborted, failed, interrupted"
      }
    ])
  })

  it("rule 4: no claim while a compaction is open; deliveries and canceled splices are fine", () => {
    expect(
      check(turn1, followup(msg("u2", "two")), turnStart(2), start("c1", 2), claim("next-turn", 1), end("c1", 2), turnEnd(2))
    ).toEqual([
      { seq: 11, rule: 4, message: "claim of next-turn while compaction c1 is open" }
    ])
    expect(check(turn1, start("c1", null), followup(msg("u2", "two")), cancel("next-turn", 0, 1), end("c1", null, "aborted")))
      .toEqual([])
  })
})
