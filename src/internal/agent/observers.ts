/**
 * Who watches an agent (§5.1–§5.3): the live events hub (allocated on the first
 * subscription, released with the last), outcome waiters and observers, idle waiters. Waiters
 * are callbacks registered inside `Effect.async`, so that the check ("is it decided?") and the
 * registration are one step that no decision can fall between (a `Deferred` per delivery costs
 * ~7 µs here: §24).
 */
import { Effect, Option, type Queue, type Scope, Stream } from "effect"
import { MessageNotFound } from "../../AgentError.js"
import type { AgentEvent, AgentStatus } from "../../AgentEvent.js"
import { type DeliveryOutcome, dropped, fateOf } from "../../Delivery.js"
import type { SessionEvent } from "../../SessionEvent.js"
import { type Resume, resumeAll } from "../waiters.js"
import { Hub } from "./hub.js"
import { type AgentState, undecided } from "./state.js"

/** Publishes a live event when someone subscribed (0.2 µs otherwise saved per event). */
export const publish = (a: AgentState, event: AgentEvent): void => {
  if (a.hub !== undefined) a.hub.publish(event)
  if (a.family?.parentLink !== undefined) forward(a, event)
}

/** Publishes committed events, in order. */
export const publishAll = (a: AgentState, events: ReadonlyArray<SessionEvent>): void => {
  const hub = a.hub
  if (hub !== undefined) { for (let i = 0; i < events.length; i++) hub.publish(events[i]!) }
  if (a.family?.parentLink !== undefined) { for (let i = 0; i < events.length; i++) forward(a, events[i]!) }
}

/**
 * A sub-agent's live event, published by the agent whose call runs it (§27), wrapped with the
 * child's session id and the call (and so on up, for a child's own sub-agents).
 */
const forward = (a: AgentState, event: AgentEvent): void => {
  const link = a.family!.parentLink!
  publish(link.parent, { type: "subagent/event", sessionId: a.id, callId: link.callId, event })
}

/** Decides the outcome of a delivered (or pre-step-entered) message: observers, then waiters. */
export const resolve = (a: AgentState, id: string, outcome: DeliveryOutcome): void => {
  a.undecidedCell?.delete(id)
  a.trace?.callers.delete(id)
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
 * What stopped or released agents of a session left for the next agent of the session, and
 * that agent (`heir`) once one resumed the session.
 */
interface Orphans {
  waiters: Map<string, Array<Resume<DeliveryOutcome>>> | undefined
  observers: Map<string, (outcome: DeliveryOutcome) => void> | undefined
  heir: AgentState | undefined
}

/**
 * Outcome waiters and observers left by agents that stopped (their log could not be written,
 * `driver.ts`) or were released (`cancel.ts`), by store and session id (a store may hand out a
 * new `SessionLog` once the old one is closed), until an agent resumes the same session of the
 * same store in this process and takes them over (`adoptWaiters`): so a delivery acknowledged
 * before the stop still gets its outcome when the resumed agent decides it. An entry is made
 * only for an agent that leaves undecided messages, and dropped when it is adopted.
 */
const orphans = new WeakMap<object, Map<string, Orphans>>()

/** The entry each stopped agent left (it outlives the adoption: late waiters follow its `heir`). */
const leftBy = new WeakMap<AgentState, Orphans>()

const orphansOf = (a: AgentState): Orphans => {
  const known = leftBy.get(a)
  if (known !== undefined) return known
  let sessions = orphans.get(a.config.store)
  if (sessions === undefined) orphans.set(a.config.store, sessions = new Map())
  let left = sessions.get(a.id)
  if (left === undefined) sessions.set(a.id, left = { waiters: undefined, observers: undefined, heir: undefined })
  leftBy.set(a, left)
  return left
}

/**
 * The stopped (or released) agent `a` hands its undecided waiters and observers to the next
 * agent of its session; waiters that ask `a` later follow them (`outcomeOf`).
 */
export const orphanWaiters = (a: AgentState): void => {
  if (a.waiters === undefined && a.observers === undefined && (a.undecidedCell?.size ?? 0) === 0) return
  const left = orphansOf(a)
  if (a.waiters !== undefined) {
    if (left.heir !== undefined) {
      for (const [id, list] of a.waiters) resumeAll(list, outcomeOf(left.heir, id))
    } else {
      const into = left.waiters ?? (left.waiters = new Map())
      for (const [id, list] of a.waiters) into.set(id, [...(into.get(id) ?? []), ...list])
    }
  }
  if (a.observers !== undefined) {
    const into = left.observers ?? (left.observers = new Map())
    for (const [id, observer] of a.observers) into.set(id, observer)
  }
  a.waiters = undefined
  a.observers = undefined
}

/**
 * A waiter that asks a stopped or released agent for the outcome of a message it left
 * undecided: it waits on the agent that resumed the session since, else with the waiters the
 * agent left for the next one.
 */
const orphanWaiter = (a: AgentState, id: string, resume: Resume<DeliveryOutcome>): Effect.Effect<void> | void => {
  const left = orphansOf(a)
  if (left.heir !== undefined) return resume(outcomeOf(left.heir, id))
  const waiters = left.waiters ?? (left.waiters = new Map())
  let list = waiters.get(id)
  if (list === undefined) waiters.set(id, list = [])
  const waiting = list
  waiting.push(resume)
  return Effect.sync(() => {
    const at = waiting.indexOf(resume)
    if (at >= 0) waiting.splice(at, 1)
  })
}

/**
 * The resumed agent `a` takes over what stopped or released agents of its session left: the
 * waiters of messages still undecided wait on `a`; the others get their fate from the log at
 * once (the repair decided them). Later waiters of those agents wait on `a` too.
 */
export const adoptWaiters = (a: AgentState): void => {
  const sessions = orphans.get(a.config.store)
  const left = sessions?.get(a.id)
  if (left === undefined) return
  sessions!.delete(a.id)
  left.heir = a
  const waiters = left.waiters
  const observers = left.observers
  left.waiters = undefined
  left.observers = undefined
  const decided = (id: string) => {
    const fate = fateOf(a.sessionLog.events(), id)
    return fate === undefined || fate._tag === "Pending" ? undefined : fate
  }
  for (const [id, list] of waiters ?? []) {
    if (a.undecidedCell?.has(id) === true) {
      const into = a.waiters ?? (a.waiters = new Map())
      into.set(id, [...(into.get(id) ?? []), ...list])
    } else {
      const fate = decided(id)
      if (fate !== undefined) resumeAll(list, Effect.succeed(fate))
    }
  }
  for (const [id, observer] of observers ?? []) {
    if (a.undecidedCell?.has(id) === true) (a.observers ?? (a.observers = new Map())).set(id, observer)
    else {
      const fate = decided(id)
      if (fate !== undefined) observer(fate)
    }
  }
}

/**
 * A delivery's `outcome` (§5.1): waits while the message is undecided (pending or claimed), then
 * gives its outcome; for a decided message, `Delivery.fateOf` on the log (equal by §12). On a
 * stopped or released agent, a message it left undecided waits for the next agent of the
 * session in this process (`orphanWaiters`), and one its open turn had claimed is `Dropped
 * interrupted` (the fate the repair gives it, §10).
 */
export const outcomeOf = (a: AgentState, id: string): Effect.Effect<DeliveryOutcome> =>
  Effect.async<DeliveryOutcome>((resume) => {
    if (a.undecidedCell?.has(id) === true) {
      if (a.stopped !== undefined) return orphanWaiter(a, id, resume)
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
      fate === undefined
        ? Effect.dieMessage(`no fate for message ${id} in session ${a.id}`)
        : fate._tag !== "Pending"
        ? Effect.succeed(fate)
        : a.stopped !== undefined
        ? Effect.succeed(dropped("interrupted"))
        : Effect.dieMessage(`no fate for message ${id} in session ${a.id}`)
    )
  })

/**
 * `agent.outcome(messageId)` (§5.1, §12): the outcome of any message this session delivered,
 * also before a resume. An undecided message waits (as `outcomeOf`, found in O(1)); an id the
 * session never used fails `MessageNotFound` in O(1); a decided one is read from the log with
 * `Delivery.fateOf` (one scan of the log), and an id the log holds but never inserted into the
 * inbox (an assistant message, a tool result, a pre-step addition) is `MessageNotFound` too.
 */
export const messageOutcome = (a: AgentState, id: string): Effect.Effect<DeliveryOutcome, MessageNotFound> =>
  Effect.suspend(() => {
    if (a.undecidedCell?.has(id) !== true) {
      const fate = a.seenCell?.has(id) === true ? fateOf(a.sessionLog.events(), id, { header: a.sessionLog.header }) : undefined
      if (fate === undefined) {
        return Effect.fail(
          new MessageNotFound({ message: `message ${id} was never delivered in session ${a.id}`, messageId: id })
        )
      }
      if (fate._tag !== "Pending") return Effect.succeed(fate)
    }
    return outcomeOf(a, id)
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
  publish(a, { type: "agent/status", status: status(a) })
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

/**
 * The status (§5.2): `running` while a run is on; `stopped` once the agent stopped because its
 * log refused the closers of its turn, broke, or was fenced (`driver.ts` `stopAgent`; a released
 * agent is `idle`); else `idle`.
 */
export const status = (a: AgentState): AgentStatus =>
  a.running
    ? ((a.approvalCell?.open.size ?? 0) > 0 || (a.family?.childrenAwaiting ?? 0) > 0 ? "awaiting-approval" : "running")
    : a.stopped !== undefined && !a.released
    ? "stopped"
    : "idle"

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
      const ended = new Hub<AgentEvent>()
      const subscription = ended.subscribe()
      ended.publish(DISPOSED)
      return Effect.as(Effect.addFinalizer(() => subscription.shutdown), subscription)
    }
    const hub = a.hub ?? (a.hub = new Hub<AgentEvent>())
    a.subscribers++
    const subscription = hub.subscribe()
    return Effect.as(
      Effect.addFinalizer(() =>
        Effect.sync(() => {
          subscription.unsafeShutdown()
          a.subscribers--
          if (a.subscribers === 0 && a.hub === hub) {
            a.hub = undefined
          }
        })
      ),
      subscription
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
