/**
 * `agent-loop pending [--store DIR | --sqlite FILE | --pg URL] [--session ID] [--json]`: the
 * sessions of a store that wait for a person, with their open questions (§26 rules 5, 10).
 */
import { Command, Options } from "@effect/cli"
import { Console, Context, Effect, Layer, Option } from "effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import type * as Approval from "../../Approval.js"
import { codeOf, fileErrorText } from "../../internal/fsErrors.js"
import { pgWhere } from "../../internal/pgUrl.js"
import { isSessionId } from "../../internal/store/common.js"
import { escapeJson, escapeLine } from "../../internal/terminalText.js"
import type { SessionEvent } from "../../SessionEvent.js"
import type { SessionStoreError } from "../../SessionLog.js"
import * as SessionStore from "../../SessionStore.js"
import { exit } from "../exit.js"
import { openPending, questionLine } from "./shared.js"
import { storeChoice, storeChoiceOptions } from "./storeChoice.js"

/** A session's open questions, or why its log could not be read. */
type Found =
  | { readonly id: string; readonly questions: ReadonlyArray<Approval.Pending> }
  | { readonly id: string; readonly unreadable: string }

/** The open questions of one log's events. */
const found = (id: string, events: ReadonlyArray<SessionEvent>): Found => ({ id, questions: openPending(events) })

/**
 * The sessions of a JSONL directory (`<id>.jsonl` files), each read as a file (`SessionStore.readFile`:
 * no writer lock, a torn tail ignored; DSH v0 logs too, their file name being their id here).
 */
const fromDirectory = (store: string, session: string | undefined) =>
  Effect.gen(function*() {
    const directory = NodePath.resolve(store)
    let names: ReadonlyArray<string>
    try {
      if (!NodeFs.statSync(directory).isDirectory()) return yield* exit(2, escapeLine(`--store ${store}: not a directory`))
      names = NodeFs.readdirSync(directory)
    } catch (e) {
      const why = codeOf(e) === "ENOENT" ? "no such directory" : fileErrorText(e, "read")
      return yield* exit(2, escapeLine(`--store ${store}: cannot read: ${why}`))
    }
    const ids = names.filter((n) => n.endsWith(".jsonl") && n.length > 6).map((n) => n.slice(0, -6)).sort()
    const wanted = session === undefined ? ids : ids.filter((id) => id === session)
    if (session !== undefined && wanted.length === 0) {
      return yield* exit(2, escapeLine(`pending: no session ${session} in ${store}`))
    }
    return yield* Effect.forEach(wanted, (id) =>
      SessionStore.readFile(NodePath.join(directory, `${id}.jsonl`)).pipe(
        Effect.map((contents) => found(id, contents.events)),
        Effect.catchAll((e) => Effect.succeed<Found>({ id, unreadable: e.message }))
      ))
  })

/**
 * The sessions of a SQL store (`layer`: SQLite or PostgreSQL), read with `read` only: no writer
 * is taken, so that a runner or an agent that holds a session keeps it.
 */
const fromSql = (
  layer: Layer.Layer<SessionStore.SessionStore, SessionStoreError>,
  where: string,
  session: string | undefined
) =>
  Effect.scoped(Effect.gen(function*() {
    const store = Context.get(yield* Layer.build(layer), SessionStore.SessionStore)
    const ids = session === undefined ? yield* store.list : [session]
    return yield* Effect.forEach(ids, (id) =>
      store.read(id).pipe(
        Effect.map((contents) => found(id, contents.events)),
        Effect.catchTags({
          SessionNotFound: () => exit(2, escapeLine(`pending: no session ${id} in ${where}`)),
          SessionLogError: (e) => Effect.succeed<Found>({ id, unreadable: e.message }),
          SessionStoreError: (e) => Effect.succeed<Found>({ id, unreadable: e.message })
        })
      ))
  })).pipe(Effect.catchTag("SessionStoreError", (e) => exit(2, escapeLine(`pending: ${e.message}`))))

/**
 * `pending`: the sessions that wait for approval, one line per open question (`session ID:
 * question QID: TOOL ARGS (call CALL, turn T.S, asked ISO)`, the arguments cut to 120
 * characters), or with `--json` one object per question (`{sessionId, id, toolName, callId,
 * arguments, turn, step, askedAt}`, `askedAt` in ms since the epoch). None: `no session waits for
 * approval`, exit 0. Read-only: it works beside a runner or an agent that holds a session. A log
 * that cannot be read is named on stderr and the others are listed (exit 1); bad arguments, a
 * store that cannot be used, a `--session` that is not in it: exit 2.
 */
export const pending = Command.make(
  "pending",
  {
    ...storeChoiceOptions,
    session: Options.text("session").pipe(Options.optional, Options.withDescription("only this session")),
    json: Options.boolean("json").pipe(Options.withDescription("one JSON object per open question"))
  },
  (options) =>
    Effect.gen(function*() {
      const store = yield* storeChoice("pending", options)
      const session = Option.getOrUndefined(options.session)
      if (session !== undefined && !isSessionId(session)) {
        return yield* exit(2, `pending: invalid session id ${JSON.stringify(session)} ([A-Za-z0-9_-][A-Za-z0-9._-]*)`)
      }
      const Sql = () => Effect.promise(() => import("../../SqlSessionStore.js"))
      let sessions: ReadonlyArray<Found>
      if (store.kind === "pg") {
        const { layerPg } = yield* Sql()
        sessions = yield* fromSql(
          layerPg({ url: store.url, tablePrefix: store.tablePrefix, maxConnections: 1 }),
          pgWhere(store.url),
          session
        )
      } else if (store.kind === "sqlite") {
        const { layerSqlite } = yield* Sql()
        sessions = yield* fromSql(layerSqlite({ filename: store.file, tablePrefix: store.tablePrefix }), store.file, session)
      } else {
        sessions = yield* fromDirectory(store.directory, session)
      }
      let open = 0
      for (const s of sessions) {
        if ("unreadable" in s) {
          yield* Console.error(escapeLine(`pending: session ${s.id}: cannot read its log: ${s.unreadable}`))
          continue
        }
        for (const q of s.questions) {
          open++
          yield* Console.log(
            options.json
              ? escapeJson(JSON.stringify({ sessionId: s.id, ...q }))
              : `session ${escapeLine(s.id)}: ${questionLine(q)}`
          )
        }
      }
      if (open === 0 && !options.json) {
        yield* Console.log(
          session === undefined ? "no session waits for approval" : `session ${session} does not wait for approval`
        )
      }
      if (sessions.some((s) => "unreadable" in s)) return yield* exit(1)
    })
).pipe(
  Command.withDescription("List the sessions of a store that wait for approval, with their open questions (§26).")
)
