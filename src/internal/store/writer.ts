/**
 * One writer per session (§3.3): who writes a session, whether that writer is still
 * alive, and the JSONL store's lock file `<id>.jsonl.lock`. The SQL store records the same
 * writer identity in its writers table.
 */
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import * as NodeFs from "node:fs"
import * as Os from "node:os"
import type { SessionStoreError } from "../../SessionLog.js"
import { storeError } from "./common.js"

/**
 * The writer of a session, as recorded in its lock (JSONL: `<id>.jsonl.lock`; SQL: a row of the
 * writers table): the process id, the host name, and `instance`, a random id of the process
 * (a restarted container often gets the same pid and host name as the process that died).
 */
export interface Writer {
  readonly pid: number
  readonly host: string
  readonly instance?: string | undefined
  /**
   * SQL rows only: the store of the process that took the row (`openStore`), so that a row a
   * closed store of this process could not delete (a full disk) is stale, not "another store of
   * this process".
   */
  readonly store?: string | undefined
}

/** This process's `instance`, drawn once. */
const INSTANCE = randomUUID()

export const thisWriter = (): Writer => ({ pid: process.pid, host: Os.hostname(), instance: INSTANCE })

/** The stores of this process that are open (their `Writer.store`). */
const openStores = new Set<string>()

/** Registers a store of this process as open; returns its id and its release. */
export const openStore = (): { readonly id: string; readonly close: () => void } => {
  const id = randomUUID()
  openStores.add(id)
  return { id, close: () => void openStores.delete(id) }
}

/** This process itself (another store of it holds the session). */
const isThisProcess = (writer: Writer): boolean =>
  writer.host === Os.hostname() && writer.pid === process.pid && writer.instance === INSTANCE

/** A process that has exited but was not reaped yet (Linux: state `Z` in `/proc/<pid>/stat`). */
const isZombie = (pid: number): boolean => {
  try {
    const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "Z"
  } catch {
    return false
  }
}

/**
 * Whether the recorded writer may still write: this process (another store of it), a process
 * of this host that still runs (not a zombie), or a process of another host (which cannot be
 * checked from here). A writer that died (SIGKILL, a crash) leaves a stale lock, which the next
 * writer takes over; so does a lock with this process's pid and host from an earlier process
 * (another `instance`: a restarted container), and a row of a store of this process that has
 * closed.
 */
export const isLiveWriter = (writer: Writer): boolean => {
  if (writer.host !== Os.hostname()) return true
  if (writer.pid === process.pid) return isThisProcess(writer) && (writer.store === undefined || openStores.has(writer.store))
  try {
    process.kill(writer.pid, 0)
    return !isZombie(writer.pid)
  } catch (error) {
    return (error as { code?: string }).code === "EPERM"
  }
}

export const readWriter = (text: string): Writer | undefined => {
  try {
    const value = JSON.parse(text) as Writer
    return typeof value?.pid === "number" && typeof value.host === "string" ? value : undefined
  } catch {
    return undefined
  }
}

/**
 * The error of a session a live writer holds; `release` says how to free it if that writer is
 * gone (remove the lock file, delete the row).
 */
export const inUseError = (id: string, writer: Writer, release: string): SessionStoreError =>
  storeError(
    isThisProcess(writer)
      ? `session "${id}" is open for writing by another store of this process (one writer per session)`
      : `session "${id}" is open for writing by process ${writer.pid}${
        writer.host === Os.hostname() ? "" : ` on ${writer.host}`
      }` +
        ` (one writer per session; if that process is gone, ${release})`,
    id
  )

/** A lock file is small: more than this is not one of ours. */
const MAX_LOCK_BYTES = 4096

/**
 * Reads a lock file without following a symbolic link and without blocking (a fifo), at most
 * `MAX_LOCK_BYTES`. Returns `undefined` when it is gone; throws `NotALockFile` when the path is
 * not a regular file (a fifo, a device, a link to one: reading it could hang or never end).
 */
const readLockFile = (lockPath: string): string | undefined => {
  let fd: number
  try {
    fd = NodeFs.openSync(lockPath, NodeFs.constants.O_RDONLY | NodeFs.constants.O_NONBLOCK | NodeFs.constants.O_NOFOLLOW)
  } catch (error) {
    const code = (error as { code?: string }).code
    if (code === "ENOENT") return undefined
    if (code === "ELOOP") throw new NotALockFile("a symbolic link")
    throw error
  }
  try {
    if (!NodeFs.fstatSync(fd).isFile()) throw new NotALockFile("not a regular file")
    const buffer = Buffer.alloc(MAX_LOCK_BYTES)
    const n = NodeFs.readSync(fd, buffer, 0, MAX_LOCK_BYTES, 0)
    return buffer.toString("utf8", 0, n)
  } finally {
    NodeFs.closeSync(fd)
  }
}

class NotALockFile extends Error {}

/**
 * Takes the JSONL writer lock file at `lockPath` (created exclusively; a stale one, whose
 * writer is gone or unreadable, is replaced). Returns its release. Fails with
 * `SessionStoreError` when a live writer holds it.
 */
export const acquireWriterLock = (lockPath: string, id: string): Effect.Effect<Effect.Effect<void>, SessionStoreError> =>
  Effect.suspend(() => {
    const me = JSON.stringify(thisWriter())
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        NodeFs.writeFileSync(lockPath, me, { flag: "wx" })
        return Effect.succeed(Effect.sync(() => {
          try {
            if (readLockFile(lockPath) === me) NodeFs.unlinkSync(lockPath)
          } catch {
            // already gone
          }
        }))
      } catch (error) {
        if ((error as { code?: string }).code !== "EEXIST") {
          return Effect.fail(storeError(`cannot lock session "${id}" (${lockPath})`, id, error))
        }
      }
      let holder: Writer | undefined
      try {
        const text = readLockFile(lockPath)
        if (text === undefined) continue // released meanwhile
        holder = readWriter(text)
      } catch (error) {
        if (error instanceof NotALockFile) {
          return Effect.fail(
            storeError(`cannot lock session "${id}": ${lockPath} is ${error.message}, not a lock file; remove it`, id)
          )
        }
        continue
      }
      if (holder !== undefined && isLiveWriter(holder)) return Effect.fail(inUseError(id, holder, `remove ${lockPath}`))
      try {
        NodeFs.unlinkSync(lockPath) // stale
      } catch {
        // taken or released meanwhile: try again
      }
    }
    return Effect.fail(storeError(`cannot lock session "${id}" (${lockPath}): contended`, id))
  })
