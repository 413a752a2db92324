/**
 * The rules both `read_file` tools share (the disk's in `OfflineTools.ts`, the ACP client's in
 * `cli/acp/clientFs.ts`), so that the model sees one tool whichever reads: a path must stay
 * inside the working directory, and at most 64 KiB of a file is returned, with a note of its size.
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

/** `text` (the first `MAX_READ` bytes of a file of `size` bytes) with the truncation note when it was cut. */
export const withTruncation = (text: string, size: number): string =>
  size > MAX_READ ? `${text}\n[truncated at 64 KiB of ${size} bytes]` : text
