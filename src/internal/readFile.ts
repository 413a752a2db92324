/**
 * The rules both `read_file` tools share (the disk's in `OfflineTools.ts`, the ACP client's in
 * `cli/acp/clientFs.ts`), so that the model sees one tool whichever reads: a path must stay
 * inside the working directory, and at most 64 KiB of a file is returned, with a note of its size
 * and of the number of lines not shown.
 */
import type * as Path from "@effect/platform/Path"

/** The most bytes of a file `read_file` returns (64 KiB). */
export const MAX_READ = 64 * 1024

/**
 * Whether the relative path `rel` (from `path.relative`) leaves its base: it is absolute, `..`,
 * or starts with the segment `..` (`..notes` is a name inside the base).
 */
export const leaves = (path: Path.Path, rel: string): boolean =>
  path.isAbsolute(rel) || rel === ".." || rel.startsWith(`..${path.sep}`)

/**
 * The most bytes past the first `MAX_READ` that are read to count the lines not shown (64 MiB,
 * about 30 ms): past them the note says "at least".
 */
export const MAX_COUNTED = 64 * 1024 * 1024

/** The lines of a file that start after what `read_file` returns; `exact: false` when not all were counted. */
export interface HiddenLines {
  readonly lines: number
  readonly exact: boolean
}

/**
 * Counts the lines that start after the first `MAX_READ` bytes of a file of `size` bytes (a line
 * starts after each line feed that is not the file's last byte), reading at most `MAX_COUNTED`
 * bytes through `read(buffer, position)` (the bytes read, 0 at the end). `lastShown` is the last
 * byte returned (a line feed there starts a line right after the cut).
 */
export const countHiddenLines = async (
  read: (buffer: Uint8Array, position: number) => Promise<number>,
  size: number,
  lastShown: number
): Promise<HiddenLines> => {
  const end = Math.min(size, MAX_READ + MAX_COUNTED)
  const buffer = new Uint8Array(Math.min(1 << 20, Math.max(1, end - MAX_READ)))
  let lines = 0
  let previous = lastShown
  let position = MAX_READ
  while (position < end) {
    const n = await read(buffer.subarray(0, Math.min(buffer.length, end - position)), position)
    if (n === 0) break
    if (previous === 10) lines++
    // Each line feed but the chunk's last byte starts a line inside the chunk.
    for (let i = buffer.indexOf(10); i !== -1 && i < n - 1; i = buffer.indexOf(10, i + 1)) lines++
    previous = buffer[n - 1]!
    position += n
  }
  return { lines, exact: position >= size }
}

const count = (n: number): string => n.toLocaleString("en-US")

/**
 * `text` (the first `MAX_READ` bytes of a file of `size` bytes) with the truncation note when it
 * was cut, which says how many lines are not shown:
 * `[… 1,234 more lines not shown: truncated at 64 KiB of 80,000 bytes]` (`at least 1,234` when
 * not all were counted; `the rest of the last line` when the cut falls inside the last line).
 */
export const withTruncation = (text: string, size: number, hidden: HiddenLines): string => {
  if (size <= MAX_READ) return text
  const what = hidden.lines === 0
    ? hidden.exact ? "the rest of the last line" : `the rest (no line break in the next ${MAX_COUNTED / 1024 / 1024} MiB)`
    : `${hidden.exact ? "" : "at least "}${count(hidden.lines)} more line${hidden.lines === 1 ? "" : "s"}`
  return `${text}\n[… ${what} not shown: truncated at 64 KiB of ${count(size)} bytes]`
}
