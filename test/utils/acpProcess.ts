/**
 * Ending an `agent-loop acp` child the way an editor does: its stdin ends, and it must exit on its
 * own within `CHILD_WAIT_MS` (else it is killed and the test fails naming its stderr). Shared by
 * the ACP test files.
 */
import type { ChildProcess } from "node:child_process"
import { CHILD_WAIT_MS } from "./bounds.js"

/** Ends `child`'s stdin and awaits `exited` (its exit code), bounded; `stderr` for the failure's message. */
export const endAcp = async (
  child: ChildProcess,
  exited: Promise<number | null>,
  stderr: () => string
): Promise<number | null> => {
  child.stdin?.end()
  let timer: NodeJS.Timeout | undefined
  const code = await Promise.race([
    exited,
    new Promise<"hung">((resolve) => (timer = setTimeout(() => resolve("hung"), CHILD_WAIT_MS)))
  ])
  clearTimeout(timer)
  if (code === "hung") {
    child.kill("SIGKILL")
    throw new Error(`agent-loop acp did not exit after stdin ended; stderr: ${stderr()}`)
  }
  return code
}
