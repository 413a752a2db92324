/**
 * Running a program to its end without blocking the test worker: `run` spawns it, collects its
 * output and waits for its exit on the event loop (a `spawnSync` would stop the worker, its
 * timers and its RPC with vitest for as long as the program runs). A bound in real time ends a
 * program that hangs: it is killed and the test dies naming the command and what it printed.
 */
import { Effect } from "effect"
import { spawn } from "node:child_process"

/** How a program ended: its exit status (`null` when a signal ended it) and its output. */
export interface Ran {
  readonly status: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs `command args` (cwd: `options.cwd`, by default the repository root, the test's working
 * directory) until it exits and gives its status and output. After `withinMs` of real time the
 * program is killed (SIGKILL) and the effect dies with the command, the bound and the output so far.
 */
export const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: {
    readonly withinMs: number
    readonly env?: NodeJS.ProcessEnv | undefined
    readonly cwd?: string | undefined
  }
): Effect.Effect<Ran> =>
  Effect.async<Ran>((resume) => {
    const child = spawn(command, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: options.env ?? process.env,
      ...(options.cwd === undefined ? {} : { cwd: options.cwd })
    })
    let stdout = ""
    let stderr = ""
    let done = false
    const finish = (exit: Effect.Effect<Ran>) => {
      if (done) return
      done = true
      clearTimeout(timer)
      resume(exit)
    }
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      finish(Effect.die(
        new Error(
          `${[command, ...args].join(" ")} did not exit within ${options.withinMs} ms\n` +
            `stdout:\n${stdout.slice(-4000)}\nstderr:\n${stderr.slice(-4000)}`
        )
      ))
    }, options.withinMs)
    child.on("close", (status, signal) => finish(Effect.succeed({ status, signal, stdout, stderr })))
    child.on("error", (error) => finish(Effect.die(error)))
    return Effect.sync(() => {
      done = true
      clearTimeout(timer)
      child.kill("SIGKILL")
    })
  })
