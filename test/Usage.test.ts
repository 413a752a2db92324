/**
 * `Usage` (§18): the projections over a scripted log and over a real DSH v0 log (exact
 * sums per request, step, turn, session and model; the inherited prefix of a child session not
 * counted), cached tokens counted once, and the cost of a session by model (`Prices.costs`).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Prices from "../src/Prices.js"
import type { EventDraft } from "../src/SessionEvent.js"
import * as Usage from "../src/Usage.js"
import {
  assistant,
  claim,
  compactionStart,
  compactionSummary,
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

/** `assistant(...)` with a usage, and a response model when given. */
const answered = (draft: EventDraft, usage: Usage.Usage, responseModel?: string): EventDraft => ({
  ...draft,
  data: { ...(draft.data as object), usage, ...(responseModel === undefined ? {} : { response: { model: responseModel } }) }
} as EventDraft)

const t = (inputTokens: number, outputTokens: number, cacheReadTokens = 0, cacheWriteTokens = 0, reasoningTokens = 0) => ({
  inputTokens,
  outputTokens,
  cacheReadTokens,
  cacheWriteTokens,
  reasoningTokens
})

// Turn 1: a tool step (answered by a dated model) and a text step; a pressure compaction in turn
// 2 before its step, whose response reported no usage; turn 3 open with an interrupted prefix.
const LOG = events(
  followup(msg("u1", "hi")),
  turnStart(1), // 1
  claim("next-turn", 1),
  stepStart(1, 1), // 3
  entered(msg("u1", "hi")),
  answered(assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "read" }] }), {
    inputTokens: 1000,
    outputTokens: 50,
    cacheReadTokens: 600,
    reasoningTokens: 20
  }, "test-2024-08-06"), // 5
  toolCall(1, 1, "c1", "read"),
  toolResult(1, 1, "c1", "ok"),
  stepEnd(1, 1),
  stepStart(1, 2), // 9
  answered(assistant(1, 2, "done"), { inputTokens: 1100, outputTokens: 30, cacheWriteTokens: 100 }), // 10
  stepEnd(1, 2),
  turnEnd(1), // 12
  followup(msg("u2", "more")),
  turnStart(2), // 14
  claim("next-turn", 1),
  compactionStart("k1", 2), // 16
  {
    ...compactionSummary("k1", [4, 5]),
    data: {
      ...(compactionSummary("k1", [4, 5]).data as object),
      model: "summarizer",
      usage: { inputTokens: 400, outputTokens: 40 }
    }
  } as EventDraft, // 17
  { type: "compaction/end", data: { compactionId: "k1", turn: 2, outcome: "compacted", tokens: 100 } },
  stepStart(2, 1), // 19
  entered(msg("u2", "more")),
  assistant(2, 1, "no usage"), // 21
  stepEnd(2, 1),
  turnEnd(2, "completed"), // 23
  followup(msg("u3", "again")),
  turnStart(3), // 25
  claim("next-turn", 1),
  stepStart(3, 1), // 27
  entered(msg("u3", "again")),
  answered(assistant(3, 1, "cut", { interrupted: true }), { inputTokens: 7, outputTokens: 1 }) // 29
)

describe("Usage counts", () => {
  it("of/add/total: missing counts are 0, total = input + output (cache and reasoning are parts, not added)", () => {
    expect(Usage.of(undefined)).toEqual(Usage.zero)
    expect(Usage.of({ inputTokens: 10, outputTokens: -3, cacheReadTokens: Number.NaN })).toEqual(t(10, 0))
    expect(Usage.add({ inputTokens: 100, cacheReadTokens: 80, outputTokens: 9, reasoningTokens: 4 }, { inputTokens: 1 }))
      .toEqual(t(101, 9, 80, 0, 4))
    expect(Usage.total({ inputTokens: 100, cacheReadTokens: 80, cacheWriteTokens: 10, outputTokens: 9, reasoningTokens: 4 }))
      .toBe(109)
    // A DSH v0 usage counts the cache beside the input: cached tokens are added to it, once.
    expect(Usage.of({ inputTokens: 90, outputTokens: 28, cacheReadTokens: 1280, reasoningTokens: 25 }, { dsh: true }))
      .toEqual(t(1370, 28, 1280, 0, 25))
  })
})

describe("Usage.fromEvents over a scripted log", () => {
  const u = Usage.fromEvents(LOG)

  it("every model request, in log order, with its start time, model and kind", () => {
    expect(u.requests.map((r) => ({ ...r, usage: Usage.total(r.usage) }))).toEqual([
      {
        kind: "step",
        seq: 5,
        time: 50,
        startTime: 30,
        turn: 1,
        step: 1,
        provider: "test",
        model: "test-2024-08-06",
        usage: 1050,
        reported: true,
        interrupted: false
      },
      {
        kind: "step",
        seq: 10,
        time: 100,
        startTime: 90,
        turn: 1,
        step: 2,
        provider: "test",
        model: "test",
        usage: 1130,
        reported: true,
        interrupted: false
      },
      {
        kind: "compaction",
        seq: 17,
        time: 170,
        startTime: 160,
        turn: 2,
        step: undefined,
        provider: "test",
        model: "summarizer",
        usage: 440,
        reported: true,
        interrupted: false
      },
      {
        kind: "step",
        seq: 21,
        time: 210,
        startTime: 190,
        turn: 2,
        step: 1,
        provider: "test",
        model: "test",
        usage: 0,
        reported: false,
        interrupted: false
      },
      {
        kind: "step",
        seq: 29,
        time: 290,
        startTime: 270,
        turn: 3,
        step: 1,
        provider: "test",
        model: "test",
        usage: 8,
        reported: true,
        interrupted: true
      }
    ])
  })

  it("per step, per turn (by model, times, end), per session and per model", () => {
    expect(u.steps).toEqual([
      { turn: 1, step: 1, usage: t(1000, 50, 600, 0, 20), model: "test-2024-08-06", startTime: 30, endTime: 80 },
      { turn: 1, step: 2, usage: t(1100, 30, 0, 100), model: "test", startTime: 90, endTime: 110 },
      { turn: 2, step: 1, usage: Usage.zero, model: "test", startTime: 190, endTime: 220 },
      { turn: 3, step: 1, usage: t(7, 1), model: "test", startTime: 270, endTime: undefined }
    ])
    expect(u.turns).toEqual([
      {
        turn: 1,
        usage: t(2100, 80, 600, 100, 20),
        byModel: { "test-2024-08-06": t(1000, 50, 600, 0, 20), test: t(1100, 30, 0, 100) },
        steps: 2,
        requests: 2,
        unreported: 0,
        subagents: Usage.noSubagents,
        startTime: 10,
        endTime: 120,
        end: { kind: "completed" }
      },
      {
        turn: 2,
        usage: t(400, 40),
        byModel: { summarizer: t(400, 40), test: Usage.zero },
        steps: 1,
        requests: 2,
        unreported: 1,
        subagents: Usage.noSubagents,
        startTime: 140,
        endTime: 230,
        end: { kind: "completed" }
      },
      {
        turn: 3,
        usage: t(7, 1),
        byModel: { test: t(7, 1) },
        steps: 1,
        requests: 1,
        unreported: 0,
        subagents: Usage.noSubagents,
        startTime: 250,
        endTime: undefined,
        end: undefined
      }
    ])
    expect(u.usage).toEqual(t(2507, 121, 600, 100, 20))
    expect(u.unreported).toBe(1)
    expect(u.byModel).toEqual({
      "test-2024-08-06": t(1000, 50, 600, 0, 20),
      test: t(1107, 31, 0, 100),
      summarizer: t(400, 40)
    })
    // The projector gives the same at every prefix as fromEvents of that prefix.
    const p = Usage.projector()
    LOG.forEach((e, i) => {
      p.push(e)
      if (i % 7 === 0) expect(p.result().usage).toEqual(Usage.fromEvents(LOG.slice(0, i + 1)).usage)
    })
  })

  it("the cost of the session by model: priced models summed, a model without a price unknown (never 0)", () => {
    const prices = { test: { input: 3, cachedInput: 0.3, cacheWrite: 3.75, output: 15 }, summarizer: { input: 1, output: 2 } }
    const c = Prices.costs(prices, u.byModel)
    // test-2024-08-06 by the prefix "test": 400·3 + 600·0.3 + 50·15 = 2130; test: 1007·3 + 100·3.75 + 31·15 = 3861;
    // summarizer: 400·1 + 40·2 = 480 (micro-USD).
    expect(c.byModel["test-2024-08-06"]).toBeCloseTo(0.00213, 15)
    expect(c.byModel["test"]).toBeCloseTo(0.003861, 15)
    expect(c.byModel["summarizer"]).toBeCloseTo(0.00048, 15)
    expect(c.total).toBeCloseTo(0.006471, 15)
    expect(c.unpriced).toEqual([])
    const partial = Prices.costs({ test: prices.test }, u.byModel)
    expect(partial.total).toBeUndefined()
    expect(partial.unpriced).toEqual(["summarizer"])
    expect(partial.known).toBeCloseTo(0.005991, 15)
    // A model that answered with no usage (0 tokens) and has no price: the cost is unknown, not $0.
    const unpriced = Prices.costs({ test: prices.test }, { test: Usage.zero, offline: Usage.zero })
    expect(unpriced).toEqual({ total: undefined, known: 0, byModel: { test: 0, offline: undefined }, unpriced: ["offline"] })
  })
})

describe("Usage.fromEvents: sub-agents from the parent's own subagent/end events (§27)", () => {
  const end = (id: string, callId: string, stopReason: string, spent: Record<string, unknown>) =>
    foreign("subagent/end", { runId: `r-${id}`, provider: "spawn", id, local: true, callId, stopReason, ...spent })
  // Turn 1: a step that delegates twice (one child priced by model, one that never ran), then
  // answers; turn 2: a child of an older log whose end has a usage but no byModel.
  const PARENT = events(
    followup(msg("u1", "go")),
    turnStart(1), // 1
    claim("next-turn", 1),
    stepStart(1, 1),
    entered(msg("u1", "go")),
    answered(assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "subagent" }] }), t(100, 10)), // 5
    toolCall(1, 1, "c1", "subagent"),
    end("k1", "c1", "completed", {
      usage: t(500, 50, 200),
      byModel: { small: t(300, 30, 200), big: t(200, 20) },
      unreported: 1
    }), // 7
    end("k2", "c2", "error", {}),
    toolResult(1, 1, "c1", "ok"),
    stepEnd(1, 1),
    stepStart(1, 2), // 11
    answered(assistant(1, 2, "done"), t(150, 5)),
    stepEnd(1, 2),
    turnEnd(1), // 14
    turnStart(2),
    end("k3", "c3", "aborted", { usage: t(40, 4) }), // 16
    turnEnd(2)
  )
  const u = Usage.fromEvents(PARENT)

  it("the runs, their sums per session and per turn, apart from the session's own requests; withSubagents adds them", () => {
    const k1 = {
      seq: 7,
      id: "k1",
      callId: "c1",
      turn: 1,
      stopReason: "completed",
      usage: t(500, 50, 200),
      byModel: { small: t(300, 30, 200), big: t(200, 20) },
      unreported: 1,
      reported: true
    }
    const k2 = {
      seq: 8,
      id: "k2",
      callId: "c2",
      turn: 1,
      stopReason: "error",
      usage: Usage.zero,
      byModel: {},
      unreported: 0,
      reported: false
    }
    const k3 = {
      seq: 16,
      id: "k3",
      callId: "c3",
      turn: 2,
      stopReason: "aborted",
      usage: t(40, 4),
      byModel: { unknown: t(40, 4) },
      unreported: 0,
      reported: true
    }
    expect(u.subagents).toEqual({
      usage: t(540, 54, 200),
      byModel: { small: t(300, 30, 200), big: t(200, 20), unknown: t(40, 4) },
      unreported: 1,
      runs: [k1, k2, k3]
    })
    expect(u.turns.map((turn) => turn.subagents)).toEqual([
      { usage: t(500, 50, 200), byModel: k1.byModel, unreported: 1, runs: [k1, k2] },
      { usage: t(40, 4), byModel: k3.byModel, unreported: 0, runs: [k3] }
    ])
    // The session's own requests only: the 2 responses.
    expect([u.usage, u.byModel, u.unreported, u.requests.length]).toEqual([t(250, 15), { test: t(250, 15) }, 0, 2])
    expect(Usage.withSubagents(u)).toEqual({
      usage: t(790, 69, 200),
      byModel: { test: t(250, 15), small: t(300, 30, 200), big: t(200, 20), unknown: t(40, 4) },
      unreported: 1
    })
    expect(Usage.withSubagents(u.turns[0]!)).toEqual({
      usage: t(750, 65, 200),
      byModel: { test: t(250, 15), small: t(300, 30, 200), big: t(200, 20) },
      unreported: 1
    })
    // A turn without children: its own.
    expect(Usage.withSubagents(Usage.fromEvents(LOG).turns[0]!).usage).toEqual(t(2100, 80, 600, 100, 20))
  })

  it("the projector's sub-agents at each prefix are fromEvents' of that prefix; the events before seedLength are not counted", () => {
    const p = Usage.projector()
    PARENT.forEach((e, i) => {
      p.push(e)
      expect(p.result().subagents).toEqual(Usage.fromEvents(PARENT.slice(0, i + 1)).subagents)
    })
    // A fork child whose seed is this log: the parent's children are not the child's.
    const seeded = Usage.fromEvents(PARENT, { seedLength: 17 })
    expect(seeded.subagents).toEqual(Usage.noSubagents)
  })
})

describe("Usage.fromEvents over DSH v0 logs (../shared/fixtures/dsh)", () => {
  it("acp__fs-delete-recreate: 5 requests of deepseek-v4-flash, DSH input counted with its cache reads", async () => {
    const log = await readDsh("acp__fs-delete-recreate__session.jsonl")
    const u = Usage.fromEvents(log.events, { header: log.header })
    // DSH input (cache misses) + cache reads: 6102+0, 151+6144, 101+6272, 79+6400, 88+6528.
    expect(u.requests.map((r) => r.usage.inputTokens)).toEqual([6102, 6295, 6373, 6479, 6616])
    expect(u.requests.map((r) => r.model)).toEqual(Array(5).fill("deepseek-v4-flash"))
    expect(u.usage).toEqual(t(31865, 286, 25344, 0, 64))
    expect(u.byModel).toEqual({ "deepseek-v4-flash": t(31865, 286, 25344, 0, 64) })
    expect(u.turns.map((x) => [x.turn, x.steps, x.requests, Usage.total(x.usage), x.end])).toEqual([
      [1, 5, 5, 32151, { kind: "completed" }]
    ])
    // Read as our own log, the same file would count the cache reads inside the input.
    expect(Usage.fromEvents(log.events, { dsh: false }).usage.inputTokens).toBe(31865 - 25344)
  })

  it("a child session does not count its inherited prefix (seedLength)", async () => {
    const log = await readDsh("acp__subagent-fork-in-process__session.1.jsonl")
    const all = Usage.fromEvents(log.events, { header: log.header, seedLength: 0 })
    const own = Usage.fromEvents(log.events, { header: log.header })
    expect(log.header.seedLength).toBe(42)
    expect([all.requests.length, own.requests.length]).toEqual([2, 1])
    expect(own.requests.map((r) => r.seq >= 42)).toEqual([true])
  })
})
