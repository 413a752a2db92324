/**
 * Real crashes (§10, §3.1, §10): a session runs in a child process
 * (`test/utils/crashChild.mjs`: a three-call tool batch, a queued followup, an injection) and
 * kills itself with SIGKILL right after each append in turn, on JSONL with `fsync: "none"` and
 * `"batch"` and on SQLite; torn writes are made by cutting the complete log at every byte offset
 * inside its last line, and kills inside multi-event appends by cutting it at every line. After each: repair, then the log is valid, every delivery whose call had returned
 * is in it exactly once, no event is duplicated, the closers are those §10 names, and a second
 * repair appends nothing.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as Delivery from "../src/Delivery.js"
import * as Invariant from "../src/Invariant.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import type * as SessionLog from "../src/SessionLog.js"
import * as SessionStore from "../src/SessionStore.js"
import * as SqlSessionStore from "../src/SqlSessionStore.js"
import { CHILD_RUN_MS, CRASH_TEST_MS, note } from "./utils/bounds.js"
import { run } from "./utils/child.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const child = Path.resolve(process.cwd(), "test/utils/crashChild.mjs")

type Mode = "none" | "batch" | "sqlite"

/** Runs the child to its end (or its SIGKILL), bounded by `CHILD_RUN_MS`; what it printed. */
const runChild = (directory: string, fsync: Mode, killAt: number) =>
  Effect.gen(function*() {
    const started = Date.now()
    const r = yield* run(process.execPath, [child, directory, fsync, String(killAt)], { withinMs: CHILD_RUN_MS })
    note("Crash: a crash child's run", Date.now() - started)
    const returned = r.stdout.split("\n").filter((l) => l.startsWith("returned ")).map((l) => l.slice(9))
    const appends = r.stdout.split("\n").find((l) => l.startsWith("appends "))
    return {
      signal: r.signal,
      status: r.status,
      stderr: r.stderr,
      returned,
      appends: appends === undefined ? undefined : Number(appends.slice(8))
    }
  })

/**
 * Repairs the session in `directory` (its JSONL file, or with `"sqlite"` its database), each
 * time with a new store as after a restart; returns what was appended and the log as read back.
 */
const repairIn = (directory: string, mode: Mode = "none") =>
  Effect.gen(function*() {
    const store = () =>
      mode === "sqlite"
        ? SqlSessionStore.layerSqlite({ filename: Path.join(directory, "sessions.db") })
        : SessionStore.layerJsonl({ directory })
    const appended = yield* Agent.repair("s").pipe(Effect.provide(store()), Effect.scoped)
    const again = yield* Agent.repair("s").pipe(Effect.provide(store()), Effect.scoped)
    const contents = mode === "sqlite"
      ? yield* Effect.flatMap(SessionStore.SessionStore, (s) => s.read("s")).pipe(Effect.provide(store()), Effect.scoped)
      : yield* SessionStore.readFile(Path.join(directory, "s.jsonl"))
    return { appended, again, contents }
  }).pipe(Effect.provide(NodeFileSystem.layer))

/** The checks every repaired log must pass. */
const checkRepaired = (
  label: string,
  r: { appended: ReadonlyArray<SessionEvent>; again: ReadonlyArray<SessionEvent>; contents: SessionLog.LogContents },
  returned: ReadonlyArray<string>
) => {
  const events = r.contents.events
  expect([label, r.contents.warnings]).toEqual([label, []])
  expect([label, Invariant.check(events)]).toEqual([label, []])
  expect([label, r.again]).toEqual([label, []])
  expect([label, events.map((e) => e.seq)]).toEqual([label, events.map((_, i) => i)])
  // Every delivery whose call returned is in the log exactly once.
  for (const id of returned) {
    const inserted = events.filter((e) =>
      e.type === "agent/inbox/spliced" && (e.data as any).inserted.some((m: any) => m.id === id)
    )
    expect([label, id, inserted.length]).toEqual([label, id, 1])
  }
  // No event is duplicated.
  const identities = events
    .filter((e) => e.type !== "agent/inbox/spliced" && e.type !== "session/end-seed")
    .map((e) => `${e.type} ${JSON.stringify(e.data)}`)
  expect([label, new Set(identities).size]).toEqual([label, identities.length])
  // The closers are those §10 names, in its order.
  const types = r.appended.map((e) => e.type)
  if (types.length > 0) {
    expect([label, types.at(-1)]).toEqual([label, "session/end-seed"])
    for (const e of r.appended) {
      expect([label, ["tool/call", "tool/result", "step/end", "turn/end", "session/end-seed"].includes(e.type)]).toEqual([
        label,
        true
      ])
      if (e.type === "turn/end") expect([label, (e.data as any).reason]).toEqual([label, { kind: "interrupted" }])
      if (e.type === "tool/result") {
        expect([label, ["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"].includes((e.data as any).error.code)]).toEqual([label, true])
      }
    }
    const order = types.filter((t) => t !== "tool/call" && t !== "tool/result")
    expect([label, order]).toEqual([
      label,
      order.includes("step/end")
        ? ["step/end", "turn/end", "session/end-seed"]
        : order.includes("turn/end")
        ? ["turn/end", "session/end-seed"]
        : ["session/end-seed"]
    ])
  }
}

const tmp = scratchDirs("agent-loop-crash-")

/** The child's session run to its end once (fsync none), shared by the tests that cut its log. */
let completeRun: { readonly text: string; readonly returned: ReadonlyArray<string>; readonly appends: number } | undefined
const complete = Effect.gen(function*() {
  if (completeRun === undefined) {
    const source = tmp()
    const full = yield* runChild(source, "none", -1)
    expect(full.status).toBe(0)
    completeRun = { text: Fs.readFileSync(Path.join(source, "s.jsonl"), "utf8"), returned: full.returned, appends: full.appends! }
    Fs.rmSync(source, { recursive: true, force: true })
  }
  return completeRun
})

/** A closer as a short string: `tool/call c1`, `tool/result c1 TOOL_NOT_STARTED`, `step/end 1.1`, … */
const closer = (e: { readonly type: string; readonly data: any }): string =>
  e.type === "tool/call"
    ? `tool/call ${e.data.callId}`
    : e.type === "tool/result"
    ? `tool/result ${e.data.message.content[0].toolCallId} ${e.data.error.code}`
    : e.type === "step/end"
    ? `step/end ${e.data.turn}.${e.data.step}`
    : e.type === "turn/end"
    ? `turn/end ${e.data.turn} ${e.data.reason.kind}`
    : e.type

/**
 * The closers §10 names for a log, computed here from its events: nothing for an empty log;
 * with no open turn only `session/end-seed` (unless the log ends with one); for an open turn,
 * for each call of the open step's last `assistant/message` without a result, in call order,
 * `tool/result TOOL_OUTCOME_UNKNOWN` when its `tool/call` is logged, else `tool/call` +
 * `tool/result TOOL_NOT_STARTED`; then `step/end` (when a step is open), `turn/end interrupted`,
 * `session/end-seed`.
 */
const closersFor = (events: ReadonlyArray<{ readonly type: string; readonly data: any }>): Array<string> => {
  const lastIndex = (list: typeof events, type: string) => list.map((e) => e.type).lastIndexOf(type)
  if (events.length === 0) return []
  const lastStart = lastIndex(events, "turn/start")
  const open = lastStart >= 0 && !events.slice(lastStart).some((e) => e.type === "turn/end")
  if (!open) return events.at(-1)!.type === "session/end-seed" ? [] : ["session/end-seed"]
  const turn = events[lastStart]!.data.turn
  const inTurn = events.slice(lastStart)
  const stepAt = lastIndex(inTurn, "step/start")
  const stepOpen = stepAt >= 0 && !inTurn.slice(stepAt).some((e) => e.type === "step/end")
  const out: Array<string> = []
  if (stepOpen) {
    const inStep = inTurn.slice(stepAt)
    const step = inStep[0]!.data.step
    const response = inStep[lastIndex(inStep, "assistant/message")]
    for (const block of response?.data.message.content ?? []) {
      if (block.type !== "tool-call") continue
      if (inStep.some((e) => e.type === "tool/result" && e.data.message.content[0].toolCallId === block.id)) continue
      if (inStep.some((e) => e.type === "tool/call" && e.data.callId === block.id)) {
        out.push(`tool/result ${block.id} TOOL_OUTCOME_UNKNOWN`)
      } else {
        out.push(`tool/call ${block.id}`, `tool/result ${block.id} TOOL_NOT_STARTED`)
      }
    }
    out.push(`step/end ${turn}.${step}`)
  }
  out.push(`turn/end ${turn} interrupted`, "session/end-seed")
  return out
}

describe("crashes: SIGKILL after every append, torn last lines (§10)", () => {
  for (const fsync of ["none", "batch", "sqlite"] as const) {
    it.effect(
      `${
        fsync === "sqlite" ? "sqlite" : `jsonl fsync ${fsync}`
      }: a kill after each append leaves a log that repairs to a valid one`,
      () =>
        Effect.gen(function*() {
          const full = yield* runChild(tmp(), fsync, -1)
          expect(full.status).toBe(0)
          const total = full.appends!
          expect(total).toBeGreaterThan(6)
          for (let k = 0; k < total; k++) {
            const dir = tmp()
            const run = yield* runChild(dir, fsync, k)
            expect([k, run.signal]).toEqual([k, "SIGKILL"])
            checkRepaired(`${fsync} kill after append ${k}`, yield* repairIn(dir, fsync), run.returned)
            Fs.rmSync(dir, { recursive: true, force: true })
          }
        }),
      CRASH_TEST_MS
    )
  }

  it.effect("a log cut at every byte offset inside its last line repairs to a valid one", () =>
    Effect.gen(function*() {
      const full = yield* complete
      const text = full.text
      const lastStart = text.lastIndexOf("\n", text.length - 2) + 1
      const dir = tmp()
      for (let cut = lastStart + 1; cut < text.length - 1; cut++) {
        Fs.writeFileSync(Path.join(dir, "s.jsonl"), text.slice(0, cut))
        const r = yield* repairIn(dir)
        checkRepaired(`cut at byte ${cut}`, r, full.returned)
        // The torn line is gone; everything before it is kept.
        expect(r.contents.events.length).toBe(text.slice(0, lastStart).split("\n").length - 2 + r.appended.length)
      }
    }))

  it.effect(
    "a log cut at every line boundary, inside multi-event appends too, repairs with exactly the §10 closers",
    () =>
      Effect.gen(function*() {
        // The agent writes several events in one append (the claims, step/start with its
        // user/messages, the assistant/message with its tool/calls, …): a SIGKILL never separates
        // them, a torn multi-line write or a power loss can. Every prefix of k complete events.
        const full = yield* complete
        const lines = full.text.split("\n").slice(0, -1)
        const events = lines.slice(1).map((l) => JSON.parse(l))
        expect([events.length, full.appends]).toEqual([29, 9])
        const dir = tmp()
        const results: Record<string, number> = {}
        for (let k = 0; k <= events.length; k++) {
          Fs.writeFileSync(Path.join(dir, "s.jsonl"), lines.slice(0, k + 1).join("\n") + "\n")
          const r = yield* repairIn(dir)
          const kept = events.slice(0, k)
          // The deliveries that had returned when the cut was made: those whose splice is kept.
          // They are always the first ones returned (each returns after its splice is durable).
          const returned = full.returned.filter((id) =>
            kept.some((e) => e.type === "agent/inbox/spliced" && e.data.inserted.some((m: any) => m.id === id))
          )
          expect([k, returned]).toEqual([k, full.returned.slice(0, returned.length)])
          checkRepaired(`cut after ${k} events`, r, returned)
          // Everything before the cut is kept as it was; the closers are exactly those §10 names.
          expect([k, r.contents.events.slice(0, k)]).toEqual([k, kept])
          expect([k, r.appended.map(closer)]).toEqual([k, closersFor(kept)])
          // Every returned delivery has a fate in the repaired log.
          for (const id of returned) expect([k, id, Delivery.fateOf(r.contents.events, id) === undefined]).toEqual([k, id, false])
          for (const e of r.appended) {
            if (e.type === "tool/result") {
              const code = (e.data as any).error.code
              results[code] = (results[code] ?? 0) + 1
            }
          }
        }
        // k = 11: the response with calls c1, c2, c3 is kept, none of its tool/calls (3 not started);
        // k = 12, 13: one, two calls logged; k = 14: all three logged, no result; k = 15, 16: one, two results.
        expect(results).toEqual({ TOOL_NOT_STARTED: 6, TOOL_OUTCOME_UNKNOWN: 9 })
        Fs.rmSync(dir, { recursive: true, force: true })
      })
  )
})
