/**
 * Critical sections (§4): every inbox mutation (validate → durable append → state →
 * notifications) and every driver decision that reads the inbox (the claim, the continuation
 * rule of §6.3, the next-turn rule of §6.5) is one section, built by a function of the inbox
 * value: it returns the drafts to append, the inbox after its splices, and the update to apply
 * once the drafts are durable (or an effect: an early exit, nothing appended).
 *
 * The inbox is an immutable value in a `Ref`, changed only together with its durable splice:
 * - when the log appends synchronously (`SessionLog.appendSync`: memory, JSONL `fsync: "none"`)
 *   a section is one `Ref.modify` whose function appends: one synchronous step, so nothing can
 *   interleave with it and it needs no lock (an Effect fiber can be preempted between any two
 *   operations, so the section is never split in several);
 * - otherwise (JSONL `fsync: "batch"`, SQL, a custom store) the `Ref` is a `SynchronizedRef`
 *   and a section is one `SynchronizedRef.modifyEffect`, run uninterruptibly: the append and the
 *   new value are never separated by an interruption (waiting for a running section is
 *   uninterruptible too; a section is one append long).
 * `commit` appends events whose position no section decides (step/start, messages, tool
 * events) without taking the section.
 */
import { type Clock, Effect, Ref, SynchronizedRef } from "effect"
import { dropped, dropReasonOfCanceledSplice } from "../../Delivery.js"
import * as Inbox from "../../Inbox.js"
import type { UserMessage } from "../../Message.js"
import type { EventDraft, SessionEvent, SplicedData } from "../../SessionEvent.js"
import { type SessionLog, SessionStoreError, type SessionWriteError } from "../../SessionLog.js"
import { publish, publishAll, resolve } from "./observers.js"
import type { AgentState } from "./state.js"

/**
 * A claim's live notifications (§4): `agent/inbox/claimed` for each message of `batch`, published
 * right after the event of draft `after` (the claim's last splice), so that a subscriber sees
 * the claim before the step it enters.
 */
export interface Claimed {
  readonly after: number
  readonly batch: ReadonlyArray<UserMessage>
  readonly turn: number
}

/** What a critical section appends, the inbox after it, and the update once it is durable. */
export interface Section<R> {
  readonly drafts: ReadonlyArray<EventDraft>
  /** The inbox once the drafts are durable; absent when the section splices nothing. */
  readonly inbox?: Inbox.InboxState | undefined
  /** The claim the drafts make, if any (its notifications go between the events). */
  readonly claimed?: Claimed | undefined
  readonly apply: (events: ReadonlyArray<SessionEvent>) => R
}

const NO_EVENTS: ReadonlyArray<SessionEvent> = Object.freeze([])

/** Publishes committed events, and a claim's notifications right after its splices. */
const publishEvents = (a: AgentState, events: ReadonlyArray<SessionEvent>, claimed: Claimed | undefined): void => {
  if (a.hub === undefined && a.family?.parentLink === undefined) return
  if (claimed === undefined) return publishAll(a, events)
  for (let i = 0; i < events.length; i++) {
    publish(a, events[i]!)
    if (i === claimed.after) {
      for (const message of claimed.batch) publish(a, { type: "agent/inbox/claimed", message, turn: claimed.turn })
    }
  }
}

/** Appends drafts durably and publishes the committed events. */
const append = (
  a: AgentState,
  drafts: ReadonlyArray<EventDraft>,
  claimed?: Claimed | undefined
): Effect.Effect<ReadonlyArray<SessionEvent>, SessionWriteError> =>
  Effect.tap(a.sessionLog.append(drafts), (events) => {
    publishEvents(a, events, claimed)
  })

/**
 * Runs a critical section (see the module comment): `build` reads the inbox (and the record)
 * and returns the section, or an effect for an early exit.
 */
export const critical = <R, E = never>(
  a: AgentState,
  build: (inbox: Inbox.InboxState) => Section<R> | Effect.Effect<R, E>
): Effect.Effect<R, E | SessionWriteError> => {
  if (a.stopped !== undefined) return Effect.fail(a.stopped)
  const appendSync = a.appendSync
  if (appendSync !== undefined) {
    return Effect.clockWith((clock) =>
      Effect.flatten(Ref.modify(a.inbox, (inbox): readonly [Effect.Effect<R, E | SessionWriteError>, Inbox.InboxState] => {
        const section = build(inbox)
        if (Effect.isEffect(section)) return [section, inbox]
        const result = commitNow(a, appendSync, clock, section.drafts, section.apply, section.claimed)
        return result instanceof SessionStoreError
          ? [Effect.fail(result), inbox]
          : [Effect.succeed(result), section.inbox ?? inbox]
      }))
    )
  }
  return Effect.uninterruptible(
    SynchronizedRef.modifyEffect(
      a.inbox as SynchronizedRef.SynchronizedRef<Inbox.InboxState>,
      (inbox): Effect.Effect<readonly [R, Inbox.InboxState], E | SessionWriteError> => {
        // Stopped or released while this section waited for the lock: nothing more is appended.
        if (a.stopped !== undefined) return Effect.fail(a.stopped)
        const section = build(inbox)
        if (Effect.isEffect(section)) return Effect.map(section, (r) => [r, inbox] as const)
        return Effect.map(
          append(a, section.drafts, section.claimed),
          (events) => [section.apply(events), section.inbox ?? inbox] as const
        )
      }
    )
  )
}

/**
 * Appends `drafts` without taking the section and applies `apply` once they are durable (one
 * synchronous step, or uninterruptibly). For appends whose position no section decides; they
 * never splice the inbox.
 */
export const commit = <R>(
  a: AgentState,
  drafts: ReadonlyArray<EventDraft>,
  apply: (events: ReadonlyArray<SessionEvent>) => R
): Effect.Effect<R, SessionWriteError> => {
  if (a.stopped !== undefined) return Effect.fail(a.stopped)
  const appendSync = a.appendSync
  if (appendSync !== undefined) {
    return Effect.clockWith((clock) => {
      const result = commitNow(a, appendSync, clock, drafts, apply)
      return result instanceof SessionStoreError ? Effect.fail(result) : Effect.succeed(result)
    })
  }
  return Effect.uninterruptible(Effect.map(append(a, drafts), apply))
}

/**
 * A synchronous append, its publication and `apply`: the applied value, or the store's error
 * (no section's value is a `SessionStoreError`, so no wrapper is allocated per section).
 */
const commitNow = <R>(
  a: AgentState,
  appendSync: NonNullable<SessionLog["appendSync"]>,
  clock: Clock.Clock,
  drafts: ReadonlyArray<EventDraft>,
  apply: (events: ReadonlyArray<SessionEvent>) => R,
  claimed?: Claimed | undefined
): R | SessionStoreError => {
  if (drafts.length === 0) return apply(NO_EVENTS)
  const events = appendSync(drafts, clock.unsafeCurrentTimeMillis())
  if (events instanceof SessionStoreError) return events
  publishEvents(a, events, claimed)
  return apply(events)
}

/**
 * The section of canceled splices (replace, remove, clear, cancel, dispose; §4, §9): append
 * them; then `discarded` notifications and the removed messages' outcomes by cause (§12).
 */
export const spliceSection = (
  a: AgentState,
  inbox: Inbox.InboxState,
  splices: ReadonlyArray<SplicedData>
): Section<void> => {
  let state = inbox
  const removed: Array<readonly [ReadonlyArray<Inbox.Pending>, SplicedData]> = []
  for (const data of splices) {
    const done = Inbox.apply(state, data)
    state = done.state
    removed.push([done.removed, data])
  }
  return {
    drafts: splices.map((data) => ({ type: "agent/inbox/spliced", data })),
    inbox: state,
    apply: () => {
      for (const [items, data] of removed) {
        const outcome = dropped(dropReasonOfCanceledSplice(data))
        for (const item of items) {
          publish(a, { type: "agent/inbox/discarded", message: item.message })
          resolve(a, item.message.id, outcome)
        }
      }
    }
  }
}
