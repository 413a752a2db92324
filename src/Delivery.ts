/**
 * Deliveries and their fates (§5.1, §12). `followup`/`steer`/`inject` return a
 * `Delivery { messageId, outcome }` once the splice is durable; `outcome` resolves when the
 * message's fate is decided and always equals `fateOf(log, messageId)`. The fate rules of §12
 * are here, once: the live agent and the projections (`fateOf`, `fatesOf`) use the same
 * `dropReasonOfTurnEnd` and `dropReasonOfCanceledSplice`.
 *
 * Log flavours: for a DSH v0 log (`header.version === 0`, or `dsh: true`) `next-step` items are
 * non-waking (§4), and events before `seedLength` (the prefix inherited from a parent session,
 * §3.1) are skipped: the seed's deliveries belong to the parent session, so messages inserted
 * there have no fate in the child.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import { MutableInbox } from "./Inbox.js"
import { isDsh, seedLengthOf } from "./internal/logOptions.js"
import type { MessageId, UserMessage } from "./Message.js"
import type { SessionEvent, SplicedData, TurnEndReason } from "./SessionEvent.js"
import type { LogOptions } from "./SessionLog.js"

/**
 * What the delivery methods take: a `UserMessage`, or a string (one text block, source
 * `{kind:"user"}`; `inject` takes a `UserMessage` only, since context must name its producer).
 *
 * @since 0.1.0
 * @category models
 */
export type DeliveryInput = UserMessage | string

/**
 * What a delivery method returns once its splice is durable (§5.1).
 *
 * @since 0.1.0
 * @category models
 */
export interface Delivery {
  readonly messageId: MessageId
  /** Resolves with the message's fate when it is decided (waits while it is pending). */
  readonly outcome: Effect.Effect<DeliveryOutcome>
}

/**
 * Why a delivered message never entered (§5.1, §12): `rejected` (claimed by a turn that
 * ended blocked), `failed` (… ended error), `canceled` (cleared or aborted by a cancel),
 * `disposed` (… by dispose), `interrupted` (… by a crash, found at repair), `discarded` (removed
 * by a plugin, or claimed and left out of the entered batch).
 *
 * @since 0.1.0
 * @category models
 */
export type DropReason = "rejected" | "failed" | "canceled" | "disposed" | "interrupted" | "discarded"

/**
 * The outcome of a delivery (§5.1): `{_tag:"Entered", turn, step}` — the message was a
 * `user/message` of that step — or `{_tag:"Dropped", reason}`. Plain frozen objects.
 *
 * @since 0.1.0
 * @category models
 */
export type DeliveryOutcome =
  | { readonly _tag: "Entered"; readonly turn: number; readonly step: number }
  | { readonly _tag: "Dropped"; readonly reason: DropReason }

/**
 * What the log says about an inserted message (§12): `{_tag:"Pending"}` while it has no
 * outcome yet (still in the inbox, or claimed by a pre-step that has not decided), else its
 * `DeliveryOutcome`.
 *
 * @since 0.1.0
 * @category models
 */
export type Fate = { readonly _tag: "Pending" } | DeliveryOutcome

/**
 * `{_tag:"Pending"}` (one shared frozen value).
 *
 * @since 0.1.0
 * @category constructors
 */
export const pending: Fate = Object.freeze({ _tag: "Pending" as const })

/**
 * `{_tag:"Entered", turn, step}` (frozen).
 *
 * @since 0.1.0
 * @category constructors
 */
export const entered = (turn: number, step: number): DeliveryOutcome => Object.freeze({ _tag: "Entered" as const, turn, step })

const droppedOutcomes: { readonly [R in DropReason]: DeliveryOutcome } = {
  rejected: Object.freeze({ _tag: "Dropped" as const, reason: "rejected" as const }),
  failed: Object.freeze({ _tag: "Dropped" as const, reason: "failed" as const }),
  canceled: Object.freeze({ _tag: "Dropped" as const, reason: "canceled" as const }),
  disposed: Object.freeze({ _tag: "Dropped" as const, reason: "disposed" as const }),
  interrupted: Object.freeze({ _tag: "Dropped" as const, reason: "interrupted" as const }),
  discarded: Object.freeze({ _tag: "Dropped" as const, reason: "discarded" as const })
}

/**
 * `{_tag:"Dropped", reason}` (a shared frozen value per reason).
 *
 * @since 0.1.0
 * @category constructors
 */
export const dropped = (reason: DropReason): DeliveryOutcome => droppedOutcomes[reason]

/**
 * The drop reason of messages claimed by a turn that ended with `reason` before their pre-step
 * entered (§12): blocked → rejected, error → failed, aborted → canceled (disposed when
 * the abort cause is `{kind:"disposed"}`), interrupted → interrupted. A turn that ends completed
 * (or max-tokens, or an unknown kind) right after a claim did so because its pre-step entered an
 * empty batch (§6.1): discarded.
 *
 * @since 0.1.0
 * @category rules
 */
export const dropReasonOfTurnEnd = (reason: TurnEndReason | undefined): DropReason => {
  switch (reason?.kind) {
    case "blocked":
      return "rejected"
    case "error":
      return "failed"
    case "aborted": {
      const cause = (reason as { readonly reason?: { readonly kind?: unknown } }).reason
      return cause?.kind === "disposed" ? "disposed" : "canceled"
    }
    case "interrupted":
      return "interrupted"
    default:
      return "discarded"
  }
}

/**
 * The drop reason of messages removed by a canceled splice (§12): `cause.kind ===
 * "disposed"` → disposed; another cause → canceled; no cause → discarded.
 *
 * @since 0.1.0
 * @category rules
 */
export const dropReasonOfCanceledSplice = (data: SplicedData): DropReason =>
  data.cause === undefined || data.cause === null
    ? "discarded"
    : data.cause.kind === "disposed"
    ? "disposed"
    : "canceled"

// ---------------------------------------------------------------------------------------------
// Fate engine
// ---------------------------------------------------------------------------------------------

/**
 * Types that end the batch of `user/message`s a pre-step entered (the model response started,
 * or the step or turn closed).
 */
const endsBatch: ReadonlySet<string> = new Set([
  "assistant/message",
  "tool/call",
  "tool/result",
  "step/start",
  "step/end",
  "turn/start",
  "turn/end"
])

/**
 * One pass over a log computing fates. With `only`, tracks that id alone (O(1) memory beyond the
 * inbox). Rules (§12), per message id, latest insertion wins (ids are reusable in DSH
 * logs once no longer pending):
 * - inserted → Pending;
 * - removed by a canceled splice → Dropped by `dropReasonOfCanceledSplice`;
 * - removed by a splice without outcome (a claim) → claimed: Pending until its pre-step decides;
 * - the next `step/start` of the turn starts the pre-step's entered batch: each `user/message`
 *   of the batch whose id is claimed → Entered {turn, step}; when the batch ends (the first
 *   assistant/tool/step/turn event) the other claimed ids → Dropped discarded;
 * - a `turn/end` with claimed ids whose pre-step never entered → `dropReasonOfTurnEnd(reason)`.
 */
const computeFates = (
  events: ReadonlyArray<SessionEvent>,
  options: LogOptions | undefined,
  only: string | undefined,
  onStep?: ((id: string, what: StoryStep["what"], seq: number, fate: Fate) => void) | undefined
): Map<string, Fate> => {
  const fates = new Map<string, Fate>()
  const inbox = new MutableInbox(isDsh(options))
  const seed = seedLengthOf(options)
  // ids claimed since the last step/start of the open turn
  let claimed: Array<string> = []
  // ids claimed at the pre-step whose batch is being entered
  let batch: Set<string> | undefined
  let turn = 0
  let step = 0
  const closeBatch = (seq: number) => {
    if (batch !== undefined) {
      for (const id of batch) {
        fates.set(id, dropped("discarded"))
        onStep?.(id, "dropped", seq, dropped("discarded"))
      }
      batch = undefined
    }
  }
  for (const event of events) {
    if (event.seq < seed) continue
    const type = event.type
    if (batch !== undefined && endsBatch.has(type)) closeBatch(event.seq)
    switch (type) {
      case "agent/inbox/spliced": {
        const data = event.data as SplicedData
        const { inserted, removed } = inbox.apply(data)
        if (removed.length > 0) {
          if (data.outcome !== undefined) {
            const outcome = dropped(dropReasonOfCanceledSplice(data))
            for (const item of removed) {
              const id = item.message.id
              if (only === undefined || id === only) {
                fates.set(id, outcome)
                onStep?.(id, "dropped", event.seq, outcome)
              }
            }
          } else {
            for (const item of removed) {
              const id = item.message.id
              if (only === undefined || id === only) {
                claimed.push(id)
                onStep?.(id, "claimed", event.seq, pending)
              }
            }
          }
        }
        for (const item of inserted) {
          const id = item.message.id
          if (only !== undefined && id !== only) continue
          fates.set(id, pending)
          onStep?.(id, "inserted", event.seq, pending)
          // a reused id starts over: forget an older instance's claim
          if (claimed.length > 0) claimed = claimed.filter((c) => c !== id)
          batch?.delete(id)
        }
        break
      }
      case "turn/start": {
        turn = (event.data as { readonly turn: number }).turn
        step = 0
        claimed = []
        break
      }
      case "step/start": {
        const data = event.data as { readonly turn: number; readonly step: number }
        turn = data.turn
        step = data.step
        if (claimed.length > 0) {
          batch = new Set(claimed)
          claimed = []
        }
        break
      }
      case "user/message": {
        if (batch !== undefined) {
          const id = (event.data as UserMessage).id
          if (batch.delete(id)) {
            const outcome = entered(turn, step)
            fates.set(id, outcome)
            onStep?.(id, "entered", event.seq, outcome)
            if (batch.size === 0) batch = undefined
          }
        }
        break
      }
      case "turn/end": {
        if (claimed.length > 0) {
          const outcome = dropped(dropReasonOfTurnEnd((event.data as { readonly reason?: TurnEndReason }).reason))
          for (const id of claimed) {
            fates.set(id, outcome)
            onStep?.(id, "dropped", event.seq, outcome)
          }
          claimed = []
        }
        break
      }
    }
  }
  return fates
}

/**
 * The fate of every message ever inserted into the inbox (after the seed), keyed by id, in one
 * pass (§12). A message that was never inserted (a tool result, a pre-step addition)
 * has no entry. In a DSH log an id may be reused once it is no longer pending; the entry is the
 * fate of its latest insertion.
 *
 * @since 0.1.0
 * @category projections
 */
export const fatesOf = (events: ReadonlyArray<SessionEvent>, options?: LogOptions): Map<string, Fate> =>
  computeFates(events, options, undefined)

/**
 * The fate of one message (§12): `Pending`, `Entered {turn, step}` or
 * `Dropped {reason}`; `undefined` when the message was never inserted into the inbox.
 *
 * @since 0.1.0
 * @category projections
 */
export const fateOf = (
  events: ReadonlyArray<SessionEvent>,
  messageId: string,
  options?: LogOptions
): Fate | undefined => computeFates(events, options, messageId).get(messageId)

/**
 * One step of a message's life in the inbox (§12): `inserted` (by a splice), `claimed` (a
 * pre-step's claim took it), `entered` (its `user/message` in the step the pre-step entered) or
 * `dropped`; `seq` is the event that proves it, and `fate` the message's fate after it.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoryStep {
  readonly what: "inserted" | "claimed" | "entered" | "dropped"
  readonly seq: number
  readonly fate: Fate
}

/**
 * The life of every message ever inserted into the inbox (after the seed), keyed by id: its
 * steps in log order, each with the seq of the event that proves it, in the same one pass and
 * by the same rules as `fatesOf` (§12), so the last step's `fate` is `fatesOf`'s. A dropped
 * message's step is the event that decided it: the canceling splice, the `turn/end` of a turn
 * whose pre-step never entered it, or the first event after the entered batch of a pre-step that
 * left it out. An id reused in a DSH log has the steps of every insertion.
 *
 * @example
 * ```ts
 * import { Delivery, SessionStore } from "effect-agent-loop"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const { events, header } = yield* SessionStore.readFile("session.jsonl")
 *   for (const [id, steps] of Delivery.storiesOf(events, { header })) {
 *     console.log(id, steps.map((s) => `${s.what}@${s.seq}`).join(" "))
 *   }
 * })
 * ```
 *
 * @since 0.1.0
 * @category projections
 */
export const storiesOf = (
  events: ReadonlyArray<SessionEvent>,
  options?: LogOptions
): Map<string, Array<StoryStep>> => {
  const stories = new Map<string, Array<StoryStep>>()
  computeFates(events, options, undefined, (id, what, seq, fate) => {
    const steps = stories.get(id)
    const step: StoryStep = { what, seq, fate }
    if (steps === undefined) stories.set(id, [step])
    else steps.push(step)
  })
  return stories
}
