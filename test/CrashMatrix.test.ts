/**
 * The crash-point matrix (§23; §3.3, §10, §12, §26): every scenario of
 * `utils/crashMatrix.ts`, on every store, with a fault at each append it makes: the process
 * crashes before the append, after it (durable, not acknowledged), in the middle of its write
 * (JSONL: a torn line), or the append fails with `ENOSPC` after a short write (and, with
 * `fsync: "batch"`, with `EIO` from `fdatasync`) while the process lives on. Each cell is resumed
 * to the end of its scenario and checked against the scenario's run without a fault
 * (`utils/crashMatrixChecks.ts`: `checkCell` lists what is checked). The sub-agent scenario
 * (§27 rule 16) takes the crashes alone: its cells are about crash repair. The reference runs are made when the file is collected,
 * so that the tests' names state the matrix's size as it runs; each test checks that it ran
 * exactly the cells its name counts.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { CRASH_MATRIX_MS } from "./utils/bounds.js"
import { type CellRun, makePlace, runCell, scenarios, type StoreKind, storeKinds } from "./utils/crashMatrix.js"
import { checkCell, subagentCases } from "./utils/crashMatrixChecks.js"
import type { Failpoint } from "./utils/failpoints.js"
import { dropDatabase } from "./utils/pg.js"

/** The faults of one append on a store kind (`crashOnly`: the crashes alone, `Scenario.crashOnly`). */
const faultsAt = (kind: StoreKind, at: number, crashOnly = false): ReadonlyArray<Failpoint> => [
  { at, fault: { _tag: "Crash", when: "before" } },
  { at, fault: { _tag: "Crash", when: "after" } },
  ...(kind === "jsonl" || kind === "jsonl-batch"
    ? [{ at, fault: { _tag: "TornCrash", bytes: 7 } } as const, { at, fault: { _tag: "TornCrash", bytes: -1 } } as const]
    : []),
  ...(crashOnly ? [] : ioFaultsAt(kind, at))
]

/** The faults of an append the process lives on: a full disk (once, three times), `EIO` from `fdatasync`. */
const ioFaultsAt = (kind: StoreKind, at: number): ReadonlyArray<Failpoint> => [
  { at, fault: { _tag: "IoError", code: "ENOSPC", syscall: "write", bytes: 3 } },
  // The disk stays full for three appends, then has space again.
  { at, times: 3, fault: { _tag: "IoError", code: "ENOSPC", syscall: "write" } },
  ...(kind === "jsonl-batch" ? [{ at, fault: { _tag: "IoError", code: "EIO", syscall: "fdatasync" } } as const] : [])
]

/** The cells of a store whose crash leaves an approval question open (§26 rule 8). */
const WAITED: Readonly<Record<StoreKind, number>> = { memory: 6, jsonl: 12, "jsonl-batch": 12, sqlite: 6, postgresql: 6 }

/**
 * The sub-agent calls a crash cut short, by case (§27 rule 16): the sub-agent scenario makes 16
 * appends (the parent's and its child's), each crashed before and after (on JSONL also torn
 * twice, which count as before and after). `c`: after the parent's `subagent/start` (the child is
 * never created); `b`: before each of the child's 6 appends (before its descriptor: the task never
 * started) and after each but its last; `a`: after the child's last append (its `turn/end`) and
 * before the parent's `subagent/end`; `ended`: after the `subagent/end`, before the call's result.
 */
const CUT_SHORT: Readonly<Record<StoreKind, Record<string, number>>> = {
  memory: { a: 2, b: 11, c: 1, ended: 2 },
  jsonl: { a: 4, b: 22, c: 2, ended: 4 },
  "jsonl-batch": { a: 4, b: 22, c: 2, ended: 4 },
  sqlite: { a: 2, b: 11, c: 1, ended: 2 },
  postgresql: { a: 2, b: 11, c: 1, ended: 2 }
}

// Files on tmpfs when there is one (fdatasync there costs nothing), else in the temporary directory.
const root = Fs.mkdtempSync(Path.join(Fs.existsSync("/dev/shm") ? "/dev/shm" : Os.tmpdir(), "crash-matrix-"))
let sessions = 0
const nextSession = () => `s${sessions++}`

/** The reference runs (no fault) of every scenario on every store, and the cells they give. */
const plan = await Effect.runPromise(Effect.gen(function*() {
  const out: Array<{
    readonly kind: StoreKind
    readonly place: Effect.Effect.Success<ReturnType<typeof makePlace>>
    readonly appends: number
    readonly cells: ReadonlyArray<{ readonly scenario: number; readonly failpoint: Failpoint; readonly reference: CellRun }>
    readonly referenceProblems: ReadonlyArray<string>
  }> = []
  for (const kind of storeKinds) {
    const place = yield* makePlace(kind, Path.join(root, kind))
    const cells: Array<{ scenario: number; failpoint: Failpoint; reference: CellRun }> = []
    const problems: Array<string> = []
    let appends = 0
    let singleTool: CellRun | undefined
    for (let s = 0; s < scenarios.length; s++) {
      const scenario = scenarios[s]!
      const prefix = scenario.repairedStart === true ? singleTool?.events : undefined
      const reference = yield* runCell(scenario, place, nextSession(), undefined, prefix)
      if (scenario.name === "single tool") singleTool = reference
      for (const p of checkCell(reference, reference, false)) problems.push(`${scenario.name}: ${p}`)
      if (scenario.compaction !== undefined) {
        // The scenario is there for its compactions: the run without a fault makes both.
        const reasons = reference.events.filter((e) => e.type === "compaction/start").map((e) => (e.data as any).reason)
        const compacted = reference.events.filter((e) => e.type === "compaction/end" && (e.data as any).outcome === "compacted")
        if (reasons.join(",") !== "pressure,manual" || compacted.length !== 2) {
          problems.push(`${scenario.name}: compactions ${reasons.join(",")}, ${compacted.length} compacted`)
        }
      }
      if (scenario.approver !== undefined) {
        // The scenario is there for its questions: the run without a fault asks and decides them.
        const decided = reference.events.filter((e) => e.type === "approval/decided").map((e) =>
          `${(e.data as any).outcome} by ${(e.data as any).by.kind}`
        )
        if (decided.join(",") !== scenario.approver.expected.join(",")) {
          problems.push(`${scenario.name}: decisions ${decided.join(",")}`)
        }
      }
      appends += reference.appends
      for (let at = 1; at <= reference.appends; at++) {
        for (const failpoint of faultsAt(kind, at, scenario.crashOnly)) cells.push({ scenario: s, failpoint, reference })
      }
    }
    out.push({ kind, place, appends, cells, referenceProblems: problems })
  }
  return out
}))

const total = plan.reduce((n, p) => n + p.cells.length, 0)
const range = (values: ReadonlyArray<number>) => {
  const low = Math.min(...values)
  const high = Math.max(...values)
  return low === high ? `${low}` : `${low}–${high}`
}
const boundaries = range(plan.map((p) => p.appends))
const faults = range(plan.flatMap((p) => [faultsAt(p.kind, 1).length, faultsAt(p.kind, 1, true).length]))

describe(`crash-point matrix: ${scenarios.length} scenarios (${boundaries} append boundaries) × ${storeKinds.length} stores × ${faults} faults = ${total} cells`, () => {
  afterAll(() => {
    Fs.rmSync(root, { recursive: true, force: true })
    for (const { place } of plan) if (place.kind === "postgresql") dropDatabase(place.directory)
  })
  for (const { appends, cells, kind, place, referenceProblems } of plan) {
    it.effect(`${kind}: ${appends} append boundaries, ${cells.length} cells`, () =>
      Effect.gen(function*() {
        expect(referenceProblems).toEqual([])
        const failures: Array<string> = []
        let ran = 0
        // Cells whose crash left an approval question open (§26 rule 8): the resumed agent asked
        // it again and the approver decided it there.
        let waited = 0
        // Sub-agent calls cut short by a crash, by the case of §27 rule 16 that closed them.
        const cases: Record<string, number> = {}
        for (const cell of cells) {
          const scenario = scenarios[cell.scenario]!
          const prefix = scenario.repairedStart === true
            ? plan.find((p) => p.kind === kind)!.cells.find((c) => scenarios[c.scenario]!.name === "single tool")?.reference
              .events
            : undefined
          const run = yield* runCell(scenario, place, nextSession(), cell.failpoint, prefix)
          ran++
          if (run.openAtCrash.size > 0) waited++
          for (const c of subagentCases(run)) cases[c] = (cases[c] ?? 0) + 1
          const problems = checkCell(run, cell.reference, cell.failpoint.fault._tag === "IoError")
          if (!run.fired) problems.push("the failpoint did not fire")
          if (problems.length > 0) failures.push(`${scenario.name} / ${JSON.stringify(cell.failpoint)}: ${problems.join("; ")}`)
        }
        expect(failures.slice(0, 10)).toEqual([])
        expect(ran).toBe(cells.length)
        // A crash after the append of a question (with its call), after the free call's beside
        // it, or before the decision's: 2 + 2 cells of the first approval scenario, 2 of the
        // second; on JSONL also both torn writes of each of the three appends after a question.
        expect(waited).toBe(WAITED[kind])
        expect(cases).toEqual(CUT_SHORT[kind])
      }), CRASH_MATRIX_MS)
  }
})
