/**
 * Builds `dist/` afresh once before the suite (tsc, then the CLI bundle of
 * `scripts/build-cli.js`) so the tests that spawn the real `agent-loop` binary run the current
 * sources, and no module that moved or was removed stays behind in it.
 */
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"

export default function setup(): void {
  rmSync("dist", { recursive: true, force: true })
  execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json"], { stdio: "inherit" })
  execFileSync(process.execPath, ["scripts/build-cli.js"], { stdio: "inherit" })
}
