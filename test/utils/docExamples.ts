/**
 * The code blocks of the documentation as programs: `extract` finds every fenced ```ts block
 * under an `@example` tag of a `/** … *\/` comment, `extractMarkdown` every fenced block of a
 * Markdown file (`README.md`, `docs/**\/*.md`) with its info string's attributes
 * (```` ```ts example=quick-start ````: the block is a verbatim part of `examples/quick-start.ts`;
 * ```` ```text output=quick-start ````: what that program prints). `typecheck` writes each ts
 * block to its own module in a temporary folder inside the repository (so that
 * `effect-agent-loop` and `effect-agent-loop/sql` resolve by package self-reference, to `dist/`,
 * as for a user) and type-checks them all in one run of the project's `tsc`, with the project's
 * compiler options.
 */
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { run } from "./child.js"

/** One fenced block: where it is (`line`: the source line of its first line of code), what it documents, its code. */
export interface DocBlock {
  readonly file: string
  readonly line: number
  /** The name the doc comment documents (`make`, `layerJsonl`, …), or `?`; in Markdown the heading above the block. */
  readonly symbol: string
  readonly code: string
  /** Markdown only: the block's language and the `key=value` attributes of its info string. */
  readonly lang?: string | undefined
  readonly attributes?: Readonly<Record<string, string>> | undefined
}

/** A compiler error in a block, at a line of the source file. */
export interface DocFailure {
  readonly block: DocBlock
  readonly line: number
  readonly message: string
}

const FENCE_OPEN = /^```(?:ts|typescript)\s*$/
const FENCE_CLOSE = /^```\s*$/
const DECLARATION = /^export\s+(?:declare\s+)?(?:const|let|function\*?|class|interface|type|namespace)\s+([A-Za-z_$][\w$]*)/

/** The `@example` blocks of one source file's doc comments, in file order. */
export const extract = (file: string, text: string): Array<DocBlock> => {
  const lines = text.split("\n")
  const blocks: Array<DocBlock> = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*\/\*\*/.test(lines[i]!)) continue
    const start = i
    while (i < lines.length && !lines[i]!.includes("*/")) i++
    const symbol = lines.slice(i + 1).map((l) => l.trim()).find((l) => l.length > 0)?.match(DECLARATION)?.[1] ?? "?"
    let inExample = false
    let code: Array<string> | undefined
    let codeLine = 0
    for (let j = start + 1; j < i; j++) {
      const body = lines[j]!.replace(/^\s*\* ?/, "")
      if (code !== undefined) {
        if (FENCE_CLOSE.test(body)) {
          blocks.push({ file, line: codeLine, symbol, code: code.join("\n") })
          code = undefined
        } else code.push(body)
      } else if (/^@example\b/.test(body)) inExample = true
      else if (/^@\w/.test(body)) inExample = false
      else if (inExample && FENCE_OPEN.test(body)) {
        code = []
        codeLine = j + 2
      }
    }
    if (code !== undefined) throw new Error(`${file}:${codeLine - 1}: an @example block of ${symbol} has no closing fence`)
  }
  return blocks
}

/** Every `@example` block of the `.ts` files under `root` (recursively), files in sorted order. */
export const collect = (root: string): Array<DocBlock> =>
  (Fs.readdirSync(root, { recursive: true }) as Array<string>)
    .filter((f) => f.endsWith(".ts"))
    .sort()
    .flatMap((f) => {
      const file = Path.join(root, f).split(Path.sep).join("/")
      return extract(file, Fs.readFileSync(file, "utf8"))
    })

const MD_FENCE = /^( *)(`{3,}|~{3,})\s*(.*)$/

/**
 * The fenced code blocks of one Markdown file, in file order, whatever their language (an
 * indented fence, as in a list item, has its indentation taken off every line).
 */
export const extractMarkdown = (file: string, text: string): Array<DocBlock> => {
  const lines = text.split("\n")
  const blocks: Array<DocBlock> = []
  let heading = "(top)"
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (h !== null) {
      heading = h[1]!
      continue
    }
    const open = MD_FENCE.exec(line)
    if (open === null) continue
    const [, indent, fence, info] = open as unknown as [string, string, string, string]
    const [lang = "", ...words] = info.trim().split(/\s+/)
    const attributes: Record<string, string> = {}
    for (const word of words) {
      const kv = /^([\w-]+)=(.*)$/.exec(word)
      if (kv !== null) attributes[kv[1]!] = kv[2]!
    }
    const code: Array<string> = []
    const start = i + 1
    i++
    const close = new RegExp(`^ {0,${indent!.length + 3}}${fence![0]}{${fence!.length},}\\s*$`)
    while (i < lines.length && !close.test(lines[i]!)) {
      code.push(lines[i]!.startsWith(indent!) ? lines[i]!.slice(indent!.length) : lines[i]!.trimStart())
      i++
    }
    if (i >= lines.length) throw new Error(`${file}:${start}: a fenced block has no closing fence`)
    blocks.push({ file, line: start + 1, symbol: heading, code: code.join("\n"), lang, attributes })
  }
  return blocks
}

/** The Markdown files of the documentation: `README.md` and every `.md` under `docs/`, sorted. */
export const markdownFiles = (): Array<string> => [
  "README.md",
  ...(Fs.existsSync("docs") ? (Fs.readdirSync("docs", { recursive: true }) as Array<string>) : [])
    .filter((f) => f.endsWith(".md"))
    .map((f) => Path.join("docs", f).split(Path.sep).join("/"))
    .sort()
]

/** Every fenced block of the documentation's Markdown files. */
export const collectMarkdown = (): Array<DocBlock> =>
  markdownFiles().flatMap((file) => extractMarkdown(file, Fs.readFileSync(file, "utf8")))

/** Whether a Markdown block is TypeScript (and so type-checked). */
export const isTypeScript = (block: DocBlock): boolean => block.lang === "ts" || block.lang === "typescript"

/**
 * `src/Agent.ts:262 (@example of make, block at line 260): error TS2339: …`, or for Markdown
 * `README.md:40 (block under "Quick start", at line 30): error TS2339: …`
 */
export const format = (failure: DocFailure): string =>
  failure.block.lang === undefined
    ? `${failure.block.file}:${failure.line} (@example of ${failure.block.symbol}, block at line ${failure.block.line}): ${failure.message}`
    : `${failure.block.file}:${failure.line} (block under "${failure.block.symbol}", at line ${failure.block.line}): ${failure.message}`

/**
 * The anchors a Markdown file offers, as GitHub makes them from its headings (lower case,
 * punctuation but `-` and `_` dropped, spaces as `-`, a repeated one suffixed `-1`, `-2`, …),
 * plus explicit `<a id="…">` anchors.
 */
export const anchorsOf = (text: string): Set<string> => {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  let inFence = false
  for (const line of text.split("\n")) {
    if (/^ *(`{3,}|~{3,})/.test(line)) inFence = !inFence
    if (inFence) continue
    for (const m of line.matchAll(/<a (?:id|name)="([^"]+)"/g)) anchors.add(m[1]!)
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (h === null) continue
    const base = h[1]!.replace(/<[^>]+>/g, "").toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/ /g, "-")
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

/**
 * The relative links of the documentation that lead nowhere: a file that does not exist, or an
 * anchor that a Markdown file does not have (`file:line: target`). Links inside code are not links.
 */
export const brokenLinks = (): Array<string> => {
  const broken: Array<string> = []
  for (const file of markdownFiles()) {
    const text = Fs.readFileSync(file, "utf8")
    let inFence = false
    text.split("\n").forEach((line, i) => {
      if (/^ *(`{3,}|~{3,})/.test(line)) inFence = !inFence
      if (inFence) return
      const prose = line.replace(/`[^`]*`/g, "")
      for (const m of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!
        if (/^[a-z][\w+.-]*:/i.test(target)) continue // https:, mailto:
        const [path = "", anchor] = target.split("#")
        const resolved = path === "" ? file : Path.join(Path.dirname(file), path)
        if (!Fs.existsSync(resolved)) {
          broken.push(`${file}:${i + 1}: ${target}`)
        } else if (
          anchor !== undefined && resolved.endsWith(".md") && !anchorsOf(Fs.readFileSync(resolved, "utf8")).has(anchor)
        ) {
          broken.push(`${file}:${i + 1}: ${target}`)
        }
      }
    })
  }
  return broken
}

const tsc = Path.resolve("node_modules/typescript/bin/tsc")
const ERROR = /^(.+?)\((\d+),(\d+)\): (error TS\d+: .*)$/

/**
 * Type-checks the blocks in one `tsc --noEmit` run over a generated tsconfig that extends the
 * project's; returns the errors, each mapped back to its block and source line. The folder
 * (under `.scratch/`, git-ignored) is removed afterwards.
 */
export const typecheck = (blocks: ReadonlyArray<DocBlock>): Array<DocFailure> => {
  Fs.mkdirSync(".scratch", { recursive: true })
  const dir = Fs.mkdtempSync(Path.join(".scratch", "doc-examples-"))
  try {
    const byName = new Map<string, DocBlock>()
    blocks.forEach((block, i) => {
      const name = `${String(i).padStart(2, "0")}_${block.file.replace(/[^\w]+/g, "_")}_${block.line}.ts`
      byName.set(name, block)
      // `export {}` makes every block a module (a block without imports would otherwise share
      // one global scope with the others).
      Fs.writeFileSync(Path.join(dir, name), `${block.code}\nexport {}\n`)
    })
    Fs.writeFileSync(
      Path.join(dir, "tsconfig.json"),
      JSON.stringify({ extends: "../../tsconfig.json", compilerOptions: { noEmit: true }, include: ["*.ts"] })
    )
    let output: string
    try {
      output = execFileSync(process.execPath, [tsc, "--noEmit", "--pretty", "false", "-p", Path.join(dir, "tsconfig.json")], {
        encoding: "utf8"
      })
    } catch (e) {
      const failed = e as { stdout?: string; stderr?: string; status?: number }
      output = (failed.stdout ?? "") + (failed.stderr ?? "")
      if (failed.status !== 1 && failed.status !== 2) {
        throw new Error(`tsc failed (status ${failed.status}): ${output}`, { cause: e })
      }
    }
    const failures: Array<DocFailure> = []
    const unmapped: Array<string> = []
    for (const line of output.split("\n")) {
      if (line.trim().length === 0) continue
      const m = ERROR.exec(line)
      const block = m === null ? undefined : byName.get(Path.basename(m[1]!))
      if (m === null || block === undefined) {
        // A continuation line of the previous message, or an error outside the blocks.
        if (failures.length > 0 && /^\s/.test(line)) {
          const last = failures.pop()!
          failures.push({ ...last, message: `${last.message}\n${line}` })
        } else unmapped.push(line)
        continue
      }
      failures.push({ block, line: block.line + Number(m[2]) - 1, message: m[4]! })
    }
    if (unmapped.length > 0) throw new Error(`tsc reported errors outside the blocks:\n${unmapped.join("\n")}`)
    return failures
  } finally {
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * Runs a block marked `run=NAME`, a whole program: the block is compiled by esbuild (types
 * stripped; `typecheck` checks them) into a module under `.scratch/` (inside the repository, so
 * that it imports the library by its package name, `dist/`) and run by `node` in a fresh working
 * directory of its own (a JSONL store it makes lands there), bounded by `withinMs`. The folder is
 * removed afterwards.
 */
export const runBlock = (block: DocBlock, withinMs: number) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      Fs.mkdirSync(".scratch", { recursive: true })
      return Fs.mkdtempSync(Path.join(".scratch", "doc-run-"))
    }),
    (dir) =>
      Effect.gen(function*() {
        const { code } = yield* Effect.promise(() =>
          import("esbuild").then((esbuild) => esbuild.transform(block.code, { loader: "ts", format: "esm" }))
        )
        const file = Path.resolve(dir, `${block.attributes?.run ?? "block"}.mjs`)
        Fs.writeFileSync(file, code)
        return yield* run(process.execPath, [file], { withinMs, cwd: dir })
      }),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
