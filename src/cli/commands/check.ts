/** `agent-loop check FILE | --pg URL --session ID`: checks a session log against the invariants (§12); exit 1 on a violation. */
import { Command } from "@effect/cli"
import { Console, Effect } from "effect"
import { escapeLine } from "../../internal/terminalText.js"
import * as Invariant from "../../Invariant.js"
import { exit } from "../exit.js"
import { optionalFile, pgReadOptions, readSession } from "./sessionSource.js"

/** `check`: the invariants of §12 on a FILE or a session in PostgreSQL; exit 1 on a violation, one line each. */
export const check = Command.make(
  "check",
  { file: optionalFile, ...pgReadOptions },
  (options) =>
    Effect.gen(function*() {
      const { contents, label } = yield* readSession("check", options)
      for (const w of contents.warnings) yield* Console.error(escapeLine(`warning: ${label}: ${w}`))
      const violations = Invariant.check(contents.events, { header: contents.header })
      if (violations.length === 0) {
        yield* Console.log(escapeLine(`${label}: ok (${contents.events.length} events)`))
        return
      }
      for (const v of violations) yield* Console.log(escapeLine(`${label}: seq ${v.seq}: rule ${v.rule}: ${v.message}`))
      return yield* exit(1)
    })
).pipe(
  Command.withDescription("Check a session log (a FILE or a session in PostgreSQL) against the invariants of §12.")
)
