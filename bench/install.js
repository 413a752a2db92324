// Install footprint (§25): `npm pack`s this package and installs the tarball into a fresh
// temporary project, beside a second project with only the peers every user has (`effect`,
// `@effect/platform`, `@effect/platform-node`, at the exact versions of our devDependencies).
// Reports the size of each node_modules (disk usage, as `du`), its package count, what the
// library adds, and whether an install script built a native addon (a `build/` directory left
// in a package: node-gyp's output). Then smoke-tests the installed package there: the main entry
// imports, `agent-loop --version` and `check` run, and `chat` names the optional packages it
// needs (exit 2). Figures are never asserted; a failed install or smoke test exits 1.
//
//   node bench/install.js [--json] [--keep]
//
// --json: print `RESULT <json>` as the last line (bench/run.js reads it); --keep: leave the
// temporary projects (their path is printed). Targets (§5): no native build; the library adds
// ≤ 10 MB and ≤ 5 packages. Needs the npm registry (or a warm npm cache).
import { spawnSync } from "node:child_process"
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, "..")
const args = process.argv.slice(2)
const PEERS = ["effect", "@effect/platform", "@effect/platform-node"]

/** Runs a command; throws with its output when it fails. */
const run = (command, commandArgs, cwd, expectStatus = 0) => {
  const started = performance.now()
  const r = spawnSync(command, commandArgs, {
    cwd,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, CI: "1" }
  })
  const seconds = (performance.now() - started) / 1000
  if (r.status !== expectStatus) {
    const output = `${r.stdout ?? ""}\n${r.stderr ?? ""}`.trim().split("\n").slice(-15).join("\n")
    throw new Error(
      `${command} ${commandArgs.join(" ")} (in ${cwd}) exited ${r.status ?? r.signal}, expected ${expectStatus}:\n${output}`
    )
  }
  return { stdout: r.stdout, stderr: r.stderr, seconds }
}

/** Bytes on disk of a tree (512-byte blocks, as `du`), without following links. */
const diskBytes = (path) => {
  const st = lstatSync(path)
  let total = st.blocks * 512
  if (st.isDirectory()) { for (const entry of readdirSync(path)) total += diskBytes(join(path, entry)) }
  return total
}

/**
 * The installed packages of a node_modules tree: `{ path, name, version, nativeBuild }` for every
 * `node_modules/<name>` and `node_modules/@scope/<name>`, nested node_modules included.
 * `nativeBuild`: the package has a `binding.gyp` and a `build/` directory (node-gyp ran).
 */
const packagesOf = (modules, into = []) => {
  if (!existsSync(modules)) return into
  for (const entry of readdirSync(modules)) {
    if (entry.startsWith(".")) continue
    const dirs = entry.startsWith("@") ? readdirSync(join(modules, entry)).map((e) => join(entry, e)) : [entry]
    for (const dir of dirs) {
      const path = join(modules, dir)
      const manifest = join(path, "package.json")
      if (!existsSync(manifest)) continue
      const { name, version } = JSON.parse(readFileSync(manifest, "utf8"))
      const nativeBuild = existsSync(join(path, "binding.gyp")) && existsSync(join(path, "build"))
      into.push({ path, name, version, nativeBuild })
      packagesOf(join(path, "node_modules"), into)
    }
  }
  return into
}

/** A fresh project with these dependencies, installed; its footprint. */
const project = (directory, dependencies) => {
  mkdirSync(directory, { recursive: true })
  writeFileSync(
    join(directory, "package.json"),
    JSON.stringify({ name: "install-probe", version: "1.0.0", private: true, type: "module", dependencies }, null, 2)
  )
  const install = run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], directory)
  const modules = join(directory, "node_modules")
  const packages = packagesOf(modules)
  return {
    directory,
    seconds: install.seconds,
    bytes: diskBytes(modules),
    packages,
    nativeBuilds: packages.filter((p) => p.nativeBuild).map((p) => `${p.name}@${p.version}`)
  }
}

/** Checks the installed package from the user's side; returns the lines to print. */
const smokeTest = (directory) => {
  const bin = join(directory, "node_modules", ".bin", "agent-loop")
  const lines = []
  run(process.execPath, [
    "--input-type=module",
    "-e",
    "const m = await import('effect-agent-loop'); if (!m.Agent) process.exit(3)"
  ], directory)
  lines.push("import 'effect-agent-loop': ok")
  const version = run(bin, ["--version"], directory).stdout.trim()
  lines.push(`agent-loop --version: ${version}`)
  const store = join(directory, "sessions")
  const ran = run(bin, ["run", "--prompt", "hello", "--store", store], directory)
  const log = /session log: (\S+)/.exec(ran.stdout)?.[1]
  if (log === undefined) throw new Error(`agent-loop run printed no session log:\n${ran.stdout}`)
  lines.push(`agent-loop check: ${run(bin, ["check", log], directory).stdout.trim().replace(log, "LOG")}`)
  const chat = run(bin, ["chat"], directory, 2)
  if (!/ink@/.test(chat.stderr) || !/react@/.test(chat.stderr) || /\n\s+at /.test(chat.stderr)) {
    throw new Error(`agent-loop chat without ink/react should name them (exit 2, no stack):\n${chat.stderr}`)
  }
  lines.push(`agent-loop chat (no ink/react): exit 2: ${chat.stderr.trim()}`)
  return lines
}

const MB = 2 ** 20

export const measure = ({ keep = false, log = (line) => process.stderr.write(line + "\n") } = {}) => {
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))
  const versionOf = (name) => {
    const v = manifest.devDependencies?.[name] ?? manifest.dependencies?.[name]
    if (v === undefined || !/^\d+\.\d+\.\d+$/.test(v)) {
      throw new Error(`package.json: ${name} needs an exact version in devDependencies (got ${v})`)
    }
    return v
  }
  const peers = Object.fromEntries(PEERS.map((name) => [name, versionOf(name)]))
  const work = mkdtempSync(join(tmpdir(), "bench-install-"))
  try {
    log(`  npm pack … `)
    run("npm", ["pack", "--pack-destination", work, "--loglevel=error"], root)
    const tarball = readdirSync(work).find((f) => f.endsWith(".tgz"))
    if (tarball === undefined) throw new Error("npm pack wrote no tarball")
    const tarballBytes = lstatSync(join(work, tarball)).size
    log(`  baseline: ${PEERS.map((p) => `${p}@${peers[p]}`).join(" ")} … `)
    const base = project(join(work, "baseline"), peers)
    log(`  library: the tarball + the same peers … `)
    const lib = project(join(work, "library"), { ...peers, "effect-agent-loop": `file:../${tarball}` })
    const have = new Map()
    for (const p of base.packages) have.set(`${p.name}@${p.version}`, (have.get(`${p.name}@${p.version}`) ?? 0) + 1)
    const added = []
    for (const p of lib.packages) {
      const key = `${p.name}@${p.version}`
      if ((have.get(key) ?? 0) > 0) have.set(key, have.get(key) - 1)
      else added.push(p)
    }
    const addedBytes = added.map((p) => ({ name: `${p.name}@${p.version}`, bytes: diskBytes(p.path) })).sort((a, b) =>
      b.bytes - a.bytes
    )
    let smoke, smokeError
    try {
      smoke = smokeTest(lib.directory)
    } catch (e) {
      smokeError = e instanceof Error ? e.message : String(e)
      smoke = [`smoke test FAILED: ${smokeError}`]
    }
    const summary = {
      tarballKB: tarballBytes / 1024,
      baseline: { mb: base.bytes / MB, packages: base.packages.length, nativeBuilds: base.nativeBuilds, seconds: base.seconds },
      library: { mb: lib.bytes / MB, packages: lib.packages.length, nativeBuilds: lib.nativeBuilds, seconds: lib.seconds },
      addedMB: (lib.bytes - base.bytes) / MB,
      addedPackages: lib.packages.length - base.packages.length,
      added: addedBytes.map((p) => `${p.name} ${(p.bytes / MB).toFixed(2)} MB`),
      smoke,
      smokeError
    }
    if (keep) log(`  kept: ${work}`)
    return summary
  } finally {
    if (!keep) rmSync(work, { recursive: true, force: true })
  }
}

export const report = (s) =>
  [
    `install footprint (npm ${run("npm", ["--version"], root).stdout.trim()}, node ${process.version}; tarball ${
      s.tarballKB.toFixed(0)
    } KB)`,
    `  baseline (peers only):  ${s.baseline.mb.toFixed(1)} MB, ${s.baseline.packages} packages, native build: ${
      s.baseline.nativeBuilds.join(", ") || "none"
    } (${s.baseline.seconds.toFixed(1)} s)`,
    `  with effect-agent-loop: ${s.library.mb.toFixed(1)} MB, ${s.library.packages} packages, native build: ${
      s.library.nativeBuilds.join(", ") || "none"
    } (${s.library.seconds.toFixed(1)} s)`,
    `  the library adds ${s.addedMB.toFixed(1)} MB and ${s.addedPackages} package${
      s.addedPackages === 1 ? "" : "s"
    } (targets: ≤ 10 MB, ≤ 5 packages, no native build)`,
    ...s.added.slice(0, 12).map((p) => `    + ${p}`),
    ...(s.added.length > 12 ? [`    + … ${s.added.length - 12} more`] : []),
    ...s.smoke.map((l) => `  ${l}`)
  ].join("\n")

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    const s = measure({ keep: args.includes("--keep") })
    console.log(report(s))
    if (args.includes("--json")) console.log(`RESULT ${JSON.stringify(s)}`)
    if (s.smokeError !== undefined) process.exitCode = 1
  } catch (e) {
    console.error(e instanceof Error ? e.message : e)
    process.exitCode = 1
  }
}
