/**
 * References to the design document hold: every `§N` / `§N.M` in `src/`, `README.md` and `docs/`
 * names a section heading that `docs/design.md` has (`## N. …`, `### N.M …`), and no issue
 * number ("issue 12", "Issue #4") appears in `src/` (which holds the CLI's `--help` text),
 * `README.md`, `docs/` or `examples/`: readers cannot see the issues. A failure lists each
 * offending reference as `file:line §N` (or `file:line issue N`). The same functions run on a
 * canary text first, so that a check that finds nothing is a check that can find something.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")

/** The section numbers of a design document: `N` of each `## N.` heading, `N.M` of each `### N.M`. */
const sectionsOf = (text: string): ReadonlySet<string> => {
  const sections = new Set<string>()
  for (const line of text.split("\n")) {
    const top = /^## (\d+)\.\s/.exec(line)
    if (top !== null) sections.add(top[1]!)
    const sub = /^### (\d+\.\d+)\s/.exec(line)
    if (sub !== null) sections.add(sub[1]!)
  }
  return sections
}

const SECTION_REF = /§(\d+(?:\.\d+)?)/g
const ISSUE_REF = /\bissue\s+#?\d+/gi

/** `file:line §N` for each `§N` / `§N.M` of `text` that `sections` lacks. */
const danglingRefs = (file: string, text: string, sections: ReadonlySet<string>): Array<string> => {
  const out: Array<string> = []
  text.split("\n").forEach((line, i) => {
    for (const m of line.matchAll(SECTION_REF)) {
      if (!sections.has(m[1]!)) out.push(`${file}:${i + 1} §${m[1]}`)
    }
  })
  return out
}

/** `file:line issue N` for each issue number in `text`. */
const issueRefs = (file: string, text: string): Array<string> => {
  const out: Array<string> = []
  text.split("\n").forEach((line, i) => {
    for (const m of line.matchAll(ISSUE_REF)) out.push(`${file}:${i + 1} ${m[0]}`)
  })
  return out
}

/** The files under `dir` (relative to the repository) whose names end with one of `extensions`. */
const filesUnder = (dir: string, extensions: ReadonlyArray<string>): Array<string> => {
  const full = Path.join(root, dir)
  if (!Fs.existsSync(full)) return []
  const out: Array<string> = []
  const walk = (relative: string) => {
    for (const entry of Fs.readdirSync(Path.join(root, relative), { withFileTypes: true })) {
      const path = Path.posix.join(relative, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (extensions.some((ext) => entry.name.endsWith(ext))) out.push(path)
    }
  }
  walk(dir)
  return out.sort()
}

const read = (file: string): string => Fs.readFileSync(Path.join(root, file), "utf8")

const design = read("docs/design.md")
const sections = sectionsOf(design)

const canary = [
  "See §3.1 and §12 (rule 3 of §12).", //         1: all exist
  "Gone: §99, §3.9 and §6.4.", //                 2: §99 and §3.9 dangle
  "As of issue 15 (and Issue #4), not tissue 3." //  3: two issue numbers
].join("\n")

describe("references to the design document", () => {
  it("docs/design.md has the sections §1–§29 and their subsections", () => {
    const top = Array.from({ length: 29 }, (_, i) => String(i + 1))
    const subs = ["3.1", "3.2", "3.3", "5.1", "5.2", "5.3", "5.4", "6.1", "6.2", "6.3", "6.4", "6.5"]
    expect([...sections].sort((a, b) => a.localeCompare(b, "en", { numeric: true }))).toEqual(
      [...top, ...subs].sort((a, b) => a.localeCompare(b, "en", { numeric: true }))
    )
  })

  it("the checks find a canary's dangling sections and issue numbers, by file and line", () => {
    expect(danglingRefs("(canary)", canary, sections)).toEqual(["(canary):2 §99", "(canary):2 §3.9"])
    expect(issueRefs("(canary)", canary)).toEqual(["(canary):3 issue 15", "(canary):3 Issue #4"])
  })

  it("every §N and §N.M in src/, README.md and docs/ names a section of docs/design.md", () => {
    const files = [...filesUnder("src", [".ts", ".tsx"]), "README.md", ...filesUnder("docs", [".md"])]
    expect(files).toEqual(expect.arrayContaining(["src/Agent.ts", "src/cli/main.ts", "docs/design.md"]))
    const dangling = files.flatMap((file) => danglingRefs(file, read(file), sections))
    expect(dangling).toEqual([])
  })

  it("no issue number in src/ (the CLI's help included), README.md, docs/ or examples/", () => {
    const files = [
      ...filesUnder("src", [".ts", ".tsx"]),
      "README.md",
      ...filesUnder("docs", [".md"]),
      ...filesUnder("examples", [".ts", ".tsx", ".js", ".json", ".md"])
    ]
    expect(files).toEqual(expect.arrayContaining(["src/cli/main.ts", "examples/tracing.ts"]))
    const found = files.flatMap((file) => issueRefs(file, read(file)))
    expect(found).toEqual([])
  })
})
