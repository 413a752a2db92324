/**
 * Temporary directories for tests that need plain paths (child processes, the CLI, tmux), all
 * removed when the test file ends.
 */
import { afterAll } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** A function making fresh directories named `<prefix>XXXXXX` in the OS's temporary directory. */
export const scratchDirs = (prefix: string): () => string => {
  const made: Array<string> = []
  afterAll(() => {
    for (const dir of made) Fs.rmSync(dir, { recursive: true, force: true })
  })
  return () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))
    made.push(dir)
    return dir
  }
}
