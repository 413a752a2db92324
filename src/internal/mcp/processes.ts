/**
 * The processes of a stdio MCP server (§28 rule 2). A server started through a launcher (`npx`,
 * `uvx`, a shell script) is a tree: the SDK ends the launcher, and a server below it that is busy
 * would run on, orphaned, until its work is done. So the tree is read before the connection
 * closes, and what is left of it afterwards is sent SIGTERM. The tree is read from `/proc`
 * (Linux); elsewhere it is the launcher alone, which the SDK ends. And what a fault quotes of a
 * server's stderr.
 */
import type { Client } from "@modelcontextprotocol/client"
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio"
import { Duration, Effect } from "effect"
import * as Fs from "node:fs"

/** The parent pid of each process, from `/proc/PID/stat` (none where there is no `/proc`). */
const parents = (): Map<number, Array<number>> => {
  const children = new Map<number, Array<number>>()
  let entries: Array<string>
  try {
    entries = Fs.readdirSync("/proc")
  } catch {
    return children
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      // The name (field 2) is in parentheses and may hold spaces: the fields after it are split.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      const list = children.get(ppid)
      if (list === undefined) children.set(ppid, [Number(entry)])
      else list.push(Number(entry))
    } catch {
      // The process ended while it was read.
    }
  }
  return children
}

/** `pid` and every process below it, as they stand now. */
export const treeOf = (pid: number): ReadonlyArray<number> => {
  const children = parents()
  const out = [pid]
  for (let i = 0; i < out.length; i++) for (const child of children.get(out[i]!) ?? []) out.push(child)
  return out
}

/** Sends SIGTERM to each of `pids` that is still running (a process that ended is skipped). */
export const terminate = (pids: ReadonlyArray<number>): void => {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGTERM")
    } catch {
      // Gone already.
    }
  }
}

/**
 * Closes a client: its stdio server's process tree read first, the SDK's `close` given 5 s
 * (interruptible: a finalizer runs uninterruptibly, and a close that hangs must not hold the
 * scope), then SIGTERM to what is left of the tree (`processes.ts`).
 */
export const closeClient = (client: Client, pid: number | null | undefined): Effect.Effect<void> =>
  Effect.suspend(() => {
    const tree = pid === null || pid === undefined ? [] : treeOf(pid)
    return Effect.promise(() => client.close().catch(() => {})).pipe(
      Effect.interruptible,
      Effect.timeout(Duration.seconds(5)),
      Effect.ignore,
      Effect.ensuring(Effect.sync(() => terminate(tree)))
    )
  })

/** The pid of a stdio server's process (none for HTTP, or before it started). */
export const pidOf = (transport: unknown): number | null => transport instanceof StdioClientTransport ? transport.pid : null

/**
 * What a fault quotes of a stdio server's stderr: its last line that names an error (a Node
 * crash ends with a stack, `}` and `Node.js v20…`, after the line that says what went wrong),
 * then its last two lines; at most 500 characters.
 */
export const stderrTail = (stderr: string): string => {
  const lines = stderr.split("\n").map((line) => line.trim()).filter((line) => line !== "")
  const last = lines.slice(-2)
  const named = [...lines].reverse().find((line) => /\b[A-Za-z]*Error\b|\berror:/i.test(line) && !/^at /.test(line))
  const shown = named === undefined || last.includes(named) ? last : [named, ...last]
  return shown.join(" | ").slice(-500)
}
