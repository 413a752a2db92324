/**
 * `agent-loop inspect [--store DIR | --sqlite FILE | --pg URL] [--port P] [--host H] [--prices
 * FILE]`: a local web page that shows a store's sessions, each as a timeline with its inbox
 * lane, the fate of every message and each step's model request (§29). The server and the page
 * (`src/cli/inspect/`, `ui/inspect/`) are loaded by this command only.
 */
import { Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import * as NodeFs from "node:fs"
import { fileErrorText } from "../../internal/fsErrors.js"
import { escapeLine } from "../../internal/terminalText.js"
import { pgOption, signalIsNormalStop } from "../clusterCommands.js"
import { exit } from "../exit.js"
import { VERSION } from "../version.js"
import { readPrices } from "./shared.js"

/** The store `inspect` opens when none is named: the JSONL store of `run`, `chat`, `demo` and `acp`. */
const DEFAULT_STORE = ".agent-loop/sessions"

/** The port `inspect` listens on unless `--port` says otherwise (0: any free port). */
export const DEFAULT_PORT = 4680

/**
 * `inspect`: serves the page until Ctrl-C. Prints one line on stdout when it listens:
 * `agent-loop inspect: http://HOST:PORT/ (KIND WHERE, read-only)`; SIGINT (Ctrl-C) or SIGTERM
 * stops it, exit 0, open pages and their live streams included. Bound to 127.0.0.1 unless
 * `--host` names another address, which prints a warning on stderr (the page shows model output
 * and tool results to anyone who can reach it). Exit 2: bad arguments, a store that cannot be
 * opened, a port in use, a `--prices` file that cannot be read.
 */
export const inspect = Command.make(
  "inspect",
  {
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
    ),
    port: Options.integer("port").pipe(
      Options.withDefault(DEFAULT_PORT),
      Options.withDescription(`the port to listen on (default ${DEFAULT_PORT}; 0: any free port)`)
    ),
    host: Options.text("host").pipe(
      Options.withDefault("127.0.0.1"),
      Options.withDescription("the address to listen on (default 127.0.0.1; another one is reachable by others)")
    ),
    prices: Options.text("prices").pipe(
      Options.optional,
      Options.withDescription("a price table (JSON: {model: {input, cachedInput?, cacheWrite?, output}}, USD per 1e6 tokens)")
    )
  },
  (options) =>
    Effect.gen(function*() {
      const given = [options.store, options.sqlite, options.pg].filter(Option.isSome).length
      if (given > 1) return yield* exit(2, "inspect: give one of --store DIR, --sqlite FILE, --pg URL")
      if (
        Option.isSome(options.tablePrefix) && given === 0 || Option.isSome(options.tablePrefix) && Option.isSome(options.store)
      ) {
        return yield* exit(2, "inspect: --table-prefix goes with --sqlite or --pg")
      }
      if (options.port < 0 || options.port > 65535) return yield* exit(2, `inspect: --port ${options.port}: not a port (0–65535)`)
      const prices = Option.isSome(options.prices) ? yield* readPrices(options.prices.value) : undefined
      const Sources = yield* Effect.promise(() => import("../inspect/sources.js"))
      const Server = yield* Effect.promise(() => import("../inspect/server.js"))
      const assets = Server.assetsDirectory()
      if (assets === undefined) {
        return yield* exit(2, "inspect: the page's files are missing beside the CLI (dist/cli/inspect/): run npm run build")
      }
      const tablePrefix = Option.getOrUndefined(options.tablePrefix)
      yield* Effect.scoped(Effect.gen(function*() {
        let source
        if (Option.isSome(options.pg)) {
          source = yield* Sources.sqlStore("pg", options.pg.value, tablePrefix)
        } else if (Option.isSome(options.sqlite)) {
          const file = options.sqlite.value
          // Never created here: a database file that is not there is a mistake, not an empty store.
          let info: NodeFs.Stats
          try {
            info = NodeFs.statSync(file)
          } catch (e) {
            return yield* exit(2, escapeLine(`--sqlite ${file}: cannot read: ${fileErrorText(e, "read")}`))
          }
          if (!info.isFile()) return yield* exit(2, escapeLine(`--sqlite ${file}: not a regular file`))
          source = yield* Sources.sqlStore("sqlite", file, tablePrefix)
        } else {
          source = yield* Sources.jsonlDirectory(Option.getOrElse(options.store, () => DEFAULT_STORE))
        }
        const { port } = yield* Server.serve({
          source,
          host: options.host,
          port: options.port,
          prices,
          version: VERSION,
          assets
        }).pipe(
          Effect.catchAll((e) =>
            exit(
              2,
              escapeLine(
                `inspect: cannot listen on ${options.host}:${options.port}: ${
                  "cause" in e ? String((e.cause as Error)?.message ?? e.cause) : String(e)
                }`
              )
            )
          )
        )
        const host = options.host.includes(":") ? `[${options.host}]` : options.host
        if (!Server.isLoopback(options.host)) {
          yield* Console.error(
            escapeLine(
              `warning: inspect listens on ${options.host}, not loopback: anyone who can reach ${host}:${port} can read every session of this store`
            )
          )
        }
        yield* Console.log(escapeLine(`agent-loop inspect: http://${host}:${port}/ (${source.kind} ${source.where}, read-only)`))
        // Ctrl-C (SIGINT) or SIGTERM is the normal stop: the server closes, exit 0.
        signalIsNormalStop()
        return yield* Effect.never
      })).pipe(Effect.catchIf((e) => e instanceof Sources.SourceError, (e) => exit(2, escapeLine(`inspect: ${e.message}`))))
    })
).pipe(
  Command.withDescription(
    "Serve a web page that shows the sessions of a store: timelines, the inbox, every message's fate (§29)."
  )
)
