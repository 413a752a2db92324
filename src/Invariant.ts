/**
 * Log invariants (§12): `check(events)` returns every violation of rules 1–6 as
 * `{seq, rule, message}`, sorted by seq, in one pass (O(events + splice sizes)). For a DSH v0 log
 * (`header.version === 0`, or `dsh: true`) it applies DSH's own subset instead: rule 1; rule 2
 * without the `user/message` placement rule; rule 3 except that a `TOOL_NOT_STARTED` result (crash
 * repair) needs no call and calls may be unresolved at `step/end`; rule 4 with ids unique among
 * pending items only. Rules 4–6 start after the inherited prefix (`seedLength`) of a DSH child
 * session, whose inbox is not replayed (§3.1). Event types the core does not own (plugin events,
 * DSH `assistant/chunk`, …) are skipped.
 *
 * The rules as checked:
 * 1. `seq` contiguous from 0; `turn/start` numbers 1, 2, … and only when no turn is open;
 *    `turn/end` names the open turn and no step is open; `step/start` inside the open turn, with
 *    no step open, numbered 1, 2, … within the turn; `step/end` names the open step.
 * 2. `user/message`, `assistant/message`, `tool/call`, `tool/result` only inside the open step of
 *    the open turn (their `turn`/`step` fields naming it); `request/header` inside a turn.
 * 3. A `tool/result` (call id: `message.source.callId`, else its tool-result block's
 *    `toolCallId`) pairs with an earlier `tool/call` of the same step, once; results come in the
 *    order of the calls; every `tool/call` has its result before `step/end`.
 * 4. Splice coordinates in range of the replayed inbox; inserted ids unique per session (a
 *    replace may re-insert an id it removes in the same splice: the message keeps its
 *    identity); claims (removals without `outcome`) only inside a turn, with no step open
 *    (before the first `step/start` or between steps).
 * 5. No lost wake-up (§6.5): after a non-aborted `turn/end` with waking work pending (a queued
 *    followup or a waking steer, replayed at that position) the next core event must be
 *    `turn/start`: the driver decides and opens the next turn atomically with the `turn/end`,
 *    so nothing but plugin/foreign events may come between. Excused: the log ends there (only
 *    foreign events follow), or the next core event is `session/end-seed` (a resume boundary:
 *    the process stopped and resume starts nothing by itself, §10). Work pending at an aborted
 *    `turn/end` (kept by `cancel({keepInbox})`, §9) is not owed a turn there; it is served
 *    when a later waking delivery starts one, and from that turn on it is checked like any other
 *    pending work. (A delivery to an idle agent is not itself checked: concurrent deliveries may
 *    legitimately land between it and the `turn/start` it causes.)
 * 6. Every `user/message` was claimed in its turn (and not entered before), or is new: its id
 *    never appeared before in the log (returned by the pre-step).
 *
 * Compaction brackets (§17; our logs only: in a DSH v0 log `compaction/*` events are
 * foreign and unchecked), under rules 1, 2 and 4:
 * - rule 1: `compaction/start` only when no compaction is open; `compaction/summary` and
 *   `compaction/end` name the open compaction (`compactionId`, and `turn` for the end);
 *   `turn/start`, `turn/end`, `step/start`, `step/end` never while a compaction is open.
 * - rule 2: `compaction/start` names the open turn, or `turn: null` with none open; inside a
 *   step only before its `assistant/message` (the overflow case); no `assistant/message`,
 *   `tool/call`, `tool/result`, `request/header` or `user/message` other than its checkpoints
 *   while a compaction is open; a checkpoint (a `user/message`
 *   whose envelope has a `surfaceOp` replace) only inside an open compaction, with the source
 *   `{kind:"plugin", plugin:"compact", compactionId}` of that compaction, and then also
 *   outside a step; its `start` and `end` are seqs of model-visible message events not
 *   replaced yet (the range's order on the surface is not checked). A `compaction/end` names one
 *   of the outcomes `compacted`, `skipped`, `aborted`, `failed`, `interrupted` (rule 1).
 * - rule 4: no claim while a compaction is open (deliveries and canceled splices are fine).
 * A log that ends inside an open compaction (a crash) is not a violation, as an open turn is not.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { AskedData, DecidedData, eventTypes as approvalTypes } from "./Approval.js"
import { CHECKPOINT_PLUGIN, eventTypes as compactionTypes } from "./Compaction.js"
import { MutableInbox } from "./Inbox.js"
import { isDsh, seedLengthOf } from "./internal/logOptions.js"
import type { UserMessage } from "./Message.js"
import type { SessionEvent, SplicedData, TurnEndReason } from "./SessionEvent.js"
import { coreEventTypes } from "./SessionEvent.js"
import type { LogOptions } from "./SessionLog.js"

/**
 * A rule of §12 (1–6).
 *
 * @since 0.1.0
 * @category models
 */
export type Rule = 1 | 2 | 3 | 4 | 5 | 6

/**
 * One violation: the seq of the offending event (for rule 5, the `turn/end` that owed a turn),
 * the rule, and a readable message.
 *
 * @since 0.1.0
 * @category models
 */
export interface Violation {
  readonly seq: number
  readonly rule: Rule
  readonly message: string
}

/**
 * Options of `check`: the log's `header` (DSH v0 rules when `version === 0`, `seedLength`), or
 * `dsh`/`seedLength` directly.
 *
 * @since 0.1.0
 * @category models
 */
export type CheckOptions = LogOptions

interface Call {
  readonly index: number
  resolved: boolean
  /** The id of its `approval/asked`, while that question has no decision (§26). */
  openQuestion?: string | undefined
  /** It had a question (decided or not): at most one per call. */
  asked?: boolean
}

const callIdOfResult = (message: UserMessage | undefined): string | undefined => {
  const fromSource = (message?.source as { readonly callId?: unknown } | undefined)?.callId
  if (typeof fromSource === "string") return fromSource
  for (const block of message?.content ?? []) {
    if (block.type === "tool-result") return block.toolCallId
  }
  return undefined
}

/** The outcomes a `compaction/end` may name. */
const outcomes: ReadonlySet<string> = new Set(["compacted", "skipped", "aborted", "failed", "interrupted"])

/** Core events that may not come while a compaction is open. */
const bracketBreakers: ReadonlySet<string> = new Set([
  "request/header",
  "turn/start",
  "turn/end",
  "step/start",
  "step/end",
  "assistant/message",
  "tool/call",
  "tool/result"
])

/**
 * The approval rules (§26, under rule 3 of §12): an `approval/asked` has `AskedData`, inside the
 * open step, its id unique in the session; in our logs it names a `tool/call` of that step that has
 * no result and no question yet. An `approval/decided` has `DecidedData` and names a question asked
 * and not yet decided. (A call's result before its decision, and a step that ends with a question
 * open, are reported where the result or the `step/end` is.)
 */
const checkApproval = (
  event: SessionEvent,
  dsh: boolean,
  inStep: boolean,
  calls: ReadonlyMap<string, Call>,
  questions: Map<string, { decided: boolean; readonly call: Call | undefined }>,
  report: (seq: number, rule: Rule, message: string) => void
): void => {
  const seq = event.seq
  if (event.type === "approval/asked") {
    if (!Schema.is(AskedData)(event.data)) {
      report(seq, 3, `approval/asked data is not {id, toolName, callId?, reason?}: ${JSON.stringify(event.data)}`)
      return
    }
    const { callId, id } = event.data
    if (!inStep) report(seq, 2, `approval/asked ${id} outside an open step`)
    if (questions.has(id)) {
      report(seq, 3, `approval/asked ${id} is asked a second time`)
      return
    }
    const call = callId === undefined ? undefined : calls.get(callId)
    if (!dsh && inStep) {
      if (call === undefined) report(seq, 3, `approval/asked ${id} names ${callId ?? "no call"}, not a tool/call of this step`)
      else if (call.resolved) report(seq, 3, `approval/asked ${id} after the tool/result of ${callId}`)
      else if (call.asked === true) report(seq, 3, `approval/asked ${id} is a second question about ${callId}`)
    }
    questions.set(id, { decided: false, call })
    if (call !== undefined && !call.resolved && call.asked !== true) {
      call.asked = true
      call.openQuestion = id
    }
    return
  }
  if (!Schema.is(DecidedData)(event.data)) {
    report(seq, 3, `approval/decided data is not {id, outcome, by?, reason?} with a known outcome: ${JSON.stringify(event.data)}`)
    return
  }
  const { id } = event.data
  const question = questions.get(id)
  if (question === undefined) report(seq, 3, `approval/decided ${id} names no question asked before it`)
  else if (question.decided) report(seq, 3, `approval/decided ${id} decides a question a second time`)
  else {
    question.decided = true
    if (question.call !== undefined && question.call.openQuestion === id) question.call.openQuestion = undefined
  }
}

/**
 * Every violation of the §12 invariants in a log, sorted by seq (empty for a valid log). See the
 * module comment for the rules as checked and the DSH v0 subset.
 *
 * @since 0.1.0
 * @category projections
 */
export const check = (events: ReadonlyArray<SessionEvent>, options?: CheckOptions): Array<Violation> => {
  const dsh = isDsh(options)
  const seed = seedLengthOf(options)
  const out: Array<Violation> = []
  const report = (seq: number, rule: Rule, message: string) => {
    out.push({ seq, rule, message })
  }

  // rule 1/2 state
  let prevSeq = -1
  let lastTurn = 0
  let turnOpen = false
  let openTurn = 0
  let lastStep = 0
  let stepOpen = false
  // rule 3 state (the open step)
  let calls = new Map<string, Call>()
  let lastResult = -1
  // rule 4/5/6 state
  const inbox = new MutableInbox(dsh)
  const seen = new Set<string>() // ours: every message id seen so far
  const pending = new Map<string, number>() // DSH: pending ids
  let claimed = new Set<string>() // ours: claimed in the open turn, not yet entered
  let owed: number | undefined // seq of a turn/end that owes a turn/start
  // approvals (§26): every question asked, and whether it is decided
  const questions = new Map<string, { decided: boolean; readonly call: Call | undefined }>()
  // compaction brackets (ours)
  let bracket: { readonly id: unknown; readonly turn: unknown } | undefined
  let answered = false // the open step has its assistant/message
  const surfaceSeqs = new Set<number>() // seqs of model-visible message events a checkpoint may name

  const resetStep = () => {
    if (calls.size > 0) calls = new Map()
    lastResult = -1
  }

  for (let i = 0; i < events.length; i++) {
    const event = events[i]!
    const seq = event.seq
    const type = event.type
    if (seq !== prevSeq + 1) {
      report(seq, 1, `seq ${seq} where ${prevSeq + 1} was expected`)
    }
    prevSeq = seq
    if (!dsh && compactionTypes.has(type)) {
      const data = event.data as { readonly compactionId?: unknown; readonly turn?: unknown }
      const id = String(data.compactionId)
      if (type === "compaction/start") {
        if (bracket !== undefined) report(seq, 1, `compaction/start ${id} while compaction ${String(bracket.id)} is open`)
        const expected = turnOpen ? openTurn : null
        if (data.turn !== expected) {
          report(
            seq,
            2,
            `compaction/start ${id} names turn ${String(data.turn)} but ${
              turnOpen ? `turn ${openTurn} is open` : "no turn is open"
            }`
          )
        }
        if (stepOpen && answered) report(seq, 2, `compaction/start ${id} after the assistant/message of step ${lastStep}`)
        bracket = { id: data.compactionId, turn: data.turn }
      } else if (bracket === undefined || bracket.id !== data.compactionId) {
        report(
          seq,
          1,
          `${type} ${id} while ${bracket === undefined ? "no compaction" : `compaction ${String(bracket.id)}`} is open`
        )
        if (type === "compaction/end") bracket = undefined
      } else if (type === "compaction/end") {
        const outcome = (event.data as { readonly outcome?: unknown }).outcome
        if (typeof outcome !== "string" || !outcomes.has(outcome)) {
          report(seq, 1, `compaction/end ${id} has outcome ${JSON.stringify(outcome)}, not one of ${[...outcomes].join(", ")}`)
        }
        if (data.turn !== bracket.turn) {
          report(seq, 1, `compaction/end ${id} names turn ${String(data.turn)} but its start named ${String(bracket.turn)}`)
        }
        bracket = undefined
      }
      continue
    }
    if (approvalTypes.has(type)) {
      checkApproval(event, dsh, turnOpen && stepOpen, calls, questions, report)
      continue
    }
    if (!coreEventTypes.has(type)) continue
    if (bracket !== undefined && bracketBreakers.has(type)) {
      report(
        seq,
        type.startsWith("turn/") || type.startsWith("step/") ? 1 : 2,
        `${type} while compaction ${String(bracket.id)} is open`
      )
    }
    const replayed = seq >= seed

    if (owed !== undefined) {
      if (type !== "turn/start" && type !== "session/end-seed") {
        report(
          owed,
          5,
          `turn/end at seq ${owed} left waking work pending but ${type} at seq ${seq} came before any turn/start`
        )
      }
      owed = undefined
    }

    switch (type) {
      case "turn/start": {
        const n = (event.data as { readonly turn: number }).turn
        if (turnOpen) report(seq, 1, `turn/start of turn ${n} while turn ${openTurn} is open`)
        if (n !== lastTurn + 1) report(seq, 1, `turn/start of turn ${n} where turn ${lastTurn + 1} was expected`)
        turnOpen = true
        openTurn = n
        lastTurn = n
        lastStep = 0
        stepOpen = false
        resetStep()
        if (claimed.size > 0) claimed = new Set()
        break
      }
      case "turn/end": {
        const data = event.data as { readonly turn: number; readonly reason?: TurnEndReason }
        if (!turnOpen) report(seq, 1, `turn/end of turn ${data.turn} while no turn is open`)
        else if (data.turn !== openTurn) report(seq, 1, `turn/end names turn ${data.turn} but turn ${openTurn} is open`)
        if (stepOpen) report(seq, 1, `turn/end of turn ${data.turn} while step ${lastStep} is open`)
        turnOpen = false
        stepOpen = false
        resetStep()
        if (!dsh && replayed && data.reason?.kind !== "aborted" && inbox.hasWakingWork) owed = seq
        break
      }
      case "step/start": {
        const data = event.data as { readonly turn: number; readonly step: number }
        if (!turnOpen) report(seq, 1, `step/start of turn ${data.turn} step ${data.step} while no turn is open`)
        else if (data.turn !== openTurn) report(seq, 1, `step/start names turn ${data.turn} but turn ${openTurn} is open`)
        if (stepOpen) report(seq, 1, `step/start of step ${data.step} while step ${lastStep} is open`)
        if (data.step !== lastStep + 1) report(seq, 1, `step/start of step ${data.step} where step ${lastStep + 1} was expected`)
        stepOpen = true
        answered = false
        lastStep = data.step
        resetStep()
        break
      }
      case "step/end": {
        const data = event.data as { readonly turn: number; readonly step: number }
        if (!stepOpen) report(seq, 1, `step/end of turn ${data.turn} step ${data.step} while no step is open`)
        else if (data.turn !== openTurn || data.step !== lastStep) {
          report(
            seq,
            1,
            `step/end names turn ${data.turn} step ${data.step} but turn ${openTurn} step ${lastStep} is open`
          )
        }
        if (stepOpen && !dsh) {
          for (const [callId, call] of calls) {
            if (!call.resolved) report(seq, 3, `tool/call ${callId} has no tool/result before step/end`)
          }
        }
        stepOpen = false
        resetStep()
        break
      }
      case "user/message": {
        const message = event.data as UserMessage
        if (!dsh) {
          const op = (event as { readonly surfaceOp?: { readonly op?: unknown } }).surfaceOp
          const checkpoint = typeof op === "object" && op !== null && op.op === "replace"
          if (!checkpoint && bracket !== undefined) {
            report(seq, 2, `user/message ${message.id} while compaction ${String(bracket.id)} is open (only its checkpoints)`)
          }
          if (checkpoint) {
            const source = message.source as {
              readonly kind?: unknown
              readonly plugin?: unknown
              readonly compactionId?: unknown
            }
            if (bracket === undefined) report(seq, 2, `checkpoint user/message ${message.id} outside a compaction`)
            else if (source.kind !== "plugin" || source.plugin !== CHECKPOINT_PLUGIN || source.compactionId !== bracket.id) {
              report(seq, 2, `checkpoint user/message ${message.id} does not name compaction ${String(bracket.id)} as its source`)
            }
            const range = op as { readonly start?: unknown; readonly end?: unknown }
            if (!surfaceSeqs.has(range.start as number) || !surfaceSeqs.has(range.end as number)) {
              report(
                seq,
                2,
                `checkpoint user/message ${message.id} replaces ${JSON.stringify(range.start)}..${
                  JSON.stringify(range.end)
                }, which are not seqs of model-visible messages on the surface`
              )
            } else {
              surfaceSeqs.delete(range.start as number)
              surfaceSeqs.delete(range.end as number)
            }
            surfaceSeqs.add(seq)
          } else {
            surfaceSeqs.add(seq)
            if (!(turnOpen && stepOpen)) report(seq, 2, `user/message ${message.id} outside an open step`)
          }
          if (replayed) {
            if (!claimed.delete(message.id) && seen.has(message.id)) {
              report(seq, 6, `user/message ${message.id} was neither claimed in this turn nor new`)
            }
            seen.add(message.id)
          }
        }
        break
      }
      case "assistant/message":
      case "tool/call":
      case "tool/result": {
        const data = event.data as { readonly turn: number; readonly step: number }
        const inStep = turnOpen && stepOpen
        if (type === "assistant/message") answered = true
        if (type !== "tool/call") surfaceSeqs.add(seq)
        if (!inStep) report(seq, 2, `${type} outside an open step`)
        else if (data.turn !== openTurn || data.step !== lastStep) {
          report(seq, 2, `${type} names turn ${data.turn} step ${data.step} but turn ${openTurn} step ${lastStep} is open`)
        }
        if (type === "tool/call") {
          const callId = (event.data as { readonly callId: string }).callId
          if (inStep) {
            if (calls.has(callId)) report(seq, 3, `tool/call ${callId} appears twice in one step`)
            else calls.set(callId, { index: calls.size, resolved: false })
          }
        } else if (type === "tool/result") {
          const result = event.data as { readonly message?: UserMessage; readonly error?: { readonly code?: unknown } }
          const callId = callIdOfResult(result.message)
          if (!dsh && replayed && result.message?.id !== undefined) seen.add(result.message.id)
          if (inStep) {
            const call = callId === undefined ? undefined : calls.get(callId)
            if (call === undefined) {
              if (!(dsh && result.error?.code === "TOOL_NOT_STARTED")) {
                report(seq, 3, `tool/result ${callId ?? "(no call id)"} has no tool/call in this step`)
              }
            } else if (call.resolved) {
              report(seq, 3, `tool/result ${callId} is the second result of its call`)
            } else {
              if (call.openQuestion !== undefined) {
                report(seq, 3, `tool/result ${callId} before approval ${call.openQuestion} is decided`)
              }
              if (call.index < lastResult) report(seq, 3, `tool/result ${callId} is out of the order of the calls`)
              call.resolved = true
              if (call.index > lastResult) lastResult = call.index
            }
          }
        } else if (!dsh && replayed) {
          const id = (event.data as { readonly message?: { readonly id?: string } }).message?.id
          if (id !== undefined) seen.add(id)
        }
        break
      }
      case "request/header": {
        if (!turnOpen) report(seq, 2, `request/header outside a turn`)
        break
      }
      case "agent/inbox/spliced": {
        if (!replayed) break
        const data = event.data as SplicedData
        const queue = data.target === "next-turn" ? inbox.nextTurn : inbox.nextStep
        const length = queue.length
        const applied = inbox.apply(data)
        if (!applied.inRange) {
          report(
            seq,
            4,
            `splice on ${data.target} at start ${data.start} removing ${
              data.removedCount ?? 0
            } is out of range of ${length} pending items`
          )
        }
        const isClaim = data.outcome === undefined && applied.removed.length > 0
        if (isClaim && bracket !== undefined) {
          report(seq, 4, `claim of ${data.target} while compaction ${String(bracket.id)} is open`)
        } else if (isClaim && (!turnOpen || stepOpen)) {
          report(
            seq,
            4,
            !turnOpen
              ? `claim of ${data.target} outside a turn`
              : `claim of ${data.target} while step ${lastStep} of turn ${openTurn} is open`
          )
        }
        if (dsh) {
          for (const item of applied.removed) {
            const id = item.message.id
            const n = pending.get(id) ?? 0
            if (n <= 1) pending.delete(id)
            else pending.set(id, n - 1)
          }
          for (const item of applied.inserted) {
            const id = item.message.id
            const n = pending.get(id) ?? 0
            if (n > 0) report(seq, 4, `message id ${id} is already pending`)
            pending.set(id, n + 1)
          }
        } else {
          if (isClaim) { for (const item of applied.removed) claimed.add(item.message.id) }
          let removedIds: Set<string> | undefined
          for (const item of applied.inserted) {
            const id = item.message.id
            if (seen.has(id)) {
              if (removedIds === undefined) removedIds = new Set(applied.removed.map((r) => r.message.id))
              if (!removedIds.has(id)) report(seq, 4, `message id ${id} is already used in this session`)
              else removedIds.delete(id)
            }
            seen.add(id)
          }
        }
        break
      }
    }
  }
  // A turn/end still owed at the end: the log ends there (only foreign events follow).
  return out.length > 1 ? out.sort((a, b) => a.seq - b.seq) : out
}
