/**
 * `--ask TOOL` (repeatable), shared by the agent commands: the calls of each tool named wait for
 * a person's approval (§26 rule 1: the tool's `approval` becomes `"always"`). Where the person
 * answers depends on the command (`acp`: the editor's permission request, §22).
 */
import { Options } from "@effect/cli"
import { Effect, Option } from "effect"
import { escapeLine } from "../../internal/terminalText.js"
import type * as Tool from "../../Tool.js"
import { exit } from "../exit.js"

/**
 * `--ask TOOL`, repeatable: the names of the tools whose calls need approval (none by default).
 */
export const askOption = Options.text("ask").pipe(
  Options.withPseudoName("tool"),
  Options.withDescription("the calls of this tool wait for a person's approval (repeatable; §26)"),
  Options.repeated,
  // Shown as optional in the usage line (`[--ask tool...]`); absent is none.
  Options.optional,
  Options.map(Option.getOrElse((): ReadonlyArray<string> => []))
)

/**
 * The tools, each one whose name is in `names` with `approval: "always"` (a copy; the others as
 * they are). Names that match no tool change nothing: check them first with `checkAsk`.
 */
export const withAsk = (
  tools: ReadonlyArray<Tool.Tool<any>>,
  names: ReadonlyArray<string>
): ReadonlyArray<Tool.Tool<any>> => {
  if (names.length === 0) return tools
  const asked = new Set(names)
  return tools.map((tool): Tool.Tool<any> => (asked.has(tool.name) ? { ...tool, approval: "always" } : tool))
}

/**
 * Exits 2 with one line naming the first of `names` that is not among `available` (the tool
 * names of the command): `--ask nope: no tool of that name (the tools are wait, clock,
 * read_file)`. With `later`, the names it says yes to are not checked here (an MCP server's
 * tools, known once it is connected: `mcpFlag.ts`), and `more` is added to the list of tools.
 */
export const checkAsk = (
  names: ReadonlyArray<string>,
  available: ReadonlyArray<string>,
  options?: { readonly later?: ((name: string) => boolean) | undefined; readonly more?: string | undefined }
) => {
  const unknown = names.find((name) => !available.includes(name) && options?.later?.(name) !== true)
  return unknown === undefined
    ? Effect.void
    : exit(
      2,
      escapeLine(
        `--ask ${unknown}: no tool of that name (the tools are ${available.join(", ")}${
          options?.more === undefined ? "" : `, ${options.more}`
        })`
      )
    )
}
