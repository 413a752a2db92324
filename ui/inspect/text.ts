/**
 * Text for the inspector page: log content (model output, tool results, message text) is shown
 * as text, and this module makes the characters that would not show honestly visible. Pure
 * functions, no DOM: the page's `dom.ts` applies `visible` to every string it shows.
 */

/**
 * Characters shown as a `⟨U+XXXX⟩` token: C0 and C1 control characters but `\n` and `\t`, DEL;
 * the bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which could reorder
 * the text around them; and invisible format characters (U+200B–U+200D, U+2028, U+2029,
 * U+2060–U+2064, U+FEFF).
 */
// eslint-disable-next-line no-control-regex
const hidden = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u061C\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g

/** `s` with each hidden character (see above) replaced by a visible token, e.g. `⟨U+202E⟩`. */
export const visible = (s: string): string =>
  s.replace(hidden, (c) => `⟨U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`)

/** `s` on one line: each run of whitespace (newlines, tabs) becomes one space. */
export const oneLine = (s: string): string => s.replace(/\s+/g, " ").trim()

/** Milliseconds since the session's start as `m:ss.mmm` (minutes unbounded), `-` for no time. */
export const elapsed = (time: number, start: number): string => {
  if (time === 0) return "-"
  const ms = Math.round(time - start)
  const abs = Math.abs(ms)
  const minutes = Math.floor(abs / 60_000)
  const seconds = Math.floor((abs % 60_000) / 1000)
  const millis = abs % 1000
  return `${ms < 0 ? "-" : ""}${minutes}:${String(seconds).padStart(2, "0")}.${String(millis).padStart(3, "0")}`
}

/** A duration: `850ms`, `12.3s`, `4m05s`. */
export const duration = (ms: number): string => {
  if (ms < 1000) return `${Math.round(ms)}ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`
  const s = Math.round(ms / 1000)
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`
}

/** An epoch time as local `YYYY-MM-DD HH:MM:SS` (`YYYY-MM-DD HH:MM` without `seconds`), `-` for no time. */
export const dateTime = (time: number, seconds = true): string => {
  if (time === 0) return "-"
  const d = new Date(time)
  const p = (n: number) => String(n).padStart(2, "0")
  const minutes = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`
  return seconds ? `${minutes}:${p(d.getSeconds())}` : minutes
}

/** A count with thousands separators: `12,345`. */
export const count = (n: number): string => n.toLocaleString("en-US")

/** USD: `$0.0123` under a dollar, `$12.34` above. */
export const usd = (n: number): string => `$${n < 1 ? n.toFixed(4) : n.toFixed(2)}`

/** Whether a session id may be put in a link (`#/s/ID`): the store's id alphabet, nothing else. */
export const isSessionId = (id: string): boolean => /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/.test(id)
