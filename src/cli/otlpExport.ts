/**
 * The OTLP/HTTP trace export of the CLI (§19, `otlp.ts`): the tracer part of
 * `@effect/opentelemetry`'s `NodeSdk.layer`, a `BatchSpanProcessor` over an `OTLPTraceExporter`
 * (JSON over HTTP) on a `NodeTracerProvider` (as `NodeSdk.layerTracerProvider` builds it, with
 * `Tracer.layer`), with a resource of `service.name` `agent-loop` (or `OTEL_SERVICE_NAME`) and
 * `service.version` (`Resource.layerFromEnv`, as `NodeSdk.layer` builds it). Loaded by `otlp.ts`
 * only when an endpoint is set: a chunk of the CLI bundle.
 *
 * The export timeout is a deadline, not the exporter's own idle timeout on the socket (which a
 * collector answering 200 and then one byte a second never reaches): each export is given up
 * that long after it began, its connections destroyed, and the flush at the end of the command
 * is bounded by it as a whole, so the process exits at most about that long after its work.
 *
 * Not `NodeSdk.layer` itself: its module also imports the SDK's logs and metrics packages
 * (`@opentelemetry/sdk-logs`, `sdk-metrics`), which the CLI does not use: bundled they made this
 * chunk 391 KB instead of 9 KB, external they would be two more packages to install.
 *
 * Bundling (`scripts/build-cli.js`): `@effect/opentelemetry` is inlined, so that it runs on the
 * bundle's own copy of `effect` (a second copy, from the user's node_modules, would set a tracer
 * the bundled runtime never reads when the two versions differ). The `@opentelemetry/*` packages
 * it needs stay external: optional peers, resolved from the user's node_modules
 * (`OTLP_PACKAGES` in `otlp.ts`).
 *
 * @since 0.1.0
 */
import * as Resource from "@effect/opentelemetry/Resource"
import * as Tracer from "@effect/opentelemetry/Tracer"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { BatchSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base"
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node"
import { Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Https from "node:https"
import * as Path from "node:path"
import type { Duplex } from "node:stream"
import { VERSION } from "./version.js"

/** What an exporter passes to an export's callback. */
type ExportResult = Parameters<Parameters<SpanExporter["export"]>[1]>[0]

/** `ExportResultCode.FAILED` of `@opentelemetry/core` (not one of the packages the CLI loads). */
const FAILED = 1

/**
 * The TLS files of the environment, read as the exporter reads them for the agent it builds
 * when it is given none: `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` else
 * `OTEL_EXPORTER_OTLP_CERTIFICATE` (the root certificates), `…_CLIENT_CERTIFICATE`,
 * `…_CLIENT_KEY`; paths from the working directory; a file that cannot be read is not used.
 */
const tlsFiles = (env: NodeJS.ProcessEnv): Https.AgentOptions => {
  const file = (suffix: string): Buffer | undefined => {
    const path = [`OTEL_EXPORTER_OTLP_TRACES_${suffix}`, `OTEL_EXPORTER_OTLP_${suffix}`]
      .map((name) => env[name]?.trim())
      .find((value) => value !== undefined && value !== "")
    if (path === undefined) return undefined
    try {
      return Fs.readFileSync(Path.resolve(path))
    } catch {
      return undefined
    }
  }
  const ca = file("CERTIFICATE")
  const cert = file("CLIENT_CERTIFICATE")
  const key = file("CLIENT_KEY")
  return { ...(ca && { ca }), ...(cert && { cert }), ...(key && { key }) }
}

/**
 * The exporter's connections, one per request (no keep-alive), each destroyed `timeoutMillis`
 * after it was opened: the exporter's own timeout is one on the socket's idle time, which a
 * collector sending its answer a byte at a time never reaches. `close` destroys those still
 * open, and any opened after it (a retry that was already scheduled), so that none keeps the
 * process alive once the export is given up.
 */
const connections = (timeoutMillis: number) => {
  const open = new Set<Duplex>()
  let closed = false
  const track = (socket: Duplex) => {
    if (closed) {
      socket.destroy()
      return
    }
    open.add(socket)
    const timer = setTimeout(
      () => socket.destroy(new Error(`no complete answer within ${timeoutMillis} ms`)),
      timeoutMillis
    )
    socket.once("close", () => {
      clearTimeout(timer)
      open.delete(socket)
    })
  }
  const agentFactory = (protocol: string): Http.Agent => {
    const agent = protocol === "https:"
      ? new Https.Agent({ keepAlive: false, ...tlsFiles(process.env) })
      : new Http.Agent({ keepAlive: false })
    const create = agent.createConnection.bind(agent)
    agent.createConnection = (options, callback) => {
      const socket = create(options, callback)
      if (socket) track(socket)
      return socket
    }
    return agent
  }
  const close = () => {
    closed = true
    for (const socket of open) socket.destroy()
  }
  return { agentFactory, close }
}

/**
 * `exporter` with a deadline: each export ends `timeoutMillis` after it began (its retries
 * included), failed if the exporter has not answered by then, and each failed export is
 * reported to `onFailure` (with the number of spans lost and the reason) before its result is
 * passed on. The OTLP exporter itself only tells OpenTelemetry's diagnostic logger, which the
 * CLI does not install. `expire` ends every export still running that way at once.
 */
const deadlined = (
  exporter: SpanExporter,
  timeoutMillis: number,
  onFailure: (spans: number, reason: string) => void
) => {
  const running = new Set<() => void>()
  const wrapped: SpanExporter = {
    export: (spans, done) => {
      let ended = false
      const end = (result: ExportResult) => {
        if (ended) return
        ended = true
        clearTimeout(timer)
        running.delete(expire)
        if (result.code !== 0) onFailure(spans.length, result.error?.message ?? "unknown error")
        done(result)
      }
      const expire = () => end({ code: FAILED, error: new Error(`no complete answer within ${timeoutMillis} ms`) })
      const timer = setTimeout(expire, timeoutMillis)
      running.add(expire)
      exporter.export(spans, end)
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve()
  }
  return { exporter: wrapped, expire: () => [...running].forEach((expire) => expire()) }
}

/**
 * The tracer layer for an OTLP/HTTP traces endpoint `url` (the full URL, `…/v1/traces`). Each
 * export (its retries included) gives up `timeoutMillis` after it began, however the collector
 * answers (slowly, a byte at a time: the bound is a deadline, not an idle time). The release
 * flushes the spans still queued and shuts the exporter down within `timeoutMillis` as a whole:
 * then the exports still running are reported lost and their connections destroyed, so the
 * process exits. Other settings of the exporter come from the standard environment
 * (`OTEL_EXPORTER_OTLP_HEADERS`, the TLS files, …), as the exporter reads them.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: {
  readonly url: string
  readonly timeoutMillis: number
  readonly onFailure: (spans: number, reason: string) => void
}): Layer.Layer<Resource.Resource> =>
  Layer.unwrapEffect(Effect.sync(() => {
    const serviceName = process.env["OTEL_SERVICE_NAME"]?.trim()
    const resource = Resource.layerFromEnv(Resource.configToAttributes({
      serviceName: serviceName === undefined || serviceName === "" ? "agent-loop" : serviceName,
      serviceVersion: VERSION
    }))
    const sockets = connections(options.timeoutMillis)
    const exporter = deadlined(
      new OTLPTraceExporter({
        url: options.url,
        timeoutMillis: options.timeoutMillis,
        httpAgentOptions: sockets.agentFactory
      }),
      options.timeoutMillis,
      options.onFailure
    )
    const processor = new BatchSpanProcessor(exporter.exporter)
    // `NodeSdk.layerTracerProvider`, but with a release that gives up as said above and
    // destroys what is left (its own stops waiting after its timeout, leaving the sockets open).
    const provider = Layer.scoped(
      Tracer.OtelTracerProvider,
      Effect.flatMap(Resource.Resource, (resource) =>
        Effect.acquireRelease(
          Effect.sync(() => new NodeTracerProvider({ resource, spanProcessors: [processor] })),
          (provider) =>
            Effect.promise(() =>
              provider.forceFlush().catch(() => undefined).then(() => provider.shutdown()).catch(() => undefined)
            ).pipe(
              Effect.interruptible,
              Effect.timeoutOption(options.timeoutMillis),
              Effect.ensuring(Effect.sync(() => {
                exporter.expire()
                sockets.close()
              }))
            )
        ))
    )
    return Layer.provide(Tracer.layer, provider).pipe(Layer.provideMerge(resource))
  }))
