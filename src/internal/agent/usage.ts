/**
 * The running usage sums of `PreStepPayload.usage` (issue 16): the session's and the current
 * turn's, by model too, updated when a response (or a compaction's summary) is durable and
 * rebuilt from the log on resume, so that they equal `Usage.fromEvents` of the log.
 *
 * Only agents with pre-step listeners keep them (`!config.fastPreStep`): with the default
 * waterfall nobody reads the payload, so the hot path does nothing but one boolean test per
 * response. The sums are immutable values replaced at each update (a listener may keep the
 * payload), kept in a `WeakMap` so that an idle agent's record has no extra field.
 */
import type { PreStepUsage } from "../../PreStep.js"
import type { SessionEvent } from "../../SessionEvent.js"
import * as Usage from "../../Usage.js"
import type { AgentState } from "./state.js"

interface Running {
  session: Usage.Totals
  sessionByModel: Usage.ByModel
  /** The turn `turn` and `turnByModel` belong to. */
  turnNumber: number
  turn: Usage.Totals
  turnByModel: Usage.ByModel
}

const running = new WeakMap<AgentState, Running>()

const EMPTY: PreStepUsage = Object.freeze({
  session: Usage.zero,
  turn: Usage.zero,
  sessionByModel: Object.freeze({}),
  turnByModel: Object.freeze({})
})

const note = (a: AgentState, turn: number | null, model: string, usage: Usage.Totals): void => {
  let r = running.get(a)
  if (r === undefined) {
    r = { session: Usage.zero, sessionByModel: {}, turnNumber: 0, turn: Usage.zero, turnByModel: {} }
    running.set(a, r)
  }
  r.session = Usage.add(r.session, usage)
  r.sessionByModel = Usage.addByModel(r.sessionByModel, model, usage)
  if (turn === null) return
  if (r.turnNumber !== turn) {
    r.turnNumber = turn
    r.turn = Usage.zero
    r.turnByModel = {}
  }
  r.turn = Usage.add(r.turn, usage)
  r.turnByModel = Usage.addByModel(r.turnByModel, model, usage)
}

/** A response of turn `turn` is durable (its `assistant/message` data). */
export const noteResponse = (a: AgentState, turn: number, data: unknown): void => {
  if (a.config.fastPreStep) return
  note(a, turn, Usage.modelOf(data), Usage.of((data as { usage?: Usage.Usage }).usage))
}

/** A compaction's summary is durable (`turn`: the turn it ran in, null between turns). */
export const noteSummary = (a: AgentState, turn: number | null, model: string, usage: Usage.Usage | undefined): void => {
  if (a.config.fastPreStep) return
  note(a, turn, model, Usage.of(usage))
}

/** The usage before the request of a step of turn `turn`. */
export const usageBefore = (a: AgentState, turn: number): PreStepUsage => {
  const r = running.get(a)
  if (r === undefined) return EMPTY
  const same = r.turnNumber === turn
  return {
    session: r.session,
    sessionByModel: r.sessionByModel,
    turn: same ? r.turn : Usage.zero,
    turnByModel: same ? r.turnByModel : EMPTY.turnByModel
  }
}

/** Rebuilds the sums of a resumed agent from its (repaired) log. */
export const restoreUsage = (a: AgentState, events: ReadonlyArray<SessionEvent>): void => {
  if (a.config.fastPreStep) return
  const u = Usage.fromEvents(events, { header: a.sessionLog.header })
  const last = u.turns[u.turns.length - 1]
  running.set(a, {
    session: u.usage,
    sessionByModel: u.byModel,
    turnNumber: last?.turn ?? 0,
    turn: last?.usage ?? Usage.zero,
    turnByModel: last?.byModel ?? {}
  })
}
