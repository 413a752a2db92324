import { FileSystem } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Deferred, Effect, Exit, Fiber, Layer, TestClock } from "effect"
import { spawnSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as Os from "node:os"
import * as IdGenerator from "../src/IdGenerator.js"
import { type JsonlIo, makeJsonlWith } from "../src/internal/store/jsonl.js"
import type { MessageId, UserMessage } from "../src/Message.js"
import type { EventDraft, SessionEvent } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import { CLI_RUN_MS } from "./utils/bounds.js"
import { run } from "./utils/child.js"
import { dshFixturesDir, tmpDir } from "./utils/tmp.js"

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const userMessage = (id: string, text: string): UserMessage => ({
  id: id as MessageId,
  role: "user",
  content: [{ type: "text", text }],
  source: { kind: "user" }
})

const turnStart = (turn: number): EventDraft => ({ type: "turn/start", data: { turn } })

type Store = SessionStore.SessionStore
type Fs = FileSystem.FileSystem

/** Runs `body` with a JSONL store in a fresh temporary directory. */
const withJsonl = <A, E>(
  body: (dir: string) => Effect.Effect<A, E, Store | Fs>,
  options: {
    readonly fsync?: "none" | "batch"
    readonly io?: JsonlIo
  } = {}
): Effect.Effect<A, E> =>
  Effect.scoped(
    Effect.flatMap(tmpDir, (dir) =>
      body(dir).pipe(Effect.provide(
        options.io === undefined
          ? SessionStore.layerJsonl({ directory: dir, fsync: options.fsync })
          : Layer.scoped(
            SessionStore.SessionStore,
            Effect.map(makeJsonlWith({ directory: dir, fsync: options.fsync }, options.io), SessionStore.SessionStore.of)
          )
      )))
  ).pipe(Effect.provide(NodeFileSystem.layer))

/** The store's real write seam, wrapped: `write` may be replaced per call. */
const realIo: JsonlIo = {
  writeText: (fd, text) => NodeFs.writeSync(fd, text),
  write: (fd, bytes, offset, length) => NodeFs.writeSync(fd, bytes, offset, length),
  truncate: (fd, size) => NodeFs.ftruncateSync(fd, size),
  datasync: (fd, done) => NodeFs.fdatasync(fd, done)
}

/** Runs `effect` against a second, independent JSONL store on the same directory. */
const inNewStore = <A, E>(dir: string, effect: Effect.Effect<A, E, Store | Fs>) =>
  Effect.provide(effect, SessionStore.layerJsonl({ directory: dir }))

const store = SessionStore.SessionStore

/** The pid of a process that has exited. */
const deadPid = spawnSync(process.execPath, ["-e", ""]).pid!

/**
 * Makes the writer lock of the log at `path` look like its writer died (a crash): the lock
 * names an exited process, so the next store takes it over.
 */
const abandonLock = (path: string) => NodeFs.writeFileSync(`${path}.lock`, JSON.stringify({ pid: deadPid, host: Os.hostname() }))

const readText = (path: string) => Effect.orDie(Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(path)))
const writeText = (path: string, text: string) =>
  Effect.orDie(Effect.flatMap(FileSystem.FileSystem, (fs) => fs.writeFileString(path, text)))

const seqs = (events: ReadonlyArray<SessionEvent>) => events.map((e) => e.seq)

// ---------------------------------------------------------------------------------------------
// Memory store
// ---------------------------------------------------------------------------------------------

describe("SessionStore.layerMemory", () => {
  it.effect("assigns seq and time from the Clock, and serves open/read/list", () =>
    Effect.gen(function*() {
      const s = yield* store
      yield* TestClock.adjust(1000)
      const log = yield* s.create({ id: "b" })
      expect(log.header).toEqual({ type: "session", format: "effect-agent-loop", version: 1, id: "b", createdAt: 1000 })
      const first = yield* log.append([turnStart(1), { type: "step/start", data: { turn: 1, step: 1 } }])
      yield* TestClock.adjust(250)
      const second = yield* log.append([{ type: "plugin/note", data: { x: 1 } }])
      expect(first).toEqual([
        { type: "turn/start", seq: 0, time: 1000, data: { turn: 1 } },
        { type: "step/start", seq: 1, time: 1000, data: { turn: 1, step: 1 } }
      ])
      expect(second).toEqual([{ type: "plugin/note", seq: 2, time: 1250, data: { x: 1 } }])
      expect(Object.isFrozen(first[0])).toBe(true)
      expect(Object.isFrozen(second[0]!.data)).toBe(true)
      expect(yield* log.append([])).toEqual([])

      yield* s.create({ id: "a", createdAt: 7, cwd: "/w" })
      expect(yield* s.list).toEqual(["a", "b"])
      expect(yield* s.open("b")).toBe(log)
      const contents = yield* s.read("b")
      expect(contents.events).toEqual([...first, ...second])
      expect(contents.warnings).toEqual([])
      expect((yield* s.read("a")).header).toEqual({
        type: "session",
        format: "effect-agent-loop",
        version: 1,
        id: "a",
        createdAt: 7,
        cwd: "/w"
      })

      const missing = yield* Effect.flip(s.open("nope"))
      expect(missing._tag).toBe("SessionNotFound")
      expect((yield* Effect.flip(s.read("nope")))._tag).toBe("SessionNotFound")
      const duplicate = yield* Effect.flip(s.create({ id: "a" }))
      expect(duplicate._tag).toBe("SessionStoreError")
    }).pipe(Effect.provide(SessionStore.layerMemory)))

  it.effect("an append takes the time of the appending fiber's Clock, whichever fiber appends (memory and JSONL)", () => {
    const fixed = (ms: number): Clock.Clock => ({
      [Clock.ClockTypeId]: Clock.ClockTypeId,
      unsafeCurrentTimeMillis: () => ms,
      unsafeCurrentTimeNanos: () => BigInt(ms) * 1_000_000n,
      currentTimeMillis: Effect.succeed(ms),
      currentTimeNanos: Effect.succeed(BigInt(ms) * 1_000_000n),
      sleep: () => Effect.void
    })
    const check = Effect.gen(function*() {
      const log = yield* Effect.flatMap(store, (s) => s.create())
      const note = (n: number) => log.append([{ type: "plugin/note", data: { n } }])
      yield* TestClock.setTime(100)
      const times: Array<number> = []
      for (const [clock, n] of [[fixed(5), 1], [undefined, 2], [fixed(9), 3], [fixed(5), 4], [undefined, 5]] as const) {
        const appended = clock === undefined ? yield* note(n) : yield* Effect.withClock(note(n), clock)
        times.push(appended[0]!.time)
      }
      // Two fibers with their own clocks, appending in turn.
      const fiber = (clock: Clock.Clock, n: number) =>
        Effect.withClock(Effect.forEach([0, 1, 2], (k) => Effect.zipRight(Effect.yieldNow(), note(n + k))), clock)
      const both = yield* Effect.all([fiber(fixed(7), 10), fiber(fixed(8), 20)], { concurrency: 2 })
      expect(times).toEqual([5, 100, 9, 5, 100])
      expect(both.map((r) => r.map((e) => e[0]!.time))).toEqual([[7, 7, 7], [8, 8, 8]])
    })
    return Effect.all([
      check.pipe(Effect.provide(SessionStore.layerMemory)),
      withJsonl(() => check)
    ], { discard: true })
  })

  it.effect("takes the default id from the IdGenerator in context", () =>
    Effect.gen(function*() {
      const expected = yield* IdGenerator.seeded(42).next
      const log = yield* (yield* store).create()
      expect(log.id).toBe(expected)
      expect(log.header.id).toBe(expected)
    }).pipe(Effect.provide(SessionStore.layerMemory), Effect.provide(IdGenerator.layerSeeded(42))))
})

// ---------------------------------------------------------------------------------------------
// JSONL store: writing
// ---------------------------------------------------------------------------------------------

describe("SessionStore.layerJsonl", () => {
  it.scoped("a lock path that is a fifo or a link to /dev/zero is refused at once, naming it (never opened for reading)", () =>
    Effect.gen(function*() {
      const directory = yield* tmpDir
      yield* Effect.scoped(Effect.flatMap(SessionStore.makeJsonl({ directory }), (store) => store.create({ id: "s" })))
      const lock = `${directory}/s.jsonl.lock`
      for (const make of [() => spawnSync("mkfifo", [lock]), () => NodeFs.symlinkSync("/dev/zero", lock)]) {
        make()
        const error = yield* Effect.flip(
          Effect.scoped(Effect.flatMap(SessionStore.makeJsonl({ directory }), (store) => store.open("s")))
        )
        expect(error.message).toMatch(
          new RegExp(`^cannot lock session "s": ${lock} is (not a regular file|a symbolic link), not a lock file; remove it$`)
        )
        NodeFs.rmSync(lock)
      }
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("readFile of a directory, a fifo or /dev/zero: one line naming what it is, nothing read", () =>
    Effect.gen(function*() {
      const directory = yield* tmpDir
      const fifo = `${directory}/p`
      spawnSync("mkfifo", [fifo])
      const messages: Array<string> = []
      for (const path of [directory, fifo, "/dev/zero"]) {
        messages.push((yield* Effect.flip(SessionStore.readFile(path))).message)
      }
      expect(messages).toEqual([
        `cannot read ${directory}: not a regular file (a directory)`,
        `cannot read ${fifo}: not a regular file (a fifo)`,
        "cannot read /dev/zero: not a regular file (a character device)"
      ])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("a log path that is a fifo or a link to /dev/zero: open and read refuse it at once, naming it, and leave no lock", () =>
    Effect.gen(function*() {
      const directory = yield* tmpDir
      const log = `${directory}/s.jsonl`
      const cases: ReadonlyArray<readonly [() => unknown, string]> = [
        [() => spawnSync("mkfifo", [log]), "a fifo"],
        [() => NodeFs.symlinkSync("/dev/zero", log), "a character device"]
      ]
      for (const [make, kind] of cases) {
        make()
        // Before: reading the fifo waited for a writer for ever; /dev/zero was read until memory ran out.
        const [read, open] = yield* Effect.scoped(Effect.flatMap(SessionStore.makeJsonl({ directory }), (store) =>
          Effect.all([
            Effect.flip(store.read("s")),
            Effect.flip(store.open("s"))
          ]))).pipe(Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => `${kind}: no answer within 5 s` }))
        expect([read, open]).toMatchObject([
          { _tag: "SessionStoreError", message: `cannot read ${log}: not a regular file (${kind})` },
          { _tag: "SessionStoreError", message: `cannot open ${log}: not a regular file (${kind})` }
        ])
        expect(NodeFs.readdirSync(directory)).toEqual(["s.jsonl"])
        NodeFs.rmSync(log)
      }
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.live("needs no FileSystem service: it writes through node:fs (the layer's type has no requirement)", () => {
    // Built and run with nothing in context but the layer itself (no NodeFileSystem.layer).
    const dir = NodeFs.mkdtempSync(Os.tmpdir() + "/effect-agent-loop-nofs-")
    const layer: Layer.Layer<SessionStore.SessionStore> = SessionStore.layerJsonl({ directory: `${dir}/sessions` })
    return Effect.gen(function*() {
      const s = yield* store
      const log = yield* s.create({ id: "n1", createdAt: 3 })
      yield* log.append([{ type: "plugin/note", data: { x: 1 } }])
      const reopened = yield* s.read("n1")
      expect(reopened.events.map((e) => e.type)).toEqual(["plugin/note"])
      expect(yield* s.list).toEqual(["n1"])
      expect(NodeFs.readFileSync(`${dir}/sessions/n1.jsonl`, "utf8").split("\n")[0]).toBe(
        "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"n1\",\"createdAt\":3}"
      )
      expect(NodeFs.existsSync(`${dir}/sessions/n1.jsonl.lock`)).toBe(true)
    }).pipe(
      Effect.scoped,
      Effect.provide(layer),
      Effect.tap(() => Effect.sync(() => expect(NodeFs.existsSync(`${dir}/sessions/n1.jsonl.lock`)).toBe(false))),
      Effect.ensuring(Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true })))
    )
  })

  it.effect("writes the header line and one line per event with seq and time", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const s = yield* store
        yield* TestClock.adjust(1000)
        const log = yield* s.create({ id: "s1", cwd: "/work" })
        expect(log.path).toBe(`${dir}/s1.jsonl`)
        expect(yield* readText(`${dir}/s1.jsonl`)).toBe(
          "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"s1\",\"createdAt\":1000,\"cwd\":\"/work\"}\n"
        )
        yield* log.append([turnStart(1), { type: "step/start", data: { turn: 1, step: 1 } }])
        yield* TestClock.adjust(42)
        const [event] = yield* log.append([{ type: "user/message", data: userMessage("m1", "hi") }])
        expect(event).toEqual({ type: "user/message", seq: 2, time: 1042, data: userMessage("m1", "hi") })
        expect((yield* readText(`${dir}/s1.jsonl`)).split("\n").slice(1)).toEqual([
          "{\"type\":\"turn/start\",\"seq\":0,\"time\":1000,\"data\":{\"turn\":1}}",
          "{\"type\":\"step/start\",\"seq\":1,\"time\":1000,\"data\":{\"turn\":1,\"step\":1}}",
          "{\"type\":\"user/message\",\"seq\":2,\"time\":1042,\"data\":{\"id\":\"m1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"source\":{\"kind\":\"user\"}}}",
          ""
        ])
        expect(log.events().map((e) => [e.seq, e.time])).toEqual([[0, 1000], [1, 1000], [2, 1042]])
      })
    ))

  it.effect("reads back exactly what it wrote, and a reopened log continues its seq", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const s = yield* store
        const log = yield* s.create({ id: "rt", createdAt: 5 })
        const drafts: ReadonlyArray<EventDraft> = [
          {
            type: "agent/inbox/spliced",
            data: { target: "next-turn", start: 0, inserted: [userMessage("u1", "hello")], wake: true }
          },
          turnStart(1),
          { type: "agent/inbox/spliced", data: { target: "next-turn", start: 0, removedCount: 1, inserted: [] } },
          { type: "step/start", data: { turn: 1, step: 1 } },
          { type: "user/message", data: userMessage("u1", "hello") },
          {
            type: "request/header",
            data: { turn: 1, step: 1, provider: "offline", model: "m", tools: [], settings: { temperature: 0 } }
          },
          {
            type: "assistant/message",
            data: {
              turn: 1,
              step: 1,
              message: {
                id: "a1" as MessageId,
                role: "assistant",
                content: [
                  { type: "reasoning", text: "think", providerState: { signature: "sig" } },
                  { type: "text", text: "ünïcødé ✓ 𝄞" },
                  { type: "tool-call", id: "c1", name: "clock", arguments: "{}" }
                ],
                source: { kind: "model", provider: "offline", model: "m" }
              },
              usage: { inputTokens: 3, outputTokens: 4 },
              finish: "tool-calls"
            }
          },
          { type: "tool/call", data: { turn: 1, step: 1, callId: "c1", name: "clock", arguments: "{}" } },
          {
            type: "tool/result",
            data: {
              turn: 1,
              step: 1,
              message: {
                id: "r1" as MessageId,
                role: "user",
                content: [{ type: "tool-result", toolCallId: "c1", content: [{ type: "text", text: "12:00" }] }],
                source: { kind: "tool", callId: "c1" }
              }
            }
          },
          { type: "session/title", data: { title: "t", extra: [1, null, { deep: true }] } },
          { type: "step/end", data: { turn: 1, step: 1 } },
          { type: "turn/end", data: { turn: 1, reason: { kind: "completed" } } }
        ]
        const committed = yield* log.append(drafts)
        const path = `${dir}/rt.jsonl`
        const contents = yield* SessionStore.readFile(path)
        expect(contents.header).toEqual(log.header)
        expect(contents.events).toEqual(committed)
        expect(contents.warnings).toEqual([])
        expect(contents.tornTail).toBe(false)
        expect(contents.validBytes).toBe(Buffer.byteLength(yield* readText(path)))
        expect(Object.isFrozen(contents.events[6]!.data)).toBe(true)

        // A second store reads the file, and reopens it once its writer is gone.
        const refused = yield* Effect.flip(inNewStore(dir, Effect.flatMap(store, (other) => other.open("rt"))))
        expect(refused.message).toBe(
          `session "rt" is open for writing by another store of this process (one writer per session)`
        )
        abandonLock(path)
        yield* inNewStore(
          dir,
          Effect.gen(function*() {
            const other = yield* store
            expect((yield* other.read("rt")).events).toEqual(committed)
            const reopened = yield* other.open("rt")
            expect(reopened.events()).toEqual(committed)
            yield* TestClock.adjust(9)
            const [next] = yield* reopened.append([turnStart(2)])
            expect(next).toEqual({ type: "turn/start", seq: 12, time: 9, data: { turn: 2 } })
          })
        )
        expect(seqs((yield* SessionStore.readFile(path)).events)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
      })
    ))

  it.effect("a lock of a dead writer is taken over, also one with this process's pid and host from an earlier process (a restarted container)", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const s = yield* store
        const log = yield* s.create({ id: "restarted" })
        yield* log.append([turnStart(1)])
        const path = `${dir}/restarted.jsonl`
        // What a crashed process with the same pid (and the same host name) left behind.
        const earlier = { pid: process.pid, host: Os.hostname(), instance: "an-earlier-process" }
        yield* inNewStore(
          dir,
          Effect.gen(function*() {
            NodeFs.writeFileSync(`${path}.lock`, JSON.stringify(earlier))
            const reopened = yield* (yield* store).open("restarted")
            expect(reopened.events().map((e) => e.type)).toEqual(["turn/start"])
            expect(JSON.parse(NodeFs.readFileSync(`${path}.lock`, "utf8")).instance).not.toBe("an-earlier-process")
          })
        )
        // A live process of this host keeps it, and the error says how to free it.
        NodeFs.writeFileSync(`${path}.lock`, JSON.stringify({ pid: process.ppid, host: Os.hostname() }))
        const refused = yield* Effect.flip(inNewStore(dir, Effect.flatMap(store, (other) => other.open("restarted"))))
        expect(refused.message).toBe(
          `session "restarted" is open for writing by process ${process.ppid} (one writer per session; if that process is gone, remove ${path}.lock)`
        )
      })
    ))

  it.effect(
    "open takes the writer lock before it reads the log: another process's resume while it reads is refused",
    () =>
      withJsonl((dir) =>
        Effect.gen(function*() {
          // §23: a second `resume` read the log, the first process completed its turn and
          // exited, then the second took the lock and "repaired" that turn at seqs already used.
          // Here the second process (the built CLI) runs while this store reads the log: it must
          // find the lock taken, and this store's events are what the file held.
          const path = `${dir}/two.jsonl`
          yield* inNewStore(
            dir,
            Effect.scoped(
              Effect.flatMap(Effect.flatMap(store, (s) => s.create({ id: "two" })), (log) => log.append([turnStart(1)]))
            )
          )
          const before = NodeFs.readFileSync(path, "utf8")
          let second: { status: number | null; stderr: string } | undefined
          const io: JsonlIo = {
            ...realIo,
            readAll: (fd, done) => {
              const r = spawnSync(process.execPath, ["dist/cli/bin.js", "resume", path], {
                encoding: "utf8",
                timeout: CLI_RUN_MS
              })
              second = { status: r.status, stderr: r.stderr }
              NodeFs.readFile(fd, done)
            }
          }
          const log = yield* Effect.scoped(
            Effect.flatMap(makeJsonlWith({ directory: dir }, io), (s) => s.open("two"))
          )
          expect(second).toEqual({
            status: 2,
            stderr:
              `${path}: session "two" is open for writing by process ${process.pid} (one writer per session; if that process is gone, remove ${path}.lock)\n`
          })
          expect(log.events().map((e) => [e.seq, e.type])).toEqual([[0, "turn/start"]])
          expect(NodeFs.readFileSync(path, "utf8")).toBe(before)
        })
      ),
    30_000
  )

  it.effect("open of a session a live writer holds fails on the lock without reading the log (a log that does not decode)", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const path = `${dir}/held.jsonl`
        NodeFs.writeFileSync(path, "not a log\n")
        NodeFs.writeFileSync(`${path}.lock`, JSON.stringify({ pid: process.ppid, host: Os.hostname() }))
        const refused = yield* Effect.flip((yield* store).open("held"))
        expect([refused._tag, refused.message]).toEqual([
          "SessionStoreError",
          `session "held" is open for writing by process ${process.ppid} (one writer per session; if that process is gone, remove ${path}.lock)`
        ])
        // Once the writer is gone, the same open reads the log and names its bad line; the lock
        // is released again.
        NodeFs.unlinkSync(`${path}.lock`)
        const unreadable = yield* Effect.flip((yield* store).open("held"))
        expect(unreadable._tag).toBe("SessionLogError")
        expect(NodeFs.existsSync(`${path}.lock`)).toBe(false)
      })
    ))

  it.effect("serializes concurrent appends: contiguous seqs, each append's events adjacent", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const log = yield* (yield* store).create({ id: "c" })
        const results = yield* Effect.forEach(
          Array.from({ length: 50 }, (_, i) => i),
          (i) => log.append([{ type: "x/first", data: { i } }, { type: "x/second", data: { i } }]),
          { concurrency: "unbounded" }
        )
        for (const [first, second] of results) {
          expect(second!.seq).toBe(first!.seq + 1)
          expect(first!.seq % 2).toBe(0)
          expect(second!.data).toEqual(first!.data)
        }
        expect(new Set(results.map(([first]) => first!.seq)).size).toBe(50)
        expect(seqs(log.events())).toEqual(Array.from({ length: 100 }, (_, i) => i))
        expect((yield* SessionStore.readFile(`${dir}/c.jsonl`)).events).toEqual(log.events())
      })
    ))

  it.effect("create where the directory cannot be made: a SessionStoreError naming the path at fault, nothing written", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const file = `${dir}/afile`
      NodeFs.writeFileSync(file, "")
      for (const directory of [`${file}/sessions`, file]) {
        const error = yield* Effect.flip(
          Effect.flatMap(store, (s) => s.create({ id: "s1" })).pipe(
            Effect.provide(SessionStore.layerJsonl({ directory }))
          )
        )
        expect(error).toMatchObject({
          _tag: "SessionStoreError",
          sessionId: "s1",
          message: `cannot create ${directory}: ${file} is not a directory (a regular file)`
        })
      }
      expect(NodeFs.readFileSync(file, "utf8")).toBe("")
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))

  it.live(
    "create under /proc fails at once (Node's recursive mkdir never returned there, holding the event loop)",
    () =>
      Effect.gen(function*() {
        // In a child process with a bound: a regression would hang the test worker itself.
        const script = [
          "import { Effect } from \"effect\"",
          "import { SessionStore } from \"./dist/index.js\"",
          "const create = Effect.flatMap(SessionStore.SessionStore, (s) => s.create({ id: \"s1\" }))",
          "const error = await Effect.runPromise(Effect.flip(Effect.provide(create, SessionStore.layerJsonl({ directory: process.argv[1] }))))",
          "console.log(`${error._tag}: ${error.message}`)"
        ].join("\n")
        const ran = yield* run(process.execPath, ["--input-type=module", "-e", script, "/proc/agent-loop-nope/sessions"], {
          withinMs: CLI_RUN_MS
        })
        expect(ran).toEqual({
          status: 0,
          signal: null,
          stdout:
            "SessionStoreError: cannot create /proc/agent-loop-nope/sessions: /proc does not take new directories (ENOENT)\n",
          stderr: ""
        })
      }),
    2 * CLI_RUN_MS
  )

  it.effect("lists sorted ids, and an empty list before the directory exists", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = `${yield* tmpDir}/sessions/nested`
      yield* Effect.gen(function*() {
        const s = yield* store
        expect(yield* s.list).toEqual([])
        yield* s.create({ id: "zeta" })
        yield* s.create({ id: "alpha" })
        yield* s.create({ id: "mid.dle" })
        yield* writeText(`${dir}/notes.txt`, "not a session")
        expect(yield* s.list).toEqual(["alpha", "mid.dle", "zeta"])
        const duplicate = yield* Effect.flip(s.create({ id: "alpha" }))
        expect(duplicate).toMatchObject({ _tag: "SessionStoreError", message: "session \"alpha\" already exists" })
        const traversal = yield* Effect.flip(s.create({ id: "../evil" }))
        expect(traversal._tag).toBe("SessionStoreError")
        expect((yield* Effect.flip(s.open("../evil")))._tag).toBe("SessionNotFound")
        expect((yield* Effect.flip(s.open("missing")))._tag).toBe("SessionNotFound")
        expect((yield* Effect.flip(s.read("missing")))._tag).toBe("SessionNotFound")
      }).pipe(Effect.provide(SessionStore.layerJsonl({ directory: dir })))
    })).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("a failed write changes nothing: no event in memory, the file cut back", () =>
    Effect.gen(function*() {
      // "partial": the first write(2) stores half of the bytes (a short write), the write of
      // the rest fails.
      let mode: "ok" | "fail" | "partial" = "ok"
      const io: JsonlIo = {
        ...realIo,
        writeText: (fd, text) => {
          if (mode === "ok") return realIo.writeText(fd, text)
          if (mode === "partial") {
            mode = "fail"
            const bytes = Buffer.from(text)
            return realIo.write(fd, bytes, 0, bytes.length >> 1)
          }
          throw new Error("no space left on device (test)")
        },
        write: (fd, bytes, offset, length) => {
          if (mode === "ok") return realIo.write(fd, bytes, offset, length)
          throw new Error("no space left on device (test)")
        }
      }
      yield* withJsonl((dir) =>
        Effect.gen(function*() {
          const log = yield* (yield* store).create({ id: "f" })
          yield* log.append([turnStart(1)])
          const path = `${dir}/f.jsonl`
          const before = yield* readText(path)
          for (const failing of ["fail", "partial"] as const) {
            mode = failing
            const error = yield* Effect.flip(log.append([{ type: "step/start", data: { turn: 1, step: 1 } }, turnStart(9)]))
            expect(error).toMatchObject({ _tag: "SessionStoreError", sessionId: "f" })
            expect(error.message).toContain("no space left on device (test)")
            expect(seqs(log.events())).toEqual([0])
            expect(yield* readText(path)).toBe(before)
          }
          mode = "ok"
          const [next] = yield* log.append([{ type: "step/start", data: { turn: 1, step: 1 } }])
          expect(next!.seq).toBe(1)
          expect((yield* SessionStore.readFile(path)).events).toEqual(log.events())
        }), { io })
    }))

  it.effect("fsync batch: every append waits for an fsync that started after its write", () =>
    Effect.gen(function*() {
      let syncs = 0
      const io: JsonlIo = { ...realIo, datasync: (fd, done) => (syncs++, realIo.datasync(fd, done)) }
      yield* withJsonl((dir) =>
        Effect.gen(function*() {
          const log = yield* (yield* store).create({ id: "b" })
          expect(syncs).toBe(1) // the header
          yield* log.append([turnStart(1)])
          expect(syncs).toBe(2)
          yield* log.append([{ type: "step/start", data: { turn: 1, step: 1 } }])
          expect(syncs).toBe(3)
          expect(seqs((yield* SessionStore.readFile(`${dir}/b.jsonl`)).events)).toEqual([0, 1])
        }), { fsync: "batch", io })
    }))

  it.effect("fsync batch: appends made during a round's fdatasync share the next round: one write, one fdatasync", () =>
    Effect.gen(function*() {
      let armed = false
      let syncs = 0
      let writes = 0
      const firstSyncStarted = yield* Deferred.make<void>()
      let held: (() => void) | undefined = undefined
      const io: JsonlIo = {
        ...realIo,
        datasync: (fd, done) => {
          if (!armed) return realIo.datasync(fd, done)
          syncs++
          if (syncs === 1) {
            // The first round's fdatasync is held until the test releases it.
            held = () => realIo.datasync(fd, done)
            Deferred.unsafeDone(firstSyncStarted, Exit.void)
            return
          }
          realIo.datasync(fd, done)
        },
        writeText: (fd, text) => {
          if (armed) writes++
          return realIo.writeText(fd, text)
        }
      }
      yield* withJsonl((dir) =>
        Effect.gen(function*() {
          const log = yield* (yield* store).create({ id: "g" })
          armed = true
          const first = yield* Effect.fork(log.append([{ type: "x/n", data: { i: 0 } }]))
          yield* Deferred.await(firstSyncStarted)
          expect(writes).toBe(1)
          const rest = yield* Effect.fork(Effect.forEach(
            Array.from({ length: 49 }, (_, i) => i + 1),
            (i) => log.append([{ type: "x/n", data: { i } }]),
            { concurrency: "unbounded" }
          ))
          yield* Effect.repeatN(Effect.yieldNow(), 20)
          // Nothing is durable yet: the first fdatasync is held, the 49 are not even written.
          expect(first.unsafePoll()).toBe(null)
          expect(writes).toBe(1)
          expect(seqs(log.events())).toEqual([0])
          held!()
          const [firstEvent] = yield* Fiber.join(first)
          const others = yield* Fiber.join(rest)
          expect(firstEvent!.seq).toBe(0)
          expect(others.map(([e]) => e!.seq)).toEqual(Array.from({ length: 49 }, (_, i) => i + 1))
          expect(writes).toBe(2)
          expect(syncs).toBe(2)
          expect((yield* SessionStore.readFile(`${dir}/g.jsonl`)).events).toEqual(log.events())
        }), { fsync: "batch", io })
    }))

  it.effect("fsync batch: a failed write fails the round's appends and the log goes on", () =>
    Effect.gen(function*() {
      let failWrite = false
      const io: JsonlIo = {
        ...realIo,
        writeText: (fd, text) => {
          if (failWrite) {
            realIo.writeText(fd, text.slice(0, 7)) // a torn part reaches the file
            throw new Error("no space left on device (test)")
          }
          return realIo.writeText(fd, text)
        }
      }
      yield* withJsonl((dir) =>
        Effect.gen(function*() {
          const log = yield* (yield* store).create({ id: "w" })
          yield* log.append([turnStart(1)])
          failWrite = true
          const failed = yield* Effect.flip(
            Effect.all([log.append([turnStart(2)]), log.append([turnStart(3)])], { concurrency: "unbounded" })
          )
          expect(failed).toMatchObject({ _tag: "SessionStoreError", sessionId: "w" })
          failWrite = false
          const [next] = yield* log.append([turnStart(4)])
          expect(next!.seq).toBe(1)
          expect(seqs(log.events())).toEqual([0, 1])
          expect((yield* SessionStore.readFile(`${dir}/w.jsonl`)).events).toEqual(log.events())
        }), { fsync: "batch", io })
    }))

  it.scoped("fsync batch: closing the store fails the appends still waiting; nothing of theirs is written", () =>
    Effect.gen(function*() {
      let held: (() => void) | undefined = undefined
      const started = yield* Deferred.make<void>()
      let armed = false
      const io: JsonlIo = {
        ...realIo,
        datasync: (fd, done) => {
          if (!armed) return realIo.datasync(fd, done)
          armed = false
          held = () => realIo.datasync(fd, done)
          Deferred.unsafeDone(started, Exit.void)
        }
      }
      const dir = yield* tmpDir
      let second: Fiber.RuntimeFiber<unknown, unknown> | undefined = undefined
      const program = Effect.scoped(Effect.gen(function*() {
        const log = yield* (yield* store).create({ id: "c" })
        armed = true
        const first = yield* Effect.fork(log.append([turnStart(1)]))
        yield* Deferred.await(started)
        second = yield* Effect.fork(log.append([turnStart(2)]))
        yield* Effect.repeatN(Effect.yieldNow(), 10)
        return first
      })).pipe(Effect.provide(
        Layer.scoped(
          SessionStore.SessionStore,
          Effect.map(makeJsonlWith({ directory: dir, fsync: "batch" }, io), SessionStore.SessionStore.of)
        )
      ))
      const main = yield* Effect.fork(program)
      yield* Deferred.await(started)
      yield* Effect.repeatN(Effect.yieldNow(), 50)
      // The store is closing and waits for the running round.
      expect(main.unsafePoll()).toBe(null)
      held!()
      const first = yield* Fiber.join(main)
      expect(Exit.isSuccess(yield* Fiber.await(first))).toBe(true)
      const secondExit = yield* Fiber.await(second!)
      expect(Exit.isFailure(secondExit) && Cause.squash(secondExit.cause)).toMatchObject({
        message: "session \"c\" was closed before its fsync"
      })
      expect(seqs((yield* SessionStore.readFile(`${dir}/c.jsonl`)).events)).toEqual([0])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("fsync batch: a failed fsync fails the waiting append and breaks the log", () =>
    Effect.gen(function*() {
      let failSync = false
      const io: JsonlIo = {
        ...realIo,
        datasync: (fd, done) => (failSync ? done(new Error("no space left on device (test)")) : realIo.datasync(fd, done))
      }
      yield* withJsonl(() =>
        Effect.gen(function*() {
          const log = yield* (yield* store).create({ id: "x" })
          failSync = true
          const error = yield* Effect.flip(log.append([turnStart(1)]))
          expect(error).toMatchObject({ _tag: "SessionStoreError", sessionId: "x" })
          failSync = false
          const later = yield* Effect.flip(log.append([turnStart(2)]))
          expect(later.message).toBe("session \"x\" is broken: an fsync failed")
          expect(seqs(log.events())).toEqual([0])
        }), { fsync: "batch", io })
    }))
})

// ---------------------------------------------------------------------------------------------
// Reading: torn tails, corruption
// ---------------------------------------------------------------------------------------------

describe("reading logs", () => {
  const nextLine = "{\"type\":\"turn/start\",\"seq\":2,\"time\":0,\"data\":{\"turn\":2}}"

  it.effect("a torn last line is ignored with a warning, and open cuts it off", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const s = yield* store
        for (const cut of [1, 10, nextLine.length - 1]) {
          const id = `torn-${cut}`
          const path = `${dir}/${id}.jsonl`
          const log = yield* s.create({ id })
          const written = yield* log.append([turnStart(1), { type: "step/start", data: { turn: 1, step: 1 } }])
          const complete = yield* readText(path)
          yield* writeText(path, complete + nextLine.slice(0, cut))

          const contents = yield* SessionStore.readFile(path)
          expect(contents.events).toEqual(written)
          expect(contents.tornTail).toBe(true)
          expect(contents.validBytes).toBe(Buffer.byteLength(complete))
          expect(contents.warnings).toEqual([`line 4: torn last line ignored (${cut} characters, not JSON)`])
          expect(yield* readText(path)).toBe(complete + nextLine.slice(0, cut)) // reading changes nothing

          abandonLock(path) // the writer crashed
          yield* inNewStore(
            dir,
            Effect.gen(function*() {
              const reopened = yield* (yield* store).open(id)
              expect(yield* readText(path)).toBe(complete) // cut back before any append
              expect(reopened.events()).toEqual(written)
              yield* reopened.append([turnStart(2)])
            })
          )
          expect(yield* readText(path)).toBe(complete + nextLine + "\n")
        }
      })
    ))

  it.effect("a complete last line without a newline counts; the next append adds the newline", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const path = `${dir}/nl.jsonl`
        const header = "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"nl\",\"createdAt\":0}"
        const first = "{\"type\":\"turn/start\",\"seq\":0,\"time\":3,\"data\":{\"turn\":1}}"
        yield* writeText(path, `${header}\n${first}`)
        const contents = yield* SessionStore.readFile(path)
        expect(contents.events).toEqual([{ type: "turn/start", seq: 0, time: 3, data: { turn: 1 } }])
        expect(contents.tornTail).toBe(false)
        const log = yield* (yield* store).open("nl")
        yield* log.append([{ type: "turn/end", data: { turn: 1, reason: { kind: "completed" } } }])
        expect(yield* readText(path)).toBe(
          `${header}\n${first}\n{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}\n`
        )
      })
    ))

  it.effect("a header alone is a valid empty log; blank lines are skipped with a warning", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const header = "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"h\",\"createdAt\":0}"
        yield* writeText(`${dir}/h.jsonl`, header + "\n")
        const empty = yield* SessionStore.readFile(`${dir}/h.jsonl`)
        expect(empty.events).toEqual([])
        expect(empty.warnings).toEqual([])
        expect((yield* (yield* store).open("h")).events()).toEqual([])

        const e0 = "{\"type\":\"turn/start\",\"seq\":0,\"time\":0,\"data\":{\"turn\":1}}"
        yield* writeText(`${dir}/blank.jsonl`, `${header}\n\n${e0}\n  \n`)
        const blank = yield* SessionStore.readFile(`${dir}/blank.jsonl`)
        expect(seqs(blank.events)).toEqual([0])
        expect(blank.warnings).toEqual(["2 blank lines skipped (first: line 2)"])
      })
    ))

  it.effect("corruption before the tail is a SessionLogError naming the line", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const header = "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"k\",\"createdAt\":0}"
        const ok = (seq: number) => `{"type":"turn/start","seq":${seq},"time":0,"data":{"turn":${seq + 1}}}`
        const cases: ReadonlyArray<readonly [string, number, string]> = [
          [`${header}\n${ok(0)}\n{"type":"turn/start","se\n${ok(2)}\n`, 3, "not JSON"],
          [`${header}\n${ok(0)}\n${ok(2)}\n`, 3, "\"turn/start\" has seq 2 where 1 was expected"],
          [`${header}\n${ok(0)}\n{"type":"x/y","seq":1,"data":{}}\n`, 3, "\"x/y\" has no numeric \"time\""],
          [`${header}\n["type"]\n`, 2, "event is an array, not an object"],
          [
            `${header}\n${
              ok(0)
            }\n{"type":"user/message","seq":1,"time":0,"data":{"id":"m","role":"user","content":[{"type":"text","text":5}],"source":{"kind":"user"}}}\n${
              ok(2)
            }\n`,
            3,
            "invalid \"user/message\" data: Expected string, actual 5 at .content[0].text"
          ],
          [`${header}\n{"type":"turn/start","seq":0,"time":0,"data":{"turn":-1}}\n`, 2, "invalid \"turn/start\" data"],
          [`{"type":"session","version":1,"id":"k","createdAt":0}\n`, 1, "version 1 header without"],
          [`{"type":"session","version":7,"id":"k","createdAt":0}\n`, 1, "unsupported log version 7"],
          [`{"type":"turn/start"}\n`, 1, "not a session header"],
          [`{"type":"session","version":1`, 1, "incomplete header line"],
          ["", 1, "empty log: no header line"]
        ]
        for (const [text, line, message] of cases) {
          const path = `${dir}/k.jsonl`
          yield* writeText(path, text)
          const error = yield* Effect.flip(SessionStore.readFile(path))
          expect(error._tag).toBe("SessionLogError")
          if (error._tag !== "SessionLogError") continue
          expect({ line: error.line, path: error.path }).toEqual({ line, path })
          expect(error.message).toContain(`${path}, line ${line}: `)
          expect(error.message).toContain(message)
          const viaStore = yield* Effect.flip(inNewStore(dir, Effect.flatMap(store, (s) => s.open("k"))))
          expect(viaStore).toMatchObject({ _tag: "SessionLogError", line })
        }
      })
    ))

  it.effect("a line nested deeper than 256 levels is a SessionLogError naming it (10,000 levels overflowed the stack)", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const header = "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"d\",\"createdAt\":0}"
        const nest = (n: number) => "[".repeat(n) + "]".repeat(n)
        // Data nesting 255 makes a line of 256 (the event's object is 1).
        const plugin = (depth: number) => `{"type":"x/y","seq":0,"time":0,"data":${nest(depth)}}`
        // Tool results nested in tool results: what the reader's own checks recurse through.
        let content = "[{\"type\":\"text\",\"text\":\"x\"}]"
        for (let i = 0; i < 5000; i++) content = `[{"type":"tool-result","toolCallId":"c","content":${content}}]`
        const result =
          `{"type":"tool/result","seq":0,"time":0,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","content":${content},"source":{"kind":"tool"}}}}`
        const path = `${dir}/d.jsonl`
        yield* writeText(path, `${header}\n${plugin(255)}\n`)
        expect((yield* SessionStore.readFile(path)).events).toHaveLength(1)
        for (const line of [plugin(256), plugin(10_000), result]) {
          yield* writeText(path, `${header}\n${line}\n`)
          const error = yield* Effect.flip(SessionStore.readFile(path))
          expect(error).toMatchObject({
            _tag: "SessionLogError",
            line: 2,
            message: `${path}, line 2: nested deeper than 256 levels of arrays and objects (the reader's limit)`
          })
          const viaStore = yield* Effect.flip(inNewStore(dir, Effect.flatMap(store, (s) => s.open("d"))))
          expect(viaStore).toMatchObject({ _tag: "SessionLogError", line: 2 })
        }
      })
    ))

  it.effect("an append whose line would nest deeper than 256 levels is refused, and nothing is written", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const nested = (n: number): unknown => {
          let v: unknown = []
          for (let i = 1; i < n; i++) v = [v]
          return v
        }
        const s = yield* store
        const log = yield* s.create({ id: "a" })
        const before = yield* readText(`${dir}/a.jsonl`)
        for (const depth of [256, 10_000]) {
          // Frozen values are measured too (they are not walked to be frozen).
          for (const data of [nested(depth), Object.freeze(nested(depth))]) {
            const error = yield* Effect.flip(log.append([{ type: "x/y", data }]))
            expect(error).toMatchObject({
              _tag: "SessionStoreError",
              message:
                "cannot append to session \"a\": \"x/y\" data is nested deeper than 255 levels of arrays and objects (a log line may nest 256)"
            })
          }
        }
        expect(yield* readText(`${dir}/a.jsonl`)).toBe(before)
        yield* log.append([{ type: "x/y", data: nested(255) }])
        expect((yield* SessionStore.readFile(`${dir}/a.jsonl`)).events).toHaveLength(1)
        // The memory store refuses the same.
        const memory = yield* Effect.flatMap(store, (m) => m.create({ id: "m" })).pipe(Effect.provide(SessionStore.layerMemory))
        expect((yield* Effect.flip(memory.append([{ type: "x/y", data: nested(10_000) }])))._tag).toBe("SessionStoreError")
      })
    ))

  it.effect("readFile refuses what is not a regular file (a fifo, /dev/zero) without opening it", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const fifo = `${dir}/pipe.jsonl`
      expect(spawnSync("mkfifo", [fifo]).status).toBe(0)
      // Opening the fifo blocked until a writer came; /dev/zero was read until memory ran out.
      for (const [path, kind] of [[fifo, "a fifo"], ["/dev/zero", "a character device"]] as const) {
        const error = yield* Effect.flip(SessionStore.readFile(path))
        expect(error).toMatchObject({ _tag: "SessionStoreError", message: `cannot read ${path}: not a regular file (${kind})` })
      }
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))

  it.effect("readFile of a missing file, or one under a regular file: a SessionStoreError saying so in a few words", () =>
    Effect.gen(function*() {
      const path = `${dshFixturesDir}/no-such-file.jsonl`
      const error = yield* Effect.flip(SessionStore.readFile(path))
      expect(error).toMatchObject({ _tag: "SessionStoreError", message: `cannot read ${path}: no such file` })
      const dir = yield* tmpDir
      NodeFs.writeFileSync(`${dir}/afile`, "")
      const under = `${dir}/afile/s.jsonl`
      expect(yield* Effect.flip(SessionStore.readFile(under))).toMatchObject({
        _tag: "SessionStoreError",
        message: `cannot read ${under}: a part of the path is not a directory`
      })
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))
})

// ---------------------------------------------------------------------------------------------
// DSH v0 logs
// ---------------------------------------------------------------------------------------------

describe("DSH v0 logs", () => {
  const fixture = (name: string) => SessionStore.readFile(`${dshFixturesDir}/${name}`)

  it.effect("every fixture reads: contiguous seqs, times assigned, foreign events kept", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const names = (yield* fs.readDirectory(dshFixturesDir)).filter((n) => n.endsWith(".jsonl")).sort()
      expect(names.length).toBe(82)
      const types = new Set<string>()
      for (const name of names) {
        const contents = yield* fixture(name)
        expect(contents.header.version).toBe(0)
        expect(contents.tornTail).toBe(false)
        expect(contents.warnings).toEqual([])
        contents.events.forEach((event, i) => {
          expect(event.seq).toBe(i)
          expect(event.time).toBe(0)
          types.add(event.type)
        })
      }
      for (const type of ["session/title", "request/context", "hook/invoked", "todo/write", "assistant/chunk"]) {
        expect(types.has(type)).toBe(true)
      }
      expect([...types].filter((t) => t.endsWith("-chunks"))).toEqual([])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("expands packed chunk rows into one assistant/chunk per element", () =>
    Effect.gen(function*() {
      const { events, header } = yield* fixture("acp__tool-call-turn__session.jsonl")
      expect(header).toEqual({
        type: "session",
        version: 0,
        id: "e9421ff4-baae-4807-a7ea-fd8a65f2c897",
        createdAt: 1783352044766,
        cwd: "{{cwd}}",
        delegationDepth: 0
      })
      expect(events.length).toBe(104) // 34 rows; 17 + 31 + 25 packed elements
      expect(events.filter((e) => e.type === "assistant/chunk").length).toBe(87)
      expect(events[6]).toEqual({
        type: "session/title",
        seq: 6,
        time: 0,
        data: { title: "Use the bash tool to", messageSeqs: [4], source: { kind: "fallback" } }
      })
      expect(events[10]).toEqual({
        type: "assistant/chunk",
        seq: 10,
        time: 0,
        data: { turn: 1, step: 1, chunk: { type: "reasoning-delta", index: 0, text: "The" } }
      })
      expect(events[28]).toEqual({
        type: "assistant/chunk",
        seq: 28,
        time: 0,
        data: {
          turn: 1,
          step: 1,
          chunk: {
            type: "tool-call-delta",
            index: 1,
            id: "call_00_Rn2Mz1y8uZN62ukEXiNO2077",
            name: "bash",
            argumentsDelta: ""
          }
        }
      })
      // DSH's own provenance points at the expanded seqs: the tool/result cites its tool/call.
      expect(events[64]!.type).toBe("tool/call")
      const result = events.find((e) => e.type === "tool/result")!
      expect(result.sourceEventSeqs).toEqual([64])
      expect(result.surfaceOp).toBe("append")
      expect(events[4]!.surfaceOp).toBe("append")

      const packed = yield* fixture("acp__packed-chunks__session.jsonl")
      expect(packed.events.length).toBe(124)
      const text = packed.events.filter((e) =>
        e.type === "assistant/chunk" && (e.data as { chunk: { type: string } }).chunk.type === "text-delta"
      )
      expect(text.map((e) => (e.data as { chunk: { text: string } }).chunk.text).join("")).toBe(
        "The tool returned:\n\n> Error: bash is disabled by policy in this session\n\nI cannot run the command because the bash tool is disabled by policy."
      )
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("keeps seedLength and header-only logs", () =>
    Effect.gen(function*() {
      const fork = yield* fixture("acp__subagent-fork-in-process__session.1.jsonl")
      expect(fork.header.seedLength).toBe(42)
      expect(fork.header.parentSession).toBe("96cf59c9-b347-48b9-b234-a5200913ad05")
      expect(fork.events.length).toBe(99)
      expect(fork.events[42]!.type).toBe("session/end-seed")
      const handshake = yield* fixture("acp__handshake__session.jsonl")
      expect(handshake.events).toEqual([])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("assigns seq/time from seq0/time0/dt and the previous event", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const path = `${dir}/v0.jsonl`
        yield* writeText(
          path,
          [
            "{\"type\":\"session\",\"version\":0,\"id\":\"v0\",\"createdAt\":1,\"delegationDepth\":0}",
            "{\"type\":\"turn/start\",\"seq\":0,\"time\":1000,\"data\":{\"turn\":1}}",
            "{\"type\":\"text-chunks\",\"seq0\":1,\"time0\":2000,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[5,7],\"texts\":[\"a\",\"b\",\"c\"]}}",
            "{\"type\":\"session/title\",\"data\":{\"title\":\"x\"},\"ignorable\":true}",
            "{\"type\":\"tool-call-chunks\",\"data\":{\"turn\":1,\"step\":1,\"index\":1,\"dt\":[3],\"id\":\"c1\",\"args\":[\"{\",\"}\"]}}",
            "{\"type\":\"user/message\",\"time\":3000,\"data\":{\"id\":\"u\",\"role\":\"user\",\"content\":[{\"type\":\"image\",\"attachment\":{\"id\":\"a\"}}],\"source\":{\"kind\":\"user\"}},\"surfaceOp\":\"append\"}",
            ""
          ].join("\n")
        )
        const chunk = (seq: number, time: number, c: object) => ({
          type: "assistant/chunk",
          seq,
          time,
          data: { turn: 1, step: 1, chunk: c }
        })
        expect((yield* SessionStore.readFile(path)).events).toEqual([
          { type: "turn/start", seq: 0, time: 1000, data: { turn: 1 } },
          chunk(1, 2000, { type: "text-delta", index: 0, text: "a" }),
          chunk(2, 2005, { type: "text-delta", index: 0, text: "b" }),
          chunk(3, 2012, { type: "text-delta", index: 0, text: "c" }),
          { type: "session/title", seq: 4, time: 2012, data: { title: "x" }, ignorable: true },
          chunk(5, 2012, { type: "tool-call-delta", index: 1, id: "c1", argumentsDelta: "{" }),
          chunk(6, 2012, { type: "tool-call-delta", index: 1, id: "c1", argumentsDelta: "}" }),
          {
            type: "user/message",
            seq: 7,
            time: 3000,
            data: {
              id: "u",
              role: "user",
              content: [{ type: "image", attachment: { id: "a" } }],
              source: { kind: "user" }
            },
            surfaceOp: "append"
          }
        ])
      })
    ))

  it.effect("a legacy line it cannot read is a SessionLogError naming the line", () =>
    withJsonl((dir) =>
      Effect.gen(function*() {
        const header = "{\"type\":\"session\",\"version\":0,\"id\":\"bad\",\"createdAt\":1,\"delegationDepth\":0}"
        const turn = "{\"type\":\"turn/start\",\"data\":{\"turn\":1}}"
        const cases: ReadonlyArray<readonly [string, number, string]> = [
          [
            `${header}\n${turn}\n{"type":"user/message","data":{"role":"user","content":"hi"}}\n`,
            3,
            "unreadable DSH v0 \"user/message\" data"
          ],
          [
            `${header}\n${turn}\n{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b"]}}\n`,
            3,
            "unreadable DSH v0 \"text-chunks\" row: dt must hold 1 gaps"
          ],
          [`${header}\n{"type":"step/start","data":{"turn":1,"step":"one"}}\n`, 2, "unreadable DSH v0 \"step/start\""],
          [
            `${header}\n${turn}\n{"type":"turn/end","seq":5,"data":{"turn":1,"reason":{"kind":"completed"}}}\n`,
            3,
            "seq 5 where 1"
          ],
          [`${header}\n{"data":{}}\n`, 2, "event has no string \"type\""]
        ]
        for (const [text, line, message] of cases) {
          const path = `${dir}/bad.jsonl`
          yield* writeText(path, text)
          const error = yield* Effect.flip(SessionStore.readFile(path))
          expect(error).toMatchObject({ _tag: "SessionLogError", line })
          expect(error.message).toContain(message)
        }
      })
    ))
})
