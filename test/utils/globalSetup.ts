/**
 * Builds `dist/` once before the suite (tsc, then the CLI bundle of `scripts/build-cli.js`) so
 * the tests that spawn the real `agent-loop` binary run the current sources.
 */
import { execFileSync } from "node:child_process"

export default function setup(): void {
  execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json"], { stdio: "inherit" })
  execFileSync(process.execPath, ["scripts/build-cli.js"], { stdio: "inherit" })
}
