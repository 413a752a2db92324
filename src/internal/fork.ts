/**
 * Forking from plain code: the agent starts its driver inside a synchronous critical section
 * and its tool fibers without an `Effect.fork` per call (§24: fork + join costs
 * 8–9 µs). A fiber forked from `currentRuntime()` inherits the calling fiber's context and
 * FiberRefs (supervisor, clock, logger…) like `Effect.forkDaemon`, and runs with the default
 * runtime flags (interruptible).
 */
import { Fiber, Option, Runtime, RuntimeFlags } from "effect"

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
  return Runtime.make({
    context: fiber.currentContext,
    runtimeFlags: uninterruptible
      ? RuntimeFlags.disable(Runtime.defaultRuntimeFlags, RuntimeFlags.Interruption)
      : Runtime.defaultRuntimeFlags,
    fiberRefs: fiber.getFiberRefs()
  })
}
