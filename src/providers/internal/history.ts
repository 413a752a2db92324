/**
 * The order in which every provider adapter sends a request's history (§11): the
 * messages in log order, except that an assistant message's tool results follow it directly,
 * one per call, ahead of the user-role messages logged after it (those follow the last result);
 * a call without a result (before the next assistant message or the end of the history) gets a
 * synthetic error result (`MISSING_RESULT`); a result that answers no call of the assistant
 * message before it, or answers one a second time, is sent as user text (`strayResultText`).
 * Each adapter converts its messages once (`convertOnce`) into the shape below and says how each
 * piece is sent (`Wire`); `orderHistory` does one pass with one lookup per message. Shared by
 * `OpenAICompat`, `Anthropic` and `AiBridge`.
 */
import { type ContentBlock, type Message, textOf, type ToolResultBlock } from "../../Message.js"
import { perObject } from "./wire.js"

/**
 * Text of the synthetic error result every adapter sends for an assistant tool call whose
 * result the history lacks, so that no request holds an orphan call (§11; a log
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
): (message: Message) => C =>
  perObject((message: Message) => message.role === "assistant" ? assistant(message.content) : user(message.content))

/** An assistant tool call, as the history order needs it. */
export interface Call {
  readonly id: string
  readonly name: string
}

/**
 * A message as converted by an adapter: an assistant message (`message` undefined when it has
 * nothing to send) with its calls, or a user-role message with its tool results and the rest
 * (`message` undefined when there is none).
 */
export type Converted<A, R, U> =
  | { readonly _tag: "assistant"; readonly message: A | undefined; readonly calls: ReadonlyArray<Call> }
  | { readonly _tag: "user"; readonly results: ReadonlyArray<R>; readonly message: U | undefined }

/** How one adapter sends the pieces of a history, each as an `O`. */
export interface Wire<A, R, U, O> {
  /** The message's converted form; `undefined` leaves it out, as if it were not logged. */
  readonly convert: (message: Message) => Converted<A, R, U> | undefined
  readonly callId: (result: R) => string
  readonly assistant: (message: A) => O
  /** A result that answers `call`. */
  readonly result: (result: R, call: Call) => O
  /** The synthetic error result of a call that has none. */
  readonly missing: (call: Call) => O
  /** A result that answers no call, as user text. */
  readonly stray: (result: R) => O
  readonly user: (message: U) => O
}

/**
 * Appends the history's pieces to `out`, in the order above, and returns `out`. The results of
 * an assistant message come in one of the two orders the adapters have always sent:
 * - `"call"` (`Anthropic`, `AiBridge`): in the order of the calls, once the next assistant
 *   message or the end comes; a call id is answered once (a second result for it is stray) and
 *   its result stands for every call with that id.
 * - `"log"` (`OpenAICompat`): each result as it comes, answering one open call of its id; once
 *   no call is open (after the rest of the message that answered the last one), the pieces held
 *   back follow.
 * In both, a user-role piece logged while calls are owed is held back until then, after the
 * missing results; one logged when none are owed is sent at once.
 */
export const orderHistory = <A, R, U, O>(
  messages: ReadonlyArray<Message>,
  wire: Wire<A, R, U, O>,
  order: "call" | "log",
  out: Array<O>
): Array<O> => {
  const byCall = order === "call"
  let owed: Array<Call> = [] // the calls of the last assistant message ("log": those still open)
  let results: Map<string, O> | undefined // "call": their results, by call id
  let held: Array<O> | undefined // user-role pieces held back, in log order
  const close = () => {
    for (const call of owed) out.push(results?.get(call.id) ?? wire.missing(call))
    for (const piece of held ?? []) out.push(piece)
    owed = []
    results = undefined
    held = undefined
  }
  const follow = (piece: O) => {
    if (owed.length === 0) out.push(piece)
    else (held ??= []).push(piece)
  }
  for (const message of messages) {
    const c = wire.convert(message)
    if (c === undefined) continue
    if (c._tag === "assistant") {
      close()
      if (c.message !== undefined) {
        out.push(wire.assistant(c.message))
        owed = c.calls.slice()
      }
      continue
    }
    for (const result of c.results) {
      const id = wire.callId(result)
      if (byCall) {
        const call = results?.has(id) === true ? undefined : owed.find((x) => x.id === id)
        if (call !== undefined) (results ??= new Map()).set(id, wire.result(result, call))
        else follow(wire.stray(result))
      } else {
        const i = owed.findIndex((x) => x.id === id)
        if (i >= 0) out.push(wire.result(result, owed.splice(i, 1)[0]!))
        else follow(wire.stray(result))
      }
    }
    if (c.message !== undefined) follow(wire.user(c.message))
    if (!byCall && owed.length === 0) close()
  }
  close()
  return out
}

/**
 * A user-role message's blocks, split: its tool results (`result` of each, in order) and its
 * other content (`part` of each non-empty text block and each image block, in order).
 */
export const splitUser = <R, P>(
  content: ReadonlyArray<ContentBlock>,
  result: (block: ToolResultBlock) => R,
  part: (block: Extract<ContentBlock, { readonly type: "text" | "image" }>) => P
): { readonly results: Array<R>; readonly parts: Array<P> } => {
  const results: Array<R> = []
  const parts: Array<P> = []
  for (const block of content) {
    if (block.type === "tool-result") results.push(result(block))
    else if (block.type === "image" || (block.type === "text" && block.text !== "")) parts.push(part(block))
  }
  return { results, parts }
}
