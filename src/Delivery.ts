/**
 * Delivery records and fates (DESIGN.md §5.1, §12). `followup`/`steer`/`inject` return a
 * `Delivery { messageId, outcome }` once the splice is durable; `outcome` resolves when the
 * message's fate is decided and always equals `Delivery.fateOf(log, messageId)`.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import type { MessageId } from "./Message.js"

/**
 * Why a delivered message never entered a step (DESIGN.md §5.1, §12): `rejected` (claimed by a
 * turn that ended blocked), `failed` (… ended error), `canceled` (cleared or aborted by a
 * cancel), `disposed` (… by dispose), `interrupted` (… by a crash, found at repair),
 * `discarded` (removed by a plugin, or claimed and left out of the entered batch by a listener).
 *
 * @since 0.1.0
 * @category models
 */
export type DropReason = "rejected" | "failed" | "canceled" | "disposed" | "interrupted" | "discarded"

/**
 * A decided fate: `Entered {turn, step}` or `Dropped {reason}`.
 *
 * @since 0.1.0
 * @category models
 */
export type DeliveryOutcome =
  | { readonly _tag: "Entered"; readonly turn: number; readonly step: number }
  | { readonly _tag: "Dropped"; readonly reason: DropReason }

/**
 * A message's fate as the log tells it: pending, or decided.
 *
 * @since 0.1.0
 * @category models
 */
export type Fate = { readonly _tag: "Pending" } | DeliveryOutcome

/**
 * What a delivery method returns once its splice is durable (DESIGN.md §5.1).
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
 * Constructors of outcomes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const entered = (turn: number, step: number): DeliveryOutcome => ({ _tag: "Entered", turn, step })

/**
 * @since 0.1.0
 * @category constructors
 */
export const dropped = (reason: DropReason): DeliveryOutcome => ({ _tag: "Dropped", reason })

export { fateOf, fatesOf } from "./internal/fate.js"
