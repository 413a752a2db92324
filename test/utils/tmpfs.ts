/**
 * Small real file systems for the I/O fault tests (§23): a tmpfs of a few KiB to fill
 * (ENOSPC), remounted read-only (EROFS) or larger (space again). Mounting needs root with the
 * right to mount (these machines and CI run as root); where it is refused, `mountRefused` says
 * why and the tests that need it are skipped, their seam-based counterparts run instead.
 */
import { Effect, type Scope } from "effect"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const run = (args: ReadonlyArray<string>): string | undefined => {
  const r = spawnSync(args[0]!, args.slice(1), { encoding: "utf8", timeout: 10_000 })
  return r.status === 0 ? undefined : (r.stderr || r.error?.message || `exit ${r.status}`).trim()
}

const mountAt = (dir: string, size: string) => run(["mount", "-t", "tmpfs", "-o", `size=${size},mode=0755`, "tmpfs", dir])

/** Why a tmpfs cannot be mounted here, or `undefined` when it can (probed once, unmounted at once). */
export const mountRefused: string | undefined = (() => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "agent-loop-probe-"))
  try {
    const refused = mountAt(dir, "16k")
    if (refused === undefined) run(["umount", dir])
    return refused
  } finally {
    Fs.rmSync(dir, { recursive: true, force: true })
  }
})()

/**
 * A tmpfs of `size` (mount's syntax: "64k") mounted at a fresh directory, unmounted and removed
 * when the scope closes (lazily if something still holds it).
 */
export const tmpfs = (size: string): Effect.Effect<string, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "agent-loop-tmpfs-"))
      const refused = mountAt(dir, size)
      if (refused !== undefined) throw new Error(`cannot mount a tmpfs at ${dir}: ${refused}`)
      return dir
    }),
    (dir) =>
      Effect.sync(() => {
        if (run(["umount", dir]) !== undefined) run(["umount", "-l", dir])
        Fs.rmSync(dir, { recursive: true, force: true })
      })
  )

/** Remounts the tmpfs at `dir` with `options` ("ro", "rw", "size=1m"). Throws when refused. */
export const remount = (dir: string, options: string): void => {
  const refused = run(["mount", "-o", `remount,${options}`, dir])
  if (refused !== undefined) throw new Error(`cannot remount ${dir} ${options}: ${refused}`)
}
