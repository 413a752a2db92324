/**
 * Settling a runtime: waiting until every fiber of a run has nothing left to do without the
 * outside world (a timer, a promise, I/O, a clock that only moves when told). `TestClock.adjust`
 * and the simulator's virtual clock wake sleepers but do not wait for what the sleepers then do,
 * so the simulator (`Scenario.ts`) and the agent tests settle the runtime before each advance
 * (STYLE.md "State and concurrency").
 *
 * A `FiberTracker` is a `Supervisor`: installed on a fiber (`Effect.supervised`, or a layer that
 * sets `FiberRef.currentSupervisor`), it sees every fiber forked from it, including those the
 * agent starts with `Runtime.runFork` from the current fiber's context (`internal/fork.ts`). It
 * keeps the live ones and notes each fiber that ran (started, resumed or ended) since it was last
 * asked. `settle` is done when, twice in a row across a real event-loop turn (`setImmediate`), no
 * tracked fiber is running and none ran in between: the event-loop turn lets macrotask work
 * (a group-commit flush on `setImmediate`, resolved promises, I/O callbacks) wake its fibers, and a
 * fiber that ran in between (even one that is suspended again at both looks) starts another round.
 *
 * @internal
 */
import { Data, Effect, Fiber, Supervisor } from "effect"

type AnyFiber = Fiber.RuntimeFiber<any, any>

/**
 * A supervisor that keeps the live fibers started under it and the fibers that ran since
 * `takeActive` was last called.
 *
 * @internal
 */
export class FiberTracker extends Supervisor.AbstractSupervisor<ReadonlyArray<AnyFiber>> {
  readonly fibers: Set<AnyFiber> = new Set()
  private active: Set<AnyFiber> = new Set()

  get value(): Effect.Effect<ReadonlyArray<AnyFiber>> {
    return Effect.sync(() => Array.from(this.fibers))
  }

  override onStart<A, E, R>(
    _context: unknown,
    _effect: Effect.Effect<A, E, R>,
    _parent: unknown,
    fiber: Fiber.RuntimeFiber<A, E>
  ): void {
    this.fibers.add(fiber)
    this.active.add(fiber)
  }

  override onResume<A, E>(fiber: Fiber.RuntimeFiber<A, E>): void {
    // The supervisor also sees the fiber it was installed on (not started under it): not tracked.
    if (this.fibers.has(fiber)) this.active.add(fiber)
  }

  override onEnd<A, E>(_value: unknown, fiber: Fiber.RuntimeFiber<A, E>): void {
    this.fibers.delete(fiber)
    this.active.add(fiber)
  }

  /** The fibers that started, ran or ended since the last call (the caller excluded). */
  takeActive(self: AnyFiber | undefined): ReadonlyArray<AnyFiber> {
    const active = this.active
    this.active = new Set()
    if (self !== undefined) active.delete(self)
    return Array.from(active)
  }
}

/**
 * The runtime did not settle within `rounds` event-loop turns: `running` are the ids of the
 * fibers that were running or ran during the last round.
 *
 * @internal
 */
export class Unsettled extends Data.TaggedError("Unsettled")<{
  readonly rounds: number
  readonly running: ReadonlyArray<number>
}> {
  override get message() {
    return `the runtime did not settle in ${this.rounds} rounds (event-loop turns); fibers still running: ${
      this.running.map((id) => `#${id}`).join(", ")
    }`
  }
}

/** One real event-loop turn (not a timer): immediates queued before it, and their microtasks, run first. */
const eventLoopTurn = Effect.async<void>((resume) => {
  const immediate = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(immediate))
})

/** The ids of the tracked fibers (the caller excluded) that are running now. */
const running = (tracker: FiberTracker, self: AnyFiber | undefined) =>
  Effect.map(
    Effect.forEach(
      Array.from(tracker.fibers).filter((f) => f !== self),
      // Asking a fiber its status is a message it answers between two runs: a fiber that is
      // scheduled to run answers after it ran, so a pending wake-up is never seen as suspended.
      (f) => Effect.map(Fiber.status(f), (s) => (s._tag === "Running" ? f.id().id : undefined))
    ),
    (ids) => ids.filter((id): id is number => id !== undefined)
  )

/**
 * Waits until every fiber tracked by `tracker` (the calling fiber excluded) is suspended or done,
 * and none of them ran across a real event-loop turn. Fails with `Unsettled` after `maxRounds`
 * rounds in which some fiber was still running (each round is one event-loop turn).
 *
 * @internal
 */
export const settle = (
  tracker: FiberTracker,
  options: { readonly maxRounds: number }
): Effect.Effect<void, Unsettled> =>
  Effect.withFiberRuntime<void, Unsettled>((current) => {
    const self: AnyFiber = current
    const loop = (round: number): Effect.Effect<void, Unsettled> =>
      Effect.flatMap(running(tracker, self), (before) => {
        tracker.takeActive(self)
        return Effect.zipRight(
          eventLoopTurn,
          Effect.flatMap(running(tracker, self), (after) => {
            const ran = tracker.takeActive(self)
            if (before.length === 0 && after.length === 0 && ran.length === 0) return Effect.void
            if (round >= options.maxRounds) {
              const ids = new Set([...before, ...after, ...ran.map((f) => f.id().id)])
              return Effect.fail(new Unsettled({ rounds: round, running: Array.from(ids).sort((a, b) => a - b) }))
            }
            return loop(round + 1)
          })
        )
      })
    return loop(1)
  })
