/**
 * The checks of a crash-point matrix cell (§23; §12, §26, §27): a run of a scenario with a fault
 * (`crashMatrix.ts` `runCell`) against the run without one. `checkCell` lists what is checked;
 * `checkSubagents` the sub-agent scenario's part (§27 rule 16).
 */
import * as Approval from "../../src/Approval.js"
import * as Delivery from "../../src/Delivery.js"
import * as History from "../../src/History.js"
import * as Invariant from "../../src/Invariant.js"
import type { Message } from "../../src/Message.js"
import type { SessionEvent } from "../../src/SessionEvent.js"
import { type CellRun, lastTurnOpen, type StoredLog } from "./crashMatrix.js"

const fateKey = (fate: Delivery.Fate | undefined): string =>
  fate === undefined ? "none" : fate._tag === "Dropped" ? `Dropped ${fate.reason}` : fate._tag

/**
 * The problems of a cell's run against the reference run (empty: the cell passes):
 * - the log passes `Invariant.check`;
 * - every delivery acknowledged before the crash has exactly one fate, not `Pending`: the
 *   reference run's (its kind and reason), or `Dropped interrupted` (claimed by the turn that
 *   crashed), or after a fault the process survived also `Dropped failed`;
 * - every delivery acknowledged after it has a fate too; no message enters twice;
 * - no tool ran twice; a call logged without its result at the crash has the result
 *   `TOOL_OUTCOME_UNKNOWN` (or `DENIED`, when its question was refused) and did not run again; a
 *   `TOOL_NOT_STARTED` call never ran;
 * - approvals (§26): every question has exactly one decision; a refused call never ran; an
 *   allowed call with a result that is no error ran exactly once; a call whose question was open
 *   at the crash was decided after the resume (the action given again) and ran once if allowed;
 * - sub-agents (§27 rule 16): `checkSubagents` (a sub-agent call cut short is closed from its
 *   child's log, not by the generic closer);
 * - every model request was `History.derive` of the log when it was made.
 */
export const checkCell = (run: CellRun, reference: CellRun, survivable: boolean): Array<string> => {
  const problems: Array<string> = []
  for (const v of Invariant.check(run.events)) problems.push(`invariant ${v.rule} at seq ${v.seq}: ${v.message}`)
  const fates = Delivery.fatesOf(run.events)
  const referenceFates = new Map<string, string>()
  const fatesThere = Delivery.fatesOf(reference.events)
  for (const d of reference.deliveries) {
    if (d.messageId !== undefined) referenceFates.set(d.key, fateKey(fatesThere.get(d.messageId)))
  }
  const history = History.derive(run.events)
  const entered = new Map<string, number>()
  for (const m of history) entered.set(m.id, (entered.get(m.id) ?? 0) + 1)
  for (const [id, n] of entered) if (n > 1) problems.push(`message ${id} is in the history ${n} times`)
  for (const d of run.deliveries) {
    if (d.messageId === undefined) continue
    const fate = fateKey(fates.get(d.messageId))
    if (fate === "none" || fate === "Pending") {
      problems.push(`${d.key} (${d.messageId}) acknowledged${d.beforeCrash ? " before the crash" : ""} has fate ${fate}`)
      continue
    }
    if (!d.beforeCrash) continue
    const expected = referenceFates.get(d.key)
    const allowed = [expected, "Dropped interrupted", ...(survivable ? ["Dropped failed"] : [])]
    if (!allowed.includes(fate)) problems.push(`${d.key} has fate ${fate}, the reference ${expected}`)
  }
  const results = new Map<string, string | undefined>()
  for (const e of run.events) {
    if (e.type !== "tool/result") continue
    const data = e.data as { message: Message; error?: { code: string } }
    const block = data.message.content[0] as { toolCallId: string }
    results.set(block.toolCallId, data.error?.code)
  }
  for (const [callId, n] of run.executions) {
    if (n > 1) problems.push(`tool call ${callId} ran ${n} times`)
  }
  // §26: the questions, their decisions, and what each decision let run.
  const asked = new Map<string, string>()
  const decisions = new Map<string, Array<Approval.Outcome>>()
  for (const e of run.events) {
    if (e.type === "approval/asked") {
      const data = e.data as Approval.AskedData
      asked.set(data.id, data.callId!)
    } else if (e.type === "approval/decided") {
      const data = e.data as Approval.DecidedData
      decisions.set(data.id, [...(decisions.get(data.id) ?? []), data.outcome])
    }
  }
  const outcomeOf = new Map<string, Approval.Outcome>()
  for (const [id, callId] of asked) {
    const outcomes = decisions.get(id) ?? []
    if (outcomes.length !== 1) problems.push(`question ${id} (call ${callId}) has ${outcomes.length} decisions`)
    else outcomeOf.set(callId, outcomes[0]!)
  }
  for (const [callId, outcome] of outcomeOf) {
    const ran = run.executions.get(callId) ?? 0
    if (!Approval.isAllowed(outcome) && ran > 0) problems.push(`tool call ${callId} ran though it was ${outcome}`)
    if (Approval.isAllowed(outcome) && results.has(callId) && results.get(callId) === undefined && ran !== 1) {
      problems.push(`tool call ${callId} was ${outcome} and has a result, but ran ${ran} times`)
    }
  }
  for (const callId of run.openAtCrash) {
    const outcome = outcomeOf.get(callId)
    if (outcome === undefined) continue
    const ran = run.executions.get(callId) ?? 0
    if (Approval.isAllowed(outcome) && (ran !== 1 || results.get(callId) !== undefined)) {
      problems.push(
        `tool call ${callId} waited at the crash and was ${outcome} after it, but ran ${ran} times (result ${
          results.get(callId) ?? "ok"
        })`
      )
    }
  }
  for (const p of checkSubagents(run, results)) problems.push(p)
  for (const callId of run.unanswered) {
    // A sub-agent call started is closed from its child's log (`checkSubagents`).
    if (run.subagentsAtCrash.has(callId) || run.subagentsEndedAtCrash.has(callId)) continue
    const code = results.get(callId)
    const refused = outcomeOf.get(callId) !== undefined && !Approval.isAllowed(outcomeOf.get(callId)!)
    if (code !== "TOOL_OUTCOME_UNKNOWN" && !(refused && code === "DENIED")) {
      problems.push(`tool call ${callId} was logged without a result; its result is ${code ?? "none"}`)
    }
  }
  for (const [callId, code] of results) {
    if (code === "TOOL_NOT_STARTED" && (run.executions.get(callId) ?? 0) > 0) {
      problems.push(`tool call ${callId} ran but its result says TOOL_NOT_STARTED`)
    }
  }
  if (run.openWhileAlive) problems.push("the agent went idle with its turn open")
  for (const m of run.requestMismatches) problems.push(`request not derived from the log: ${m}`)
  return problems
}

/** Whether a child's log at the crash shows its task completed (§27 rule 16 (a)). */
const completedAt = (log: StoredLog): boolean =>
  log.events.some((e) => e.type === "turn/end" && (e.data as any).reason.kind === "completed") && !lastTurnOpen(log.events)

/**
 * The cases of §27 rule 16 a cell's crash gave (one per sub-agent call cut short): `a` (the
 * child's task was over), `b` (it was not), `c` (no child yet); `ended` for a call whose
 * `subagent/end` was durable without its result.
 */
export const subagentCases = (run: CellRun): Array<"a" | "b" | "c" | "ended"> => [
  ...[...run.subagentsAtCrash.values()].map((log) => (log === null ? "c" : completedAt(log) ? "a" : "b") as "a" | "b" | "c"),
  ...[...run.subagentsEndedAtCrash.keys()].map(() => "ended" as const)
]

/**
 * The sub-agent checks (§27 rule 16) of a cell: every child's log passes `Invariant.check`; every
 * sub-agent call has one `subagent/end` and then one result; a call cut short at the crash is
 * closed by its child's log then: no child → `unfinished_at_resume` without reason,
 * `TOOL_OUTCOME_UNKNOWN`; a child whose own turn had completed → `completed` and its answer; else
 * `unfinished_at_resume` with reason `interrupted`, `TOOL_OUTCOME_UNKNOWN`, and the child's turn
 * closed `interrupted` with no turn after it (nothing run again). A call whose end was durable
 * without its result gets the result that end gives (an answer after `completed`, else an error).
 */
const checkSubagents = (run: CellRun, results: ReadonlyMap<string, string | undefined>): Array<string> => {
  const problems: Array<string> = []
  for (const child of run.children) {
    for (const v of Invariant.check(child.events, { header: child.header })) {
      problems.push(`child ${child.header.id}: invariant ${v.rule} at seq ${v.seq}: ${v.message}`)
    }
  }
  const ends = new Map<string, Array<any>>()
  const order: Array<string> = []
  for (const e of run.events) {
    const data = e.data as any
    if (e.type === "subagent/end") ends.set(data.callId, [...(ends.get(data.callId) ?? []), data])
    if (e.type === "subagent/end" || e.type === "tool/result") {
      order.push(`${e.type === "subagent/end" ? data.callId : data.message.content[0].toolCallId} ${e.type}`)
    }
  }
  const answers = new Map<string, string>()
  for (const e of run.events) {
    if (e.type !== "tool/result") continue
    const block = (e.data as any).message.content[0]
    answers.set(block.toolCallId, block.content[0]?.text ?? "")
  }
  for (const e of run.events) {
    if (e.type !== "subagent/start") continue
    const callId = (e.data as { readonly callId: string }).callId
    const mine = order.filter((o) => o.startsWith(`${callId} `))
    if (mine.join(",") !== `${callId} subagent/end,${callId} tool/result`) {
      problems.push(`sub-agent call ${callId} ends with ${mine.join(", ") || "nothing"}`)
    }
  }
  for (const [callId, atCrash] of run.subagentsAtCrash) {
    const end = ends.get(callId)?.[0]
    const code = results.get(callId)
    const childEvents = atCrash === null ? [] : atCrash.events
    const completed = atCrash !== null && completedAt(atCrash)
    const expected = atCrash === null
      ? "unfinished_at_resume - TOOL_OUTCOME_UNKNOWN"
      : completed
      ? "completed completed ok"
      : "unfinished_at_resume interrupted TOOL_OUTCOME_UNKNOWN"
    const got = `${end?.stopReason} ${end?.reason?.kind ?? "-"} ${code ?? "ok"}`
    if (got !== expected) problems.push(`sub-agent call ${callId} cut short: ${got}, expected ${expected}`)
    if (completed && answers.get(callId) !== "done") problems.push(`sub-agent call ${callId}: answer ${answers.get(callId)}`)
    if (atCrash !== null && !completed) {
      const final = run.children.find((c) => c.header.id === atCrash.header.id)
      const turns = (events: ReadonlyArray<SessionEvent>) => events.filter((e) => e.type === "turn/start").length
      const own = final === undefined ? [] : final.events
      const lastEnd = own.filter((e) => e.type === "turn/end").at(-1)
      if (
        final === undefined || turns(own) !== turns(childEvents) ||
        (turns(own) > 0 && (lastEnd?.data as any)?.reason.kind !== "interrupted")
      ) {
        problems.push(`the child of ${callId} was not closed as repair closes it (or ran again)`)
      }
    }
  }
  for (const [callId, stopReason] of run.subagentsEndedAtCrash) {
    const code = results.get(callId)
    if ((stopReason === "completed") !== (code === undefined)) {
      problems.push(`sub-agent call ${callId} ended ${stopReason} at the crash, its result ${code ?? "ok"}`)
    }
  }
  return problems
}
