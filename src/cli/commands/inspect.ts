/**
 * `agent-loop inspect [--store DIR | --sqlite FILE | --pg URL] [--port P] [--host H] [--prices
 * FILE]`: a local web page that shows a store's sessions, each as a timeline with its inbox
 * lane, the fate of every message and each step's model request (§29). The server and the page
 * (`src/cli/inspect/`, `ui/inspect/`) are loaded by this command only.
 */
import { Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { escapeLine } from "../../internal/terminalText.js"
import { signalIsNormalStop } from "../clusterCommands.js"
import { exit } from "../exit.js"
import { VERSION } from "../version.js"
import { readPrices } from "./shared.js"
import { storeChoice, storeChoiceOptions } from "./storeChoice.js"

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
    ...storeChoiceOptions,
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
      const store = yield* storeChoice("inspect", options)
      if (!/^[A-Za-z0-9.:-]+$/.test(options.host)) {
        return yield* exit(2, escapeLine(`inspect: --host ${JSON.stringify(options.host)}: not a host name or address`))
      }
      if (options.port < 0 || options.port > 65535) return yield* exit(2, `inspect: --port ${options.port}: not a port (0–65535)`)
      const prices = Option.isSome(options.prices) ? yield* readPrices(options.prices.value) : undefined
      const Sources = yield* Effect.promise(() => import("../inspect/sources.js"))
      const Server = yield* Effect.promise(() => import("../inspect/server.js"))
      const assets = Server.assetsDirectory()
      if (assets === undefined) {
        return yield* exit(2, "inspect: the page's files are missing beside the CLI (dist/cli/inspect/): run npm run build")
      }
      yield* Effect.scoped(Effect.gen(function*() {
        const source = store.kind === "pg"
          ? yield* Sources.sqlStore("pg", store.url, store.tablePrefix)
          : store.kind === "sqlite"
          ? yield* Sources.sqlStore("sqlite", store.file, store.tablePrefix)
          : yield* Sources.jsonlDirectory(store.directory)
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
