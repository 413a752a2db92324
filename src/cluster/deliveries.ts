/**
 * The deliveries of `AgentEntity`'s `followup`, `steer` and `inject` rpcs (§21): the message of a
 * payload, and what the log already says of its id (safe retries of an at-least-once delivery).
 */
import { Effect, Option } from "effect"
import type * as Agent from "../Agent.js"
import { DuplicateMessageId } from "../AgentError.js"
import * as IdGenerator from "../IdGenerator.js"
import { type ContentBlock, InvalidMessage, type MessageSource, UserMessage } from "../Message.js"

/** A delivery payload's message: text, or content with an optional id and source (`DeliveryMessage`). */
type Message =
  | string
  | {
    readonly id?: string | undefined
    readonly content: ReadonlyArray<ContentBlock>
    readonly source?: MessageSource | undefined
  }

/** A delivery payload: the message and its id. */
interface Payload {
  readonly messageId: string
  readonly message: Message
}

export type Kind = "followup" | "steer" | "inject"

/** Whether `event` is a splice that inserted message `id`. */
export const insertedHere = (event: { readonly type: string; readonly data: unknown }, id: string): boolean =>
  event.type === "agent/inbox/spliced" &&
  ((event.data as { inserted?: ReadonlyArray<{ id: string }> }).inserted ?? []).some((m) => m.id === id)

const INJECT_SOURCE = Object.freeze({ kind: "plugin", plugin: "cluster" })

/** The `UserMessage` of a delivery payload (validated and frozen by `UserMessage.make`). */
export const messageOf = (kind: Kind, payload: Payload) =>
  // The id is given: the generator is never asked.
  Effect.provideService(messageOfPayload(kind, payload), IdGenerator.IdGenerator, IdGenerator.random)

const messageOfPayload = (kind: Kind, payload: Payload) => {
  const m = payload.message
  if (payload.messageId === "") return Effect.fail(new InvalidMessage({ message: "the message id is empty", path: "id" }))
  if (typeof m === "string") {
    return UserMessage.make({ text: m, id: payload.messageId, source: kind === "inject" ? INJECT_SOURCE : undefined })
  }
  if (m.id !== undefined && m.id !== payload.messageId) {
    return Effect.fail(
      new InvalidMessage({ message: `the message's id ${m.id} is not the delivery's id ${payload.messageId}`, path: "id" })
    )
  }
  return UserMessage.make({
    content: m.content,
    id: payload.messageId,
    source: m.source ?? (kind === "inject" ? INJECT_SOURCE : undefined)
  })
}

/**
 * What the log says of a delivery of `message` as `kind`: undefined when its id was never
 * inserted; else the answer `{messageId}` (the same kind, content and source: a retry), or
 * `DuplicateMessageId` (the id used for another kind, other content or another source).
 */
export const fromLog = (
  agent: Agent.Agent,
  kind: Kind,
  message: UserMessage
): Effect.Effect<{ readonly messageId: string }, DuplicateMessageId> | undefined => {
  const logged = agent.deliveryOf(message.id)
  if (Option.isNone(logged)) return undefined
  const first = logged.value
  const differs = first.delivery !== kind
    ? `as a ${first.delivery}`
    : JSON.stringify(first.message.content) !== JSON.stringify(message.content) ||
        JSON.stringify(first.message.source) !== JSON.stringify(message.source)
    ? "with other content or source"
    : undefined
  return differs === undefined
    ? Effect.succeed({ messageId: message.id })
    : Effect.fail(
      new DuplicateMessageId({ message: `message id ${message.id} is already in the log ${differs}`, messageId: message.id })
    )
}
