/**
 * The chat's keyboard input, cleaned before Ink parses it. Ink 6.8 throws (and the chat would
 * die without disposing its agent) on escape sequences it cannot name: a modified function key
 * (`ESC [1;5P`, Ctrl+F1) or a colour code in pasted text (`ESC [31m`) (Ink bug #901). The view
 * uses none of them, so they are dropped here: of the CSI sequences (`ESC [` parameters, final
 * byte), only the unmodified ones the editor reads are kept (arrows `A`–`D`, Home/End `H`/`F`,
 * Shift+Tab `Z`, and `~` keys such as Delete `ESC [3~`). Everything else (text, Enter, a lone
 * Esc, Alt+Enter `ESC CR`, `ESC O` function keys) passes unchanged. A CSI cut at the end of a
 * chunk is held until the next one.
 *
 * @since 0.1.0
 */

/** A complete CSI sequence: parameters, intermediates, final byte. */
// eslint-disable-next-line no-control-regex -- ESC is what a CSI sequence starts with
const CSI = /\x1b\[([\x30-\x3f]*)([\x20-\x2f]*)([\x40-\x7e])/g
/** An incomplete CSI at the end of a chunk (no final byte yet). */
// eslint-disable-next-line no-control-regex -- ESC is what a CSI sequence starts with
const CSI_TAIL = /\x1b\[[\x30-\x3f]*[\x20-\x2f]*$/
const KEPT_FINALS = "ABCDHFZ~"

/**
 * Cleans one chunk of keyboard input; `carry` is what the previous chunk left (an incomplete
 * CSI). Returns the text to pass on and the new carry.
 */
export const cleanInput = (chunk: string, carry: string): { readonly text: string; readonly carry: string } => {
  let text = carry + chunk
  let rest = ""
  const tail = CSI_TAIL.exec(text)
  if (tail !== null) {
    rest = tail[0]
    text = text.slice(0, tail.index)
  }
  const cleaned = text.replace(
    CSI,
    (sequence, params: string, intermediates: string, final: string) =>
      intermediates === "" && !params.includes(";") && KEPT_FINALS.includes(final) ? sequence : ""
  )
  return { text: cleaned, carry: rest }
}

/**
 * `stdin` as Ink reads it (`read()` in a `readable` handler), with every chunk cleaned by
 * `cleanInput`; everything else (raw mode, `isTTY`, listeners, `ref`) is the real stream's.
 */
export const cleanStdin = (stdin: NodeJS.ReadStream): NodeJS.ReadStream => {
  let carry = ""
  const read = (size?: number): string | Buffer | null => {
    const chunk = stdin.read(size) as string | Buffer | null
    if (chunk === null) return null
    const cleaned = cleanInput(typeof chunk === "string" ? chunk : chunk.toString("utf8"), carry)
    carry = cleaned.carry
    // Ink stops reading at `null`: a chunk cleaned to nothing is passed on as "".
    return cleaned.text
  }
  return new Proxy(stdin, {
    get(target, property) {
      if (property === "read") return read
      const value = Reflect.get(target, property, target)
      return typeof value === "function" ? value.bind(target) : value
    }
  })
}
