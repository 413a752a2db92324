/**
 * Fibers waiting for a value that plain code provides later: the agent's replacement for
 * `Deferred` on its hot paths (`Deferred.unsafeMake` alone measured ~7 µs here: it copies the
 * Effect prototype into every instance; a waiter is the `resume` callback of an `Effect.async`,
 * registered in the same step as the check that it must wait).
 */
import type { Effect } from "effect"

/** Resumes one waiting fiber with an effect (its result). */
export type Resume<A> = (effect: Effect.Effect<A>) => void

/** Resumes every waiter with `result`, in the order they began waiting. */
export const resumeAll = <A>(waiters: ReadonlyArray<Resume<A>>, result: Effect.Effect<A>): void => {
  for (let i = 0; i < waiters.length; i++) waiters[i]!(result)
}
