/**
 * A failed file operation in a few words for a one-line message (`no such file`, `it is a
 * directory`, `permission denied`), from a Node system error or an `@effect/platform`
 * `PlatformError` that wraps one; never the platform's own text (`NotFound: FileSystem.stat
 * (nope.json): ENOENT: no such file or directory, stat 'nope.json'`), which repeats the path
 * and names internals.
 */

/** The `code` of a Node system error (`ENOENT`, `EEXIST`, …), if it has one. */
export const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? (error as { code: string }).code
    : undefined

/** System error codes in words, whatever the operation (ENOENT depends on it: see `fileErrorText`). */
const WORDS: Record<string, string> = {
  ENOTDIR: "a part of the path is not a directory",
  EISDIR: "it is a directory",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
  ENAMETOOLONG: "name too long",
  ELOOP: "too many levels of symbolic links",
  EEXIST: "it already exists",
  EBUSY: "busy",
  EMFILE: "too many open files",
  EIO: "input/output error"
}

/**
 * What went wrong with a file, in a few words: `error` is a Node system error or a
 * `PlatformError` (its `cause` is then the Node error). ENOENT reads `no such file` for a
 * `read`, `no such directory` for a `write` (the file's directory is missing). A code without
 * words is given as it is (`EXDEV`); an error without a code by its `reason` (a `SystemError`)
 * or message.
 */
export const fileErrorText = (error: unknown, operation: "read" | "write"): string => {
  const code = codeOf(error) ?? codeOf((error as { readonly cause?: unknown } | undefined)?.cause)
  if (code === "ENOENT") return operation === "read" ? "no such file" : "no such directory"
  if (code !== undefined) return WORDS[code] ?? code
  if (typeof error === "object" && error !== null) {
    const { description, reason } = error as { readonly reason?: unknown; readonly description?: unknown }
    if (reason === "NotFound") return operation === "read" ? "no such file" : "no such directory"
    if (typeof description === "string" && description !== "") return description
    if (typeof reason === "string") return reason
  }
  return error instanceof Error ? error.message : String(error)
}
