/**
 * The session that `transcript` and `check` read: a FILE, or `--pg URL --session ID` (a session
 * of an agent cluster's PostgreSQL store, loaded on first use).
 */
import { Args, Options } from "@effect/cli"
import { Context, Effect, Layer, Option } from "effect"
import { pgWhere } from "../../internal/pgUrl.js"
import * as SessionStore from "../../SessionStore.js"
import { pgOption } from "../clusterCommands.js"
import { exit } from "../exit.js"
import { readLog } from "./shared.js"

/** The options of `transcript` and `check` that name a session in PostgreSQL instead of a FILE. */
export const pgReadOptions = {
  pg: pgOption("read the session from this PostgreSQL database (postgres://…) instead of a FILE; with --session"),
  session: Options.text("session").pipe(Options.optional, Options.withDescription("the session id (with --pg)")),
  tablePrefix: Options.text("table-prefix").pipe(
    Options.optional,
    Options.withDescription("the session store's table prefix (with --pg; default agent_loop_)")
  )
}

/**
 * The session a `transcript` or `check` reads: a FILE, or `--pg URL --session ID` (exactly one
 * of them, else exit 2). From PostgreSQL it is read through `SqlSessionStore.layerPg` (loaded
 * here, on first use): `read` only, no writer taken. `label` names it in the output lines: the
 * FILE as given, or `session ID`.
 */
export const readSession = (
  command: string,
  options: {
    readonly file: Option.Option<string>
    readonly pg: Option.Option<string>
    readonly session: Option.Option<string>
    readonly tablePrefix: Option.Option<string>
  }
) =>
  Effect.gen(function*() {
    const fromPg = Option.isSome(options.pg) || Option.isSome(options.session) || Option.isSome(options.tablePrefix)
    if (Option.isSome(options.file)) {
      if (fromPg) return yield* exit(2, `${command}: give either FILE or --pg URL --session ID, not both`)
      return { label: options.file.value, contents: yield* readLog(options.file.value) }
    }
    if (Option.isNone(options.pg) || Option.isNone(options.session)) {
      return yield* exit(2, `${command}: give a FILE, or --pg URL and --session ID`)
    }
    const url = options.pg.value
    const id = options.session.value
    const Sql = yield* Effect.promise(() => import("../../SqlSessionStore.js"))
    const contents = yield* Effect.scoped(
      Effect.flatMap(
        Layer.build(Sql.layerPg({ url, tablePrefix: Option.getOrUndefined(options.tablePrefix), maxConnections: 1 })),
        (context) => Context.get(context, SessionStore.SessionStore).read(id)
      )
    ).pipe(
      Effect.catchTags({
        SessionStoreError: (e) => exit(2, `${command}: ${e.message}`),
        SessionLogError: (e) => exit(2, `${command}: ${pgWhere(url)}: ${e.message}`),
        SessionNotFound: () => exit(2, `${command}: no session ${id} in ${pgWhere(url)}`)
      })
    )
    return { label: `session ${id}`, contents }
  })

/** The FILE argument of `transcript` and `check` (optional: `--pg URL --session ID` instead). */
export const optionalFile = Args.text({ name: "FILE" }).pipe(
  Args.withDescription("a session log (ours or DSH v0); or --pg URL --session ID"),
  Args.optional
)
