/**
 * The running usage sums of `PreStepPayload.usage` (§18): the session's and the current
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
  /** Responses without usage, of the session and of turn `turnNumber`. */
  sessionUnreported: number
  turnUnreported: number
}

const running = new WeakMap<AgentState, Running>()

const EMPTY: PreStepUsage = Object.freeze({
  session: Usage.zero,
  turn: Usage.zero,
  sessionByModel: Object.freeze({}),
  turnByModel: Object.freeze({}),
  unreported: Object.freeze({ session: 0, turn: 0 })
})

const note = (a: AgentState, turn: number | null, model: string, usage: Usage.Usage | undefined): void => {
  let r = running.get(a)
  if (r === undefined) {
    r = {
      session: Usage.zero,
      sessionByModel: {},
      turnNumber: 0,
      turn: Usage.zero,
      turnByModel: {},
      sessionUnreported: 0,
      turnUnreported: 0
    }
    running.set(a, r)
  }
  const totals = Usage.of(usage)
  const unreported = typeof usage === "object" && usage !== null ? 0 : 1
  r.session = Usage.add(r.session, totals)
  r.sessionByModel = Usage.addByModel(r.sessionByModel, model, totals)
  r.sessionUnreported += unreported
  if (turn === null) return
  if (r.turnNumber !== turn) {
    r.turnNumber = turn
    r.turn = Usage.zero
    r.turnByModel = {}
    r.turnUnreported = 0
  }
  r.turn = Usage.add(r.turn, totals)
  r.turnByModel = Usage.addByModel(r.turnByModel, model, totals)
  r.turnUnreported += unreported
}

/** A response of turn `turn` is durable (its `assistant/message` data). */
export const noteResponse = (a: AgentState, turn: number, data: unknown): void => {
  if (a.config.fastPreStep) return
  note(a, turn, Usage.modelOf(data), (data as { usage?: Usage.Usage }).usage)
}

/** A compaction's summary is durable (`turn`: the turn it ran in, null between turns). */
export const noteSummary = (a: AgentState, turn: number | null, model: string, usage: Usage.Usage | undefined): void => {
  if (a.config.fastPreStep) return
  note(a, turn, model, usage)
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
    turnByModel: same ? r.turnByModel : EMPTY.turnByModel,
    unreported: { session: r.sessionUnreported, turn: same ? r.turnUnreported : 0 }
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
    turnByModel: last?.byModel ?? {},
    sessionUnreported: u.unreported,
    turnUnreported: last?.unreported ?? 0
  })
}
