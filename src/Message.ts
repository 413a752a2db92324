/**
 * Messages: the one identified, deep-frozen, plain-JSON shape for everything model-facing
 * (§2). A `UserMessage` carries direct prompts, steering, injected context, pre-step
 * additions and tool contexts alike; its `source` names the producer. There is no context
 * envelope and no prompt prefix.
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"
import { IdGenerator } from "./IdGenerator.js"
import { flatten as flattenString } from "./internal/flat.js"
import { checkJson, InvalidJson } from "./internal/json.js"

/**
 * A message id, unique per session (§2).
 *
 * @since 0.1.0
 * @category models
 */
export const MessageId = Schema.String.pipe(Schema.brand("MessageId"))
/**
 * @since 0.1.0
 * @category models
 */
export type MessageId = typeof MessageId.Type

/**
 * `text {text}` content block.
 *
 * @since 0.1.0
 * @category models
 */
export const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
/**
 * `image {mediaType, data}` content block; `data` is base64 (§2; §16, point 8).
 *
 * @since 0.1.0
 * @category models
 */
export const ImageBlock = Schema.Struct({
  type: Schema.Literal("image"),
  mediaType: Schema.String,
  data: Schema.String
})
/**
 * `reasoning {text, providerState?}`; `providerState` is opaque data a provider needs sent back.
 *
 * @since 0.1.0
 * @category models
 */
export const ReasoningBlock = Schema.Struct({
  type: Schema.Literal("reasoning"),
  text: Schema.String,
  providerState: Schema.optional(Schema.Unknown)
})
/**
 * `tool-call {id, name, arguments}`; `arguments` is the provider's raw JSON string.
 *
 * @since 0.1.0
 * @category models
 */
export const ToolCallBlock = Schema.Struct({
  type: Schema.Literal("tool-call"),
  id: Schema.String,
  name: Schema.String,
  arguments: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export type ContentBlock =
  | typeof TextBlock.Type
  | typeof ImageBlock.Type
  | typeof ReasoningBlock.Type
  | typeof ToolCallBlock.Type
  | ToolResultBlock

/**
 * `tool-result {toolCallId, content, isError?}`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolResultBlock {
  readonly type: "tool-result"
  readonly toolCallId: string
  readonly content: ReadonlyArray<ContentBlock>
  readonly isError?: boolean | undefined
}

/**
 * Schema of one content block (§2).
 *
 * @since 0.1.0
 * @category models
 */
export const ContentBlock: Schema.Schema<ContentBlock> = Schema.Union(
  TextBlock,
  ImageBlock,
  ReasoningBlock,
  ToolCallBlock,
  Schema.Struct({
    type: Schema.Literal("tool-result"),
    toolCallId: Schema.String,
    content: Schema.Array(Schema.suspend((): Schema.Schema<ContentBlock> => ContentBlock)),
    isError: Schema.optional(Schema.Boolean)
  })
)

/**
 * The producer of a message: an open union keyed by `kind`. Unknown kinds and fields are
 * preserved (§2): `{kind:"user"}`, `{kind:"plugin", plugin, form?}`,
 * `{kind:"tool", callId}`, `{kind:"hook", hook}`,
 * `{kind:"session-reference", sessionId, throughSeq}`, `{kind:"model", provider, model}`.
 *
 * @since 0.1.0
 * @category models
 */
export const MessageSource = Schema.Struct(
  { kind: Schema.String },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)
/**
 * @since 0.1.0
 * @category models
 */
export type MessageSource = typeof MessageSource.Type

/** `{ id, role, content, source }`: the one shape of both roles (§2). */
const messageSchema = <const Role extends "user" | "assistant">(role: Role) =>
  Schema.Struct({ id: MessageId, role: Schema.Literal(role), content: Schema.Array(ContentBlock), source: MessageSource })

/**
 * `{ id, role: "user", content, source }` (§2).
 *
 * @since 0.1.0
 * @category models
 */
export const UserMessageSchema = messageSchema("user")
/**
 * @since 0.1.0
 * @category models
 */
export type UserMessage = typeof UserMessageSchema.Type

/**
 * `{ id, role: "assistant", content, source: {kind:"model", …} }` (§2).
 *
 * @since 0.1.0
 * @category models
 */
export const AssistantMessageSchema = messageSchema("assistant")
/**
 * @since 0.1.0
 * @category models
 */
export type AssistantMessage = typeof AssistantMessageSchema.Type

/**
 * A model-visible message of the history: a user-role message (direct, context or tool result)
 * or an assistant message (§12).
 *
 * @since 0.1.0
 * @category models
 */
export type Message = UserMessage | AssistantMessage

/**
 * A message's content or source is not plain JSON (a function, a cycle, a non-finite number,
 * `undefined` in an array, a class instance): nothing is logged (§5.1).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidMessage extends Schema.TaggedError<InvalidMessage>()("InvalidMessage", {
  message: Schema.String,
  path: Schema.String
}) {}

/**
 * Input to `UserMessage.make`: either `text` (one text block) or explicit `content` blocks,
 * and the producer's `source` (default `{kind:"user"}`). `id` overrides the `IdGenerator`.
 *
 * @since 0.1.0
 * @category models
 */
export type UserMessageInput =
  & ({ readonly text: string; readonly content?: undefined } | {
    readonly content: ReadonlyArray<ContentBlock>
    readonly text?: undefined
  })
  & { readonly source?: MessageSource | undefined; readonly id?: string | undefined }

const USER_SOURCE: MessageSource = Object.freeze({ kind: "user" })

/**
 * Builds a deep-frozen `UserMessage` from plain data (no validation cost beyond one JSON walk).
 * Fails with `InvalidMessage` when content or source is not plain JSON.
 */
const makeUserMessage = (
  input: UserMessageInput
): Effect.Effect<UserMessage, InvalidMessage, IdGenerator> =>
  Effect.flatMap(
    input.id !== undefined ? Effect.succeed(input.id) : IdGenerator.next,
    (id) =>
      Effect.try({
        try: () => freezeUserMessage(id, input),
        catch: (e) =>
          e instanceof InvalidJson
            ? new InvalidMessage({ message: `message ${e.message}`, path: e.path })
            : new InvalidMessage({ message: String(e), path: "" })
      })
  )

const freezeUserMessage = (id: string, input: UserMessageInput): UserMessage => {
  const content: ReadonlyArray<ContentBlock> = input.text !== undefined
    ? [{ type: "text", text: input.text }]
    : input.content ?? []
  if (input.text !== undefined && typeof input.text !== "string") {
    throw new InvalidJson("text must be a string", "text")
  }
  const source = input.source === undefined ? USER_SOURCE : input.source
  if (source === null || typeof source !== "object" || typeof source.kind !== "string") {
    throw new InvalidJson("source must be an object with a string kind", "source")
  }
  return Object.freeze({
    id: flatten(id) as MessageId,
    role: "user" as const,
    content: checkJson(content, "content") as ReadonlyArray<ContentBlock>,
    source: checkJson(source, "source") as MessageSource
  })
}

/**
 * Returns the same string, flattened in place: a kept id retains no tree of concatenations
 * (a `crypto.randomUUID()` is ~480 bytes before, ~58 after) (§2).
 *
 * @since 0.1.0
 */
export const flatten: (s: string) => string = flattenString

/**
 * The `UserMessage` constructors: `make` (Effect, requires `IdGenerator`; fails with
 * `InvalidMessage`) and `schema`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const UserMessage = {
  schema: UserMessageSchema,
  make: makeUserMessage
} as const

/**
 * Joins the text blocks of a message's content with "\n".
 *
 * @since 0.1.0
 */
export const textOf = (content: ReadonlyArray<ContentBlock>): string => {
  let out = ""
  let first = true
  for (const block of content) {
    if (block.type === "text") {
      out = first ? block.text : out + "\n" + block.text
      first = false
    }
  }
  return out
}
