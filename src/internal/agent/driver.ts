/**
 * The driver (§6, §9): while running, one fiber runs turns while waking work is
 * pending. A turn opens with its claim (§4), each step runs the pre-step waterfall (§7), the
 * model call (`modelStep.ts`) and the tool batch (`toolBatch.ts`), and the decisions that read
 * the inbox (the claim, the continuation rule of §6.3, the next-turn rule of §6.5) are critical
 * sections atomic with the append they decide on. An interrupted driver (cancel, dispose) closes
 * its own turn durably before the agent goes idle (§9); a failed run closes it `RUN_FAILED`.
 *
 * Written as plain effect chains, not generators: this runs once per model step (STYLE.md "Hot
 * path"). The driver fiber is started with `Runtime.runFork` from inside the section that decides
 * the run (no `Effect.fork` per run, measured 8–9 µs) and belongs to the agent's `runs`
 * (`fibers.ts`): cancel interrupts it, disposal closes the scope that holds it.
 */
import { Cause, Deferred, Duration, Effect, Either, Exit, Schedule } from "effect"
import type { CompactionReport } from "../../Compaction.js"
import { dropped, dropReasonOfTurnEnd, entered as enteredOutcome } from "../../Delivery.js"
import type { DeliveryOutcome } from "../../Delivery.js"
import * as Inbox from "../../Inbox.js"
import type { UserMessage } from "../../Message.js"
import type { PreStepDecision } from "../../PreStep.js"
import type { EventDraft, TurnEndReason } from "../../SessionEvent.js"
import { SessionFenced, SessionStoreError, type SessionWriteError } from "../../SessionLog.js"
import { causeMessage, messageOf } from "../cause.js"
import { checkJson } from "../json.js"
import { isUserMessageShape } from "../logCodec.js"
import { isTransient } from "../store/common.js"
import * as Trace from "../tracing.js"
import { cancelOpen, forgetOpen } from "./approvals.js"
import { abortRequest, compact, needsCompaction, noteUsage, requestCompaction } from "./compaction.js"
import { forkRun, ownFibers } from "./fibers.js"
import { assistantDraft, callModel, logAssistant } from "./modelStep.js"
import { endStopped, orphanWaiters, publish, resolve, setIdle, status } from "./observers.js"
import { type Claimed, commit, critical, type Section } from "./section.js"
import { type AgentState, history, liveLogs, newTurnState, refreshTools, seen, type TurnState, USER_CAUSE } from "./state.js"
import { continueBatch, reopen, toolStep, truncateCalls, type Waiting } from "./toolBatch.js"
import { commitAbortedCalls, pendingResults } from "./toolResults.js"
import { usageBefore } from "./usage.js"

/**
 * `agent.compact` (§17): requests a compaction, inside a critical section so that it cannot
 * fall between a run's decision to go idle and its end. An idle agent starts a run that is the
 * manual bracket alone (no turn); a running one serves it at its next pre-step boundary, or
 * between turns when its turn ends first. Waits for the compaction's report.
 */
export const requestCompact = (
  a: AgentState,
  instructions: string | undefined,
  refused: () => Error | undefined
): Effect.Effect<CompactionReport, any> =>
  Effect.flatMap(Effect.zipRight(ownFibers(a), Deferred.make<CompactionReport>()), (done) =>
    Effect.zipRight(
      critical(a, () => {
        const error = refused()
        if (error !== undefined) return Effect.fail(error)
        return {
          drafts: [],
          apply: () => {
            requestCompaction(a, instructions).waiters.push((effect) => Deferred.unsafeDone(done, effect))
            if (!a.running) startRun(a)
          }
        }
      }),
      Deferred.await(done)
    ))

/** Starts a run (status `running`, the driver fiber): called inside a critical section. */
export const startRun = (a: AgentState): void => {
  a.running = true
  publish(a, { type: "agent/status", status: "running" })
  forkDriver(a)
}

/**
 * Starts the run of a resumed turn whose step waits for a person (§26 rule 8; called inside a
 * critical section): the step's tool batch goes on where the log left it (`continueBatch`), then
 * the step ends and the turn continues as any other (§6.3).
 */
export const startResumed = (a: AgentState, t: TurnState, waiting: ReadonlyArray<Waiting>, from: number): void => {
  a.running = true
  const batch = reopen(a, t, waiting, from)
  const body = Effect.flatMap(
    continueBatch(a, t, batch),
    () => Effect.flatMap(endStep(a, t, true), (next) => next === "step" ? runStep(a, t, true) : Effect.succeed(next))
  )
  forkRun(a, runLoop(a, { t, body }))
  publish(a, { type: "agent/status", status: status(a) })
}

/**
 * Forks the driver fiber at once, from plain code inside a critical section, into the agent's
 * `runs` (`fibers.ts`), with the current fiber's context and FiberRefs; it starts on the
 * scheduler, after the section, uninterruptible until its first turn begins, so that a cancel
 * landing before it runs still closes the turn and settles the agent.
 */
const forkDriver = (a: AgentState): void => forkRun(a, runLoop(a))

/**
 * The driver fiber's body: turns while the run goes on (§6.5); with `resumed`, first the rest
 * of a resumed turn (`startResumed`).
 */
const runLoop = (
  a: AgentState,
  resumed?: { readonly t: TurnState; readonly body: Effect.Effect<TurnState | undefined, SessionWriteError> }
): Effect.Effect<void> => {
  // The fiber starts uninterruptible (see `forkDriver`); only the turns are interruptible, so
  // a cancel that lands even before the fiber runs ends in `stopRun`'s clean-up.
  const loop = (t: TurnState): Effect.Effect<void> =>
    Effect.matchCauseEffect(Effect.interruptible(runTurn(a, t)), {
      onSuccess: (next) => (next === undefined ? Effect.void : loop(next)),
      onFailure: (cause) => stopRun(a, t, cause)
    })
  return Effect.withFiberRuntime((fiber) => {
    // The run's tracer (§19), read once: none with Effect's default tracer.
    Trace.startRun(a, fiber)
    if (resumed !== undefined) {
      a.current = resumed.t
      return Effect.matchCauseEffect(Effect.interruptible(resumed.body), {
        onSuccess: (next) => (next === undefined ? Effect.void : loop(next)),
        onFailure: (cause) => stopRun(a, resumed.t, cause)
      })
    }
    const first = newTurnState()
    a.current = first
    return loop(first)
  })
}

/**
 * Ends a run that failed or was interrupted (§9): closes the aborted turn, or goes idle. A
 * released agent (`cancel.ts` `release`) closes nothing: its turn stays open in the log.
 */
const stopRun = (a: AgentState, t: TurnState, cause: Cause.Cause<SessionWriteError>): Effect.Effect<void> => {
  if (a.released) return Effect.sync(() => leaveOpen(a, a.current ?? t))
  if (Cause.isInterruptedOnly(cause)) {
    // `current` is the turn the interruption hit (possibly the next one, already opened).
    return Effect.catchAllCause(closeRetrying(a, a.current ?? t), (closed) => stopAgent(a, a.current ?? t, closed))
  }
  // Another writer took the session over (SessionFenced): nothing more can be written, the
  // turn is the new owner's to repair (§10). The agent stops at once, with that error.
  if (fencedBy(cause) !== undefined) return stopAgent(a, a.current ?? t, cause)
  // A defect (a broken plugin, a bug) or a failed append: the turn is closed durably with
  // `{kind:"error", code:"RUN_FAILED"}` like an aborted one, so the log stays valid.
  return Effect.zipRight(
    Effect.logError(`agent ${a.id}: the run failed`, cause),
    Effect.catchAllCause(closeRetrying(a, a.current ?? t, causeMessage(cause)), (closed) => stopAgent(a, a.current ?? t, closed))
  )
}

/**
 * How the closers of an interrupted or failed turn are retried when the store refuses them with
 * an I/O error (a connection reset, a statement timeout under a lock, a full disk): five more
 * tries, 100, 200, 400, 800 and 1,600 ms apart (about 3 s in all, on the `Clock`). The SQL store
 * takes a fresh connection for each (the pool drops a connection that failed), and settles a
 * failed append before it returns, so a retry never appends twice (§3.3).
 */
const CLOSE_RETRY = Schedule.intersect(Schedule.exponential(Duration.millis(100)), Schedule.recurs(5))

/**
 * `closeAborted`, retried (`CLOSE_RETRY`) while the store's error is transient (an I/O error,
 * not a closed, fenced or released log) and the agent is not released. Each try goes on from
 * where the last one stopped: what a try closed durably is recorded in the turn's state.
 */
const closeRetrying = (a: AgentState, t: TurnState, failure?: string): Effect.Effect<void, SessionWriteError> =>
  Effect.retry(closeAborted(a, t, failure), {
    schedule: CLOSE_RETRY,
    while: (error) => !a.released && isTransient(error)
  })

/** The `SessionFenced` failure of `cause`, if any. */
const fencedBy = (cause: Cause.Cause<unknown>): SessionFenced | undefined => {
  for (const failure of Cause.failures(cause)) if (failure instanceof SessionFenced) return failure
  return undefined
}

/**
 * The turn could not be closed durably (the store refuses appends: a full disk, a broken or
 * fenced log): the agent stops, so that nothing is written after the open turn (a later
 * `turn/start` would make the log invalid for good, §12). From now on every operation fails
 * with a `SessionStoreError` naming the turn (or, for a fenced log, the `SessionFenced` itself:
 * the session has a new owner, who repairs it), nothing is appended, the live events end as after a
 * disposal, and the messages the open turn had claimed resolve `Dropped interrupted` (the fate
 * repair gives them, §10). Resuming the session repairs the open turn and goes on.
 */
const stopAgent = (a: AgentState, t: TurnState, closed: Cause.Cause<SessionWriteError>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const fenced = fencedBy(closed)
    // Released while the turn was being closed: what was closed stays, the rest is the next resume's.
    if (a.released) return Effect.sync(() => leaveOpen(a, t))
    const turn = t.turnOpen ? `turn ${t.turn}` : "its turn"
    const error = fenced ?? new SessionStoreError({
      message: `session "${a.id}" stopped: ${turn} could not be closed (${causeMessage(closed)}); ` +
        `resume the session to repair it`,
      sessionId: a.id,
      cause: Cause.squash(closed)
    })
    return Effect.zipRight(
      fenced === undefined
        ? Effect.logError(`agent ${a.id}: stopped, ${turn} could not be closed`, closed)
        : Effect.logError(`agent ${a.id}: stopped, another writer took the session over (${fenced.message})`),
      Effect.catchAll(
        critical(a, () => ({
          drafts: [],
          apply: () => {
            a.stopped = error
            a.disposed = true
            liveLogs.delete(a.sessionLog)
            leaveOpen(a, t)
            endStopped(a)
          }
        })),
        // It appends nothing: it fails only when the agent was released meanwhile.
        () => Effect.sync(() => leaveOpen(a, t))
      )
    )
  })

/**
 * The run stops with its turn left open in the log (a stopped or released agent): the messages
 * the turn had claimed resolve `Dropped interrupted` (the fate repair gives them, §10), the
 * other undecided waiters go to the next agent of the session (`orphanWaiters`), the agent is
 * idle.
 */
const leaveOpen = (a: AgentState, t: TurnState): void => {
  endTrace(t, undefined)
  // Its open questions stay open in the log, for the next resume (§26 rule 8).
  forgetOpen(a)
  resolveClaimed(a, t, dropped("interrupted"))
  abortRequest(a)
  orphanWaiters(a)
  t.turnOpen = false
  t.stepOpen = false
  setIdle(a)
}

/**
 * One turn. Returns the next turn when the run goes on (opened, with its claim, in the same
 * append as this turn's `turn/end`, §6.5), else `undefined` (the agent went idle).
 */
const runTurn = (a: AgentState, t: TurnState): Effect.Effect<TurnState | undefined, SessionWriteError> => {
  if (t.turnOpen) return runStep(a, t, false)
  // A manual compaction between turns (`agent.compact` on an idle agent, or pending when the
  // last turn ended): its own bracket, no turn; then the next turn iff waking work is pending.
  if (a.compactionCell?.request !== undefined) return Effect.flatMap(compact(a, t, "manual"), () => afterManual(a))
  // The first turn of a run: turn/start and the claim, atomically (§6.1, §4).
  return Effect.flatMap(
    critical(a, (inbox) => {
      const drafts: Array<EventDraft> = []
      const open = openTurn(a, inbox, drafts)
      return { drafts, inbox: open.inbox, claimed: open.claimed, apply: () => open.apply(t) }
    }),
    () => runStep(a, t, false)
  )
}

/**
 * After a manual compaction between turns (§6.5, §17): opens the next turn, with its
 * claim, iff waking work is pending (a delivery made during the compaction), else goes idle;
 * a `compact` requested meanwhile runs next.
 */
const afterManual = (a: AgentState): Effect.Effect<TurnState | undefined, SessionWriteError> =>
  critical(a, (inbox): Section<TurnState | undefined> => {
    if (a.compactionCell?.request !== undefined && !a.disposed) return { drafts: [], apply: () => betweenTurns(a) }
    if (a.disposed || !Inbox.hasWakingWork(inbox)) {
      return {
        drafts: [],
        apply: () => {
          setIdle(a)
          return undefined
        }
      }
    }
    const drafts: Array<EventDraft> = []
    const open = openTurn(a, inbox, drafts)
    return {
      drafts,
      inbox: open.inbox,
      claimed: open.claimed,
      apply: () => {
        const next = newTurnState()
        open.apply(next)
        return next
      }
    }
  })

/**
 * The run goes on between turns (a pending `compact` runs next, in its own bracket): a fresh
 * turn state, not opened, that is the run's current one, so that a cancel during that bracket
 * closes it (`closeAborted`) rather than the turn before.
 */
const betweenTurns = (a: AgentState): TurnState => {
  const next = newTurnState()
  a.current = next
  return next
}

/** One step: the pre-step (unless entered with its claim), the model call, tools, the step's end. */
const runStep = (
  a: AgentState,
  t: TurnState,
  toolContinuation: boolean
): Effect.Effect<TurnState | undefined, SessionWriteError> => {
  if (t.entered) {
    // With the default pre-step the step was entered together with its claim.
    t.entered = false
    return runModelStep(a, t)
  }
  const batch = t.claimed ?? []
  const waterfall = Effect.suspend(() =>
    a.config.preStep.run({ agentId: a.id, turn: t.turn, step: t.step, messages: batch, usage: usageBefore(a, t.turn) })
  )
  return Effect.flatMap(
    Effect.exit(t.trace === undefined ? waterfall : Trace.preStep(t.trace, t.turn, t.step, batch.length, waterfall)),
    (decision): Effect.Effect<TurnState | undefined, SessionWriteError> => {
      if (Exit.isFailure(decision)) {
        if (Cause.isInterruptedOnly(decision.cause)) return Effect.failCause(decision.cause as Cause.Cause<never>)
        return endTurn(a, t, { kind: "error", error: { message: causeMessage(decision.cause), code: "PRE_STEP_FAILED" } })
      }
      const d: PreStepDecision = decision.value
      const malformed = typeof d !== "object" || d === null
        ? "the pre-step returned no decision"
        : d._tag === "Reject"
        ? (typeof d.reason === "string" ? undefined : "a pre-step Reject reason is not a string")
        : d._tag === "Enter"
        ? undefined
        : "the pre-step returned something that is not a decision (Enter or Reject)"
      if (malformed !== undefined) {
        return endTurn(a, t, { kind: "error", error: { message: malformed, code: "PRE_STEP_FAILED" } })
      }
      if (d._tag === "Reject") return endTurn(a, t, { kind: "blocked", reason: d.reason })
      const checked = checkEntered(a, batch, d.messages)
      if (Either.isLeft(checked)) {
        return endTurn(a, t, { kind: "error", error: { message: checked.left, code: "PRE_STEP_FAILED" } })
      }
      const entered = checked.right
      if (entered.length === 0 && (t.step === 1 || !toolContinuation)) {
        return endTurn(a, t, { kind: "completed" }, true)
      }
      const enter = Effect.flatMap(enterStep(a, t, batch, entered), () => runModelStep(a, t))
      // Compaction runs here, after the claim and the waterfall, before the step enters (§17).
      return needsCompaction(a, entered) ? Effect.zipRight(compact(a, t, "pressure"), enter) : enter
    }
  )
}

/** The model call of an entered step and what follows it: tools, the step's end, the next step. */
const runModelStep = (a: AgentState, t: TurnState): Effect.Effect<TurnState | undefined, SessionWriteError> =>
  Effect.flatMap(callModel(a, t), (response): Effect.Effect<TurnState | undefined, SessionWriteError> => {
    if (Either.isLeft(response)) {
      const e = response.left
      // The request is longer than the model's window (§17): compact once, retry once.
      if (e.code === "CONTEXT_OVERFLOW" && a.config.compaction !== undefined) {
        if (!t.overflowRetried) {
          t.overflowRetried = true
          return Effect.flatMap(compact(a, t, "overflow"), (report) =>
            report.outcome === "compacted"
              ? runModelStep(a, t)
              : endTurn(a, t, overflowEnd(e, `; compaction ${report.outcome}`)))
        }
        return endTurn(a, t, overflowEnd(e, "; the request overflowed again after a compaction"))
      }
      return endTurn(a, t, {
        kind: "error",
        error: e.status !== undefined
          ? { message: e.message, code: e.code, status: e.status }
          : { message: e.message, code: e.code }
      })
    }
    const acc = response.right
    noteUsage(a, acc.usage)
    const truncated = acc.finish === "length"
    if (truncated) t.maxTokens = true
    const withTools = acc.toolCalls.length > 0
    const ended: Effect.Effect<"step" | TurnState | undefined, SessionWriteError> = withTools
      ? (truncated ? Effect.flatMap(logAssistant(a, t, acc, false), () => truncateCalls(a, t)) : toolStep(a, t, acc))
        .pipe(Effect.flatMap(() => endStep(a, t, !truncated)))
      : Effect.flatMap(a.config.ids.next, (id) => endStep(a, t, false, assistantDraft(a, t, acc, false, id)))
    return Effect.flatMap(ended, (next) => next === "step" ? runStep(a, t, withTools && !truncated) : Effect.succeed(next))
  })

/** The turn end of a request that overflowed the model's context window (code `CONTEXT_OVERFLOW`). */
const overflowEnd = (
  e: { readonly message: string; readonly code: string; readonly status?: number | undefined },
  why: string
): TurnEndReason => ({
  kind: "error",
  error: e.status !== undefined
    ? { message: e.message + why, code: e.code, status: e.status }
    : { message: e.message + why, code: e.code }
})

/**
 * Validates the entered batch (§7, §12 rule 6): each message was claimed at this pre-step
 * (same id) or has an id never seen; no id twice; a well-formed, plain-JSON `UserMessage`
 * (deep-frozen in place).
 */
const checkEntered = (
  a: AgentState,
  claimed: ReadonlyArray<UserMessage>,
  messages: ReadonlyArray<UserMessage>
): Either.Either<ReadonlyArray<UserMessage>, string> => {
  if (!Array.isArray(messages)) return Either.left("pre-step Enter.messages is not an array")
  const ids = new Set<string>()
  const out: Array<UserMessage> = []
  for (const m of messages) {
    if (typeof m !== "object" || m === null || m.role !== "user" || typeof m.id !== "string") {
      return Either.left("pre-step returned something that is not a UserMessage")
    }
    if (!isUserMessageShape(m)) return Either.left(`pre-step returned message ${m.id}, which is not a well-formed UserMessage`)
    if (ids.has(m.id)) return Either.left(`pre-step returned message id ${m.id} twice`)
    ids.add(m.id)
    const wasClaimed = claimed.some((c) => c.id === m.id)
    if (!wasClaimed && seen(a).has(m.id)) {
      return Either.left(`pre-step returned message id ${m.id}, which was not claimed and is already used`)
    }
    try {
      checkJson(m, "message")
    } catch (e) {
      return Either.left(`pre-step returned a message that is not plain JSON: ${messageOf(e)}`)
    }
    out.push(m)
  }
  return Either.right(out)
}

/**
 * Adds `step/start`, one `user/message` per entered message, and `request/header` when the
 * request configuration differs from the last one logged (§6.2), to `drafts`; returns the state
 * update to run once they are durable.
 */
const stepDrafts = (
  a: AgentState,
  turn: number,
  step: number,
  claimed: ReadonlyArray<UserMessage>,
  entered: ReadonlyArray<UserMessage>,
  drafts: Array<EventDraft>
): (t: TurnState) => void => {
  refreshTools(a)
  drafts.push({ type: "step/start", data: { turn, step } })
  for (const m of entered) drafts.push({ type: "user/message", data: m })
  const header = a.requestKey !== a.headerKey
  if (header) {
    drafts.push({
      type: "request/header",
      data: {
        turn,
        step,
        provider: a.config.model.provider,
        model: a.config.model.model,
        ...(a.config.instructions !== undefined ? { instructions: a.config.instructions } : {}),
        tools: a.config.toolDefinitions,
        settings: a.config.settings ?? {}
      }
    })
  }
  return (t) => {
    if (header) a.headerKey = a.requestKey
    t.stepOpen = true
    t.overflowRetried = false
    t.claimed = undefined
    t.acc = undefined
    t.assistantLogged = false
    t.calls = undefined
    t.nextCommit = 0
    t.contextsInserted = 0
    const ids = seen(a)
    const list = history(a)
    t.enteredFrom = list.length
    for (const m of entered) {
      ids.add(m.id)
      list.push(m)
    }
    if (t.trace !== undefined) Trace.entered(a, t.trace, step, claimed, entered)
    const outcome = enteredOutcome(turn, step)
    for (const m of entered) resolve(a, m.id, outcome)
    if (claimed !== entered) {
      for (const c of claimed) {
        if (!entered.some((m) => m.id === c.id)) resolve(a, c.id, dropped("discarded"))
      }
    }
  }
}

/** Enters a step after a pre-step decided (its own append; it reads no inbox, so no section). */
const enterStep = (a: AgentState, t: TurnState, claimed: ReadonlyArray<UserMessage>, entered: ReadonlyArray<UserMessage>) => {
  const drafts: Array<EventDraft> = []
  const apply = stepDrafts(a, t.turn, t.step, claimed, entered, drafts)
  return commit(a, drafts, () => apply(t))
}

/**
 * With the default pre-step (enter the claimed batch as it is), a claim and the step it enters
 * are one append: the waterfall's answer is known when the claim is made. Not when the batch is
 * empty at a boundary that is not a tool continuation (that turn ends with no step).
 */
const enterNow = (
  a: AgentState,
  batch: ReadonlyArray<UserMessage>,
  toolContinuation: boolean,
  prefix?: ReadonlyArray<EventDraft>
): boolean => a.config.fastPreStep && (batch.length > 0 || toolContinuation) && !needsCompaction(a, batch, prefix)

/** Closes the turn with `reason` (and the open step) and decides the next turn (§6.5). */
const endTurn = (
  a: AgentState,
  t: TurnState,
  reason: TurnEndReason,
  enteredEmpty = false
): Effect.Effect<TurnState | undefined, SessionWriteError> =>
  critical(
    a,
    (inbox) => closeTurn(a, t, inbox, reason, [], enteredEmpty ? dropped("discarded") : dropped(dropReasonOfTurnEnd(reason)))
  )

/** Runs the state update of a prefix draft (the assistant message, results) once the append is durable. */
const committed = (t: TurnState): void => {
  const apply = t.onCommit
  if (apply !== undefined) {
    t.onCommit = undefined
    apply()
  }
}

/**
 * Adds `turn/start` and the turn-boundary claim to `drafts` (and, with the default pre-step,
 * the step it enters); returns the inbox after the claim and what to apply once the drafts are
 * durable. Called inside a critical section.
 */
const openTurn = (
  a: AgentState,
  inbox: Inbox.InboxState,
  drafts: Array<EventDraft>
): { readonly inbox: Inbox.InboxState; readonly claimed: Claimed | undefined; readonly apply: (t: TurnState) => void } => {
  const turn = a.turnCounter + 1
  const claim = Inbox.claim(inbox, true)
  drafts.push({ type: "turn/start", data: { turn } })
  for (const data of claim.splices) drafts.push({ type: "agent/inbox/spliced", data })
  const claimed = claim.batch.length > 0 ? { after: drafts.length - 1, batch: claim.batch, turn } : undefined
  // `drafts` holds what is appended with this claim: after a turn, its last response or results,
  // which the estimate of the step's request must count (§17).
  const enter = enterNow(a, claim.batch, false, drafts) ? stepDrafts(a, turn, 1, claim.batch, claim.batch, drafts) : undefined
  const kinds = a.trace?.run !== undefined ? Trace.claimKinds(inbox, claim.batch.length) : undefined
  return {
    inbox: Inbox.applyAll(inbox, claim.splices),
    claimed,
    apply: (t) => {
      a.turnCounter = turn
      a.claimFailures = 0
      t.turn = turn
      t.turnOpen = true
      t.step = 1
      t.claimed = claim.batch
      a.current = t
      t.trace = Trace.startTurn(a, turn, kinds)
      if (enter !== undefined) {
        enter(t)
        t.entered = true
      }
    }
  }
}

/**
 * Appends `step/end` (if a step is open) and `turn/end {reason}`, and, iff waking work is
 * pending (§6.5), the next turn's `turn/start` and claim in the same append. Resolves the
 * undecided claimed messages with `claimedOutcome`. Built inside a critical section.
 */
const closeTurn = (
  a: AgentState,
  t: TurnState,
  inbox: Inbox.InboxState,
  reason: TurnEndReason,
  prefix: ReadonlyArray<EventDraft>,
  claimedOutcome: DeliveryOutcome
): Section<TurnState | undefined> => {
  const drafts: Array<EventDraft> = prefix.slice()
  if (t.stepOpen) drafts.push({ type: "step/end", data: { turn: t.turn, step: t.step } })
  drafts.push({ type: "turn/end", data: { turn: t.turn, reason } })
  const open = !a.disposed && Inbox.hasWakingWork(inbox) ? openTurn(a, inbox, drafts) : undefined
  return {
    drafts,
    inbox: open?.inbox,
    claimed: open?.claimed,
    apply: () => {
      committed(t)
      endTrace(t, reason)
      t.stepOpen = false
      t.turnOpen = false
      resolveClaimed(a, t, claimedOutcome)
      if (open === undefined) {
        // A `compact` requested during the turn and not served at a boundary runs now, between turns.
        if (a.compactionCell?.request !== undefined && !a.disposed) return betweenTurns(a)
        setIdle(a)
        return undefined
      }
      const next = newTurnState()
      open.apply(next)
      return next
    }
  }
}

/** Ends the turn's span, if it has one (`reason` undefined: the turn stays open in the log). */
const endTrace = (t: TurnState, reason: TurnEndReason | undefined): void => {
  const trace = t.trace
  if (trace !== undefined) {
    t.trace = undefined
    Trace.endTurn(trace, reason)
  }
}

const resolveClaimed = (a: AgentState, t: TurnState, outcome: DeliveryOutcome): void => {
  const claimed = t.claimed
  t.claimed = undefined
  if (claimed !== undefined) { for (const m of claimed) resolve(a, m.id, outcome) }
}

/** `step/end` and the continuation rule (§6.3), atomically; claims for the next step when one runs. */
const endStep = (
  a: AgentState,
  t: TurnState,
  toolContinuation: boolean,
  assistant?: { readonly draft: EventDraft; readonly apply: () => void }
): Effect.Effect<"step" | TurnState | undefined, SessionWriteError> =>
  critical(a, (inbox): Section<"step" | TurnState | undefined> => {
    const maxSteps = a.config.maxSteps
    // A response without tool calls is logged in the same append as its step's end; so are
    // the last results of a tool step.
    let prefix: ReadonlyArray<EventDraft> = []
    if (assistant !== undefined) {
      prefix = [assistant.draft]
      t.onCommit = assistant.apply
    } else {
      const results = pendingResults(a, t)
      if (results !== undefined) {
        prefix = results.drafts
        t.onCommit = results.apply
      }
    }
    const another = toolContinuation || Inbox.hasWakingStep(inbox)
    if (another && t.step >= maxSteps) {
      return closeTurn(
        a,
        t,
        inbox,
        {
          kind: "error",
          error: { message: `the turn reached its limit of ${maxSteps} steps`, code: "MAX_STEPS" }
        },
        prefix,
        dropped("failed")
      )
    }
    if (another) {
      const drafts: Array<EventDraft> = [...prefix, { type: "step/end", data: { turn: t.turn, step: t.step } }]
      const claim = Inbox.claim(inbox, false)
      for (const data of claim.splices) drafts.push({ type: "agent/inbox/spliced", data })
      const claimed = claim.batch.length > 0 ? { after: drafts.length - 1, batch: claim.batch, turn: t.turn } : undefined
      const enter = enterNow(a, claim.batch, toolContinuation, prefix)
        ? stepDrafts(a, t.turn, t.step + 1, claim.batch, claim.batch, drafts)
        : undefined
      const kinds = t.trace !== undefined ? Trace.claimKinds(inbox, claim.batch.length) : undefined
      return {
        drafts,
        inbox: Inbox.applyAll(inbox, claim.splices),
        claimed,
        apply: () => {
          committed(t)
          t.stepOpen = false
          t.step++
          t.claimed = claim.batch
          if (t.trace !== undefined) t.trace.kinds = kinds
          if (enter !== undefined) {
            enter(t)
            t.entered = true
          }
          return "step" as const
        }
      }
    }
    const reason: TurnEndReason = t.maxTokens ? { kind: "max-tokens" } : { kind: "completed" }
    return closeTurn(a, t, inbox, reason, prefix, dropped("discarded"))
  })

/**
 * Closes an interrupted (or failed, with `failure`) turn durably (§9): opens it first when the
 * run was about to start it, logs the streamed prefix (`interrupted: true`), closes every tool
 * call, `step/end`, `turn/end {aborted}` (or `{error RUN_FAILED}`); then, iff the latch is set
 * (never after dispose), or after a failure iff waking work is pending (§6.5), the run goes on in
 * a new driver fiber; otherwise the agent goes idle.
 */
const closeAborted = (a: AgentState, t: TurnState, failure?: string): Effect.Effect<void, SessionWriteError> =>
  Effect.gen(function*() {
    const bracket = t.compaction
    if (bracket !== undefined) {
      // A compaction cut short keeps nothing (§17): its bracket ends aborted (or failed).
      yield* commit(a, [{
        type: "compaction/end",
        data: {
          compactionId: bracket.id,
          turn: bracket.turn,
          outcome: failure === undefined ? "aborted" : "failed",
          ...(failure === undefined ? {} : { error: { code: "RUN_FAILED", message: failure } })
        }
      }], () => {
        t.compaction = undefined
      })
    }
    if (!t.turnOpen && (bracket !== undefined || a.compactionCell?.request !== undefined)) {
      // A manual compaction run between turns: no turn to close (it opened none).
      abortRequest(a)
      return yield* critical(a, (inbox): Section<void> => ({ drafts: [], apply: () => afterRun(a, inbox, failure) }))
    }
    if (!t.turnOpen) {
      yield* critical(a, (): Section<void> => {
        const turn = a.turnCounter + 1
        return {
          drafts: [{ type: "turn/start", data: { turn } }],
          apply: () => {
            a.turnCounter = turn
            t.turn = turn
            t.turnOpen = true
            t.trace = Trace.startTurn(a, turn, undefined)
          }
        }
      })
    }
    if (t.stepOpen) {
      const acc = t.acc
      if (!t.assistantLogged && acc !== undefined && acc.streamed) yield* logAssistant(a, t, acc, true)
      // Every open question of the step is decided `cancelled` first (§26 rule 7).
      yield* cancelOpen(a)
      if (t.calls !== undefined) yield* commitAbortedCalls(a, t, t.calls, true, failure === undefined ? "was canceled" : "failed")
    }
    yield* critical(a, (inbox): Section<void> => {
      // A cancel that landed while a failed turn was being closed (its closers waiting for the
      // store) wins: the turn ends aborted by it, so that the work it keeps (`keepInbox`) is not
      // owed the next turn (§6.5, §9), and the run stops as a cancel stops it.
      const failed = failure !== undefined && a.cancelCause === undefined
      const reason: TurnEndReason = failed
        ? { kind: "error", error: { message: failure, code: "RUN_FAILED" } }
        : { kind: "aborted", reason: a.cancelCause ?? USER_CAUSE }
      const drafts: Array<EventDraft> = []
      if (t.stepOpen) drafts.push({ type: "step/end", data: { turn: t.turn, step: t.step } })
      drafts.push({ type: "turn/end", data: { turn: t.turn, reason } })
      return {
        drafts,
        apply: () => {
          // The failed turn consumed input: it claimed a batch or ran a step. One that failed
          // before its claim was durable (the claim's append refused) leaves the same work
          // pending: it is tried once more at once (a full disk may have space again), then it
          // waits for the next delivery, so that a claim that always fails (an event the store
          // refuses) cannot start turn after turn without end.
          const progressed = t.step > 0 || (t.claimed !== undefined && t.claimed.length > 0)
          if (!failed || progressed) a.claimFailures = 0
          else a.claimFailures++
          endTrace(t, reason)
          t.stepOpen = false
          t.turnOpen = false
          resolveClaimed(a, t, dropped(dropReasonOfTurnEnd(reason)))
          abortRequest(a)
          const goOn = failed
            // As after any turn (§6.5): pending waking work runs next, in a new driver fiber
            // (after a second failed claim in a row, it waits for the next delivery).
            ? a.claimFailures <= 1 && !a.disposed && Inbox.hasWakingWork(inbox)
            // This fiber is interrupted: the run goes on in a new driver fiber (§9 latch).
            : a.latch && !a.disposed
          if (!goOn) return setIdle(a)
          a.cancelCause = undefined
          a.latch = false
          forkDriver(a)
        }
      }
    })
  })

/**
 * The end of a run that stopped between turns (a manual compaction canceled or failed): as
 * after `turn/end` (§6.5, §9), a new driver fiber runs iff the latch is set (cancel) or, after a
 * failure, waking work is pending; otherwise the agent goes idle.
 */
const afterRun = (a: AgentState, inbox: Inbox.InboxState, failure: string | undefined): void => {
  const goOn = failure !== undefined
    ? !a.disposed && a.cancelCause === undefined && Inbox.hasWakingWork(inbox)
    : a.latch && !a.disposed
  if (!goOn) return setIdle(a)
  a.cancelCause = undefined
  a.latch = false
  forkDriver(a)
}
