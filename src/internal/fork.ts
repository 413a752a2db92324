/**
 * Forking from plain code: the agent starts its driver inside a synchronous critical section
 * and its tool fibers without an `Effect.fork` per call (§24: fork + join costs
 * 8–9 µs). A fiber forked from `currentRuntime()` inherits the calling fiber's context and
 * FiberRefs (supervisor, clock, logger…) like `Effect.forkDaemon`, and runs with the default
 * runtime flags (interruptible).
 */
import { Fiber, type FiberRefs, Option, Runtime, RuntimeFlags } from "effect"

/**
 * The runtime of the fiber that is running now. Throws when called outside a fiber. With
 * `uninterruptible`, a fiber forked from it starts uninterruptible: an interruption that arrives
 * before it runs waits until the fiber opens an interruptible region (the agent's driver must
 * run its own clean-up however early a cancel lands).
 */
export const currentRuntime = (uninterruptible = false): Runtime.Runtime<never> => {
  const current = Fiber.getCurrentFiber()
  if (Option.isNone(current)) throw new Error("effect-agent-loop: forking outside a fiber")
  const fiber = current.value
  // A fiber's FiberRefs (its context among them) are an immutable value, replaced when one
  // changes: the same value makes the same runtime, so a caller that starts run after run (or a
  // batch that starts call after call) builds it once (§24). Weakly held: it goes with them.
  const fiberRefs = fiber.getFiberRefs()
  const slot = uninterruptible ? 1 : 0
  let made = runtimes.get(fiberRefs)
  const known = made?.[slot]
  if (known !== undefined) return known
  const runtime = Runtime.make({
    context: fiber.currentContext,
    runtimeFlags: uninterruptible
      ? RuntimeFlags.disable(Runtime.defaultRuntimeFlags, RuntimeFlags.Interruption)
      : Runtime.defaultRuntimeFlags,
    fiberRefs
  })
  if (made === undefined) runtimes.set(fiberRefs, made = [undefined, undefined])
  made[slot] = runtime
  return runtime
}

/** The runtimes `currentRuntime` made from a FiberRefs value: interruptible (0), uninterruptible (1). */
const runtimes = new WeakMap<FiberRefs.FiberRefs, [Runtime.Runtime<never> | undefined, Runtime.Runtime<never> | undefined]>()
