/**
 * Helpers of the tests that run a runner and its `AgentClient` in the test's own process
 * (`ClusterEntity`, `ClusterHeal`): a model a test can hold, the logs as a user reads them, and
 * bounded waits.
 */
import { Deferred, Duration, Effect } from "effect"
import { textOf, type UserMessage } from "../../src/Message.js"
import type * as Model from "../../src/Model.js"
import * as Offline from "../../src/providers/Offline.js"
import type { SessionEvent } from "../../src/SessionEvent.js"
import { SessionStore } from "../../src/SessionStore.js"
import { CLUSTER_CALL_S, note } from "./bounds.js"

/** The offline model, except that a request whose last message says "hold" waits for `gate`. */
export const gatedModel = (gate: Deferred.Deferred<void>): Model.ModelService => {
  const offline = Offline.make()
  return {
    ...offline,
    respond: (request, sink) => {
      const last = request.messages[request.messages.length - 1]
      return last !== undefined && textOf(last.content).includes("hold")
        ? Effect.zipRight(Deferred.await(gate), offline.respond(request, sink))
        : offline.respond(request, sink)
    }
  }
}

/** The events of session `id` as the `SessionStore` in context reads them. */
export const logOf = (id: string) =>
  Effect.map(
    Effect.flatMap(SessionStore, (store) => store.read(id)),
    (contents) => contents.events as ReadonlyArray<SessionEvent>
  )

/** The ids inserted into the inbox, in log order (one entry per insertion). */
export const insertedIds = (events: ReadonlyArray<SessionEvent>): ReadonlyArray<string> =>
  events.flatMap((e) =>
    e.type === "agent/inbox/spliced" ? (e.data as { inserted: ReadonlyArray<UserMessage> }).inserted.map((m) => m.id) : []
  )

/**
 * `effect`, failing with "no answer within N s" after `seconds` (default `CLUSTER_CALL_S`); how
 * long it took goes to the bounds log as `entity <what>` (see `bounds.ts`).
 */
export const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>, seconds = CLUSTER_CALL_S, what = "call") =>
  Effect.suspend(() => {
    const started = Date.now()
    return Effect.timeoutFail(effect, {
      duration: Duration.seconds(seconds),
      onTimeout: () => new Error(`${what}: no answer within ${seconds} s`)
    }).pipe(Effect.tap(() => note(`entity ${what}`, Date.now() - started)))
  })
