/**
 * The session store contract (§3, §10): the memory, JSONL (`fsync` none and batch)
 * and SQLite stores run one suite: create/open/read/list and their errors, append order with
 * `seq`/`time`, durability when an append returns (an independent store on the same files sees
 * it), concurrent appenders, read-back equality of a real agent session (with a reopen that
 * continues it), crash repair. Torn and corrupt input is per store (memory holds no bytes).
 */
import { type FileSystem } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Schema, Scope, TestClock } from "effect"
import * as NodeFs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as History from "../src/History.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { EventDraft, SessionEvent } from "../src/SessionEvent.js"
import * as SessionLog from "../src/SessionLog.js"
import * as SessionStore from "../src/SessionStore.js"
import * as SqlSessionStore from "../src/SqlSessionStore.js"
import * as Tool from "../src/Tool.js"
import { advance, layerTracked } from "./utils/agent.js"
import { assistant, followup, msg, stepStart, toolCall, turnStart } from "./utils/events.js"
import { createDatabase, describePg, dropDatabase } from "./utils/pg.js"
import { tmpDir } from "./utils/tmp.js"

type Service = SessionStore.SessionStoreService

/**
 * A store under test. `backing` makes a fresh place for its sessions (a directory, a database
 * file); `make` builds a store on it in the given scope. Two stores made on one backing are
 * independent readers/writers of the same data (memory: the same store, it holds no bytes).
 */
interface Kind {
  readonly name: string
  readonly make: (backing: string, scope: Scope.Scope) => Effect.Effect<Service, unknown, FileSystem.FileSystem>
  /** Closing the scope of `make` closes its logs to appends (the memory store has no scope). */
  readonly closes: boolean
  /** A fresh backing other than a temporary directory (PostgreSQL: a new database, dropped after). */
  readonly fresh?: Effect.Effect<string, never, Scope.Scope> | undefined
  /** SQL stores: a store that takes sessions over (`writers: "takeover"`), fencing their former writer. */
  readonly takeover?:
    | ((backing: string, scope: Scope.Scope) => Effect.Effect<Service, unknown, FileSystem.FileSystem>)
    | undefined
}

const fromLayer = <E>(layer: Layer.Layer<SessionStore.SessionStore, E, FileSystem.FileSystem>, scope: Scope.Scope) =>
  Effect.map(Layer.buildWithScope(layer, scope), (context) => Context.get(context, SessionStore.SessionStore))

const memoryStores = new Map<string, Service>()

const kinds: ReadonlyArray<Kind> = [
  {
    name: "memory",
    make: (backing) =>
      Effect.suspend(() => {
        const known = memoryStores.get(backing)
        if (known !== undefined) return Effect.succeed(known)
        return Effect.tap(SessionStore.makeMemory, (store) => Effect.sync(() => memoryStores.set(backing, store)))
      }),
    closes: false
  },
  {
    name: "jsonl",
    make: (backing, scope) => fromLayer(SessionStore.layerJsonl({ directory: backing }), scope),
    closes: true
  },
  {
    name: "jsonl fsync batch",
    make: (backing, scope) => fromLayer(SessionStore.layerJsonl({ directory: backing, fsync: "batch" }), scope),
    closes: true
  },
  {
    name: "sqlite",
    make: (backing, scope) => fromLayer(SqlSessionStore.layerSqlite({ filename: Path.join(backing, "sessions.db") }), scope),
    closes: true,
    takeover: (backing, scope) =>
      fromLayer(SqlSessionStore.layerSqlite({ filename: Path.join(backing, "sessions.db"), writers: "takeover" }), scope)
  },
  {
    name: "postgresql",
    make: (backing, scope) => fromLayer(SqlSessionStore.layerPg({ url: backing }), scope),
    closes: true,
    takeover: (backing, scope) => fromLayer(SqlSessionStore.layerPg({ url: backing, writers: "takeover" }), scope),
    fresh: Effect.acquireRelease(Effect.sync(createDatabase), (url) => Effect.sync(() => dropDatabase(url)))
  }
]

/** A store of `kind` on a fresh backing, plus a way to make independent stores on the same. */
const setup = (kind: Kind) =>
  Effect.gen(function*() {
    const backing = yield* (kind.fresh ?? tmpDir)
    const scope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    const store = yield* Effect.orDie(kind.make(backing, scope))
    /** Closes the store (its logs, their writer locks), as a process that ends. */
    const closeStore = Scope.close(scope, Exit.void)
    /** Runs `f` on a second store on the same backing, closed afterwards. */
    const other = <A, E>(f: (store: Service) => Effect.Effect<A, E>) =>
      Effect.scoped(Effect.flatMap(Effect.scope, (s) => Effect.flatMap(Effect.orDie(kind.make(backing, s)), f)))
    return { backing, store, other, closeStore }
  })

const draft = (type: string, data: unknown): EventDraft => ({ type, data } as EventDraft)

const quick = Tool.make({
  name: "quick",
  description: "",
  parameters: Schema.Struct({ n: Schema.Number }),
  execute: ({ n }) => Effect.succeed({ content: `n=${n} ✓ ü 𝄞` })
})

for (const kind of kinds) {
  ;(kind.name === "postgresql" ? describePg : describe)(`SessionStore contract: ${kind.name}`, () => {
    it.scoped("create, open, read and list; duplicate, unknown and invalid ids are typed errors", () =>
      Effect.gen(function*() {
        const { store } = yield* setup(kind)
        const b = yield* store.create({ id: "b", createdAt: 7, cwd: "/w" })
        const a = yield* store.create({ id: "a", createdAt: 8 })
        expect(b.header).toEqual({ type: "session", format: "effect-agent-loop", version: 1, id: "b", createdAt: 7, cwd: "/w" })
        expect(a.header).toEqual({ type: "session", format: "effect-agent-loop", version: 1, id: "a", createdAt: 8 })
        expect(yield* store.list).toEqual(["a", "b"])
        expect(yield* store.open("a")).toBe(a)
        expect(yield* store.read("b")).toMatchObject({ header: b.header, events: [] })
        const duplicate = yield* Effect.flip(store.create({ id: "a" }))
        expect([duplicate._tag, duplicate.message]).toEqual(["SessionStoreError", "session \"a\" already exists"])
        expect((yield* Effect.flip(store.open("nope")))._tag).toBe("SessionNotFound")
        expect((yield* Effect.flip(store.read("nope")))._tag).toBe("SessionNotFound")
        expect((yield* Effect.flip(store.open("../a")))._tag).toBe("SessionNotFound")
        const invalid = yield* Effect.flip(store.create({ id: "../escape" }))
        expect([invalid._tag, invalid.message]).toEqual(["SessionStoreError", "invalid session id \"../escape\""])
        expect(yield* store.list).toEqual(["a", "b"])
      }).pipe(Effect.provide(NodeFileSystem.layer)))

    it.scoped("appends in order: contiguous seq, the clock's time per call, each call's events adjacent", () =>
      Effect.gen(function*() {
        const { store, other } = yield* setup(kind)
        yield* TestClock.setTime(1_000)
        const log = yield* store.create({ id: "s" })
        const first = yield* log.append([turnStart(1), followup(msg("u1", "one")), draft("plugin/note", { n: 1 })])
        yield* TestClock.adjust(500)
        const second = yield* log.append([draft("plugin/note", { n: 2 })])
        expect(yield* log.append([])).toEqual([])
        expect(first.map((e) => [e.seq, e.time, e.type])).toEqual([
          [0, 1_000, "turn/start"],
          [1, 1_000, "agent/inbox/spliced"],
          [2, 1_000, "plugin/note"]
        ])
        expect(second.map((e) => [e.seq, e.time])).toEqual([[3, 1_500]])
        expect(log.events()).toEqual([...first, ...second])
        expect(Object.isFrozen(first[1]!.data)).toBe(true)
        // Durable once the append returned: an independent store on the same files sees it.
        const seen = yield* other((s) => s.read("s"))
        expect(seen.events).toEqual([...first, ...second])
        expect(seen.header).toEqual(log.header)
      }).pipe(Effect.provide(NodeFileSystem.layer)))

    it.scoped("an event the reader would refuse is a typed error and changes nothing (the log stays readable)", () =>
      Effect.gen(function*() {
        const { store, other } = yield* setup(kind)
        const log = yield* store.create({ id: "s" })
        yield* log.append([turnStart(1)])
        const cases: ReadonlyArray<readonly [EventDraft, string]> = [
          [draft("turn/end", { turn: "one" }), "invalid \"turn/end\" data: "],
          [draft("step/start", { turn: 1 }), "invalid \"step/start\" data: "],
          [{ type: 42, data: {} } as unknown as EventDraft, "an event type must be a non-empty string, not 42"],
          [
            draft("user/message", { id: "u", role: "user", content: "hi", source: { kind: "user" } }),
            "invalid \"user/message\" data: "
          ]
        ]
        for (const [bad, message] of cases) {
          const error = yield* Effect.flip(log.append([draft("plugin/note", { before: true }), bad]))
          expect([error._tag, error.message.startsWith(`cannot append to session "s": ${message}`)]).toEqual([
            "SessionStoreError",
            true
          ])
          if (log.appendSync !== undefined) {
            const sync = log.appendSync([bad], 0)
            expect(sync instanceof SessionLog.SessionStoreError).toBe(true)
          }
        }
        expect(log.events().map((e) => e.type)).toEqual(["turn/start"])
        expect((yield* other((s) => s.read("s"))).events.map((e) => e.type)).toEqual(["turn/start"])
      }).pipe(Effect.provide(NodeFileSystem.layer)))

    it.scoped("concurrent appenders: every call's events adjacent and in seq order, none lost", () =>
      Effect.gen(function*() {
        const { store, other } = yield* setup(kind)
        const log = yield* store.create({ id: "s" })
        const appenders = 12
        const rounds = 8
        const results = yield* Effect.all(
          Array.from({ length: appenders }, (_, w) =>
            Effect.forEach(Array.from({ length: rounds }, (_, r) => r), (r) =>
              Effect.map(
                log.append(Array.from({ length: 1 + ((w + r) % 3) }, (_, k) => draft("plugin/note", { w, r, k }))),
                (events) => ({ w, r, events })
              ))),
          { concurrency: "unbounded" }
        )
        const calls = results.flat()
        const total = calls.reduce((n, c) => n + c.events.length, 0)
        expect(total).toBe(appenders * rounds * 2) // sizes 1, 2, 3 in equal shares
        for (const { events, r, w } of calls) {
          expect(events.map((e) => e.seq)).toEqual(events.map((_, k) => events[0]!.seq + k))
          expect(events.map((e) => e.data)).toEqual(events.map((_, k) => ({ w, r, k })))
        }
        // One appender's calls keep their order.
        for (let w = 0; w < appenders; w++) {
          const seqs = calls.filter((c) => c.w === w).map((c) => c.events[0]!.seq)
          expect(seqs).toEqual([...seqs].sort((x, y) => x - y))
        }
        expect(log.events().map((e) => e.seq)).toEqual(Array.from({ length: total }, (_, i) => i))
        expect((yield* other((s) => s.read("s"))).events).toEqual(log.events())
      }).pipe(Effect.provide(NodeFileSystem.layer)))

    it.scoped("read-back equality: an agent session with tools reads back equal, and a reopen continues it", () =>
      Effect.gen(function*() {
        const { store, other, closeStore } = yield* setup(kind)
        const model = ScriptedModel.make([
          {
            reasoning: "think…",
            toolCalls: [{ id: "c1", name: "quick", arguments: { n: 1 } }, { id: "c2", name: "quick", arguments: { n: 2 } }]
          },
          { text: "done: «n=1», n=2 — 完了 🎉" },
          { text: "second" },
          { text: "the summary" }
        ])
        let history: ReadonlyArray<unknown> = []
        const events = yield* Effect.scoped(Effect.gen(function*() {
          const agent = yield* Agent.make({ sessionId: "s", tools: [quick] })
          yield* agent.followup("go \u0000 \u2028 \"quoted\"")
          yield* agent.inject(
            {
              id: "ctx1",
              role: "user",
              content: [{ type: "text", text: "context" }],
              source: { kind: "plugin", plugin: "watch", extra: [1, { deep: null }] }
            } as never
          )
          // Real I/O (fdatasync with fsync "batch"): wait for the run, not only the clock.
          yield* advance(10)
          yield* agent.awaitIdle
          yield* agent.followup("again")
          yield* advance(10)
          yield* agent.awaitIdle
          // A compaction (§17): its checkpoint's envelope `surfaceOp` must read back too.
          expect((yield* agent.compact()).outcome).toBe("compacted")
          history = yield* agent.history
          return agent.log.events().slice()
        })).pipe(
          Effect.provideService(SessionStore.SessionStore, store),
          Effect.provideService(Model.Model, model),
          Effect.provide(Layer.merge(IdGenerator.layerSeeded(3), layerTracked))
        )
        expect(Invariant.check(events)).toEqual([])
        expect(events.filter((e) => e.type === "turn/end").length).toBe(2)
        expect(events.filter((e) => e.type === "tool/result").length).toBe(2)
        // The store's own view, a read, and an independent store all agree.
        expect((yield* store.read("s")).events).toEqual(events)
        const back = yield* other((s) => s.read("s"))
        expect(back.events).toEqual(events)
        expect(back.warnings).toEqual([])
        expect(back.events.filter((e) => "surfaceOp" in e).length).toBe(1)
        expect(History.derive(back.events)).toEqual(history)
        // Reopened for writing by an independent store once the first one closed (one writer
        // per session: while it is open, the other store refuses): appends continue the seq.
        if (kind.closes) {
          const refused = yield* Effect.flip(other((s) => s.open("s")))
          expect([refused._tag, refused.message]).toEqual([
            "SessionStoreError",
            `session "s" is open for writing by another store of this process (one writer per session)`
          ])
          yield* closeStore
          const next = yield* other((s) =>
            Effect.flatMap(s.open("s"), (log) => log.append([draft("plugin/note", { after: true })]))
          )
          expect(next.map((e) => e.seq)).toEqual([events.length])
          expect((yield* other((s) => s.read("s"))).events.length).toBe(events.length + 1)
        }
      }).pipe(Effect.provide(NodeFileSystem.layer)))

    it.scoped("crash repair: an open tool step gets the §10 closers; a second repair appends nothing", () =>
      Effect.gen(function*() {
        const { backing, store, closeStore } = yield* setup(kind)
        const log = yield* store.create({ id: "s" })
        const prompt = msg("u1", "go")
        yield* log.append([
          followup(prompt),
          turnStart(1),
          draft("agent/inbox/spliced", { target: "next-turn", start: 0, removedCount: 1, inserted: [] }),
          stepStart(1, 1),
          { type: "user/message", data: prompt }
        ])
        yield* log.append([
          assistant(1, 1, undefined, {
            toolCalls: [{ id: "c1", name: "quick", arguments: "{\"n\":1}" }, { id: "c2", name: "quick", arguments: "{\"n\":2}" }]
          }),
          toolCall(1, 1, "c1", "quick", "{\"n\":1}")
        ])
        const repair = (s: Service) => Agent.repair("s").pipe(Effect.provideService(SessionStore.SessionStore, s))
        // The repairing store is an independent one, as after a restart.
        if (kind.closes) yield* closeStore
        const scope = yield* Scope.make()
        const fresh = yield* Effect.orDie(kind.make(backing, scope))
        const appended = yield* repair(fresh)
        expect(appended.map((e) => [e.seq, e.type, (e.data as any).error?.code ?? (e.data as any).callId ?? null])).toEqual([
          [7, "tool/result", "TOOL_OUTCOME_UNKNOWN"],
          [8, "tool/call", "c2"],
          [9, "tool/result", "TOOL_NOT_STARTED"],
          [10, "step/end", null],
          [11, "turn/end", null],
          [12, "session/end-seed", null]
        ])
        expect(yield* repair(fresh)).toEqual([])
        yield* Scope.close(scope, Exit.void)
        const after = kind.closes
          ? yield* Effect.scoped(
            Effect.flatMap(Effect.scope, (s) => Effect.flatMap(Effect.orDie(kind.make(backing, s)), (st) => st.read("s")))
          )
          : yield* store.read("s")
        expect(after.events.length).toBe(13)
        expect(Invariant.check(after.events)).toEqual([])
      }).pipe(Effect.provide(NodeFileSystem.layer)))

    it.scoped("child sessions (§3.1): the header names the parent; a seed is copied renumbered, then session/end-seed, in one write; resume appends nothing and continues the turns", () =>
      Effect.gen(function*() {
        const { backing, store, other, closeStore } = yield* setup(kind)
        const ids = Layer.merge(IdGenerator.layerSeeded(3), layerTracked)
        // The parent: two completed turns.
        const parent = yield* Effect.scoped(Effect.gen(function*() {
          const agent = yield* Agent.make({ sessionId: "p" })
          yield* agent.followup("the codeword is MARMALADE")
          yield* advance(10)
          yield* agent.awaitIdle
          yield* advance(10)
          yield* agent.followup("say OK again")
          yield* advance(10)
          yield* agent.awaitIdle
          return { events: agent.log.events().slice(), history: yield* agent.history }
        })).pipe(
          Effect.provideService(SessionStore.SessionStore, store),
          Effect.provideService(Model.Model, ScriptedModel.make([{ text: "OK" }, { text: "OK again" }])),
          Effect.provide(ids)
        )
        const seed = parent.events
        const n = seed.length
        expect(seed.filter((e) => e.type === "turn/start").map((e) => (e.data as any).turn)).toEqual([1, 2])
        expect(seed[n - 1]!.type).toBe("turn/end")
        // Times differ along the seed (the clock moved between the turns), so keeping them shows.
        const lastTime = seed[n - 1]!.time
        expect(seed[0]!.time).toBe(0)
        expect(lastTime).toBeGreaterThan(0)

        // A spawned child: the header's new fields, in order after the old ones; no events.
        const spawned = yield* store.create({
          id: "k",
          createdAt: 5,
          parentSession: "p",
          origin: "subagent",
          delegationDepth: 2
        })
        expect(JSON.stringify(spawned.header)).toBe(
          `{"type":"session","format":"effect-agent-loop","version":1,"id":"k","createdAt":5,` +
            `"parentSession":"p","origin":"subagent","delegationDepth":2}`
        )
        expect(spawned.events()).toEqual([])

        // A fork child: seedLength = the seed's length; the seed's events at their seqs, their
        // times kept; then session/end-seed at seq = seedLength, with the last seed event's time.
        const child = yield* store.create({
          id: "c",
          createdAt: 9,
          cwd: "/w",
          parentSession: "p",
          parentCallId: "call-1",
          origin: "subagent",
          delegationDepth: 1,
          seed
        })
        const headerLine = `{"type":"session","format":"effect-agent-loop","version":1,"id":"c","createdAt":9,"cwd":"/w",` +
          `"parentSession":"p","parentCallId":"call-1","origin":"subagent","delegationDepth":1,"seedLength":${n}}`
        expect(JSON.stringify(child.header)).toBe(headerLine)
        const expected = [...seed, { type: "session/end-seed", seq: n, time: lastTime, data: {} }]
        expect(child.events()).toEqual(expected)
        expect(child.events().map((e) => JSON.stringify(e))).toEqual(expected.map((e) => JSON.stringify(e)))
        expect(Invariant.check(child.events(), { header: child.header })).toEqual([])
        // A seed is renumbered from seq 0 whatever its events' seqs were.
        const shifted = yield* store.create({
          id: "c2",
          createdAt: 9,
          cwd: "/w",
          parentSession: "p",
          parentCallId: "call-1",
          origin: "subagent",
          delegationDepth: 1,
          seed: seed.map((e) => ({ ...e, seq: e.seq + 100 }))
        })
        expect(shifted.events()).toEqual(expected)
        // A seed that already ends with session/end-seed gets no second one.
        const ended = yield* store.create({ id: "c3", createdAt: 9, seed: expected })
        expect(ended.header.seedLength).toBe(n + 1)
        expect(ended.events()).toEqual(expected)
        // An empty seed: seedLength 0 and no events.
        const empty = yield* store.create({ id: "c4", createdAt: 9, seed: [] })
        expect(JSON.stringify(empty.header)).toBe(
          `{"type":"session","format":"effect-agent-loop","version":1,"id":"c4","createdAt":9,"seedLength":0}`
        )
        expect(empty.events()).toEqual([])
        if (kind.name.startsWith("jsonl")) {
          const lines = NodeFs.readFileSync(Path.join(backing, "c.jsonl"), "utf8").split("\n")
          expect(lines).toEqual([headerLine, ...expected.map((e) => JSON.stringify(e)), ""])
        }

        // Read by an independent store: the same header (key order too) and events.
        const back = yield* other((s) => s.read("c"))
        expect(JSON.stringify(back.header)).toBe(headerLine)
        expect(back.events).toEqual(expected)
        expect(back.warnings).toEqual([])

        // Resumed (after a restart): nothing appended; the history is the parent's; the first new
        // turn is numbered after the seed's last (turn/start 3), its followup splices at 0 of an
        // empty inbox (the seed is not replayed).
        if (kind.closes) yield* closeStore
        const scope = yield* Scope.make()
        const fresh = yield* Effect.orDie(kind.make(backing, scope))
        const resumed = yield* Effect.scoped(Effect.gen(function*() {
          const agent = yield* Agent.resume("c")
          expect(agent.log.events().length).toBe(n + 1)
          expect(yield* agent.history).toEqual(parent.history)
          expect(History.derive(agent.log.events(), { header: agent.log.header })).toEqual(parent.history)
          yield* agent.followup("what is the codeword?")
          yield* advance(10)
          yield* agent.awaitIdle
          return { events: agent.log.events().slice(), history: yield* agent.history }
        })).pipe(
          Effect.provideService(SessionStore.SessionStore, fresh),
          Effect.provideService(Model.Model, ScriptedModel.make([{ text: "MARMALADE" }])),
          Effect.provide(ids)
        )
        const added = resumed.events.slice(n + 1)
        expect(resumed.events.slice(0, n + 1)).toEqual(expected)
        expect(added.map((e) => e.type)).toEqual([
          "agent/inbox/spliced",
          "turn/start",
          "agent/inbox/spliced",
          "step/start",
          "user/message",
          "assistant/message",
          "step/end",
          "turn/end"
        ])
        expect(added.map((e) => (e.data as any).turn ?? (e.data as any).start)).toEqual([0, 3, 0, 3, undefined, 3, 3, 3])
        expect(Invariant.check(resumed.events, { header: child.header })).toEqual([])
        expect(resumed.history.slice(0, parent.history.length)).toEqual(parent.history)
        expect(resumed.history.length).toBe(parent.history.length + 2)
        yield* Scope.close(scope, Exit.void)
        // Reopened: the same header.
        const reopened = yield* other((s) => Effect.map(s.open("c"), (log) => JSON.stringify(log.header)))
        expect(reopened).toBe(headerLine)
      }).pipe(Effect.provide(NodeFileSystem.layer)))

    it.scoped("child sessions: a bad option or seed is a SessionStoreError and creates nothing", () =>
      Effect.gen(function*() {
        const { store } = yield* setup(kind)
        const prompt = msg("u1", "go")
        const turn: ReadonlyArray<EventDraft> = [
          followup(prompt),
          turnStart(1),
          draft("agent/inbox/spliced", { target: "next-turn", start: 0, removedCount: 1, inserted: [] }),
          stepStart(1, 1),
          { type: "user/message", data: prompt },
          assistant(1, 1, "hi"),
          draft("step/end", { turn: 1, step: 1 }),
          draft("turn/end", { turn: 1, reason: { kind: "completed" } })
        ]
        const seedOf = (drafts: ReadonlyArray<EventDraft>) => drafts.map((d, seq) => ({ ...d, seq, time: seq }) as SessionEvent)
        const refused = (options: SessionLog.CreateOptions) =>
          Effect.map(Effect.flip(store.create({ id: "x", ...options })), (e) => [e._tag, e.message])
        const cannot = (what: string) => ["SessionStoreError", `cannot create session "x": ${what}`]
        expect(yield* refused({ delegationDepth: 0 })).toEqual(cannot("delegationDepth must be a whole number ≥ 1, not 0"))
        expect(yield* refused({ delegationDepth: 1.5 })).toEqual(cannot("delegationDepth must be a whole number ≥ 1, not 1.5"))
        expect(yield* refused({ parentSession: "../p" })).toEqual(
          cannot("parentSession must be a session id ([A-Za-z0-9_-][A-Za-z0-9._-]*), not \"../p\"")
        )
        expect(yield* refused({ parentSession: "x" })).toEqual(cannot("parentSession names the session itself"))
        expect(yield* refused({ origin: "helper" as never })).toEqual(cannot("origin must be \"subagent\", not \"helper\""))
        expect(yield* refused({ parentCallId: "" })).toEqual(cannot("parentCallId must be a non-empty string, not \"\""))
        expect(yield* refused({ seed: { length: 1 } as never })).toEqual(
          cannot("seed must be an array of events, not {\"length\":1}")
        )
        expect(yield* refused({ seed: [7 as never] })).toEqual(cannot("seed event 0 is 7, not an event object"))
        expect(yield* refused({ seed: seedOf([turnStart(1)]).concat([{ type: "turn/end", seq: 1 } as never]) })).toEqual(
          cannot("seed event 1: \"turn/end\" has no numeric \"time\"")
        )
        expect(yield* refused({ seed: seedOf([draft("turn/start", { turn: "one" })]) })).toEqual(
          cannot("seed event 0: invalid \"turn/start\" data: Expected number, actual \"one\" at .turn")
        )
        expect(yield* refused({ seed: seedOf([draft("plugin/note", { n: 1n })]) })).toEqual(
          cannot("seed event 0 is not JSON: Do not know how to serialize a BigInt")
        )
        expect(yield* refused({ seed: seedOf([turnStart(2), draft("turn/end", { turn: 2, reason: { kind: "completed" } })]) }))
          .toEqual(cannot("the seed breaks rule 1 of §12 at seq 0: turn/start of turn 2 where turn 1 was expected"))
        expect(yield* refused({ seed: seedOf(turn.slice(0, 5)) })).toEqual(
          cannot("the seed ends inside turn 1 (a fork child inherits whole turns)")
        )
        // Nothing was created: the id is free, and the whole turn is a valid seed.
        expect(yield* store.list).toEqual([])
        const log = yield* store.create({ id: "x", seed: seedOf(turn) })
        expect(log.header.seedLength).toBe(8)
        expect(log.events().map((e) => e.type).slice(-2)).toEqual(["turn/end", "session/end-seed"])
        expect(yield* store.list).toEqual(["x"])
      }).pipe(Effect.provide(NodeFileSystem.layer)))

    if (kind.closes) {
      it.scoped("close frees the writer at once: another store opens the session; the closed log refuses appends", () =>
        Effect.gen(function*() {
          const { backing, store } = yield* setup(kind)
          const log = yield* store.create({ id: "s" })
          yield* log.append([turnStart(1)])
          expect(log.close).toBeDefined()
          yield* log.close!
          yield* log.close!
          const error = yield* Effect.flip(log.append([draft("plugin/note", {})]))
          expect([error._tag, error.message]).toEqual(["SessionStoreError", "session \"s\" is closed"])
          // Another store (another process) takes the session at once and continues it.
          const scope = yield* Scope.make()
          const second = yield* Effect.orDie(kind.make(backing, scope))
          const reopened = yield* second.open("s")
          expect(reopened.events().map((e) => e.type)).toEqual(["turn/start"])
          expect((yield* reopened.append([draft("plugin/note", {})])).map((e) => e.seq)).toEqual([1])
          yield* Scope.close(scope, Exit.void)
          // This store opens it afresh: the other store's append is there.
          const again = yield* store.open("s")
          expect(again).not.toBe(log)
          expect(again.events().map((e) => e.seq)).toEqual([0, 1])
        }).pipe(Effect.provide(NodeFileSystem.layer)))

      it.effect("a log refuses appends once its store's scope closed", () =>
        Effect.gen(function*() {
          const backing = yield* (kind.fresh ?? tmpDir)
          const scope = yield* Scope.make()
          const store = yield* Effect.orDie(kind.make(backing, scope))
          const log = yield* store.create({ id: "s" })
          yield* log.append([turnStart(1)])
          yield* Scope.close(scope, Exit.void)
          const error = yield* Effect.flip(log.append([draft("plugin/note", {})]))
          expect(error._tag).toBe("SessionStoreError")
          expect(log.events().length).toBe(1)
        }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))
    }

    const takeover = kind.takeover
    if (takeover !== undefined) {
      it.scoped("fenced writers: a takeover increments the writer epoch; the former writer's appends fail SessionFenced and write nothing", () =>
        Effect.gen(function*() {
          const { backing, store } = yield* setup(kind)
          const first = yield* store.create({ id: "s" })
          yield* first.append([turnStart(1), followup(msg("u1", "one"))])
          // A second store (a new owner: another runner) takes the session over.
          const scope = yield* Scope.make()
          yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
          const owner = yield* Effect.orDie(takeover(backing, scope))
          const taken = yield* owner.open("s")
          expect(taken.events().map((e) => e.seq)).toEqual([0, 1])
          for (let attempt = 0; attempt < 2; attempt++) {
            const fenced = yield* Effect.flip(first.append([draft("plugin/note", { attempt })]))
            expect(fenced).toMatchObject({
              _tag: "SessionFenced",
              sessionId: "s",
              epoch: 1,
              current: 2,
              message: "session \"s\" was taken over by another writer (this writer's epoch is 1, the session's 2): " +
                "nothing was appended"
            })
          }
          expect(first.events().map((e) => e.seq)).toEqual([0, 1])
          expect((yield* taken.append([draft("plugin/note", { by: "owner" })])).map((e) => e.seq)).toEqual([2])
          const log = yield* owner.read("s")
          expect(log.events.map((e) => [e.seq, e.type])).toEqual([[0, "turn/start"], [1, "agent/inbox/spliced"], [
            2,
            "plugin/note"
          ]])
          // A takeover store takes a session it already has open again: the earlier log is fenced too.
          const retaken = yield* owner.open("s")
          expect(retaken).not.toBe(taken)
          expect(yield* Effect.flip(taken.append([draft("plugin/note", {})]))).toMatchObject({
            _tag: "SessionFenced",
            epoch: 2,
            current: 3
          })
          expect((yield* retaken.append([draft("plugin/note", { n: 3 })])).map((e) => e.seq)).toEqual([3])
          // The fenced store's own open takes the session again, which an exclusive store
          // refuses while the new owner (a live writer) holds it.
          const refused = yield* Effect.flip(store.open("s"))
          expect([refused._tag, refused.message]).toEqual([
            "SessionStoreError",
            "session \"s\" is open for writing by another store of this process (one writer per session)"
          ])
        }).pipe(Effect.provide(NodeFileSystem.layer)))

      it.scoped("fenced writers: concurrent appends racing a takeover are each all-or-nothing; the new owner reads every committed one", () =>
        Effect.gen(function*() {
          const { backing, store } = yield* setup(kind)
          const first = yield* store.create({ id: "s" })
          const scope = yield* Scope.make()
          yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
          const owner = yield* Effect.orDie(takeover(backing, scope))
          const appends = Effect.forEach(
            Array.from({ length: 40 }, (_, i) => i),
            (i) => Effect.either(first.append([draft("plugin/note", { i, part: 0 }), draft("plugin/note", { i, part: 1 })])),
            { concurrency: 8 }
          )
          const [results, taken] = yield* Effect.all([appends, Effect.flatMap(Effect.yieldNow(), () => owner.open("s"))], {
            concurrency: 2
          })
          const ok = results.filter((r) => r._tag === "Right").length
          const fenced = results.filter((r) => r._tag === "Left" && r.left._tag === "SessionFenced").length
          expect(ok + fenced).toBe(40)
          // What the new owner read is exactly what the former writer committed, in pairs.
          expect(taken.events().length).toBe(2 * ok)
          expect(first.events()).toEqual(taken.events())
          const after = yield* owner.read("s")
          expect(after.events.length).toBe(2 * ok)
          for (let i = 0; i < after.events.length; i += 2) {
            expect((after.events[i]!.data as { i: number }).i).toBe((after.events[i + 1]!.data as { i: number }).i)
          }
        }).pipe(Effect.provide(NodeFileSystem.layer)))
    }
  })
}

// ---------------------------------------------------------------------------------------------
// Torn and corrupt input, per store
// ---------------------------------------------------------------------------------------------

describe("SessionStore contract: torn and corrupt input", () => {
  const header = "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"s\",\"createdAt\":0}"
  const line = (seq: number) => `{"type":"plugin/note","seq":${seq},"time":0,"data":{"n":${seq}}}`

  it.scoped("jsonl: a torn last line is ignored when read and cut before the next append; a bad line before it is an error naming the line", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const path = Path.join(dir, "s.jsonl")
      NodeFs.writeFileSync(path, `${header}\n${line(0)}\n${line(1)}\n{"type":"plugin/no`)
      const store = yield* SessionStore.makeJsonl({ directory: dir })
      const read = yield* store.read("s")
      expect([read.events.length, read.tornTail, read.warnings]).toEqual([2, true, [
        "line 4: torn last line ignored (18 characters, not JSON)"
      ]])
      const log = yield* store.open("s")
      yield* log.append([draft("plugin/note", { n: 2 })])
      expect(NodeFs.readFileSync(path, "utf8").split("\n").slice(3)).toEqual([
        expect.stringMatching(/^\{"type":"plugin\/note","seq":2,/),
        ""
      ])
      NodeFs.writeFileSync(
        Path.join(dir, "bad.jsonl"),
        `${header.replace("\"s\"", "\"bad\"")}\n${line(0)}\nnot json\n${line(2)}\n`
      )
      const error = yield* Effect.flip(store.open("bad"))
      expect([error._tag, (error as SessionLog.SessionLogError).line]).toEqual(["SessionLogError", 3])
      expect(error.message).toContain("bad.jsonl, line 3: not JSON")
      // A copied file whose header names another session is not that session.
      NodeFs.copyFileSync(path, Path.join(dir, "copy.jsonl"))
      for (const failure of [yield* Effect.flip(store.open("copy")), yield* Effect.flip(store.read("copy"))]) {
        expect([failure._tag, failure.message]).toEqual([
          "SessionLogError",
          `${Path.join(dir, "copy.jsonl")}, line 1: the header names session "s", not "copy"`
        ])
      }
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  const sqliteWith = (dir: string) => SqlSessionStore.layerSqlite({ filename: Path.join(dir, "sessions.db") })

  it.scoped("sqlite: a corrupt row, a missing row and a foreign header are errors naming the seq; nothing is appended", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const filename = Path.join(dir, "sessions.db")
      yield* Effect.scoped(
        Effect.gen(function*() {
          const store = yield* SessionStore.SessionStore
          for (const id of ["a", "b", "c"]) {
            const log = yield* store.create({ id })
            yield* log.append([0, 1, 2, 3].map((n) => draft("plugin/note", { n })))
          }
        }).pipe(Effect.provide(sqliteWith(dir)))
      )
      // Damage the rows with a second connection (better-sqlite3 directly).
      const Database = (yield* Effect.promise(() => import("better-sqlite3"))).default
      const db = new Database(filename)
      db.prepare("UPDATE agent_loop_events SET event = 'not json' WHERE session_id = 'a' AND seq = 2").run()
      db.prepare("DELETE FROM agent_loop_events WHERE session_id = 'b' AND seq = 1").run()
      db.prepare("UPDATE agent_loop_sessions SET header = replace(header, '\"c\"', '\"z\"') WHERE id = 'c'").run()
      db.close()
      yield* Effect.scoped(
        Effect.gen(function*() {
          const store = yield* SessionStore.SessionStore
          const a = yield* Effect.flip(store.open("a"))
          expect([a._tag, (a as SessionLog.SessionLogError).line]).toEqual(["SessionLogError", 4])
          expect(a.message).toMatch(/^session "a", seq 2: not JSON/)
          const b = yield* Effect.flip(store.read("b"))
          expect([b._tag, b.message]).toEqual([
            "SessionLogError",
            "session \"b\", seq 2: \"plugin/note\" has seq 2 where 1 was expected"
          ])
          const c = yield* Effect.flip(store.open("c"))
          expect([c._tag, c.message]).toEqual(["SessionLogError", "session \"c\": the header names session \"z\""])
          expect(yield* store.list).toEqual(["a", "b", "c"])
        }).pipe(Effect.provide(sqliteWith(dir)))
      )
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("sqlite: an event that is not JSON, or a second writer of the session, fails typed and changes nothing", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const layer = sqliteWith(dir)
      const store = Context.get(yield* Layer.build(layer), SessionStore.SessionStore)
      const log = yield* store.create({ id: "s" })
      yield* log.append([turnStart(1)])
      const bigint = yield* Effect.flip(log.append([draft("plugin/note", { n: 1n })]))
      expect([bigint._tag, bigint.message]).toEqual([
        "SessionStoreError",
        "cannot append to session \"s\": an event is not JSON: Do not know how to serialize a BigInt"
      ])
      // Another store on the same file cannot open it for writing while this one has it.
      const refused = yield* Effect.flip(
        Effect.scoped(Effect.flatMap(SessionStore.SessionStore, (s) => s.open("s")).pipe(Effect.provide(layer)))
      )
      expect(refused.message).toBe(
        `session "s" is open for writing by another store of this process (one writer per session)`
      )
      // A writer that ignores the lock inserts seq 1 first: the key refuses our seq 1.
      const Database = (yield* Effect.promise(() => import("better-sqlite3"))).default
      const db = new Database(Path.join(dir, "sessions.db"))
      db.prepare("INSERT INTO agent_loop_events (session_id, seq, event) VALUES ('s', 1, '{}')").run()
      db.close()
      const conflict = yield* Effect.flip(log.append([draft("plugin/note", { by: "first" })]))
      expect(conflict._tag).toBe("SessionStoreError")
      expect(conflict.message).toMatch(/^cannot append to session "s": Failed to execute statement: UNIQUE constraint failed/)
      expect(log.events().map((e) => e.type)).toEqual(["turn/start"])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("sqlite: a file that is not a database is a SessionStoreError when the layer is built", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const filename = Path.join(dir, "sessions.db")
      NodeFs.writeFileSync(filename, "this is not a database, just text ".repeat(200))
      const exit = yield* Effect.exit(Effect.scoped(Layer.build(SqlSessionStore.layerSqlite({ filename }))))
      expect(Exit.isFailure(exit)).toBe(true)
      const error = yield* Effect.flip(Effect.scoped(Layer.build(SqlSessionStore.layerSqlite({ filename }))))
      expect(error._tag).toBe("SessionStoreError")
      expect(error.message).toContain(`cannot open the SQLite database ${filename}`)
      expect(error.message).toContain("file is not a database")
      expect(NodeFs.readFileSync(filename, "utf8")).toBe("this is not a database, just text ".repeat(200))
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))

  it.effect("sqlite: a database whose agent_loop_events table has other columns is refused when the layer is built", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const filename = Path.join(dir, "foreign.db")
      const Database = (yield* Effect.promise(() => import("better-sqlite3"))).default
      const db = new Database(filename)
      db.exec("CREATE TABLE agent_loop_events (a INTEGER, b TEXT)")
      db.close()
      const error = yield* Effect.flip(Effect.scoped(Layer.build(SqlSessionStore.layerSqlite({ filename }))))
      expect(error._tag).toBe("SessionStoreError")
      expect(error.message).toMatch(
        /^the table agent_loop_events exists without the columns \(session_id, seq, event\) this store needs: .*no such column: session_id/
      )
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))

  it.scoped("sqlite: the database is in WAL mode, with either synchronous setting", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const Database = (yield* Effect.promise(() => import("better-sqlite3"))).default
      for (const synchronous of [undefined, "full", "normal"] as const) {
        const filename = Path.join(dir, `${synchronous ?? "default"}.db`)
        yield* Effect.scoped(
          Effect.flatMap(SessionStore.SessionStore, (s) => s.create({ id: "s" })).pipe(
            Effect.provide(SqlSessionStore.layerSqlite({ filename, synchronous }))
          )
        )
        const db = new Database(filename, { readonly: true })
        expect([synchronous, db.pragma("journal_mode", { simple: true })]).toEqual([synchronous, "wal"])
        expect(db.prepare("SELECT header FROM agent_loop_sessions").all()).toEqual([
          {
            header: expect.stringMatching(
              /^\{"type":"session","format":"effect-agent-loop","version":1,"id":"s","createdAt":\d+\}$/
            )
          }
        ])
        db.close()
      }
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
