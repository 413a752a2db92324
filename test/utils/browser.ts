/**
 * The inspector's browser tests (§29): Debian's chromium (`/usr/bin/chromium`, or the path in
 * `AGENT_LOOP_CHROMIUM`) driven by playwright-core, against `agent-loop inspect` (the built CLI,
 * `dist/cli/bin.js`) started by the test on a free loopback port. Without the browser the suites
 * are skipped with one line saying so; with `AGENT_LOOP_REQUIRE_BROWSER=1` (set by `.ci/run`) they
 * fail instead. Every browser launched and every `inspect` started here is closed or killed in
 * an `afterAll` of the test file that imports this module (`close` releases one earlier), and
 * every wait is a condition with a bound that names what did not come.
 */
import { afterAll, describe } from "@effect/vitest"
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import { BROWSER_WAIT_MS, INSPECT_READY_MS, KILLED_EXIT_MS, note } from "./bounds.js"

/** The chromium executable the tests drive. */
export const chromiumPath: string = process.env["AGENT_LOOP_CHROMIUM"] || "/usr/bin/chromium"

const isExecutable = (path: string): boolean => {
  try {
    Fs.accessSync(path, Fs.constants.X_OK)
    return Fs.statSync(path).isFile()
  } catch {
    return false
  }
}

/** Whether the browser is there (an executable file at `chromiumPath`). */
export const browserAvailable: boolean = isExecutable(chromiumPath)

const HOW =
  `browser suites skipped: no chromium at ${chromiumPath} (apt-get install chromium, or set AGENT_LOOP_CHROMIUM to its path)`

let said = false

/**
 * `describe` for a suite that needs the browser: skipped (one line on stderr per test file) when
 * `chromiumPath` is not an executable; failing when `AGENT_LOOP_REQUIRE_BROWSER=1` too.
 */
export const describeBrowser: typeof describe = ((name: string, fn: () => void) => {
  if (browserAvailable) return describe(name, fn)
  if (process.env["AGENT_LOOP_REQUIRE_BROWSER"] === "1") {
    return describe(name, () => {
      throw new Error(`${name}: AGENT_LOOP_REQUIRE_BROWSER=1 but there is no chromium at ${chromiumPath}`)
    })
  }
  if (!said) {
    said = true
    process.stderr.write(HOW + "\n")
  }
  return describe.skip(name, fn)
}) as typeof describe

/**
 * The flags of every launch: no sandbox (tests may run as root), no GPU, and none of chromium's
 * own connections (QUIC, component updates, sync, safe browsing and other background fetches),
 * which a machine on a closed network refuses; `/dev/shm` may be small in a container.
 */
export const CHROMIUM_ARGS: ReadonlyArray<string> = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage"
]

/** What the file's `afterAll` releases: browsers to close, `inspect` children to kill. */
const open = new Set<() => Promise<void>>()

afterAll(async () => {
  const all = [...open]
  open.clear()
  await Promise.all(all.map((release) => release()))
})

/** Headless chromium; closed in the file's `afterAll` unless closed before. */
export const launchBrowser = async (): Promise<Browser> => {
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: [...CHROMIUM_ARGS] })
  const release = () => browser.close()
  open.add(release)
  browser.on("disconnected", () => open.delete(release))
  return browser
}

/** A page and what went wrong in it: uncaught errors and `console.error` messages, in order. */
export interface WatchedPage {
  readonly page: Page
  readonly errors: Array<string>
}

/**
 * A new page in a fresh context of `browser` (no state shared with other pages), its uncaught
 * errors and console errors collected in `errors`.
 */
export const openPage = async (
  browser: Browser,
  options?: { readonly width?: number; readonly height?: number }
): Promise<WatchedPage> => {
  const context = await browser.newContext({
    viewport: { width: options?.width ?? 1280, height: options?.height ?? 800 }
  })
  const page = await context.newPage()
  const errors: Array<string> = []
  page.on("pageerror", (error) => errors.push(`uncaught: ${error.message}`))
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`console.error: ${message.text()}`)
  })
  return { page, errors }
}

/** Where `screenshot` writes: `build/screenshots/inspect/` of the repository (git-ignored). */
export const SCREENSHOT_DIR: string = Path.resolve("build/screenshots/inspect")

/**
 * Saves a PNG of what `page` shows to `build/screenshots/inspect/NAME.png` and returns its path:
 * an artifact to look at, never compared.
 */
export const screenshot = async (page: Page, name: string): Promise<string> => {
  Fs.mkdirSync(SCREENSHOT_DIR, { recursive: true })
  const path = Path.join(SCREENSHOT_DIR, `${name}.png`)
  await page.screenshot({ path })
  return path
}

/** The path of the built CLI (`dist/` is built by the suite's global setup). */
export const BIN: string = Path.resolve("dist/cli/bin.js")

/** A running `agent-loop inspect`. */
export interface Inspect {
  /** The page's address as printed, `http://127.0.0.1:PORT/`. */
  readonly url: string
  readonly child: ChildProcessWithoutNullStreams
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the exit code (or the signal's name) once the process has exited. */
  readonly exited: Promise<number | string>
  /** SIGTERM, then a bounded wait for the exit (SIGKILL and a failure if it does not come); the exit code or signal. */
  readonly close: () => Promise<number | string>
}

const URL_IN_LINE = /http:\/\/(?:\[[^\]\s]+\]|[^\s/:]+):\d+\//

/**
 * Starts `node dist/cli/bin.js inspect ARGS --port 0` (e.g. `["--store", dir]`) and waits, at
 * most `INSPECT_READY_MS`, for the first stdout line with its address (`http://HOST:PORT/`);
 * fails naming what it printed when the line does not come or the process exits first. Killed
 * in the file's `afterAll` unless closed before.
 */
export const startInspect = async (
  args: ReadonlyArray<string>,
  options?: { readonly env?: NodeJS.ProcessEnv | undefined; readonly cwd?: string | undefined }
): Promise<Inspect> => {
  const start = Date.now()
  const child = spawn(process.execPath, [BIN, "inspect", ...args, "--port", "0"], {
    stdio: "pipe",
    env: options?.env ?? process.env,
    ...(options?.cwd === undefined ? {} : { cwd: options.cwd })
  })
  child.stdin.end()
  let stdout = ""
  let stderr = ""
  let done = false
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const exited = new Promise<number | string>((resolve) =>
    child.on("exit", (code, signal) => {
      done = true
      resolve(code ?? signal ?? "unknown")
    })
  )
  const kill = async () => {
    if (done) return
    child.kill("SIGKILL")
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, KILLED_EXIT_MS))])
  }
  open.add(kill)
  const output = () => `stdout:\n${stdout.slice(-4000)}\nstderr:\n${stderr.slice(-4000)}`
  const command = `agent-loop inspect ${args.join(" ")}`
  let url: string | undefined
  try {
    await waitUntil(`${command} to print its address`, () => {
      if (done) throw new Error(`${command} exited before it printed its address`)
      const line = stdout.split("\n").find((l, i, all) => i < all.length - 1 && URL_IN_LINE.test(l))
      url = line === undefined ? undefined : URL_IN_LINE.exec(line)![0]
      return url !== undefined
    }, INSPECT_READY_MS)
  } catch (error) {
    await kill()
    open.delete(kill)
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${output()}`, { cause: error })
  }
  note("inspect: its address printed", Date.now() - start)
  const close = async (): Promise<number | string> => {
    open.delete(kill)
    if (!done) child.kill("SIGTERM")
    let timer: NodeJS.Timeout | undefined
    const code = await Promise.race([
      exited,
      new Promise<"hung">((resolve) => (timer = setTimeout(() => resolve("hung"), KILLED_EXIT_MS)))
    ])
    clearTimeout(timer)
    if (code === "hung") {
      await kill()
      throw new Error(`${command} did not exit within ${KILLED_EXIT_MS} ms of SIGTERM\n${output()}`)
    }
    return code
  }
  return { url: url!, child, stdout: () => stdout, stderr: () => stderr, exited, close }
}

/** The page of session `id` under the inspector's address (`URL#/s/ID`). */
export const sessionUrl = (url: string, id: string): string => `${url}#/s/${encodeURIComponent(id)}`

/**
 * Polls `check` every 20 ms until it returns true, for at most `ms` (default `BROWSER_WAIT_MS`);
 * then fails naming `what`. A check that throws fails the wait at once with its error. For a
 * condition in the page prefer playwright's own waits (`locator.waitFor`, `page.waitForFunction`)
 * with `{ timeout: BROWSER_WAIT_MS }`.
 */
export const waitUntil = async (
  what: string,
  check: () => boolean | Promise<boolean>,
  ms: number = BROWSER_WAIT_MS
): Promise<number> => {
  const start = Date.now()
  while (!(await check())) {
    if (Date.now() - start > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const took = Date.now() - start
  note(`browser: ${what}`, took)
  return took
}
