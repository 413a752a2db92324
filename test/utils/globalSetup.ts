/**
 * Builds `dist/` afresh once before the suite (`scripts/build.js`: tsc, then the CLI bundle of
 * `scripts/build-cli.js`) so the tests that spawn the real `agent-loop` binary run the current
 * sources, and no module that moved or was removed stays behind in it. The build goes to a
 * directory of its own that replaces `dist/` at the end, so a second run of the suite in the
 * same checkout is not left without a `dist/` while this one builds.
 */
import { execFileSync } from "node:child_process"

export default function setup(): void {
  execFileSync(process.execPath, ["scripts/build.js"], { stdio: "inherit" })
}
