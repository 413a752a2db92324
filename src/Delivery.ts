/**
 * Delivery records and fates (DESIGN.md §5.1, §12). `followup`/`steer`/`inject` return a
 * `Delivery { messageId, outcome }` once the splice is durable; `outcome` resolves when the
 * message's fate is decided and always equals `Delivery.fateOf(log, messageId)`.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import type { DeliveryOutcome, DropReason } from "./internal/fate.js"
import type { MessageId } from "./Message.js"

/**
 * `DeliveryOutcome` (`Entered {turn, step}` | `Dropped {reason}`), `DropReason` and `Fate`
 * (`Pending` | an outcome), as defined with the fate rules of DESIGN.md §12.
 *
 * @since 0.1.0
 * @category models
 */
export type { DeliveryOutcome, DropReason, Fate } from "./internal/fate.js"

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
export const entered = (turn: number, step: number): DeliveryOutcome => Entered(turn, step)

/**
 * @since 0.1.0
 * @category constructors
 */
export const dropped = (reason: DropReason): DeliveryOutcome => Dropped(reason)

import { Dropped, Entered } from "./internal/fate.js"

export { fateOf, fatesOf } from "./internal/fate.js"
