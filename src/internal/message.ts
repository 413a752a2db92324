/**
 * Messages the runtime builds and checks (DESIGN.md §2): the one constructor of frozen
 * `UserMessage` literals from parts that are JSON by construction (a string prompt, a tool
 * result, a repair closer, a simulator's text), and the one check of a `UserMessage` from
 * outside (a caller, a listener, a tool's context) before anything is logged.
 */
import {
  type ContentBlock,
  InvalidMessage,
  type Message,
  type MessageId,
  type MessageSource,
  type UserMessage
} from "../Message.js"
import { checkJson, InvalidJson } from "./json.js"
import { isUserMessageShape } from "./logCodec.js"

/**
 * A frozen `UserMessage` from parts the runtime built (JSON by construction: nothing is walked).
 * `content` and `source` are frozen one level; pass frozen blocks.
 */
export const userMessage = (id: string, content: ReadonlyArray<ContentBlock>, source: MessageSource): UserMessage =>
  Object.freeze({
    id: id as MessageId,
    role: "user" as const,
    content: Object.isFrozen(content) ? content : Object.freeze(content),
    source: Object.isFrozen(source) ? source : Object.freeze(source)
  })

/** A frozen text block. */
export const textBlock = (text: string): ContentBlock => Object.freeze({ type: "text" as const, text })

/** A frozen `UserMessage` of one text block. */
export const textMessage = (id: string, text: string, source: MessageSource): UserMessage =>
  userMessage(id, [textBlock(text)], source)

/**
 * The tool result message of a call (DESIGN.md §2): one `tool-result` block, source
 * `{kind:"tool", callId}`. `content` must be checked or built JSON.
 */
export const toolResultMessage = (
  id: string,
  callId: string,
  content: ReadonlyArray<ContentBlock>,
  isError: boolean
): UserMessage =>
  userMessage(
    id,
    [Object.freeze({ type: "tool-result" as const, toolCallId: callId, content: Object.freeze(content), isError })],
    { kind: "tool", callId }
  )

/**
 * Checks a `UserMessage` from outside before anything is logged (DESIGN.md §2, §5.1): plain JSON
 * (deep-frozen in place; frozen or not, every part is checked) and the shape the log reader
 * accepts (string id, role `"user"`, known content blocks, a source with a string `kind`), so
 * that every logged message reads back. Throws `InvalidJson` naming the part under `path`.
 */
export const checkUserMessage = (message: unknown, path: string): UserMessage => {
  checkJson(message, path)
  if (!isUserMessageShape(message)) {
    throw new InvalidJson("is not a UserMessage (string id, role \"user\", content blocks, source with a string kind)", path)
  }
  return message as UserMessage
}

/** The `InvalidMessage` of a failed check (`checkUserMessage`'s `InvalidJson`, or anything thrown). */
export const invalidMessage = (e: unknown): InvalidMessage =>
  e instanceof InvalidJson
    ? new InvalidMessage({ message: `message ${e.message}`, path: e.path })
    : new InvalidMessage({ message: String(e), path: "message" })

/** Whether a message carries tool results (a user-role message with a `tool-result` block). */
export const isToolResultMessage = (m: Message): boolean => m.role === "user" && m.content.some((b) => b.type === "tool-result")
