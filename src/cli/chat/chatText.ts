/**
 * How the chat bounds and escapes the text it shows (§14, §23): every string from the log or the
 * model is made safe for the terminal (`visible`, `oneLine`) and bounded (`shown`: a message's
 * first 8 KiB and 100 lines; `stream`: the streamed text's tail; `historyStart`: how much of a
 * resumed session's history is drawn), so that a message of megabytes costs the screen no more
 * than a small one. Used by `ChatModel` and the sub-agent progress (`children.ts`).
 */
import { escapeLine } from "../../internal/terminalText.js"
import type * as Transcript from "../../Transcript.js"
import * as TranscriptText from "../../TranscriptText.js"

/**
 * Makes control characters visible (`\x1b` for ESC, …), keeping newlines; tabs become two
 * spaces (Ink measures them as one column). Log content is untrusted and must not drive the
 * terminal (the rule of `TranscriptText.render`).
 */
export const visible = (text: string): string => TranscriptText.escapeControl(text.replace(/\t/g, "  "))

/** The most code points of a question's arguments the chat shows (`oneLine`). */
export const ARGS_SHOWN = 160

/**
 * `text` on one line for the terminal: its first `max` code points (then `…`), escaped as
 * `escapeLine` does (line breaks as `\n`, controls as `\x1b`, …). Reads at most about `2·max`
 * characters of `text`.
 */
export const oneLine = (text: string, max: number = ARGS_SHOWN): string => {
  const chars = Array.from(text.length > 2 * max + 2 ? text.slice(0, 2 * max + 2) : text)
  const cut = chars.length > max
  return escapeLine((cut ? chars.slice(0, max) : chars).join("")) + (cut ? "…" : "")
}

/**
 * The most of one message's text the chat shows: its first `SHOWN_LINES` lines and at most
 * `SHOWN_BYTES` bytes (UTF-8). Drawing a message of megabytes took Ink minutes with the event
 * loop blocked (no key, no signal handled: §23); the whole text stays in the log, which
 * `agent-loop transcript` prints.
 */
export const SHOWN_BYTES = 8192
/** See `SHOWN_BYTES`. */
export const SHOWN_LINES = 100

/** The lines a tool result or an injected context shows in the transcript (`shown`'s `maxLines`). */
export const SHOWN_RESULT_LINES = 12

/**
 * `text` as the chat shows it: cut to `maxLines` lines (default `SHOWN_LINES`) and `SHOWN_BYTES`
 * bytes (never inside a character), escaped (`visible`), and when cut followed by a line
 * `… 1,234 more lines not shown (56,789 bytes, see agent-loop transcript)` (the lines that start
 * after the cut, and the UTF-8 bytes left out; `the rest of the line` when the cut falls inside
 * the last line). Reads at most `SHOWN_BYTES` characters of `text` before deciding, then only
 * counts the line breaks of the rest (`indexOf`: about 1 ms for 4 MiB).
 */
export const shown = (text: string, maxLines: number = SHOWN_LINES): string => {
  let bytes = 0
  let lines = 0
  let i = 0
  while (i < text.length) {
    const c = text.charCodeAt(i)
    const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00
    const size = pair ? 4 : c < 0x80 ? 1 : c < 0x800 ? 2 : 3
    if (bytes + size > SHOWN_BYTES) break
    bytes += size
    i += pair ? 2 : 1
    if (c === 10 && ++lines === maxLines) break
  }
  if (i >= text.length) return visible(text)
  const atBreak = text.charCodeAt(i - 1) === 10
  const kept = atBreak ? text.slice(0, i - 1) : text.slice(0, i)
  // A line starts right after the cut when it falls on a line break, and after each later line
  // break that is not the last character.
  let hidden = atBreak ? 1 : 0
  for (let at = text.indexOf("\n", i); at !== -1 && at < text.length - 1; at = text.indexOf("\n", at + 1)) hidden++
  const left = (Buffer.byteLength(text, "utf8") - bytes).toLocaleString("en-US")
  const what = hidden === 0
    ? "the rest of the line"
    : `${hidden.toLocaleString("en-US")} more line${hidden === 1 ? "" : "s"}`
  return `${visible(kept)}\n… ${what} not shown (${left} bytes, see agent-loop transcript)`
}

/**
 * The most of a resumed session's history the chat draws at start: its last entries up to about
 * `HISTORY_BYTES` of shown text and at most `HISTORY_ENTRIES` entries, from the start of a turn.
 * Ink draws history in one synchronous pass: 500 turns of 8 KiB (4 MiB) took 14 s to be ready,
 * with no key or signal handled; 256 KiB of them 3.6 s, 64 KiB 2.1 s (a new chat: about 1 s).
 * Earlier entries are named in a notice (`agent-loop transcript` prints them).
 */
export const HISTORY_BYTES = 64 * 1024
/** See `HISTORY_BYTES`. */
export const HISTORY_ENTRIES = 500

/** An entry's share of the history budget: the text it shows (at most `SHOWN_BYTES`) and a line. */
const weight = (entry: Transcript.Entry): number => {
  const size = entry.kind === "tool-call"
    ? entry.name.length + entry.arguments.length
    : entry.kind === "turn-end"
    ? 0
    : entry.kind === "compaction" || entry.kind === "approval" || entry.kind === "session"
    ? 160
    : entry.kind === "subagent"
    ? 160 + (entry.text?.length ?? 0)
    : entry.text.length
  return Math.min(size, SHOWN_BYTES) + 80
}

/**
 * The index of the first history entry to draw (see `HISTORY_BYTES`): the longest tail within
 * the budget, moved forward to the start of a turn when that leaves something to draw.
 */
export const historyStart = (entries: ReadonlyArray<Transcript.Entry>): number => {
  let total = 0
  let first = entries.length
  while (first > 0 && entries.length - first < HISTORY_ENTRIES) {
    total += weight(entries[first - 1]!)
    if (total > HISTORY_BYTES) break
    first--
  }
  if (first === 0) return 0
  // Whole turns only (a tool result with its call), unless the last turn alone is over budget.
  let start = first
  while (start < entries.length && entries[start]!.turn === entries[first - 1]!.turn) start++
  return start < entries.length ? start : first
}

/** The streamed text kept for the live area (its last rows are shown): a tail of at most this many characters. */
const STREAM_KEPT = 16_384

/** Appends `piece` to streamed `text`, keeping the tail `lastRows` may show (appending to megabytes stays cheap). */
export const stream = (text: string, piece: string): string => {
  const all = text + visible(piece)
  return all.length > 2 * STREAM_KEPT ? all.slice(-STREAM_KEPT) : all
}

/** The first line of `text` (at most 1 KiB of it), as the chat shows it. */
export const firstLine = (text: string): string => {
  const head = text.slice(0, 1024)
  const nl = head.indexOf("\n")
  return visible(nl < 0 ? head : head.slice(0, nl))
}
