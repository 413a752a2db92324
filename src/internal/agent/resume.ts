/**
 * Resume and crash repair (§10): the repaired log's closers (`internal/repair.ts`),
 * appended durably before anything else, then the agent's state rebuilt from the log (inbox,
 * history, used ids, turn counter, the last request configuration logged), and, when asked,
 * the run the log left pending.
 */
import { Effect, Ref } from "effect"
import * as Approval from "../../Approval.js"
import * as History from "../../History.js"
import type { IdGeneratorService } from "../../IdGenerator.js"
import * as Inbox from "../../Inbox.js"
import type { SessionEvent } from "../../SessionEvent.js"
import {
  type SessionLog,
  SessionLogError,
  type SessionNotFound,
  SessionStoreError,
  type SessionWriteError
} from "../../SessionLog.js"
import { SessionStore } from "../../SessionStore.js"
import { refusalText } from "../approvalText.js"
import { flatten } from "../flat.js"
import {
  type ClosingParent,
  isNotFound,
  openTurnOf,
  pendingSubagents,
  repairDrafts,
  resultText,
  scanStep,
  subagentEnds,
  type SubagentStart,
  unrepairable,
  unrepairableMessage
} from "../repair.js"
import { type EndFields, outcomeOf, repairFields, resultOf, unfinished } from "../subagentEnd.js"
import { VirtualClock } from "../virtualClock.js"
import * as Approvals from "./approvals.js"
import { startResumed, startRun } from "./driver.js"
import { ownFibers } from "./fibers.js"
import { adoptWaiters, markUndecided } from "./observers.js"
import { critical } from "./section.js"
import { type AgentState, approvalState, liveLogs, newCall, newTurnState, requestKeyOf, usedIds } from "./state.js"
import { fail, succeed } from "./toolResults.js"
import { restoreUsage } from "./usage.js"

/** `ids` without the ids in `used` (checked at each call; `used` may grow). */
export const avoiding = (ids: IdGeneratorService, used: ReadonlySet<string>): IdGeneratorService => {
  const next: Effect.Effect<string> = Effect.flatMap(ids.next, (id) => used.has(id) ? next : Effect.succeed(id))
  const nextSync = ids.nextSync
  return {
    next,
    nextSync: nextSync === undefined ? undefined : () => {
      let id = nextSync()
      while (used.has(id)) id = nextSync()
      return id
    }
  }
}

/**
 * Rebuilds the state of a resumed agent from its (repaired) log (§10): the inbox from its
 * splices, the history from its surface events, the ids ever used, the turn counter from the
 * last `turn/start`, the request configuration last logged.
 */
export const restore = (a: AgentState, events: ReadonlyArray<SessionEvent>, used: Set<string>): Effect.Effect<void> => {
  const options = { header: a.sessionLog.header }
  const inbox = Inbox.replay(events, options)
  a.historyCell = History.derive(events, options)
  a.seenCell = used
  let turns = 0
  for (const e of events) {
    const data = e.data as any
    if (e.type === "turn/start") {
      if (data.turn > turns) turns = data.turn
    } else if (e.type === "request/header") {
      a.headerKey = requestKeyOf(data)
    }
  }
  a.turnCounter = turns
  restoreUsage(a, events)
  markUndecided(a, inbox.nextTurn)
  markUndecided(a, inbox.nextStep.map((p) => p.message))
  adoptWaiters(a)
  return Ref.set(a.inbox, inbox)
}

/**
 * Starts the run of a turn the log left waiting for a person (§26 rule 8), if it did: repair
 * left that turn open, its step's tool batch goes on (`driver.ts` `startResumed`). The step's
 * calls as the log has them: a committed result stays; a call with an open question waits again;
 * a call with a `tool/call` and no result owes one: `DENIED` when its question was refused (it
 * never ran), else `TOOL_OUTCOME_UNKNOWN` (it may have run: it never runs twice), but a sub-agent
 * call whose `subagent/end` repair appended gets the result that end gives (§27 rule 16); a call
 * without a `tool/call` never started and is prepared and run as usual. Also restores the remembered
 * answers (rule 6). Called before the agent is returned: nothing else acts on it yet.
 */
export const resumeWaiting = (a: AgentState, events: ReadonlyArray<SessionEvent>): Effect.Effect<void, SessionWriteError> => {
  const remembered = Approvals.rememberedOf(events)
  if (remembered.size > 0) { for (const [tool, outcome] of remembered) approvalState(a).remembered.set(tool, outcome) }
  const open = openTurnOf(events)
  if (open?.step === undefined) return Effect.void
  const scan = scanStep(events, open.stepAt + 1)
  if (scan.open.size === 0) return Effect.void
  const t = newTurnState()
  t.turn = open.turn
  t.turnOpen = true
  t.step = open.step
  t.stepOpen = true
  t.assistantLogged = true
  if (scan.contextsEnd !== undefined) t.contextsInserted = scan.contextsEnd
  const calls = scan.calls.map((b) => newCall({ id: b.id, name: b.name, rawArguments: b.arguments }))
  const waiting: Array<{ readonly index: number; readonly id: string; readonly askedAt: number }> = []
  let from = calls.length
  for (let k = 0; k < calls.length; k++) {
    const call = calls[k]!
    if (scan.answered.has(call.id)) {
      call.callLogged = true
      call.phase = "committed"
      if (k === t.nextCommit) t.nextCommit++
      continue
    }
    if (!scan.logged.has(call.id)) {
      if (from === calls.length) from = k
      continue
    }
    call.callLogged = true
    const question = scan.open.get(call.id)
    const decision = scan.decided.get(call.id)
    if (question !== undefined) waiting.push({ index: k, id: question.id, askedAt: question.time })
    else if (decision !== undefined && !Approval.isAllowed(decision.outcome)) {
      fail(call, "DENIED", refusalText(call.name, decision))
    } else {
      // A sub-agent call whose end repair logged (§27 rule 16) gets the result that end gives.
      const start = scan.started.get(call.id)
      const end = scan.ended.get(call.id)
      if (start !== undefined && end !== undefined) {
        const given = resultOf(call.name, outcomeOf(start.id, end))
        if (given.error === undefined) succeed(call, given.content, [], false)
        else fail(call, given.error, given.text)
      } else fail(call, "TOOL_OUTCOME_UNKNOWN", resultText.TOOL_OUTCOME_UNKNOWN!)
    }
  }
  t.calls = calls
  return Effect.zipRight(ownFibers(a), critical(a, () => ({ drafts: [], apply: () => startResumed(a, t, waiting, from) })))
}

/** Starts a run when the log left waking work pending (`continuePending`, §10). */
export const continuePending = (a: AgentState): Effect.Effect<void, SessionWriteError> =>
  Effect.zipRight(
    // The agent's fibers are made only when there is work to start (an idle agent holds none).
    Effect.flatMap(Ref.get(a.inbox), (inbox) => Inbox.hasWakingWork(inbox) ? ownFibers(a) : Effect.void),
    critical(a, (inbox) => ({
      drafts: [],
      apply: () => {
        if (!a.running && !a.disposed && Inbox.hasWakingWork(inbox)) startRun(a)
      }
    }))
  )

const inUse = (sessionId: string): SessionWriteError =>
  new SessionStoreError({
    message: `session "${sessionId}" is in use by a live agent of this process: dispose it before resuming or repairing`,
    sessionId
  })

/** The first `turn/start` logged while another turn was open, if any. */
const turnStartedWhileOpen = (
  events: ReadonlyArray<SessionEvent>
): { readonly seq: number; readonly turn: number; readonly open: number } | undefined => {
  let open: number | undefined = undefined
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!
    if (e.type === "turn/start") {
      const turn = (e.data as { turn: number }).turn
      if (open !== undefined) return { seq: e.seq, turn, open }
      open = turn
    } else if (e.type === "turn/end") open = undefined
  }
  return undefined
}

/**
 * A compaction bracket left open before the log's end (§17): a `compaction/start` followed,
 * before its `compaction/end`, by a turn or step event or another `compaction/start`. Its
 * closer could only be appended at the end, after events it should have preceded.
 */
const compactionLeftOpen = (
  events: ReadonlyArray<SessionEvent>
): { readonly seq: number; readonly id: string; readonly by: string } | undefined => {
  let open: { readonly seq: number; readonly id: string } | undefined = undefined
  for (const e of events) {
    if (e.type === "compaction/end") open = undefined
    else if (open !== undefined && (BRACKET_BREAKERS.has(e.type))) return { ...open, by: `${e.type} at seq ${e.seq}` }
    if (e.type === "compaction/start") open = { seq: e.seq, id: String((e.data as { compactionId?: unknown }).compactionId) }
  }
  return undefined
}

const BRACKET_BREAKERS: ReadonlySet<string> = new Set([
  "compaction/start",
  "turn/start",
  "turn/end",
  "step/start",
  "step/end"
])

/**
 * Opens a session of the `SessionStore` in context and appends its repair closers (§10; the
 * store cuts a torn tail). DSH v0 logs are refused (read, never appended to), as are sessions a
 * live agent of this process writes. Repair events take the time of the event before them
 * (§3.1); their ids skip the ids the log already holds. A log in which a turn starts while
 * another is open (an older version wrote that after a failed append) is a `SessionLogError`
 * naming the line: closers appended at its end could not make it valid; so is one with a
 * compaction bracket left open before its end, and any log that, with its closers,
 * still breaks an invariant of §12 other than rule 5 (`unrepairable`: the first violation, its
 * rule, seq and line).
 *
 * A sub-agent call of the open step with a `subagent/start` and neither a `subagent/end` nor a
 * result is closed from its child's log (§27 rule 16, `closeChild`): the child is opened (a child
 * that is live is refused as any live session is), repaired first when its task is unfinished,
 * and closed again; then the call's `subagent/end` and result go in the parent's closers. With
 * `closing`, the session is such a child (its open questions are decided `unavailable`).
 */
export const repairLog = (
  sessionId: string,
  ids: IdGeneratorService,
  closing?: ClosingParent
): Effect.Effect<
  { readonly log: SessionLog; readonly appended: ReadonlyArray<SessionEvent>; readonly used: Set<string> },
  SessionWriteError | SessionLogError | SessionNotFound,
  SessionStore
> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    // A DSH v0 log is read, never appended to (checked before `open`, which may cut its tail).
    const { header } = yield* store.read(sessionId)
    if (header.version === 0) {
      return yield* Effect.fail(
        new SessionStoreError({
          message: `session "${sessionId}" is a DSH v0 log: it can be read (transcript, check), not resumed or appended to`,
          sessionId
        })
      )
    }
    const log = yield* store.open(sessionId)
    if (liveLogs.has(log)) return yield* Effect.fail(inUse(sessionId))
    const before = log.events()
    const nested = turnStartedWhileOpen(before)
    if (nested !== undefined) {
      // Closers can only be appended at the end: such a log cannot be repaired (§12 rule 1).
      return yield* Effect.fail(
        new SessionLogError({
          message: `session "${sessionId}": turn ${nested.turn} starts at seq ${nested.seq} while turn ${nested.open} ` +
            `is open (written by an older version after a failed append); the log cannot be repaired by appending`,
          path: log.path,
          line: nested.seq + 2
        })
      )
    }
    const unclosed = compactionLeftOpen(before)
    if (unclosed !== undefined) {
      return yield* Effect.fail(
        new SessionLogError({
          message: `session "${sessionId}": compaction ${unclosed.id} starts at seq ${unclosed.seq} and is not ended ` +
            `before ${unclosed.by}; the log cannot be repaired by appending`,
          path: log.path,
          line: unclosed.seq + 2
        })
      )
    }
    // The children of the sub-agent calls to close (§27 rule 16), read first without their
    // writers: whatever the closers leave broken (a log edited by hand, say) is refused before
    // anything is appended, here or in a child (§10, §12).
    const pending = pendingSubagents(before)
    const ends = yield* subagentEnds(pending, (id) => store.read(id))
    const violation = unrepairable(before, repairDrafts(before, () => "", ends, closing), { header: log.header })
    if (violation !== undefined) {
      return yield* Effect.fail(
        new SessionLogError({
          message: unrepairableMessage(sessionId, violation, before.length),
          path: log.path,
          line: Math.min(violation.seq, before.length) + 2
        })
      )
    }
    // Then each child is closed under its writer, repaired first when unfinished; its log alone
    // decides the call's end.
    for (const start of pending) ends.set(start.callId, yield* closeChild(sessionId, start, ids))
    const used = usedIds(before)
    // Ids for the synthetic results: counted first, then taken (the generator may be effectful),
    // skipping the ids the log already holds.
    let needed = 0
    repairDrafts(before, () => String(needed++), ends, closing)
    const fresh: Array<string> = []
    if (needed > 0) {
      const next = avoiding(ids, used).next
      for (let i = 0; i < needed; i++) fresh.push(flatten(yield* next))
    }
    const drafts = repairDrafts(before, () => fresh.shift()!, ends, closing)
    if (drafts.length === 0) return { log, appended: [] as ReadonlyArray<SessionEvent>, used }
    // Repair events take the time of the event before them (§3.1).
    const clock = new VirtualClock()
    clock.setTime(before.length > 0 ? before[before.length - 1]!.time : 0)
    const appended = yield* Effect.withClock(log.append(drafts), clock)
    for (const e of appended) if (e.type === "tool/result") used.add((e.data as any).message.id)
    return { log, appended, used }
  })

/**
 * Closes the child of the sub-agent call `start` of session `parentSession` (§27 rule 16), under
 * the child's writer: no session → the call never started (c); a task the child's log shows
 * unfinished → the child is repaired first (`repairLog` with the parent's call closing: its own
 * closers, its open questions decided `unavailable`, its own sub-agent calls closed the same way)
 * (b); else its task is over (a). The child's log is closed again (its writer freed). Returns the
 * call's `subagent/end` fields. A session whose header does not name this call as its parent is
 * refused.
 */
const closeChild = (
  parentSession: string,
  start: SubagentStart,
  ids: IdGeneratorService
): Effect.Effect<EndFields, SessionWriteError | SessionLogError | SessionNotFound, SessionStore> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const found = yield* Effect.catchIf(
      store.read(start.id),
      (e): e is SessionNotFound => isNotFound(e),
      () => Effect.succeed(undefined)
    )
    if (found === undefined) return repairFields(undefined)
    const lineage = found.header as { readonly parentSession?: unknown; readonly parentCallId?: unknown }
    if (lineage.parentSession !== parentSession || lineage.parentCallId !== start.callId) {
      return yield* Effect.fail(
        new SessionStoreError({
          message: `session "${start.id}", named by the subagent/start of call ${start.callId} of session ` +
            `"${parentSession}", is not that call's sub-agent (its header names session ${
              JSON.stringify(lineage.parentSession)
            }, call ${JSON.stringify(lineage.parentCallId)}); the call cannot be closed from it`,
          sessionId: start.id
        })
      )
    }
    const log = yield* store.open(start.id)
    if (liveLogs.has(log)) return yield* Effect.fail(inUse(start.id))
    const closed = unfinished(log.events(), log.header)
      ? Effect.map(repairLog(start.id, ids, { parentSession, callId: start.callId }), () => log.events())
      : Effect.succeed(log.events())
    // Its writer is freed whatever the repair gave.
    return yield* Effect.ensuring(
      Effect.map(closed, (events) => repairFields({ events, header: log.header })),
      log.close ?? Effect.void
    )
  })
