/**
 * Text made safe for a terminal: the one rule every print site of the CLI and the chat follows
 * for text that comes from a log, a model, a provider or a file name (§23). Such text is
 * untrusted and must neither drive the terminal (ESC and the other C0/C1 control characters
 * start escape sequences: clear the screen, set the title, move the cursor) nor hide or reorder
 * what is shown (bidi overrides and isolates, zero-width characters, line and paragraph
 * separators).
 *
 * Escaped, as visible text: every code point of the Unicode categories `Cc` (C0 and C1 controls,
 * DEL), `Cf` (format characters: U+200B–U+200F, U+202A–U+202E, U+2060–U+2069, U+FEFF, U+00AD,
 * the tag characters U+E0000–U+E007F, …), `Zl` (U+2028) and `Zp` (U+2029). Below U+0100 as
 * `\xNN` (`\x1b` for ESC), else as `\uNNNN` (`\u202e`), astral ones as `\u{NNNNN}`; lowercase
 * hex. Nothing else changes (a backslash is not doubled: the result is for people to read, not
 * to parse back). Linear in the length of the text.
 *
 * - `escapeText`: multi-line text (a transcript, a message, a notice): newline and tab are kept.
 * - `escapeLine`: one line (an error line, an id, a path): newline and tab are escaped too, as
 *   `\n` and `\t`.
 * - `escapeJson`: a JSON text (made by `JSON.stringify`, which escapes C0 but not the others):
 *   the same code points as JSON `\uNNNN` escapes (surrogate pairs for astral ones), so that the
 *   line decodes to the same value and is safe to print.
 * - `terminalConsole`: a `Console` that applies `escapeText` to every string it prints, the CLI's
 *   net under its print sites (the logger writes through it too). Escaping is idempotent (an
 *   escaped text has nothing left to escape), so text escaped at its print site passes unchanged.
 *
 * @since 0.1.0
 */

import { type Console } from "effect"

/** The code points this module escapes (see above), one at a time (the `u` flag: astral ones whole). */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu

const hex = (code: number, width: number): string => code.toString(16).padStart(width, "0")

/** The visible form of one unsafe code point: `\xNN`, `\uNNNN` or `\u{NNNNN}`. */
const visible = (c: string): string => {
  const code = c.codePointAt(0)!
  return code < 0x100 ? `\\x${hex(code, 2)}` : code <= 0xffff ? `\\u${hex(code, 4)}` : `\\u{${hex(code, 5)}}`
}

const keepLayout = (c: string): string => (c === "\n" || c === "\t" ? c : visible(c))
const oneLine = (c: string): string => (c === "\n" ? "\\n" : c === "\t" ? "\\t" : visible(c))

/**
 * Multi-line text safe for a terminal: unsafe code points escaped (`\x1b`, `\u202e`), newline and
 * tab kept.
 *
 * @since 0.1.0
 */
export const escapeText = (text: string): string => text.replace(UNSAFE, keepLayout)

/**
 * One line safe for a terminal: unsafe code points escaped, newline and tab as `\n` and `\t`.
 *
 * @since 0.1.0
 */
export const escapeLine = (text: string): string => text.replace(UNSAFE, oneLine)

/** Code points `JSON.stringify` leaves raw that a terminal must not receive. */
const UNSAFE_IN_JSON = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}]/gu

const jsonEscape = (c: string): string => {
  let out = ""
  // UTF-16 code units: an astral code point becomes its surrogate pair, as JSON spells it.
  for (let i = 0; i < c.length; i++) out += `\\u${hex(c.charCodeAt(i), 4)}`
  return out
}

/**
 * A JSON text safe for a terminal and equal in value: unsafe code points as `\uNNNN` escapes.
 * `json` must be the output of `JSON.stringify` (such code points occur only inside its strings).
 *
 * @since 0.1.0
 */
export const escapeJson = (json: string): string => json.replace(UNSAFE_IN_JSON, jsonEscape)

const safe = (args: ReadonlyArray<unknown>): Array<unknown> =>
  args.map((arg) => (typeof arg === "string" ? escapeText(arg) : arg))

/**
 * `base` with `escapeText` applied to every string argument of what prints text (`log`, `info`,
 * `warn`, `error`, `debug`, `trace`), in the effectful methods and in `unsafe` (which the
 * default logger calls) alike; other arguments and methods are `base`'s.
 *
 * @since 0.1.0
 */
export const terminalConsole = (base: Console.Console): Console.Console => {
  const unsafe = base.unsafe
  return {
    ...base,
    log: (...args) => base.log(...safe(args)),
    info: (...args) => base.info(...safe(args)),
    warn: (...args) => base.warn(...safe(args)),
    error: (...args) => base.error(...safe(args)),
    debug: (...args) => base.debug(...safe(args)),
    trace: (...args) => base.trace(...safe(args)),
    unsafe: {
      ...unsafe,
      log: (...args) => unsafe.log(...safe(args)),
      info: (...args) => unsafe.info(...safe(args)),
      warn: (...args) => unsafe.warn(...safe(args)),
      error: (...args) => unsafe.error(...safe(args)),
      debug: (...args) => unsafe.debug(...safe(args)),
      trace: (...args) => unsafe.trace(...safe(args))
    }
  }
}
