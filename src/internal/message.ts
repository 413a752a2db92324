/**
 * Messages the runtime builds and checks (§2): the one constructor of frozen
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
 * The tool result message of a call (§2): one `tool-result` block, source
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
 * Checks a `UserMessage` from outside before anything is logged (§2, §5.1): plain JSON
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

/**
 * The default of `maxMessageBytes` (§5.1): 8 MiB of JSON, room for an image of about
 * 6 MiB (base64 makes 4 bytes of 3) with its text, well within what a provider takes in one
 * request, and small enough that a session holds many before its history and requests get hard
 * to build.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024

/**
 * A lower and an upper bound of the UTF-8 bytes of a JSON value's text, from one walk that
 * reads string lengths only (no text is made): each UTF-16 code unit of a string or key is at
 * least 1 byte of JSON and at most 6 (`\u001f`, a lone surrogate); punctuation and literals are
 * bounded by their longest form (a number by 24 characters, `-1.7976931348623157e+308`).
 */
const bounds = { units: 0, extra: 0 }

const measure = (value: unknown): void => {
  switch (typeof value) {
    case "string":
      bounds.units += value.length
      bounds.extra += 2
      return
    case "number":
      bounds.extra += 24
      return
    case "object": {
      if (value === null) {
        bounds.extra += 4
        return
      }
      if (Array.isArray(value)) {
        bounds.extra += 2 + value.length
        for (let i = 0; i < value.length; i++) measure(value[i])
        return
      }
      bounds.extra += 2
      for (const key in value) {
        const item: unknown = (value as Record<string, unknown>)[key]
        if (item === undefined) continue
        bounds.units += key.length
        bounds.extra += 4
        measure(item)
      }
      return
    }
    default:
      bounds.extra += 5
  }
}

/**
 * Why a checked message is over `limit` (§5.1: `maxMessageBytes`), or undefined when it
 * is not. Its size is the UTF-8 bytes of its JSON text (`JSON.stringify(message)`: what its
 * splice holds in the log; image data counts as its base64 text). The exact size is computed
 * only when the bounds of one walk leave it open (a message between `limit / 6` and `limit`), so
 * a small message costs one walk and a huge one is refused without its text being made.
 */
export const oversize = (message: UserMessage, limit: number): string | undefined => {
  if (limit === Infinity) return undefined
  bounds.units = 0
  bounds.extra = 0
  measure(message)
  const { extra, units } = bounds
  if (6 * units + extra <= limit) return undefined
  if (units > limit) {
    return `is at least ${units} bytes of JSON, over the limit of ${limit} bytes (maxMessageBytes)`
  }
  const bytes = Buffer.byteLength(JSON.stringify(message), "utf8")
  return bytes > limit ? `is ${bytes} bytes of JSON, over the limit of ${limit} bytes (maxMessageBytes)` : undefined
}

/**
 * The `InvalidMessage` of a message over `limit` (`oversize`), or undefined; nothing is logged
 * (§5.1).
 */
export const tooLarge = (message: UserMessage, limit: number): InvalidMessage | undefined => {
  const why = oversize(message, limit)
  return why === undefined ? undefined : new InvalidMessage({ message: `message ${why}`, path: "message" })
}

/** The `InvalidMessage` of a failed check (`checkUserMessage`'s `InvalidJson`, or anything thrown). */
export const invalidMessage = (e: unknown): InvalidMessage =>
  e instanceof InvalidJson
    ? new InvalidMessage({ message: `message ${e.message}`, path: e.path })
    : new InvalidMessage({ message: String(e), path: "message" })

/** Whether a message carries tool results (a user-role message with a `tool-result` block). */
export const isToolResultMessage = (m: Message): boolean => m.role === "user" && m.content.some((b) => b.type === "tool-result")
