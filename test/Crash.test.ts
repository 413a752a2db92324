/**
 * Real crashes (issue 5, DESIGN.md §3.1, §10): a session runs in a child process
 * (`test/utils/crashChild.mjs`: a three-call tool batch, a queued followup, an injection) and
 * kills itself with SIGKILL right after each append in turn, with `fsync: "none"` and
 * `"batch"`; torn writes are made by cutting the complete log at every byte offset inside its
 * last line. After each: repair, then the log is valid, every delivery whose call had returned
 * is in it exactly once, no event is duplicated, the closers are those §10 names, and a second
 * repair appends nothing.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as Invariant from "../src/Invariant.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"

const child = Path.resolve(process.cwd(), "test/utils/crashChild.mjs")

const runChild = (directory: string, fsync: "none" | "batch", killAt: number) => {
  const r = spawnSync(process.execPath, [child, directory, fsync, String(killAt)], { encoding: "utf8", timeout: 30_000 })
  const returned = r.stdout.split("\n").filter((l) => l.startsWith("returned ")).map((l) => l.slice(9))
  const appends = r.stdout.split("\n").find((l) => l.startsWith("appends "))
  return { signal: r.signal, status: r.status, stderr: r.stderr, returned, appends: appends === undefined ? undefined : Number(appends.slice(8)) }
}

/** Repairs the session in `directory`; returns what was appended and the log as read back. */
const repairIn = (directory: string) =>
  Effect.gen(function*() {
    const appended = yield* Agent.repair("s").pipe(Effect.provide(SessionStore.layerJsonl({ directory })), Effect.scoped)
    const again = yield* Agent.repair("s").pipe(Effect.provide(SessionStore.layerJsonl({ directory })), Effect.scoped)
    const contents = yield* SessionStore.readFile(Path.join(directory, "s.jsonl"))
    return { appended, again, contents }
  }).pipe(Effect.provide(NodeFileSystem.layer))

/** The checks every repaired log must pass. */
const checkRepaired = (
  label: string,
  r: { appended: ReadonlyArray<SessionEvent>; again: ReadonlyArray<SessionEvent>; contents: SessionStore.LogContents },
  returned: ReadonlyArray<string>
) => {
  const events = r.contents.events
  expect([label, r.contents.warnings]).toEqual([label, []])
  expect([label, Invariant.check(events)]).toEqual([label, []])
  expect([label, r.again]).toEqual([label, []])
  expect([label, events.map((e) => e.seq)]).toEqual([label, events.map((_, i) => i)])
  // Every delivery whose call returned is in the log exactly once.
  for (const id of returned) {
    const inserted = events.filter((e) => e.type === "agent/inbox/spliced" && (e.data as any).inserted.some((m: any) => m.id === id))
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
      expect([label, ["tool/call", "tool/result", "step/end", "turn/end", "session/end-seed"].includes(e.type)]).toEqual([label, true])
      if (e.type === "turn/end") expect([label, (e.data as any).reason]).toEqual([label, { kind: "interrupted" }])
      if (e.type === "tool/result") {
        expect([label, ["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"].includes((e.data as any).error.code)]).toEqual([label, true])
      }
    }
    const order = types.filter((t) => t !== "tool/call" && t !== "tool/result")
    expect([label, order]).toEqual([label, order.includes("step/end") ? ["step/end", "turn/end", "session/end-seed"] : order.includes("turn/end") ? ["turn/end", "session/end-seed"] : ["session/end-seed"]])
  }
}

const tmp = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "agent-loop-crash-"))

describe("crashes: SIGKILL after every append, torn last lines (§10)", () => {
  for (const fsync of ["none", "batch"] as const) {
    it.effect(`fsync ${fsync}: a kill after each append leaves a log that repairs to a valid one`, () =>
      Effect.gen(function*() {
        const full = runChild(tmp(), fsync, -1)
        expect(full.status).toBe(0)
        const total = full.appends!
        expect(total).toBeGreaterThan(6)
        for (let k = 0; k < total; k++) {
          const dir = tmp()
          const run = runChild(dir, fsync, k)
          expect([k, run.signal]).toEqual([k, "SIGKILL"])
          checkRepaired(`${fsync} kill after append ${k}`, yield* repairIn(dir), run.returned)
          Fs.rmSync(dir, { recursive: true, force: true })
        }
      }), 120_000)
  }

  it.effect("a log cut at every byte offset inside its last line repairs to a valid one", () =>
    Effect.gen(function*() {
      const source = tmp()
      const full = runChild(source, "none", -1)
      expect(full.status).toBe(0)
      const text = Fs.readFileSync(Path.join(source, "s.jsonl"), "utf8")
      const lastStart = text.lastIndexOf("\n", text.length - 2) + 1
      const dir = tmp()
      for (let cut = lastStart + 1; cut < text.length - 1; cut++) {
        Fs.writeFileSync(Path.join(dir, "s.jsonl"), text.slice(0, cut))
        const r = yield* repairIn(dir)
        checkRepaired(`cut at byte ${cut}`, r, full.returned)
        // The torn line is gone; everything before it is kept.
        expect(r.contents.events.length).toBe(text.slice(0, lastStart).split("\n").length - 2 + r.appended.length)
      }
    }), 120_000)
})
