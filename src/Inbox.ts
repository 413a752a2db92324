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
 * The empty inbox.
 *
 * @since 0.1.0
 * @category constructors
 */
export const empty: InboxState = Object.freeze({ nextTurn: Object.freeze([]), nextStep: Object.freeze([]) })

/**
 * Normalized splice coordinates: `start` in `[0, length]`, `removedCount` in
 * `[0, length - start]`, exactly as `Array.prototype.splice` interprets its arguments.
 *
 * @since 0.1.0
 */
export const normalize = (
  length: number,
  start: number,
  deleteCount: number | undefined
): { readonly start: number; readonly removedCount: number } => {
  let s = Math.trunc(start)
  if (Number.isNaN(s)) s = 0
  if (s < 0) s = Math.max(length + s, 0)
  if (s > length) s = length
  let d = deleteCount === undefined ? length - s : Math.trunc(deleteCount)
  if (Number.isNaN(d) || d < 0) d = 0
  if (d > length - s) d = length - s
  return { start: s, removedCount: d }
}

/**
 * True when a splice would remove and insert nothing (such a splice is not logged, §4).
 *
 * @since 0.1.0
 */
export const isNoop = (data: SplicedData): boolean => (data.removedCount ?? 0) === 0 && data.inserted.length === 0

/**
 * Whether the items a splice inserts wake the agent (DESIGN.md §4): `next-turn` items always
 * do; `next-step` items do when the splice carries `wake: true`, and an item that replaces
 * another (same offset in a splice that removes and inserts) keeps the replaced item's flag.
 * DSH v0 `next-step` items are non-waking (they never carry `wake`).
 *
 * @since 0.1.0
 */
const insertedWaking = (data: SplicedData, removed: ReadonlyArray<Pending>, j: number): boolean =>
  data.wake === true || (removed[j]?.waking ?? false)

/**
 * Applies a normalized splice to the state. Throws a `RangeError` when the coordinates are out
 * of range (callers validate first; replay reports it as an invariant violation).
 *
 * @since 0.1.0
 */
export const apply = (state: InboxState, data: SplicedData): InboxState => {
  const removedCount = data.removedCount ?? 0
  if (data.target === "next-turn") {
    const list = state.nextTurn
    if (data.start < 0 || data.start > list.length || data.start + removedCount > list.length) {
      throw new RangeError(`splice out of range: next-turn start ${data.start} removes ${removedCount} of ${list.length}`)
    }
    const next = list.slice()
    next.splice(data.start, removedCount, ...data.inserted)
    return { nextTurn: next, nextStep: state.nextStep }
  }
  const list = state.nextStep
  if (data.start < 0 || data.start > list.length || data.start + removedCount > list.length) {
    throw new RangeError(`splice out of range: next-step start ${data.start} removes ${removedCount} of ${list.length}`)
  }
  const next = list.slice()
  const removed = next.splice(data.start, removedCount)
  if (data.inserted.length > 0) {
    const items: Array<Pending> = new Array(data.inserted.length)
    for (let j = 0; j < data.inserted.length; j++) {
      items[j] = { message: data.inserted[j]!, waking: insertedWaking(data, removed, j) }
    }
    next.splice(data.start, 0, ...items)
  }
  return { nextTurn: state.nextTurn, nextStep: next }
}

/**
 * The messages a splice removes from the state (before applying it).
 *
 * @since 0.1.0
 */
export const removedBy = (state: InboxState, data: SplicedData): ReadonlyArray<UserMessage> => {
  const removedCount = data.removedCount ?? 0
  if (removedCount === 0) return []
  if (data.target === "next-turn") return state.nextTurn.slice(data.start, data.start + removedCount)
  return state.nextStep.slice(data.start, data.start + removedCount).map((p) => p.message)
}

/**
 * True when waking work is pending: a queued followup or an unclaimed steer (DESIGN.md §6.5).
 *
 * @since 0.1.0
 */
export const hasWakingWork = (state: InboxState): boolean => state.nextTurn.length > 0 || hasWakingStep(state)

/**
 * True when `next-step` holds waking input (a steer) (DESIGN.md §6.3).
 *
 * @since 0.1.0
 */
export const hasWakingStep = (state: InboxState): boolean => {
  for (const p of state.nextStep) if (p.waking) return true
  return false
}

/**
 * The claim at a pre-step boundary (DESIGN.md §4): all of `next-step` and, at a turn boundary,
 * the first `next-turn` item. Returns the batch in order `[...nextStep, nextTurn[0]]`, the
 * pure-deletion splices to log (`next-step` first) and the state after them.
 *
 * @since 0.1.0
 */
export const claim = (state: InboxState, turnBoundary: boolean): {
  readonly batch: ReadonlyArray<UserMessage>
  readonly splices: ReadonlyArray<SplicedData>
  readonly state: InboxState
} => {
  const stepCount = state.nextStep.length
  const takeTurn = turnBoundary && state.nextTurn.length > 0
  if (stepCount === 0 && !takeTurn) return { batch: [], splices: [], state }
  const batch: Array<UserMessage> = []
  const splices: Array<SplicedData> = []
  for (const p of state.nextStep) batch.push(p.message)
  if (stepCount > 0) splices.push({ target: "next-step", start: 0, removedCount: stepCount, inserted: [] })
  let nextTurn = state.nextTurn
  if (takeTurn) {
    batch.push(state.nextTurn[0]!)
    splices.push({ target: "next-turn", start: 0, removedCount: 1, inserted: [] })
    nextTurn = state.nextTurn.slice(1)
  }
  return { batch, splices, state: { nextTurn, nextStep: stepCount > 0 ? [] : state.nextStep } }
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
