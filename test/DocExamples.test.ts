/**
 * The `@example` blocks of `src/` compile (§25): every fenced ```ts block under an `@example`
 * tag is written to its own module inside the repository and all are type-checked in one `tsc`
 * run, importing the library by its package name (`dist/`, built by the global setup). A block
 * that does not compile fails the test with its file, line and the symbol it documents.
 */
import { describe, expect, it } from "@effect/vitest"
import { collect, type DocBlock, extract, format, typecheck } from "./utils/docExamples.js"

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

  it("every block in src/ type-checks (one tsc run; a broken block is named)", () => {
    const blocks = collect("src")
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
    // Only the canary fails: anything else in this list is a block of src/ that does not compile.
    expect(failures).toEqual([
      "(canary):1 (@example of canary, block at line 1): error TS2322: " +
      "Type 'string' is not assignable to type 'number'."
    ])
  })
})
