/**
 * Crash repair (§10): the synthetic closers a log needs when its last turn is open,
 * computed from the events alone, so that resuming a repaired log appends nothing; a sub-agent
 * call of the open step is closed from its child's log (§27 rule 16: the child's `subagent/end`
 * fields are computed by the caller, `subagentEnd.ts`, and passed in).
 */
import { Effect } from "effect"
import * as Approval from "../Approval.js"
import * as Invariant from "../Invariant.js"
import type { ContentBlock } from "../Message.js"
import type { EventDraft, SessionEvent, ToolErrorCode } from "../SessionEvent.js"
import type { LogContents, LogOptions, SessionNotFound } from "../SessionLog.js"
import { refusalText } from "./approvalText.js"
import { textBlock, toolResultMessage } from "./message.js"
import { type EndFields, outcomeOf, repairFields, resultOf } from "./subagentEnd.js"
import { toolError } from "./toolError.js"

/**
 * A child whose parent's call repair is closing (§27 rule 16): the parent's session and call. Its
 * open approval questions are decided `unavailable` (nobody is left to answer them), its turn
 * then closed as §10 says.
 */
export interface ClosingParent {
  readonly parentSession: string
  readonly callId: string
}

/** The reason of the `unavailable` decision of a child's open question when its parent's call is closed. */
export const closedParentReason = (parent: ClosingParent): string =>
  `the sub-agent's parent call ${parent.callId} (session ${parent.parentSession}) was closed after a crash: ` +
  "nobody is left to answer"

/** The text of the closers' results (§10). */
export const resultText: Partial<Record<ToolErrorCode, string>> = {
  TOOL_OUTCOME_UNKNOWN:
    "The session stopped while this tool call was running; whether it took effect is unknown. Check before calling it again.",
  TOOL_NOT_STARTED: "The session stopped before this tool call started; it did not run."
}

/**
 * The closers of an open last turn, in order (§10; a call refused by its question's decision,
 * §26, whose result was not committed gets its `DENIED` result instead of a closer; none when its
 * open step has an open approval question, §26 rule 8: the turn goes on in the resumed agent): for
 * each call of the open step's last `assistant/message`, in call order, an error `tool/result`
 * `TOOL_OUTCOME_UNKNOWN` when it has a `tool/call` but no result, or a `tool/call` then an error
 * `tool/result` `TOOL_NOT_STARTED` when it has none; then `step/end` (when a step is open),
 * `turn/end {kind:"interrupted"}` and `session/end-seed`; before all of them, when the log ends
 * inside a compaction bracket (§17), `compaction/end {compactionId, turn, outcome:"interrupted"}`.
 * With no open turn, only `session/end-seed` marks the resume boundary (§3.2), unless the log is
 * empty or already ends with one: a repaired log needs nothing. `nextId` gives the result
 * messages' ids.
 *
 * Sub-agent calls (§27 rule 16): a call of the open step with a `subagent/end` and no result gets
 * the result that end gives (`subagentEnd.ts`, as the tool would have returned it); one with a
 * `subagent/start`, no end and no result gets, in place of its closer, `subagent/end` with the
 * fields `ends` holds for it (computed from its child's log) and that result; with an open
 * question in the step, those `subagent/end` events are all that is appended (the resumed agent
 * gives the results). With `closing` (a child whose parent's call repair closes), the open
 * questions are first decided `unavailable` (`approval/decided` without `by`), then the turn is
 * closed as above (the waiting calls get their `DENIED` results).
 */
export const repairDrafts = (
  events: ReadonlyArray<SessionEvent>,
  nextId: () => string,
  ends: ReadonlyMap<string, EndFields> = new Map(),
  closing?: ClosingParent
): Array<EventDraft> => {
  const bracket = openCompaction(events)
  if (bracket !== undefined) {
    // The compaction a crash cut short ends first, `interrupted`: nothing of it applies (§17).
    const closer: EventDraft = {
      type: "compaction/end",
      data: { compactionId: bracket.compactionId, turn: bracket.turn, outcome: "interrupted" }
    }
    return [closer, ...repairDrafts(withDrafts(events, [closer]), nextId, ends, closing)]
  }
  const endSeed: Array<EventDraft> = events.length > 0 && events[events.length - 1]!.type !== "session/end-seed"
    ? [{ type: "session/end-seed", data: {} }]
    : []
  const open = openTurnOf(events)
  if (open === undefined) return endSeed
  const { step, stepAt, turn } = open
  const scan = step === undefined ? undefined : scanStep(events, stepAt + 1)
  if (scan !== undefined && scan.open.size > 0) {
    if (closing !== undefined) {
      // Nobody can answer a question of a child whose parent's call is closed (§27 rule 16).
      const decisions: Array<EventDraft> = [...scan.open.values()].sort((a, b) => a.seq - b.seq).map((q) => ({
        type: "approval/decided",
        data: { id: q.id, outcome: "unavailable", reason: closedParentReason(closing) }
      }))
      return [...decisions, ...repairDrafts(withDrafts(events, decisions), nextId, ends)]
    }
    // A step waiting for a person stays open: the resumed agent asks again and goes on (§26 rule
    // 8); its sub-agent calls' ends are appended now, and the resumed agent gives their results.
    return scan.calls.flatMap((call) => {
      const fields = scan.started.has(call.id) && !scan.ended.has(call.id) && !scan.answered.has(call.id)
        ? ends.get(call.id)
        : undefined
      return fields === undefined ? [] : [endDraft(scan.started.get(call.id)!, fields)]
    })
  }
  const drafts: Array<EventDraft> = []
  if (scan !== undefined) {
    const { answered, calls, decided, logged } = scan
    for (const call of calls) {
      if (answered.has(call.id)) continue
      const result = (content: ReadonlyArray<ContentBlock>, code: ToolErrorCode | undefined): EventDraft => ({
        type: "tool/result",
        data: code === undefined
          ? { turn, step, message: toolResultMessage(nextId(), call.id, content, false) }
          : { turn, step, message: toolResultMessage(nextId(), call.id, content, true), error: toolError(code) }
      })
      const start = scan.started.get(call.id)
      const end = scan.ended.get(call.id) ?? (start === undefined ? undefined : ends.get(call.id))
      if (start !== undefined && end !== undefined) {
        // A sub-agent call: its end (from its child's log, unless logged) and the result it gives.
        if (!scan.ended.has(call.id)) drafts.push(endDraft(start, end))
        const given = resultOf(call.name, outcomeOf(start.id, end))
        drafts.push(given.error === undefined ? result(given.content, undefined) : result([textBlock(given.text)], given.error))
        continue
      }
      const refusal = decided.get(call.id)
      if (refusal !== undefined && !Approval.isAllowed(refusal.outcome) && logged.has(call.id)) {
        // Refused before the crash, its result not yet committed: it never ran (§26 rule 8).
        drafts.push(result([textBlock(refusalText(call.name, refusal))], "DENIED"))
        continue
      }
      const code: ToolErrorCode = logged.has(call.id) ? "TOOL_OUTCOME_UNKNOWN" : "TOOL_NOT_STARTED"
      if (code === "TOOL_NOT_STARTED") {
        drafts.push({ type: "tool/call", data: { turn, step, callId: call.id, name: call.name, arguments: call.arguments } })
      }
      drafts.push(result([textBlock(resultText[code]!)], code))
    }
    drafts.push({ type: "step/end", data: { turn, step } })
  }
  drafts.push({ type: "turn/end", data: { turn, reason: { kind: "interrupted" } } })
  drafts.push({ type: "session/end-seed", data: {} })
  return drafts
}

/** `events` with `drafts` after them (the time and seqs do not matter to the scans). */
const withDrafts = (events: ReadonlyArray<SessionEvent>, drafts: ReadonlyArray<EventDraft>): ReadonlyArray<SessionEvent> =>
  events.concat(drafts.map((d, i) => ({ ...d, seq: events.length + i, time: 0 } as SessionEvent)))

/** The `subagent/end` of a call from its `subagent/start` run info and its end fields (§27 rule 3). */
const endDraft = (start: SubagentStart, fields: EndFields): EventDraft => ({
  type: "subagent/end",
  data: { runId: start.runId, provider: start.provider, id: start.id, local: start.local, callId: start.callId, ...fields }
})

/** The run info of a `subagent/start` (§27 rule 3). */
export interface SubagentStart {
  readonly runId: string
  readonly provider: string
  readonly id: string
  readonly local: boolean
  readonly callId: string
  readonly depth?: number | undefined
}

/**
 * The sub-agent calls repair must close from their children's logs (§27 rule 16): the calls of
 * the open step of an open last turn with a `subagent/start`, no `subagent/end` and no
 * `tool/result`, in call order, each as its `subagent/start`.
 */
export const pendingSubagents = (events: ReadonlyArray<SessionEvent>): ReadonlyArray<SubagentStart> => {
  const open = openTurnOf(events)
  if (open?.step === undefined) return []
  const scan = scanStep(events, open.stepAt + 1)
  return scan.calls.flatMap((call) => {
    const start = scan.started.get(call.id)
    return start !== undefined && !scan.ended.has(call.id) && !scan.answered.has(call.id) ? [start] : []
  })
}

/**
 * The `subagent/end` fields of each pending sub-agent call (§27 rule 16) from its child's log as
 * `read` gives it (`repairFields`; a session that does not exist: no child), by call id. Used
 * by repair (a first look, without the children's writers) and by the CLI's `resume` before it
 * opens anything.
 */
export const subagentEnds = <E, R>(
  pending: ReadonlyArray<SubagentStart>,
  read: (id: string) => Effect.Effect<LogContents, E | SessionNotFound, R>
): Effect.Effect<Map<string, EndFields>, E, R> =>
  Effect.reduce(pending, new Map<string, EndFields>(), (ends, start) =>
    Effect.map(
      Effect.catchIf(read(start.id), (e): e is SessionNotFound => isNotFound(e), () => Effect.succeed(undefined)),
      (child) => ends.set(start.callId, repairFields(child))
    ))

/** Whether a store's failure is `SessionNotFound`. */
export const isNotFound = (e: unknown): boolean =>
  typeof e === "object" && e !== null && (e as { readonly _tag?: unknown })._tag === "SessionNotFound"

/**
 * The turn left open at the end of a log, if any: its number, and its open step's number and
 * index (`step` undefined, `stepAt` -1, when no step is open).
 */
export const openTurnOf = (
  events: ReadonlyArray<SessionEvent>
): { readonly turn: number; readonly step: number | undefined; readonly stepAt: number } | undefined => {
  let turnAt = -1
  for (let i = events.length - 1; i >= 0; i--) {
    const type = events[i]!.type
    if (type === "turn/end") return undefined
    if (type === "turn/start") {
      turnAt = i
      break
    }
  }
  if (turnAt < 0) return undefined
  let step: number | undefined = undefined
  let stepAt = -1
  for (let i = turnAt + 1; i < events.length; i++) {
    const e = events[i]!
    if (e.type === "step/start") {
      step = (e.data as { step: number }).step
      stepAt = i
    } else if (e.type === "step/end") {
      step = undefined
      stepAt = -1
    }
  }
  return { turn: (events[turnAt]!.data as { turn: number }).turn, step, stepAt }
}

/**
 * What the events of an open step (from index `from`) say of its calls: the tool calls of its
 * last `assistant/message`, the ids with a `tool/call` and with a `tool/result`, its open
 * questions by call id (their id, seq and the time asked), the decisions by call id (§26), the
 * `subagent/start` and `subagent/end` data by call id (§27), and where the contexts spliced by
 * its committed results end in `next-step` (§8; undefined: none).
 */
export const scanStep = (events: ReadonlyArray<SessionEvent>, from: number): {
  readonly calls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
  readonly logged: ReadonlySet<string>
  readonly answered: ReadonlySet<string>
  readonly open: ReadonlyMap<string, { readonly id: string; readonly seq: number; readonly time: number }>
  readonly decided: ReadonlyMap<string, Approval.DecidedData>
  readonly started: ReadonlyMap<string, SubagentStart>
  readonly ended: ReadonlyMap<string, EndFields>
  readonly contextsEnd: number | undefined
} => {
  let calls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }> = []
  const logged = new Set<string>()
  const answered = new Set<string>()
  const asked = new Map<string, { readonly callId: string; readonly seq: number; readonly time: number }>()
  const decided = new Map<string, Approval.DecidedData>()
  const started = new Map<string, SubagentStart>()
  const ended = new Map<string, EndFields>()
  let contextsEnd: number | undefined = undefined
  let afterResult = false
  for (let i = from; i < events.length; i++) {
    const e = events[i]!
    const data = e.data as any
    const result = e.type === "tool/result"
    if (e.type === "assistant/message") {
      calls = (data.message.content as ReadonlyArray<any>).filter((b) => b.type === "tool-call")
    } else if (e.type === "tool/call") logged.add(data.callId)
    else if (result) answered.add(data.message.content[0].toolCallId)
    else if (e.type === "approval/asked") asked.set(data.id, { callId: data.callId, seq: e.seq, time: e.time })
    else if (e.type === "subagent/start" && typeof data.callId === "string") started.set(data.callId, data)
    else if (e.type === "subagent/end" && typeof data.callId === "string") ended.set(data.callId, data)
    else if (e.type === "approval/decided") {
      const question = asked.get(data.id)
      if (question !== undefined) {
        asked.delete(data.id)
        decided.set(question.callId, data)
      }
    } else if (e.type === "agent/inbox/spliced" && afterResult && data.target === "next-step") {
      // A result's additional contexts: the batch's next contexts go after them.
      contextsEnd = data.start + data.inserted.length
      continue
    }
    afterResult = result
  }
  const open = new Map<string, { readonly id: string; readonly seq: number; readonly time: number }>()
  for (const [id, q] of asked) open.set(q.callId, { id, seq: q.seq, time: q.time })
  return { calls, logged, answered, open, decided, started, ended, contextsEnd }
}

/** The `compaction/start` data of a compaction still open at the end of `events` (our logs), if any. */
const openCompaction = (
  events: ReadonlyArray<SessionEvent>
): { readonly compactionId: unknown; readonly turn: unknown } | undefined => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!
    if (e.type === "compaction/end") return undefined
    if (e.type === "compaction/start") {
      const data = e.data as { readonly compactionId?: unknown; readonly turn?: unknown }
      return { compactionId: data.compactionId, turn: data.turn ?? null }
    }
  }
  return undefined
}

/**
 * The first violation of the §12 invariants (`Invariant.check`, one linear pass) left in a log
 * once `drafts`, its repair closers, are appended (`repairDrafts`), or undefined. Repair fixes
 * what a crash leaves (an open turn or step, calls without results, an open compaction at the
 * end: `check` does not count an open turn as a violation, and the closers close it); anything
 * else (turns or steps not numbered 1, 2, …, an event outside its step, a splice out of range,
 * a reused id: a log edited by hand, or broken otherwise) can only be fixed by rewriting the log,
 * so resume refuses it (§10) rather than append to it. Rule 5 (a lost wake-up) is not counted:
 * resuming serves the pending work.
 */
export const unrepairable = (
  events: ReadonlyArray<SessionEvent>,
  drafts: ReadonlyArray<EventDraft>,
  options: LogOptions
): Invariant.Violation | undefined => {
  const time = events.length > 0 ? events[events.length - 1]!.time : 0
  const repaired = drafts.length === 0
    ? events
    : events.concat(
      drafts.map((d, i): SessionEvent => ({ type: d.type, seq: events.length + i, time, data: d.data } as SessionEvent))
    )
  // Rule 5 (no lost wake-up) is a promise about runs, not the log's shape: the runtime itself
  // leaves work pending after a claim the store refused twice (it waits for the next delivery),
  // and resuming is what serves that work (`continuePending`, or the next delivery).
  return Invariant.check(repaired, options).find((v) => v.rule !== 5)
}

/**
 * The one-line refusal of a log with a violation repair cannot fix (`unrepairable`): the rule,
 * the seq and its line (our JSONL logs: the header is line 1, seq n is line n + 2), the message.
 */
export const unrepairableMessage = (sessionId: string, v: Invariant.Violation, length: number): string =>
  `session "${sessionId}": ${
    v.seq < length ? `seq ${v.seq} (line ${v.seq + 2})` : `the closers repair would append (seq ${v.seq})`
  } breaks invariant ${v.rule} (§12): ${v.message}; repair cannot fix that by appending, ` +
  `so the session is not resumed (agent-loop check lists every violation)`
