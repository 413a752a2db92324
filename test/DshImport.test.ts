/**
 * DSH v0 import, full fidelity (§10, §3.1, §4, §12), checked against
 * oracles that do not use our reader or projections: every fixture's raw lines are parsed here
 * with `JSON.parse` (line 1 the header, then envelopes; a packed `text-chunks` /
 * `reasoning-chunks` / `tool-call-chunks` row stands for one seq per element of `texts`/`args`;
 * seq = index after that expansion), and
 * - a small simulation of DSH's surface (`surfaceOp` `"append"` and `{op:"replace", start, end}`,
 *   the only shapes the fixtures hold) gives the model-visible messages `History.derive` must give;
 * - a plain replay of the `agent/inbox/spliced` events after `seedLength` gives the inbox
 *   `replayInbox` must give, after every splice and at the end;
 * - a plain implementation of the fate rules of §12 gives the fate `Delivery.fateOf` must give
 *   every message inserted after the seed;
 * - the raw rows give every event the reader must produce: foreign events kept as they are,
 *   packed rows expanded to one `assistant/chunk` per element.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import * as Delivery from "../src/Delivery.js"
import { fatesOf } from "../src/Delivery.js"
import * as History from "../src/History.js"
import { replay as replayInbox } from "../src/Inbox.js"
import { decodeLog } from "../src/internal/logCodec.js"
import type { SessionEvent, SessionHeader } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import { dshDir, dshFixtures } from "./utils/events.js"

// ---------------------------------------------------------------------------------------------
// The raw lines, read without our reader
// ---------------------------------------------------------------------------------------------

type Json = any

/** One event of the expanded list: a raw row, or element `k` of a packed row. */
interface RawEvent {
  readonly seq: number
  readonly type: string
  readonly row: Json
  /** Element index inside a packed row (undefined for an ordinary row). */
  readonly k: number | undefined
}

interface RawLog {
  readonly text: string
  readonly header: Json
  readonly rows: ReadonlyArray<Json>
  readonly events: ReadonlyArray<RawEvent>
}

const PACKED = ["text-chunks", "reasoning-chunks", "tool-call-chunks"]

/** The core loop events of DSH v0 (SOURCES.md, §3.1); every other type is foreign. */
const CORE = new Set([
  "agent/inbox/spliced",
  "turn/start",
  "turn/end",
  "step/start",
  "step/end",
  "user/message",
  "assistant/chunk",
  "assistant/message",
  "tool/call",
  "tool/result",
  "request/header",
  "request/context",
  "session/end-seed"
])

const elementsOf = (row: Json): ReadonlyArray<string> => row.type === "tool-call-chunks" ? row.data.args : row.data.texts

const rawLog = (name: string): RawLog => {
  const text = readFileSync(join(dshDir, name), "utf8")
  const lines = text.split("\n").filter((l) => l !== "")
  const rows = lines.slice(1).map((l) => JSON.parse(l))
  const events: Array<RawEvent> = []
  for (const row of rows) {
    if (PACKED.includes(row.type)) {
      elementsOf(row).forEach((_, k) => events.push({ seq: events.length, type: "assistant/chunk", row, k }))
    } else {
      events.push({ seq: events.length, type: row.type, row, k: undefined })
    }
  }
  return { text, header: JSON.parse(lines[0]!), rows, events }
}

const raws: ReadonlyMap<string, RawLog> = new Map(dshFixtures.map((name) => [name, rawLog(name)]))
const raw = (name: string): RawLog => raws.get(name)!
const seedOf = (log: RawLog): number => log.header.seedLength ?? 0

/** The real reader (`SessionStore.readFile`). */
const read = (name: string) => SessionStore.readFile(join(dshDir, name)).pipe(Effect.provide(NodeFileSystem.layer))

/** Reads every fixture with the real reader. */
const readAll = Effect.forEach(dshFixtures, (name) => Effect.map(read(name), (contents) => [name, contents] as const))

// ---------------------------------------------------------------------------------------------
// Oracles
// ---------------------------------------------------------------------------------------------

/**
 * DSH's surface: the seqs of the model-visible events, in surface order. `"append"` adds the
 * event at the end; `{op:"replace", start, end}` replaces the span of the surface from node
 * `start` through node `end` (inclusive: the fixture's checkpoint cites seq 5 as its source in
 * `sourceEventSeqs` and replaces `start: 5, end: 5`) with the event. An event without
 * `surfaceOp` is log-only.
 */
const dshSurface = (log: RawLog): Array<unknown> => {
  const surface: Array<{ readonly seq: number; readonly message: unknown }> = []
  for (const e of log.events) {
    const op = e.row.surfaceOp
    if (e.k !== undefined || op === undefined) continue
    const message = e.type === "user/message" ? e.row.data : e.row.data.message
    if (op === "append") {
      surface.push({ seq: e.seq, message })
    } else {
      expect(Object.keys(op).sort()).toEqual(["end", "op", "start"])
      expect(op.op).toBe("replace")
      const from = surface.findIndex((n) => n.seq === op.start)
      const to = surface.findIndex((n) => n.seq === op.end)
      expect([from >= 0, to >= from]).toEqual([true, true])
      surface.splice(from, to - from + 1, { seq: e.seq, message })
    }
  }
  return surface.map((n) => n.message)
}

interface Queues {
  readonly "next-turn": Array<string>
  readonly "next-step": Array<string>
}

/** Replays the splices after the seed; calls `each` after every splice with the queues' ids. */
const dshInbox = (log: RawLog, each: (seq: number, queues: Queues) => void = () => {}): Queues => {
  const queues: Queues = { "next-turn": [], "next-step": [] }
  for (const e of log.events) {
    if (e.type !== "agent/inbox/spliced" || e.seq < seedOf(log)) continue
    const { inserted, removedCount = 0, start, target } = e.row.data
    const queue = queues[target as keyof Queues]
    // coordinates in range (DSH's writer normalizes them)
    expect([start <= queue.length, start + removedCount <= queue.length]).toEqual([true, true])
    queue.splice(start, removedCount, ...inserted.map((m: Json) => m.id))
    each(e.seq, queues)
  }
  return queues
}

type OracleFate = string

/**
 * The fate rules of §12, per id (latest insertion wins), as strings:
 * `Pending`, `Entered t.s`, `Dropped:<reason>`.
 */
const dshFates = (log: RawLog): Map<string, OracleFate> => {
  const fates = new Map<string, OracleFate>()
  const queues: Queues = { "next-turn": [], "next-step": [] }
  let claimed: Array<string> = []
  let batch: Set<string> | undefined
  let turn = 0
  let step = 0
  for (const e of log.events) {
    if (e.seq < seedOf(log) || e.k !== undefined) continue
    const data = e.row.data
    if (
      batch !== undefined &&
      ["assistant/message", "tool/call", "tool/result", "step/start", "step/end", "turn/start", "turn/end"]
        .includes(e.type)
    ) {
      for (const id of batch) fates.set(id, "Dropped:discarded")
      batch = undefined
    }
    switch (e.type) {
      case "agent/inbox/spliced": {
        const removed = queues[data.target as keyof Queues].splice(
          data.start,
          data.removedCount ?? 0,
          ...data.inserted.map((m: Json) => m.id)
        )
        for (const id of removed) {
          if (data.outcome === undefined) claimed.push(id)
          else {
            fates.set(
              id,
              data.cause === undefined
                ? "Dropped:discarded"
                : data.cause.kind === "disposed"
                ? "Dropped:disposed"
                : "Dropped:canceled"
            )
          }
        }
        for (const m of data.inserted) {
          fates.set(m.id, "Pending")
          claimed = claimed.filter((id) => id !== m.id)
        }
        break
      }
      case "turn/start":
        turn = data.turn
        claimed = []
        break
      case "step/start":
        turn = data.turn
        step = data.step
        if (claimed.length > 0) batch = new Set(claimed)
        claimed = []
        break
      case "user/message":
        if (batch?.delete(data.id)) fates.set(data.id, `Entered ${turn}.${step}`)
        break
      case "turn/end": {
        const reason = data.reason
        const why = reason.kind === "blocked"
          ? "rejected"
          : reason.kind === "error"
          ? "failed"
          : reason.kind === "aborted"
          ? reason.reason?.kind === "disposed" ? "disposed" : "canceled"
          : reason.kind === "interrupted"
          ? "interrupted"
          : "discarded"
        for (const id of claimed) fates.set(id, `Dropped:${why}`)
        claimed = []
        break
      }
    }
  }
  return fates
}

const fateString = (fate: Delivery.Fate | undefined): string | undefined =>
  fate === undefined
    ? undefined
    : fate._tag === "Entered"
    ? `Entered ${fate.turn}.${fate.step}`
    : fate._tag === "Dropped"
    ? `Dropped:${fate.reason}`
    : "Pending"

const ids = (
  state: {
    readonly nextTurn: ReadonlyArray<{ readonly id: string }>
    readonly nextStep: ReadonlyArray<{ readonly message: { readonly id: string } }>
  }
) => ({
  "next-turn": state.nextTurn.map((m) => m.id),
  "next-step": state.nextStep.map((p) => p.message.id)
})

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

describe("DSH v0 import against raw-line oracles", () => {
  it.effect("the surface shapes in the fixtures: 431 appends, one inclusive replace; only message events", () =>
    Effect.sync(() => {
      const shapes = new Map<string, number>()
      const types = new Set<string>()
      for (const log of raws.values()) {
        for (const row of log.rows) {
          if (row.surfaceOp === undefined) continue
          types.add(row.type)
          const shape = typeof row.surfaceOp === "string" ? row.surfaceOp : JSON.stringify(Object.keys(row.surfaceOp))
          shapes.set(shape, (shapes.get(shape) ?? 0) + 1)
        }
      }
      expect(Object.fromEntries(shapes)).toEqual({ "append": 431, "[\"op\",\"start\",\"end\"]": 1 })
      expect([...types].sort()).toEqual(["assistant/message", "tool/result", "user/message"])
    }))

  it.effect("History.derive gives the messages of DSH's surface, for every fixture", () =>
    Effect.gen(function*() {
      let total = 0
      for (const [name, { events, header }] of yield* readAll) {
        const expected = dshSurface(raw(name))
        expect([name, History.derive(events, { header })]).toEqual([name, expected])
        total += expected.length
      }
      expect(total).toBe(431)
      // the one replace: the compaction checkpoint (seq 17) takes the place of the instructions (seq 5)
      expect(dshSurface(raw("acp__agent-instructions__session.jsonl")).map((m: Json) => m.id).slice(0, 3)).toEqual([
        "81078e7a-6837-45c2-a6b4-a5a3dfce0d4a",
        "162c764f-f01d-484d-ad81-1481dc29792a",
        "e4406554-e400-49c6-b8a3-0fe36841160b"
      ])
    }))

  it.effect("replayInbox equals the replayed splices after every splice and at the end; every inbox ends empty", () =>
    Effect.gen(function*() {
      let splices = 0
      const nonEmptyAtEnd: Array<string> = []
      for (const [name, { events, header }] of yield* readAll) {
        const end = dshInbox(raw(name), (seq, queues) => {
          splices++
          const state = replayInbox(events.slice(0, seq + 1), { header })
          expect([name, seq, ids(state)]).toEqual([name, seq, queues])
          // DSH v0 next-step items are never waking (§4)
          expect(state.nextStep.filter((p) => p.waking)).toEqual([])
        })
        expect([name, ids(replayInbox(events, { header }))]).toEqual([name, end])
        if (end["next-turn"].length + end["next-step"].length > 0) nonEmptyAtEnd.push(name)
      }
      expect(splices).toBe(192)
      expect(nonEmptyAtEnd).toEqual([])
    }))

  it.effect("inbox states spelled out: two queued followups; the seed's splices are not replayed", () =>
    Effect.gen(function*() {
      // acp__subagent-continuable.1: two coordinator followups queued during turn 1, one per turn after
      const continuable = yield* read("acp__subagent-continuable__session.1.jsonl")
      const splicesAt = continuable.events.filter((e) => e.type === "agent/inbox/spliced").map((e) => e.seq)
      expect(splicesAt).toEqual([3, 5, 6, 7, 23, 35])
      const at = (seq: number) => ids(replayInbox(continuable.events.slice(0, seq + 1), { header: continuable.header }))
      const e7 = "e7d15a94-203d-43ab-8279-4e22d5218feb"
      const s75 = "755c76db-6ee8-432d-a2d0-f8a3b7914e08"
      expect(at(3)).toEqual({ "next-turn": ["c67a308f-d867-424e-b198-c9f464228703"], "next-step": [] })
      expect(at(5)).toEqual({ "next-turn": [], "next-step": [] })
      expect(at(6)).toEqual({ "next-turn": [e7], "next-step": [] })
      expect(at(7)).toEqual({ "next-turn": [e7, s75], "next-step": [] })
      expect(at(23)).toEqual({ "next-turn": [s75], "next-step": [] })
      expect(at(35)).toEqual({ "next-turn": [], "next-step": [] })
      // acp__subagent-fork-in-process.1: the seed (seq < 42) queued and claimed its own prompt
      const fork = yield* read("acp__subagent-fork-in-process__session.1.jsonl")
      expect(fork.header.seedLength).toBe(42)
      expect(fork.events[0]!.type).toBe("agent/inbox/spliced")
      expect(ids(replayInbox(fork.events.slice(0, 1), { header: fork.header }))).toEqual({ "next-turn": [], "next-step": [] })
      expect(ids(replayInbox(fork.events.slice(0, 1)))).toEqual({
        "next-turn": ["8e65a90a-a69c-44f1-b55f-49fefdabb74c"],
        "next-step": []
      })
      const afterSeed = fork.events.findIndex((e) => e.seq >= 42 && e.type === "agent/inbox/spliced")
      expect(ids(replayInbox(fork.events.slice(0, afterSeed + 1), { header: fork.header }))).toEqual({
        "next-turn": ["d037163e-ed56-4c9c-b5d1-57df017d618c"],
        "next-step": []
      })
    }))

  it.effect("Delivery.fateOf gives every message inserted after the seed its fate, as fatesOf and the §12 rules do", () =>
    Effect.gen(function*() {
      const tally: Record<string, number> = {}
      for (const [name, { events, header }] of yield* readAll) {
        const log = raw(name)
        const expected = dshFates(log)
        const all = fatesOf(events, { header })
        expect([name, [...all.keys()].sort()]).toEqual([name, [...expected.keys()].sort()])
        for (const [id, oracle] of expected) {
          const fate = Delivery.fateOf(events, id, { header })
          expect([name, id, fate === undefined]).toEqual([name, id, false])
          expect([name, id, fate]).toEqual([name, id, all.get(id)])
          expect([name, id, fateString(fate)]).toEqual([name, id, oracle])
          const key = fate!._tag === "Dropped" ? `Dropped:${fate!.reason}` : fate!._tag
          tally[key] = (tally[key] ?? 0) + 1
        }
      }
      // Checked by hand: acp__cancel (the prompt entered 1.1, then the turn was aborted),
      // acp__code-mode-workspace-context and acp__agent-instructions (staged agent-instructions
      // context removed by a splice with outcome "canceled" and no cause: discarded),
      // acp__subagent-continuable.1 (the second queued followup is claimed by turn 3, which ends
      // error before its step: failed), acp__goal-snapshots__goal-round-driver.expected (one
      // placeholder id inserted three times, latest insertion entered 3.1).
      expect(tally).toEqual({ Entered: 90, "Dropped:discarded": 3, "Dropped:failed": 1 })
    }))

  it.effect("fates spelled out: reused ids, the seed, a failed claim", () =>
    Effect.gen(function*() {
      const goal = yield* read("acp__goal-snapshots__goal-round-driver__session.expected.jsonl")
      expect([...fatesOf(goal.events, { header: goal.header })]).toEqual([["{{sessionId}}", Delivery.entered(3, 1)]])
      const fork = yield* read("acp__subagent-fork-in-process__session.1.jsonl")
      expect(Delivery.fateOf(fork.events, "8e65a90a-a69c-44f1-b55f-49fefdabb74c", { header: fork.header })).toBeUndefined()
      expect(Delivery.fateOf(fork.events, "d037163e-ed56-4c9c-b5d1-57df017d618c", { header: fork.header }))
        .toEqual(Delivery.entered(2, 1))
      const continuable = yield* read("acp__subagent-continuable__session.1.jsonl")
      expect(Delivery.fateOf(continuable.events, "755c76db-6ee8-432d-a2d0-f8a3b7914e08", { header: continuable.header }))
        .toEqual(Delivery.dropped("failed"))
    }))

  it.effect("every raw row is one event at its expanded seq: foreign events kept as they are, packed rows expanded", () =>
    Effect.gen(function*() {
      let foreign = 0
      let packedRows = 0
      let elements = 0
      let total = 0
      for (const [name, contents] of yield* readAll) {
        const log = raw(name)
        const events = contents.events
        expect([name, contents.header]).toEqual([name, log.header])
        expect([name, events.length]).toEqual([name, log.events.length])
        for (const e of log.events) {
          const event = events[e.seq]! as Json
          if (e.k === undefined) {
            // the envelope as written, plus the assigned seq and time
            expect([name, event]).toEqual([name, { ...e.row, seq: e.seq, time: 0 }])
          } else {
            const d = e.row.data
            const chunk = e.row.type === "tool-call-chunks"
              ? {
                type: "tool-call-delta",
                index: d.index,
                id: d.id,
                argumentsDelta: d.args[e.k],
                ...(d.name === undefined ? {} : { name: d.name })
              }
              : { type: e.row.type === "text-chunks" ? "text-delta" : "reasoning-delta", index: d.index, text: d.texts[e.k] }
            expect([name, event]).toEqual([name, {
              type: "assistant/chunk",
              seq: e.seq,
              time: 0,
              data: { turn: d.turn, step: d.step, chunk }
            }])
          }
        }
        const rawForeign = log.rows.filter((r) => !CORE.has(r.type) && !PACKED.includes(r.type)).length
        expect([name, events.filter((e) => !CORE.has(e.type)).length]).toEqual([name, rawForeign])
        const packed = log.rows.filter((r) => PACKED.includes(r.type))
        const sum = packed.reduce((n, r) => n + elementsOf(r).length, 0)
        const rawChunks = log.rows.filter((r) => r.type === "assistant/chunk").length
        expect([name, events.filter((e) => e.type === "assistant/chunk").length - rawChunks]).toEqual([name, sum])
        foreign += rawForeign
        packedRows += packed.length
        elements += sum
        total += events.length
      }
      expect({ foreign, packedRows, elements, total }).toEqual({ foreign: 167, packedRows: 121, elements: 3200, total: 5718 })
    }))

  it.effect("DSH's own provenance (sourceEventSeqs) points at the expanded seqs", () =>
    Effect.gen(function*() {
      const links: Record<string, number> = {}
      for (const [name, { events }] of yield* readAll) {
        for (const e of events as ReadonlyArray<Json>) {
          for (const s of e.sourceEventSeqs ?? []) {
            const source = events[s]! as Json
            expect([name, e.seq, s < e.seq]).toEqual([name, e.seq, true])
            if (e.type === "assistant/message") {
              expect([name, e.seq, source.type, source.data.turn, source.data.step])
                .toEqual([name, e.seq, "assistant/chunk", e.data.turn, e.data.step])
            } else if (e.type === "tool/result") {
              expect([name, e.seq, source.type, source.data.callId])
                .toEqual([name, e.seq, "tool/call", e.data.message.content[0].toolCallId])
            }
            links[`${e.type} -> ${source.type}`] = (links[`${e.type} -> ${source.type}`] ?? 0) + 1
          }
        }
      }
      expect(links).toEqual({
        "assistant/message -> assistant/chunk": 4161,
        "tool/result -> tool/call": 89,
        "user/message -> user/message": 1
      })
    }))

  it.effect("the same logs with seq/time on every other row (seq0/time0 on packed rows) read to the same events, times assigned", () =>
    Effect.sync(() => {
      for (const name of dshFixtures) {
        const log = raw(name)
        // every other row gets an explicit envelope; the others take the previous event's time
        let seq = 0
        let time = 0
        const expectedTimes: Array<number> = []
        const lines = [JSON.stringify(log.header)]
        log.rows.forEach((row, i) => {
          const explicit = i % 2 === 0
          if (PACKED.includes(row.type)) {
            const n = elementsOf(row).length
            if (explicit) {
              time = 5000 + seq
              lines.push(JSON.stringify({ type: row.type, seq0: seq, time0: time, data: row.data }))
              for (let k = 0; k < n; k++) expectedTimes.push(time += k === 0 ? 0 : row.data.dt[k - 1])
            } else {
              lines.push(JSON.stringify(row))
              for (let k = 0; k < n; k++) expectedTimes.push(time)
            }
            seq += n
          } else {
            if (explicit) time = 5000 + seq
            lines.push(JSON.stringify(explicit ? { ...row, seq, time } : row))
            expectedTimes.push(time)
            seq += 1
          }
        })
        const original = decodeLog(log.text)
        const variant = decodeLog(lines.join("\n") + "\n")
        if (Either.isLeft(original) || Either.isLeft(variant)) {
          expect([name, original, variant]).toEqual([name, "readable", "readable"])
          continue
        }
        const strip = (events: ReadonlyArray<SessionEvent>) => events.map(({ time: _, ...rest }) => rest)
        expect([name, strip(variant.right.events)]).toEqual([name, strip(original.right.events)])
        expect([name, variant.right.events.map((e) => e.time)]).toEqual([name, expectedTimes])
        expect([name, variant.right.header as SessionHeader]).toEqual([name, original.right.header])
      }
    }))
})
