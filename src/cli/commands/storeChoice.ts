/**
 * The store of the commands that read a whole store, `pending` and `inspect`: `--store DIR` (the
 * default, `.agent-loop/sessions`), `--sqlite FILE` or `--pg URL`, with `--table-prefix` for the
 * SQL stores; at most one of the three (else exit 2).
 */
import { Options } from "@effect/cli"
import { Effect, Option } from "effect"
import * as NodeFs from "node:fs"
import { fileErrorText } from "../../internal/fsErrors.js"
import { escapeLine } from "../../internal/terminalText.js"
import { pgOption } from "../clusterCommands.js"
import { exit } from "../exit.js"

/** The store these commands read when none is named: the JSONL store of `run`, `chat`, `demo` and `acp`. */
export const DEFAULT_STORE = ".agent-loop/sessions"

/** `--store`, `--sqlite`, `--pg` and `--table-prefix`. */
export const storeChoiceOptions = {
  store: Options.text("store").pipe(
    Options.withPseudoName("directory"),
    Options.optional,
    Options.withDescription(`a JSONL store: one <id>.jsonl per session, ours or DSH's (default ${DEFAULT_STORE})`)
  ),
  sqlite: Options.text("sqlite").pipe(Options.optional, Options.withDescription("a SQLite store's database file")),
  pg: pgOption("a PostgreSQL store, e.g. an agent cluster's database (postgres://…)"),
  tablePrefix: Options.text("table-prefix").pipe(
    Options.optional,
    Options.withDescription("the SQL store's table prefix (with --sqlite or --pg; default agent_loop_)")
  )
}

/** The store a command was given. */
export type StoreChoice =
  | { readonly kind: "jsonl"; readonly directory: string }
  | { readonly kind: "sqlite"; readonly file: string; readonly tablePrefix: string | undefined }
  | { readonly kind: "pg"; readonly url: string; readonly tablePrefix: string | undefined }

/**
 * The store of `options`: exit 2 for two stores, for `--table-prefix` without a SQL store, and
 * for a `--sqlite` file that is not there or not a regular file (never created here: a database
 * file that is missing is a mistake, not an empty store).
 */
export const storeChoice = (
  command: string,
  options: {
    readonly store: Option.Option<string>
    readonly sqlite: Option.Option<string>
    readonly pg: Option.Option<string>
    readonly tablePrefix: Option.Option<string>
  }
) =>
  Effect.gen(function*() {
    const given = [options.store, options.sqlite, options.pg].filter(Option.isSome).length
    if (given > 1) return yield* exit(2, `${command}: give one of --store DIR, --sqlite FILE, --pg URL`)
    const tablePrefix = Option.getOrUndefined(options.tablePrefix)
    if (tablePrefix !== undefined && Option.isNone(options.sqlite) && Option.isNone(options.pg)) {
      return yield* exit(2, `${command}: --table-prefix goes with --sqlite or --pg`)
    }
    if (Option.isSome(options.pg)) return { kind: "pg", url: options.pg.value, tablePrefix } satisfies StoreChoice
    if (Option.isSome(options.sqlite)) {
      const file = options.sqlite.value
      let info: NodeFs.Stats
      try {
        info = NodeFs.statSync(file)
      } catch (e) {
        return yield* exit(2, escapeLine(`--sqlite ${file}: cannot read: ${fileErrorText(e, "read")}`))
      }
      if (!info.isFile()) return yield* exit(2, escapeLine(`--sqlite ${file}: not a regular file`))
      return { kind: "sqlite", file, tablePrefix } satisfies StoreChoice
    }
    return { kind: "jsonl", directory: Option.getOrElse(options.store, () => DEFAULT_STORE) } satisfies StoreChoice
  })
