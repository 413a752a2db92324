/**
 * Making a store's directory, as `mkdir -p` does, in a walk that always ends: Node's own
 * `mkdirSync(path, { recursive: true })` never returns for a path under /proc (measured on Node 20).
 * procfs answers ENOENT to a new name in a directory that exists; Node's walk takes ENOENT for a
 * missing parent, makes the parent (EEXIST: there), tries the child again, and so on for ever,
 * inside one synchronous call that holds the event loop, so not even SIGTERM ends the process.
 * Here each level is tried at most twice: an ENOENT once its parent is a directory is final.
 * What went wrong comes back as one phrase naming the path at fault (never thrown), for a message
 * such as `cannot create DIR: REASON`.
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { codeOf, fileErrorText } from "../fsErrors.js"
import { fileKind } from "./common.js"

/**
 * Why a directory could not be made: a phrase naming the path at fault (`/proc does not take new
 * directories (ENOENT)`, `a/file is not a directory (a regular file)`, `/sys/x: operation not
 * permitted`), and the system error.
 */
export interface DirectoryProblem {
  readonly reason: string
  readonly cause: unknown
}

/** A kind of file in words ("a regular file", "a fifo", …), as `fileKind` gives it, from Node's `Stats`. */
export const statsKind = (stats: NodeFs.Stats): string =>
  fileKind(
    stats.isFile()
      ? "File"
      : stats.isDirectory()
      ? "Directory"
      : stats.isFIFO()
      ? "FIFO"
      : stats.isCharacterDevice()
      ? "CharacterDevice"
      : stats.isBlockDevice()
      ? "BlockDevice"
      : stats.isSocket()
      ? "Socket"
      : stats.isSymbolicLink()
      ? "SymbolicLink"
      : "Unknown"
  )

/** The stats of `path` (following links), or undefined when they cannot be had. */
const statOf = (path: string): NodeFs.Stats | undefined => {
  try {
    return NodeFs.statSync(path, { throwIfNoEntry: false })
  } catch {
    return undefined
  }
}

/** Something that exists at `path` where a directory is wanted: fine if it is one (or links to one). */
const existing = (path: string, cause: unknown): DirectoryProblem | undefined => {
  const stats = statOf(path)
  if (stats?.isDirectory() === true) return undefined
  if (stats !== undefined) return { reason: `${path} is not a directory (${statsKind(stats)})`, cause }
  let link = false
  try {
    link = NodeFs.lstatSync(path).isSymbolicLink()
  } catch {
    // Gone since: named as it was.
  }
  return { reason: link ? `${path} is a symbolic link to nothing` : `${path} cannot be used`, cause }
}

/** A failed `mkdir` of `path` in words, naming the path at fault. */
const failed = (path: string, cause: unknown): DirectoryProblem => {
  const code = codeOf(cause)
  if (code === "ENOTDIR") {
    // Something on the way is not a directory: name the nearest ancestor that exists.
    for (let up = NodePath.dirname(path); up !== path; path = up, up = NodePath.dirname(up)) {
      const stats = statOf(up)
      if (stats !== undefined && !stats.isDirectory()) return { reason: `${up} is not a directory (${statsKind(stats)})`, cause }
      if (stats !== undefined) break
    }
  }
  return { reason: `${path}: ${fileErrorText(cause, "write")}`, cause }
}

/** One `mkdir` of `path`: `undefined` once it is a directory, else why not, or `ENOENT` with its error. */
const makeOnce = (path: string): DirectoryProblem | undefined | { readonly enoent: unknown } => {
  try {
    NodeFs.mkdirSync(path)
    return undefined
  } catch (error) {
    const code = codeOf(error)
    if (code === "EEXIST") return existing(path, error)
    if (code === "ENOENT") return { enoent: error }
    return failed(path, error)
  }
}

/**
 * Makes the directory `path` and its missing parents (mode from the umask); `undefined` once it
 * is there (already or now), else why it cannot be.
 */
export const makeDirectorySync = (path: string): DirectoryProblem | undefined => {
  const first = makeOnce(path)
  if (first === undefined || !("enoent" in first)) return first
  const parent = NodePath.dirname(path)
  if (parent === path) return { reason: `${path}: no such file or directory`, cause: undefined }
  const above = makeDirectorySync(parent)
  if (above !== undefined) return above
  const second = makeOnce(path)
  if (second === undefined || !("enoent" in second)) return second
  // The parent is a directory now, yet the name cannot be made in it (procfs): final.
  return { reason: `${parent} does not take new directories (ENOENT)`, cause: second.enoent }
}
