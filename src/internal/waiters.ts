/**
 * Fibers waiting for a value that plain code provides later: the agent's replacement for
 * `Deferred` on its hot paths (`Deferred.unsafeMake` alone measured ~7 µs here: it copies the
 * Effect prototype into every instance; a waiter here is one closure in an array).
 */
import { Effect } from "effect"

/** Resumes one waiting fiber with an effect (its result). */
export type Resume<A> = (effect: Effect.Effect<A>) => void

/**
 * Suspends the calling fiber until `resumeAll(waiters, …)`; an interrupted waiter removes
 * itself from `waiters`.
 */
export const waitIn = <A>(waiters: Array<Resume<A>>): Effect.Effect<A> =>
  Effect.async<A>((resume) => {
    waiters.push(resume)
    return Effect.sync(() => {
      const at = waiters.indexOf(resume)
      if (at >= 0) waiters.splice(at, 1)
    })
  })

/** Resumes every waiter with `result`, in the order they began waiting. */
export const resumeAll = <A>(waiters: ReadonlyArray<Resume<A>>, result: Effect.Effect<A>): void => {
  for (let i = 0; i < waiters.length; i++) waiters[i]!(result)
}
