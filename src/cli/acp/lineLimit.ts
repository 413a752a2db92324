/**
 * The line limit of `agent-loop acp`'s stdin (§22). The SDK's
 * `ndJsonStream` refuses a line over its `maxMessageBytes` (default `DEFAULT_MAX_MESSAGE_BYTES`,
 * 32 MiB) by erroring its stream, which closes the connection: the agent would stop reading and
 * exit 0 with its running prompts never answered. `limitLines` sits between stdin and the SDK so
 * that no line the SDK sees is over the limit: it passes every line at most `limit` bytes long
 * (without its `\n`) through unchanged, holding a line's bytes only until its end (as the SDK
 * would), and **drops** a longer one while it streams: once a line is over the limit its bytes
 * are counted and scanned, never kept, until its `\n` (or the end of the input), and then
 * `onOversize` is told what it was (`Oversize`). Nothing else changes.
 *
 * What an oversize line was is read from its top-level JSON keys by a small scanner (strings,
 * escapes and nesting followed byte by byte; the `"id"` value kept when it is a number or a
 * string of at most 1 KiB): a `request` (`method` and `id`), a `notification` (`method`, no
 * `id`), a `response` (`id` with `result` or `error`, no `method`), else `unknown`. For a
 * response, the line that replaces it in the SDK's input is an error response to the same id
 * (`responseError`), so that the agent's own pending request (e.g. `fs/read_text_file`) fails
 * with the limit's message instead of waiting for ever.
 *
 * @since 0.1.0
 */

/**
 * What `limitLines` saw of a line over the limit: its length in bytes (without its `\n`), its
 * kind by its top-level keys, and its `id` when it had a readable one (a number or a string).
 *
 * @since 0.1.0
 * @category models
 */
export interface Oversize {
  readonly bytes: number
  readonly kind: "request" | "notification" | "response" | "unknown"
  readonly id: string | number | undefined
}

/**
 * The message of a line over the limit: `message too large: N bytes, the limit is 32 MiB`
 * (the limit in MiB when it is a whole number of them, else in bytes).
 *
 * @since 0.1.0
 * @category models
 */
export const tooLargeMessage = (bytes: number, limit: number): string =>
  `message too large: ${bytes} bytes, the limit is ${
    limit % (1024 * 1024) === 0 ? `${limit / (1024 * 1024)} MiB` : `${limit} bytes`
  }`

const NL = 0x0a
const QUOTE = 0x22
const BACKSLASH = 0x5c
const MAX_CAPTURE = 1024

/** Follows a JSON object's top level byte by byte: its keys, and its `"id"` value. */
class TopLevel {
  private depth = 0
  private inString = false
  private escape = false
  /** The next string at depth 1 is a key (after `{` or `,`). */
  private keyNext = false
  private key: Array<number> | undefined
  private lastKey = ""
  private id: Array<number> | undefined
  private idDone = false
  private idRaw: string | undefined
  readonly keys = new Set<string>()

  push(bytes: Uint8Array): void {
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i]!
      if (this.id !== undefined && !this.idDone) {
        if (this.id.length > MAX_CAPTURE) this.idDone = true
        else if (!(this.depth === 1 && !this.inString && (b === 0x2c || b === 0x7d))) this.id.push(b)
      }
      if (this.inString) {
        if (this.escape) this.escape = false
        else if (b === BACKSLASH) this.escape = true
        else if (b === QUOTE) {
          this.inString = false
          if (this.key !== undefined) {
            this.lastKey = this.key.length <= 32 ? String.fromCharCode(...this.key) : ""
            this.keys.add(this.lastKey)
            this.key = undefined
          }
          continue
        }
        if (this.key !== undefined && this.key.length <= 32) this.key.push(b)
        continue
      }
      switch (b) {
        case QUOTE:
          this.inString = true
          if (this.depth === 1 && this.keyNext) this.key = []
          this.keyNext = false
          break
        case 0x7b: // {
        case 0x5b: // [
          this.depth++
          this.keyNext = this.depth === 1 && b === 0x7b
          break
        case 0x7d: // }
        case 0x5d: // ]
          if (this.depth === 1) this.endValue()
          this.depth--
          break
        case 0x2c: // ,
          if (this.depth === 1) {
            this.endValue()
            this.keyNext = true
          }
          break
        case 0x3a: // :
          if (this.depth === 1 && this.lastKey === "id" && this.id === undefined) this.id = []
          this.lastKey = ""
          break
        default:
          break
      }
    }
  }

  private endValue(): void {
    if (this.id !== undefined && !this.idDone) {
      this.idDone = true
      this.idRaw = new TextDecoder().decode(Uint8Array.from(this.id))
    }
  }

  result(bytes: number): Oversize {
    let id: string | number | undefined
    if (this.idRaw !== undefined) {
      try {
        const parsed: unknown = JSON.parse(this.idRaw)
        if (typeof parsed === "string" || typeof parsed === "number") id = parsed
      } catch {
        id = undefined
      }
    }
    const kind: Oversize["kind"] = this.keys.has("method")
      ? (this.keys.has("id") ? "request" : "notification")
      : this.keys.has("id") && (this.keys.has("result") || this.keys.has("error"))
      ? "response"
      : "unknown"
    return { bytes, kind, id }
  }
}

/**
 * The id of the error response that answers a line over the limit: the line's id when it could
 * be read (a request's, or an id without a method: an invalid request, answered with its id as
 * `envelope.ts` answers one within the limit), else `null`; a response's never (it is not
 * answered with its own id: `responseError` fails our request it answers).
 *
 * @since 0.1.0
 * @category models
 */
export const answerId = (oversize: Oversize): string | number | null => oversize.kind === "response" ? null : oversize.id ?? null

/**
 * The line that stands, in the SDK's input, for a response over the limit: a JSON-RPC error
 * response to the same id, code -32600, `tooLargeMessage`, `data {bytes, limit}`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const responseError = (oversize: Oversize, limit: number): string =>
  JSON.stringify({
    jsonrpc: "2.0",
    id: oversize.id ?? null,
    error: { code: -32600, message: tooLargeMessage(oversize.bytes, limit), data: { bytes: oversize.bytes, limit } }
  }) + "\n"

/**
 * A byte transform for a newline-delimited JSON input: lines of at most `limit` bytes pass
 * unchanged; a longer line is dropped while it streams and `onOversize` called at its end (see
 * the module comment); a response over the limit is replaced by `responseError`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const limitLines = (
  limit: number,
  onOversize: (oversize: Oversize) => void
): TransformStream<Uint8Array, Uint8Array> => {
  /** The current line's chunks, while it is within the limit. */
  let held: Array<Uint8Array> = []
  let length = 0
  /** The scanner of the current line, once it is over the limit (its bytes are dropped). */
  let over: TopLevel | undefined
  const encoder = new TextEncoder()

  const endOversize = (controller: TransformStreamDefaultController<Uint8Array>) => {
    const oversize = over!.result(length)
    over = undefined
    length = 0
    if (oversize.kind === "response" && oversize.id !== undefined) {
      controller.enqueue(encoder.encode(responseError(oversize, limit)))
    }
    onOversize(oversize)
  }

  /** Adds `part` (no `\n` in it) to the current line. */
  const add = (part: Uint8Array) => {
    if (part.length === 0) return
    length += part.length
    if (over !== undefined) {
      over.push(part)
      return
    }
    if (length <= limit) {
      held.push(part)
      return
    }
    over = new TopLevel()
    for (const h of held) over.push(h)
    over.push(part)
    held = []
  }

  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      let start = 0
      while (start < chunk.length) {
        const nl = chunk.indexOf(NL, start)
        if (nl < 0) {
          // Kept as a copy: the source may reuse its buffer.
          add(chunk.slice(start))
          return
        }
        if (over === undefined && length + nl - start <= limit) {
          // The line ends within the limit: it passes, with its `\n`.
          for (const h of held) controller.enqueue(h)
          controller.enqueue(chunk.subarray(start, nl + 1))
          held = []
          length = 0
        } else {
          add(chunk.subarray(start, nl))
          endOversize(controller)
        }
        start = nl + 1
      }
    },
    flush(controller) {
      if (over !== undefined) endOversize(controller)
      else for (const h of held) controller.enqueue(h)
    }
  })
}
