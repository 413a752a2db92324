// `npm run example -- NAME [ARGS…]`: runs the example examples/NAME.ts, which the script has just
// built into dist-examples/ (git-ignored), as `node dist-examples/NAME.js ARGS…`. The examples
// import the library by its package name; inside this repository that resolves to dist/ (built by
// `npm ci`) through package.json `exports`. Without NAME: the usage, exit 2; a NAME that is not an
// example: `unknown example: NAME` and the list, exit 1.
import { spawn } from "node:child_process"
import { readdirSync } from "node:fs"
import { fileURLToPath } from "node:url"

const names = readdirSync(new URL(".", import.meta.url)).filter((f) => f.endsWith(".ts")).map((f) => f.slice(0, -3)).sort()
const [name, ...args] = process.argv.slice(2)
if (name === undefined) {
  console.error(`usage: npm run example -- NAME [ARGS…]\nNAME: ${names.join(", ")}`)
  process.exit(2)
}
if (!names.includes(name)) {
  console.error(`unknown example: ${name}\nexamples: ${names.join(", ")}`)
  process.exit(1)
}
const child = spawn(process.execPath, [
  "--enable-source-maps",
  fileURLToPath(new URL(`../dist-examples/${name}.js`, import.meta.url)),
  ...args
], {
  stdio: "inherit"
})
// Ctrl-C reaches the example itself (same process group): let it shut down, then exit as it does.
process.on("SIGINT", () => {})
process.on("SIGTERM", () => child.kill("SIGTERM"))
child.on("exit", (code, signal) => {
  process.exitCode = code ?? (signal === "SIGINT" ? 130 : 1)
})
