/**
 * The decisions of `AgentEntity`'s `approve` and `reject` rpcs (§21, §26 rule 5): the payload's
 * checks, and the decision on the session's agent, answered from the logs when the agent does
 * not hold the question open.
 */
import { Duration, Effect, Schedule } from "effect"
import type * as Agent from "../Agent.js"
import type { ApprovalNotOpen } from "../AgentError.js"
import type * as Approval from "../Approval.js"
import type { SessionEvent } from "../SessionEvent.js"
import type { SessionWriteError } from "../SessionLog.js"

/** A decision rpc's payload (`reject`'s has a reason). */
export interface DecisionPayload {
  readonly id: string
  readonly always?: boolean | undefined
  readonly name?: string | undefined
  readonly reason?: string | undefined
}

/** Why a decision's payload cannot be taken as given (`InvalidDecision`'s fields), or undefined. */
export const invalidField = (
  payload: DecisionPayload
): { readonly message: string; readonly field: "id" | "name" | "reason" } | undefined =>
  payload.id === ""
    ? { message: "the question id is empty", field: "id" }
    : payload.name !== undefined && payload.name.trim() === ""
    ? { message: "the name of the person who decides is empty", field: "name" }
    : payload.reason !== undefined && payload.reason.trim() === ""
    ? { message: "the reason is empty", field: "reason" }
    : undefined

/**
 * What `events` say of question `id`: `"open"` (asked, no decision), `"same"` (decided with
 * `outcome` by the person `payload.name` with `payload.reason`: the decision asked for),
 * `"other"` (decided otherwise), or `"unknown"` (never asked).
 */
const questionIn = (
  events: ReadonlyArray<SessionEvent>,
  id: string,
  outcome: Approval.Outcome,
  payload: DecisionPayload
): "open" | "same" | "other" | "unknown" => {
  let asked = false
  for (const event of events) {
    const data = event.data as Partial<Approval.DecidedData> | null
    if (data?.id !== id) continue
    if (event.type === "approval/asked") asked = true
    else if (event.type === "approval/decided") {
      const by = data.by
      return data.outcome === outcome && by?.kind === "person" && by.name === payload.name && data.reason === payload.reason
        ? "same"
        : "other"
    }
  }
  return asked ? "open" : "unknown"
}

/**
 * The decision of an `approve` or `reject` on the session's agent. A question this agent does
 * not hold open is answered from the logs: decided as asked (a redelivery of this rpc after a
 * failover, or the same person's same answer) is done; decided otherwise or never asked is
 * `ApprovalNotOpen`. One the stored log (`stored`) holds open was asked by a writer that took
 * the session since (this agent does not know yet that it lost it), or a moment ago by this
 * agent (durable, not registered yet): the agent is asked again every 100 ms for `fencedGrace`,
 * then the session is reopened (`forget`, then `agentOf`) and asked.
 */
export const decideOn = <E, E2>(deps: {
  readonly kind: "approve" | "reject"
  readonly payload: DecisionPayload
  readonly stored: Effect.Effect<ReadonlyArray<SessionEvent>, unknown>
  readonly agentOf: Effect.Effect<Agent.Agent, E>
  readonly forget: (agent: Agent.Agent) => Effect.Effect<void, E2>
  readonly fencedGrace: Duration.DurationInput
}) =>
(agent: Agent.Agent): Effect.Effect<void, ApprovalNotOpen | SessionWriteError | E | E2> => {
  const { kind, payload } = deps
  const outcome: Approval.Outcome = kind === "approve"
    ? payload.always === true ? "allowed-always" : "allowed-once"
    : payload.always === true
    ? "rejected-always"
    : "rejected"
  const take = (agent: Agent.Agent) =>
    kind === "approve"
      ? agent.approve(payload.id, { always: payload.always, name: payload.name })
      : agent.reject(payload.id, { reason: payload.reason, always: payload.always, name: payload.name })
  const answered = (state: "open" | "same" | "other" | "unknown", notOpen: ApprovalNotOpen) =>
    state === "same" ? Effect.void : Effect.fail(notOpen)
  const stored = deps.stored.pipe(
    Effect.map((events) => questionIn(events, payload.id, outcome, payload)),
    Effect.orElseSucceed(() => "unknown" as const)
  )
  return Effect.catchTag(take(agent), "ApprovalNotOpen", (notOpen) => {
    const here = questionIn(agent.log.events(), payload.id, outcome, payload)
    if (here !== "unknown") return answered(here, notOpen)
    return Effect.flatMap(stored, (state) => {
      if (state !== "open") return answered(state, notOpen)
      const known = Effect.flatMap(
        agent.pendingApprovals,
        (open) => open.some((q) => q.id === payload.id) ? Effect.void : Effect.fail("not yet" as const)
      )
      return known.pipe(
        Effect.retry(Schedule.spaced(Duration.millis(100)).pipe(Schedule.upTo(deps.fencedGrace))),
        Effect.matchEffect({
          onSuccess: () => take(agent),
          onFailure: () =>
            Effect.zipRight(
              deps.forget(agent),
              Effect.flatMap(deps.agentOf, (reopened) =>
                Effect.catchTag(
                  take(reopened),
                  "ApprovalNotOpen",
                  (e) => answered(questionIn(reopened.log.events(), payload.id, outcome, payload), e)
                ))
            )
        })
      )
    })
  })
}
