/**
 * The running usage sums of `PreStepPayload.usage` (§18): the session's and the current
 * turn's, by model too, updated when a response (or a compaction's summary) is durable and when
 * a sub-agent's `subagent/end` is (its run's usage, §27), and rebuilt from the log on resume, so
 * that they equal `Usage.withSubagents` of `Usage.fromEvents` of the log. A sub-agent's sums
 * start from its parent's at the call (`inheritUsage`): the base is added to its session sums and
 * is every one of its turns' starting point, so that a budget counts the whole delegation.
 *
 * Only agents with pre-step listeners keep them (`!config.fastPreStep`): with the default
 * waterfall nobody reads the payload, so the hot path does nothing but one boolean test per
 * response. The sums are immutable values replaced at each update (a listener may keep the
 * payload), kept in a `WeakMap` so that an idle agent's record has no extra field.
 */
import type { PreStepUsage } from "../../PreStep.js"
import type { SessionEvent } from "../../SessionEvent.js"
import * as Usage from "../../Usage.js"
import { subagentUsage } from "../tracing.js"
import type { AgentState } from "./state.js"

interface Running {
  session: Usage.Totals
  sessionByModel: Usage.ByModel
  /** The turn `turn` and `turnByModel` belong to. */
  turnNumber: number
  turn: Usage.Totals
  turnByModel: Usage.ByModel
  /** Responses without usage, of the session and of turn `turnNumber`. */
  sessionUnreported: number
  turnUnreported: number
  /** What each turn starts from: nothing, or a sub-agent's inherited turn usage. */
  readonly base: PreStepUsage
}

const running = new WeakMap<AgentState, Running>()

const EMPTY: PreStepUsage = Object.freeze({
  session: Usage.zero,
  turn: Usage.zero,
  sessionByModel: Object.freeze({}),
  turnByModel: Object.freeze({}),
  unreported: Object.freeze({ session: 0, turn: 0 })
})

const fresh = (base: PreStepUsage): Running => ({
  session: base.session,
  sessionByModel: base.sessionByModel,
  turnNumber: 0,
  turn: base.turn,
  turnByModel: base.turnByModel,
  sessionUnreported: base.unreported.session,
  turnUnreported: base.unreported.turn,
  base
})

const runningOf = (a: AgentState): Running => {
  let r = running.get(a)
  if (r === undefined) {
    r = fresh(EMPTY)
    running.set(a, r)
  }
  return r
}

const note = (
  a: AgentState,
  turn: number | null,
  totals: Usage.Totals,
  byModel: Usage.ByModel,
  unreported: number
): void => {
  const r = runningOf(a)
  r.session = Usage.add(r.session, totals)
  r.sessionByModel = Usage.mergeByModel(r.sessionByModel, byModel)
  r.sessionUnreported += unreported
  if (turn === null) return
  if (r.turnNumber !== turn) {
    r.turnNumber = turn
    r.turn = r.base.turn
    r.turnByModel = r.base.turnByModel
    r.turnUnreported = r.base.unreported.turn
  }
  r.turn = Usage.add(r.turn, totals)
  r.turnByModel = Usage.mergeByModel(r.turnByModel, byModel)
  r.turnUnreported += unreported
}

const noteOne = (a: AgentState, turn: number | null, model: string, usage: Usage.Usage | undefined): void => {
  const totals = Usage.of(usage)
  note(a, turn, totals, { [model]: totals }, typeof usage === "object" && usage !== null ? 0 : 1)
}

/** A response of turn `turn` is durable (its `assistant/message` data). */
export const noteResponse = (a: AgentState, turn: number, data: unknown): void => {
  if (a.config.fastPreStep) return
  noteOne(a, turn, Usage.modelOf(data), (data as { usage?: Usage.Usage }).usage)
}

/** A compaction's summary is durable (`turn`: the turn it ran in, null between turns). */
export const noteSummary = (a: AgentState, turn: number | null, model: string, usage: Usage.Usage | undefined): void => {
  if (a.config.fastPreStep) return
  noteOne(a, turn, model, usage)
}

/** A sub-agent's `subagent/end` is durable (its data; `turn`: the turn its call ran in). */
export const noteSubagent = (a: AgentState, turn: number | null, data: unknown): void => {
  if (a.config.fastPreStep) return
  const ended = Usage.ofSubagentEnd(data)
  if (ended.reported) note(a, turn, ended.usage, ended.byModel, ended.unreported)
}

/**
 * A `subagent/end` the parent's call recorded is durable (§27): its run's usage counts in the
 * parent's sums and in the running turn's span (§19).
 */
export const subagentEnded = (a: AgentState, data: unknown): void => {
  const t = a.current
  const open = t !== undefined && t.turnOpen ? t : undefined
  noteSubagent(a, open?.turn ?? null, data)
  if (open?.trace !== undefined) subagentUsage(open.trace, data)
}

/** The usage before the request of a step of turn `turn`. */
export const usageBefore = (a: AgentState, turn: number): PreStepUsage => {
  const r = running.get(a)
  if (r === undefined) return EMPTY
  const same = r.turnNumber === turn
  return {
    session: r.session,
    sessionByModel: r.sessionByModel,
    turn: same ? r.turn : r.base.turn,
    turnByModel: same ? r.turnByModel : r.base.turnByModel,
    unreported: { session: r.sessionUnreported, turn: same ? r.turnUnreported : r.base.unreported.turn }
  }
}

/**
 * The usage now, for a sub-agent's base (§27): the session's, and the running turn's (`turn`,
 * the turn the call runs in); undefined for an agent that keeps none.
 */
export const usageNow = (a: AgentState, turn: number | undefined): PreStepUsage | undefined =>
  a.config.fastPreStep ? undefined : usageBefore(a, turn ?? -1)

/**
 * A sub-agent's sums start from its parent's usage at the call (`base`): added to the sums it
 * has (a fork's, rebuilt from its seed: none, the seed is the parent's spending), and the start
 * of each of its turns.
 */
export const inheritUsage = (a: AgentState, base: PreStepUsage): void => {
  if (a.config.fastPreStep) return
  const own = running.get(a)
  const r = fresh(base)
  if (own !== undefined) {
    r.session = Usage.add(base.session, own.session)
    r.sessionByModel = Usage.mergeByModel(base.sessionByModel, own.sessionByModel)
    r.sessionUnreported += own.sessionUnreported
  }
  running.set(a, r)
}

/** Rebuilds the sums of a resumed agent from its (repaired) log. */
export const restoreUsage = (a: AgentState, events: ReadonlyArray<SessionEvent>): void => {
  if (a.config.fastPreStep) return
  const u = Usage.fromEvents(events, { header: a.sessionLog.header })
  const all = Usage.withSubagents(u)
  const last = u.turns[u.turns.length - 1]
  const turn = last === undefined ? undefined : Usage.withSubagents(last)
  running.set(a, {
    session: all.usage,
    sessionByModel: all.byModel,
    turnNumber: last?.turn ?? 0,
    turn: turn?.usage ?? Usage.zero,
    turnByModel: turn?.byModel ?? {},
    sessionUnreported: all.unreported,
    turnUnreported: turn?.unreported ?? 0,
    base: EMPTY
  })
}
