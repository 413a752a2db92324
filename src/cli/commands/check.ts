/** `agent-loop check FILE | --pg URL --session ID`: checks a session log against the invariants (§12); exit 1 on a violation. */
import { Command } from "@effect/cli"
import { Console, Effect } from "effect"
import * as Approval from "../../Approval.js"
import { pendingSubagents } from "../../internal/repair.js"
import { escapeLine } from "../../internal/terminalText.js"
import * as Invariant from "../../Invariant.js"
import * as SessionEvent from "../../SessionEvent.js"
import { exit } from "../exit.js"
import { optionalFile, pgReadOptions, readSession } from "./sessionSource.js"

/** The turn a log ends inside (a `turn/start` with no `turn/end` after it), if any. */
const openTurnOf = (events: ReadonlyArray<SessionEvent.SessionEvent>): number | undefined => {
  let open: number | undefined
  for (const event of events) {
    if (SessionEvent.is(event, "turn/start")) open = event.data.turn
    else if (SessionEvent.is(event, "turn/end")) open = undefined
  }
  return open
}

/**
 * What resuming does with the sub-agent calls an open turn cut short (§27 rule 16), or nothing
 * when it has none.
 */
const subagentNote = (events: ReadonlyArray<SessionEvent.SessionEvent>): string => {
  const pending = pendingSubagents(events)
  if (pending.length === 0) return ""
  const calls = pending.map((s) => `${s.callId} (session ${s.id})`).join(", ")
  return `, closing its sub-agent ${pending.length === 1 ? "call" : "calls"} ${calls} from the child's log (§27)`
}

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
        const open = openTurnOf(contents.events)
        const waiting = open === undefined ? 0 : Approval.openQuestions(contents.events).length
        const note = open === undefined
          ? ""
          : waiting > 0
          ? `; turn ${open} is open, waiting for approval (${waiting} open ${
            waiting === 1 ? "question" : "questions"
          }): resuming the session asks again and goes on (§26)`
          : `; turn ${open} is open: the agent stopped in it (a crash) or is still running it; resuming the session closes it (§10)`
        const subagents = open === undefined ? "" : subagentNote(contents.events)
        yield* Console.log(escapeLine(`${label}: ok (${contents.events.length} events${note}${subagents})`))
        return
      }
      for (const v of violations) yield* Console.log(escapeLine(`${label}: seq ${v.seq}: rule ${v.rule}: ${v.message}`))
      return yield* exit(1)
    })
).pipe(
  Command.withDescription("Check a session log (a FILE or a session in PostgreSQL) against the invariants of §12.")
)
