/**
 * Multi-process cluster harness (§21): runner processes (`agent-loop runner`, the built
 * CLI `dist/cli/bin.js`: the offline model and tools) on loopback, started concurrently, each ready when it prints
 * `runner ready <host>:<port>`; signals; every wait bounded, and a timeout names what it waited
 * for with the runners' stderr tails. Runners still alive when the test's scope closes are killed.
 */
import { Duration, Effect, type Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as NodeFs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import { KILLED_EXIT_MS, note, RUNNERS_READY_MS } from "./bounds.js"

/** The sharding settings of a test cluster, in milliseconds (the runner's flags). */
export interface Settings {
  readonly healthCheck: number
  readonly lockRefresh: number
  readonly lockExpiry: number
  readonly messagePoll: number
}

/** The runner command (node arguments before the flags). */
export const runnerCommand: ReadonlyArray<string> = [Path.resolve("dist/cli/bin.js"), "runner"]

/** A child process of the test, with its output collected. */
export interface Child {
  readonly name: string
  readonly process: ChildProcess
  readonly pid: number
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the exit code (or the signal's name) once the process has exited. */
  readonly exited: Promise<number | string>
  readonly alive: () => boolean
  readonly signal: (signal: NodeJS.Signals) => void
}

/** A runner process and the port it serves on. */
export interface Runner extends Child {
  readonly port: number
}

/** A free TCP port on loopback. */
export const freePort = Effect.async<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

const tail = (text: string, lines = 80) => {
  const all = text.split("\n")
  return all.length <= lines ? text : [...all.slice(0, 20), "…", ...all.slice(-(lines - 20))].join("\n")
}

/** What the children said, for a failure message. */
export const describeChildren = (children: ReadonlyArray<Child>): string =>
  children.map((c) =>
    `--- ${c.name} (pid ${c.pid}, ${c.alive() ? "alive" : "exited"}) stdout:\n${tail(c.stdout(), 5)}\n--- stderr:\n${
      tail(c.stderr())
    }`
  ).join("\n")

/**
 * Spawns `node args…` as a child of the test; it is SIGKILLed (if still alive) when the scope
 * closes. Stdout and stderr are collected.
 */
export const spawnChild = (name: string, args: ReadonlyArray<string>): Effect.Effect<Child, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] })
      let out = ""
      let err = ""
      let done = false
      child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()))
      child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString()))
      const exited = new Promise<number | string>((resolve) =>
        child.on("exit", (code, signal) => {
          done = true
          resolve(code ?? signal ?? "unknown")
        })
      )
      const result: Child = {
        name,
        process: child,
        pid: child.pid!,
        stdout: () => out,
        stderr: () => err,
        exited,
        alive: () => !done,
        signal: (signal) => {
          if (!done) child.kill(signal)
        }
      }
      return result
    }),
    (child) =>
      Effect.promise(() => {
        if (!child.alive()) return Promise.resolve()
        // A stopped process gets SIGKILL as well; SIGCONT first so that nothing is left stopped.
        child.process.kill("SIGCONT")
        child.process.kill("SIGKILL")
        return Promise.race([child.exited, new Promise((resolve) => setTimeout(resolve, KILLED_EXIT_MS))]).then(() => undefined)
      })
  )

/**
 * Polls `ready` every `every` ms until it holds, for at most `ms`; then dies with `what` and
 * the children's output.
 */
export const until = <E, R>(
  what: string,
  ready: Effect.Effect<boolean, E, R>,
  ms: number,
  children: () => ReadonlyArray<Child>,
  every = 100
): Effect.Effect<number, E, R> =>
  Effect.gen(function*() {
    const started = Date.now()
    while (!(yield* ready)) {
      if (Date.now() - started >= ms) {
        return yield* Effect.die(new Error(`timed out after ${ms} ms waiting for ${what}\n${describeChildren(children())}`))
      }
      yield* Effect.sleep(Duration.millis(every))
    }
    const took = Date.now() - started
    note(`until ${what}`, took)
    return took
  })

/** Waits (at most `ms`) for the child's exit; its code or signal. */
export const exitOf = (child: Child, ms: number): Effect.Effect<number | string> => {
  const started = Date.now()
  return Effect.flatMap(
    Effect.promise(() =>
      Promise.race([child.exited, new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), ms))])
    ),
    (code) =>
      code === "timeout"
        ? Effect.die(new Error(`${child.name} did not exit within ${ms} ms\n${describeChildren([child])}`))
        : Effect.sync(() => {
          note(`exit of ${child.name.split(" ")[0]}`, Date.now() - started)
          return code
        })
  )
}

/**
 * Starts `count` runners on `url` concurrently, each on a free loopback port, and waits (at most
 * `readyWithin` ms, default `RUNNERS_READY_MS`) until every one has printed its ready line.
 * `flags` go to each runner after the settings (`--subagent`).
 * Returns them in start order.
 */
export const startRunners = (
  url: string,
  count: number,
  settings: Settings,
  readyWithin = RUNNERS_READY_MS,
  flags: ReadonlyArray<string> = []
): Effect.Effect<ReadonlyArray<Runner>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const runners: Array<Runner> = []
    for (let i = 0; i < count; i++) {
      const port = yield* freePort
      const child = yield* spawnChild(`runner ${i + 1} :${port}`, [
        ...runnerCommand,
        "--pg",
        url,
        "--host",
        "127.0.0.1",
        "--port",
        String(port),
        "--health-check",
        String(settings.healthCheck),
        "--lock-refresh",
        String(settings.lockRefresh),
        "--lock-expiry",
        String(settings.lockExpiry),
        "--message-poll",
        String(settings.messagePoll),
        ...flags
      ])
      runners.push({ ...child, port })
    }
    yield* until(
      `${count} runners to print their ready line`,
      Effect.sync(() =>
        runners.every((r) => {
          if (!r.alive()) throw new Error(`${r.name} exited before it was ready\n${describeChildren([r])}`)
          return r.stdout().includes(`runner ready 127.0.0.1:${r.port}\n`)
        })
      ),
      readyWithin,
      () => runners
    )
    return runners
  })

/**
 * The local TCP ports of the sockets process `pid` has open (Linux: its `/proc/<pid>/fd` links
 * `socket:[inode]`, looked up in `/proc/net/tcp` and `/proc/net/tcp6`): which PostgreSQL backends
 * are its connections (`pg_stat_activity.client_port`). With `remotePort`, only those of its
 * connections to that port (a local port may also serve a connection elsewhere).
 */
export const localPortsOf = (pid: number, remotePort?: number): ReadonlySet<number> => {
  const inodes = new Set<string>()
  for (const fd of NodeFs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const link = NodeFs.readlinkSync(`/proc/${pid}/fd/${fd}`)
      const m = /^socket:\[(\d+)\]$/.exec(link)
      if (m) inodes.add(m[1]!)
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>()
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string
    try {
      text = NodeFs.readFileSync(table, "utf8")
    } catch {
      continue
    }
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/)
      if (
        cols.length > 9 && inodes.has(cols[9]!) &&
        (remotePort === undefined || parseInt(cols[2]!.split(":")[1]!, 16) === remotePort)
      ) ports.add(parseInt(cols[1]!.split(":")[1]!, 16))
    }
  }
  return ports
}
