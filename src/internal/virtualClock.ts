/**
 * A virtual `Clock` for the simulator (§15): time moves only when the simulator
 * advances it, and each advance wakes exactly one sleep (the earliest; ties in the order the
 * sleeps began), so the runtime can settle between wake-ups. Unlike `TestClock.adjust`, an
 * advance does not poll with real timers, which keeps a run in the low milliseconds.
 */
import { Clock, Duration, Effect } from "effect"

interface Sleeper {
  readonly instant: number
  readonly order: number
  readonly wake: () => void
}

/** A clock whose time the owner advances. */
export class VirtualClock implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  private now = 0
  private order = 0
  private readonly sleepers: Array<Sleeper> = []

  unsafeCurrentTimeMillis(): number {
    return this.now
  }

  readonly currentTimeMillis: Effect.Effect<number> = Effect.sync(() => this.now)

  unsafeCurrentTimeNanos(): bigint {
    return BigInt(Math.round(this.now * 1_000_000))
  }

  readonly currentTimeNanos: Effect.Effect<bigint> = Effect.sync(() => this.unsafeCurrentTimeNanos())

  sleep(duration: Duration.Duration): Effect.Effect<void> {
    return Effect.async<void>((resume) => {
      const sleeper: Sleeper = {
        instant: this.now + Math.max(0, Duration.toMillis(duration)),
        order: this.order++,
        wake: () => resume(Effect.void)
      }
      // Keep sleepers sorted by (instant, order).
      let i = this.sleepers.length
      while (i > 0 && this.sleepers[i - 1]!.instant > sleeper.instant) i--
      this.sleepers.splice(i, 0, sleeper)
      return Effect.sync(() => {
        const at = this.sleepers.indexOf(sleeper)
        if (at >= 0) this.sleepers.splice(at, 1)
      })
    })
  }

  /** The instant of the earliest pending sleep, if any. */
  nextSleep(): number | undefined {
    return this.sleepers[0]?.instant
  }

  /** Moves time to `instant` (never backwards) without waking anything. */
  setTime(instant: number): void {
    if (instant > this.now) this.now = instant
  }

  /** Moves time to the earliest sleep's instant and wakes that one sleep. */
  wakeNext(): void {
    const sleeper = this.sleepers.shift()
    if (sleeper === undefined) return
    this.setTime(sleeper.instant)
    sleeper.wake()
  }
}
