/**
 * The session that `transcript` and `check` read: a FILE, or `--pg URL --session ID` (a session
 * of an agent cluster's PostgreSQL store, loaded on first use); and for `transcript
 * --follow-children` its sub-agents' sessions from the same store (§27).
 */
import { Args, Options } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import { Context, Effect, Layer, Option } from "effect"
import { pgWhere } from "../../internal/pgUrl.js"
import { isSessionId } from "../../internal/store/common.js"
import type { LogContents } from "../../SessionLog.js"
import * as SessionStore from "../../SessionStore.js"
import * as Transcript from "../../Transcript.js"
import type * as TranscriptText from "../../TranscriptText.js"
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
  },
  follow?: Follow | undefined
) =>
  Effect.gen(function*() {
    const fromPg = Option.isSome(options.pg) || Option.isSome(options.session) || Option.isSome(options.tablePrefix)
    if (Option.isSome(options.file)) {
      if (fromPg) return yield* exit(2, `${command}: give either FILE or --pg URL --session ID, not both`)
      const contents = yield* readLog(options.file.value)
      if (follow === undefined) return { label: options.file.value, contents, children: NO_CHILDREN }
      // The children are the parent's store's sessions: DIR/<id>.jsonl beside its log.
      const path = yield* Path.Path
      const fs = yield* FileSystem.FileSystem
      const directory = path.dirname(path.resolve(options.file.value))
      const children = yield* readChildren(contents, follow, (id) => {
        const file = path.join(directory, `${id}.jsonl`)
        return Effect.flatMap(Effect.orElseSucceed(fs.exists(file), () => false), (exists) =>
          exists
            ? SessionStore.readFile(file).pipe(
              Effect.map((child) => ({ contents: child, label: file })),
              Effect.catchAll((e) => Effect.succeed(`cannot read ${file}: ${readError(e.message, file)}`))
            )
            : Effect.succeed(`not in the store (no ${id}.jsonl in ${directory})`))
      })
      return { label: options.file.value, contents, children }
    }
    if (Option.isNone(options.pg) || Option.isNone(options.session)) {
      return yield* exit(2, `${command}: give a FILE, or --pg URL and --session ID`)
    }
    const url = options.pg.value
    const id = options.session.value
    const Sql = yield* Effect.promise(() => import("../../SqlSessionStore.js"))
    const { children, contents } = yield* Effect.scoped(
      Effect.flatMap(
        Layer.build(Sql.layerPg({ url, tablePrefix: Option.getOrUndefined(options.tablePrefix), maxConnections: 1 })),
        (context) =>
          Effect.gen(function*() {
            const store = Context.get(context, SessionStore.SessionStore)
            const contents = yield* store.read(id)
            if (follow === undefined) return { contents, children: NO_CHILDREN }
            const children = yield* readChildren(contents, follow, (child) =>
              store.read(child).pipe(
                Effect.map((read) => ({ contents: read, label: `session ${child}` })),
                Effect.catchAll((e) =>
                  Effect.succeed(
                    e._tag === "SessionNotFound" ? `not in the store (${pgWhere(url)})` : `cannot read: ${e.message}`
                  )
                )
              ))
            return { contents, children }
          })
      )
    ).pipe(
      Effect.catchTags({
        SessionStoreError: (e) => exit(2, `${command}: ${e.message}`),
        SessionLogError: (e) => exit(2, `${command}: ${pgWhere(url)}: ${e.message}`),
        SessionNotFound: () => exit(2, `${command}: no session ${id} in ${pgWhere(url)}`)
      })
    )
    return { label: `session ${id}`, contents, children }
  })

/** How `readSession` follows sub-agents (`transcript --follow-children`): down to `maxDepth` levels. */
export interface Follow {
  readonly maxDepth: number
}

/**
 * A child session as read: its log and its label for warnings (its file, or `session ID`), or
 * why it cannot be shown.
 */
export type ChildRead = { readonly contents: LogContents; readonly label: string } | string

/** The children read for `--follow-children`, by session id, in the order they were read. */
export type Children = ReadonlyMap<string, ChildRead>

const NO_CHILDREN: Children = new Map()

/** A reader's message without the path it repeats (`cannot read /x.jsonl: no such file` → `no such file`). */
const readError = (message: string, file: string): string => {
  const opened = `cannot read ${file}: `
  return message.startsWith(opened) ? message.slice(opened.length) : message
}

/**
 * Reads the children the parent's transcript names (`Transcript.childSessions`), and theirs,
 * down to `follow.maxDepth` levels, each once. An id that is no session id of a store (a
 * hand-made log's `../x`) is not read.
 */
const readChildren = <E, R>(
  parent: LogContents,
  follow: Follow,
  read: (id: string) => Effect.Effect<ChildRead, E, R>
): Effect.Effect<Children, E, R> =>
  Effect.gen(function*() {
    const children = new Map<string, ChildRead>()
    let level = Transcript.childSessions(Transcript.fromEvents(parent.events))
    for (let depth = 1; depth <= follow.maxDepth && level.length > 0; depth++) {
      const next: Array<string> = []
      for (const id of level) {
        if (children.has(id) || id === parent.header.id) continue
        const child = isSessionId(id) ? yield* read(id) : "not a session id of a store, not read"
        children.set(id, child)
        if (typeof child !== "string") {
          for (const grandchild of Transcript.childSessions(Transcript.fromEvents(child.contents.events))) {
            next.push(grandchild)
          }
        }
      }
      level = next
    }
    return children
  })

/**
 * The child transcripts of `children` for `TranscriptText.render`: a child's entries (its
 * header's lineage first), or why it cannot be shown.
 */
export const childTranscripts = (children: Children) => {
  const entries = new Map<string, TranscriptText.ChildTranscript>()
  for (const [id, child] of children) {
    entries.set(
      id,
      typeof child === "string"
        ? { _tag: "Unavailable", reason: child }
        : { _tag: "Entries", entries: Transcript.fromEvents(child.contents.events, { header: child.contents.header }) }
    )
  }
  return (id: string): TranscriptText.ChildTranscript | undefined => entries.get(id)
}

/** The FILE argument of `transcript` and `check` (optional: `--pg URL --session ID` instead). */
export const optionalFile = Args.text({ name: "FILE" }).pipe(
  Args.withDescription("a session log (ours or DSH v0); or --pg URL --session ID"),
  Args.optional
)
