// Instruction counts (bench/README.md, "Instruction counts"): each side's workloads run by
// bench/instructions-job.js in one process under valgrind's callgrind, which counts the
// instructions executed in user space (Ir), in every thread. The job's marks make callgrind dump
// the count of each item's warm-up, then of measured segments of sizes A, B, A, B (B = 2A), each
// followed by a full GC counted apart; the figure per unit of the workload is (the least Ir of
// the B segments − the least of the A segments) / (B − A units): start, imports, the warm-up and
// what each run costs whatever its size (its agent, store, server) cancel out. Node runs V8 in
// predictable mode (no background threads, a GC schedule that does not depend on time) with an
// old generation large enough that no full GC runs inside a segment: the counts repeat from one
// process to the next and do not move with the machine's load, unlike CPU time. Kernel work
// (system calls: the socket's, the file's) is not counted, nor are waits; nor is the old
// generation's collection.
//
//   node bench/instructions.js [--only=turns,streaming,…] [--sides=ours,pi,oursLts,pi1,raw] [--jobs=2] [--quick]
//
// Prints one table (workload, store, node, side, Ir per unit, ratio ours / the peer of the same
// node) and writes bench/results/instructions.json (not with --only, --sides or --quick).
// Exit code 1 when a job failed (its counts were off, or valgrind did not dump as expected).
import { spawn, spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { WORKLOADS } from "./workloads.js"

const here = dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const only = flag("only")?.split(",")
const sidesArg = flag("sides")?.split(",")
const quick = args.includes("--quick")
const parallel = Number(flag("jobs") ?? Math.min(2, cpus().length))

// The two Node lines of bench/run.js: pi 0.73 and ours on this node, pi 1.x and ours on the LTS
// node of tools/node-lts (BENCH_PI=1 selects pi 1.x in bench/pi.js and bench/stream.js).
const LTS_PATH = join(here, "..", "tools", "node-lts", "node_modules", "node-lts", "bin", "node")
const LTS = existsSync(LTS_PATH) ? LTS_PATH : process.execPath
const versionOf = (name) => {
  try {
    return JSON.parse(readFileSync(join(here, "..", "node_modules", name, "package.json"), "utf8")).version
  } catch {
    return "?"
  }
}
const nodeVersion = (node) => spawnSync(node, ["--version"], { encoding: "utf8" }).stdout.trim()
const NODES = { current: process.execPath, lts: LTS }
const VERSIONS = { current: process.version, lts: nodeVersion(LTS) }
/** Sides: [name, side of the job, node, env, label]. */
const SIDES = {
  ours: { side: "ours", node: "current", env: {}, label: "ours" },
  pi: { side: "pi", node: "current", env: {}, label: `pi ${versionOf("@mariozechner/pi-agent-core")}` },
  oursLts: { side: "ours", node: "lts", env: {}, label: "ours" },
  pi1: { side: "pi", node: "lts", env: { BENCH_PI: "1" }, label: `pi ${versionOf("@earendil-works/pi-agent-core")}` },
  raw: { side: "raw", node: "current", env: {}, label: "raw" }
}
const PEER_OF = { pi: "ours", pi1: "oursLts", raw: "ours" }

// Sizes: a segment's growth (B − A) is 10⁸ instructions or more, far above what a run costs
// whatever its size; one warm-up run of A per item (the process's earlier items warm the code
// they share), then A, B, A, B with B = 2A (bench/instructions-job.js).
const q = (n) => (quick ? Math.max(5, Math.round(n / 4)) : n)
const sizes = (a) => [q(a), 2 * q(a), q(a), 2 * q(a)]
const promptItems = (workload, prompts, stores = ["memory", "jsonl"]) =>
  stores.map((store) => ({
    workload,
    store,
    unit: WORKLOADS[workload].unit,
    sides: ["ours", "pi", "oursLts", "pi1"],
    item: { kind: "prompts", workload, store, warmup: { prompts: q(prompts), runs: 1 }, sizes: sizes(prompts) }
  }))
const PLAN = [
  ...promptItems("turns", 200),
  ...promptItems("tool-steps", 20),
  ...promptItems("parallel-tools", 30),
  ...promptItems("steer-during-tools", 30),
  // the recording tracer of bench/ours.js (§19): ours only, ratio to ours without a tracer
  ...[["turns", 200], ["tool-steps", 20]].map(([workload, prompts]) => ({
    workload,
    store: "memory, recording tracer",
    unit: WORKLOADS[workload].unit,
    sides: ["ours", "oursLts"],
    tracer: true,
    item: {
      kind: "prompts",
      workload,
      store: "memory",
      tracer: "record",
      warmup: { prompts: q(prompts), runs: 1 },
      sizes: sizes(prompts)
    }
  })),
  // streaming text: the server paced at 30 ms an event (slower than a client under valgrind
  // needs for one, so that each read holds one event whatever the load); 2 turns of A = 150
  // and of B = 300 deltas: the figure is per extra delta.
  {
    workload: "streaming",
    store: "loopback",
    unit: "text delta (30 ms apart)",
    sides: ["ours", "pi", "oursLts", "pi1", "raw"],
    item: {
      kind: "streaming",
      scenario: "text",
      tickMs: 30,
      turns: 2,
      warmup: { deltas: q(100), turns: 2 },
      sizes: sizes(100)
    }
  },
  // concurrent-sessions, small: 10 sessions at once (20 deltas, a tool call, step 2 each), the
  // server paced at 300 ms a round of events; one run of them in A, two in B: per turn of a run.
  {
    workload: "concurrent-sessions",
    store: "loopback",
    unit: "turn (10 sessions, 20 deltas)",
    sides: ["ours", "pi", "oursLts", "pi1", "raw"],
    item: { kind: "concurrent", deltas: 20, tickMs: 300, sessions: 10, warmup: { sessions: 10 }, sizes: [1, 2, 1, 2] }
  }
]
const VALGRIND = [
  "--tool=callgrind",
  "--dump-before=uv_loadavg",
  "--dump-instr=no",
  "--dump-line=no",
  "--trace-children=no"
]
// V8 in predictable mode: no background threads (compilation and GC on the main thread, counted
// the same way each time) and a GC schedule that does not depend on time: the counts repeat.
const NODE_FLAGS = ["--expose-gc", "--predictable", "--predictable-gc-schedule", "--initial-old-space-size=4096"]

const KNOWN = new Set(PLAN.map((r) => r.workload))
const usage = (why) => {
  process.stderr.write(
    `bench/instructions.js: ${why}\nusage: node bench/instructions.js [--only=NAME,…] [--sides=${
      Object.keys(SIDES).join(",")
    }] [--jobs=N] [--quick]\nworkloads: ${[...KNOWN].join(", ")}\n`
  )
  process.exit(2)
}
for (const a of args) {
  if (a !== "--quick" && !/^--(only|sides|jobs)=/.test(a)) usage(`unknown argument ${JSON.stringify(a)}`)
}
for (const n of only ?? []) if (!KNOWN.has(n)) usage(`--only: unknown workload ${JSON.stringify(n)}`)
for (const s of sidesArg ?? []) if (SIDES[s] === undefined) usage(`--sides: unknown side ${JSON.stringify(s)}`)
if (!(parallel >= 1)) usage("--jobs: a number ≥ 1")
if (spawnSync("valgrind", ["--version"], { encoding: "utf8" }).status !== 0) usage("no valgrind on the PATH")

const started = performance.now()
const loadStart = loadavg()
const failures = []

/**
 * Runs one side's process under callgrind: its rows' items in plan order. Resolves a Map from
 * each row to `{ ir: [warm-up, A, B, A, B], units: [A, B, A, B] }`, or an empty Map when it failed.
 */
const runSide = (sideName, sideRows) =>
  new Promise((resolve) => {
    const side = SIDES[sideName]
    const label = `${sideName} (node ${VERSIONS[side.node]}): ${sideRows.length} items`
    const dir = mkdtempSync(join(tmpdir(), "bench-ir-"))
    const t = performance.now()
    process.stderr.write(`  ${label} started\n`)
    const child = spawn(
      "valgrind",
      [
        ...VALGRIND,
        `--callgrind-out-file=${join(dir, "cg.out")}`,
        NODES[side.node],
        ...NODE_FLAGS,
        join(here, "instructions-job.js"),
        JSON.stringify({ side: side.side, items: sideRows.map((r) => r.item) })
      ],
      { env: { ...process.env, ...side.env }, stdio: ["ignore", "pipe", "pipe"] }
    )
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (b) => (stdout += b))
    child.stderr.on("data", (b) => (stderr += b))
    child.on("close", (code, signal) => {
      const seconds = (performance.now() - t) / 1000
      try {
        const line = stdout.split("\n").find((l) => l.startsWith("RESULT "))
        if (code !== 0 || line === undefined) {
          const why = stderr.split("\n").filter((l) => !l.startsWith("==")).slice(0, 6).join("\n    ")
          throw new Error(`exit ${code ?? signal}: ${why}`)
        }
        // cg.out.1 … cg.out.5n: the dumps before each mark (cg.out: from the last mark to the exit)
        const dumps = readdirSync(dir).filter((f) => /^cg\.out\.\d+$/.test(f)).sort((a, b) =>
          Number(a.slice(7)) - Number(b.slice(7))
        )
        if (dumps.length !== sideRows.reduce((n, r) => n + 2 * (1 + r.item.sizes.length), 0)) {
          throw new Error(`${dumps.length} callgrind dumps, not 2 per mark (another caller of uv_loadavg?)`)
        }
        const ir = dumps.map((f) => {
          const m = /^totals: (\d+)/m.exec(readFileSync(join(dir, f), "utf8"))
          if (m === null) throw new Error(`no totals in ${f}`)
          return Number(m[1])
        })
        const { units } = JSON.parse(line.slice(7))
        for (const note of stderr.split("\n")) if (note.startsWith("bench: ")) process.stderr.write(`    ${note.slice(7)}\n`)
        process.stderr.write(`  ${label} … ${seconds.toFixed(0)} s\n`)
        // per item: [warm-up, its GC, segment 1, its GC, …]: the segments are the even dumps after the first two
        let at = 0
        const out = new Map()
        sideRows.forEach((row, i) => {
          const n = 2 * (1 + row.item.sizes.length)
          const mine = ir.slice(at, at + n)
          at += n
          out.set(row, {
            warmup: mine[0],
            ir: mine.filter((_, k) => k >= 2 && k % 2 === 0),
            gc: mine.filter((_, k) => k % 2 === 1),
            units: units[i],
            seconds
          })
        })
        for (const [row, r] of out) {
          process.stderr.write(
            `    ${row.workload} ${row.store}: segments ${r.ir.map((x) => x.toLocaleString("en-US")).join(", ")} Ir (units ${
              r.units.join(", ")
            })\n`
          )
        }
        resolve(out)
      } catch (e) {
        process.stderr.write(`  ${label} … FAILED\n    ${e instanceof Error ? e.message : e}\n`)
        failures.push({ label, error: e instanceof Error ? e.message : String(e) })
        resolve(new Map())
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })
  })

// One process per side (its start, ~5·10⁹ instructions of parsing and compiling, paid once),
// `parallel` at a time (instruction counts do not depend on the load); the biggest first.
const plan = PLAN.filter((r) => only === undefined || only.includes(r.workload))
const bySide = new Map()
for (const row of plan) {
  for (const side of row.sides) {
    if (sidesArg !== undefined && !sidesArg.includes(side)) continue
    if (!bySide.has(side)) bySide.set(side, [])
    bySide.get(side).push(row)
  }
}
const queue = [...bySide].sort((a, b) => b[1].length - a[1].length)
process.stderr.write(
  `instructions: ${queue.length} processes under valgrind ${
    spawnSync("valgrind", ["--version"], { encoding: "utf8" }).stdout.trim()
  } (${VALGRIND.join(" ")}; node ${NODE_FLAGS.join(" ")}), ${parallel} at a time${quick ? ", --quick" : ""}\n`
)
const results = new Map() // side → Map(row → result)
await Promise.all(Array.from({ length: parallel }, async () => {
  while (queue.length > 0) {
    const [side, sideRows] = queue.shift()
    results.set(side, await runSide(side, sideRows))
  }
}))
const tasks = []
for (const row of plan) {
  for (const side of row.sides) if (bySide.get(side)?.includes(row)) tasks.push({ row, side })
}

// The table: one line per side; a peer's line has the ratio ours / that peer (same node), the
// recording tracer's line the ratio to ours without a tracer.
const rows = []
// The figure: (the least Ir of the B segments − the least of the A segments) / (B − A units).
// A segment's count only exceeds its steady state (a late compilation, a deoptimization): the
// least of two is nearer the steady state than either pair. `spread`: the lower and higher
// of the two pairs' own figures, to show how far a single pair would be off.
const split = (r) => {
  const a = []
  const b = []
  r.ir.forEach((x, k) => (k % 2 === 0 ? a : b).push({ ir: x, units: r.units[k] }))
  return { a, b }
}
const perUnit = (r) => {
  if (r === undefined) return null
  const { a, b } = split(r)
  return (Math.min(...b.map((x) => x.ir)) - Math.min(...a.map((x) => x.ir))) / (b[0].units - a[0].units)
}
const spread = (r) => {
  if (r === undefined) return null
  const { a, b } = split(r)
  const pairs = a.map((x, k) => (b[k].ir - x.ir) / (b[k].units - x.units))
  return [Math.min(...pairs), Math.max(...pairs)]
}
const resultOf = ({ row, side }) => results.get(side)?.get(row)
const find = (workload, store, side) => {
  const task = tasks.find((t) => t.row.workload === workload && t.row.store === store && t.side === side)
  return task === undefined ? undefined : perUnit(resultOf(task))
}
for (const task of tasks) {
  const { row, side } = task
  const r = resultOf(task)
  const value = perUnit(r)
  let ratio = null
  let versus = null
  if (PEER_OF[side] !== undefined) {
    const ours = find(row.workload, row.store, PEER_OF[side])
    versus = SIDES[side].label
    ratio = ours === undefined || ours === null || value === null ? null : ours / value
  } else if (row.tracer === true) {
    const untraced = find(row.workload, "memory", side)
    versus = "ours, no tracer"
    ratio = untraced === undefined || untraced === null || value === null ? null : value / untraced
  }
  rows.push({
    workload: row.workload,
    store: row.store,
    node: VERSIONS[SIDES[side].node],
    side: SIDES[side].label,
    unit: row.unit,
    irPerUnit: value,
    pairs: spread(r),
    ratio,
    versus,
    sizes: row.item.sizes,
    units: r?.units ?? null,
    ir: r?.ir ?? null,
    gcAtMarks: r?.gc ?? null,
    warmupIr: r?.warmup ?? null,
    seconds: r?.seconds ?? null
  })
}
const fmt = (x) => (x === null ? "FAILED" : Math.round(x).toLocaleString("en-US"))
const ratioText = (x) => (x === null ? "" : x >= 10 ? x.toFixed(1) : x.toPrecision(2))
const table = [["workload", "store", "node", "side", "unit", "Ir/unit", "pairs: min–max", "ratio", "ratio of"]]
for (const r of rows) {
  table.push([
    r.workload,
    r.store,
    r.node.replace(/^v(\d+)\..*$/, "$1"),
    r.side,
    r.unit,
    fmt(r.irPerUnit),
    r.pairs === null ? "" : `${fmt(r.pairs[0])}–${fmt(r.pairs[1])}`,
    ratioText(r.ratio),
    r.versus === null ? "" : r.versus === "ours, no tracer" ? "this / ours, no tracer" : `ours / ${r.versus}`
  ])
}
const widths = table[0].map((_, i) => Math.max(...table.map((row) => row[i].length)))
const line = (row) => row.map((c, i) => (i >= 5 && i <= 7 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join("  ").trimEnd()
const elapsed = (performance.now() - started) / 1000
const load = (l) => l.map((x) => x.toFixed(2)).join(" ")
console.log(
  `\ninstructions (callgrind Ir in user space, all threads) per unit: (least Ir of the B segments − least of the A segments) / (B − A units);\n` +
    `pairs: the lowest and highest figure of one A, B pair alone\n`
)
console.log(line(table[0]))
console.log(widths.map((w) => "-".repeat(w)).join("  "))
for (const row of table.slice(1)) console.log(line(row))
console.log(
  `\ntotal ${elapsed.toFixed(0)} s${quick ? " (--quick)" : ""}, ${parallel} job(s) at a time; load average at start ${
    load(loadStart)
  }, at end ${load(loadavg())}`
)
if (quick || only !== undefined || sidesArg !== undefined) {
  console.log("(--quick/--only/--sides: bench/results/instructions.json not written)")
} else {
  mkdirSync(join(here, "results"), { recursive: true })
  writeFileSync(
    join(here, "results", "instructions.json"),
    JSON.stringify(
      {
        date: new Date().toISOString(),
        valgrind: spawnSync("valgrind", ["--version"], { encoding: "utf8" }).stdout.trim(),
        valgrindFlags: VALGRIND,
        nodeFlags: NODE_FLAGS,
        nodes: VERSIONS,
        seconds: Math.round(elapsed),
        rows
      },
      null,
      2
    ) + "\n"
  )
  console.log("wrote bench/results/instructions.json")
}
if (failures.length > 0) {
  console.error(`\n${failures.length} job(s) failed:`)
  for (const f of failures) console.error(`- ${f.label}: ${f.error}`)
  process.exitCode = 1
}
