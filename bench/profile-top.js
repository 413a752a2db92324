// `node bench/profile-top.js FILE.cpuprofile [N]`: the top N (default 25) functions of a V8 CPU
// profile by self time, with their share of all samples and where they are (package or file).
import { readFileSync } from "node:fs"

const [file, n = "25"] = process.argv.slice(2)
const profile = JSON.parse(readFileSync(file, "utf8"))
const self = new Map()
const total = profile.samples.length
const counts = new Map()
for (const id of profile.samples) counts.set(id, (counts.get(id) ?? 0) + 1)
const where = (url) => {
  if (url === "") return ""
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(url)
  if (m !== null) return `${m[1]} ${m[2]}`
  const d = /\/(dist|bench|src)\/(.*)$/.exec(url)
  return d !== null ? `${d[1]}/${d[2]}` : url.replace(/^node:/, "node:")
}
for (const node of profile.nodes) {
  const c = counts.get(node.id) ?? 0
  if (c === 0) continue
  const f = node.callFrame
  const key = `${f.functionName || "(anonymous)"}  ${where(f.url)}${f.url === "" ? "" : `:${f.lineNumber + 1}`}`
  self.set(key, (self.get(key) ?? 0) + c)
}
const rows = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(n))
for (const [key, c] of rows) console.log(`${((100 * c) / total).toFixed(1).padStart(5)}%  ${key}`)
