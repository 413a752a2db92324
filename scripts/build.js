// Builds dist/ (`npm run build`, and the test suite's global setup): the library with tsc
// (tsconfig.build.json) and the `agent-loop` CLI bundle (scripts/build-cli.js), both into a fresh
// directory beside it (dist.next-PID), which then replaces dist/ by two renames. So nothing of an
// older build stays behind (a module that moved or was removed), and a second run in the same
// checkout (another `npm test`, an `npm start`) finds either the previous build or the new one,
// never a dist/ that is missing or half written: the window between the renames is a few
// microseconds, where deleting dist/ first left it missing for the whole build (tens of seconds).
//
//   node scripts/build.js [--metafile]     (--metafile: also write dist/cli-meta.json)
import { execFileSync } from "node:child_process"
import { existsSync, renameSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const dist = join(root, "dist")
const next = join(root, `dist.next-${process.pid}`)
const old = join(root, `dist.old-${process.pid}`)
const tsc = join(dirname(createRequire(import.meta.url).resolve("typescript/package.json")), "bin", "tsc")

rmSync(next, { recursive: true, force: true })
try {
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json", "--outDir", next], { cwd: root, stdio: "inherit" })
  execFileSync(process.execPath, [join(root, "scripts/build-cli.js"), "--outdir", next, ...process.argv.slice(2)], {
    cwd: root,
    stdio: "inherit"
  })
} catch (error) {
  rmSync(next, { recursive: true, force: true })
  // tsc and esbuild printed their errors above; this line says which build failed.
  console.error(`build failed: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`)
  process.exit(1)
}
if (existsSync(dist)) renameSync(dist, old)
renameSync(next, dist)
rmSync(old, { recursive: true, force: true })
