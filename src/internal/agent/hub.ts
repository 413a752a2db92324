/**
 * The live events hub of an agent (§5.3): every event published after a subscription
 * was made reaches that subscription, in order, unbounded (a slow subscriber holds what it has
 * not taken; the loop never waits for it). Each subscription is a `Queue.Dequeue` (`take`,
 * `takeAll`, `takeUpTo`, `takeBetween`, `poll`, `size`, `shutdown`…), as `PubSub.subscribe` gives;
 * after `shutdown` (its scope closed) every take is interrupted, which ends `Stream.fromQueue`.
 *
 * A measured exception to STYLE.md's `PubSub` for fan-out (§24): a taker that waits on an
 * empty `PubSub` subscription makes a `Deferred` (an object spread of Effect's prototype) and
 * completes it through the strategy, ~9 µs per wake-up on this machine against ~2.3 µs for the
 * callback a waiting take registers here (`Effect.async`, as the outcome waiters do). A streamed
 * response wakes the subscriber once per delta, so this was 8–10% of the CPU of a streamed turn.
 */
import { Chunk, Effect, Effectable, Option, type Queue } from "effect"
import * as Q from "effect/Queue"

type Resume<A> = (effect: Effect.Effect<A>) => void

/** Fan-out to the subscriptions made so far. */
export class Hub<A> {
  readonly subscriptions = new Set<Subscription<A>>()

  /** Offers `value` to every subscription (synchronous; never waits). */
  publish(value: A): void {
    for (const subscription of this.subscriptions) subscription.offer(value)
  }

  /** A new subscription, receiving every event published from now on. */
  subscribe(): Subscription<A> {
    const subscription = new Subscription<A>(this)
    this.subscriptions.add(subscription)
    return subscription
  }
}

const variance = { _Out: (_: never) => _ }

/** The queue of one subscriber (unbounded); see the module comment. */
export class Subscription<A> extends Effectable.Class<A> implements Queue.Dequeue<A> {
  readonly [Q.DequeueTypeId] = variance as Queue.Dequeue<A>[typeof Q.DequeueTypeId]
  private buffer: Array<A | undefined> = []
  private head = 0
  private takers: Array<Resume<void>> = []
  private closed = false
  private shutdownWaiters: Array<Resume<void>> | undefined = undefined

  constructor(private readonly hub: Hub<A>) {
    super()
  }

  commit(): Effect.Effect<A> {
    return this.take
  }

  /** Buffers `value` and wakes the waiting takers, which take from the buffer (see `wait`). */
  offer(value: A): void {
    if (this.closed) return
    this.buffer.push(value)
    const takers = this.takers
    if (takers.length === 0) return
    this.takers = []
    for (const wake of takers) wake(Effect.void)
  }

  private count(): number {
    return this.buffer.length - this.head
  }

  private pollOne(): A {
    const value = this.buffer[this.head] as A
    this.buffer[this.head] = undefined
    this.head++
    if (this.head === this.buffer.length) {
      this.buffer.length = 0
      this.head = 0
    } else if (this.head >= 1024 && this.head * 2 >= this.buffer.length) {
      this.buffer = this.buffer.slice(this.head)
      this.head = 0
    }
    return value
  }

  private pollUpTo(max: number): Chunk.Chunk<A> {
    const n = Math.min(max, this.count())
    if (n <= 0) return Chunk.empty()
    const out = new Array<A>(n)
    for (let i = 0; i < n; i++) out[i] = this.pollOne()
    return Chunk.unsafeFromArray(out)
  }

  /** Shuts the subscription down now: no more events, waiting takers interrupted. */
  unsafeShutdown(): void {
    if (this.closed) return
    this.closed = true
    this.hub.subscriptions.delete(this)
    this.buffer = []
    this.head = 0
    const takers = this.takers
    this.takers = []
    for (const taker of takers) taker(Effect.interrupt)
    const waiters = this.shutdownWaiters
    this.shutdownWaiters = undefined
    if (waiters !== undefined) { for (const waiter of waiters) waiter(Effect.void) }
  }

  /**
   * Waits until an offer (or the shutdown) wakes the taker; the taker then takes from the buffer
   * itself. A wake-up hands nothing over, so a taker interrupted while it waits loses nothing and
   * needs no canceler: its wake-up is ignored and the value stays buffered for the next take. A
   * canceler made Effect wrap every wait in an interruption bracket (five operations and their
   * allocations per event a waiting subscriber takes, §24).
   */
  private readonly wait: Effect.Effect<void> = Effect.async<void>((resume) => {
    this.takers.push(resume)
  })

  private readonly takeNext: Effect.Effect<A> = Effect.suspend(() =>
    this.closed
      ? Effect.interrupt
      : this.count() > 0
      ? Effect.succeed(this.pollOne())
      : Effect.flatMap(this.wait, () => this.takeNext)
  )

  get take(): Effect.Effect<A> {
    return this.takeNext
  }

  get takeAll(): Effect.Effect<Chunk.Chunk<A>> {
    return Effect.suspend(() => this.closed ? Effect.interrupt : Effect.succeed(this.pollUpTo(Number.POSITIVE_INFINITY)))
  }

  takeUpTo(max: number): Effect.Effect<Chunk.Chunk<A>> {
    return Effect.suspend(() => this.closed ? Effect.interrupt : Effect.succeed(this.pollUpTo(max)))
  }

  takeBetween(min: number, max: number): Effect.Effect<Chunk.Chunk<A>> {
    return Effect.suspend(() => this.takeRemainder(min, max, Chunk.empty()))
  }

  /** As `PubSub`'s subscriptions: what is there (up to `max`), then one take at a time up to `min`. */
  private takeRemainder(min: number, max: number, acc: Chunk.Chunk<A>): Effect.Effect<Chunk.Chunk<A>> {
    if (max < min) return Effect.succeed(acc)
    return Effect.flatMap(this.takeUpTo(max), (taken) => {
      const remaining = min - taken.length
      const got = Chunk.appendAll(acc, taken)
      if (remaining <= 0) return Effect.succeed(got)
      return Effect.flatMap(this.take, (one) =>
        remaining === 1
          ? Effect.succeed(Chunk.append(got, one))
          : this.takeRemainder(remaining - 1, max - taken.length - 1, Chunk.append(got, one)))
    })
  }

  capacity(): number {
    return Number.MAX_SAFE_INTEGER
  }

  isActive(): boolean {
    return !this.closed
  }

  get size(): Effect.Effect<number> {
    return Effect.suspend(() => this.closed ? Effect.interrupt : Effect.succeed(this.count()))
  }

  unsafeSize(): Option.Option<number> {
    return this.closed ? Option.none() : Option.some(this.count())
  }

  get isFull(): Effect.Effect<boolean> {
    return Effect.map(this.size, () => false)
  }

  get isEmpty(): Effect.Effect<boolean> {
    return Effect.map(this.size, (size) => size === 0)
  }

  get shutdown(): Effect.Effect<void> {
    return Effect.sync(() => this.unsafeShutdown())
  }

  get isShutdown(): Effect.Effect<boolean> {
    return Effect.sync(() => this.closed)
  }

  get awaitShutdown(): Effect.Effect<void> {
    return Effect.async<void>((resume) => {
      if (this.closed) return resume(Effect.void)
      const waiters = this.shutdownWaiters ?? (this.shutdownWaiters = [])
      waiters.push(resume)
      return Effect.sync(() => {
        const at = waiters.indexOf(resume)
        if (at >= 0) waiters.splice(at, 1)
      })
    })
  }
}
