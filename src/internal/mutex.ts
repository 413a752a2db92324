/**
 * A mutex for the agent's critical sections (DESIGN.md §4): validation, durable append and state
 * update as one section. Uncontended acquisition is a flag flip (no fiber suspension); waiters are
 * handed the lock in FIFO order. The section itself runs uninterruptibly; waiting for the lock is
 * interruptible, and a waiter interrupted after it was handed the lock passes it on.
 */
import { Effect } from "effect"

interface Waiter {
  readonly resume: () => void
  granted: boolean
}

export class Mutex {
  private locked = false
  private readonly waiters: Array<Waiter> = []

  private readonly release: Effect.Effect<void> = Effect.sync(() => this.unlock())

  private unlock(): void {
    const next = this.waiters.shift()
    if (next === undefined) {
      this.locked = false
      return
    }
    next.granted = true
    next.resume()
  }

  private readonly wait: Effect.Effect<void> = Effect.async<void>((resume) => {
    const waiter: Waiter = { resume: () => resume(Effect.void), granted: false }
    this.waiters.push(waiter)
    return Effect.sync(() => {
      if (waiter.granted) this.unlock()
      else {
        const at = this.waiters.indexOf(waiter)
        if (at >= 0) this.waiters.splice(at, 1)
      }
    })
  })

  /** Runs `body` holding the lock, uninterruptibly. */
  withLock<A, E, R>(body: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.uninterruptibleMask((restore) => {
      if (!this.locked) {
        this.locked = true
        return Effect.ensuring(body, this.release)
      }
      return Effect.zipRight(restore(this.wait), Effect.ensuring(body, this.release))
    })
  }
}
