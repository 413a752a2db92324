/**
 * The pre-step waterfall (§7). At every pre-step boundary the claimed batch goes
 * through the listeners, outermost first; each listener is middleware around the next one and
 * the innermost default enters with the claimed batch. A listener answers `Enter { messages }`
 * (the complete batch for the step: it may add, rewrite keeping the id, drop or reorder) or
 * `Reject { reason }`, or skips `next`. A failure (typed error or defect) fails the proposal:
 * the turn ends `{kind:"error", error:{code:"PRE_STEP_FAILED"}}`.
 *
 * Listeners are registered as a `Layer`: `PreStep.layer([outer, …, inner])` builds the whole
 * waterfall; `PreStep.listener(fn)` is one listener as a layer that wraps the `PreStep` it is
 * provided with (`listener(a).pipe(Layer.provide(listener(b)), Layer.provide(PreStep.layer([])))`
 * puts `a` outside `b`). Merging two listener layers with `Layer.merge`/`Layer.mergeAll` would
 * silently keep one of them: building such a graph dies with a message that says so.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { UserMessage } from "./Message.js"
import type { ByModel, Totals } from "./Usage.js"

/**
 * The tokens used before a step's request (§18), in the normalized counts of `Usage.Totals`:
 * `session` (every model request the session's log records, across turns and resumes: a resumed
 * agent rebuilds it from the log), `turn` (this turn's so far; all 0 at step 1 unless a
 * compaction ran in the turn), and both by model. A compaction's summarization request counts
 * too, and so does each sub-agent run that ended (its `subagent/end` usage, §27 rule 9); a
 * sub-agent's sums start from its parent's at the call (rule 10). What `Budget.layer` reads;
 * `Usage.withSubagents` of `Usage.fromEvents` gives the same sums from the log.
 *
 * @since 0.1.0
 * @category models
 */
export interface PreStepUsage {
  readonly session: Totals
  readonly turn: Totals
  readonly sessionByModel: ByModel
  readonly turnByModel: ByModel
  /** Requests (of the session, of this turn) whose response reported no usage: their 0 is unknown. */
  readonly unreported: { readonly session: number; readonly turn: number }
}

/**
 * What a listener sees: the claimed batch of the proposed step (§7) and the usage so
 * far (`usage`, §18).
 *
 * @since 0.1.0
 * @category models
 */
export interface PreStepPayload {
  readonly agentId: string
  readonly turn: number
  readonly step: number
  readonly messages: ReadonlyArray<UserMessage>
  readonly usage: PreStepUsage
}

/**
 * `Enter { messages }` (the complete batch for this step) or `Reject { reason }`.
 *
 * @since 0.1.0
 * @category models
 */
export type PreStepDecision =
  | { readonly _tag: "Enter"; readonly messages: ReadonlyArray<UserMessage> }
  | { readonly _tag: "Reject"; readonly reason: string }

/**
 * Decision constructors.
 *
 * @since 0.1.0
 * @category constructors
 */
export const Decision = {
  enter: (messages: ReadonlyArray<UserMessage>): PreStepDecision => ({ _tag: "Enter", messages }),
  reject: (reason: string): PreStepDecision => ({ _tag: "Reject", reason })
} as const

/**
 * A listener's typed failure, as the waterfall reports it. The turn ends
 * `{kind:"error", error:{code:"PRE_STEP_FAILED", message}}` (§6.4, §7).
 *
 * @since 0.1.0
 * @category errors
 */
export class PreStepFailed extends Schema.TaggedError<PreStepFailed>()("PreStepFailed", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * Calls the rest of the waterfall (inner listeners, then the default). Pass a payload to hand
 * inner listeners a rewritten batch; without one they see the payload this listener got.
 *
 * @since 0.1.0
 * @category models
 */
export type Next = (payload?: PreStepPayload) => Effect.Effect<PreStepDecision, PreStepFailed>

/**
 * A pre-step listener: `(payload, next) => Effect<Decision, E, R>` (§7).
 *
 * @since 0.1.0
 * @category models
 */
export type Listener<E = PreStepFailed, R = never> = (
  payload: PreStepPayload,
  next: Next
) => Effect.Effect<PreStepDecision, E, R>

/**
 * @since 0.1.0
 * @category services
 */
export interface PreStepService {
  /** Runs the whole waterfall on a claimed batch. */
  readonly run: (payload: PreStepPayload) => Effect.Effect<PreStepDecision, PreStepFailed>
}

/**
 * The default waterfall: enter with the claimed batch. One shared object: it is the default of
 * the `PreStep` reference and what `PreStep.layer([])` provides, and an agent whose pre-step is
 * this object enters a claimed batch in the same append as its claim (§7, §24).
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultService: PreStepService = {
  run: (payload) => Effect.succeed({ _tag: "Enter", messages: payload.messages })
}

/**
 * The pre-step waterfall in context, a `Context.Reference`: without a layer, `yield* PreStep`
 * gives `defaultService` (enter with the claimed batch), so `Agent.make` and `Agent.resume` do
 * not require it; `PreStep.layer(...)`, `PreStep.listener(...)` or `Layer.succeed(PreStep, ...)`
 * replace it (§7).
 *
 * @since 0.1.0
 * @category services
 */
export class PreStep extends Context.Reference<PreStep>()("effect-agent-loop/PreStep", {
  defaultValue: () => defaultService
}) {}

const toFailed = (error: unknown): PreStepFailed =>
  error instanceof PreStepFailed
    ? error
    : new PreStepFailed({
      message: error instanceof Error
        ? error.message
        : typeof error === "object" && error !== null && "message" in error
        ? String((error as { message: unknown }).message)
        : String(error),
      cause: error
    })

const wrap = <E, R>(
  listener: Listener<E, R>,
  inner: PreStepService,
  context: Context.Context<R>
): PreStepService => ({
  run: (payload) =>
    listener(payload, (p) => inner.run(p ?? payload)).pipe(
      Effect.mapError(toFailed),
      Effect.provide(context)
    )
})

/**
 * Composes listeners, outermost first, around the default (the pure form of `layer`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const compose = (listeners: ReadonlyArray<Listener<unknown, never>>): PreStepService => {
  let service = defaultService
  for (let i = listeners.length - 1; i >= 0; i--) service = wrap(listeners[i]!, service, Context.empty())
  return service
}

/** The services the listeners need (never for none). */
type RequirementsOf<L> = L extends Listener<any, infer R> ? R : never

/**
 * The whole waterfall as one layer: `PreStep.layer([outer, …, inner])`; `PreStep.layer([])`
 * is the default (enter with the claimed batch).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { PreStep } from "effect-agent-loop"
 *
 * // Outermost first: the secret check runs before the default, which enters the claimed batch.
 * const noSecrets: PreStep.Listener = (payload, next) =>
 *   payload.messages.some((m) => JSON.stringify(m.content).includes("password"))
 *     ? Effect.succeed(PreStep.Decision.reject("contains a secret"))
 *     : next()
 * const waterfall = PreStep.layer([noSecrets])
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <const L extends ReadonlyArray<Listener<any, any>>>(
  listeners: L
): Layer.Layer<PreStep, never, RequirementsOf<L[number]>> =>
  Layer.effect(
    PreStep,
    Effect.map(Effect.context<any>(), (context) => {
      let service = defaultService
      for (let i = listeners.length - 1; i >= 0; i--) service = wrap(listeners[i]!, service, context)
      return service
    })
  )

/**
 * What listeners have wrapped: the inner service, or for the default service (one shared
 * object, which every build of `PreStep.layer([])` returns) the context it was found in, so
 * that separate builds (two runtimes, one test after another) are not taken for a merge.
 */
const wrapped = new WeakSet<object>()

/**
 * One listener as a layer that wraps the `PreStep` it is provided with. Building a graph in
 * which two listeners wrap the same `PreStep` (what `Layer.merge`/`Layer.mergeAll` of listener
 * layers does) dies with a defect that names the mistake (§7).
 *
 * @example
 * ```ts
 * import { Context, Effect, Layer } from "effect"
 * import { Message, PreStep } from "effect-agent-loop"
 *
 * class WallClock extends Context.Tag("WallClock")<WallClock, { readonly now: Effect.Effect<string> }>() {}
 *
 * // Adds the time as context to every batch the inner listeners enter (a reject passes through).
 * const withTime = PreStep.listener((payload, next) =>
 *   Effect.gen(function*() {
 *     const decision = yield* next()
 *     if (decision._tag === "Reject") return decision
 *     const now = yield* WallClock.pipe(Effect.flatMap((c) => c.now))
 *     const note = yield* Message.UserMessage.make({ text: `now: ${now}`, source: { kind: "plugin", plugin: "clock" } })
 *     return PreStep.Decision.enter([...decision.messages, note])
 *   })
 * )
 * // Outside the default waterfall; the layer still needs WallClock and IdGenerator.
 * const waterfall = withTime.pipe(Layer.provide(PreStep.layer([])))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const listener = <E, R>(fn: Listener<E, R>): Layer.Layer<PreStep, never, PreStep | R> =>
  Layer.effect(
    PreStep,
    Effect.flatMap(Effect.context<PreStep | R>(), (context) => {
      const inner = Context.get(context, PreStep)
      const key: object = inner === defaultService ? context : inner
      if (wrapped.has(key)) {
        return Effect.dieMessage(
          "PreStep.listener: two listeners wrap the same PreStep. Listener layers were merged " +
            "(Layer.merge/Layer.mergeAll keeps only one of them); compose them with Layer.provide " +
            "or list them in PreStep.layer([outer, …, inner])."
        )
      }
      wrapped.add(key)
      return Effect.succeed(wrap(fn, inner, context as Context.Context<R>))
    })
  )
