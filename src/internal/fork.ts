/**
 * Forking from plain code: the agent starts its driver inside a synchronous critical section
 * and its tool fibers without an `Effect.fork` per call (STYLE.md "Hot path": fork + join costs
 * 8–9 µs). A fiber forked from `currentRuntime()` inherits the calling fiber's context and
 * FiberRefs (supervisor, clock, logger…) like `Effect.forkDaemon`, and runs with the default
 * runtime flags (interruptible).
 */
import { Fiber, Option, Runtime } from "effect"

/** The runtime of the fiber that is running now. Throws when called outside a fiber. */
export const currentRuntime = (): Runtime.Runtime<never> => {
  const current = Fiber.getCurrentFiber()
  if (Option.isNone(current)) throw new Error("effect-agent-loop: forking outside a fiber")
  const fiber = current.value
  return Runtime.make({
    context: fiber.currentContext,
    runtimeFlags: Runtime.defaultRuntimeFlags,
    fiberRefs: fiber.getFiberRefs()
  })
}
