/**
 * Cancel and dispose (§9). `cancel` durably clears both queues (unless `keepInbox`)
 * and interrupts the driver fiber; it does nothing else to the turn: the interrupted driver
 * closes its own turn (`driver.ts`), and `cancel` returns when that is done. `dispose` refuses
 * deliveries from the moment it is called, clears the queues with `{kind:"disposed"}` and closes
 * the agent's scope (`fibers.ts`), which interrupts and awaits every fiber the agent owns.
 * `release` (passivation) closes it without writing anything. Cancellation is fiber
 * interruption; no `AbortSignal` plumbing.
 */
import { Effect, Equal, Fiber } from "effect"
import { InvalidEvent } from "../../AgentError.js"
import * as Inbox from "../../Inbox.js"
import type { AbortCause } from "../../SessionEvent.js"
import { SessionStoreError, type SessionWriteError } from "../../SessionLog.js"
import { messageOf } from "../cause.js"
import { checkJson, InvalidJson } from "../json.js"
import { closeFibers } from "./fibers.js"
import { awaitIdle, endEvents, endStopped, orphanWaiters } from "./observers.js"
import { critical, type Section, spliceSection } from "./section.js"
import { type AgentState, DISPOSED_CAUSE, liveLogs, USER_CAUSE } from "./state.js"

/**
 * `agent.cancel(cause?, {keepInbox?})` (§9). The cause is logged (in splices and `turn/end`): it
 * must be plain JSON with a string `kind` (else `InvalidEvent`, nothing done). The first cause
 * wins; without one, `{kind:"user"}`.
 */
export const cancel = (
  a: AgentState,
  cause: AbortCause | undefined,
  options: { readonly keepInbox?: boolean | undefined } | undefined
): Effect.Effect<void, SessionWriteError | InvalidEvent> => {
  const c = cause ?? USER_CAUSE
  if (c !== USER_CAUSE && c !== DISPOSED_CAUSE) {
    try {
      checkJson(c, "cause")
      if (typeof c !== "object" || c === null || typeof c.kind !== "string") throw new InvalidJson("has no string kind", "cause")
    } catch (e) {
      return Effect.fail(new InvalidEvent({ message: `the cancel cause is not plain JSON with a string kind: ${messageOf(e)}` }))
    }
  }
  return cancelNow(a, c, options)
}

const cancelNow = (
  a: AgentState,
  c: AbortCause,
  options?: { readonly keepInbox?: boolean | undefined }
): Effect.Effect<void, SessionWriteError> =>
  Effect.flatMap(
    clearSection(a, c, options?.keepInbox === true),
    (fiber) =>
      fiber === undefined
        ? Effect.void
        : Effect.flatMap(
          Effect.fiberId,
          (self) => Equal.equals(self, fiber.id()) ? Effect.interrupt : Effect.asVoid(Fiber.interrupt(fiber))
        )
  )

/**
 * The section of a cancel (§9): clears both queues durably with cause `c` (unless `keepInbox`)
 * and, when a run is on, records `c` as its cancel cause (the first one wins); returns the run's
 * driver fiber, for the caller to interrupt.
 */
const clearSection = (
  a: AgentState,
  c: AbortCause,
  keepInbox: boolean
): Effect.Effect<Fiber.RuntimeFiber<void> | undefined, SessionWriteError> =>
  critical(a, (inbox): Section<Fiber.RuntimeFiber<void> | undefined> => {
    const clear = keepInbox ? undefined : spliceSection(a, inbox, Inbox.clearAll(inbox, c))
    return {
      drafts: clear === undefined ? [] : clear.drafts,
      inbox: clear?.inbox,
      apply: (events) => {
        if (clear !== undefined) clear.apply(events)
        if (!a.running) return undefined
        if (a.cancelCause === undefined) a.cancelCause = c
        return a.driver
      }
    }
  })

/**
 * `agent.dispose` (§9): deliveries fail with `AgentDisposed` from now on; both queues are
 * cleared durably with cause `{kind:"disposed"}`, which becomes the running turn's cancel cause;
 * then the agent's scope is closed (`fibers.ts`): the run's driver fiber is interrupted, closes
 * its turn durably (or stops the agent, `driver.ts`) and ends, its tool calls with it. When the
 * splice cannot be appended (a full disk), the run stops all the same and dispose fails with the
 * store's error once the agent is idle. Then the live events end (every subscriber's stream ends
 * after the disposal's last event, and a later subscription gets an empty stream).
 */
export const dispose = (a: AgentState): Effect.Effect<void, SessionWriteError> =>
  Effect.suspend(() => {
    // A stopped agent (driver.ts) is idle and writes nothing: its scope is closed, nothing more.
    if (a.stopped !== undefined) return closeFibers(a)
    a.disposed = true
    return Effect.ensuring(
      Effect.flatMap(Effect.either(clearSection(a, DISPOSED_CAUSE, false)), (cleared) =>
        Effect.zipRight(
          Effect.suspend(() => {
            if (a.running && a.cancelCause === undefined) a.cancelCause = DISPOSED_CAUSE
            return Effect.zipRight(closeFibers(a), awaitIdle(a))
          }),
          Effect.suspend(() =>
            // The queues could not be cleared (a full disk), or the run could not close its turn
            // and stopped the agent (driver.ts): the error, once the agent is idle.
            cleared._tag === "Left" ? Effect.fail(cleared.left) : a.stopped === undefined ? Effect.void : Effect.fail(a.stopped)
          )
        )),
      Effect.zipRight(Effect.sync(() => liveLogs.delete(a.sessionLog)), endEvents(a))
    )
  })

/**
 * `agent.release` (passivation, not disposal): from the moment it is called the agent writes
 * nothing more (every writing operation fails with the release's `SessionStoreError`,
 * deliveries with `AgentDisposed`); the running driver is interrupted and closes nothing, so
 * its turn stays open in the log as after a crash (the next `Agent.resume` repairs it, §10; its
 * claimed messages resolve `Dropped interrupted`, the fate the repair gives them); the inbox
 * stays as the log has it; undecided outcome waiters go to the next agent of the session in
 * this process (`orphanWaiters`). Then the log is closed (its optional `close`: the store frees
 * the writer lock), the agent's log is no longer live (`Agent.resume` may open it again), and
 * the live events end with `agent/disposed`. A no-op on an agent already released, disposed
 * (or disposing) or stopped.
 */
export const release = (a: AgentState): Effect.Effect<void, SessionStoreError> =>
  Effect.suspend(() => {
    const close = (a.sessionLog as { readonly close?: Effect.Effect<void> | undefined }).close
    // A stopped agent (its log broke, or another writer fenced it) still holds its writer:
    // release frees it (`close` is idempotent). A disposed or released one has nothing left.
    if (a.disposed) return a.stopped !== undefined && !a.released ? (close ?? Effect.void) : Effect.void
    a.disposed = true
    a.released = true
    a.stopped = new SessionStoreError({
      message: `agent ${a.id} was released: it writes nothing more; resume the session to go on`,
      sessionId: a.id
    })
    // Its scope is closed: the running driver is interrupted (it closes nothing) and ends.
    return Effect.ensuring(
      closeFibers(a),
      Effect.suspend(() => {
        orphanWaiters(a)
        return Effect.zipRight(
          close ?? Effect.void,
          Effect.sync(() => {
            liveLogs.delete(a.sessionLog)
            endStopped(a)
          })
        )
      })
    )
  })

/** Disposes the agent when its scope closes; a store failure is logged. */
export const finalize = (a: AgentState): Effect.Effect<void> => Effect.catchAllCause(Effect.orDie(dispose(a)), Effect.logError)
