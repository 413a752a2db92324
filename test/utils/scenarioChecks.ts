/**
 * Checks of a scenario run (§12, §15, §17) shared by the scenario and property
 * tests: the brief log with the compaction bracket spelled out, the fates, the requests against
 * the log's history at each point, and what each compaction did to the model's view.
 */
import { expect } from "@effect/vitest"
import * as Compaction from "../../src/Compaction.js"
import * as Delivery from "../../src/Delivery.js"
import * as History from "../../src/History.js"
import * as Invariant from "../../src/Invariant.js"
import type { Message } from "../../src/Message.js"
import type * as Scenario from "../../src/Scenario.js"
import type { SessionEvent } from "../../src/SessionEvent.js"
import * as Simulator from "../../src/Simulator.js"
import { brief, text } from "./agent.js"

/**
 * `brief` with the compaction bracket spelled out: `compaction/start TURN REASON TOKENS`,
 * `compaction/summary SUMMARY [SEQS] TOKENS`, `checkpoint START..END TEXT` (the summary prefix
 * cut), `compaction/end OUTCOME [TOKENS] [ERROR CODE]`. `labels` replaces long texts by a name.
 */
export const briefLog = (
  events: ReadonlyArray<SessionEvent>,
  labels: Readonly<Record<string, string>> = {}
): Array<string> => {
  const label = (s: string) => {
    let out = s
    for (const [long, name] of Object.entries(labels)) out = out.split(long).join(name)
    return out
  }
  return brief(events).map((line, i) => {
    const e = events[i]!
    const d = e.data as any
    if (e.type === "compaction/start") return `compaction/start ${d.turn} ${d.reason} ${d.tokens}`
    if (e.type === "compaction/summary") {
      return label(`compaction/summary ${d.summary} [${d.shadowedSeqs.join(",")}] ${d.shadowedTokenCount}`)
    }
    if (e.type === "compaction/end") {
      return `compaction/end ${d.outcome}${d.tokens !== undefined ? ` ${d.tokens}` : ""}${
        d.error !== undefined ? ` ${d.error.code}` : ""
      }`
    }
    const op = (e as { readonly surfaceOp?: { readonly start: number; readonly end: number } }).surfaceOp
    if (e.type === "user/message" && op !== undefined) {
      return label(`checkpoint ${op.start}..${op.end} ${text(d).replace(Compaction.CHECKPOINT_PREFIX, "")}`)
    }
    return label(line)
  })
}

/** The invariants hold, and every delivery's recorded outcome is its fate on the log (pending: `Pending`). */
export const checkFates = (result: Simulator.RunResult): void => {
  expect(Invariant.check(result.events)).toEqual([])
  const fates = Delivery.fatesOf(result.events)
  for (const d of result.deliveries) {
    if (d.messageId === undefined) continue
    const fate = fates.get(d.messageId)
    expect(Delivery.fateOf(result.events, d.messageId)).toEqual(fate)
    if (d.outcome === undefined) expect(fate).toEqual({ _tag: "Pending" })
    else expect(d.outcome).toEqual(fate)
  }
}

const isStep = (e: SessionEvent, type: string, turn: number, step: number) =>
  e.type === type && (e.data as any).turn === turn && (e.data as any).step === step

/**
 * The log a step's first request saw: up to its entered messages (and the splices and the
 * request header logged with them), i.e. before anything else of the step.
 */
export const requestPrefix = (events: ReadonlyArray<SessionEvent>, turn: number, step: number): ReadonlyArray<SessionEvent> => {
  let i = events.findIndex((e) => isStep(e, "step/start", turn, step))
  expect(i).toBeGreaterThanOrEqual(0)
  i++
  while (
    i < events.length &&
    (events[i]!.type === "user/message" || events[i]!.type === "request/header" || events[i]!.type === "agent/inbox/spliced")
  ) i++
  return events.slice(0, i)
}

/**
 * The log a step's request saw after an overflow compaction inside the step (§17): up to
 * the step's `assistant/message`, or its `step/end` when it has none.
 */
export const retryPrefix = (events: ReadonlyArray<SessionEvent>, turn: number, step: number): ReadonlyArray<SessionEvent> => {
  const start = events.findIndex((e) => isStep(e, "step/start", turn, step))
  expect(start).toBeGreaterThanOrEqual(0)
  let i = start + 1
  while (i < events.length && events[i]!.type !== "assistant/message" && !isStep(events[i]!, "step/end", turn, step)) i++
  return events.slice(0, i)
}

/**
 * Every recorded step request equals `History.derive` of the log at that point (§12):
 * a step's requests up to the one answered `CONTEXT_OVERFLOW` saw the log up to the step's
 * entered messages; those after it (the retry after the overflow compaction) the log up to the
 * step's assistant message. Request i consumed script entry i (summarization requests too, which
 * are skipped here: their content is the policy's). Returns how many step requests it checked,
 * and how many of them came after an overflow.
 */
export const checkRequests = (
  result: Simulator.RunResult,
  script: Scenario.Scenario["model"]
): { readonly steps: number; readonly retries: number } => {
  const overflowed = new Set<string>()
  let steps = 0
  let retries = 0
  result.requests.forEach((q, i) => {
    if (q.purpose === "compaction") return
    const key = `${q.turn}.${q.step}`
    const retry = overflowed.has(key)
    const prefix = retry ? retryPrefix(result.events, q.turn, q.step) : requestPrefix(result.events, q.turn, q.step)
    expect(q.messages).toEqual(History.derive(prefix).map(Simulator.requestMessage))
    steps++
    if (retry) retries++
    if (script[i]?.error?.code === "CONTEXT_OVERFLOW") overflowed.add(key)
  })
  return { steps, retries }
}

const callIds = (m: Message) => m.content.flatMap((b) => (b.type === "tool-result" ? [b.toolCallId] : []))

/** What `checkCompactions` saw, by outcome. */
export type CompactionCounts = Record<Compaction.CompactionOutcome | "open", number>

/**
 * No message entered before a compaction is lost from the model's view without a summary
 * covering it (§17): for every bracket that ends `compacted`, each message visible at its
 * `compaction/start` and not after its `compaction/end` has its seq in the bracket's
 * `compaction/summary.shadowedSeqs`, or was replaced by a prune checkpoint naming it
 * (`surfaceOp` `start === end === seq`); every shadowed seq was visible (nothing pending is
 * summarized). A bracket that ends otherwise leaves the view as it was. Returns the counts.
 */
export const checkCompactions = (events: ReadonlyArray<SessionEvent>): CompactionCounts => {
  const counts: CompactionCounts = { compacted: 0, skipped: 0, aborted: 0, failed: 0, interrupted: 0, open: 0 }
  events.forEach((start, j) => {
    if (start.type !== "compaction/start") return
    const id = (start.data as any).compactionId as string
    const k = events.findIndex((e, i) => i > j && e.type === "compaction/end" && (e.data as any).compactionId === id)
    if (k < 0) {
      counts.open++
      return
    }
    const outcome = (events[k]!.data as any).outcome as Compaction.CompactionOutcome
    counts[outcome]++
    const before = History.surface(events.slice(0, j))
    const after = History.surface(events.slice(0, k + 1))
    if (outcome !== "compacted") {
      expect(after).toEqual(before)
      return
    }
    const inside = events.slice(j + 1, k)
    const summary = inside.find((e) => e.type === "compaction/summary" && (e.data as any).compactionId === id)
    const shadowed = new Set<number>(summary === undefined ? [] : (summary.data as any).shadowedSeqs)
    const pruned = new Set<number>()
    for (const e of inside) {
      const op = (e as { readonly surfaceOp?: { readonly start: number; readonly end: number } }).surfaceOp
      if (e.type !== "user/message" || op === undefined) continue
      expect((e.data as any).source).toEqual({ kind: "plugin", plugin: Compaction.CHECKPOINT_PLUGIN, compactionId: id })
      if (op.start === op.end && !shadowed.has(op.start)) {
        // A prune checkpoint keeps the tool-result block (and its call id) of what it replaces.
        const replaced = before.find((b) => b.seq === op.start)
        expect(replaced).toBeDefined()
        expect(callIds(e.data as any)).toEqual(callIds(replaced!.message))
        pruned.add(op.start)
      }
    }
    const visible = new Set(before.map((e) => e.seq))
    for (const seq of shadowed) expect(visible.has(seq)).toBe(true)
    const kept = new Set(after.map((e) => e.seq))
    for (const e of before) {
      if (!kept.has(e.seq)) expect(shadowed.has(e.seq) || pruned.has(e.seq)).toBe(true)
    }
  })
  return counts
}
