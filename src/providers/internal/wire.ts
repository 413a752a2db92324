/**
 * Tolerant reading of foreign JSON for the provider adapters: a field of an unexpected type is
 * ignored rather than failing the response; and the texts every adapter sends the same way.
 * Shared by `OpenAICompat`, `Anthropic` and `AiBridge`.
 */
import { type ContentBlock, type Message, textOf, type ToolResultBlock } from "../../Message.js"

/** A plain JSON object (not an array, not `null`). */
export const isRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** A non-empty string, else `undefined`. */
export const nonEmpty = (u: unknown): string | undefined => typeof u === "string" && u !== "" ? u : undefined

/** A finite number, else `undefined`. */
export const num = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined

/** The parsed JSON, or the text itself when it is not JSON. */
export const parseJsonOr = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** `s` cut to `n` code units, with "…" when cut. */
export const truncate = (s: string, n: number): string => s.length > n ? s.slice(0, n) + "…" : s

/** A numeric setting of `ModelRequest.settings` (`maxTokens`, `temperature`, `topP`). */
export const numberSetting = (
  settings: { readonly [key: string]: unknown } | undefined,
  key: string
): number | undefined => {
  const value = settings?.[key]
  return typeof value === "number" ? value : undefined
}

/**
 * Text of the synthetic error result every adapter sends for an assistant tool call whose
 * result the history lacks, so that no request holds an orphan call (DESIGN.md §11; a log
 * repaired after a crash normally holds a `TOOL_OUTCOME_UNKNOWN` result already, §10).
 */
export const MISSING_RESULT = "No result was recorded for this tool call: its outcome is unknown. " +
  "Do not assume it ran or did not run; check before calling it again."

/**
 * The user text every adapter sends for a tool result that answers no call of the assistant
 * message before it (a hand-edited or foreign log): a provider rejects a result without its call.
 */
export const strayResultText = (block: ToolResultBlock): string =>
  `Result of tool call ${block.toolCallId}${block.isError === true ? " (error)" : ""}: ${textOf(block.content)}`

/**
 * A message's provider form, converted once per message object (messages are frozen; a step
 * converts only the messages it has not seen): `assistant` for assistant messages, `user` for
 * the others.
 */
export const convertOnce = <C>(
  assistant: (content: ReadonlyArray<ContentBlock>) => C,
  user: (content: ReadonlyArray<ContentBlock>) => C
): (message: Message) => C => {
  const cache = new WeakMap<Message, C>()
  return (message) => {
    let c = cache.get(message)
    if (c === undefined) {
      c = message.role === "assistant" ? assistant(message.content) : user(message.content)
      cache.set(message, c)
    }
    return c
  }
}
