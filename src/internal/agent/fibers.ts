/**
 * The fibers an agent owns (§9 "The card, in code"; `AgentFibers` in `state.ts`): a `Scope` of
 * the agent's own with a `FiberSet` of run (driver) fibers and one of tool-call fibers. Made at
 * the first run, so an agent that never runs holds none of it (§24: an idle agent is its record);
 * closed by the agent's disposal (`cancel.ts`), which the scope the agent was made in runs.
 *
 * The fibers are started with `Runtime.runFork` from the running fiber's runtime
 * (`internal/fork.ts`, no `Effect.fork` per run or call, §24) and added to their set at once,
 * as `FiberSet.runtime` does: a fiber the set holds is interrupted when the set is cleared or
 * its scope closes, and leaves the set when it ends.
 */
import { Effect, Exit, Fiber, FiberSet, Runtime, Scope } from "effect"
import { currentRuntime } from "../fork.js"
import type { AgentFibers, AgentState } from "./state.js"

/**
 * The agent's fibers, made on first use. A disposed agent gets none (it starts nothing): the
 * caller's critical section refuses what would have started a run.
 */
export const ownFibers = (a: AgentState): Effect.Effect<void> =>
  a.fibers !== undefined || a.disposed ? Effect.void : Effect.flatMap(Scope.make(), (scope) =>
    Effect.flatMap(
      Scope.extend(Effect.zip(FiberSet.make<void, never>(), FiberSet.make<void, never>()), scope),
      ([calls, runs]) => {
        // Two deliveries may both have made them: the first one made stays.
        if (a.fibers !== undefined || a.disposed) return Scope.close(scope, Exit.void)
        a.fibers = { scope, runs, calls }
        return Effect.void
      }
    ))

const fibersOf = (a: AgentState): AgentFibers => {
  const fibers = a.fibers
  if (fibers === undefined) throw new Error(`effect-agent-loop: agent ${a.id} starts a run without its fibers`)
  return fibers
}

/**
 * Forks the run's driver fiber (called inside a critical section, from plain code): a member of
 * the agent's `runs`, started uninterruptible on the scheduler after the section (see `driver.ts`
 * `forkDriver`), with the current fiber's context and FiberRefs.
 */
export const forkRun = (a: AgentState, body: Effect.Effect<void>): void => {
  const fiber = Runtime.runFork(currentRuntime(true))(body, { immediate: false })
  FiberSet.unsafeAdd(fibersOf(a).runs, fiber)
  a.driver = fiber
}

/** A tool call's fiber that suspended: a member of the agent's `calls` until it ends. */
export const ownCall = (a: AgentState, fiber: Fiber.RuntimeFiber<void, never>): void => {
  FiberSet.unsafeAdd(fibersOf(a).calls, fiber)
}

/** Interrupts the running batch's call fibers and waits for them (an interrupted step, §9). */
export const interruptCalls = (a: AgentState): Effect.Effect<void> =>
  Effect.suspend(() => a.fibers === undefined ? Effect.void : FiberSet.clear(a.fibers.calls))

/**
 * Closes the agent's scope: its fibers are interrupted (runs first, then calls) and awaited. The
 * close runs on a fiber of its own, which the caller awaits interruptibly: a caller that is one
 * of the agent's fibers, or a fiber they started (a tool disposing its agent under
 * `Effect.timeout`), is interrupted by the close and stops waiting, and the close goes on.
 */
export const closeFibers = (a: AgentState): Effect.Effect<void> =>
  Effect.suspend(() => {
    const fibers = a.fibers
    if (fibers === undefined) return Effect.void
    return Effect.flatMap(Effect.forkDaemon(Scope.close(fibers.scope, Exit.void)), Fiber.await)
  }).pipe(Effect.asVoid)
