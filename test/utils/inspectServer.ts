/**
 * An `agent-loop inspect` child for the tests (§29): started from the built CLI on a free port,
 * its URL read from its first stdout line (bounded by `CLI_RUN_MS`), ended with SIGTERM and
 * awaited at the end. Shared by the inspector's HTTP and browser tests.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import { CLI_RUN_MS, KILLED_EXIT_MS } from "./bounds.js"

const BIN = NodePath.join(NodePath.dirname(fileURLToPath(import.meta.url)), "..", "..", "dist", "cli", "bin.js")

/** A running inspector. */
export interface Inspect {
  /** `http://127.0.0.1:PORT/` */
  readonly url: string
  readonly child: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  /** Ends it (SIGTERM, then SIGKILL after `KILLED_EXIT_MS`) and awaits its exit. */
  readonly stop: () => Promise<void>
}

/** Starts `agent-loop inspect ARGS --port 0` and waits for the line with its URL. */
export const startInspect = async (args: ReadonlyArray<string>, cwd?: string): Promise<Inspect> => {
  const child = spawn(process.execPath, [BIN, "inspect", ...args, "--port", "0"], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()))
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill("SIGTERM")
    const timer = setTimeout(() => child.kill("SIGKILL"), KILLED_EXIT_MS)
    await exited
    clearTimeout(timer)
  }
  const start = Date.now()
  while (!/http:\/\/\S+\//.test(out)) {
    if (child.exitCode !== null || Date.now() - start > CLI_RUN_MS) {
      await stop()
      throw new Error(`agent-loop inspect did not start (exit ${child.exitCode}); stdout: ${out}; stderr: ${err}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  const url = /http:\/\/\S+\//.exec(out)![0]
  return { url, child, stdout: () => out, stderr: () => err, stop }
}
