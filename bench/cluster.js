// The `cluster` bench section (§21, "Figures for the closing note"), run by bench/run.js
// in a process of its own: `node bench/cluster.js '{"serverUrl": URL, "quick": false}'`. This
// process is the client-only process of the cluster (`AgentRunner.layerClient`); the runners are
// CLI runners (`dist/cli/bin.js runner --pg URL`, shipped defaults: no sharding flag), except for
// the idle-memory figure, whose runner is bench/cluster-runner.js (`AgentRunner.layer` in its own
// process, so that it can report its heap). Prints progress on stderr and `RESULT <json>` on
// stdout: `{figures: [...], notes: [...]}`. Figures are never asserted; a wait that runs out
// (every one is bounded) fails the section.
//
// Every child is killed (SIGKILL) when this process exits, every database it created is dropped.
import { Effect, ManagedRuntime } from "effect"
import { spawn } from "node:child_process"
import { createServer } from "node:net"
import { loadavg } from "node:os"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { pgDatabase } from "./pg.js"

const { serverUrl, quick } = JSON.parse(process.argv[2])
const { AgentClient, AgentRunner } = await import("../dist/cluster/index.js")
const bin = fileURLToPath(new URL("../dist/cli/bin.js", import.meta.url))
const memoryRunner = fileURLToPath(new URL("./cluster-runner.js", import.meta.url))

const SIZES = quick
  ? { rttSessions: 4, rttCalls: 40, rateSeconds: 1, rateRuns: 1, startRuns: 2, failoverSessions: 9, trials: 1, idle: 100 }
  : { rttSessions: 8, rttCalls: 300, rateSeconds: 3, rateRuns: 3, startRuns: 5, failoverSessions: 30, trials: 2, idle: 1000 }
const BUDGET_MS = quick ? 120_000 : 240_000

const log = (text) => process.stderr.write(`  ${text}\n`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const load = () => loadavg().map((x) => x.toFixed(2)).join(" ")

// ---------------------------------------------------------------------------------------------
// Children and databases, cleaned up on every way out
// ---------------------------------------------------------------------------------------------

const children = new Set()
const databases = new Set()
const cleanup = () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  children.clear()
  for (const db of databases) {
    try {
      db.drop()
    } catch (e) {
      process.stderr.write(`  cannot drop a database: ${e instanceof Error ? e.message : e}\n`)
    }
  }
  databases.clear()
}
process.on("exit", cleanup)
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    process.stderr.write(`  cluster: ${signal}, stopping\n`)
    process.exit(1)
  })
}
setTimeout(() => {
  process.stderr.write(`  cluster: over its budget of ${BUDGET_MS / 1000} s, stopping\n`)
  process.exit(1)
}, BUDGET_MS).unref()

const database = () => {
  const db = pgDatabase(serverUrl)
  databases.add(db)
  return {
    url: db.url,
    drop: () => {
      databases.delete(db)
      db.drop()
    }
  }
}

/** A TCP port nobody listens on right now (the OS picks it). */
const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer()
    s.unref()
    s.on("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })

/** Resolves with `promise`, or rejects after `ms` with `what`. */
const within = (ms, what, promise) => {
  let timer
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms / 1000} s`)), ms)
    })
  ]).finally(() => clearTimeout(timer))
}

/**
 * Spawns a process and follows its stdout; `ready` resolves with the ms from spawn to the first
 * stdout line matching `readyLine` (at most 60 s), `exited` when it exits.
 */
const startChild = (argv, readyLine, label) => {
  const t0 = performance.now()
  const child = spawn(process.execPath, argv, { stdio: ["pipe", "pipe", "pipe"] })
  children.add(child)
  let stdout = ""
  let stderr = ""
  const lineWaiters = []
  child.stdout.setEncoding("utf8")
  child.stderr.setEncoding("utf8")
  child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-4000)))
  const exited = new Promise((resolve) =>
    child.on("exit", (code, signal) => {
      children.delete(child)
      resolve({ code, signal })
    })
  )
  const ready = within(
    60_000,
    `${label}: ready line`,
    new Promise((resolve, reject) => {
      child.stdout.on("data", (d) => {
        stdout += d
        let nl
        while ((nl = stdout.indexOf("\n")) >= 0) {
          const line = stdout.slice(0, nl)
          stdout = stdout.slice(nl + 1)
          if (readyLine.test(line)) resolve(performance.now() - t0)
          for (const w of lineWaiters.splice(0)) w(line)
        }
      })
      void exited.then(({ code, signal }) =>
        reject(
          new Error(`${label} exited (${code ?? signal}) before its ready line: ${
            stderr.split("\n").filter((l) => /error|cause|detail|violat|duplicate|exist/i.test(l) && !/^\s+at /.test(l)).slice(
              0,
              6
            )
              .map((l) =>
                l.trim()
              ).join(" / ")
          }`)
        )
      )
    })
  )
  ready.catch(() => {}) // awaited by the caller; a later exit is not an unhandled rejection
  /** The next stdout line. */
  const nextLine = () => new Promise((resolve) => lineWaiters.push(resolve))
  /** Stops it with `signal`, then SIGKILL after `ms`; resolves with the ms it took. */
  const stop = async (signal = "SIGTERM", ms = 20_000) => {
    const t = performance.now()
    if (child.exitCode !== null || child.signalCode !== null) return 0
    child.kill(signal)
    try {
      await within(ms, `${label}: exit after ${signal}`, exited)
    } catch (e) {
      child.kill("SIGKILL")
      await exited
      throw e
    }
    return performance.now() - t
  }
  return { child, pid: child.pid, ready, exited, stop, nextLine, stderr: () => stderr }
}

const startRunner = (url, port) =>
  startChild([bin, "runner", "--pg", url, "--host", "127.0.0.1", "--port", String(port)], /^runner ready /, `runner :${port}`)

/** The client-only process's `AgentClient` on `url`: `{call(f), dispose}`. */
const clientOn = (url) => {
  const runtime = ManagedRuntime.make(AgentRunner.layerClient({ pg: url }))
  return {
    call: (f) => runtime.runPromise(Effect.flatMap(AgentClient.AgentClient, f)),
    dispose: () => runtime.dispose()
  }
}

/** The writer pid of each session (the runner that holds it): `Map<sessionId, pid>`. */
const writers = async (url) => {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    const { rows } = await c.query("SELECT session_id, writer FROM agent_loop_writers")
    return new Map(rows.map((r) => [r.session_id, JSON.parse(r.writer).pid]))
  } finally {
    await c.end()
  }
}

const now = Effect.sync(() => performance.now())
/** `effect`, failing after `ms`. */
const bounded = (ms, what) => (effect) =>
  Effect.timeoutFail(effect, { duration: ms, onTimeout: () => new Error(`${what}: no answer in ${ms / 1000} s`) })
const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]
}
const median = (xs) => percentile(xs, 50)

const figures = []
const notes = []
const figure = (unit, samples, extra = {}) => {
  figures.push({ unit, samples, ...extra })
  const s = [...samples].sort((a, b) => a - b)
  log(
    `${unit}: ${s.length === 1 ? s[0].toFixed(2) : `median ${median(s).toFixed(2)} [${s[0].toFixed(2)}–${s.at(-1).toFixed(2)}]`}`
  )
}

const text = (sessionId, i) => `note ${i} for ${sessionId}`

// ---------------------------------------------------------------------------------------------
// 1, 2, 5a: two CLI runners on one fresh database; round trips, deliveries/s; then start times
// of one runner on the migrated database
// ---------------------------------------------------------------------------------------------

const deliveries = async () => {
  const db = database()
  let client
  const runners = []
  try {
    log(`2 runners on a fresh database (load ${load()})`)
    for (let i = 0; i < 2; i++) runners.push(startRunner(db.url, await freePort()))
    const started = await Promise.all(runners.map((r) => r.ready))
    figure("ms spawn → ready, 2 runners started together, fresh database", started)
    client = clientOn(db.url)

    // 1. Round trips, sequential, sessions in turn (each warmed by one inject first).
    const sessions = Array.from({ length: SIZES.rttSessions }, (_, i) => `rtt-${i}`)
    await client.call((c) =>
      Effect.forEach(sessions, (s) => bounded(30_000, `warm-up inject ${s}`)(c.inject(s, text(s, 0))), { discard: true })
    )
    const owners = await writers(db.url)
    const spread = runners.map((r) => sessions.filter((s) => owners.get(s) === r.pid).length)
    notes.push(`round-trip sessions per runner: ${spread.join(" + ")}`)
    for (const kind of ["inject", "followup"]) {
      const ms = await client.call((c) =>
        Effect.forEach(Array.from({ length: SIZES.rttCalls }, (_, i) => i), (i) => {
          const s = sessions[i % sessions.length]
          return Effect.gen(function*() {
            const t = yield* now
            yield* bounded(30_000, `${kind} ${s}`)(c[kind](s, text(s, i + 1)))
            return (yield* now) - t
          })
        })
      )
      figure(`ms ${kind} round trip, p50`, [percentile(ms, 50)], { calls: ms.length })
      figure(`ms ${kind} round trip, p99`, [percentile(ms, 99)], { calls: ms.length })
    }
    // Let the followups' turns finish before the rate runs.
    await client.call((c) =>
      Effect.forEach(sessions, (s) =>
        Effect.gen(function*() {
          for (let i = 0; i < 100; i++) {
            if ((yield* bounded(10_000, `status ${s}`)(c.status(s))).status === "idle") return
            yield* Effect.sleep("50 millis")
          }
        }), { discard: true })
    )

    // 2. Deliveries/s: `n` fibers of this process, each on its own session, injecting in a loop.
    for (const n of [1, 16, 64]) {
      const own = Array.from({ length: n }, (_, i) => `rate-${n}-${i}`)
      await client.call((c) =>
        Effect.forEach(own, (s) => bounded(60_000, `warm-up inject ${s}`)(c.inject(s, text(s, 0))), {
          concurrency: "unbounded",
          discard: true
        })
      )
      const rates = []
      const p50s = []
      for (let run = 0; run < SIZES.rateRuns; run++) {
        const { count, elapsed, latencies } = await client.call((c) =>
          Effect.gen(function*() {
            const t0 = yield* now
            const end = t0 + SIZES.rateSeconds * 1000
            const latencies = []
            yield* Effect.forEach(own, (s) =>
              Effect.gen(function*() {
                for (let i = 1;; i++) {
                  const t = yield* now
                  if (t >= end) return
                  yield* bounded(30_000, `inject ${s}`)(c.inject(s, text(s, i)))
                  latencies.push((yield* now) - t)
                }
              }), { concurrency: "unbounded", discard: true })
            return { count: latencies.length, elapsed: (yield* now) - t0, latencies }
          })
        )
        rates.push(count / (elapsed / 1000))
        p50s.push(median(latencies))
      }
      figure(`injects/s, ${n} concurrent client fiber${n === 1 ? "" : "s"} (1 process)`, rates, {
        seconds: SIZES.rateSeconds,
        p50ms: median(p50s)
      })
    }
    await client.dispose()
    client = undefined
    const stops = await Promise.all(runners.map((r) => r.stop()))
    notes.push(`2 runners stopped (SIGTERM → exit) in ${stops.map((ms) => ms.toFixed(0)).join(", ")} ms`)

    // 5a. One runner on the migrated database, started and stopped SIZES.startRuns times.
    const starts = []
    for (let i = 0; i < SIZES.startRuns; i++) {
      const r = startRunner(db.url, await freePort())
      starts.push(await r.ready)
      await r.stop()
    }
    figure("ms spawn → ready, 1 runner, migrated database", starts)
  } finally {
    if (client !== undefined) await client.dispose().catch(() => {})
    await Promise.all(runners.map((r) => r.stop("SIGKILL", 5000).catch(() => {})))
    db.drop()
  }
}

// ---------------------------------------------------------------------------------------------
// 3, 5b: three CLI runners started together on a fresh database; SIGKILL one
// ---------------------------------------------------------------------------------------------

const failover = async (trial) => {
  const db = database()
  let client
  const runners = []
  try {
    log(`failover trial ${trial}: 3 runners on a fresh database (load ${load()})`)
    for (let i = 0; i < 3; i++) runners.push(startRunner(db.url, await freePort()))
    const started = await Promise.all(runners.map((r) => r.ready))
    client = clientOn(db.url)
    const sessions = Array.from({ length: SIZES.failoverSessions }, (_, i) => `fo-${i}`)
    await client.call((c) =>
      Effect.forEach(sessions, (s) => bounded(60_000, `activating inject ${s}`)(c.inject(s, text(s, 0))), {
        concurrency: 10,
        discard: true
      })
    )
    const owners = await writers(db.url)
    const counts = runners.map((r) => sessions.filter((s) => owners.get(s) === r.pid).length)
    const victim = runners[counts.indexOf(Math.max(...counts))]
    const lost = sessions.filter((s) => owners.get(s) === victim.pid)
    victim.child.kill("SIGKILL")
    const t0 = performance.now()
    const failures = new Map()
    const times = await client.call((c) =>
      Effect.forEach(lost, (s) =>
        Effect.gen(function*() {
          for (;;) {
            // Effect.exit: a status sent to the dead runner's address dies (a SocketError defect).
            const answered = yield* Effect.exit(bounded(2000, `status ${s}`)(c.status(s)))
            const t = yield* now
            if (answered._tag === "Success") return (t - t0) / 1000
            const why = String(answered.cause).split("\n")[0].replace(s, "<session>")
            failures.set(why, (failures.get(why) ?? 0) + 1)
            if (t - t0 > 90_000) return yield* Effect.fail(new Error(`status ${s}: no answer 90 s after the kill`))
            yield* Effect.sleep("100 millis")
          }
        }), { concurrency: "unbounded" })
    )
    const after = await writers(db.url)
    const survivors = new Set(runners.filter((r) => r !== victim).map((r) => r.pid))
    const moved = lost.filter((s) => survivors.has(after.get(s))).length
    if (moved !== lost.length) throw new Error(`failover: ${lost.length - moved} of ${lost.length} sessions not on a survivor`)
    notes.push(
      `failover trial ${trial}: sessions per runner ${
        counts.join(" + ")
      }, killed the one with ${lost.length}; all ${lost.length} answered from a survivor (writer rows); failed status calls before: ${
        [...failures].map(([why, n]) => `${n} × ${why}`).join("; ") || "none"
      }`
    )
    return { started, times }
  } finally {
    if (client !== undefined) await client.dispose().catch(() => {})
    await Promise.all(runners.map((r) => r.stop("SIGKILL", 5000).catch(() => {})))
    db.drop()
  }
}

// ---------------------------------------------------------------------------------------------
// 4: idle memory per activated entity (bench/cluster-runner.js, the only runner)
// ---------------------------------------------------------------------------------------------

const idleMemory = async () => {
  const db = database()
  let client
  let runner
  try {
    log(`idle memory: ${SIZES.idle} sessions on one runner (load ${load()})`)
    const port = await freePort()
    runner = startChild(["--expose-gc", memoryRunner, JSON.stringify({ url: db.url, port })], /^ready$/, "memory runner")
    await runner.ready
    const mem = async () => {
      const line = runner.nextLine()
      runner.child.stdin.write("mem\n")
      const l = await within(10_000, "memory runner: mem", line)
      if (!l.startsWith("MEM ")) throw new Error(`memory runner: ${l}`)
      return JSON.parse(l.slice(4))
    }
    client = clientOn(db.url)
    // One session first (the code paths of an activation loaded and run), then settle.
    await client.call((c) => bounded(30_000, "inject mem-warm")(c.inject("mem-warm", "warm")))
    await sleep(1000)
    const before = await mem()
    const sessions = Array.from({ length: SIZES.idle }, (_, i) => `mem-${i}`)
    const t0 = performance.now()
    await client.call((c) =>
      Effect.forEach(sessions, (s) => bounded(60_000, `inject ${s}`)(c.inject(s, text(s, 0))), {
        concurrency: 32,
        discard: true
      })
    )
    const activationMs = performance.now() - t0
    await sleep(2000)
    const after = await mem()
    const owners = await writers(db.url)
    const held = sessions.filter((s) => owners.get(s) === runner.pid).length
    if (held !== sessions.length) throw new Error(`idle memory: the runner holds ${held} of ${sessions.length} sessions`)
    const n = sessions.length
    figure("bytes RSS per idle activated entity", [(after.rss - before.rss) / n], { entities: n, before, after })
    figure("bytes heapUsed per idle activated entity", [(after.heapUsed - before.heapUsed) / n], { entities: n })
    notes.push(
      `idle memory: ${n} sessions activated by one inject each (32 in flight) in ${(activationMs / 1000).toFixed(1)} s (${
        (n / (activationMs / 1000)).toFixed(0)
      }/s); runner RSS ${(before.rss / 2 ** 20).toFixed(0)} → ${(after.rss / 2 ** 20).toFixed(0)} MB, heapUsed ${
        (before.heapUsed / 2 ** 20).toFixed(1)
      } → ${(after.heapUsed / 2 ** 20).toFixed(1)} MB after GC`
    )
  } finally {
    if (client !== undefined) await client.dispose().catch(() => {})
    if (runner !== undefined) await runner.stop("SIGKILL", 5000).catch(() => {})
    db.drop()
  }
}

// ---------------------------------------------------------------------------------------------

/**
 * Runs a part; when one of its runners exits before its ready line (runners started together on
 * a fresh database race on the migrations: `relation "cluster_migrations" already exists`,
 * `duplicate key value violates unique constraint "pg_type_typname_nsp_index"`), notes it and
 * runs the part again on another fresh database, at most 4 attempts in all.
 */
const onceMore = async (name, part) => {
  for (let attempt = 1;; attempt++) {
    try {
      return await part()
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e)
      if (!/before its ready line/.test(why) || attempt === 4) throw e
      notes.push(`${name}: attempt ${attempt}: a runner FAILED to start (${why}); run again on another fresh database`)
      log(`${name}: attempt ${attempt}: a runner FAILED to start (${why}); again`)
    }
  }
}

try {
  const loadStart = load()
  await onceMore("2 runners", deliveries)
  const failovers = []
  for (let trial = 1; trial <= SIZES.trials; trial++) {
    failovers.push(await onceMore(`failover trial ${trial}`, () => failover(trial)))
  }
  for (const [i, f] of failovers.entries()) figure(`s SIGKILL → status answered, per session (trial ${i + 1})`, f.times)
  figure("ms spawn → ready, 3 runners started together, fresh database", failovers.flatMap((f) => f.started))
  await idleMemory()
  notes.push(`load average at start ${loadStart}, at end ${load()}`)
  process.stdout.write(`RESULT ${JSON.stringify({ figures, notes })}\n`)
  process.exit(0)
} catch (error) {
  process.stderr.write(`  cluster FAILED: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exit(1)
}
