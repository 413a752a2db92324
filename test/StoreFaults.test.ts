/**
 * The stores against real file-system faults (§23): the live log deleted, cut or
 * replaced under an open session; a full disk (a 64 KiB tmpfs); a read-only store (a tmpfs
 * remounted read-only). Each failure is a typed `SessionStoreError` naming the session and what
 * happened; nothing acknowledged before it is lost, and nothing is acknowledged into a file that
 * is not the session's log any more. The CLI's exit for these is in Cli.test.ts.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Effect, type Scope } from "effect"
import * as NodeFs from "node:fs"
import * as Path from "node:path"
import type { JsonlIo } from "../src/internal/store/jsonl.js"
import { FILE_CHECK_MS, makeJsonlWith, nodeIo } from "../src/internal/store/jsonl.js"
import type { EventDraft, SessionEvent } from "../src/SessionEvent.js"
import type { SessionFenced, SessionLog, SessionStoreError } from "../src/SessionLog.js"
import * as SessionStore from "../src/SessionStore.js"
import * as SqlSessionStore from "../src/SqlSessionStore.js"
import { scratchDirs } from "./utils/scratchDirs.js"
import { mountRefused, remount, tmpfs } from "./utils/tmpfs.js"

const scratch = scratchDirs("agent-loop-faults-")

const note = (i: number, pad = 0): EventDraft => ({ type: "plugin/note", data: { i, pad: "x".repeat(pad) } })

/** A JSONL store's service on `directory`, in the current scope. */
const jsonl = (directory: string, fsync: "none" | "batch", io: JsonlIo = nodeIo) =>
  Effect.map(makeJsonlWith({ directory, fsync }, io), SessionStore.SessionStore.of)

/** The log's events as a new reader finds them in the file (its warnings must be none). */
const fileEvents = (path: string) =>
  Effect.map(readFile(path), (contents) => {
    expect(contents.warnings).toEqual([])
    return contents.events.map((e) => [e.seq, e.type])
  })

const readFile = (path: string) => Effect.orDie(SessionStore.readFile(path)).pipe(Effect.provide(NodeFileSystem.layer))

const seqTypes = (events: ReadonlyArray<SessionEvent>) => events.map((e) => [e.seq, e.type])

/** Appends `note`s of `pad` bytes until one fails (at most `max`); returns what was acknowledged and the failure. */
const fill = (log: SessionLog, pad: number, max: number) =>
  Effect.gen(function*() {
    const acknowledged: Array<SessionEvent> = []
    for (let i = 0; i < max; i++) {
      const result = yield* Effect.either(log.append([note(i, pad)]))
      if (result._tag === "Left") return { acknowledged, failure: result.left }
      for (const event of result.right) acknowledged.push(event)
    }
    return { acknowledged, failure: undefined }
  })

const errorShape = (e: SessionStoreError | SessionFenced) => ({ tag: e._tag, sessionId: e.sessionId, message: e.message })

/** A `JsonlIo` whose clock (`now`, for the file check's cadence) is `clock.ms`, moved by the test. */
const clockedIo = () => {
  const clock = { ms: 0 }
  return { clock, io: { ...nodeIo, now: () => clock.ms } satisfies JsonlIo }
}

describe.each(["none", "batch"] as const)("JSONL (fsync %s): the live log changed under an open session", (fsync) => {
  /**
   * Opens session "s" with three acknowledged events, applies `change` to its file, then checks
   * that the next two appends fail with `message` (the log is broken: nothing more is written).
   * The change comes `FILE_CHECK_MS` after the last check (with fsync "none" a check stands for
   * that long; "batch" checks every round).
   */
  const changed = (
    change: (path: string, dir: string) => void,
    message: (path: string) => string
  ): Effect.Effect<{ readonly path: string; readonly dir: string; readonly after: string | undefined }, never, Scope.Scope> =>
    Effect.gen(function*() {
      const dir = scratch()
      const path = Path.join(dir, "s.jsonl")
      const { clock, io } = clockedIo()
      const store = yield* jsonl(dir, fsync, io)
      const log = yield* Effect.orDie(store.create({ id: "s", createdAt: 1 }))
      for (let i = 0; i < 3; i++) yield* Effect.orDie(log.append([note(i)]))
      clock.ms += FILE_CHECK_MS
      change(path, dir)
      const after = NodeFs.existsSync(path) ? NodeFs.readFileSync(path, "utf8") : undefined
      for (let attempt = 0; attempt < 2; attempt++) {
        const failed = yield* Effect.orDie(Effect.flip(log.append([note(10 + attempt)])))
        expect(errorShape(failed)).toEqual({ tag: "SessionStoreError", sessionId: "s", message: message(path) })
      }
      expect(seqTypes(log.events())).toEqual([[0, "plugin/note"], [1, "plugin/note"], [2, "plugin/note"]])
      return { path, dir, after }
    })

  it.scoped("deleted (unlinked): the append fails, nothing is acknowledged into the unlinked file", () =>
    Effect.gen(function*() {
      const { path } = yield* changed(
        (path) => NodeFs.unlinkSync(path),
        (path) =>
          `session "s" is broken: its file ${path} was deleted or replaced while the session was open; nothing more is appended to it`
      )
      expect(NodeFs.existsSync(path)).toBe(false)
    }))

  it.scoped("cut to 0 bytes: the append fails and writes nothing into the cut file", () =>
    Effect.gen(function*() {
      const { after, path } = yield* changed(
        (path) => NodeFs.truncateSync(path, 0),
        (path) =>
          `session "s" is broken: its file ${path} was cut to 0 bytes while the session was open (this store wrote ${lengthOfFull()}); nothing more is appended to it`
      )
      expect(after).toBe("")
      expect(NodeFs.readFileSync(path, "utf8")).toBe("")
    }))

  it.scoped("cut mid-line: the append fails and writes nothing after the cut", () =>
    Effect.gen(function*() {
      const { after, path } = yield* changed(
        (path) => NodeFs.truncateSync(path, NodeFs.statSync(path).size - 10),
        (path) =>
          `session "s" is broken: its file ${path} was cut to ${
            lengthOfFull() - 10
          } bytes while the session was open (this store wrote ${lengthOfFull()}); nothing more is appended to it`
      )
      expect(NodeFs.readFileSync(path, "utf8")).toBe(after)
      // What a reader finds: the events before the cut line, the torn line warned about.
      expect((yield* readFile(path)).events.map((e) => e.seq)).toEqual([0, 1])
    }))

  it.scoped("replaced by another file renamed over its path: the append fails, the new file is not touched", () =>
    Effect.gen(function*() {
      const other = "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"s\",\"createdAt\":2}\n"
      const { path } = yield* changed(
        (path, dir) => {
          NodeFs.writeFileSync(Path.join(dir, "new.jsonl"), other)
          NodeFs.renameSync(Path.join(dir, "new.jsonl"), path)
        },
        (path) =>
          `session "s" is broken: its file ${path} was deleted or replaced while the session was open; nothing more is appended to it`
      )
      expect(NodeFs.readFileSync(path, "utf8")).toBe(other)
    }))

  it.scoped("written by someone else (the file grew): the append fails", () =>
    Effect.gen(function*() {
      const line = "{\"type\":\"plugin/note\",\"seq\":3,\"time\":0,\"data\":{}}\n"
      const { after } = yield* changed(
        (path) => NodeFs.appendFileSync(path, line),
        (path) =>
          `session "s" is broken: its file ${path} grew to ${
            lengthOfFull() + line.length
          } bytes while the session was open (this store wrote ${lengthOfFull()}); nothing more is appended to it`
      )
      expect(after!.endsWith(line)).toBe(true)
    }))
})

describe("JSONL: the file check's cadence", () => {
  /** Session "s" with one acknowledged event (its write checked at `clock.ms` 0), on `clockedIo`. */
  const opened = (fsync: "none" | "batch") =>
    Effect.gen(function*() {
      const dir = scratch()
      const path = Path.join(dir, "s.jsonl")
      const { clock, io } = clockedIo()
      const log = yield* Effect.orDie((yield* jsonl(dir, fsync, io)).create({ id: "s", createdAt: 1 }))
      yield* Effect.orDie(log.append([note(0)]))
      return { path, clock, log }
    })
  const deleted = (path: string) =>
    `session "s" is broken: its file ${path} was deleted or replaced while the session was open; nothing more is appended to it`

  it.scoped("fsync none: a change within FILE_CHECK_MS of the last check is noticed by the first append after it", () =>
    Effect.gen(function*() {
      const { clock, log, path } = yield* opened("none")
      NodeFs.unlinkSync(path)
      // Less than FILE_CHECK_MS after the check: not checked again, acknowledged (into the deleted file).
      clock.ms += FILE_CHECK_MS / 2
      expect((yield* Effect.orDie(log.append([note(1)]))).map((e) => e.seq)).toEqual([1])
      // FILE_CHECK_MS after the check: checked, the log breaks.
      clock.ms += FILE_CHECK_MS / 2
      const failed = yield* Effect.flip(log.append([note(2)]))
      expect(errorShape(failed)).toEqual({ tag: "SessionStoreError", sessionId: "s", message: deleted(path) })
      expect(seqTypes(log.events())).toEqual([[0, "plugin/note"], [1, "plugin/note"]])
    }))

  it.scoped("fsync none: a cut within FILE_CHECK_MS is noticed one check later, the sizes still differ", () =>
    Effect.gen(function*() {
      const { clock, log, path } = yield* opened("none")
      const before = NodeFs.statSync(path).size
      NodeFs.truncateSync(path, before - 10)
      const one = yield* Effect.orDie(log.append([note(1)]))
      clock.ms += FILE_CHECK_MS
      const failed = yield* Effect.flip(log.append([note(2)]))
      const wrote = before + encodedLength(one[0]!)
      expect(errorShape(failed)).toEqual({
        tag: "SessionStoreError",
        sessionId: "s",
        message: `session "s" is broken: its file ${path} was cut to ${
          wrote - 10
        } bytes while the session was open (this store wrote ${wrote}); nothing more is appended to it`
      })
    }))

  it.scoped("fsync batch: every round checks, whatever the clock", () =>
    Effect.gen(function*() {
      const { log, path } = yield* opened("batch")
      NodeFs.unlinkSync(path)
      const failed = yield* Effect.flip(log.append([note(1)]))
      expect(errorShape(failed)).toEqual({ tag: "SessionStoreError", sessionId: "s", message: deleted(path) })
    }))

  it.scoped("a failed write after a cut within FILE_CHECK_MS breaks the log without extending the file", () =>
    Effect.gen(function*() {
      const dir = scratch()
      const path = Path.join(dir, "s.jsonl")
      const { io } = clockedIo()
      let fail = false
      const failing: JsonlIo = {
        ...io,
        writeText: (fd, text) => {
          if (fail) throw new Error("EIO: i/o error, write")
          return io.writeText(fd, text)
        }
      }
      const log = yield* Effect.orDie((yield* jsonl(dir, "none", failing)).create({ id: "s", createdAt: 1 }))
      yield* Effect.orDie(log.append([note(0)]))
      const size = NodeFs.statSync(path).size
      NodeFs.truncateSync(path, size - 10)
      fail = true
      const first = yield* Effect.flip(log.append([note(1)]))
      expect(errorShape(first)).toEqual({
        tag: "SessionStoreError",
        sessionId: "s",
        message: "cannot append to session \"s\": EIO: i/o error, write"
      })
      // Not cut back to the log's size (that would have added 10 zero bytes): broken instead.
      expect(NodeFs.statSync(path).size).toBe(size - 10)
      fail = false
      const second = yield* Effect.flip(log.append([note(2)]))
      expect(errorShape(second)).toEqual({
        tag: "SessionStoreError",
        sessionId: "s",
        message: `session "s" is broken: its file ${path} was cut to ${
          size - 10
        } bytes while the session was open (this store wrote ${size}); nothing more is appended to it`
      })
    }))
})

/** The bytes of an event's line. */
const encodedLength = (event: SessionEvent) => Buffer.byteLength(JSON.stringify(event) + "\n")

/** The bytes of the log `changed` writes before its change: header (createdAt 1) and three notes at time 0. */
const lengthOfFull = () =>
  "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"s\",\"createdAt\":1}\n".length +
  [0, 1, 2].map((i) => `{"type":"plugin/note","seq":${i},"time":0,"data":{"i":${i},"pad":""}}\n`.length).reduce((a, b) => a + b)

const ENOSPC = "cannot append to session \"s\": ENOSPC: no space left on device, write"

describe.skipIf(mountRefused !== undefined).each(["none", "batch"] as const)(
  "JSONL (fsync %s) on a full disk (a 64 KiB tmpfs)",
  (fsync) => {
    it.scoped("the append fails with ENOSPC naming the session; the log stays valid, every acknowledged event is kept; with space again it goes on", () =>
      Effect.gen(function*() {
        const dir = yield* tmpfs("64k")
        const path = Path.join(dir, "s.jsonl")
        const { acknowledged, failure } = yield* Effect.scoped(Effect.gen(function*() {
          const log = yield* Effect.orDie((yield* jsonl(dir, fsync)).create({ id: "s", createdAt: 1 }))
          const filled = yield* fill(log, 1000, 200)
          // Refused again while the disk is full, nothing changed in memory.
          const again = yield* Effect.flip(log.append([note(999, 1000)]))
          expect(errorShape(again)).toEqual({ tag: "SessionStoreError", sessionId: "s", message: ENOSPC })
          expect(seqTypes(log.events())).toEqual(seqTypes(filled.acknowledged))
          return filled
        }))
        expect(errorShape(failure!)).toEqual({ tag: "SessionStoreError", sessionId: "s", message: ENOSPC })
        expect(acknowledged.length).toBeGreaterThan(10)
        expect(yield* fileEvents(path)).toEqual(seqTypes(acknowledged))
        // Space again: a new store opens the log and continues its seq.
        remount(dir, "size=1m")
        const next = yield* Effect.scoped(Effect.gen(function*() {
          const log = yield* Effect.orDie((yield* jsonl(dir, fsync)).open("s"))
          return yield* Effect.orDie(log.append([note(1000)]))
        }))
        expect(next.map((e) => e.seq)).toEqual([acknowledged.length])
        expect((yield* fileEvents(path)).length).toBe(acknowledged.length + 1)
      }))
  }
)

describe.skipIf(mountRefused === undefined)(
  `JSONL on a full disk, through the JsonlIo seam (used where a tmpfs cannot be mounted: ${
    mountRefused ?? "it can be here, so this is skipped"
  })`,
  () => {
    it.scoped("the append fails with ENOSPC naming the session; every acknowledged event is kept", () =>
      Effect.gen(function*() {
        const dir = scratch()
        let full = false
        const enospc = () => Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" })
        const io: JsonlIo = {
          ...nodeIo,
          writeText: (fd, text) => {
            if (full) throw enospc()
            return nodeIo.writeText(fd, text)
          }
        }
        const log = yield* Effect.orDie((yield* jsonl(dir, "none", io)).create({ id: "s", createdAt: 1 }))
        const acknowledged = (yield* fill(log, 1000, 5)).acknowledged
        full = true
        const failed = yield* Effect.flip(log.append([note(5)]))
        expect(errorShape(failed)).toEqual({ tag: "SessionStoreError", sessionId: "s", message: ENOSPC })
        expect(yield* fileEvents(Path.join(dir, "s.jsonl"))).toEqual(seqTypes(acknowledged))
      }))
  }
)

describe.skipIf(mountRefused !== undefined)("a read-only store (a tmpfs remounted read-only)", () => {
  it.scoped("JSONL: read works; open and create fail with a clear error naming the session (EROFS), nothing crashes", () =>
    Effect.gen(function*() {
      const dir = yield* tmpfs("256k")
      yield* Effect.scoped(Effect.gen(function*() {
        const log = yield* Effect.orDie((yield* jsonl(dir, "none")).create({ id: "s", createdAt: 1 }))
        yield* Effect.orDie(log.append([note(0)]))
      }))
      remount(dir, "ro")
      const store = yield* jsonl(dir, "none")
      expect((yield* Effect.orDie(store.read("s"))).events.map((e) => e.seq)).toEqual([0])
      const open = yield* Effect.flip(store.open("s"))
      expect(errorShape(open as SessionStoreError)).toEqual({
        tag: "SessionStoreError",
        sessionId: "s",
        message: `cannot lock session "s" (${dir}/s.jsonl.lock): EROFS: read-only file system, open '${dir}/s.jsonl.lock'`
      })
      const create = yield* Effect.flip(store.create({ id: "t" }))
      expect(errorShape(create)).toEqual({
        tag: "SessionStoreError",
        sessionId: "t",
        message: `cannot lock session "t" (${dir}/t.jsonl.lock): EROFS: read-only file system, open '${dir}/t.jsonl.lock'`
      })
    }))

  it.scoped("SQLite: a database on a read-only file system is a typed error when the store is built, nothing crashes", () =>
    Effect.gen(function*() {
      const dir = yield* tmpfs("4m")
      const filename = Path.join(dir, "sessions.db")
      yield* Effect.scoped(
        Effect.gen(function*() {
          const store = yield* SessionStore.SessionStore
          const log = yield* store.create({ id: "s", createdAt: 1 })
          yield* log.append([note(0)])
        }).pipe(Effect.provide(SqlSessionStore.layerSqlite({ filename })), Effect.orDie)
      )
      remount(dir, "ro")
      const failed = yield* Effect.flip(
        Effect.scoped(Effect.flatMap(SessionStore.SessionStore, (s) => s.open("s"))).pipe(
          Effect.provide(SqlSessionStore.layerSqlite({ filename }))
        )
      )
      expect(failed._tag).toBe("SessionStoreError")
      expect(failed.message).toMatch(new RegExp(`^cannot open the SQLite database ${filename}: .+$`))
    }))
})

describe.skipIf(mountRefused !== undefined)("SQLite on a full disk (a small tmpfs)", () => {
  it.scoped("the append fails with a typed error naming the session; every acknowledged event is kept; with space again it goes on", () =>
    Effect.gen(function*() {
      const dir = yield* tmpfs("512k")
      const filename = Path.join(dir, "sessions.db")
      const store = SqlSessionStore.layerSqlite({ filename })
      const { acknowledged, failure } = yield* Effect.scoped(Effect.gen(function*() {
        const log = yield* (yield* SessionStore.SessionStore).create({ id: "s", createdAt: 1 })
        return yield* fill(log, 2000, 500)
      })).pipe(Effect.provide(store), Effect.orDie)
      expect(failure?._tag).toBe("SessionStoreError")
      expect(failure?.sessionId).toBe("s")
      expect(failure?.message).toMatch(/^cannot append to session "s": .*(full|SQLITE_FULL)/)
      expect(acknowledged.length).toBeGreaterThan(10)
      remount(dir, "size=4m")
      const after = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionStore.SessionStore
        const log = yield* s.open("s")
        const before = seqTypes(log.events())
        const next = yield* log.append([note(1000)])
        return { before, next: next.map((e) => e.seq) }
      })).pipe(Effect.provide(store), Effect.orDie)
      expect(after).toEqual({ before: seqTypes(acknowledged), next: [acknowledged.length] })
    }))
})
