/**
 * Failpoints of the session stores (§3.3, §10): the seam through which tests make
 * the N-th append of a store fail or crash, the same way on every store. Test-only, so it lives
 * under `test/` and the package never ships it: it decorates a store from outside (the
 * `SessionStoreService`, and the JSONL store's `JsonlIo` seam of `makeJsonlWith`).
 *
 * A `Failpoints` plan counts the appends made through the stores it decorates (appends of no
 * events are not counted) and fires its fault at append number `at` (1-based):
 * - `Crash` `before`: the process dies before the append reaches the store: nothing of it is
 *   written. `after`: the append is durable, and the process dies before it returns.
 * - `TornCrash` (JSONL): `bytes` bytes of the append's lines reach the file (negative: all but
 *   the last `-bytes`), then the process dies (nothing cuts them back: the next open finds a
 *   torn tail, §3.1, or with `-1` complete lines whose last lacks its newline).
 * - `IoError`: the append fails with a system error (`ENOSPC`, `EIO`) from `write(2)` (after
 *   `bytes` bytes of it were written, a short write) or from `fdatasync(2)`; the process lives
 *   on. On the JSONL store the fault goes through its `JsonlIo` (the store's own clean-up after
 *   a failed write runs); on the memory and SQL stores the append fails without writing
 *   anything, as an SQL transaction that hits a full disk is rolled back.
 *
 * After a crash the store accepts nothing any more (every append, create and open fails with
 * `SessionStoreError` "crashed"), as nothing of a killed process reaches the disk; the test then
 * drops the agent, closes the store (which frees its locks, as a dead writer's lock is taken
 * over) and opens the log with a new store, as after a restart.
 */
import { Effect } from "effect"
import type { JsonlIo } from "../../src/internal/store/jsonl.js"
import type { EventDraft, SessionEvent } from "../../src/SessionEvent.js"
import { type SessionLog, SessionStoreError, type SessionWriteError } from "../../src/SessionLog.js"
import type { SessionStoreService } from "../../src/SessionStore.js"

/** What happens at the failpoint. */
export type Fault =
  | { readonly _tag: "Crash"; readonly when: "before" | "after" }
  | { readonly _tag: "TornCrash"; readonly bytes: number }
  | {
    readonly _tag: "IoError"
    readonly code: "ENOSPC" | "EIO"
    readonly syscall: "write" | "fdatasync"
    readonly bytes?: number | undefined
  }

/**
 * A fault at the `at`-th append (1-based); an `IoError` repeats for `times` appends (default 1:
 * a disk that stays full for a while, then has space again).
 */
export interface Failpoint {
  readonly at: number
  readonly fault: Fault
  readonly times?: number | undefined
}

/** A Node-style system error (`code`, `errno`, `syscall`), as `node:fs` throws them. */
export const systemError = (code: "ENOSPC" | "EIO", syscall: string): Error => {
  const text = code === "ENOSPC" ? "no space left on device" : "i/o error"
  return Object.assign(new Error(`${code}: ${text}, ${syscall}`), { code, errno: code === "ENOSPC" ? -28 : -5, syscall })
}

/** The state of one plan across the stores it decorates (a store and the JSONL I/O under it). */
export class Failpoints {
  /** Appends made so far (the number of the last one). */
  appends = 0
  /** Appends (and creates) that were started and have not returned yet. */
  inflight = 0
  /** The process is dead: nothing is accepted any more. */
  crashed = false
  /** The fault fired (at append `at`). */
  fired = false
  /** Appends pass through uncounted (a test's set-up before the counted part). */
  paused = false
  /** A JSONL I/O fault waiting for the next `write(2)` or `fdatasync(2)`. */
  armed: Fault | undefined = undefined
  constructor(readonly plan: Failpoint | undefined) {}

  crashError(sessionId: string | undefined): SessionStoreError {
    return new SessionStoreError({ message: `the store crashed (failpoint at append ${this.plan?.at})`, sessionId })
  }
}

/**
 * Decorates a store with the plan: the logs it creates and opens count their appends and fail
 * or crash where the plan says. `jsonl`: the store writes through `failpointIo` of the same
 * plan, which carries the JSONL faults out at the system calls.
 */
export const withFailpoints = (store: SessionStoreService, fp: Failpoints, jsonl: boolean): SessionStoreService => {
  const refuse = <A>(id: string | undefined): Effect.Effect<A, SessionStoreError> => Effect.fail(fp.crashError(id))
  /** What fires at this append: `undefined` (none), or the fault. */
  const next = (): Fault | undefined => {
    const n = ++fp.appends
    const plan = fp.plan
    if (plan === undefined || n < plan.at) return undefined
    const times = plan.fault._tag === "IoError" ? plan.times ?? 1 : 1
    if (n >= plan.at + times) return undefined
    fp.fired = true
    return plan.fault
  }
  const ioFailure = (id: string, fault: Fault & { readonly _tag: "IoError" }) =>
    new SessionStoreError({
      message: `cannot append to session "${id}": ${fault.code}`,
      sessionId: id,
      cause: systemError(fault.code, fault.syscall)
    })
  const wrap = (log: SessionLog): SessionLog => {
    const append = (drafts: ReadonlyArray<EventDraft>): Effect.Effect<ReadonlyArray<SessionEvent>, SessionWriteError> =>
      Effect.suspend(() => {
        if (drafts.length === 0 || fp.paused) return log.append(drafts)
        if (fp.crashed) return refuse(log.id)
        const fault = next()
        let run = log.append(drafts)
        if (fault !== undefined) {
          switch (fault._tag) {
            case "Crash":
              if (fault.when === "before") {
                fp.crashed = true
                return refuse(log.id)
              }
              run = Effect.zipRight(
                Effect.exit(run),
                Effect.suspend(() => {
                  fp.crashed = true
                  return refuse<ReadonlyArray<SessionEvent>>(log.id)
                })
              )
              break
            case "TornCrash":
              if (!jsonl) throw new Error("a torn write is a JSONL failpoint")
              fp.armed = fault
              break
            case "IoError":
              if (!jsonl) return Effect.fail(ioFailure(log.id, fault))
              fp.armed = fault
              break
          }
        }
        fp.inflight++
        return Effect.ensuring(run, Effect.sync(() => fp.inflight--))
      })
    const appendSync = log.appendSync
    return {
      ...log,
      append,
      ...(appendSync === undefined ? {} : {
        appendSync: (drafts: ReadonlyArray<EventDraft>, time: number): ReadonlyArray<SessionEvent> | SessionStoreError => {
          if (drafts.length === 0 || fp.paused) return appendSync(drafts, time)
          if (fp.crashed) return fp.crashError(log.id)
          const fault = next()
          if (fault !== undefined) {
            switch (fault._tag) {
              case "Crash":
                if (fault.when === "after") appendSync(drafts, time)
                fp.crashed = true
                return fp.crashError(log.id)
              case "TornCrash":
                if (!jsonl) throw new Error("a torn write is a JSONL failpoint")
                fp.armed = fault
                break
              case "IoError":
                if (!jsonl) return ioFailure(log.id, fault)
                fp.armed = fault
                break
            }
          }
          return appendSync(drafts, time)
        }
      })
    }
  }
  // One wrapper per log: `open` of an open session returns the log it returned before, as the
  // stores do.
  const wrapped = new WeakMap<SessionLog, SessionLog>()
  const once = (log: SessionLog): SessionLog => {
    const known = wrapped.get(log)
    if (known !== undefined) return known
    const made = wrap(log)
    wrapped.set(log, made)
    return made
  }
  return {
    // A create is I/O in flight as an append is (a sub-agent's session, §27), though not counted
    // as one: the matrix waits for both before it moves its clock.
    create: (options) =>
      Effect.suspend(() => {
        if (fp.crashed) return refuse<SessionLog>(options?.id)
        fp.inflight++
        return Effect.ensuring(Effect.map(store.create(options), once), Effect.sync(() => fp.inflight--))
      }),
    open: (id) => fp.crashed ? refuse(id) : Effect.map(store.open(id), once),
    read: (id) => fp.crashed ? refuse(id) : store.read(id),
    list: Effect.suspend(() => fp.crashed ? refuse(undefined) : store.list)
  }
}

/**
 * The JSONL store's system calls under the plan (`makeJsonlWith(options, failpointIo(fp, io))`):
 * an armed `TornCrash` writes its bytes and kills the process; an armed `IoError` fails the
 * next `write(2)` (after its `bytes`) or `fdatasync(2)`. Once crashed, every call fails and
 * nothing is cut back.
 */
export const failpointIo = (fp: Failpoints, io: JsonlIo): JsonlIo => {
  const dead = () => Object.assign(new Error("the process is dead (failpoint)"), { code: "EIO" })
  const writePrefix = (fd: number, text: string, bytes: number) => {
    const buffer = Buffer.from(text, "utf8")
    const n = bytes < 0 ? Math.max(0, buffer.length + bytes) : Math.min(bytes, buffer.length)
    if (n > 0) io.write(fd, buffer, 0, n)
  }
  return {
    writeText: (fd, text) => {
      if (fp.crashed) throw dead()
      const fault = fp.armed
      if (fault?._tag === "TornCrash") {
        fp.armed = undefined
        writePrefix(fd, text, fault.bytes)
        fp.crashed = true
        throw dead()
      }
      if (fault?._tag === "IoError" && fault.syscall === "write") {
        fp.armed = undefined
        writePrefix(fd, text, fault.bytes ?? 0)
        throw systemError(fault.code, "write")
      }
      return io.writeText(fd, text)
    },
    write: (fd, bytes, offset, length) => {
      if (fp.crashed) throw dead()
      return io.write(fd, bytes, offset, length)
    },
    truncate: (fd, size) => {
      if (fp.crashed) throw dead()
      io.truncate(fd, size)
    },
    datasync: (fd, done) => {
      if (fp.crashed) return done(dead())
      const fault = fp.armed
      if (fault !== undefined && fault._tag === "IoError" && fault.syscall === "fdatasync") {
        fp.armed = undefined
        return done(systemError(fault.code, "fdatasync"))
      }
      io.datasync(fd, done)
    }
  }
}
