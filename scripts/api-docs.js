// Builds the API reference from the doc comments of the public modules into build/api/ (git-ignored):
// one Markdown page per module (build/api/modules/<path>.ts.md) and an index, build/api/README.md.
// The public modules are the entries of package.json `exports` (`.`, `./sql`, `./ai-bridge`, `./mcp`,
// `./cluster`) and the modules they re-export (`export * as X from "./X.js"`); everything else
// under src/ (internal/, cli/, providers/internal/) is left out.
//
//   npm run docs                                  (node scripts/api-docs.js)
//   node scripts/api-docs.js --check-links DIR    (only the link check, over DIR's pages)
//
// The pages come from @effect/docgen 0.5 (Effect 3's generator). It parses with ts-morph and the
// TypeScript 5.5 bundled in its bin.cjs, so the repository's TypeScript 7 (no JS API) does not
// matter to it; its `typescript` peer is pointed at the root one by the `overrides` entry of
// package.json, which it never loads. It fails on an export without `@since` and on an `@example`
// block that does not compile: it writes the blocks to build/api/examples/ and runs `tsc --noEmit`
// (the repository's TypeScript 7, first on PATH) with the project's compiler options, resolving
// `effect-agent-loop` and its subpaths to src/ through `paths` (derived from package.json `exports`).
// docgen would then run the blocks with `tsx`; they are not runnable offline (they open sessions on
// disk, talk to PostgreSQL, call providers), so a `tsx` that does nothing comes first on its PATH:
// the blocks are type-checked, not run (test/DocExamples.test.ts also type-checks them, against
// dist/, as a user sees them).
//
// docgen reads `name` and `homepage` from the package.json of its working directory and rewrites
// imports of that name to `../../src`; this package has no homepage, and that rewrite cannot reach
// the subpaths. So it runs in a staging folder, build/docgen/ (removed afterwards), with a
// package.json of its own, its docgen.json and a link `src -> ../../src`.
//
// After docgen, every page is checked for broken internal links (a relative link to a missing file,
// an anchor that names no heading of its page) and `{@link X}` tags, which docgen leaves as text:
// each must name a module (`Agent`), an export of its own module (`make`) or of another
// (`Agent.make`), and becomes a Markdown link; anything else fails the run. docgen's broken
// Jekyll front matter (`***` for its opening `---`, from Prettier) is written back as front matter.
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "..")
const outDir = Path.join(root, "build", "api")
const stageDir = Path.join(root, "build", "docgen")

/** The `.ts` files under `dir`, as paths relative to the repository root with `/` separators. */
const sourceFiles = (dir) =>
  Fs.readdirSync(Path.join(root, dir), { recursive: true })
    .filter((f) => f.endsWith(".ts") || f.endsWith(".tsx"))
    .map((f) => `${dir}/${f.split(Path.sep).join("/")}`)
    .sort()

/**
 * The public modules: `{ entries: Map<specifier, src file>, modules: Set<src file> }`, from
 * package.json `exports` (`./dist/X.d.ts` is `src/X.ts`) and the modules an entry re-exports.
 */
const publicModules = () => {
  const manifest = JSON.parse(Fs.readFileSync(Path.join(root, "package.json"), "utf8"))
  const entries = new Map()
  for (const [key, target] of Object.entries(manifest.exports)) {
    const types = typeof target === "object" ? target.types : undefined
    if (typeof types !== "string") continue
    const file = types.replace(/^\.\/dist\//, "src/").replace(/\.d\.ts$/, ".ts")
    if (!Fs.existsSync(Path.join(root, file))) throw new Error(`package.json exports ${key}: no ${file}`)
    entries.set(key === "." ? manifest.name : `${manifest.name}/${key.slice(2)}`, file)
  }
  const modules = new Set(entries.values())
  for (const file of entries.values()) {
    const text = Fs.readFileSync(Path.join(root, file), "utf8")
    for (const m of text.matchAll(/^export \* as \w+ from "(\.[^"]+)\.js"/gm)) {
      const target = Path.posix.join(Path.posix.dirname(file), `${m[1]}.ts`)
      if (!Fs.existsSync(Path.join(root, target))) throw new Error(`${file} re-exports ${m[1]}.js: no ${target}`)
      modules.add(target)
    }
  }
  return { name: manifest.name, entries, modules }
}

/** Runs a command, its output passed through; resolves with its exit code. */
const run = (command, args, options) =>
  new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: "inherit", ...options })
    child.on("error", reject)
    child.on("exit", (code, signal) => resolve(code ?? (signal === null ? 1 : 128)))
  })

/** Runs docgen in its staging folder; the public modules, or `undefined` when docgen failed (it said why). */
const docgen = async () => {
  const { entries, modules } = publicModules()
  const tsconfig = JSON.parse(Fs.readFileSync(Path.join(root, "tsconfig.json"), "utf8"))
  Fs.rmSync(outDir, { recursive: true, force: true })
  Fs.rmSync(stageDir, { recursive: true, force: true })
  Fs.mkdirSync(Path.join(stageDir, "bin"), { recursive: true })
  try {
    Fs.symlinkSync(Path.join("..", "..", "src"), Path.join(stageDir, "src"), "dir")
    // Another name than ours: docgen rewrites imports of its package's name to `../../src`.
    Fs.writeFileSync(Path.join(stageDir, "package.json"), JSON.stringify({ name: "api-reference", homepage: "" }))
    // The examples tsconfig is written to build/api/examples/: `paths` are relative to it.
    const examplesDir = Path.join(outDir, "examples")
    const paths = Object.fromEntries(
      [...entries].map(([specifier, file]) => [specifier, [Path.relative(examplesDir, Path.join(root, file))]])
    )
    const { noEmit: _noEmit, ...projectOptions } = tsconfig.compilerOptions
    Fs.writeFileSync(
      Path.join(stageDir, "docgen.json"),
      JSON.stringify(
        {
          srcDir: "src",
          outDir: Path.relative(stageDir, outDir),
          exclude: sourceFiles("src").filter((f) => !modules.has(f)),
          enforceVersion: true,
          parseCompilerOptions: projectOptions,
          // docgen names its example files without extensions: bundler resolution, not NodeNext.
          examplesCompilerOptions: { ...projectOptions, noEmit: true, module: "Preserve", moduleResolution: "Bundler", paths }
        },
        null,
        2
      )
    )
    const noopTsx = Path.join(stageDir, "bin", "tsx")
    Fs.writeFileSync(noopTsx, "#!/bin/sh\n# The @example blocks are type-checked, not run (scripts/api-docs.js).\nexit 0\n")
    Fs.chmodSync(noopTsx, 0o755)
    const bin = Path.join(root, "node_modules", ".bin")
    const code = await run(Path.join(bin, "docgen"), [], {
      cwd: stageDir,
      env: { ...process.env, PATH: [Path.join(stageDir, "bin"), bin, process.env.PATH].join(Path.delimiter) }
    })
    if (code !== 0) return undefined
  } finally {
    Fs.rmSync(stageDir, { recursive: true, force: true })
  }
  return { entries, modules }
}

// ---------------------------------------------------------------------------------------------
// Links
// ---------------------------------------------------------------------------------------------

/** GitHub's anchor of a heading (github-slugger): lower case, punctuation dropped, spaces to `-`. */
const slug = (heading) =>
  heading
    .replace(/<[^>]*>/g, "")
    .replace(/`/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-")

/** The lines of a page outside fenced code blocks, with their line numbers (1-based). */
const proseLines = (text) => {
  const out = []
  let fence = false
  text.split("\n").forEach((line, i) => {
    if (/^\s*```/.test(line)) fence = !fence
    else if (!fence) out.push({ line, n: i + 1 })
  })
  return out
}

/** The anchors of a page's headings, duplicates numbered as GitHub does (`x`, `x-1`, …). */
const anchorsOf = (text) => {
  const anchors = new Set()
  for (const { line } of proseLines(text)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (m === null) continue
    const base = slug(m[1])
    let anchor = base
    for (let i = 1; anchors.has(anchor); i++) anchor = `${base}-${i}`
    anchors.add(anchor)
  }
  return anchors
}

const FRONT_MATTER = /^\*\*\*\n\n((?:[\w-]+: .*\n)+)---\n/

/**
 * Checks (and rewrites) the pages under `dir`: fixes docgen's front matter, turns `{@link X}` into
 * Markdown links, and returns the broken links as `file:line: message`, sorted (relative paths).
 */
const checkLinks = (dir) => {
  const files = Fs.readdirSync(dir, { recursive: true })
    .map((f) => f.split(Path.sep).join("/"))
    .filter((f) => f.endsWith(".md"))
    .sort()
  const texts = new Map(files.map((f) => [f, Fs.readFileSync(Path.join(dir, f), "utf8").replace(FRONT_MATTER, "---\n$1---\n")]))
  // `{@link}` targets: a module page by its name (`Agent`, `cluster/AgentRunner` or `AgentRunner`);
  // an export by the anchor of its heading (`## make`, `## Agent (interface)`).
  const pages = new Map()
  for (const f of files) {
    const m = /^modules\/(.+)\.ts\.md$/.exec(f)
    if (m === null) continue
    const name = m[1]
    const exports = new Map()
    for (const { line } of proseLines(texts.get(f))) {
      const h = /^## ([\w$]+)(?: \((?:class|interface|type alias|namespace)\))?\s*$/.exec(line)
      if (h !== null && !exports.has(h[1])) exports.set(h[1], slug(line.slice(3)))
    }
    const page = { file: f, exports }
    pages.set(name, page)
    const base = name.split("/").pop()
    if (!pages.has(base)) pages.set(base, page)
  }
  const errors = []
  const resolveLink = (from, target) => {
    const page = pages.get(from.replace(/^modules\/(.+)\.ts\.md$/, "$1"))
    const dot = target.lastIndexOf(".")
    const candidates = [
      page !== undefined && page.exports.has(target) ? [page, target] : undefined,
      pages.has(target) ? [pages.get(target), undefined] : undefined,
      dot > 0 && pages.get(target.slice(0, dot))?.exports.has(target.slice(dot + 1))
        ? [pages.get(target.slice(0, dot)), target.slice(dot + 1)]
        : undefined
    ]
    const found = candidates.find((c) => c !== undefined)
    if (found === undefined) return undefined
    const [to, name] = found
    const file = to.file === from ? "" : Path.posix.relative(Path.posix.dirname(from), to.file)
    return name === undefined ? file : `${file}#${to.exports.get(name)}`
  }
  for (const f of files) {
    let text = texts.get(f)
    text = text.replace(/\{@link(?:code|plain)?\s+([^\s|}]+)(?:\s*\|\s*|\s+)?([^}]*)\}/g, (whole, target, label, offset) => {
      const href = resolveLink(f, target)
      if (href === undefined) {
        errors.push(`${f}:${text.slice(0, offset).split("\n").length}: {@link ${target}} names no module or export`)
        return whole
      }
      return `[${label.trim() || `\`${target}\``}](${href})`
    })
    texts.set(f, text)
  }
  for (const f of files) {
    for (const { line, n } of proseLines(texts.get(f))) {
      const prose = line.replace(/`[^`]*`/g, "")
      for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        const target = m[1]
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // https:, mailto:: not ours to check
        const [pathPart, anchor] = target.split("#", 2)
        const to = pathPart === "" ? f : Path.posix.normalize(Path.posix.join(Path.posix.dirname(f), pathPart))
        if (pathPart !== "" && !Fs.existsSync(Path.join(dir, to))) {
          errors.push(`${f}:${n}: link to ${target}: no ${to}`)
          continue
        }
        if (anchor !== undefined && texts.has(to) && !anchorsOf(texts.get(to)).has(anchor)) {
          errors.push(`${f}:${n}: link to ${target}: no heading #${anchor} in ${to}`)
        }
      }
    }
  }
  for (const [f, text] of texts) Fs.writeFileSync(Path.join(dir, f), text)
  return errors.sort()
}

/** build/api/README.md: the entry points, their modules, and a link to each page. */
const writeIndex = ({ entries, modules }) => {
  const pageOf = (file) => `modules/${file.replace(/^src\//, "").replace(/\.ts$/, ".ts.md")}`
  const lines = [
    "# effect-agent-loop API reference",
    "",
    "Generated from the doc comments of the public modules by `npm run docs` (scripts/api-docs.js).",
    ""
  ]
  for (const [specifier, file] of entries) {
    lines.push(`## \`${specifier}\``, "", `[${file}](${pageOf(file)})`, "")
    const text = Fs.readFileSync(Path.join(root, file), "utf8")
    for (const m of text.matchAll(/^export \* as (\w+) from "(\.[^"]+)\.js"/gm)) {
      const target = Path.posix.join(Path.posix.dirname(file), `${m[2]}.ts`)
      if (modules.has(target)) lines.push(`- [${m[1]}](${pageOf(target)})`)
    }
    lines.push("")
  }
  Fs.writeFileSync(Path.join(outDir, "README.md"), lines.join("\n"))
}

const main = async () => {
  const args = process.argv.slice(2)
  if (args[0] === "--check-links") {
    const errors = checkLinks(args[1] ?? outDir)
    for (const e of errors) console.error(e)
    process.exitCode = errors.length === 0 ? 0 : 1
    return
  }
  const started = performance.now()
  const publicApi = await docgen()
  if (publicApi === undefined) {
    console.error("API reference: docgen failed (above)")
    process.exitCode = 1
    return
  }
  writeIndex(publicApi)
  const errors = checkLinks(outDir)
  if (errors.length > 0) {
    for (const e of errors) console.error(`build/api/${e}`)
    console.error(`${errors.length} broken link(s) in the API reference`)
    process.exitCode = 1
    return
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  console.log(`API reference: build/api/README.md (${publicApi.modules.size} modules, ${seconds} s)`)
}

await main()
