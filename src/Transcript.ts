/**
 * The transcript: a session log as people read it (DESIGN.md §12, §14). `fromEvents` turns the
 * log into entries that are exactly the `agent-loop transcript --json` line shapes of §14, in log
 * order:
 * - `{kind:"user"|"context", turn, step, id, text, source}` for each entered user-role message
 *   (`user` when `source.kind === "user"`, else `context`, with its producer in `source`),
 *   a DSH surface replacement (e.g. a compaction checkpoint) included;
 * - `{kind:"assistant", turn, step, text, interrupted?}` for each assistant message that has text
 *   or was interrupted (a response made only of tool calls shows as its `tool-call` entries);
 * - `{kind:"tool-call", turn, step, callId, name, arguments}`;
 * - `{kind:"tool-result", turn, step, callId, text, isError}`;
 * - `{kind:"turn-end", turn, reason}`.
 * `text` joins a message's text blocks with "\n" (images and reasoning are not part of it).
 * `render` prints entries as readable text (turn headers, `> ` for what the user typed,
 * `[context from plugin:x] ` for context, `→`/`←` for tool calls and results); `toJsonLines`
 * prints one JSON object a line. Works on our logs and DSH v0 logs alike; other event types are
 * skipped. One pass.
 *
 * @since 0.1.0
 */
import { escapeJson, escapeText } from "./internal/terminalText.js"
import type { ContentBlock, MessageSource, UserMessage } from "./Message.js"
import { textOf } from "./Message.js"
import type { AssistantMessageData, SessionEvent, ToolCallData, ToolResultData, TurnEndReason } from "./SessionEvent.js"

/**
 * A user-role message that entered a step: `user` when `source.kind === "user"`, else `context`
 * (DESIGN.md §14). `turn`/`step` are those of the open step (0 outside any).
 *
 * @since 0.1.0
 * @category models
 */
export interface MessageEntry {
  readonly kind: "user" | "context"
  readonly turn: number
  readonly step: number
  readonly id: string
  readonly text: string
  readonly source: MessageSource
}

/**
 * An assistant response's text (DESIGN.md §14); `interrupted: true` for a prefix kept at cancel.
 *
 * @since 0.1.0
 * @category models
 */
export interface AssistantEntry {
  readonly kind: "assistant"
  readonly turn: number
  readonly step: number
  readonly text: string
  readonly interrupted?: true | undefined
}

/**
 * A tool call; `arguments` is the raw JSON string as logged (DESIGN.md §14).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCallEntry {
  readonly kind: "tool-call"
  readonly turn: number
  readonly step: number
  readonly callId: string
  readonly name: string
  readonly arguments: string
}

/**
 * A tool result: the text of its content and whether it is an error (DESIGN.md §14).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolResultEntry {
  readonly kind: "tool-result"
  readonly turn: number
  readonly step: number
  readonly callId: string
  readonly text: string
  readonly isError: boolean
}

/**
 * The end of a turn with its reason as logged (DESIGN.md §6.4, §14).
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnEndEntry {
  readonly kind: "turn-end"
  readonly turn: number
  readonly reason: TurnEndReason
}

/**
 * One transcript entry: exactly one `transcript --json` line (DESIGN.md §14).
 *
 * @since 0.1.0
 * @category models
 */
export type Entry = MessageEntry | AssistantEntry | ToolCallEntry | ToolResultEntry | TurnEndEntry

const toolResultOf = (
  message: UserMessage
): { readonly callId: string | undefined; readonly block: ContentBlock | undefined } => {
  let block: ContentBlock | undefined
  for (const b of message.content) {
    if (b.type === "tool-result") {
      block = b
      break
    }
  }
  const fromSource = (message.source as { readonly callId?: unknown }).callId
  const callId = typeof fromSource === "string"
    ? fromSource
    : block !== undefined && block.type === "tool-result"
    ? block.toolCallId
    : undefined
  return { callId, block }
}

/**
 * The transcript entries of a log, in log order (DESIGN.md §12, §14). One pass.
 *
 * @since 0.1.0
 * @category projections
 */
export const fromEvents = (events: ReadonlyArray<SessionEvent>): Array<Entry> => {
  const out: Array<Entry> = []
  let turn = 0
  let step = 0
  for (const event of events) {
    switch (event.type) {
      case "turn/start": {
        turn = (event.data as { readonly turn: number }).turn
        step = 0
        break
      }
      case "step/start": {
        const data = event.data as { readonly turn: number; readonly step: number }
        turn = data.turn
        step = data.step
        break
      }
      case "user/message": {
        const message = event.data as UserMessage
        out.push({
          kind: message.source?.kind === "user" ? "user" : "context",
          turn,
          step,
          id: message.id,
          text: textOf(message.content ?? []),
          source: message.source
        })
        break
      }
      case "assistant/message": {
        const data = event.data as AssistantMessageData
        const text = textOf(data.message?.content ?? [])
        if (data.interrupted === true) {
          out.push({ kind: "assistant", turn: data.turn, step: data.step, text, interrupted: true })
        } else if (text !== "") {
          out.push({ kind: "assistant", turn: data.turn, step: data.step, text })
        }
        break
      }
      case "tool/call": {
        const data = event.data as ToolCallData
        out.push({
          kind: "tool-call",
          turn: data.turn,
          step: data.step,
          callId: data.callId,
          name: data.name,
          arguments: typeof data.arguments === "string" ? data.arguments : JSON.stringify(data.arguments)
        })
        break
      }
      case "tool/result": {
        const data = event.data as ToolResultData
        const { block, callId } = toolResultOf(data.message)
        const isError = block !== undefined && block.type === "tool-result" && block.isError !== undefined
          ? block.isError
          : data.error !== undefined
        out.push({
          kind: "tool-result",
          turn: data.turn,
          step: data.step,
          callId: callId ?? "",
          text: block !== undefined && block.type === "tool-result" ? textOf(block.content) : textOf(data.message.content),
          isError
        })
        break
      }
      case "turn/end": {
        const data = event.data as { readonly turn: number; readonly reason: TurnEndReason }
        out.push({ kind: "turn-end", turn: data.turn, reason: data.reason })
        break
      }
    }
  }
  return out
}

/**
 * The entries as JSON lines, one object a line, each ending with "\n" (DESIGN.md §14
 * `transcript --json`). Safe to print: the control, format and separator characters that
 * `JSON.stringify` leaves raw (C1, bidi, zero-width, U+2028) are written as `\uNNNN` escapes, so
 * each line still parses to its entry exactly.
 *
 * @since 0.1.0
 * @category rendering
 */
export const toJsonLines = (entries: ReadonlyArray<Entry>): string => {
  let out = ""
  for (const entry of entries) out += escapeJson(JSON.stringify(entry)) + "\n"
  return out
}

/**
 * A short label naming the producer of a context message (DESIGN.md §2, §14):
 * `plugin:<plugin>`, `tool:<callId>`, `hook:<hook>`, `session-reference:<sessionId>@<throughSeq>`,
 * or the bare kind for other producers; a string `form` is added in parentheses.
 *
 * @since 0.1.0
 * @category rendering
 */
export const sourceLabel = (source: MessageSource): string => {
  const s = source as { readonly [key: string]: unknown }
  const kind = typeof s.kind === "string" ? s.kind : "unknown"
  let label = kind
  if (typeof s.plugin === "string") label = `${kind}:${s.plugin}`
  else if (typeof s.hook === "string") label = `${kind}:${s.hook}`
  else if (typeof s.callId === "string") label = `${kind}:${s.callId}`
  else if (typeof s.sessionId === "string") {
    label = `${kind}:${s.sessionId}` + (typeof s.throughSeq === "number" ? `@${s.throughSeq}` : "")
  }
  if (typeof s.form === "string") label += ` (${s.form})`
  return label
}

/**
 * A turn end reason as words: `completed`, `max-tokens`, `blocked[: reason]`,
 * `error: CODE: message`, `aborted (kind)`, `interrupted`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const reasonLabel = (reason: TurnEndReason): string => {
  const r = reason as { readonly kind?: unknown; readonly [key: string]: unknown }
  switch (r.kind) {
    case "blocked":
      return typeof r.reason === "string" && r.reason !== "" ? `blocked: ${r.reason}` : "blocked"
    case "error": {
      const e = r.error as { readonly code?: unknown; readonly message?: unknown } | undefined
      const code = typeof e?.code === "string" ? e.code : "ERROR"
      return typeof e?.message === "string" ? `error: ${code}: ${e.message}` : `error: ${code}`
    }
    case "aborted": {
      const cause = r.reason as { readonly kind?: unknown } | undefined
      return typeof cause?.kind === "string" ? `aborted (${cause.kind})` : "aborted"
    }
    default:
      return typeof r.kind === "string" ? r.kind : "unknown"
  }
}

/** Prefixes the first line with `first` and every other line with `rest`. */
const block = (text: string, first: string, rest: string): string =>
  first + (text.includes("\n") ? text.split("\n").join("\n" + rest) : text)

/**
 * Human-readable text of the entries (DESIGN.md §14): a `── turn N ──` header whenever the turn
 * changes; `> text` for what the user typed; `[context from <producer>] text` for every other
 * user-role message, labelled by `sourceLabel`; assistant text as is (`[interrupted]` appended
 * for a kept prefix); `→ name(arguments)` for a tool call; `← text` (`← error: text`) for its
 * result; `turn N ended: <reason>` at a turn's end. Continuation lines are indented. The text
 * is safe to print: what could drive or disguise a terminal is shown escaped (`\x1b`, `\u202e`;
 * see `escapeControl`), newline and tab kept. The entries of `fromEvents` stay raw: escaping
 * belongs to rendering, and a program that prints entries itself escapes them.
 * Ends with "\n" unless there are no entries.
 *
 * @since 0.1.0
 * @category rendering
 */
export const render = (entries: ReadonlyArray<Entry>): string => {
  const lines: Array<string> = []
  let current = -1
  for (const entry of entries) {
    if (entry.turn !== current) {
      current = entry.turn
      if (entry.turn > 0) lines.push(`── turn ${entry.turn} ──`)
    }
    switch (entry.kind) {
      case "user":
        lines.push(block(entry.text, "> ", "> "))
        break
      case "context":
        lines.push(block(entry.text, `[context from ${sourceLabel(entry.source)}] `, "  "))
        break
      case "assistant":
        lines.push(entry.interrupted ? (entry.text === "" ? "[interrupted]" : `${entry.text} [interrupted]`) : entry.text)
        break
      case "tool-call":
        lines.push(block(`${entry.name}(${entry.arguments})`, "→ ", "  "))
        break
      case "tool-result":
        lines.push(block(entry.text, entry.isError ? "← error: " : "← ", "  "))
        break
      case "turn-end":
        lines.push(`turn ${entry.turn} ended: ${reasonLabel(entry.reason)}`)
        break
    }
  }
  return lines.length === 0 ? "" : lines.map(escapeControl).join("\n") + "\n"
}

/**
 * Makes visible what would drive or disguise a terminal, keeping newlines and tabs: C0 and C1
 * control characters (`\x1b` for ESC), format characters such as bidi overrides and isolates
 * and zero-width characters (`\u202e`, `\u200b`, `\ufeff`), and the line and paragraph
 * separators (`\u2028`). Log content is untrusted (model output, provider errors, other
 * people's logs) and must not drive the terminal. The rule of `render`, `agent-loop run`,
 * `check` and the chat (issue 13).
 *
 * @since 0.1.0
 * @category utils
 */
export const escapeControl = (text: string): string => escapeText(text)
