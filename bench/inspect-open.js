// `agent-loop inspect` opening a large session (§29): how long the page takes to show it, what
// it holds in memory, and what the server's answers cost. A session of at least 100,000 events
// is written through the real loop (bench/inspect-session.js: turns with tool calls, followups
// queued while a turn runs, steers, injections, messages dropped by a cancel and by a pre-step
// that rejects) into a temporary JSONL store, and its log is read back and checked
// (`SessionStore.readFile`, `Invariant.check`). Then, with the built CLI
// (`dist/cli/bin.js inspect --store DIR --port 0`) and Debian's chromium (`/usr/bin/chromium` or
// `AGENT_LOOP_CHROMIUM`, headless, through playwright-core):
// - page: the time from `page.goto(URL#/s/ID)` until timeline rows are visible (`[data-row]`
//   elements in the viewport, `[data-timeline]` with `data-rows`), then until the last row is
//   visible after scrolling the timeline to its end; the page's JS heap after a GC
//   (`Performance.getMetrics` `JSHeapUsedSize`) and its DOM elements, after the open and after
//   the scroll. Cold: the first open on a freshly started server; warm: the next `--runs` opens,
//   each in a fresh browser context, on the same server. The page's API requests of the cold
//   open are listed with their times and sizes.
// - server: `GET /api/sessions/ID`, `/api/sessions`, a rows page at the start and one at the end
//   (`count=200`), 2,000 rows, a page of raw events and the last turn's model request, each on a
//   freshly started server of its own: its first answer (cold), then `--runs` more (warm), timed
//   from the request to the last byte.
// Prints a table and writes bench/results/inspect-open.json. Figures are never asserted; a log
// whose count or invariants are off, a server that does not start or a page that never shows
// the rows fails the run (exit code 1).
//
//   npm run build && node bench/inspect-open.js [--events=N] [--runs=N] [--quick] [--keep] [--json]
//
// --events: the least number of events of the session (default 100,000; --quick: 10,000, and
// nothing is written to bench/results/); --runs: warm repetitions (default 5; --quick: 2);
// --keep: leave the store (its path is printed, for a look with `agent-loop inspect --store`);
// --json: print `RESULT <json>` as the last line (bench/run.js reads it: `npm run bench --
// --only=inspect-open`).
import { NodeFileSystem } from "@effect/platform-node"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"
import { Delivery, Invariant, SessionStore } from "../dist/index.js"
import { writeSession } from "./inspect-session.js"

const here = dirname(fileURLToPath(import.meta.url))
const bin = join(here, "..", "dist", "cli", "bin.js")
const args = process.argv.slice(2)
const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
for (const a of args) {
  if (!["--quick", "--keep", "--json"].includes(a) && !/^--(events|runs)=\d+$/.test(a)) {
    process.stderr.write(
      `bench/inspect-open.js: unknown argument ${JSON.stringify(a)}\n` +
        `usage: node bench/inspect-open.js [--events=N] [--runs=N] [--quick] [--keep] [--json]\n`
    )
    process.exit(2)
  }
}
const quick = args.includes("--quick")
const keep = args.includes("--keep")
const json = args.includes("--json")
const MIN_EVENTS = Number(flag("events") ?? (quick ? 10_000 : 100_000))
const RUNS = Number(flag("runs") ?? (quick ? 2 : 5))
/** The rows of one API page, as a page of the timeline would ask. */
const PAGE_ROWS = 200
/** Bounds of the waits: the server's address line, a page condition, a scroll to the end. */
const READY_MS = 30_000
const PAGE_MS = 60_000

/** The flags of test/utils/browser.ts: headless, and none of chromium's own connections. */
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage"
]
const chromiumPath = process.env.AGENT_LOOP_CHROMIUM || "/usr/bin/chromium"

const log = (text) => process.stderr.write(`  ${text}\n`)
const fmt = (x, integer = false) =>
  x === null || x === undefined
    ? "—"
    : integer || x >= 100
    ? Math.round(x).toLocaleString("en-US")
    : x.toFixed(1)
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? null : s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

// ---------------------------------------------------------------------------------------------
// Children and the store, cleaned up on every way out
// ---------------------------------------------------------------------------------------------

const children = new Set()
let directory
const cleanup = () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  children.clear()
  if (directory !== undefined && !keep) rmSync(directory, { recursive: true, force: true })
}
process.on("exit", cleanup)
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    process.stderr.write(`inspect-open: ${signal}, stopping\n`)
    process.exit(1)
  })
}

/** Starts `agent-loop inspect --store DIR --port 0`; resolves with its address once it printed it. */
const startInspect = (store) =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, "inspect", "--store", store, "--port", "0"], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.add(child)
    let out = ""
    let err = ""
    const fail = (why) => {
      clearTimeout(timer)
      child.kill("SIGKILL")
      reject(new Error(`agent-loop inspect ${why}\nstdout:\n${out.slice(-2000)}\nstderr:\n${err.slice(-2000)}`))
    }
    const timer = setTimeout(() => fail(`printed no address within ${READY_MS} ms`), READY_MS)
    child.stderr.setEncoding("utf8").on("data", (chunk) => (err += chunk))
    child.stdout.setEncoding("utf8").on("data", (chunk) => {
      out += chunk
      const url = /http:\/\/127\.0\.0\.1:\d+\//.exec(out.slice(0, out.lastIndexOf("\n") + 1))?.[0]
      if (url !== undefined) {
        clearTimeout(timer)
        resolve({ url, child, stop: () => stop(child) })
      }
    })
    child.on("exit", (code, signal) => fail(`exited (${code ?? signal}) before it printed its address`))
  })

const stop = (child) =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000)
    child.once("exit", () => {
      clearTimeout(timer)
      children.delete(child)
      resolve()
    })
    child.kill("SIGTERM")
  })

/** The resident set of a process, in MB (Linux's /proc). */
const rssMB = (pid) => {
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]
    return kb === undefined ? null : Number(kb) / 1024
  } catch {
    return null
  }
}

// ---------------------------------------------------------------------------------------------
// The session
// ---------------------------------------------------------------------------------------------

/** The session's shape from its log: events, turns and how they ended, deliveries by kind, fates. */
const shapeOf = (events) => {
  const turnEnds = {}
  const deliveries = { followup: 0, steer: 0, inject: 0 }
  let turns = 0
  let steps = 0
  let toolCalls = 0
  for (const e of events) {
    if (e.type === "turn/start") turns++
    else if (e.type === "step/start") steps++
    else if (e.type === "tool/call") toolCalls++
    else if (e.type === "turn/end") turnEnds[e.data.reason.kind] = (turnEnds[e.data.reason.kind] ?? 0) + 1
    else if (e.type === "agent/inbox/spliced") {
      for (let i = 0; i < e.data.inserted.length; i++) {
        deliveries[e.data.target === "next-turn" ? "followup" : e.data.wake === true ? "steer" : "inject"]++
      }
    }
  }
  const fates = {}
  for (const fate of Delivery.fatesOf(events).values()) {
    const key = fate._tag === "Dropped" ? `dropped ${fate.reason}` : fate._tag.toLowerCase()
    fates[key] = (fates[key] ?? 0) + 1
  }
  return { events: events.length, turns, steps, toolCalls, turnEnds, deliveries, fates }
}

// ---------------------------------------------------------------------------------------------
// Server figures
// ---------------------------------------------------------------------------------------------

/** One GET, timed to the last byte: `{ ms, bytes, body }` (fails on a status other than 200). */
const get = async (url) => {
  const t = performance.now()
  const res = await fetch(url)
  const bytes = Buffer.from(await res.arrayBuffer())
  const ms = performance.now() - t
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${bytes.toString("utf8").slice(0, 300)}`)
  return { ms, bytes: bytes.length, body: bytes }
}

/**
 * Each request on a server of its own, freshly started: its first answer (cold: the session
 * read and projected from its log) and `RUNS` more (warm). Resolves with the figures, the
 * session's view and the largest server's resident set.
 */
const serverFigures = async (store, id) => {
  const figures = []
  let rss = 0
  const measure = async (what, path) => {
    const server = await startInspect(store)
    try {
      const cold = await get(`${server.url}${path}`)
      const warm = []
      for (let i = 0; i < RUNS; i++) warm.push((await get(`${server.url}${path}`)).ms)
      figures.push({ what: `server: ${what}`, unit: "ms", cold: cold.ms, warm, bytes: cold.bytes })
      rss = Math.max(rss, rssMB(server.child.pid) ?? 0)
      log(`${what}: ${fmt(cold.ms)} ms cold, ${fmt(median(warm))} ms warm, ${cold.bytes.toLocaleString("en-US")} bytes`)
      return cold
    } finally {
      await server.stop()
    }
  }
  const base = `api/sessions/${encodeURIComponent(id)}`
  const view = JSON.parse((await measure("GET /api/sessions/ID", base)).body.toString("utf8"))
  const last = view.turns.at(-1).turn
  await measure("GET /api/sessions", "api/sessions")
  await measure(`GET …/rows?from=0&count=${PAGE_ROWS}`, `${base}/rows?from=0&count=${PAGE_ROWS}`)
  await measure(
    `GET …/rows?from=${view.rows - PAGE_ROWS}&count=${PAGE_ROWS}`,
    `${base}/rows?from=${view.rows - PAGE_ROWS}&count=${PAGE_ROWS}`
  )
  await measure("GET …/rows?from=0&count=2000", `${base}/rows?from=0&count=2000`)
  await measure("GET …/events?from=0&count=500", `${base}/events?from=0&count=500`)
  await measure(`GET …/request?turn=${last}&step=1`, `${base}/request?turn=${last}&step=1`)
  return { figures, view, rss }
}

// ---------------------------------------------------------------------------------------------
// Page figures
// ---------------------------------------------------------------------------------------------

// The functions below run in the page (`page.evaluate`, `page.waitForFunction`).
/* global document, window, getComputedStyle, requestAnimationFrame */

/** Resolves in the page once `[data-timeline]` has `data-rows` and some `[data-row]` is in the viewport. */
const rowsShown = () => {
  const timeline = document.querySelector("[data-timeline]")
  if (timeline === null || !timeline.hasAttribute("data-rows")) return false
  for (const row of document.querySelectorAll("[data-row]")) {
    const r = row.getBoundingClientRect()
    if (r.height > 0 && r.bottom > 0 && r.top < window.innerHeight) return true
  }
  return false
}

/**
 * In the page: scrolls the timeline's scrolling box (its nearest scrollable ancestor, else the
 * document) to its end, frame after frame (a virtual list may grow as it renders), until row
 * `last` is in the viewport; resolves with the milliseconds it took and the box scrolled, or
 * with `ms: null` after `bound` ms.
 */
const scrollToEnd = async ([last, bound]) => {
  const timeline = document.querySelector("[data-timeline]")
  const scrollable = (el) => {
    const style = getComputedStyle(el)
    return /(auto|scroll)/.test(style.overflowY) && el.scrollHeight > el.clientHeight + 1
  }
  let box = timeline
  while (box !== null && !scrollable(box)) box = box.parentElement
  box ??= document.scrollingElement
  const name = box === document.scrollingElement
    ? "document"
    : `${box.tagName.toLowerCase()}${box.id ? `#${box.id}` : ""}${box.className ? `.${String(box.className).split(" ")[0]}` : ""}`
  const inView = () => {
    const row = document.querySelector(`[data-row="${last}"]`)
    if (row === null) return false
    const r = row.getBoundingClientRect()
    return r.height > 0 && r.bottom > 0 && r.top < window.innerHeight
  }
  const start = performance.now()
  while (!inView()) {
    if (performance.now() - start > bound) return { ms: null, box: name }
    box.scrollTop = box.scrollHeight
    await new Promise((resolve) => requestAnimationFrame(resolve))
  }
  return { ms: performance.now() - start, box: name }
}

/** The page's JS heap after a GC (MB), its DOM elements and the `[data-row]` elements it holds. */
const memoryOf = async (page, cdp) => {
  await cdp.send("HeapProfiler.collectGarbage")
  const { metrics } = await cdp.send("Performance.getMetrics")
  const metric = (name) => metrics.find((m) => m.name === name)?.value ?? null
  const dom = await page.evaluate(() => ({
    elements: document.getElementsByTagName("*").length,
    rows: document.querySelectorAll("[data-row]").length
  }))
  return { heapMB: metric("JSHeapUsedSize") / 2 ** 20, nodes: metric("Nodes"), ...dom }
}

/** One open of the session's page in a fresh context: the times, the memory, the API requests, the page's errors. */
const openOnce = async (browser, url, id) => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
  try {
    const page = await context.newPage()
    const errors = []
    page.on("pageerror", (error) => errors.push(`uncaught: ${error.message}`))
    page.on("console", (message) => {
      if (message.type() === "error") errors.push(`console.error: ${message.text()}`)
    })
    const requests = []
    page.on("requestfinished", async (request) => {
      const path = new URL(request.url()).pathname + new URL(request.url()).search
      if (!path.startsWith("/api/")) return
      const timing = request.timing()
      const sizes = await request.sizes().catch(() => undefined)
      requests.push({ path, ms: timing.responseEnd, bytes: sizes?.responseBodySize ?? null })
    })
    const cdp = await context.newCDPSession(page)
    await cdp.send("Performance.enable")
    const t = performance.now()
    await page.goto(`${url}#/s/${encodeURIComponent(id)}`, { waitUntil: "commit", timeout: PAGE_MS })
    try {
      await page.waitForFunction(rowsShown, undefined, { polling: "raf", timeout: PAGE_MS })
    } catch (error) {
      throw new Error(`the page showed no timeline rows within ${PAGE_MS} ms; its errors: ${errors.join("; ") || "none"}`, {
        cause: error
      })
    }
    const firstRows = performance.now() - t
    const dataRows = Number(await page.getAttribute("[data-timeline]", "data-rows"))
    const afterOpen = await memoryOf(page, cdp)
    const scrolled = await page.evaluate(scrollToEnd, [dataRows - 1, PAGE_MS])
    if (scrolled.ms === null) {
      throw new Error(`the last row (${dataRows - 1}) was not visible ${PAGE_MS} ms after scrolling to the end`)
    }
    const afterScroll = await memoryOf(page, cdp)
    return { firstRows, scroll: scrolled.ms, box: scrolled.box, dataRows, afterOpen, afterScroll, requests, errors }
  } finally {
    await context.close()
  }
}

const pageFigures = async (store, id) => {
  const server = await startInspect(store)
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_ARGS })
  try {
    const opens = []
    for (let i = 0; i <= RUNS; i++) {
      const open = await openOnce(browser, server.url, id)
      log(`open ${i === 0 ? "cold" : `warm ${i}`}: rows in ${fmt(open.firstRows)} ms, last row in ${fmt(open.scroll)} ms`)
      opens.push(open)
    }
    const rss = rssMB(server.child.pid)
    const [cold, ...warm] = opens
    const figure = (what, unit, pick) => ({ what: `page: ${what}`, unit, cold: pick(cold), warm: warm.map(pick) })
    return {
      browser: browser.version(),
      figures: [
        figure("goto → first rows visible", "ms", (o) => o.firstRows),
        figure("scroll to the end → last row visible", "ms", (o) => o.scroll),
        figure("JS heap after the open", "MB", (o) => o.afterOpen.heapMB),
        figure("DOM elements after the open", "", (o) => o.afterOpen.elements),
        figure("[data-row] elements after the open", "", (o) => o.afterOpen.rows),
        figure("JS heap after the scroll", "MB", (o) => o.afterScroll.heapMB),
        figure("DOM elements after the scroll", "", (o) => o.afterScroll.elements)
      ],
      dataRows: cold.dataRows,
      scrollBox: cold.box,
      requests: cold.requests,
      errors: [...new Set(opens.flatMap((o) => o.errors))],
      rss
    }
  } finally {
    await browser.close()
    await server.stop()
  }
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

const main = async () => {
  try {
    accessSync(chromiumPath, constants.X_OK)
  } catch {
    throw new Error(`no chromium at ${chromiumPath} (apt-get install chromium, or set AGENT_LOOP_CHROMIUM)`)
  }
  const loadStart = loadavg()
  directory = mkdtempSync(join(tmpdir(), "bench-inspect-"))
  process.stderr.write(`inspect-open: a session of at least ${MIN_EVENTS.toLocaleString("en-US")} events in ${directory}\n`)
  const written = await writeSession({
    directory,
    minEvents: MIN_EVENTS,
    progress: (n) => log(`${n.toLocaleString("en-US")} events`)
  })
  const read = await Effect.runPromise(SessionStore.readFile(written.path).pipe(Effect.provide(NodeFileSystem.layer)))
  if (read.events.length !== written.events || read.events.length < MIN_EVENTS) {
    throw new Error(
      `the log holds ${read.events.length} events, the agent wrote ${written.events} (at least ${MIN_EVENTS} wanted)`
    )
  }
  const violations = Invariant.check(read.events)
  if (violations.length > 0) throw new Error(`the log breaks its invariants: ${JSON.stringify(violations.slice(0, 3))}`)
  const session = {
    id: written.id,
    fileMB: statSync(written.path).size / 2 ** 20,
    writeMs: written.ms,
    rounds: written.counts.rounds,
    ...shapeOf(read.events)
  }
  log(
    `written in ${fmt(written.ms)} ms: ${session.events.toLocaleString("en-US")} events, ${fmt(session.fileMB)} MB, ` +
      `${session.turns.toLocaleString("en-US")} turns`
  )

  process.stderr.write(`page (cold: the first open on a fresh server; warm: ${RUNS} more opens)\n`)
  const page = await pageFigures(directory, written.id)
  process.stderr.write(`server (cold: the first answer of a fresh server; warm: ${RUNS} more)\n`)
  const server = await serverFigures(directory, written.id)

  const problems = [...page.errors.map((e) => `page: ${e}`)]
  if (page.dataRows !== server.view.rows) {
    problems.push(`data-rows is ${page.dataRows}, the API's SessionView.rows ${server.view.rows}`)
  }
  if (server.view.summary.events !== session.events) {
    problems.push(`the summary counts ${server.view.summary.events} events, the log holds ${session.events}`)
  }
  if (server.view.summary.turns !== session.turns) {
    problems.push(`the summary counts ${server.view.summary.turns} turns, the log holds ${session.turns}`)
  }
  const result = {
    date: new Date().toISOString(),
    node: process.version,
    chromium: page.browser,
    cpus: `${cpus().length} × ${cpus()[0]?.model ?? "cpu"}`,
    loadAverage: { start: loadStart, end: loadavg() },
    runs: RUNS,
    session: { ...session, rows: server.view.rows, deliveryBars: server.view.deliveries.length, lanes: server.view.lanes },
    figures: [...page.figures, ...server.figures].map((f) => ({
      ...f,
      warmMedian: median(f.warm),
      warmMin: f.warm.length === 0 ? null : Math.min(...f.warm),
      warmMax: f.warm.length === 0 ? null : Math.max(...f.warm)
    })),
    serverRssMB: { afterPages: page.rss, requests: server.rss },
    scrollBox: page.scrollBox,
    pageRequests: page.requests,
    problems
  }
  return result
}

const print = (r) => {
  const s = r.session
  const count = (o) => Object.entries(o).map(([k, v]) => `${k} ${v.toLocaleString("en-US")}`).join(", ")
  console.log(
    `\nagent-loop inspect, one session: ${s.events.toLocaleString("en-US")} events (${fmt(s.fileMB)} MB), ` +
      `${s.turns.toLocaleString("en-US")} turns (${count(s.turnEnds)}), ${s.steps.toLocaleString("en-US")} steps, ` +
      `${s.toolCalls.toLocaleString("en-US")} tool calls, ${s.rows.toLocaleString("en-US")} timeline rows`
  )
  console.log(`deliveries: ${count(s.deliveries)}; fates: ${count(s.fates)}; ${s.deliveryBars} bars in ${s.lanes} lanes`)
  console.log(`chromium ${r.chromium}, node ${r.node}, ${r.cpus}\n`)
  const table = [["what", "unit", "cold", `warm median [min–max] (${r.runs})`, "bytes"]]
  for (const f of r.figures) {
    table.push([
      f.what,
      f.unit,
      fmt(f.cold, f.unit === ""),
      `${fmt(f.warmMedian, f.unit === "")} [${fmt(f.warmMin, f.unit === "")}–${fmt(f.warmMax, f.unit === "")}]`,
      f.bytes === undefined ? "" : f.bytes.toLocaleString("en-US")
    ])
  }
  const widths = table[0].map((_, i) => Math.max(...table.map((row) => row[i].length)))
  const line = (row) => row.map((c, i) => (i >= 2 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join("  ")
  console.log(line(table[0]))
  console.log(widths.map((w) => "-".repeat(w)).join("  "))
  for (const row of table.slice(1)) console.log(line(row))
  console.log(`\nthe page's API requests of the cold open:`)
  for (const q of r.pageRequests) console.log(`  ${q.path}  ${fmt(q.ms)} ms, ${q.bytes?.toLocaleString("en-US") ?? "?"} bytes`)
  console.log(
    `server RSS: ${fmt(r.serverRssMB.afterPages)} MB after the page's opens, at most ${
      fmt(r.serverRssMB.requests)
    } MB after one request's runs; the timeline scrolls in ${r.scrollBox}`
  )
  if (r.problems.length > 0) console.log(`\nproblems:\n${r.problems.map((p) => `- ${p}`).join("\n")}`)
  const load = (l) => l.map((x) => x.toFixed(2)).join(" ")
  console.log(`load average at start ${load(r.loadAverage.start)}, at end ${load(r.loadAverage.end)}`)
}

try {
  const result = await main()
  print(result)
  if (keep) console.log(`the store is kept: ${directory} (agent-loop inspect --store ${directory})`)
  if (!quick) {
    mkdirSync(join(here, "results"), { recursive: true })
    writeFileSync(join(here, "results", "inspect-open.json"), JSON.stringify(result, null, 2) + "\n")
    console.log("wrote bench/results/inspect-open.json")
  }
  if (json) process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
} catch (error) {
  process.stderr.write(`inspect-open FAILED: ${error instanceof Error ? error.message : error}\n`)
  process.exitCode = 1
}
