/**
 * The inbox (DESIGN.md §4): the pending input of one agent, two FIFO lists of frozen
 * `UserMessage`s — `nextTurn` (direct prompts queued by `followup`, always waking) and
 * `nextStep` (steering, injected context, tool contexts; each records whether it is waking).
 * Every mutation is an `Array.prototype.splice`, normalized and logged as an
 * `agent/inbox/spliced` event before the state changes; the state is a projection of those
 * events alone. This module holds the pure splice algebra shared by the live agent and replay.
 *
 * @since 0.1.0
 */
import type { UserMessage } from "./Message.js"
import type { InboxTarget, SplicedData } from "./SessionEvent.js"

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
 * Inbox state (DESIGN.md §4). Immutable: every change builds a new value.
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

/**
 * The inbox as a mutable pair of queues that applies splices one at a time (DESIGN.md §4): the
 * one implementation of the splice rules, used by the live agent (which applies a splice only
 * after it is durable) and by replay (fates, invariants, resume). It is an `InboxState` view.
 * Waking flags: `next-turn` items are waking; a `next-step` insertion is waking when the splice
 * has `wake: true`, or when it replaces removed items (a replace keeps the replaced item's flag:
 * inserted item i takes removed item min(i, removed - 1)'s flag); DSH v0 `next-step` items are
 * never waking.
 *
 * @since 0.1.0
 * @category models
 */
export class MutableInbox implements InboxState {
  readonly nextTurn: Array<UserMessage> = []
  readonly nextStep: Array<Pending> = []
  private wakingSteps = 0

  constructor(readonly dsh: boolean = false) {}

  /** An inbox holding `state`. */
  static from(state: InboxState, dsh = false): MutableInbox {
    const inbox = new MutableInbox(dsh)
    for (const m of state.nextTurn) inbox.nextTurn.push(m)
    for (const p of state.nextStep) {
      inbox.nextStep.push(p)
      if (p.waking) inbox.wakingSteps++
    }
    return inbox
  }

  /** `next-step` holds waking input (a steer) (DESIGN.md §6.3). O(1). */
  get hasWakingStep(): boolean {
    return this.wakingSteps > 0
  }

  /** A queued followup or an unclaimed steer is pending (DESIGN.md §6.5). O(1). */
  get hasWakingWork(): boolean {
    return this.nextTurn.length > 0 || this.wakingSteps > 0
  }

  /** Applies one splice. */
  apply(data: SplicedData): SpliceApplied {
    const turnTarget = data.target === "next-turn"
    const len = turnTarget ? this.nextTurn.length : this.nextStep.length
    const rawStart = data.start ?? 0
    const rawCount = data.removedCount ?? 0
    const inRange = Number.isInteger(rawStart) && Number.isInteger(rawCount) && rawStart >= 0 && rawCount >= 0 &&
      rawStart + rawCount <= len
    const start = rawStart >= 0 ? Math.min(Math.trunc(rawStart), len) : 0
    const count = rawCount > 0 ? Math.min(Math.trunc(rawCount), len - start) : 0
    const insertedMessages = Array.isArray(data.inserted) ? data.inserted : []
    if (turnTarget) {
      const removed = count > 0 ? this.nextTurn.splice(start, count).map((message) => ({ message, waking: true })) : NONE
      if (insertedMessages.length === 0) return { removed, inserted: NONE, inRange }
      if (start === this.nextTurn.length) for (const m of insertedMessages) this.nextTurn.push(m)
      else this.nextTurn.splice(start, 0, ...insertedMessages)
      return { removed, inserted: insertedMessages.map((message) => ({ message, waking: true })), inRange }
    }
    let removed: ReadonlyArray<Pending> = NONE
    if (count > 0) {
      removed = this.nextStep.splice(start, count)
      for (const item of removed) if (item.waking) this.wakingSteps--
    }
    if (insertedMessages.length === 0) return { removed, inserted: NONE, inRange }
    const inserted: Array<Pending> = new Array(insertedMessages.length)
    for (let i = 0; i < insertedMessages.length; i++) {
      let waking: boolean
      if (this.dsh) waking = false
      else if (data.wake === true) waking = true
      else if (removed.length > 0) waking = removed[Math.min(i, removed.length - 1)]!.waking
      else waking = false
      if (waking) this.wakingSteps++
      inserted[i] = { message: insertedMessages[i]!, waking }
    }
    if (start === this.nextStep.length) for (const item of inserted) this.nextStep.push(item)
    else this.nextStep.splice(start, 0, ...inserted)
    return { removed, inserted, inRange }
  }

  /** A frozen copy of the current state. */
  snapshot(): InboxState {
    return Object.freeze({ nextTurn: Object.freeze(this.nextTurn.slice()), nextStep: Object.freeze(this.nextStep.slice()) })
  }
}

/**
 * The claim at a pre-step boundary (DESIGN.md §4): all of `next-step` and, at a turn boundary,
 * the first `next-turn` item. Returns the batch in order `[...nextStep, nextTurn[0]]` and the
 * pure-deletion splices to log (`next-step` first); apply them once they are durable.
 *
 * @since 0.1.0
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
 * The splices that clear both queues for a cancel or dispose (DESIGN.md §9): `next-step` first,
 * then `next-turn`, each `outcome: "canceled"` with `cause`.
 *
 * @since 0.1.0
 */
export const clearAll = (
  state: InboxState,
  cause: SplicedData["cause"]
): ReadonlyArray<SplicedData> => {
  const out: Array<SplicedData> = []
  if (state.nextStep.length > 0) {
    out.push(withCause({ target: "next-step", start: 0, removedCount: state.nextStep.length, inserted: [], outcome: "canceled" }, cause))
  }
  if (state.nextTurn.length > 0) {
    out.push(withCause({ target: "next-turn", start: 0, removedCount: state.nextTurn.length, inserted: [], outcome: "canceled" }, cause))
  }
  return out
}

const withCause = (data: SplicedData, cause: SplicedData["cause"]): SplicedData =>
  cause === undefined ? data : { ...data, cause }

/**
 * Where an id is pending: `[target, index]`, or `undefined`.
 *
 * @since 0.1.0
 */
export const find = (state: InboxState, id: string): readonly [InboxTarget, number] | undefined => {
  for (let i = 0; i < state.nextStep.length; i++) if (state.nextStep[i]!.message.id === id) return ["next-step", i]
  for (let i = 0; i < state.nextTurn.length; i++) if (state.nextTurn[i]!.id === id) return ["next-turn", i]
  return undefined
}
