/**
 * The reader decodes a log's bytes a piece at a time (`decodeLog`, `src/internal/logCodec.ts`:
 * pieces of 1 MiB or more, each cut after a newline byte), so that the bytes and the whole text are
 * never held at once. What it reads must be what decoding the whole text reads: the same events,
 * warnings and failures, whatever falls at a cut (a line across the piece size, a byte order mark
 * or a malformed UTF-8 sequence at the start or end of a piece, a torn tail in the last piece).
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { decodeLog } from "../src/internal/logCodec.js"

const PIECE = 1 << 20
const encoder = new TextEncoder()
const bytesOf = (...parts: ReadonlyArray<string | ReadonlyArray<number> | Uint8Array>): Uint8Array => {
  const chunks = parts.map((p) => typeof p === "string" ? encoder.encode(p) : Uint8Array.from(p))
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0))
  let at = 0
  for (const c of chunks) {
    out.set(c, at)
    at += c.length
  }
  return out
}
const HEADER = "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"s\",\"createdAt\":0}\n"
const line = (seq: number, text: string) => JSON.stringify({ type: "plugin/note", seq, time: seq, data: { text } }) + "\n"

/** A header and events, exactly `size` bytes of ASCII ending with a newline; returns the text and the next seq. */
const prefixOf = (size: number): { readonly text: string; readonly next: number } => {
  let text = HEADER
  let seq = 0
  while (size - text.length > 2_000) text += line(seq++, "a".repeat(1_000))
  text += line(seq, "p".repeat(size - text.length - line(seq, "").length))
  expect(text.length).toBe(size)
  return { text, next: seq + 1 }
}

/** `decodeLog` of the bytes, and of the text decoded whole (one piece), side by side. */
const both = (bytes: Uint8Array) => [decodeLog(bytes), decodeLog(new TextDecoder().decode(bytes))] as const

describe("decodeLog in pieces", () => {
  it("reads what the whole text reads: lines across the piece size, a long line, a cut right at the piece size", () => {
    const { next, text } = prefixOf(PIECE)
    let mixed = HEADER
    for (let seq = 0; mixed.length < PIECE; seq++) mixed += line(seq, "é€😀x".repeat((seq % 97) * 7))
    const cases = [
      bytesOf(mixed),
      bytesOf(HEADER, line(0, "b".repeat(3 * PIECE)), line(1, "c")),
      bytesOf(text, line(next, "x"), line(next + 1, "y")),
      bytesOf(text, line(next, "x").trimEnd())
    ]
    for (const bytes of cases) {
      const [pieces, whole] = both(bytes)
      expect(Either.isRight(pieces)).toBe(true)
      expect(pieces).toEqual(whole)
      if (Either.isRight(pieces)) expect(pieces.right.validBytes).toBe(bytes.length)
    }
  })

  it("a byte order mark is skipped at the start of the log only, as whole decoding skips it", () => {
    const { next, text } = prefixOf(PIECE)
    const [first] = both(bytesOf([0xef, 0xbb, 0xbf], text, line(next, "x")))
    expect(Either.isRight(first) && first.right.events.length).toBe(next + 1)
    // A mark at the start of the second piece is kept: the line is not JSON, as in the whole text.
    const [pieces, whole] = both(bytesOf(text, [0xef, 0xbb, 0xbf], line(next, "x"), line(next + 1, "y")))
    expect(pieces).toEqual(whole)
    expect(Either.isLeft(pieces) && pieces.left.line).toBe(next + 2)
  })

  it("malformed UTF-8 at either side of a cut reads as in the whole text", () => {
    const { next, text } = prefixOf(PIECE)
    const dataOpen = `{"type":"plugin/note","seq":${next},"time":0,"data":{"text":"`
    for (
      const bytes of [
        bytesOf(text.slice(0, -6), [0xe2, 0x82], "\"}}\n", line(next, "x")), // a truncated sequence ends the first piece
        bytesOf(text, dataOpen, [0xc3, 0xff, 0xf0, 0x9f], "\"}}\n"), // and starts the second
        bytesOf(text, [0xe2, 0x82], "\n", line(next, "x"))
      ]
    ) {
      const [pieces, whole] = both(bytes)
      // The whole text counts each replacement character as the 3 bytes it encodes to.
      expect(Either.map(pieces, (c) => ({ ...c, validBytes: 0 }))).toEqual(Either.map(whole, (c) => ({ ...c, validBytes: 0 })))
      if (Either.isRight(pieces)) expect(pieces.right.validBytes).toBe(bytes.length)
    }
  })

  it("a torn last line in the last piece is ignored and cut at the last newline byte", () => {
    const { next, text } = prefixOf(PIECE)
    for (const tail of [bytesOf("{\"type\":\"plugin/no"), bytesOf("{\"type\":\"€", [0xe2, 0x82])]) {
      const bytes = bytesOf(text, line(next, "x"), tail)
      const decoded = decodeLog(bytes)
      expect(Either.isRight(decoded)).toBe(true)
      if (Either.isRight(decoded)) {
        expect([decoded.right.tornTail, decoded.right.validBytes, decoded.right.events.length]).toEqual([
          true,
          bytes.length - tail.length,
          next + 1
        ])
        const characters = new TextDecoder().decode(tail).length
        expect(decoded.right.warnings).toEqual([`line ${next + 3}: torn last line ignored (${characters} characters, not JSON)`])
      }
    }
  })
})
