/**
 * The agent's errors (§5.1, §9): what `followup`/`steer`/`inject`, the plugin inbox
 * operations, `cancel` and `appendEvent` fail with. Nothing is logged when one is returned.
 * Each is a `Schema.TaggedError` with a readable `message`; `is*` guards and the `DeliveryError`
 * union are here too (as `@effect/ai`'s `AiError` module does).
 *
 * @since 0.1.0
 */
import { Predicate, Schema } from "effect"
import type { InvalidMessage } from "./Message.js"
import type { SessionWriteError } from "./SessionLog.js"

/**
 * The agent was disposed: deliveries fail from the moment `dispose` is called (§9), or
 * released (`agent.release`, passivation): then the message says so, and the session takes
 * deliveries again once it is resumed (`Agent.resume`).
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentDisposed extends Schema.TaggedError<AgentDisposed>()("AgentDisposed", {
  message: Schema.String,
  agentId: Schema.String
}) {}

/**
 * A message id that is pending or was ever logged in this session (§2, §4).
 *
 * @since 0.1.0
 * @category errors
 */
export class DuplicateMessageId extends Schema.TaggedError<DuplicateMessageId>()("DuplicateMessageId", {
  message: Schema.String,
  messageId: Schema.String
}) {}

/**
 * A plugin operation (`replace`, `remove`) named a message that is not pending (§4).
 *
 * @since 0.1.0
 * @category errors
 */
export class MessageNotPending extends Schema.TaggedError<MessageNotPending>()("MessageNotPending", {
  message: Schema.String,
  messageId: Schema.String
}) {}

/**
 * `agent.outcome(messageId)` named an id this session never delivered: no `followup`, `steer`,
 * `inject`, `replace` or tool context ever inserted it into the inbox (§5.1, §12; an
 * assistant message, a tool result or a message a pre-step added has an id but no fate).
 *
 * @since 0.1.0
 * @category errors
 */
export class MessageNotFound extends Schema.TaggedError<MessageNotFound>()("MessageNotFound", {
  message: Schema.String,
  messageId: Schema.String
}) {}

/**
 * `agent.approve` / `agent.reject` named a question that is not open (§26 rule 5): never asked
 * in this session, already decided (of two decisions at once, the second gets this), or closed
 * by a cancel. Nothing is appended.
 *
 * @since 0.1.0
 * @category errors
 */
export class ApprovalNotOpen extends Schema.TaggedError<ApprovalNotOpen>()("ApprovalNotOpen", {
  message: Schema.String,
  approvalId: Schema.String
}) {}

/**
 * A standalone plugin event with a core type, a type without a `/`, or non-JSON data
 * (`appendEvent`, §3.2); a cancel cause that is not plain JSON with a string `kind`.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidEvent extends Schema.TaggedError<InvalidEvent>()("InvalidEvent", {
  message: Schema.String
}) {}

/**
 * Errors of the delivery methods (§5.1): a message that is not plain JSON or not a
 * `UserMessage` (`InvalidMessage`), an id already used, a disposed agent, a store failure.
 *
 * @since 0.1.0
 * @category errors
 */
export type DeliveryError = InvalidMessage | DuplicateMessageId | AgentDisposed | SessionWriteError

/**
 * Every error of this module.
 *
 * @since 0.1.0
 * @category errors
 */
export type AgentError =
  | AgentDisposed
  | DuplicateMessageId
  | MessageNotPending
  | MessageNotFound
  | InvalidEvent
  | ApprovalNotOpen

/**
 * @since 0.1.0
 * @category guards
 */
export const isAgentDisposed = (u: unknown): u is AgentDisposed => Predicate.isTagged(u, "AgentDisposed")

/**
 * @since 0.1.0
 * @category guards
 */
export const isDuplicateMessageId = (u: unknown): u is DuplicateMessageId => Predicate.isTagged(u, "DuplicateMessageId")

/**
 * @since 0.1.0
 * @category guards
 */
export const isMessageNotPending = (u: unknown): u is MessageNotPending => Predicate.isTagged(u, "MessageNotPending")

/**
 * @since 0.1.0
 * @category guards
 */
export const isMessageNotFound = (u: unknown): u is MessageNotFound => Predicate.isTagged(u, "MessageNotFound")

/**
 * @since 0.1.0
 * @category guards
 */
export const isApprovalNotOpen = (u: unknown): u is ApprovalNotOpen => Predicate.isTagged(u, "ApprovalNotOpen")

/**
 * @since 0.1.0
 * @category guards
 */
export const isInvalidEvent = (u: unknown): u is InvalidEvent => Predicate.isTagged(u, "InvalidEvent")

/**
 * Whether `u` is an error of the delivery methods (`DeliveryError`).
 *
 * @since 0.1.0
 * @category guards
 */
export const isDeliveryError = (u: unknown): u is DeliveryError =>
  Predicate.isTagged(u, "InvalidMessage") || Predicate.isTagged(u, "DuplicateMessageId") ||
  Predicate.isTagged(u, "AgentDisposed") || Predicate.isTagged(u, "SessionStoreError") ||
  Predicate.isTagged(u, "SessionFenced")
