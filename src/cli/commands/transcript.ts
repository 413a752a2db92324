/** `agent-loop transcript FILE | --pg URL --session ID [--json]`: prints a session's transcript (§14). */
import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { escapeLine } from "../../internal/terminalText.js"
import * as Transcript from "../../Transcript.js"
import * as TranscriptText from "../../TranscriptText.js"
import { optionalFile, pgReadOptions, readSession } from "./sessionSource.js"

/** `transcript`: a FILE or a session in PostgreSQL as text, or with `--json` one JSON object a line (§14). */
export const transcript = Command.make(
  "transcript",
  {
    file: optionalFile,
    json: Options.boolean("json").pipe(Options.withDescription("one JSON object a line")),
    ...pgReadOptions
  },
  (options) =>
    Effect.gen(function*() {
      const { contents, label } = yield* readSession("transcript", options)
      for (const w of contents.warnings) yield* Console.error(escapeLine(`warning: ${label}: ${w}`))
      const entries = Transcript.fromEvents(contents.events, { header: contents.header })
      if (options.json) {
        const lines = Transcript.toJsonLines(entries)
        if (lines.length > 0) yield* Console.log(lines.trimEnd())
      } else {
        const text = TranscriptText.render(entries)
        if (text.length > 0) yield* Console.log(text.trimEnd())
      }
    })
).pipe(Command.withDescription("Print the transcript of a session log, a FILE or a session in PostgreSQL (§14)."))
