/**
 * Approvals in the loop (§26): the questions a running step asks, their decisions, and the
 * remembered answers. A question is asked with its call's `tool/call` (`toolBatch.ts`); its
 * `approval/decided` is appended under the agent's decision lock, so that of two decisions of
 * one question exactly one is appended (the other fails `ApprovalNotOpen`); the call's fiber
 * waits for the decision, then runs or gets its refusal. A cancel, a dispose or a failed run
 * decides every open question `cancelled` before the turn is closed (§9); a release leaves
 * them open in the log for the next resume.
 */
import { Deferred, Effect, Exit, FiberId, Option } from "effect"
import { ApprovalNotOpen } from "../../AgentError.js"
import type * as Approval from "../../Approval.js"
import type { EventDraft, SessionEvent } from "../../SessionEvent.js"
import type { SessionWriteError } from "../../SessionLog.js"
import { publish } from "./observers.js"
import { commit } from "./section.js"
import { type AgentState, approvalState, type CallState, familyOf, type Question } from "./state.js"

/** The `approval/asked` draft of a call's question (rule 2). */
export const askedDraft = (id: string, call: CallState): EventDraft => ({
  type: "approval/asked",
  data: { id, toolName: call.name, callId: call.id }
})

/** The `approval/decided` draft of a decision (rule 2). */
export const decidedDraft = (data: Approval.DecidedData): EventDraft => ({ type: "approval/decided", data })

/** A decision's data, without absent fields. */
export const decision = (
  id: string,
  outcome: Approval.Outcome,
  by: Approval.DecidedBy | undefined,
  reason: string | undefined
): Approval.DecidedData => {
  const data: { id: string; outcome: Approval.Outcome; by?: Approval.DecidedBy; reason?: string } = { id, outcome }
  if (by !== undefined) data.by = by
  if (reason !== undefined) data.reason = reason
  return data
}

/**
 * Whether the agent waits for a person (§5.2, §26, §27): a question of its own is open, or one of
 * a sub-agent its running calls started.
 */
export const awaitingPerson = (a: AgentState): boolean =>
  (a.approvalCell?.open.size ?? 0) > 0 || (a.family?.childrenAwaiting ?? 0) > 0

/**
 * The status changed with the open questions (§5.2): published when the first opens and the last
 * closes; a sub-agent's change goes up to the agent whose call runs it (§27).
 */
const statusChanged = (a: AgentState, was: boolean): void => {
  const now = awaitingPerson(a)
  if (was === now) return
  if (a.running) publish(a, { type: "agent/status", status: now ? "awaiting-approval" : "running" })
  const parent = a.family?.parentLink?.parent
  if (parent !== undefined) {
    const before = awaitingPerson(parent)
    familyOf(parent).childrenAwaiting += now ? 1 : -1
    statusChanged(parent, before)
  }
}

/**
 * Links a sub-agent to the agent whose call `callId` runs it (§27): its questions are listed and
 * decided through the parent, its waiting is the parent's. Returns the unlink.
 */
export const adoptChild = (parent: AgentState, callId: string, child: AgentState): () => void => {
  const family = familyOf(parent)
  const children = family.children ?? (family.children = new Map())
  children.set(callId, child)
  const link = { parent, callId }
  familyOf(child).parentLink = link
  if (awaitingPerson(child)) {
    const before = awaitingPerson(parent)
    family.childrenAwaiting++
    statusChanged(parent, before)
  }
  return () => {
    if (children.get(callId) === child) children.delete(callId)
    if (child.family?.parentLink !== link) return
    if (awaitingPerson(child)) {
      const before = awaitingPerson(parent)
      family.childrenAwaiting--
      statusChanged(parent, before)
    }
    child.family.parentLink = undefined
  }
}

/** Registers a question once its `approval/asked` is durable (`askedAt`: that event's time). */
export const open = (
  a: AgentState,
  id: string,
  call: CallState,
  args: unknown,
  turn: number,
  step: number,
  askedAt: number
): Question => {
  const state = approvalState(a)
  const question: Question = {
    id,
    call,
    arguments: args,
    turn,
    step,
    askedAt,
    decided: Deferred.unsafeMake<Approval.DecidedData>(FiberId.none)
  }
  const was = awaitingPerson(a)
  state.open.set(id, question)
  statusChanged(a, was)
  return question
}

/** Applies a durable decision: the question closes, an "always" answer is remembered, the call's fiber wakes. */
const applyDecision = (a: AgentState, question: Question, data: Approval.DecidedData): void => {
  const state = approvalState(a)
  const was = awaitingPerson(a)
  state.open.delete(question.id)
  if (data.outcome === "allowed-always" || data.outcome === "rejected-always") {
    state.remembered.set(question.call.name, data.outcome)
  }
  Deferred.unsafeDone(question.decided, Exit.succeed(data))
  statusChanged(a, was)
}

/**
 * Decides an open question (§26 rule 5): appends its `approval/decided` under the decision lock,
 * then honours it (the call's fiber runs the call or records the refusal). Fails
 * `ApprovalNotOpen` for an id that is not open (never asked, decided, closed by a cancel), and
 * with the store's error when the decision cannot be appended (the question stays open).
 */
export const decide = (
  a: AgentState,
  id: string,
  outcome: Approval.Outcome,
  by: Approval.DecidedBy | undefined,
  reason: string | undefined
): Effect.Effect<Approval.DecidedData, ApprovalNotOpen | SessionWriteError> =>
  approvalState(a).lock.withPermits(1)(
    Effect.suspend((): Effect.Effect<Approval.DecidedData, ApprovalNotOpen | SessionWriteError> => {
      const question = a.approvalCell?.open.get(id)
      // A question of a sub-agent of a running call is decided in its session (§27).
      const holder = question === undefined ? holderOf(a, id) : undefined
      if (holder !== undefined) return decide(holder, id, outcome, by, reason)
      if (question === undefined) {
        return Effect.fail(
          new ApprovalNotOpen({
            message: `approval ${JSON.stringify(id)} is not open in session "${a.id}": ` +
              `it was never asked here, or it is already decided`,
            approvalId: id
          })
        )
      }
      const data = decision(id, outcome, by, reason)
      return commit(a, [decidedDraft(data)], () => {
        applyDecision(a, question, data)
        return data
      })
    })
  )

/**
 * Appends the decision of a question the agent never opened again (a resumed waiting call that no
 * longer validates, §26 rule 8), under the decision lock.
 */
export const decideClosed = (
  a: AgentState,
  id: string,
  outcome: Approval.Outcome,
  reason: string
): Effect.Effect<void, SessionWriteError> =>
  approvalState(a).lock.withPermits(1)(commit(a, [decidedDraft(decision(id, outcome, undefined, reason))], () => {}))

/**
 * Waits for a question's decision. With `approvalTimeoutMs`, a question still open when it runs
 * out (on the Effect clock) is decided `rejected` by `{kind:"timeout"}`; when that decision cannot
 * be appended (a broken store), the question stays open and the wait goes on.
 */
export const awaitDecision = (a: AgentState, question: Question): Effect.Effect<Approval.DecidedData> => {
  const wait = Deferred.await(question.decided)
  const timeout = a.config.approvalTimeout
  if (timeout === undefined) return wait
  return Effect.flatMap(
    Effect.timeoutOption(wait, timeout),
    Option.match({
      onSome: Effect.succeed,
      onNone: () =>
        Effect.zipRight(
          decide(a, question.id, "rejected", { kind: "timeout" }, `no decision within ${timeout} ms`).pipe(
            Effect.catchAll((error) =>
              error._tag === "ApprovalNotOpen"
                ? Effect.void
                : Effect.logError(`agent ${a.id}: the approval timeout of ${question.id} could not be recorded`, error)
            )
          ),
          wait
        )
    })
  )
}

/**
 * Decides every open question `cancelled` by `{kind:"cancel"}` in one append, under the decision
 * lock (§26 rule 7): the turn is being closed by a cancel, a dispose or a failed run. The calls
 * stay not started; the closers give them `TOOL_ABORTED_BEFORE_DISPATCH` (§9).
 */
export const cancelOpen = (a: AgentState): Effect.Effect<void, SessionWriteError> => {
  const state = a.approvalCell
  if (state === undefined) return Effect.void
  return state.lock.withPermits(1)(Effect.suspend(() => {
    if (state.open.size === 0) return Effect.void
    const questions = [...state.open.values()]
    const decisions = questions.map((q) => decision(q.id, "cancelled", { kind: "cancel" }, undefined))
    return commit(a, decisions.map(decidedDraft), () => {
      for (let i = 0; i < questions.length; i++) applyDecision(a, questions[i]!, decisions[i]!)
    })
  }))
}

/**
 * Forgets the open questions without deciding them (a released or stopped agent): they stay
 * open in the log, for the next resume (§26 rule 8).
 */
export const forgetOpen = (a: AgentState): void => {
  const state = a.approvalCell
  if (state === undefined || state.open.size === 0) return
  const was = awaitingPerson(a)
  state.open.clear()
  statusChanged(a, was)
}

/**
 * The open questions, in the order they were asked (`agent.pendingApprovals`), then those of the
 * sub-agents of the running calls (§27), each with its session's id, in the order of the calls.
 */
export const pending = (a: AgentState): ReadonlyArray<Approval.Pending> => {
  const state = a.approvalCell
  const own: Array<Approval.Pending> = state === undefined || state.open.size === 0 ? [] : [...state.open.values()].map((q) => ({
    id: q.id,
    toolName: q.call.name,
    callId: q.call.id,
    arguments: q.arguments,
    turn: q.turn,
    step: q.step,
    askedAt: q.askedAt
  }))
  const children = a.family?.childrenAwaiting === 0 ? undefined : a.family?.children
  if (children === undefined) return own
  for (const child of children.values()) {
    for (const p of pending(child)) own.push(p.sessionId === undefined ? { ...p, sessionId: child.id } : p)
  }
  return own
}

/** The sub-agent (or its own sub-agent, §27) whose open question `id` is, if any. */
const holderOf = (a: AgentState, id: string): AgentState | undefined => {
  const children = a.family?.childrenAwaiting === 0 ? undefined : a.family?.children
  if (children === undefined) return undefined
  for (const child of children.values()) {
    if (child.approvalCell?.open.has(id) === true) return child
    const deeper = holderOf(child, id)
    if (deeper !== undefined) return deeper
  }
  return undefined
}

/**
 * The remembered answers of a log (§26 rule 6): for each tool, the last `allowed-always` or
 * `rejected-always` decision of a question about it.
 */
export const rememberedOf = (events: ReadonlyArray<SessionEvent>): Map<string, Approval.Outcome> => {
  const tools = new Map<string, string>()
  const remembered = new Map<string, Approval.Outcome>()
  for (const e of events) {
    const data = e.data as { readonly id?: unknown; readonly toolName?: unknown; readonly outcome?: unknown } | null
    if (e.type === "approval/asked") {
      if (typeof data?.id === "string" && typeof data.toolName === "string") tools.set(data.id, data.toolName)
    } else if (e.type === "approval/decided") {
      const tool = typeof data?.id === "string" ? tools.get(data.id) : undefined
      if (tool !== undefined && (data!.outcome === "allowed-always" || data!.outcome === "rejected-always")) {
        remembered.set(tool, data!.outcome)
      }
    }
  }
  return remembered
}
