/**
 * Who watches an agent (DESIGN.md §5.1–§5.3): the live events hub (allocated on the first
 * subscription, released with the last), outcome waiters and observers, idle waiters. Waiters
 * are callbacks registered inside `Effect.async`, so that the check ("is it decided?") and the
 * registration are one step that no decision can fall between (a `Deferred` per delivery costs
 * ~7 µs here: STYLE.md "Hot path").
 */
import { Effect, Option, PubSub, type Queue, type Scope, Stream } from "effect"
import type { AgentEvent, AgentStatus } from "../../AgentEvent.js"
import { type DeliveryOutcome, fateOf } from "../../Delivery.js"
import type { SessionEvent } from "../../SessionEvent.js"
import { resumeAll } from "../waiters.js"
import { type AgentState, undecided } from "./state.js"

/** Publishes a live event when someone subscribed (0.2 µs otherwise saved per event). */
export const publish = (a: AgentState, event: AgentEvent): void => {
  if (a.hub !== undefined) a.hub.unsafeOffer(event)
}

/** Publishes committed events, in order. */
export const publishAll = (a: AgentState, events: ReadonlyArray<SessionEvent>): void => {
  const hub = a.hub
  if (hub !== undefined) { for (let i = 0; i < events.length; i++) hub.unsafeOffer(events[i]!) }
}

/** Decides the outcome of a delivered (or pre-step-entered) message: observers, then waiters. */
export const resolve = (a: AgentState, id: string, outcome: DeliveryOutcome): void => {
  a.undecidedCell?.delete(id)
  const observers = a.observers
  if (observers !== undefined) {
    const observer = observers.get(id)
    if (observer !== undefined) {
      observers.delete(id)
      observer(outcome)
    }
  }
  const waiters = a.waiters
  if (waiters === undefined) return
  const list = waiters.get(id)
  if (list !== undefined) {
    waiters.delete(id)
    resumeAll(list, Effect.succeed(outcome))
  }
}

/**
 * Outcome waiters and observers left by an agent that stopped (its log could not be written,
 * `driver.ts`), by its session log: the agent that resumes the same open log in this process
 * takes them over (`adoptWaiters`), so that a delivery acknowledged before the stop still gets
 * its outcome when the resumed agent decides it.
 */
const orphans = new WeakMap<object, Pick<AgentState, "waiters" | "observers">>()

/** The stopped agent `a` hands its undecided waiters and observers to the next agent of its log. */
export const orphanWaiters = (a: AgentState): void => {
  if (a.waiters === undefined && a.observers === undefined) return
  const left = orphans.get(a.sessionLog) ?? { waiters: undefined, observers: undefined }
  if (a.waiters !== undefined) {
    const into = left.waiters ?? (left.waiters = new Map())
    for (const [id, list] of a.waiters) into.set(id, [...(into.get(id) ?? []), ...list])
  }
  if (a.observers !== undefined) {
    const into = left.observers ?? (left.observers = new Map())
    for (const [id, observer] of a.observers) into.set(id, observer)
  }
  orphans.set(a.sessionLog, left)
  a.waiters = undefined
  a.observers = undefined
}

/**
 * The resumed agent `a` takes over what a stopped agent of its log left: the waiters of
 * messages still undecided wait on `a`; the others get their fate from the log at once (the
 * repair decided them).
 */
export const adoptWaiters = (a: AgentState): void => {
  const left = orphans.get(a.sessionLog)
  if (left === undefined) return
  orphans.delete(a.sessionLog)
  const decided = (id: string) => {
    const fate = fateOf(a.sessionLog.events(), id)
    return fate === undefined || fate._tag === "Pending" ? undefined : fate
  }
  for (const [id, list] of left.waiters ?? []) {
    if (a.undecidedCell?.has(id) === true) {
      const waiters = a.waiters ?? (a.waiters = new Map())
      waiters.set(id, [...(waiters.get(id) ?? []), ...list])
    } else {
      const fate = decided(id)
      if (fate !== undefined) resumeAll(list, Effect.succeed(fate))
    }
  }
  for (const [id, observer] of left.observers ?? []) {
    if (a.undecidedCell?.has(id) === true) (a.observers ?? (a.observers = new Map())).set(id, observer)
    else {
      const fate = decided(id)
      if (fate !== undefined) observer(fate)
    }
  }
}

/**
 * A delivery's `outcome` (§5.1): waits while the message is undecided (pending or claimed), then
 * gives its outcome; for a decided message, `Delivery.fateOf` on the log (equal by §12).
 */
export const outcomeOf = (a: AgentState, id: string): Effect.Effect<DeliveryOutcome> =>
  Effect.async<DeliveryOutcome>((resume) => {
    if (a.undecidedCell?.has(id) === true) {
      const waiters = a.waiters ?? (a.waiters = new Map())
      let list = waiters.get(id)
      if (list === undefined) {
        list = []
        waiters.set(id, list)
      }
      const waiting = list
      waiting.push(resume)
      return Effect.sync(() => {
        const at = waiting.indexOf(resume)
        if (at >= 0) waiting.splice(at, 1)
      })
    }
    const fate = fateOf(a.sessionLog.events(), id)
    resume(
      fate === undefined || fate._tag === "Pending"
        ? Effect.dieMessage(`no fate for message ${id} in session ${a.id}`)
        : Effect.succeed(fate)
    )
  })

/**
 * Calls `observer` when the fate of an undecided message is decided, synchronously with the
 * decision (no fiber; the simulator records live outcomes with it). False when it is decided.
 */
export const observeOutcome = (a: AgentState, id: string, observer: (outcome: DeliveryOutcome) => void): boolean => {
  if (a.undecidedCell?.has(id) !== true) return false
  ;(a.observers ?? (a.observers = new Map())).set(id, observer)
  return true
}

/** Marks ids as delivered and undecided (inserted into the inbox). */
export const markUndecided = (a: AgentState, ids: ReadonlyArray<{ readonly id: string }>): void => {
  const set = undecided(a)
  for (let i = 0; i < ids.length; i++) set.add(ids[i]!.id)
}

/** The run ended: status idle, the driver released, idle waiters resumed (§5.2). */
export const setIdle = (a: AgentState): void => {
  a.running = false
  a.driver = undefined
  a.cancelCause = undefined
  a.latch = false
  a.current = undefined
  publish(a, { type: "agent/status", status: "idle" })
  const waiters = a.idleWaiters
  if (waiters !== undefined) {
    a.idleWaiters = undefined
    resumeAll(waiters, Effect.void)
  }
}

/** Waits until the agent is idle (at once when it is). */
export const awaitIdle = (a: AgentState): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (!a.running) return resume(Effect.void)
    const waiters = a.idleWaiters ?? (a.idleWaiters = [])
    waiters.push(resume)
    return Effect.sync(() => {
      const at = waiters.indexOf(resume)
      if (at >= 0) waiters.splice(at, 1)
    })
  })

export const status = (a: AgentState): AgentStatus => (a.running ? "running" : "idle")

const DISPOSED: AgentEvent = Object.freeze({ type: "agent/disposed" as const })

/**
 * After disposal (§9): the last live event, `agent/disposed`, published after every event of
 * the disposal, so that each subscriber takes all of them and then its stream ends (a shut
 * down hub would drop what a slow subscriber has not taken yet). The agent publishes nothing
 * more.
 */
export const endEvents = (a: AgentState): Effect.Effect<void> => Effect.sync(() => endStopped(a))

/** Publishes `agent/disposed`, the last live event, and drops the hub (disposal, or a stopped agent). */
export const endStopped = (a: AgentState): void => {
  publish(a, DISPOSED)
  a.hub = undefined
}

/**
 * Subscribes now (in the scope): the hub is made on the first subscription, dropped with the
 * last. A disposed agent that is idle gives a subscription holding only `agent/disposed`.
 */
export const subscribe = (a: AgentState): Effect.Effect<Queue.Dequeue<AgentEvent>, never, Scope.Scope> =>
  Effect.suspend(() => {
    if (a.disposed && !a.running) {
      return Effect.flatMap(PubSub.unbounded<AgentEvent>(), (ended) =>
        Effect.flatMap(PubSub.subscribe(ended), (queue) => Effect.as(PubSub.publish(ended, DISPOSED), queue)))
    }
    const hub = a.hub ?? (a.hub = Effect.runSync(PubSub.unbounded<AgentEvent>()))
    a.subscribers++
    return Effect.flatMap(
      Effect.addFinalizer(() =>
        Effect.sync(() => {
          a.subscribers--
          if (a.subscribers === 0 && a.hub === hub) {
            a.hub = undefined
          }
        })
      ),
      () =>
        PubSub.subscribe(hub)
    )
  })

const isDisposed = (e: AgentEvent): boolean => e.type === "agent/disposed"

/** Live events (§5.3), subscribing when the stream starts; it ends with `agent/disposed`. */
export const events = (a: AgentState): Stream.Stream<AgentEvent> =>
  Stream.unwrapScoped(Effect.map(subscribe(a), (queue) => Stream.takeUntil(Stream.fromQueue(queue), isDisposed)))

/** The status now, then every change; it ends when the agent is disposed. */
export const statusChanges = (a: AgentState): Stream.Stream<AgentStatus> =>
  Stream.unwrapScoped(Effect.map(subscribe(a), (queue) =>
    Stream.concat(
      Stream.sync(() => status(a)),
      Stream.fromQueue(queue).pipe(
        Stream.takeUntil(isDisposed),
        Stream.filterMap((e) => e.type === "agent/status" ? Option.some((e as { status: AgentStatus }).status) : Option.none())
      )
    )))
