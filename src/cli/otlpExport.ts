/**
 * The OTLP/HTTP trace export of the CLI (issue 16 §1, `otlp.ts`): the tracer part of
 * `@effect/opentelemetry`'s `NodeSdk.layer`, a `BatchSpanProcessor` over an `OTLPTraceExporter`
 * (JSON over HTTP) on a `NodeTracerProvider` (`NodeSdk.layerTracerProvider`, `Tracer.layer`), with
 * a resource of `service.name` `agent-loop` (or `OTEL_SERVICE_NAME`) and `service.version`
 * (`Resource.layerFromEnv`, as `NodeSdk.layer` builds it). Loaded by `otlp.ts` only when an
 * endpoint is set: a chunk of the CLI bundle.
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
import { layerTracerProvider } from "@effect/opentelemetry/NodeSdk"
import * as Resource from "@effect/opentelemetry/Resource"
import * as Tracer from "@effect/opentelemetry/Tracer"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { BatchSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer } from "effect"
import { VERSION } from "./version.js"

/**
 * `exporter`, reporting each export that failed to `onFailure` (with the number of spans lost
 * and the exporter's reason) before passing the result on. The OTLP exporter itself only tells
 * OpenTelemetry's diagnostic logger, which the CLI does not install.
 */
const reporting = (exporter: SpanExporter, onFailure: (spans: number, reason: string) => void): SpanExporter => ({
  export: (spans, done) =>
    exporter.export(spans, (result) => {
      if (result.code !== 0) onFailure(spans.length, result.error?.message ?? "unknown error")
      done(result)
    }),
  shutdown: () => exporter.shutdown(),
  forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve()
})

/**
 * The tracer layer for an OTLP/HTTP traces endpoint `url` (the full URL, `…/v1/traces`). Its
 * release flushes the spans still queued and shuts the exporter down. Each export (its retries
 * included) gives up after `timeoutMillis`; the release waits at most a second more. Other
 * settings of the exporter come from the standard environment (`OTEL_EXPORTER_OTLP_HEADERS`, …),
 * as the exporter reads them.
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
    const exporter = new OTLPTraceExporter({ url: options.url, timeoutMillis: options.timeoutMillis })
    const processor = new BatchSpanProcessor(reporting(exporter, options.onFailure))
    return Layer.provide(Tracer.layer, layerTracerProvider(processor, { shutdownTimeout: options.timeoutMillis + 1000 })).pipe(
      Layer.provideMerge(resource)
    )
  }))
