/**
 * `agent-loop transcript FILE | --pg URL --session ID [--json] [--follow-children]`: prints a
 * session's transcript (§14), with its sub-agents' transcripts nested under their calls (§27).
 */
import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { escapeLine } from "../../internal/terminalText.js"
import * as Transcript from "../../Transcript.js"
import * as TranscriptText from "../../TranscriptText.js"
import { exit } from "../exit.js"
import { childTranscripts, optionalFile, pgReadOptions, readSession } from "./sessionSource.js"

/**
 * `transcript`: a FILE or a session in PostgreSQL as text, or with `--json` one JSON object a line
 * (§14). With `--follow-children` the text nests each sub-agent's transcript under its start line
 * (`⇒ subagent ID started`), indented, recursively down to `TranscriptText.FOLLOW_DEPTH` levels,
 * each child read from the parent's store (`DIR/<id>.jsonl` beside FILE, or the same PostgreSQL
 * store); a child that is not there, or cannot be read, is one line saying so. A DSH parent log
 * names no child (DSH does not log `subagent/start`): nothing is nested. Not with `--json` (exit 2).
 */
export const transcript = Command.make(
  "transcript",
  {
    file: optionalFile,
    json: Options.boolean("json").pipe(Options.withDescription("one JSON object a line")),
    followChildren: Options.boolean("follow-children").pipe(
      Options.withDescription("nest each sub-agent's transcript under its call, read from the same store (§27)")
    ),
    ...pgReadOptions
  },
  (options) =>
    Effect.gen(function*() {
      if (options.json && options.followChildren) {
        return yield* exit(
          2,
          "transcript: --follow-children goes with the text transcript, not --json"
        )
      }
      const follow = options.followChildren ? { maxDepth: TranscriptText.FOLLOW_DEPTH } : undefined
      const { children, contents, label } = yield* readSession("transcript", options, follow)
      for (const w of contents.warnings) yield* Console.error(escapeLine(`warning: ${label}: ${w}`))
      for (const child of children.values()) {
        if (typeof child !== "string") {
          for (const w of child.contents.warnings) yield* Console.error(escapeLine(`warning: ${child.label}: ${w}`))
        }
      }
      const entries = Transcript.fromEvents(contents.events, { header: contents.header })
      if (options.json) {
        const lines = Transcript.toJsonLines(entries)
        if (lines.length > 0) yield* Console.log(lines.trimEnd())
      } else {
        const text = TranscriptText.render(
          entries,
          follow === undefined ? undefined : { child: childTranscripts(children), sessionId: contents.header.id }
        )
        if (text.length > 0) yield* Console.log(text.trimEnd())
      }
    })
).pipe(Command.withDescription("Print the transcript of a session log, a FILE or a session in PostgreSQL (§14)."))
