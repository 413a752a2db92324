/**
 * One writer per session (DESIGN.md §3.3): who writes a session, whether that writer is still
 * alive, and the JSONL store's lock file `<id>.jsonl.lock`. The SQL store records the same
 * writer identity in its writers table.
 */
import { Effect } from "effect"
import * as NodeFs from "node:fs"
import * as Os from "node:os"
import type { SessionStoreError } from "../../SessionLog.js"
import { storeError } from "./common.js"

/**
 * The writer of a session, as recorded in its lock (JSONL: `<id>.jsonl.lock`; SQL: a row of
 * `agent_loop_writers`): the process id and host name.
 */
export interface Writer {
  readonly pid: number
  readonly host: string
}

export const thisWriter = (): Writer => ({ pid: process.pid, host: Os.hostname() })

/**
 * Whether the recorded writer may still write: this process (another store of it), a process
 * of this host that still runs, or a process of another host (which cannot be checked). A
 * writer that died (SIGKILL, a crash) leaves a stale lock, which the next writer takes over.
 */
export const isLiveWriter = (writer: Writer): boolean => {
  if (writer.host !== Os.hostname() || writer.pid === process.pid) return true
  try {
    process.kill(writer.pid, 0)
    return true
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

export const inUseError = (id: string, writer: Writer): SessionStoreError =>
  storeError(
    `session "${id}" is open for writing by process ${writer.pid}${writer.host === Os.hostname() ? "" : ` on ${writer.host}`}` +
      " (one writer per session; if that process is gone, remove its lock)",
    id
  )

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
            if (NodeFs.readFileSync(lockPath, "utf8") === me) NodeFs.unlinkSync(lockPath)
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
        holder = readWriter(NodeFs.readFileSync(lockPath, "utf8"))
      } catch {
        continue // released meanwhile
      }
      if (holder !== undefined && isLiveWriter(holder)) return Effect.fail(inUseError(id, holder))
      try {
        NodeFs.unlinkSync(lockPath) // stale
      } catch {
        // taken or released meanwhile: try again
      }
    }
    return Effect.fail(storeError(`cannot lock session "${id}" (${lockPath}): contended`, id))
  })
