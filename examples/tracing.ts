/**
 * Traces over OpenTelemetry (§19). The runtime opens its spans with Effect's `Tracer`
 * only: a turn is `invoke_agent agent-loop`, each model request a `chat {model}` child, each tool
 * call an `execute_tool {tool}` child. Which tracer records them is the application's choice:
 * here `NodeSdk.layer` of `@effect/opentelemetry` (an optional peer, with the OpenTelemetry JS
 * SDK 2.x), provided around the agent's scope. The spans go to an exporter that keeps them
 * (`collect`), printed as a tree once the session is over; with `OTEL_EXPORTER_OTLP_ENDPOINT` set (a collector, e.g.
 * `http://localhost:4318`), they are also sent over OTLP/HTTP (the exporter reads that variable and
 * appends `/v1/traces`).
 *
 * The layer's release flushes the span processors (and shuts the exporters down), so the spans
 * are complete, and sent, once `Effect.provide` returns.
 *
 * Run: npm run example -- tracing
 *      OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 npm run example -- tracing
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import type * as Resource from "@effect/opentelemetry/Resource"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import {
  BatchSpanProcessor,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor
} from "@opentelemetry/sdk-trace-base"
import { Effect, Layer } from "effect"
import { Agent, Model, Offline, OfflineTools, SessionStore } from "effect-agent-loop"
import { fileURLToPath } from "node:url"

/**
 * A span exporter that appends every span it gets to `into`. (The SDK's `InMemorySpanExporter`
 * forgets its spans when it is shut down, which the layer's release does.)
 */
export const collect = (into: Array<ReadableSpan>): SpanExporter => ({
  export: (spans, done) => {
    for (const span of spans) into.push(span)
    done({ code: 0 })
  },
  shutdown: () => Promise.resolve()
})

/**
 * The OpenTelemetry layer: every span into `into`, and to OTLP/HTTP as well when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set.
 */
export const tracing = (into: Array<ReadableSpan>): Layer.Layer<Resource.Resource> => {
  const processors: Array<SpanProcessor> = [new SimpleSpanProcessor(collect(into))]
  if (process.env.OTEL_EXPORTER_OTLP_ENDPOINT || process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
    processors.push(new BatchSpanProcessor(new OTLPTraceExporter()))
  }
  return NodeSdk.layer(() => ({ resource: { serviceName: "tracing-example" }, spanProcessor: processors }))
}

const KINDS = ["INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"]

/** The attributes shown in the tree (the rest are in the span). */
const SHOWN = ["gen_ai.conversation.id", "agent_loop.turn", "agent_loop.step", "gen_ai.tool.name"]

/**
 * The spans as a tree, one line each: `name KIND key=value …` (those of `SHOWN` the span has and
 * its parent has not, or with another value), children indented under their parent in start
 * order; with `times`, each span's duration in milliseconds.
 */
export const tree = (spans: ReadonlyArray<ReadableSpan>, options: { readonly times?: boolean } = {}): Array<string> => {
  const ids = new Set(spans.map((s) => s.spanContext().spanId))
  const parentOf = (s: ReadableSpan) => {
    const parent = s.parentSpanContext?.spanId
    return parent !== undefined && ids.has(parent) ? parent : undefined
  }
  const byStart = [...spans].sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1])
  const lines: Array<string> = []
  const visit = (parent: ReadableSpan | undefined, depth: number) => {
    const id = parent?.spanContext().spanId
    for (const span of byStart.filter((s) => parentOf(s) === id)) {
      const attributes = SHOWN.filter((key) =>
        span.attributes[key] !== undefined && span.attributes[key] !== parent?.attributes[key]
      ).map((key) => `${key}=${String(span.attributes[key])}`)
      const duration = options.times === true ? [`(${(span.duration[0] * 1e3 + span.duration[1] / 1e6).toFixed(1)} ms)`] : []
      lines.push(`${"  ".repeat(depth)}${[span.name, KINDS[span.kind], ...attributes, ...duration].join(" ")}`)
      visit(span, depth + 1)
    }
  }
  visit(undefined, 0)
  return lines
}

/**
 * One turn on the offline model ("what time is it": it calls `clock`, then answers), traced.
 * Prints the span tree with durations; returns the session id and the spans.
 */
export const main = Effect.gen(function*() {
  const spans: Array<ReadableSpan> = []
  const sessionId = yield* Effect.scoped(Effect.gen(function*() {
    const agent = yield* Agent.make({ tools: [OfflineTools.clock] })
    yield* agent.followup("what time is it")
    yield* agent.awaitIdle
    return agent.id
  })).pipe(Effect.provide(tracing(spans)))
  // The layer is released: every span has ended and been exported.
  console.log(tree(spans, { times: true }).join("\n"))
  return { sessionId, spans }
}).pipe(Effect.provide(Layer.mergeAll(SessionStore.layerMemory, Model.layer(Offline.make()))))

if (process.argv[1] === fileURLToPath(import.meta.url)) NodeRuntime.runMain(main)
