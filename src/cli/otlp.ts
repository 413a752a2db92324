/**
 * Trace export of the commands that run the loop (`run`, `chat`, `resume`, `simulate`,
 * `runner`; §19): `--otlp-endpoint URL`, else the standard environment of OpenTelemetry,
 * sends the spans of the run (`invoke_agent`, `chat`, `execute_tool`, … from Effect's `Tracer`)
 * over OTLP/HTTP as JSON.
 *
 * Decisions:
 * - The endpoint, first found wins: `--otlp-endpoint URL` (used as is: the full URL, e.g.
 *   `http://localhost:4318/v1/traces`); `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as is);
 *   `OTEL_EXPORTER_OTLP_ENDPOINT`, a base URL to whose path `v1/traces` is appended (the OTLP
 *   exporter specification: `http://collector:4318` and `http://collector:4318/` →
 *   `http://collector:4318/v1/traces`, `http://c:4318/otlp?tenant=a` →
 *   `http://c:4318/otlp/v1/traces?tenant=a`: the query and fragment stay where they are). An
 *   empty variable, or one of blanks only, is unset (the timeout ones too); surrounding blanks
 *   are trimmed. `OTEL_SDK_DISABLED=true` makes the CLI ignore both endpoint variables (the flag
 *   still counts). None of them: no tracer is installed and nothing of OpenTelemetry is loaded.
 * - A value that is not an http(s) URL: one line naming the flag or variable, exit 2, before the
 *   command does anything.
 * - The OpenTelemetry packages are optional peers (`OTLP_PACKAGES`), loaded on first use; a
 *   missing one: exit 2 naming the packages and versions to install (`optional.ts`).
 * - The tracer layer wraps the whole command: its release, when the command ends (success, an
 *   error exit, Ctrl-C, `runner`'s SIGTERM), flushes the queued spans and shuts the exporter
 *   down, so the spans are sent before the process exits.
 * - Each export gives up after 3 s (the exporter's retries included), not the exporter's default
 *   10 s: a collector that is down delays the command's exit by at most that much. It is a
 *   deadline (`otlpExport.ts`): a collector that answers slowly (200, then a byte a second) is
 *   given up on after it all the same, and the flush at the end is bounded by it as a whole.
 *   `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds, a
 *   positive integer; else exit 2) changes it.
 * - An export that fails (the collector answers 500, refuses the connection, times out) never
 *   changes the command's exit code: the spans are lost and one line on stderr says so,
 *   `agent-loop: could not export N spans to URL: REASON`, per failed export (for `chat`, once
 *   its terminal UI has closed). A refused connection and the retryable answers (429, 502, 503,
 *   504) are retried by the exporter within the timeout above.
 * - The resource: `service.name` `agent-loop` (`OTEL_SERVICE_NAME` overrides it),
 *   `service.version`, and `OTEL_RESOURCE_ATTRIBUTES`. The exporter reads its other settings
 *   (`OTEL_EXPORTER_OTLP_HEADERS`, …) from the environment itself. `OTEL_EXPORTER_OTLP_PROTOCOL`
 *   is not read: the CLI sends `http/json` only.
 * - `simulate` runs on a virtual clock: its spans carry the virtual times of its log (starting at
 *   0, 1970-01-01), as the log's events do.
 *
 * @since 0.1.0
 */
import { Options } from "@effect/cli"
import { Effect, Option } from "effect"
import { escapeLine } from "../internal/terminalText.js"
import { type CliExit, exit } from "./exit.js"
import { loadWith, type OptionalPackage } from "./optional.js"

/**
 * The packages the export loads from the user's node_modules (`otlpExport.ts`; the bundle
 * inlines `@effect/opentelemetry`, which needs the first three of them).
 *
 * @since 0.1.0
 * @category models
 */
export const OTLP_PACKAGES: ReadonlyArray<OptionalPackage> = [
  "@opentelemetry/api",
  "@opentelemetry/resources",
  "@opentelemetry/sdk-trace-node",
  "@opentelemetry/sdk-trace-base",
  "@opentelemetry/exporter-trace-otlp-http"
]

/**
 * `--otlp-endpoint URL` of the commands that run the loop.
 *
 * @since 0.1.0
 */
export const otlpOptions = {
  otlpEndpoint: Options.text("otlp-endpoint").pipe(
    Options.optional,
    Options.withDescription(
      "export the traces of the run over OTLP/HTTP (JSON) to this URL, e.g. http://localhost:4318/v1/traces (default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else $OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended; none: no traces)"
    )
  )
}

/** Where an endpoint came from: the flag or a variable's name. */
type Origin = "--otlp-endpoint" | "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" | "OTEL_EXPORTER_OTLP_ENDPOINT"

/** `value` (trimmed) checked to be an http(s) URL, or a bad-arguments exit naming `origin`. */
const checkEndpoint = (origin: Origin, value: string): Effect.Effect<URL, CliExit> => {
  const text = value.trim()
  if (text === "") return exit(2, `${origin}: the URL is empty`)
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return exit(2, `${origin}: not a URL: ${value}`)
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return exit(2, `${origin}: only http and https URLs are supported (OTLP/HTTP), not ${url.protocol}`)
  }
  return Effect.succeed(url)
}

/** A variable's value, undefined when it is unset, empty or blanks only. */
const variable = (env: NodeJS.ProcessEnv, name: string): string | undefined => {
  const value = env[name]
  return value === undefined || value.trim() === "" ? undefined : value
}

/** The traces URL of a base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`): `v1/traces` appended to its path, the query kept. */
const tracesUrl = (base: URL): string => {
  const url = new URL(base.href)
  url.pathname = `${url.pathname}${url.pathname.endsWith("/") ? "" : "/"}v1/traces`
  return url.href
}

/**
 * The export timeout in milliseconds (see the module's comment): 3,000 when no variable is
 * set, or a bad-arguments exit naming the variable.
 *
 * @since 0.1.0
 */
export const exportTimeout = (env: NodeJS.ProcessEnv): Effect.Effect<number, CliExit> => {
  for (const name of ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"]) {
    const value = variable(env, name)
    if (value === undefined) continue
    const ms = /^\d+$/.test(value.trim()) ? Number(value.trim()) : Number.NaN
    return Number.isSafeInteger(ms) && ms > 0
      ? Effect.succeed(ms)
      : exit(2, `${name}: not a positive integer (milliseconds): ${JSON.stringify(value)}`)
  }
  return Effect.succeed(3000)
}

/**
 * The traces endpoint of the flag and the environment (see the module's comment), undefined
 * when none is set, or a bad-arguments exit.
 *
 * @since 0.1.0
 */
export const otlpEndpoint = (
  flag: Option.Option<string>,
  env: NodeJS.ProcessEnv = process.env
): Effect.Effect<{ readonly url: string; readonly origin: Origin } | undefined, CliExit> => {
  // The flag and the traces variable are full URLs, sent to as given (trimmed).
  if (Option.isSome(flag)) {
    return Effect.as(checkEndpoint("--otlp-endpoint", flag.value), {
      url: flag.value.trim(),
      origin: "--otlp-endpoint" as const
    })
  }
  if (env["OTEL_SDK_DISABLED"]?.trim().toLowerCase() === "true") return Effect.succeed(undefined)
  const traces = variable(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
  if (traces !== undefined) {
    return Effect.as(checkEndpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces), {
      url: traces.trim(),
      origin: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" as const
    })
  }
  const base = variable(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
  if (base !== undefined) {
    return Effect.map(checkEndpoint("OTEL_EXPORTER_OTLP_ENDPOINT", base), (url) => ({
      url: tracesUrl(url),
      origin: "OTEL_EXPORTER_OTLP_ENDPOINT" as const
    }))
  }
  return Effect.succeed(undefined)
}

/**
 * Runs `effect`, the whole of `command`, with the OTLP tracer of `flag` and the environment when
 * an endpoint is set (else as it is: nothing loaded). `deferReports`: export failures are printed
 * once `effect` has ended (the chat's terminal UI owns the screen until then).
 *
 * @since 0.1.0
 * @category combinators
 */
export const withOtlp = (
  command: string,
  flag: Option.Option<string>,
  options: { readonly deferReports?: boolean } = {}
) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | CliExit, R> =>
  Effect.gen(function*() {
    const endpoint = yield* otlpEndpoint(flag)
    if (endpoint === undefined) return yield* effect
    const timeoutMillis = yield* exportTimeout(process.env)
    const who = endpoint.origin === "--otlp-endpoint" ? `${command} --otlp-endpoint` : `${command} (${endpoint.origin})`
    const Export = yield* loadWith(who, OTLP_PACKAGES, () => import("./otlpExport.js")).pipe(
      Effect.catchTag("MissingPackages", (e) => exit(2, e.message))
    )
    const deferred: Array<string> = []
    const print = (line: string) => process.stderr.write(escapeLine(line) + "\n")
    const onFailure = (spans: number, reason: string) => {
      const line = `agent-loop: could not export ${spans} span${spans === 1 ? "" : "s"} to ${endpoint.url}: ${reason}`
      if (options.deferReports === true) deferred.push(line)
      else print(line)
    }
    return yield* effect.pipe(
      Effect.provide(Export.layer({ url: endpoint.url, timeoutMillis, onFailure })),
      Effect.ensuring(Effect.sync(() => deferred.splice(0).forEach(print)))
    )
  })
