/**
 * The inbox (§4): the pending input of one agent, two FIFO lists of frozen
 * `UserMessage`s — `nextTurn` (direct prompts queued by `followup`, always waking) and
 * `nextStep` (steering, injected context, tool contexts; each records whether it is waking).
 * Every mutation is an `Array.prototype.splice`, normalized and logged as an
 * `agent/inbox/spliced` event before the state changes; the state is a projection of those
 * events alone.
 *
 * The state is an immutable value (`InboxState`): `apply` gives the state after one splice and
 * leaves its argument as it was (the agent keeps the value in a `Ref` and replaces it together
 * with the splice's durable append). `MutableInbox` applies splices in place, for replaying a
 * whole log in one pass (`replay`, fates, invariants). Both run the same splice rule
 * (`spliceInto`), so they cannot disagree.
 *
 * @since 0.1.0
 */
import { isDsh, seedLengthOf } from "./internal/logOptions.js"
import type { UserMessage } from "./Message.js"
import type { InboxTarget, SessionEvent, SplicedData } from "./SessionEvent.js"
import type { LogOptions } from "./SessionLog.js"

/**
 * A pending `next-step` item: the message and whether it wakes the agent (a steer).
 *
 * @since 0.1.0
 * @category models
 */
export interface Pending {
  readonly message: UserMessage
  readonly waking: boolean
}

/**
 * Inbox state (§4): an immutable value, frozen throughout (the state, its lists, their
 * items; the messages are frozen `UserMessage`s); every change builds a new one (`apply`).
 *
 * @since 0.1.0
 * @category models
 */
export interface InboxState {
  readonly nextTurn: ReadonlyArray<UserMessage>
  readonly nextStep: ReadonlyArray<Pending>
}

/**
 * What applying one splice did: the removed and inserted items (with their waking flags) and
 * whether the coordinates were in range of the inbox it applied to (out-of-range coordinates
 * are clamped like `Array.prototype.splice` on non-negative arguments).
 *
 * @since 0.1.0
 * @category models
 */
export interface SpliceApplied {
  readonly removed: ReadonlyArray<Pending>
  readonly inserted: ReadonlyArray<Pending>
  readonly inRange: boolean
}

const NONE: ReadonlyArray<Pending> = Object.freeze([])

/** A `next-turn` item as a pending item (always waking), frozen like every part of the state. */
const wakingItem = (message: UserMessage): Pending => Object.freeze({ message, waking: true })

/**
 * The empty inbox.
 *
 * @since 0.1.0
 * @category constructors
 */
export const empty: InboxState = Object.freeze({ nextTurn: Object.freeze([]), nextStep: Object.freeze([]) })

/** What `spliceInto` did, and how the count of waking `next-step` items changed. */
interface Spliced extends SpliceApplied {
  readonly wakingDelta: number
}

/**
 * The splice rule (§4), applied in place to the target's array: coordinates clamped
 * as `Array.prototype.splice` does on non-negative arguments; `next-turn` items are waking; a
 * `next-step` insertion is waking when the splice has `wake: true`, or when it replaces removed
 * items (a replace keeps the replaced item's flag: inserted item i takes removed item
 * min(i, removed - 1)'s flag); DSH v0 `next-step` items are never waking.
 */
const spliceInto = (
  nextTurn: Array<UserMessage>,
  nextStep: Array<Pending>,
  data: SplicedData,
  dsh: boolean
): Spliced => {
  const turnTarget = data.target === "next-turn"
  const len = turnTarget ? nextTurn.length : nextStep.length
  const rawStart = data.start ?? 0
  const rawCount = data.removedCount ?? 0
  const inRange = Number.isInteger(rawStart) && Number.isInteger(rawCount) && rawStart >= 0 && rawCount >= 0 &&
    rawStart + rawCount <= len
  const start = rawStart >= 0 ? Math.min(Math.trunc(rawStart), len) : 0
  const count = rawCount > 0 ? Math.min(Math.trunc(rawCount), len - start) : 0
  const insertedMessages = Array.isArray(data.inserted) ? data.inserted : []
  if (turnTarget) {
    const removed = count > 0 ? nextTurn.splice(start, count).map(wakingItem) : NONE
    if (insertedMessages.length === 0) return { removed, inserted: NONE, inRange, wakingDelta: 0 }
    if (start === nextTurn.length) { for (const m of insertedMessages) nextTurn.push(m) }
    else nextTurn.splice(start, 0, ...insertedMessages)
    return { removed, inserted: insertedMessages.map(wakingItem), inRange, wakingDelta: 0 }
  }
  let wakingDelta = 0
  let removed: ReadonlyArray<Pending> = NONE
  if (count > 0) {
    removed = nextStep.splice(start, count)
    for (const item of removed) if (item.waking) wakingDelta--
  }
  if (insertedMessages.length === 0) return { removed, inserted: NONE, inRange, wakingDelta }
  const inserted: Array<Pending> = new Array(insertedMessages.length)
  for (let i = 0; i < insertedMessages.length; i++) {
    let waking: boolean
    if (dsh) waking = false
    else if (data.wake === true) waking = true
    else if (removed.length > 0) waking = removed[Math.min(i, removed.length - 1)]!.waking
    else waking = false
    if (waking) wakingDelta++
    inserted[i] = Object.freeze({ message: insertedMessages[i]!, waking })
  }
  if (start === nextStep.length) { for (const item of inserted) nextStep.push(item) }
  else nextStep.splice(start, 0, ...inserted)
  return { removed, inserted, inRange, wakingDelta }
}

/**
 * The state after one splice (§4), and what the splice removed and inserted. `state`
 * is not changed: the result shares the list the splice did not touch. `dsh`: the splice rule
 * of DSH v0 logs (`next-step` items never waking).
 *
 * @since 0.1.0
 * @category combinators
 */
export const apply = (
  state: InboxState,
  data: SplicedData,
  dsh = false
): SpliceApplied & { readonly state: InboxState } => {
  const turnTarget = data.target === "next-turn"
  const nextTurn = turnTarget ? state.nextTurn.slice() : (state.nextTurn as Array<UserMessage>)
  const nextStep = turnTarget ? (state.nextStep as Array<Pending>) : state.nextStep.slice()
  const done = spliceInto(nextTurn, nextStep, data, dsh)
  const next: InboxState = Object.freeze({
    nextTurn: turnTarget ? Object.freeze(nextTurn) : state.nextTurn,
    nextStep: turnTarget ? state.nextStep : Object.freeze(nextStep)
  })
  return { state: next, removed: done.removed, inserted: done.inserted, inRange: done.inRange }
}

/**
 * The state after several splices, in order.
 *
 * @since 0.1.0
 * @category combinators
 */
export const applyAll = (state: InboxState, splices: ReadonlyArray<SplicedData>, dsh = false): InboxState => {
  let out = state
  for (let i = 0; i < splices.length; i++) out = apply(out, splices[i]!, dsh).state
  return out
}

/**
 * `next-step` holds waking input (a steer) (§6.3). O(next-step).
 *
 * @since 0.1.0
 * @category predicates
 */
export const hasWakingStep = (state: InboxState): boolean => {
  const nextStep = state.nextStep
  for (let i = 0; i < nextStep.length; i++) if (nextStep[i]!.waking) return true
  return false
}

/**
 * A queued followup or an unclaimed steer is pending (§6.5).
 *
 * @since 0.1.0
 * @category predicates
 */
export const hasWakingWork = (state: InboxState): boolean => state.nextTurn.length > 0 || hasWakingStep(state)

/**
 * The inbox as a mutable pair of queues that applies splices one at a time, in place (docs/design.md
 * §4), for replaying a log in one pass (`replay`, fates, invariants): the same rule as `apply`,
 * without building a new value per splice. It is an `InboxState` view.
 *
 * @since 0.1.0
 * @category models
 */
export class MutableInbox implements InboxState {
  /**
   * Direct prompts queued by `followup`, oldest first.
   *
   * @since 0.1.0
   */
  readonly nextTurn: Array<UserMessage> = []
  /**
   * Steering, injected context and tool contexts, oldest first, each with its waking flag.
   *
   * @since 0.1.0
   */
  readonly nextStep: Array<Pending> = []
  private wakingSteps = 0

  constructor(readonly dsh: boolean = false) {}

  /**
   * An inbox holding `state`.
   *
   * @since 0.1.0
   */
  static from(state: InboxState, dsh = false): MutableInbox {
    const inbox = new MutableInbox(dsh)
    for (const m of state.nextTurn) inbox.nextTurn.push(m)
    for (const p of state.nextStep) {
      inbox.nextStep.push(p)
      if (p.waking) inbox.wakingSteps++
    }
    return inbox
  }

  /** `next-step` holds waking input (a steer) (§6.3). O(1). */
  get hasWakingStep(): boolean {
    return this.wakingSteps > 0
  }

  /** A queued followup or an unclaimed steer is pending (§6.5). O(1). */
  get hasWakingWork(): boolean {
    return this.nextTurn.length > 0 || this.wakingSteps > 0
  }

  /**
   * Applies one splice in place.
   *
   * @since 0.1.0
   */
  apply(data: SplicedData): SpliceApplied {
    const done = spliceInto(this.nextTurn, this.nextStep, data, this.dsh)
    this.wakingSteps += done.wakingDelta
    return done
  }

  /**
   * A frozen copy of the current state.
   *
   * @since 0.1.0
   */
  snapshot(): InboxState {
    return Object.freeze({ nextTurn: Object.freeze(this.nextTurn.slice()), nextStep: Object.freeze(this.nextStep.slice()) })
  }
}

/**
 * Rebuilds the inbox from the `agent/inbox/spliced` events of a log (§4, §10),
 * skipping the inherited prefix of a DSH child session (`seedLength`). Returns the final state
 * with the waking flag of each `next-step` item. One pass, O(events + splice sizes).
 *
 * @since 0.1.0
 * @category projections
 */
export const replay = (events: ReadonlyArray<SessionEvent>, options?: LogOptions): InboxState => {
  const inbox = new MutableInbox(isDsh(options))
  const seed = seedLengthOf(options)
  for (const event of events) {
    if (event.type === "agent/inbox/spliced" && event.seq >= seed) inbox.apply(event.data as SplicedData)
  }
  return inbox.snapshot()
}

/**
 * The claim at a pre-step boundary (§4): all of `next-step` and, at a turn boundary,
 * the first `next-turn` item. Returns the batch in order `[...nextStep, nextTurn[0]]` and the
 * pure-deletion splices to log (`next-step` first); apply them once they are durable.
 *
 * @since 0.1.0
 * @category combinators
 */
export const claim = (state: InboxState, turnBoundary: boolean): {
  readonly batch: ReadonlyArray<UserMessage>
  readonly splices: ReadonlyArray<SplicedData>
} => {
  const stepCount = state.nextStep.length
  const takeTurn = turnBoundary && state.nextTurn.length > 0
  if (stepCount === 0 && !takeTurn) return { batch: [], splices: [] }
  const batch: Array<UserMessage> = []
  const splices: Array<SplicedData> = []
  for (const p of state.nextStep) batch.push(p.message)
  if (stepCount > 0) splices.push({ target: "next-step", start: 0, removedCount: stepCount, inserted: [] })
  if (takeTurn) {
    batch.push(state.nextTurn[0]!)
    splices.push({ target: "next-turn", start: 0, removedCount: 1, inserted: [] })
  }
  return { batch, splices }
}

/**
 * The splices that clear both queues for a cancel or dispose (§9): `next-step` first,
 * then `next-turn`, each `outcome: "canceled"` with `cause` (without one: a plugin's `clear`).
 *
 * @since 0.1.0
 * @category combinators
 */
export const clearAll = (
  state: InboxState,
  cause: SplicedData["cause"]
): ReadonlyArray<SplicedData> => {
  const out: Array<SplicedData> = []
  if (state.nextStep.length > 0) {
    out.push(
      withCause({ target: "next-step", start: 0, removedCount: state.nextStep.length, inserted: [], outcome: "canceled" }, cause)
    )
  }
  if (state.nextTurn.length > 0) {
    out.push(
      withCause({ target: "next-turn", start: 0, removedCount: state.nextTurn.length, inserted: [], outcome: "canceled" }, cause)
    )
  }
  return out
}

const withCause = (data: SplicedData, cause: SplicedData["cause"]): SplicedData => cause === undefined ? data : { ...data, cause }

/**
 * Where an id is pending: `[target, index]`, or `undefined`.
 *
 * @since 0.1.0
 * @category combinators
 */
export const find = (state: InboxState, id: string): readonly [InboxTarget, number] | undefined => {
  for (let i = 0; i < state.nextStep.length; i++) if (state.nextStep[i]!.message.id === id) return ["next-step", i]
  for (let i = 0; i < state.nextTurn.length; i++) if (state.nextTurn[i]!.id === id) return ["next-turn", i]
  return undefined
}
