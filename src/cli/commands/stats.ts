/** `agent-loop stats FILE [--json] [--prices FILE]`: what a session log did and used (§18). */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { escapeJson, escapeLine, escapeText } from "../../internal/terminalText.js"
import { renderStats, statsOf } from "../stats.js"
import { readLog, readPrices } from "./shared.js"

/**
 * `stats FILE [--json] [--prices FILE]` (§18, `stats.ts`): turns, steps, model requests,
 * tool calls by name, tokens by kind and model, cost with a price table, time per turn and per
 * model request. A log that cannot be read, a missing file, or a price table that is not one:
 * one line on stderr, exit 2.
 */
export const stats = Command.make(
  "stats",
  {
    file: Args.text({ name: "FILE" }).pipe(Args.withDescription("a session log (ours or DSH v0)")),
    json: Options.boolean("json").pipe(Options.withDescription("one JSON object")),
    prices: Options.text("prices").pipe(
      Options.optional,
      Options.withDescription("a price table (JSON: {model: {input, cachedInput?, cacheWrite?, output}}, USD per 1e6 tokens)")
    )
  },
  (options) =>
    Effect.gen(function*() {
      const prices = Option.isSome(options.prices) ? yield* readPrices(options.prices.value) : undefined
      const contents = yield* readLog(options.file)
      for (const w of contents.warnings) yield* Console.error(escapeLine(`warning: ${options.file}: ${w}`))
      const result = statsOf(contents, prices)
      if (options.json) yield* Console.log(escapeJson(JSON.stringify(result)))
      else yield* Console.log(escapeText(renderStats(result, options.file)))
    })
).pipe(Command.withDescription("Print what a session log did and used: turns, steps, tools, tokens, cost, times (§18)."))
