/**
 * The link check of the API reference (`scripts/api-docs.js --check-links DIR`), on pages written
 * here in docgen's shapes: a broken anchor, a relative link to a missing file and a `{@link}` that
 * names nothing fail it, each named by page and line; a `{@link}` that resolves becomes a Markdown
 * link; docgen's broken front matter is written back as front matter. `npm run docs` (CI) runs the
 * same check over the generated reference.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { scratchDirs } from "./utils/scratchDirs.js"

const script = Path.resolve("scripts/api-docs.js")
const tmpDir = scratchDirs("agent-loop-api-docs-")

const checkLinks = (dir: string) =>
  Effect.async<{ code: number; stdout: string; stderr: string }>((resume) => {
    execFile(process.execPath, [script, "--check-links", dir], { timeout: 20_000 }, (error, stdout, stderr) => {
      resume(Effect.succeed({ code: error ? (error as { code?: number }).code ?? 1 : 0, stdout, stderr }))
    })
  })

/** A module page as docgen writes it (its front matter's `---` printed as `***` by Prettier). */
const page = (title: string, body: ReadonlyArray<string>): string =>
  ["***", "", `title: ${title}`, "nav_order: 1", "parent: Modules", "---", "", ...body, ""].join("\n")

const write = (dir: string, files: Record<string, string>): void => {
  for (const [file, text] of Object.entries(files)) {
    Fs.mkdirSync(Path.dirname(Path.join(dir, file)), { recursive: true })
    Fs.writeFileSync(Path.join(dir, file), text)
  }
}

const agentPage = page("Agent.ts", [
  "## Agent overview",
  "",
  "- [constructors](#constructors)",
  "  - [make](#make)",
  "- [models](#models)",
  "  - [Agent (interface)](#agent-interface)",
  "",
  "# constructors",
  "",
  "## make",
  "",
  "Creates an agent; see {@link Agent} and {@link Inbox.apply | the splice rule}.",
  "",
  "```ts",
  "const x = [a](#not-a-link)",
  "```",
  "",
  "# models",
  "",
  "## Agent (interface)"
])

describe("API reference links", () => {
  it.live("resolved links pass; {@link} becomes a Markdown link; the front matter is restored", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      write(dir, {
        "modules/Agent.ts.md": agentPage,
        "modules/Inbox.ts.md": page("Inbox.ts", ["## Inbox overview", "", "## apply", "", "See {@link Agent.make}."]),
        "README.md": "- [Agent](modules/Agent.ts.md)\n- [make](modules/Agent.ts.md#make)\n- [site](https://effect.website)\n"
      })
      expect(yield* checkLinks(dir)).toEqual({ code: 0, stdout: "", stderr: "" })
      const agent = Fs.readFileSync(Path.join(dir, "modules/Agent.ts.md"), "utf8")
      expect(agent.split("\n").slice(0, 6)).toEqual(["---", "title: Agent.ts", "nav_order: 1", "parent: Modules", "---", ""])
      expect(agent).toContain(
        "Creates an agent; see [`Agent`](#agent-interface) and [the splice rule](Inbox.ts.md#apply)."
      )
      expect(Fs.readFileSync(Path.join(dir, "modules/Inbox.ts.md"), "utf8")).toContain("See [`Agent.make`](Agent.ts.md#make).")
    }), 30_000)

  it.live("a missing anchor, a missing file and a {@link} to nothing fail the check, each named", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      write(dir, {
        "modules/Agent.ts.md": agentPage.replace("(#make)", "(#mak)"),
        "modules/Inbox.ts.md": page("Inbox.ts", [
          "## apply",
          "",
          "See {@link Agent.run}, [the design](../../docs/design.md) and [make](Agent.ts.md#make)."
        ]),
        "README.md": "- [Agent](modules/Agent.ts.md)\n- [Tool](modules/Tool.ts.md)\n"
      })
      expect(yield* checkLinks(dir)).toEqual({
        code: 1,
        stdout: "",
        stderr: [
          "README.md:2: link to modules/Tool.ts.md: no modules/Tool.ts.md",
          "modules/Agent.ts.md:10: link to #mak: no heading #mak in modules/Agent.ts.md",
          "modules/Inbox.ts.md:9: link to ../../docs/design.md: no ../docs/design.md",
          "modules/Inbox.ts.md:9: {@link Agent.run} names no module or export",
          ""
        ].join("\n")
      })
    }), 30_000)
})
