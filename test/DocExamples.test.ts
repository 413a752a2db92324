/**
 * The code of the documentation compiles (§25): every fenced ```ts block under an `@example` tag of
 * `src/` and every fenced ```ts block of `README.md` and `docs/**\/*.md` is written to its own
 * module inside the repository and all are type-checked in one `tsc` run, importing the library
 * by its package name (`dist/`, built by the global setup). A block that does not compile fails
 * the test with its file, line and the symbol or heading it is under. A block marked
 * `example=NAME` is a verbatim part of `examples/NAME.ts`, which `test/Examples.test.ts` runs
 * (and checks against the block marked `output=NAME`). A block marked `run=NAME` is a whole
 * program of the docs: it is run here, and prints its `output=NAME` block. Relative links
 * between the docs lead to files and headings that exist.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import { CHILD_RUN_MS } from "./utils/bounds.js"
import {
  anchorsOf,
  brokenLinks,
  collect,
  collectMarkdown,
  type DocBlock,
  extract,
  extractMarkdown,
  format,
  isTypeScript,
  runBlock,
  typecheck
} from "./utils/docExamples.js"

/** A block that must not compile: proves that a broken block is reported, named. */
const canary: DocBlock = {
  file: "(canary)",
  line: 1,
  symbol: "canary",
  code: `const answer: number = "42"`
}

describe("@example blocks", () => {
  it("finds the fenced ts blocks under @example tags, with their source lines and symbols", () => {
    const text = [
      "/**", //                                                 1
      " * Not an example:", //                                  2
      " * ```ts", //                                            3
      " * ignored()", //                                        4
      " * ```", //                                              5
      " *", //                                                  6
      " * @example", //                                         7
      " * ```ts", //                                            8
      " * import { Effect } from \"effect\"", //                9
      " *", //                                                  10
      " * const x = Effect.succeed(1)", //                      11
      " *   .pipe(Effect.asVoid)", //                           12
      " * ```", //                                              13
      " *", //                                                  14
      " * @since 0.1.0", //                                     15
      " */", //                                                 16
      "export const make = 1" //                                17
    ].join("\n")
    expect(extract("src/X.ts", text)).toEqual([{
      file: "src/X.ts",
      line: 9,
      symbol: "make",
      code: "import { Effect } from \"effect\"\n\nconst x = Effect.succeed(1)\n  .pipe(Effect.asVoid)"
    }])
  })

  it("finds the fenced blocks of a Markdown file: language, attributes, heading, indented fences", () => {
    const text = [
      "# Title", //                                             1
      "```ts example=quick-start", //                           2
      "const a = 1", //                                         3
      "```", //                                                 4
      "## Under a list", //                                     5
      "- item:", //                                             6
      "  ```ts", //                                             7
      "  if (x) {", //                                          8
      "    y()", //                                             9
      "  }", //                                                 10
      "  ```", //                                               11
      "````text output=quick-start", //                         12
      "```", //                                                 13
      "````" //                                                 14
    ].join("\n")
    expect(extractMarkdown("docs/x.md", text)).toEqual([
      {
        file: "docs/x.md",
        line: 3,
        symbol: "Title",
        code: "const a = 1",
        lang: "ts",
        attributes: { example: "quick-start" }
      },
      { file: "docs/x.md", line: 8, symbol: "Under a list", code: "if (x) {\n  y()\n}", lang: "ts", attributes: {} },
      { file: "docs/x.md", line: 13, symbol: "Under a list", code: "```", lang: "text", attributes: { output: "quick-start" } }
    ])
  })

  it("every block of src/ and of the Markdown docs type-checks (one tsc run; a broken block is named)", () => {
    const markdown = collectMarkdown().filter(isTypeScript)
    expect(markdown.map((b) => `${b.file} ${b.symbol}`)).toEqual(expect.arrayContaining([
      "README.md Quick start",
      "docs/getting-started.md A session on disk",
      "docs/tools-and-pre-step.md Pre-step listeners",
      "docs/observability.md Traces"
    ]))
    const blocks = [...collect("src"), ...markdown]
    expect(blocks.map((b) => `${b.file} ${b.symbol}`)).toEqual(expect.arrayContaining([
      "src/Agent.ts make",
      "src/Agent.ts resume",
      "src/SessionStore.ts readFile",
      "src/SessionStore.ts layerMemory",
      "src/SessionStore.ts layerJsonl",
      "src/SqlSessionStore.ts layer",
      "src/SqlSessionStore.ts layerSqlite",
      "src/PreStep.ts layer",
      "src/PreStep.ts listener",
      "src/Tool.ts make",
      "src/SessionReference.ts deliver",
      "src/providers/OpenAICompat.ts layer",
      "src/providers/Anthropic.ts layer",
      "src/providers/AiBridge.ts layer"
    ]))
    const failures = typecheck([...blocks, canary]).map(format)
    // Only the canary fails: anything else in this list is a block of src/ or of the docs that does not compile.
    expect(failures).toEqual([
      "(canary):1 (@example of canary, block at line 1): error TS2322: " +
      "Type 'string' is not assignable to type 'number'."
    ])
  })

  it("a block marked example=NAME is a verbatim part of examples/NAME.ts; each output=NAME has its program", () => {
    const blocks = collectMarkdown()
    const examples = blocks.filter((b) => b.attributes?.example !== undefined)
    expect(examples.map((b) => `${b.file}:${b.line} ${b.attributes!.example}`)).toEqual(["README.md:16 quick-start"])
    for (const block of examples) {
      const file = `examples/${block.attributes!.example}.ts`
      expect({ file, contains: Fs.readFileSync(file, "utf8").includes(`${block.code}\n`) }).toEqual({ file, contains: true })
    }
    // The printed output next to it is checked by test/Examples.test.ts, which runs the program.
    expect(blocks.filter((b) => b.attributes?.output !== undefined).map((b) => `${b.file} ${b.attributes!.output}`))
      .toEqual([
        "README.md quick-start",
        "docs/approvals.md approvals",
        "docs/compaction.md compaction",
        "docs/delivering-input.md delivering-input",
        "docs/getting-started.md getting-started",
        "docs/mcp.md mcp",
        "docs/subagents.md subagents"
      ])
  })

  it.effect("a block marked run=NAME runs to exit 0 and prints its output=NAME block (or what is pinned here)", () =>
    Effect.gen(function*() {
      const blocks = collectMarkdown()
      const runnable = blocks.filter((b) => b.attributes?.run !== undefined)
      expect(runnable.map((b) => `${b.file} ${b.attributes!.run}`)).toEqual([
        "docs/approvals.md approvals",
        "docs/compaction.md compaction",
        "docs/delivering-input.md delivering-input",
        "docs/getting-started.md getting-started",
        "docs/getting-started.md session-on-disk",
        "docs/mcp.md mcp",
        "docs/observability.md tracing",
        "docs/subagents.md subagents",
        "docs/tools-and-pre-step.md pre-step-listeners"
      ])
      for (const block of runnable) {
        const name = block.attributes!.run!
        const ran = yield* runBlock(block, CHILD_RUN_MS)
        const shown = blocks.find((b) => b.file === block.file && b.attributes?.output === name)
        // The console exporter prints each span as an object; its ids and times differ per run.
        const printed = name === "tracing"
          ? [...ran.stdout.matchAll(/^ {2}name: '([^']+)'/gm)].map((m) => m[1]).join("\n")
          : ran.stdout
        const expected = shown !== undefined
          ? `${shown.code}\n`
          : name === "tracing"
          ? ["SessionStore.create", "handle request", "chat offline-rules-1", "invoke_agent helper"].join("\n")
          : ""
        expect({ name, status: ran.status, stderr: ran.stderr, printed }).toEqual({
          name,
          status: 0,
          stderr: "",
          printed: expected
        })
      }
    }))

  it("anchors are made from headings as GitHub makes them", () => {
    const text =
      "# Exporting traces (OTLP)\n## `request/header`\n```sh\n# not a heading\n```\n### Tools\n### Tools\n<a id=\"x-1\"></a>"
    expect([...anchorsOf(text)]).toEqual(["exporting-traces-otlp", "requestheader", "tools", "tools-1", "x-1"])
  })

  it("the relative links of README.md and docs/ lead to files and headings that exist", () => {
    expect(brokenLinks()).toEqual([])
  })
})
