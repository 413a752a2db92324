/**
 * The agent calls the cluster entity needs that the `Agent` does not offer yet (issue 14 §3):
 * `release` (passivation without disposal), `outcome(messageId)` (the fate of any message of the
 * session) and `deliveryOf(messageId)` (what the log holds for an inserted id). Each is one small
 * function here, so that switching to the agent's own members is a change of this file only.
 *
 * PENDING(agent-release): replace the bodies with `agent.release`, `agent.outcome(id)` and
 * `agent.deliveryOf(id)`, and `MessageNotFound` with the agent's error, once they are on main.
 */
import { Effect, Schema, Stream } from "effect"
import type { Agent } from "../../Agent.js"
import * as Delivery from "../../Delivery.js"
import type { DeliveryOutcome } from "../../Delivery.js"
import type { AgentState } from "../../internal/agent/state.js"
import { liveLogs } from "../../internal/agent/state.js"
import { SessionStoreError } from "../../SessionLog.js"

/**
 * No message with this id was ever inserted into the session's inbox (DESIGN.md §12).
 *
 * @since 0.1.0
 * @category errors
 */
export class MessageNotFound extends Schema.TaggedError<MessageNotFound>()("MessageNotFound", {
  message: Schema.String,
  messageId: Schema.String
}) {}

const RELEASE_CAUSE = Object.freeze({ kind: "released" })

/**
 * Stops the agent without disposing it: the inbox stays in the log for the next activation and
 * the agent writes nothing more (deliveries to it fail). A running turn is cancelled keeping the
 * inbox (PENDING(agent-release): `agent.release` leaves it open for the next owner's repair).
 */
export const release = (agent: Agent): Effect.Effect<void> =>
  Effect.gen(function*() {
    const a = agent as unknown as AgentState
    if (a.disposed) return
    if ((yield* agent.status) === "running") {
      yield* Effect.ignoreLogged(agent.cancel(RELEASE_CAUSE, { keepInbox: true }))
      yield* agent.awaitIdle
    }
    // A stopped agent is disposed and idle: its scope's finalizer does nothing (cancel.ts).
    a.stopped = new SessionStoreError({ message: `session "${agent.id}" was released by its entity`, sessionId: agent.id })
    a.disposed = true
    liveLogs.delete(a.sessionLog)
  })

/** The id was inserted into this session's inbox: `{messageId}` (for idempotent retries), else undefined. */
export const deliveryOf = (agent: Agent, messageId: string): Effect.Effect<{ readonly messageId: string } | undefined> =>
  Effect.sync(() => Delivery.fateOf(agent.log.events(), messageId) === undefined ? undefined : { messageId })

/**
 * Waits for the fate of a message of the session (DESIGN.md §12): resolves once it is decided;
 * `MessageNotFound` when it was never inserted.
 */
export const outcome = (agent: Agent, messageId: string): Effect.Effect<DeliveryOutcome, MessageNotFound> =>
  Effect.scoped(Effect.gen(function*() {
    // Subscribe first, then read the log: no event is missed between the two.
    const queue = yield* agent.subscribe
    const decided = () => {
      const fate = Delivery.fateOf(agent.log.events(), messageId)
      return fate === undefined || fate._tag !== "Pending" ? fate : null
    }
    const now = decided()
    if (now === undefined) {
      return yield* new MessageNotFound({ message: `no message ${messageId} in session ${agent.id}`, messageId })
    }
    if (now !== null) return now
    return yield* Stream.fromQueue(queue).pipe(
      Stream.filter((e) => "seq" in e),
      Stream.map(decided),
      Stream.filter((f): f is DeliveryOutcome => f !== null && f !== undefined),
      Stream.runHead,
      Effect.flatMap(Effect.orDie)
    )
  }))
