/**
 * Traces (§19): a scripted session (a text step, a tool step with 2 parallel calls, a
 * steer, a retry, a cancel) through the OpenTelemetry SDK (`@effect/opentelemetry`'s `NodeSdk`
 * with an in-memory exporter), the exact span tree: names, kinds, attributes, events, links,
 * status, virtual times. Also: `recordContent`, the same log without a tracer, no trace id in
 * the log, a manual compaction's root span.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { describe, expect, it } from "@effect/vitest"
import { SpanKind, SpanStatusCode } from "@opentelemetry/api"
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import {
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_AGENT_ID,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_REQUEST_STREAM,
  ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
  ATTR_GEN_AI_RESPONSE_ID,
  ATTR_GEN_AI_RESPONSE_MODEL,
  ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
  ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
  ATTR_GEN_AI_TOOL_CALL_ID,
  ATTR_GEN_AI_TOOL_CALL_RESULT,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
} from "@opentelemetry/semantic-conventions/incubating"
import { Effect, Layer, Schema } from "effect"
import * as Approval from "../src/Approval.js"
import * as Compaction from "../src/Compaction.js"
import type { ModelService } from "../src/Model.js"
import * as PreStep from "../src/PreStep.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Subagent from "../src/Subagent.js"
import * as Tool from "../src/Tool.js"
import * as Usage from "../src/Usage.js"
import { advance, Agent, brief, checkLog, layer } from "./utils/agent.js"

/** A finished span as the test compares it: times in virtual ms, ids replaced by span names. */
interface Node {
  readonly name: string
  readonly kind: string
  readonly start: number
  readonly end: number
  readonly status: string
  readonly attributes: Record<string, unknown>
  readonly events?: ReadonlyArray<{ readonly name: string; readonly at: number; readonly attributes: Record<string, unknown> }>
  readonly links?: ReadonlyArray<{ readonly to: string; readonly attributes: Record<string, unknown> }>
  readonly children?: ReadonlyArray<Node>
}

const ms = (t: readonly [number, number]): number => t[0] * 1000 + t[1] / 1e6
const KINDS: Record<number, string> = {
  [SpanKind.INTERNAL]: "INTERNAL",
  [SpanKind.CLIENT]: "CLIENT",
  [SpanKind.SERVER]: "SERVER",
  [SpanKind.PRODUCER]: "PRODUCER",
  [SpanKind.CONSUMER]: "CONSUMER"
}
const STATUS: Record<number, string> = {
  [SpanStatusCode.UNSET]: "UNSET",
  [SpanStatusCode.OK]: "OK",
  [SpanStatusCode.ERROR]: "ERROR"
}

/** The exported spans as trees (roots and siblings by start time, then end time, name and call id). */
const trees = (spans: ReadonlyArray<ReadableSpan>): Array<Node> => {
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s] as const))
  const order = (a: ReadableSpan, b: ReadableSpan) =>
    ms(a.startTime) - ms(b.startTime) || ms(a.endTime) - ms(b.endTime) || a.name.localeCompare(b.name) ||
    String(a.attributes[ATTR_GEN_AI_TOOL_CALL_ID] ?? "").localeCompare(String(b.attributes[ATTR_GEN_AI_TOOL_CALL_ID] ?? ""))
  const node = (s: ReadableSpan): Node => {
    const children = spans.filter((c) => c.parentSpanContext?.spanId === s.spanContext().spanId).sort(order)
    return {
      name: s.name,
      kind: KINDS[s.kind]!,
      start: ms(s.startTime),
      end: ms(s.endTime),
      status: STATUS[s.status.code]! +
        (s.status.message !== undefined && s.status.code === SpanStatusCode.ERROR ? `: ${s.status.message}` : ""),
      attributes: { ...s.attributes },
      ...(s.events.length > 0
        ? {
          events: s.events.map((e) => ({
            name: e.name,
            at: ms(e.time),
            attributes: e.name === "exception" ? { "exception.type": e.attributes?.["exception.type"] } : { ...e.attributes }
          }))
        }
        : {}),
      ...(s.links.length > 0
        ? { links: s.links.map((l) => ({ to: byId.get(l.context.spanId)?.name ?? "?", attributes: { ...l.attributes } })) }
        : {}),
      ...(children.length > 0 ? { children: children.map(node) } : {})
    }
  }
  return spans.filter((s) => s.parentSpanContext === undefined || !byId.has(s.parentSpanContext.spanId)).sort(order).map(node)
}

/** A child session's events, from the store. */
const childEvents = (id: string) =>
  Effect.flatMap(SessionStore.SessionStore, (store) => Effect.map(store.open(id as never), (log) => log.events()))

/** A tool that sleeps (virtual time) 100 ms for "a", 200 ms for anything else, and finds it. */
const lookup = Tool.make({
  name: "lookup",
  description: "Looks something up.",
  parameters: Schema.Struct({ q: Schema.String }),
  execute: ({ q }) => Effect.as(Effect.sleep(q === "a" ? 100 : 200), { content: `found ${q}` })
})

/** The scripted model, with a `response` part (id, model) after each successful attempt. */
const sessionModel = (): ModelService => {
  const scripted = ScriptedModel.make([
    // turn 1: a text step ("hello" at 20 ms, "there" at 40 ms)
    { text: "hello there", latencyMs: 40, usage: { inputTokens: 10, outputTokens: 2 } },
    // turn 2, step 1: two parallel calls
    {
      toolCalls: [{ id: "call-a", name: "lookup", arguments: { q: "a" } }, {
        id: "call-b",
        name: "lookup",
        arguments: { q: "b" }
      }],
      latencyMs: 10,
      usage: { inputTokens: 30, outputTokens: 8, cacheReadTokens: 20, cacheWriteTokens: 4 }
    },
    // turn 2, step 2 (the results and the steer): a retryable error, then the answer
    { error: { code: "HTTP_429", message: "slow down", retryable: true, status: 429 } },
    { text: "a, b and c", latencyMs: 30, usage: { inputTokens: 60, outputTokens: 12, reasoningTokens: 5 } },
    // turn 3: canceled mid-stream
    { text: "one two three four five", latencyMs: 1000 }
  ], { provider: "scripted", model: "script-1" })
  let n = 0
  return {
    provider: scripted.provider,
    model: scripted.model,
    respond: (request, sink) =>
      Effect.zipRight(
        scripted.respond(request, sink),
        Effect.suspend(() => sink.part({ type: "response", id: `resp-${++n}`, model: "script-1-2026" }))
      )
  }
}

/** A pre-step listener that enters what was claimed (so that every step has a `pre_step` span). */
const passThrough: PreStep.Listener = (_payload, next) => next()

const exporterLayer = (exporter: InMemorySpanExporter) =>
  NodeSdk.layer(() => ({ resource: { serviceName: "tracing-test" }, spanProcessor: new SimpleSpanProcessor(exporter) }))

/**
 * The session: turn 1 a text step; turn 2 two parallel tool calls, a steer from the caller while
 * they run, a retried request; turn 3 canceled at 300 ms into its stream. The followups and the
 * steer run in spans of the caller's (`client …`), the last followup in none.
 */
const session = (options: { readonly recordContent?: boolean }) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({
      tools: [lookup],
      name: "helper",
      sessionId: "s-1",
      ...(options.recordContent !== undefined ? { tracing: { recordContent: options.recordContent } } : {})
    })
    const f1 = yield* agent.followup("hi").pipe(Effect.withSpan("client followup 1"))
    yield* advance(100) // turn 1: 0–40 ms
    const f2 = yield* agent.followup("look up a and b").pipe(Effect.withSpan("client followup 2"))
    yield* advance(50) // the calls run from 110 ms (a until 210, b until 310)
    const s = yield* agent.steer("and c").pipe(Effect.withSpan("client steer"))
    yield* advance(1000) // step 2 at 310 ms fails, retried at 810 ms, answers at 840 ms
    const f3 = yield* agent.followup("write a long answer")
    yield* advance(300)
    yield* agent.cancel()
    yield* checkLog(agent, [f1, f2, s, f3])
    return { events: agent.log.events(), ids: [f1.messageId, f2.messageId, s.messageId, f3.messageId] as const }
  })

const run = (options: { readonly recordContent?: boolean; readonly traced?: boolean }) => {
  const exporter = new InMemorySpanExporter()
  const base = layer(sessionModel(), PreStep.layer([passThrough]))
  // The spans are read before the layer's scope closes (the SDK's shutdown clears the exporter).
  return session(options).pipe(
    Effect.map((r) => ({ ...r, spans: exporter.getFinishedSpans().slice() })),
    Effect.provide(options.traced === false ? base : Layer.merge(base, exporterLayer(exporter)))
  )
}

const turnAttributes = (turn: number, end: Record<string, unknown>) => ({
  [ATTR_GEN_AI_OPERATION_NAME]: "invoke_agent",
  [ATTR_GEN_AI_PROVIDER_NAME]: "scripted",
  [ATTR_GEN_AI_CONVERSATION_ID]: "s-1",
  [ATTR_GEN_AI_AGENT_NAME]: "helper",
  [ATTR_GEN_AI_AGENT_ID]: "s-1",
  "agent_loop.turn": turn,
  ...end
})
const chatAttributes = (turn: number, step: number, response: Record<string, unknown>) => ({
  [ATTR_GEN_AI_OPERATION_NAME]: "chat",
  [ATTR_GEN_AI_PROVIDER_NAME]: "scripted",
  [ATTR_GEN_AI_CONVERSATION_ID]: "s-1",
  [ATTR_GEN_AI_REQUEST_MODEL]: "script-1",
  [ATTR_GEN_AI_REQUEST_STREAM]: true,
  "agent_loop.turn": turn,
  "agent_loop.step": step,
  ...response
})
/** `gen_ai.response.finish_reasons` is a string array; @effect/opentelemetry 0.64.1 hands arrays to the SDK as JSON text. */
const finish = (reason: string) => JSON.stringify([reason], null, 2)
const preStep = (turn: number, step: number, at: number): Node => ({
  name: "pre_step",
  kind: "INTERNAL",
  start: at,
  end: at,
  status: "OK",
  attributes: {
    "agent_loop.turn": turn,
    "agent_loop.step": step,
    "agent_loop.pre_step.claimed": 1,
    "agent_loop.pre_step.decision": "Enter",
    "agent_loop.pre_step.entered": 1
  }
})
const toolSpan = (callId: string, start: number, end: number, content: Record<string, unknown> = {}): Node => ({
  name: "execute_tool lookup",
  kind: "INTERNAL",
  start,
  end,
  status: "OK",
  attributes: {
    [ATTR_GEN_AI_OPERATION_NAME]: "execute_tool",
    [ATTR_GEN_AI_CONVERSATION_ID]: "s-1",
    [ATTR_GEN_AI_TOOL_NAME]: "lookup",
    [ATTR_GEN_AI_TOOL_CALL_ID]: callId,
    ...(content[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS] !== undefined
      ? { [ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]: content[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS] }
      : {}),
    "agent_loop.turn": 2,
    "agent_loop.step": 1,
    ...(content[ATTR_GEN_AI_TOOL_CALL_RESULT] !== undefined
      ? { [ATTR_GEN_AI_TOOL_CALL_RESULT]: content[ATTR_GEN_AI_TOOL_CALL_RESULT] }
      : {})
  }
})
const delivery = (id: string, kind: string, step: number, at: number) => ({
  name: "agent_loop.delivery",
  at,
  attributes: {
    "agent_loop.message.id": id,
    "agent_loop.delivery.kind": kind,
    "agent_loop.delivery.source": "user",
    "agent_loop.step": step
  }
})
const link = (to: string, id: string, kind: string) => ({
  to,
  attributes: { "agent_loop.message.id": id, "agent_loop.delivery.kind": kind }
})
const caller = (name: string, at: number): Node => ({ name, kind: "INTERNAL", start: at, end: at, status: "OK", attributes: {} })

/** The session's span tree (`tools`: the two `execute_tool` spans). */
const expectedTree = (ids: readonly [string, string, string, string], tools: ReadonlyArray<Node>): Array<Node> => [
  caller("client followup 1", 0),
  caller("SessionStore.create", 0),
  {
    name: "invoke_agent helper",
    kind: "INTERNAL",
    start: 0,
    end: 40,
    status: "OK",
    attributes: turnAttributes(1, {
      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 10,
      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 2,
      "agent_loop.turn.end": "completed"
    }),
    events: [delivery(ids[0], "followup", 1, 0)],
    links: [link("client followup 1", ids[0], "followup")],
    children: [preStep(1, 1, 0), {
      name: "chat script-1",
      kind: "CLIENT",
      start: 0,
      end: 40,
      status: "OK",
      attributes: chatAttributes(1, 1, {
        [ATTR_GEN_AI_RESPONSE_ID]: "resp-1",
        [ATTR_GEN_AI_RESPONSE_MODEL]: "script-1-2026",
        [ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: finish("stop"),
        // "hello" came at 20 ms
        [ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]: 0.02,
        [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 10,
        [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 2
      })
    }]
  },
  caller("client followup 2", 100),
  {
    name: "invoke_agent helper",
    kind: "INTERNAL",
    start: 100,
    end: 840,
    status: "OK",
    attributes: turnAttributes(2, {
      // the sums of the turn's two responses (the failed attempt reported none)
      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 90,
      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 20,
      [ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]: 20,
      [ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS]: 4,
      [ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS]: 5,
      "agent_loop.turn.end": "completed"
    }),
    // the steer was delivered at 150 ms and entered step 2 at 310 ms
    events: [delivery(ids[1], "followup", 1, 100), delivery(ids[2], "steer", 2, 310)],
    links: [link("client followup 2", ids[1], "followup"), link("client steer", ids[2], "steer")],
    children: [
      preStep(2, 1, 100),
      {
        name: "chat script-1",
        kind: "CLIENT",
        start: 100,
        end: 110,
        status: "OK",
        attributes: chatAttributes(2, 1, {
          [ATTR_GEN_AI_RESPONSE_ID]: "resp-2",
          [ATTR_GEN_AI_RESPONSE_MODEL]: "script-1-2026",
          [ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: finish("tool-calls"),
          [ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]: 0.01,
          [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 30,
          [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 8,
          [ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]: 20,
          [ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS]: 4
        })
      },
      ...tools,
      preStep(2, 2, 310),
      {
        name: "chat script-1",
        kind: "CLIENT",
        start: 310,
        end: 840,
        status: "OK",
        attributes: chatAttributes(2, 2, {
          [ATTR_GEN_AI_RESPONSE_ID]: "resp-3",
          [ATTR_GEN_AI_RESPONSE_MODEL]: "script-1-2026",
          [ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: finish("stop"),
          // of the attempt that answered (from 810 ms; "a," at 7 ms)
          [ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]: 0.007,
          [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 60,
          [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 12,
          [ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS]: 5
        }),
        // the first attempt failed at 310 ms; the retry began after the schedule's 500 ms
        events: [{
          name: "agent_loop.retry",
          at: 810,
          attributes: { "agent_loop.retry.attempt": 2, [ATTR_ERROR_TYPE]: "HTTP_429", "http.response.status_code": 429 }
        }]
      }
    ]
  },
  caller("client steer", 150),
  {
    name: "invoke_agent helper",
    kind: "INTERNAL",
    start: 1150,
    end: 1450,
    status: "OK",
    attributes: turnAttributes(3, { "agent_loop.turn.end": "aborted", "agent_loop.turn.abort_cause": "user" }),
    // the last followup was made outside any span: an event, no link
    events: [delivery(ids[3], "followup", 1, 1150)],
    children: [preStep(3, 1, 1150), {
      name: "chat script-1",
      kind: "CLIENT",
      start: 1150,
      end: 1450,
      // interrupted by the cancel: @effect/opentelemetry marks an interrupted span so
      status: "OK",
      attributes: chatAttributes(3, 1, { "span.label": "⚠︎ Interrupted", "status.interrupted": true })
    }]
  }
]

describe("Tracing", () => {
  it.scoped("the scripted session's span tree: names, kinds, attributes, events, links (recordContent off)", () =>
    Effect.gen(function*() {
      const { events, ids, spans } = yield* run({})
      expect(brief(events).filter((e) => e.startsWith("turn/end"))).toEqual([
        "turn/end 1 completed",
        "turn/end 2 completed",
        "turn/end 3 aborted:user"
      ])
      expect(trees(spans)).toEqual(expectedTree(ids, [toolSpan("call-a", 110, 210), toolSpan("call-b", 110, 310)]))
    }))

  it.scoped("recordContent: tool arguments and results on the execute_tool spans (JSON text)", () =>
    Effect.gen(function*() {
      const { ids, spans } = yield* run({ recordContent: true })
      expect(trees(spans)).toEqual(expectedTree(ids, [
        toolSpan("call-a", 110, 210, {
          [ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]: `{"q":"a"}`,
          [ATTR_GEN_AI_TOOL_CALL_RESULT]: `[{"type":"text","text":"found a"}]`
        }),
        toolSpan("call-b", 110, 310, {
          [ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]: `{"q":"b"}`,
          [ATTR_GEN_AI_TOOL_CALL_RESULT]: `[{"type":"text","text":"found b"}]`
        })
      ]))
    }))

  it.scoped("without a tracer the loop writes the same log; no trace or span id is in it", () =>
    Effect.gen(function*() {
      const traced = yield* run({ recordContent: true })
      const untraced = yield* run({ traced: false })
      // The second session runs later on the same TestClock: times relative to each log's start.
      const relative = (events: ReadonlyArray<SessionEvent>) => events.map((e) => ({ ...e, time: e.time - events[0]!.time }))
      expect(relative(untraced.events)).toEqual(relative(traced.events))
      expect(untraced.spans).toEqual([])
      const log = JSON.stringify(traced.events)
      expect(traced.spans.length).toBe(17)
      for (const s of traced.spans) {
        expect(log).not.toContain(s.spanContext().traceId)
        expect(log).not.toContain(s.spanContext().spanId)
      }
    }))

  it.scoped("a question about a call: asked and decided are events of its execute_tool span, the wait inside it (§26)", () => {
    const exporter = new InMemorySpanExporter()
    const model = ScriptedModel.make([
      {
        toolCalls: [{ id: "w", name: "write", arguments: {} }, { id: "r", name: "read", arguments: {} }],
        latencyMs: 10
      },
      { text: "done" }
    ])
    const write = Tool.make({
      name: "write",
      description: "writes",
      parameters: Schema.Struct({}),
      approval: "always",
      execute: () => Effect.as(Effect.sleep(5), { content: "written" })
    })
    const read = Tool.make({
      name: "read",
      description: "reads",
      parameters: Schema.Struct({}),
      approval: "always",
      execute: () => Effect.succeed({ content: "read" })
    })
    const policy = Approval.layer([Approval.byName({ allow: [{ tool: "read" }] })])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [write, read], sessionId: "s-3" })
      yield* agent.followup("go")
      yield* advance(100)
      const [question] = yield* agent.pendingApprovals
      yield* agent.approve(question!.id, { name: "ana" })
      yield* advance(100)
      const decided = agent.log.events().filter((e) => e.type === "approval/decided").map((e) => e.data as { id: string })
      const tools = trees(exporter.getFinishedSpans()).filter((n) => n.name.startsWith("invoke_agent"))[0]!.children!
        .filter((n) => n.name.startsWith("execute_tool"))
      expect(tools.map((n) => [n.name, n.start, n.end, n.events])).toEqual([
        ["execute_tool read", 10, 10, [
          { name: "agent_loop.approval.asked", at: 10, attributes: { "agent_loop.approval.id": decided[0]!.id } },
          {
            name: "agent_loop.approval.decided",
            at: 10,
            attributes: {
              "agent_loop.approval.id": decided[0]!.id,
              "agent_loop.approval.outcome": "allowed-once",
              "agent_loop.approval.by": "policy:byName"
            }
          }
        ]],
        ["execute_tool write", 10, 105, [
          { name: "agent_loop.approval.asked", at: 10, attributes: { "agent_loop.approval.id": question!.id } },
          {
            name: "agent_loop.approval.decided",
            at: 100,
            attributes: {
              "agent_loop.approval.id": question!.id,
              "agent_loop.approval.outcome": "allowed-once",
              "agent_loop.approval.by": "person",
              "agent_loop.approval.by.name": "ana"
            }
          }
        ]]
      ])
      yield* checkLog(agent)
    }).pipe(Effect.provide(Layer.mergeAll(layer(model), exporterLayer(exporter), policy)))
  })

  it.scoped("an error end: error.type and status error on the request and the turn; a manual compaction is a root span", () => {
    const exporter = new InMemorySpanExporter()
    const model = ScriptedModel.make([
      { error: { code: "HTTP_400", message: "no such model", status: 400 } },
      { text: "ok" },
      { text: "a summary", latencyMs: 4, usage: { inputTokens: 40, outputTokens: 9 } }
    ])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ sessionId: "s-2" })
      yield* agent.followup("hi")
      yield* advance(10)
      yield* agent.followup("again")
      yield* advance(10)
      const compacting = yield* Effect.fork(agent.compact())
      yield* advance(10)
      const report = yield* compacting
      expect(brief(agent.log.events()).filter((e) => e.startsWith("turn/end"))).toEqual([
        "turn/end 1 error:HTTP_400",
        "turn/end 2 completed"
      ])
      const roots = trees(exporter.getFinishedSpans()).filter((n) => n.name !== "SessionStore.create")
      expect(roots.map((n) => [n.name, n.status, n.attributes["agent_loop.turn.end"], n.attributes[ATTR_ERROR_TYPE]])).toEqual([
        ["invoke_agent agent-loop", "ERROR: no such model", "error", "HTTP_400"],
        ["invoke_agent agent-loop", "OK", "completed", undefined],
        ["compaction", "OK", undefined, undefined]
      ])
      expect(roots[0]!.events?.map((e) => e.name)).toEqual(["agent_loop.delivery", "exception"])
      expect(roots[0]!.children).toEqual([{
        name: "chat script",
        kind: "CLIENT",
        start: 0,
        end: 0,
        status: "ERROR: no such model",
        attributes: {
          [ATTR_GEN_AI_OPERATION_NAME]: "chat",
          [ATTR_GEN_AI_PROVIDER_NAME]: "scripted",
          [ATTR_GEN_AI_CONVERSATION_ID]: "s-2",
          [ATTR_GEN_AI_REQUEST_MODEL]: "script",
          [ATTR_GEN_AI_REQUEST_STREAM]: true,
          "agent_loop.turn": 1,
          "agent_loop.step": 1,
          [ATTR_ERROR_TYPE]: "HTTP_400"
        },
        events: [{ name: "exception", at: 0, attributes: { "exception.type": "HTTP_400" } }]
      }])
      // Between turns: a root span (no turn), its summarization request a chat child with the usage.
      expect(roots[2]).toEqual({
        name: "compaction",
        kind: "INTERNAL",
        start: 20,
        end: 24,
        status: "OK",
        attributes: {
          [ATTR_GEN_AI_CONVERSATION_ID]: "s-2",
          "agent_loop.compaction.reason": "manual",
          "agent_loop.compaction.id": report.compactionId,
          "agent_loop.compaction.outcome": report.outcome,
          "agent_loop.compaction.tokens_before": report.tokensBefore,
          "agent_loop.compaction.tokens_after": report.tokensAfter
        },
        children: [{
          name: "chat script",
          kind: "CLIENT",
          start: 20,
          end: 24,
          status: "OK",
          attributes: {
            [ATTR_GEN_AI_OPERATION_NAME]: "chat",
            [ATTR_GEN_AI_PROVIDER_NAME]: "scripted",
            [ATTR_GEN_AI_CONVERSATION_ID]: "s-2",
            [ATTR_GEN_AI_REQUEST_MODEL]: "script",
            [ATTR_GEN_AI_REQUEST_STREAM]: true,
            [ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: finish("stop"),
            // "a" at 2 ms
            [ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]: 0.002,
            [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 40,
            [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 9
          }
        }]
      })
      expect(report.outcome).toBe("compacted")
      // The log counts it in the session, in no turn: the turns' spans have only their responses'.
      const usage = Usage.fromEvents(agent.log.events())
      expect(usage.usage.inputTokens).toBe(40)
      expect(usage.turns.map((t) => t.usage.inputTokens)).toEqual([0, 0])
    }).pipe(Effect.provide(Layer.merge(layer(model), exporterLayer(exporter))))
  })

  it.scoped("a pressure compaction in a turn: its request is a chat span under the compaction span, its usage in the turn's sums as in Usage.fromEvents", () => {
    const exporter = new InMemorySpanExporter()
    const big = (c: string) => c.repeat(200)
    const scripted = ScriptedModel.make([
      { text: "ok1", usage: { inputTokens: 59, outputTokens: 3 } },
      { text: "ok2", usage: { inputTokens: 118, outputTokens: 3, cacheReadTokens: 59 } },
      // turn 3: the summary (one word, at 20 ms), then the step's response
      { text: "SUMMARY", latencyMs: 20, usage: { inputTokens: 70, outputTokens: 12, cacheWriteTokens: 6 } },
      { text: "ok3", latencyMs: 5, usage: { inputTokens: 80, outputTokens: 4, reasoningTokens: 2 } }
    ])
    let n = 0
    const model: ModelService = {
      provider: scripted.provider,
      model: scripted.model,
      respond: (request, sink) =>
        Effect.zipRight(
          scripted.respond(request, sink),
          Effect.suspend(() => sink.part({ type: "response", id: `resp-${++n}`, model: "script-2026" }))
        )
    }
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ sessionId: "s-3" })
      for (const c of ["a", "b", "c"]) {
        yield* agent.followup(big(c))
        yield* advance(100)
      }
      const events = agent.log.events()
      expect(brief(events).filter((e) => e.startsWith("compaction/") || e.startsWith("turn/end"))).toEqual([
        "turn/end 1 completed",
        "turn/end 2 completed",
        "compaction/start",
        "compaction/summary",
        "compaction/end",
        "turn/end 3 completed"
      ])
      const compactionId = (events.find((e) => e.type === "compaction/start")!.data as { compactionId: string }).compactionId
      const turns = trees(exporter.getFinishedSpans()).filter((n) => n.name !== "SessionStore.create")
      expect(turns.map((n) => n.name)).toEqual(["invoke_agent agent-loop", "invoke_agent agent-loop", "invoke_agent agent-loop"])
      const chat = (
        turn: number,
        step: number | undefined,
        at: number,
        end: number,
        response: Record<string, unknown>
      ): Node => ({
        name: "chat script",
        kind: "CLIENT",
        start: at,
        end,
        status: "OK",
        attributes: {
          [ATTR_GEN_AI_OPERATION_NAME]: "chat",
          [ATTR_GEN_AI_PROVIDER_NAME]: "scripted",
          [ATTR_GEN_AI_CONVERSATION_ID]: "s-3",
          [ATTR_GEN_AI_REQUEST_MODEL]: "script",
          [ATTR_GEN_AI_REQUEST_STREAM]: true,
          "agent_loop.turn": turn,
          ...(step !== undefined ? { "agent_loop.step": step } : {}),
          [ATTR_GEN_AI_RESPONSE_MODEL]: "script-2026",
          [ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: finish("stop"),
          ...response
        }
      })
      const { events: _events, ...turn3 } = turns[2]!
      expect(turn3).toEqual({
        name: "invoke_agent agent-loop",
        kind: "INTERNAL",
        start: 200,
        end: 225,
        status: "OK",
        attributes: {
          [ATTR_GEN_AI_OPERATION_NAME]: "invoke_agent",
          [ATTR_GEN_AI_PROVIDER_NAME]: "scripted",
          [ATTR_GEN_AI_CONVERSATION_ID]: "s-3",
          [ATTR_GEN_AI_AGENT_NAME]: "agent-loop",
          [ATTR_GEN_AI_AGENT_ID]: "s-3",
          "agent_loop.turn": 3,
          // the summary's usage and the step's
          [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 150,
          [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 16,
          [ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS]: 6,
          [ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS]: 2,
          "agent_loop.turn.end": "completed"
        },
        children: [
          {
            name: "pre_step",
            kind: "INTERNAL",
            start: 200,
            end: 200,
            status: "OK",
            attributes: {
              "agent_loop.turn": 3,
              "agent_loop.step": 1,
              "agent_loop.pre_step.claimed": 1,
              "agent_loop.pre_step.decision": "Enter",
              "agent_loop.pre_step.entered": 1
            }
          },
          {
            name: "compaction",
            kind: "INTERNAL",
            start: 200,
            end: 220,
            status: "OK",
            attributes: {
              [ATTR_GEN_AI_CONVERSATION_ID]: "s-3",
              "agent_loop.turn": 3,
              "agent_loop.compaction.reason": "pressure",
              "agent_loop.compaction.id": compactionId,
              "agent_loop.compaction.outcome": "compacted",
              // the provider's 118 for turn 2's request, and ok2's estimate
              "agent_loop.compaction.tokens_before": 123,
              "agent_loop.compaction.tokens_after": 80
            },
            children: [chat(3, undefined, 200, 220, {
              [ATTR_GEN_AI_RESPONSE_ID]: "resp-3",
              [ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]: 0.02,
              [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 70,
              [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 12,
              [ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS]: 6
            })]
          },
          chat(3, 1, 220, 225, {
            [ATTR_GEN_AI_RESPONSE_ID]: "resp-4",
            [ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]: 0.005,
            [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 80,
            [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 4,
            [ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS]: 2
          })
        ]
      })
      // Every turn's sums are its usage as the log's projection computes it (the counts not 0).
      const attribute: Record<keyof Usage.Totals, string> = {
        inputTokens: ATTR_GEN_AI_USAGE_INPUT_TOKENS,
        outputTokens: ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
        cacheReadTokens: ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        cacheWriteTokens: ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        reasoningTokens: ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
      }
      const projected = Usage.fromEvents(events).turns.map((t) =>
        Object.fromEntries(
          Object.entries(t.usage).filter(([, v]) => v !== 0).map(([k, v]) => [attribute[k as keyof Usage.Totals], v])
        )
      )
      const summed = turns.map((n) =>
        Object.fromEntries(Object.entries(n.attributes).filter(([k]) => k.startsWith("gen_ai.usage.")))
      )
      expect(summed).toEqual(projected)
    }).pipe(
      Effect.provide(Layer.mergeAll(
        layer(model),
        Compaction.layer({ contextWindow: 200, reserve: 50, keepRecentTokens: 60 }),
        exporterLayer(exporter)
      ))
    )
  })

  it.scoped("a sub-agent's turn is a child of its call's execute_tool span; the parent's turn sums its usage (recordContent off)", () => {
    const exporter = new InMemorySpanExporter()
    const parentModel = ScriptedModel.make([
      {
        toolCalls: [{ id: "c1", name: "research", arguments: { prompt: "What time is it?", description: "the time" } }],
        latencyMs: 10,
        usage: { inputTokens: 100, outputTokens: 10 }
      },
      { text: "noon", latencyMs: 10, usage: { inputTokens: 150, outputTokens: 5, cacheReadTokens: 100 } }
    ], { provider: "scripted", model: "big" })
    const childModel = ScriptedModel.make([
      {
        toolCalls: [{ id: "k1", name: "lookup", arguments: { q: "a" } }],
        latencyMs: 10,
        usage: { inputTokens: 40, outputTokens: 4 }
      },
      { text: "12:00", latencyMs: 10, usage: { inputTokens: 60, outputTokens: 6, reasoningTokens: 2 } }
    ], { provider: "scripted", model: "small" })
    return Effect.gen(function*() {
      const agent = yield* Agent.make({
        sessionId: "p-1",
        name: "boss",
        tools: [Subagent.tool({ name: "research", model: childModel, tools: [lookup] })]
      })
      const f = yield* agent.followup("ask")
      yield* advance(300)
      yield* agent.awaitIdle
      const events = agent.log.events()
      const child = (events.find((e) => e.type === "subagent/end")!.data as { id: string }).id
      const task = (yield* childEvents(child)).find((e) => e.type === "user/message")!.data as { id: string }
      const chat = (conversation: string, model: string, step: number, start: number, response: Record<string, unknown>) => ({
        name: `chat ${model}`,
        kind: "CLIENT",
        start,
        end: start + 10,
        status: "OK",
        attributes: {
          [ATTR_GEN_AI_OPERATION_NAME]: "chat",
          [ATTR_GEN_AI_PROVIDER_NAME]: "scripted",
          [ATTR_GEN_AI_CONVERSATION_ID]: conversation,
          [ATTR_GEN_AI_REQUEST_MODEL]: model,
          [ATTR_GEN_AI_REQUEST_STREAM]: true,
          "agent_loop.turn": 1,
          "agent_loop.step": step,
          [ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]: 0.01,
          ...response
        }
      })
      const tool = (conversation: string, name: string, callId: string, start: number, end: number) => ({
        name: `execute_tool ${name}`,
        kind: "INTERNAL",
        start,
        end,
        status: "OK",
        attributes: {
          [ATTR_GEN_AI_OPERATION_NAME]: "execute_tool",
          [ATTR_GEN_AI_CONVERSATION_ID]: conversation,
          [ATTR_GEN_AI_TOOL_NAME]: name,
          [ATTR_GEN_AI_TOOL_CALL_ID]: callId,
          "agent_loop.turn": 1,
          "agent_loop.step": 1
        }
      })
      const turn = (conversation: string, name: string, start: number, end: number, usage: Record<string, unknown>) => ({
        name: `invoke_agent ${name}`,
        kind: "INTERNAL",
        start,
        end,
        status: "OK",
        attributes: {
          [ATTR_GEN_AI_OPERATION_NAME]: "invoke_agent",
          [ATTR_GEN_AI_PROVIDER_NAME]: "scripted",
          [ATTR_GEN_AI_CONVERSATION_ID]: conversation,
          [ATTR_GEN_AI_AGENT_NAME]: name,
          [ATTR_GEN_AI_AGENT_ID]: conversation,
          "agent_loop.turn": 1,
          ...usage,
          "agent_loop.turn.end": "completed"
        }
      })
      const deliveryOf = (id: string, source: string, at: number) => ({
        name: "agent_loop.delivery",
        at,
        attributes: {
          "agent_loop.message.id": id,
          "agent_loop.delivery.kind": "followup",
          "agent_loop.delivery.source": source,
          "agent_loop.step": 1
        }
      })
      expect(trees(exporter.getFinishedSpans())).toEqual([
        caller("SessionStore.create", 0),
        {
          // The parent's turn: its two responses and the child's run (100 + 150 + 100 input tokens).
          ...turn("p-1", "boss", 0, 140, {
            [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 350,
            [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 25,
            [ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]: 100,
            [ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS]: 0,
            [ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS]: 2,
            // of which the sub-agents' (the one run's complete counts, as its subagent/end records them)
            "agent_loop.subagents.count": 1,
            "agent_loop.subagents.usage.input_tokens": 100,
            "agent_loop.subagents.usage.output_tokens": 10,
            "agent_loop.subagents.usage.cache_read.input_tokens": 0,
            "agent_loop.subagents.usage.cache_creation.input_tokens": 0,
            "agent_loop.subagents.usage.reasoning.output_tokens": 2
          }),
          events: [deliveryOf(f.messageId, "user", 0)],
          children: [
            chat("p-1", "big", 1, 0, {
              [ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: finish("tool-calls"),
              [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 100,
              [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 10
            }),
            {
              // The call's span: the child's session is created in it, and its turn is its child.
              ...tool("p-1", "research", "c1", 10, 130),
              children: [
                caller("SessionStore.create", 10),
                {
                  ...turn(child, "research", 10, 130, {
                    [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 100,
                    [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 10,
                    [ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS]: 2
                  }),
                  events: [deliveryOf(task.id, "subagent", 10)],
                  // The task was delivered from the call: a link to it as to any caller (§19 rule 4).
                  links: [link("execute_tool research", task.id, "followup")],
                  children: [
                    chat(child, "small", 1, 10, {
                      [ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: finish("tool-calls"),
                      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 40,
                      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 4
                    }),
                    tool(child, "lookup", "k1", 20, 120),
                    chat(child, "small", 2, 120, {
                      [ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: finish("stop"),
                      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 60,
                      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 6,
                      [ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS]: 2
                    })
                  ]
                }
              ]
            },
            chat("p-1", "big", 2, 130, {
              [ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: finish("stop"),
              [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: 150,
              [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: 5,
              [ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]: 100
            })
          ]
        }
      ])
      // The turn's sums are the turn's usage with its sub-agents' (§18), by the log's projection.
      const projected = Usage.withSubagents(Usage.fromEvents(events).turns[0]!).usage
      expect([projected.inputTokens, projected.outputTokens, projected.cacheReadTokens]).toEqual([350, 25, 100])
    }).pipe(Effect.provide(Layer.merge(layer(parentModel), exporterLayer(exporter))))
  })
})
