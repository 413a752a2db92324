/**
 * Traces of the loop (§19): spans named and attributed after the OpenTelemetry GenAI
 * semantic conventions, made through Effect's `Tracer` only (the runtime imports no
 * `@opentelemetry` package; an OTel tracer is the user's layer, e.g. `@effect/opentelemetry`'s
 * `NodeSdk.layer`). One tree per turn:
 *
 * ```text
 * invoke_agent {name}   INTERNAL, a root span per turn (a sub-agent's: a child of its parent's
 * │                     `execute_tool` span); a link to the caller's span of each delivery that
 * │                     entered the turn, an `agent_loop.delivery` event per entry
 * ├─ pre_step           INTERNAL, per pre-step waterfall run (none with the default pre-step)
 * ├─ compaction         INTERNAL, per compaction bracket (a root span between turns)
 * │  └─ chat {model}     CLIENT, per summarization request of its policy (the usage counts in the turn)
 * ├─ chat {model}       CLIENT, per model request (its retries as `agent_loop.retry` events)
 * └─ execute_tool {tool} INTERNAL, per tool call that runs (execute + hooks)
 * ```
 *
 * The model adapter's, the tools' and the pre-step's own spans are children of `chat`,
 * `execute_tool` and `pre_step` (the span is their parent span). Attributes are the GenAI names
 * (`gen_ai.*`, hardcoded here), `error.type`, and `agent_loop.*` for what the conventions have no
 * name for (turn and step numbers, the turn's end reason, deliveries, compaction). Trace and span
 * ids are in no durable event: traces are not replayed (a resumed agent opens new spans); the
 * session id (`gen_ai.conversation.id`) and the turn and step numbers tie spans to the log.
 *
 * Cost: the tracer is read once per run, at the driver fiber's start, from the fiber that
 * started the run (the caller's layers). With Effect's default tracer (none installed) or with
 * tracing disabled (`Effect.withTracerEnabled(false)`) nothing here runs but that check and, per
 * delivery, a read of the caller's current span; no span is ever opened per text delta (the time
 * to first chunk is one clock read per model attempt).
 */
import { Cause, Clock, Context, Effect, Either, Exit, Fiber, FiberId, FiberRef, Option, Tracer } from "effect"
import type { DecidedData } from "../Approval.js"
import type { CompactionReason, CompactionReport } from "../Compaction.js"
import type { InboxState } from "../Inbox.js"
import type { ContentBlock, UserMessage } from "../Message.js"
import type { ModelError, ModelRequest, ModelService, ModelSink } from "../Model.js"
import type { TurnEndReason, Usage } from "../SessionEvent.js"

/** The tracer of a run, read once when the driver fiber starts (`runTracing`). */
export interface RunTracing {
  readonly tracer: Tracer.Tracer
  readonly clock: Clock.Clock
  /** The driver fiber's context, given to the tracer with every span. */
  readonly context: Context.Context<never>
}

/** How a message came in, as the log reads it (`next-turn` → followup, waking `next-step` → steer, else inject). */
export type DeliveryKind = "followup" | "steer" | "inject"

/** What a traced agent keeps (`AgentState.trace`): the run's tracer and the caller spans of pending deliveries. */
export interface AgentTrace {
  /** The current run's tracer; `undefined` when the run is not traced. */
  run: RunTracing | undefined
  /** The caller's span of each delivery not decided yet (by message id), for the turn's links. */
  readonly callers: Map<string, Tracer.AnySpan>
  /**
   * The span the agent's turns are children of: a sub-agent's, the `execute_tool` span of its
   * parent's call (§27); none for an agent of its own (each turn a root).
   */
  readonly parent?: Tracer.AnySpan | undefined
}

/** The span of a turn and what it sums (`TurnState.trace`). */
export interface TurnTrace {
  readonly run: RunTracing
  readonly span: Tracer.Span
  /** The delivery kinds of the current claim, aligned with `TurnState.claimed`. */
  kinds: ReadonlyArray<DeliveryKind> | undefined
  /** The usage the turn's responses reported and its sub-agents' runs, summed per `gen_ai.usage.*` attribute. */
  usage: Record<string, number> | undefined
  /** The sub-agent runs that ended in the turn: their count and usage (`agent_loop.subagents.*`). */
  subagents: Record<string, number> | undefined
}

/** The span of a model request, with the start of its current attempt and its first part (ms). */
export interface ChatTrace {
  readonly span: Tracer.Span
  readonly clock: Clock.Clock
  attemptStart: number
  firstPart: number | undefined
}

/** The agent's fields tracing reads. */
interface Traced {
  readonly id: string
  trace: AgentTrace | undefined
  readonly config: {
    readonly name: string
    readonly recordContent: boolean
    readonly model: ModelService
  }
}

let native: Tracer.Tracer | undefined
/** Effect's default tracer (what a fiber has when no tracer layer is installed). */
const nativeTracer = (): Tracer.Tracer => native ?? (native = Effect.runSync(Effect.tracer))

/** Whether `fiber` has a tracer of its own (not Effect's default) and tracing enabled. */
export const isTraced = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean =>
  fiber.currentTracer !== nativeTracer() && fiber.getFiberRef(FiberRef.currentTracerEnabled)

/**
 * The run's tracer, read from the driver fiber: `undefined` with Effect's default tracer or
 * with tracing disabled, so that an untraced run does no tracing work at all.
 */
export const runTracing = (fiber: Fiber.RuntimeFiber<unknown, unknown>): RunTracing | undefined => {
  const tracer = fiber.currentTracer
  if (!isTraced(fiber)) return undefined
  return { tracer, clock: Context.get(fiber.currentDefaultServices, Clock.Clock), context: fiber.currentContext }
}

/** Sets the agent's run tracing at a driver fiber's start. */
export const startRun = (a: Traced, fiber: Fiber.RuntimeFiber<unknown, unknown>): void => {
  const run = runTracing(fiber)
  if (run !== undefined) (a.trace ?? (a.trace = { run, callers: new Map() })).run = run
  else if (a.trace !== undefined) a.trace.run = undefined
}

/**
 * At a delivery (in its critical section, on the caller's fiber): remembers the caller's current
 * span, if it has one and the caller is traced (a span of Effect's default tracer links to no
 * trace: nothing is kept for an untraced caller), for the link from the turn the message enters.
 */
export const noteCaller = (a: Traced, messageId: string): void => {
  const fiber = Fiber.getCurrentFiber()
  if (Option.isNone(fiber) || !isTraced(fiber.value)) return
  const span = fiber.value.currentSpan
  if (span === undefined) return
  ;(a.trace ?? (a.trace = { run: undefined, callers: new Map() })).callers.set(messageId, span)
}

/** The delivery kinds of a claim from `inbox` (its `next-step` items in order, then one `next-turn` item). */
export const claimKinds = (inbox: InboxState, count: number): ReadonlyArray<DeliveryKind> => {
  const kinds: Array<DeliveryKind> = []
  for (const p of inbox.nextStep) {
    if (kinds.length === count) break
    kinds.push(p.waking ? "steer" : "inject")
  }
  while (kinds.length < count) kinds.push("followup")
  return kinds
}

const now = (run: { readonly clock: Clock.Clock }): bigint => run.clock.unsafeCurrentTimeNanos()

const span = (
  run: RunTracing,
  name: string,
  parent: Tracer.AnySpan | undefined,
  kind: Tracer.SpanKind,
  attributes: Readonly<Record<string, unknown>>
): Tracer.Span => {
  const s = parent === undefined
    ? run.tracer.span(name, Option.none(), run.context, [], now(run), kind, { root: true })
    : run.tracer.span(name, Option.some(parent), run.context, [], now(run), kind)
  for (const key in attributes) {
    const value = attributes[key]
    if (value !== undefined) s.attribute(key, value)
  }
  return s
}

/**
 * Runs `self` with `span` as its parent span (what `Effect.withParentSpan` does: the spans made
 * inside are its children), then calls `end` with the exit, once, whatever ends `self` (an
 * interruption too). One `onExit` where `Effect.onExit(Effect.withParentSpan(…))` took two
 * brackets (`withParentSpan` is `Effect.locally` of the context, an `acquireUseRelease`): the
 * fiber's context is set inside the region `onExit` guards and put back by the same finalizer
 * that ends the span, so an interruption at any point leaves it as it was. Both with the fiber's
 * own `setFiberRef` (`FiberRef.set` is two operations more each way). A traced prompt of the
 * bench's tool-steps (21 spans) ran 1,131 Effect operations with the two brackets and runs 648
 * with this (396 untraced) (§19, §24).
 */
export const inSpan = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  span: Tracer.AnySpan,
  end: (exit: Exit.Exit<A, E>) => void
): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) => {
    const before = fiber.getFiberRef(FiberRef.currentContext)
    const inside = Context.add(before, Tracer.ParentSpan, span)
    const settable = fiber as unknown as SettableFiber
    return Effect.onExit(
      Effect.withFiberRuntime<A, E, R>(() => {
        settable.setFiberRef(FiberRef.currentContext, inside)
        return self
      }),
      (exit) => {
        settable.setFiberRef(FiberRef.currentContext, before)
        end(exit)
        return Effect.void
      }
    )
  })

/** The fiber's own method that sets one FiberRef (not in `Fiber.RuntimeFiber`'s type). */
interface SettableFiber {
  setFiberRef<A>(ref: FiberRef.FiberRef<A>, value: A): void
}

/** A failure exit for an error end: the OTel tracer sets status ERROR with `message`. */
const failed = (message: string, name: string): Exit.Exit<never, Error> => {
  const error = new Error(message)
  error.name = name
  return Exit.fail(error)
}

/**
 * Opens the span of turn `turn` (`invoke_agent {name}`), when the run is traced: a root, or for a
 * sub-agent a child of its parent's call span (`AgentTrace.parent`).
 */
export const startTurn = (
  a: Traced,
  turn: number,
  kinds: ReadonlyArray<DeliveryKind> | undefined
): TurnTrace | undefined => {
  const run = a.trace?.run
  if (run === undefined) return undefined
  return {
    run,
    span: span(run, `invoke_agent ${a.config.name}`, a.trace?.parent, "internal", {
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.provider.name": a.config.model.provider,
      "gen_ai.conversation.id": a.id,
      "gen_ai.agent.name": a.config.name,
      "gen_ai.agent.id": a.id,
      "agent_loop.turn": turn
    }),
    kinds,
    usage: undefined,
    subagents: undefined
  }
}

/**
 * The messages that entered step `step` of a traced turn: an `agent_loop.delivery` event for each
 * one that was delivered (claimed; not a pre-step's addition), and a link to its caller's span.
 * Called before their fates resolve (which forgets the caller spans).
 */
export const entered = (
  a: Traced,
  t: TurnTrace,
  step: number,
  claimed: ReadonlyArray<UserMessage>,
  messages: ReadonlyArray<UserMessage>
): void => {
  const callers = a.trace?.callers
  const links: Array<Tracer.SpanLink> = []
  const at = now(t.run)
  for (const m of messages) {
    let i = 0
    while (i < claimed.length && claimed[i]!.id !== m.id) i++
    if (i === claimed.length) continue
    const kind = t.kinds?.[i] ?? "followup"
    t.span.event("agent_loop.delivery", at, {
      "agent_loop.message.id": m.id,
      "agent_loop.delivery.kind": kind,
      "agent_loop.delivery.source": m.source.kind,
      "agent_loop.step": step
    })
    const caller = callers?.get(m.id)
    if (caller !== undefined) {
      links.push({
        _tag: "SpanLink",
        span: caller,
        attributes: { "agent_loop.message.id": m.id, "agent_loop.delivery.kind": kind }
      })
    }
  }
  if (links.length > 0) t.span.addLinks(links)
}

/** The `gen_ai.usage.*` attribute of each normalized usage count (§18). */
const USAGE_ATTRIBUTES = [
  ["inputTokens", "gen_ai.usage.input_tokens"],
  ["outputTokens", "gen_ai.usage.output_tokens"],
  ["cacheReadTokens", "gen_ai.usage.cache_read.input_tokens"],
  ["cacheWriteTokens", "gen_ai.usage.cache_creation.input_tokens"],
  ["reasoningTokens", "gen_ai.usage.reasoning.output_tokens"]
] as const

const setAll = (s: Tracer.Span, attributes: Readonly<Record<string, unknown>>): void => {
  for (const key in attributes) {
    const value = attributes[key]
    if (value !== undefined) s.attribute(key, value)
  }
}

/**
 * Ends a turn's span with its end reason (`agent_loop.turn.end`, the reason's kind), its summed
 * usage, and for an error end `error.type` (the code) and status error. `undefined`: the turn was
 * left open in the log (a released or stopped agent); the span ends interrupted.
 */
export const endTurn = (t: TurnTrace, reason: TurnEndReason | undefined): void => {
  const s = t.span
  if (t.usage !== undefined) setAll(s, t.usage)
  if (t.subagents !== undefined) setAll(s, t.subagents)
  if (reason === undefined) {
    s.end(now(t.run), Exit.interrupt(FiberId.none))
    return
  }
  s.attribute("agent_loop.turn.end", reason.kind)
  switch (reason.kind) {
    case "error":
      s.attribute("error.type", reason.error.code)
      s.end(now(t.run), failed(reason.error.message, reason.error.code))
      return
    case "aborted":
      s.attribute("agent_loop.turn.abort_cause", reason.reason.kind)
      break
    case "blocked":
      if (reason.reason !== undefined) s.attribute("agent_loop.turn.blocked_reason", reason.reason)
      break
  }
  s.end(now(t.run), Exit.void)
}

/** The span of a model request (`chat {model}`, CLIENT): a step's (`step`), or a compaction's summarization (no step). */
const chatSpan = (
  a: Traced,
  run: RunTracing,
  parent: Tracer.AnySpan,
  turn: number | undefined,
  step: number | undefined
): ChatTrace => {
  const model = a.config.model
  return {
    span: span(run, `chat ${model.model}`, parent, "client", {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": model.provider,
      "gen_ai.conversation.id": a.id,
      "gen_ai.request.model": model.model,
      "gen_ai.request.stream": true,
      "agent_loop.turn": turn,
      "agent_loop.step": step
    }),
    clock: run.clock,
    attemptStart: 0,
    firstPart: undefined
  }
}

/** Opens the span of a model request (`chat {model}`, CLIENT) in a traced turn. */
export const startChat = (a: Traced, t: TurnTrace, turn: number, step: number): ChatTrace =>
  chatSpan(a, t.run, t.span, turn, step)

/** A model attempt starts (the first, or a retry). */
export const chatAttempt = (c: ChatTrace): void => {
  c.attemptStart = c.clock.unsafeCurrentTimeMillis()
  c.firstPart = undefined
}

/** A retry of a model request: an `agent_loop.retry` event with the failed attempt's error code. */
export const chatRetry = (c: ChatTrace, attempt: number, error: ModelError): void => {
  c.span.event("agent_loop.retry", c.clock.unsafeCurrentTimeNanos(), {
    "agent_loop.retry.attempt": attempt,
    "error.type": error.code,
    ...(error.status !== undefined ? { "http.response.status_code": error.status } : {})
  })
}

/** What a response's span reads of it (an `Accumulator`, or what a compaction's request streamed). */
interface Reply {
  readonly response: { readonly id?: string | undefined; readonly model?: string | undefined } | undefined
  readonly finish: string | undefined
  readonly usage: Usage | undefined
}

/** Adds the counts of `usage` (the ones it has) to the turn's `gen_ai.usage.*` sums. */
const sum = (t: TurnTrace, usage: Usage): void => {
  for (const [field, key] of USAGE_ATTRIBUTES) {
    const n = usage[field]
    if (typeof n !== "number") continue
    const total = t.usage ?? (t.usage = {})
    total[key] = (total[key] ?? 0) + n
  }
}

/**
 * A compaction's summary is durable in a traced turn (`compaction/summary`, its usage as
 * logged): its usage counts in the turn's sums, as `Usage.fromEvents` counts it (the request's
 * own span has what the provider reported).
 */
export const summaryUsage = (t: TurnTrace | undefined, usage: Usage | undefined): void => {
  if (t !== undefined && usage !== undefined) sum(t, usage)
}

/** The `agent_loop.subagents.usage.*` attribute of each count (the `gen_ai.usage.*` names' suffixes). */
const SUBAGENT_ATTRIBUTES = USAGE_ATTRIBUTES.map(([field, key]) =>
  [field, key.replace("gen_ai.usage.", "agent_loop.subagents.usage.")] as const
)

/**
 * A sub-agent's `subagent/end` is durable in a traced turn (§27; its data): the run's usage (its
 * complete counts, children included) counts in the turn's `gen_ai.usage.*` sums, as
 * `Usage.withSubagents` counts it, and in `agent_loop.subagents.usage.*` (how much of the sums came
 * from sub-agents), with `agent_loop.subagents.count` (the runs that ended in the turn).
 */
export const subagentUsage = (t: TurnTrace, data: unknown): void => {
  const u = (data as { readonly usage?: unknown } | null)?.usage
  const sub = t.subagents ?? (t.subagents = { "agent_loop.subagents.count": 0 })
  sub["agent_loop.subagents.count"]!++
  if (typeof u !== "object" || u === null) return
  const usage = u as Usage
  sum(t, usage)
  for (const [field, key] of SUBAGENT_ATTRIBUTES) {
    const n = usage[field]
    if (typeof n === "number") sub[key] = (sub[key] ?? 0) + n
  }
}

/**
 * Ends a model request's span: the response's id, model, finish reason, usage and time to first
 * chunk, or its error. With `t` (a step's request), the usage also counts in the turn's sums.
 */
export const endChat = (
  c: ChatTrace,
  t: TurnTrace | undefined,
  exit: Exit.Exit<Either.Either<Reply, ModelError>>
): void => {
  const s = c.span
  const at = c.clock.unsafeCurrentTimeNanos()
  if (Exit.isFailure(exit)) return s.end(at, exit)
  const result = exit.value
  if (result._tag === "Left") {
    s.attribute("error.type", result.left.code)
    return s.end(at, Exit.fail(result.left))
  }
  const acc = result.right
  if (acc.response?.id !== undefined) s.attribute("gen_ai.response.id", acc.response.id)
  if (acc.response?.model !== undefined) s.attribute("gen_ai.response.model", acc.response.model)
  s.attribute("gen_ai.response.finish_reasons", [acc.finish ?? "stop"])
  if (c.firstPart !== undefined) s.attribute("gen_ai.response.time_to_first_chunk", (c.firstPart - c.attemptStart) / 1000)
  const u = acc.usage
  if (u !== undefined) {
    // The counts the provider reported, on the request and summed on the turn (none invented).
    for (const [field, key] of USAGE_ATTRIBUTES) {
      const n = u[field]
      if (typeof n === "number") s.attribute(key, n)
    }
    if (t !== undefined) sum(t, u)
  }
  s.end(at, Exit.void)
}

/**
 * The model a traced compaction gives its policy (`CompactionInput.model`, the agent's model):
 * each `respond` is a `chat {model}` span (CLIENT), a child of the `compaction` span, the
 * adapter's spans its children, with a step's request and response attributes (no step number)
 * and the usage the provider reported. The turn's sums count the summary's usage once it is
 * logged (`summaryUsage`), not here: a request whose summary is not kept is in no turn (as in
 * `Usage.fromEvents`). A policy that retries calls `respond` again: one span per call.
 */
const compactionModel = (a: Traced, run: RunTracing, parent: Tracer.Span, turn: number | null): ModelService => {
  const model = a.config.model
  const respond = (request: ModelRequest, sink: ModelSink): Effect.Effect<void, ModelError> =>
    Effect.suspend(() => {
      const c = chatSpan(a, run, parent, turn ?? undefined, undefined)
      chatAttempt(c)
      let response: Reply["response"] = undefined
      let finish: string | undefined = undefined
      let usage: Usage | undefined = undefined
      const observed: ModelSink = {
        // Read when the part is given (an adapter may build the effect ahead of time).
        part: (p) =>
          Effect.suspend(() => {
            if (c.firstPart === undefined) c.firstPart = c.clock.unsafeCurrentTimeMillis()
            if (p.type === "usage") usage = p.usage
            else if (p.type === "response") {
              response = {
                ...(typeof p.id === "string" ? { id: p.id } : {}),
                ...(typeof p.model === "string" ? { model: p.model } : {})
              }
            } else if (p.type === "finish") finish = p.reason
            return sink.part(p)
          })
      }
      return inSpan(model.respond(request, observed), c.span, (exit) => {
        if (Exit.isSuccess(exit)) return endChat(c, undefined, Exit.succeed(Either.right({ response, finish, usage })))
        const failure = Cause.failureOption(exit.cause)
        if (Option.isSome(failure)) return endChat(c, undefined, Exit.succeed(Either.left(failure.value)))
        if (!Cause.isInterruptedOnly(exit.cause)) c.span.attribute("error.type", "MODEL_FAILED")
        c.span.end(c.clock.unsafeCurrentTimeNanos(), exit)
      })
    })
  // The agent's model with `respond` traced (its other properties read through).
  return Object.assign(Object.create(model) as ModelService, { respond })
}

/** The call of a tool as its span reads it. */
interface TracedCall {
  readonly id: string
  readonly name: string
  readonly rawArguments: string
  readonly content: ReadonlyArray<ContentBlock>
  readonly isError: boolean
  readonly error: { readonly code: string } | undefined
}

/**
 * `agent_loop.approval.asked` on the current span (a call's `execute_tool` span, §26): the
 * question's id, at the time it was asked (`askedAt`, ms).
 */
export const approvalAsked = (id: string, askedAt: number): Effect.Effect<void> =>
  Effect.flatMap(Effect.option(Effect.currentSpan), (s) =>
    Effect.sync(() => {
      if (s._tag === "Some") {
        s.value.event("agent_loop.approval.asked", BigInt(askedAt) * 1_000_000n, { "agent_loop.approval.id": id })
      }
    }))

/**
 * `agent_loop.approval.decided` on the current span, now: the question's id, its outcome and who
 * decided (`person`, `policy:NAME`, `timeout`, `cancel`), and the person's name if given.
 */
export const approvalDecided = (data: DecidedData): Effect.Effect<void> =>
  Effect.flatMap(Effect.option(Effect.currentSpan), (s) =>
    Effect.flatMap(Clock.currentTimeNanos, (at) =>
      Effect.sync(() => {
        if (s._tag === "None") return
        const by = data.by
        s.value.event("agent_loop.approval.decided", at, {
          "agent_loop.approval.id": data.id,
          "agent_loop.approval.outcome": data.outcome,
          ...(by === undefined ? {} : { "agent_loop.approval.by": by.kind === "policy" ? `policy:${by.policy}` : by.kind }),
          ...(by?.kind === "person" && by.name !== undefined ? { "agent_loop.approval.by.name": by.name } : {})
        })
      })))

/**
 * A tool call's execution in its span (`execute_tool {tool}`, INTERNAL, the parent span of the
 * tool's own spans). Arguments and result (`gen_ai.tool.call.arguments`/`.result`) only with
 * `recordContent`; an error result sets `error.type` (its §8 code) and status error.
 */
export const tool = <E, R>(
  a: Traced,
  t: TurnTrace,
  turn: number,
  step: number,
  call: TracedCall,
  execution: Effect.Effect<void, E, R>
): Effect.Effect<void, E, R> =>
  Effect.suspend(() => {
    const s = span(t.run, `execute_tool ${call.name}`, t.span, "internal", {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.conversation.id": a.id,
      "gen_ai.tool.name": call.name,
      "gen_ai.tool.call.id": call.id,
      "gen_ai.tool.call.arguments": a.config.recordContent ? call.rawArguments : undefined,
      "agent_loop.turn": turn,
      "agent_loop.step": step
    })
    return inSpan(execution, s, (exit) => {
      const at = now(t.run)
      if (Exit.isFailure(exit)) return s.end(at, exit)
      if (a.config.recordContent) s.attribute("gen_ai.tool.call.result", JSON.stringify(call.content))
      if (call.isError) {
        const code = call.error?.code ?? "TOOL_FAILED"
        s.attribute("error.type", code)
        return s.end(at, failed(`the tool call ended with an error result (${code})`, code))
      }
      s.end(at, Exit.void)
    })
  })

/** A pre-step waterfall run in its span (`pre_step`, INTERNAL): the decision, or its failure. */
export const preStep = <A extends { readonly _tag?: unknown; readonly messages?: unknown }, E, R>(
  t: TurnTrace,
  turn: number,
  step: number,
  claimed: number,
  run: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const s = span(t.run, "pre_step", t.span, "internal", {
      "agent_loop.turn": turn,
      "agent_loop.step": step,
      "agent_loop.pre_step.claimed": claimed
    })
    return inSpan(run, s, (exit) => {
      const at = now(t.run)
      if (Exit.isFailure(exit)) {
        if (!Exit.isInterrupted(exit)) s.attribute("error.type", "PRE_STEP_FAILED")
        return s.end(at, exit)
      }
      const d = exit.value
      const tag = typeof d === "object" && d !== null && typeof d._tag === "string" ? d._tag : "invalid"
      s.attribute("agent_loop.pre_step.decision", tag)
      if (tag === "Enter" && Array.isArray(d.messages)) s.attribute("agent_loop.pre_step.entered", d.messages.length)
      s.end(at, Exit.void)
    })
  })

/**
 * A compaction bracket in its span (`compaction`, INTERNAL): a child of the turn's span, or a
 * root span for a manual compaction between turns; the report's outcome and token counts.
 * `bracket` gets the model its policy is to use: untraced, the agent's own; traced, one whose
 * requests are `chat` spans under the compaction's (`compactionModel`).
 */
export const compaction = <E, R>(
  a: Traced,
  t: TurnTrace | undefined,
  turn: number | null,
  reason: CompactionReason,
  bracket: (model: ModelService) => Effect.Effect<CompactionReport, E, R>
): Effect.Effect<CompactionReport, E, R> => {
  const run = t?.run ?? a.trace?.run
  if (run === undefined) return bracket(a.config.model)
  return Effect.suspend(() => {
    const s = span(run, "compaction", t?.span, "internal", {
      "gen_ai.conversation.id": a.id,
      "agent_loop.turn": turn ?? undefined,
      "agent_loop.compaction.reason": reason
    })
    return inSpan(bracket(compactionModel(a, run, s, turn)), s, (exit) => {
      const at = now(run)
      if (Exit.isFailure(exit)) return s.end(at, exit)
      const r = exit.value
      setAll(s, {
        "agent_loop.compaction.id": r.compactionId,
        "agent_loop.compaction.outcome": r.outcome,
        "agent_loop.compaction.tokens_before": r.tokensBefore,
        "agent_loop.compaction.tokens_after": r.tokensAfter
      })
      if (r.outcome === "failed") {
        const code = r.error?.code ?? "COMPACTION_FAILED"
        s.attribute("error.type", code)
        return s.end(at, failed(r.error?.message ?? "the compaction failed", code))
      }
      s.end(at, Exit.void)
    })
  })
}
