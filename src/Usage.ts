/**
 * Token usage, cost and budgets from the session log (§18; §12 projections).
 * Pure projections over a log's events, ours or DSH v0: every model request the log records
 * (`assistant/message`, and a compaction's `compaction/summary`), summed per step, per turn, per
 * session and per model. Counts are whole tokens in the normalized shape of
 * `SessionEvent.Usage`: `inputTokens` is the whole prompt, cache reads and writes included
 * (counted once), `reasoningTokens` a part of `outputTokens`, `total = input + output`. A DSH v0
 * log counts its cache reads and writes beside its input (DeepSeek's miss/hit split): its input
 * here is `inputTokens + cacheReadTokens + cacheWriteTokens`.
 *
 * Decisions:
 * - The model of a request is the model that answered (`response.model`) when the provider said,
 *   else the model the request was sent to (the message's `source.model`); a summary's `model`.
 * - Events before the header's `seedLength` (a child session's inherited prefix, §3.1)
 *   are the parent's spending and are not counted.
 * - A compaction's summarization request counts in the session, in its model and in the turn it
 *   ran in (none between turns), not in a step. Only a compaction that ended `compacted` logs its
 *   summary's usage; the request of one that failed or was aborted is not in the log.
 * - A response that reported no usage counts 0 (a scripted model, a provider that sends none, a
 *   log written before the adapters reported usage) and is counted in `unreported`; a missing
 *   or malformed count is 0.
 * - `costs`: a model that answered a request and has no price makes the total unknown, whatever
 *   tokens it reported (0 included).
 * - Prices (`Prices`): USD per million tokens, per model; looked up by exact model name, else the
 *   longest key that is a prefix of the model. A model with no price has an unknown cost, never 0.
 *   No price is shipped as a fact (`examples/prices.example.json` shows the shape).
 * - Budgets (`budget`): a pre-step listener that rejects a step once the tokens (or cost) used so
 *   far reach the limit (refused at `used ≥ limit`, checked at the pre-step, before the step's
 *   request and before a compaction the step runs first: one step may go past the limit by its
 *   own request and a compaction's), or once the usage is unknown (a response in the budget's
 *   scope reported none); the turn ends `blocked` and its claimed input is dropped `rejected`
 *   (§7).
 *
 * @since 0.1.0
 */
import { Effect, Either, Layer, ParseResult, Schema } from "effect"
import { jsonPath } from "./internal/json.js"
import { isDsh, seedLengthOf } from "./internal/logOptions.js"
import * as PreStep from "./PreStep.js"
import type { SessionEvent, TurnEndReason, Usage as LoggedUsage } from "./SessionEvent.js"
import type { LogOptions } from "./SessionLog.js"

// ---------------------------------------------------------------------------------------------
// Counts
// ---------------------------------------------------------------------------------------------

/**
 * Usage as the log records it (`SessionEvent.Usage`): every count optional.
 *
 * @since 0.1.0
 * @category models
 */
export type Usage = LoggedUsage

/**
 * Complete token counts (whole tokens, each ≥ 0): what every projection of this module sums.
 * `inputTokens` includes `cacheReadTokens` and `cacheWriteTokens`; `outputTokens` includes
 * `reasoningTokens` (§18).
 *
 * @since 0.1.0
 * @category models
 */
export interface Totals {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cacheReadTokens: number
  readonly cacheWriteTokens: number
  readonly reasoningTokens: number
}

/**
 * Totals per model name (see the module's decisions for which name a request counts under).
 *
 * @since 0.1.0
 * @category models
 */
export interface ByModel {
  readonly [model: string]: Totals
}

/**
 * No tokens.
 *
 * @since 0.1.0
 * @category constructors
 */
export const zero: Totals = Object.freeze({
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  reasoningTokens: 0
})

const count = (u: unknown): number => (typeof u === "number" && Number.isFinite(u) && u > 0 ? u : 0)

/**
 * The complete counts of a logged usage (missing, negative or non-numeric counts are 0). With
 * `dsh: true` the usage is a DSH v0 log's, whose `inputTokens` excludes the cache counts: they are
 * added to it.
 *
 * @example
 * ```ts
 * import { Usage } from "effect-agent-loop"
 *
 * Usage.of({ inputTokens: 90, outputTokens: 28, cacheReadTokens: 1280 }, { dsh: true }).inputTokens // 1370
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const of = (usage: Usage | Totals | undefined, options?: { readonly dsh?: boolean | undefined }): Totals => {
  if (usage === undefined || typeof usage !== "object" || usage === null) return zero
  const cacheReadTokens = count(usage.cacheReadTokens)
  const cacheWriteTokens = count(usage.cacheWriteTokens)
  const input = count(usage.inputTokens)
  return {
    inputTokens: options?.dsh === true ? input + cacheReadTokens + cacheWriteTokens : input,
    outputTokens: count(usage.outputTokens),
    cacheReadTokens,
    cacheWriteTokens,
    reasoningTokens: count(usage.reasoningTokens)
  }
}

/**
 * The sum of two usages (each read as `of` reads it, normalized shape).
 *
 * @since 0.1.0
 * @category combinators
 */
export const add = (a: Usage | Totals | undefined, b: Usage | Totals | undefined): Totals => {
  const x = of(a)
  const y = of(b)
  return {
    inputTokens: x.inputTokens + y.inputTokens,
    outputTokens: x.outputTokens + y.outputTokens,
    cacheReadTokens: x.cacheReadTokens + y.cacheReadTokens,
    cacheWriteTokens: x.cacheWriteTokens + y.cacheWriteTokens,
    reasoningTokens: x.reasoningTokens + y.reasoningTokens
  }
}

/** `add` of two complete counts (no normalization: the projections' inner loop). */
const plus = (x: Totals, y: Totals): Totals => ({
  inputTokens: x.inputTokens + y.inputTokens,
  outputTokens: x.outputTokens + y.outputTokens,
  cacheReadTokens: x.cacheReadTokens + y.cacheReadTokens,
  cacheWriteTokens: x.cacheWriteTokens + y.cacheWriteTokens,
  reasoningTokens: x.reasoningTokens + y.reasoningTokens
})

/**
 * The total tokens of a usage: `inputTokens + outputTokens` (cached and reasoning tokens are
 * parts of those, so they are not added again).
 *
 * @since 0.1.0
 * @category combinators
 */
export const total = (usage: Usage | Totals | undefined): number => {
  const u = of(usage)
  return u.inputTokens + u.outputTokens
}

/**
 * `byModel` with `usage` added under `model` (a new record; the input is unchanged).
 *
 * @since 0.1.0
 * @category combinators
 */
export const addByModel = (byModel: ByModel, model: string, usage: Totals): ByModel => ({
  ...byModel,
  [model]: plus(byModel[model] ?? zero, usage)
})

// ---------------------------------------------------------------------------------------------
// Projections
// ---------------------------------------------------------------------------------------------

/**
 * One model request the log records: a step's response (`kind: "step"`, its `assistant/message`)
 * or a compaction's summarization (`kind: "compaction"`, its `compaction/summary`). `seq` and
 * `time` (epoch ms) are the logged event's; `startTime` is the time of the step's `step/start`
 * (or the `compaction/start`), so `time - startTime` is the wall time of the request, retries
 * (and a compaction inside the step) included. `turn` is `null` for a compaction between turns.
 * `reported` is false when the response carried no usage.
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestUsage {
  readonly kind: "step" | "compaction"
  readonly seq: number
  readonly time: number
  readonly startTime: number | undefined
  readonly turn: number | null
  readonly step: number | undefined
  readonly provider: string | undefined
  readonly model: string
  readonly usage: Totals
  readonly reported: boolean
  readonly interrupted: boolean
}

/**
 * One step (`step/start` … `step/end`) and the usage of its response.
 *
 * @since 0.1.0
 * @category models
 */
export interface StepUsage {
  readonly turn: number
  readonly step: number
  readonly usage: Totals
  /** The model of its response (undefined: none was logged). */
  readonly model: string | undefined
  readonly startTime: number
  /** The `step/end` time (undefined while the step is open). */
  readonly endTime: number | undefined
}

/**
 * One turn: its steps' and compactions' usage, by model too, its times and end reason.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnUsage {
  readonly turn: number
  readonly usage: Totals
  readonly byModel: ByModel
  readonly steps: number
  readonly requests: number
  /** Its requests whose response reported no usage (counted 0: the turn's true usage is unknown). */
  readonly unreported: number
  readonly startTime: number
  /** The `turn/end` time and reason (undefined while the turn is open). */
  readonly endTime: number | undefined
  readonly end: TurnEndReason | undefined
}

/**
 * A session's usage: the whole session, by model, and per turn, step and request (in log order).
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionUsage {
  readonly usage: Totals
  readonly byModel: ByModel
  /** Requests whose response reported no usage (counted 0: the session's true usage is unknown). */
  readonly unreported: number
  readonly turns: ReadonlyArray<TurnUsage>
  readonly steps: ReadonlyArray<StepUsage>
  readonly requests: ReadonlyArray<RequestUsage>
}

/**
 * An incremental projection: `push` events in log order, `result` at any point (cheap: the
 * arrays are shared, not copied). What `chat` uses for its status line.
 *
 * @since 0.1.0
 * @category models
 */
export interface Projector {
  readonly push: (event: SessionEvent) => void
  readonly result: () => SessionUsage
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/**
 * The model a logged response counts under: `response.model`, else `message.source.model`, else
 * `"unknown"` (the module's decisions).
 *
 * @since 0.1.0
 */
export const modelOf = (data: unknown): string => {
  const d = data as { response?: { model?: unknown }; message?: { source?: { model?: unknown } } } | undefined
  const answered = d?.response?.model
  if (typeof answered === "string" && answered !== "") return answered
  const asked = d?.message?.source?.model
  return typeof asked === "string" && asked !== "" ? asked : "unknown"
}

/**
 * The incremental form of `fromEvents` (same options).
 *
 * @since 0.1.0
 * @category constructors
 */
export const projector = (options?: LogOptions): Projector => {
  const dsh = isDsh(options)
  const seed = seedLengthOf(options)
  let session: Totals = zero
  let byModel: ByModel = {}
  let unreported = 0
  const turns: Array<Mutable<TurnUsage>> = []
  const steps: Array<Mutable<StepUsage>> = []
  const requests: Array<RequestUsage> = []
  let turn: Mutable<TurnUsage> | undefined
  let step: Mutable<StepUsage> | undefined
  const compactions = new Map<string, { readonly turn: number | null; readonly time: number }>()
  const note = (usage: Totals, model: string, inStep: boolean, reported: boolean) => {
    session = plus(session, usage)
    byModel = addByModel(byModel, model, usage)
    if (!reported) unreported++
    if (turn !== undefined && turn.endTime === undefined) {
      turn.usage = plus(turn.usage, usage)
      turn.byModel = addByModel(turn.byModel, model, usage)
      turn.requests++
      if (!reported) turn.unreported++
    }
    if (inStep && step !== undefined) {
      step.usage = plus(step.usage, usage)
      step.model = model
    }
  }
  const push = (e: SessionEvent): void => {
    if (e.seq < seed) return
    const d = e.data as any
    switch (e.type) {
      case "turn/start":
        turn = {
          turn: d.turn,
          usage: zero,
          byModel: {},
          steps: 0,
          requests: 0,
          unreported: 0,
          startTime: e.time,
          endTime: undefined,
          end: undefined
        }
        turns.push(turn)
        return
      case "turn/end":
        if (turn !== undefined && turn.turn === d.turn) {
          turn.endTime = e.time
          turn.end = d.reason
        }
        return
      case "step/start":
        step = { turn: d.turn, step: d.step, usage: zero, model: undefined, startTime: e.time, endTime: undefined }
        steps.push(step)
        if (turn !== undefined && turn.turn === d.turn) turn.steps++
        return
      case "step/end":
        if (step !== undefined && step.turn === d.turn && step.step === d.step) step.endTime = e.time
        return
      case "assistant/message": {
        const usage = of(d.usage, { dsh })
        const model = modelOf(d)
        const open = step !== undefined && step.turn === d.turn && step.step === d.step
        const reported = typeof d.usage === "object" && d.usage !== null
        requests.push({
          kind: "step",
          seq: e.seq,
          time: e.time,
          startTime: open ? step!.startTime : undefined,
          turn: d.turn,
          step: d.step,
          provider: typeof d.message?.source?.provider === "string" ? d.message.source.provider : undefined,
          model,
          usage,
          reported,
          interrupted: d.interrupted === true
        })
        note(usage, model, open, reported)
        return
      }
      case "compaction/start":
        if (typeof d?.compactionId === "string") {
          compactions.set(d.compactionId, { turn: typeof d.turn === "number" ? d.turn : null, time: e.time })
        }
        return
      case "compaction/end":
        compactions.delete(d?.compactionId)
        return
      case "compaction/summary": {
        const started = compactions.get(d?.compactionId)
        compactions.delete(d?.compactionId)
        const usage = of(d?.usage, { dsh })
        const model = typeof d?.model === "string" && d.model !== "" ? d.model : "unknown"
        const reported = typeof d?.usage === "object" && d.usage !== null
        requests.push({
          kind: "compaction",
          seq: e.seq,
          time: e.time,
          startTime: started?.time,
          turn: started?.turn ?? (turn !== undefined && turn.endTime === undefined ? turn.turn : null),
          step: undefined,
          provider: typeof d?.provider === "string" ? d.provider : undefined,
          model,
          usage,
          reported,
          interrupted: false
        })
        note(usage, model, false, reported)
        return
      }
      default:
        return
    }
  }
  return {
    push,
    result: () => ({ usage: session, byModel, unreported, turns, steps, requests })
  }
}

/**
 * The usage of a session log (ours or DSH v0: `options.header` with `version: 0`, or `dsh`):
 * every model request, and their sums per step, per turn, per session and per model. Pure;
 * O(events).
 *
 * @example
 * ```ts
 * import { Usage } from "effect-agent-loop"
 * import type { SessionEvent } from "effect-agent-loop"
 *
 * declare const events: ReadonlyArray<SessionEvent.SessionEvent>
 * const usage = Usage.fromEvents(events)
 * console.log(Usage.total(usage.usage), usage.turns.map((t) => Usage.total(t.usage)))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEvents = (events: ReadonlyArray<SessionEvent>, options?: LogOptions): SessionUsage => {
  const p = projector(options)
  for (const e of events) p.push(e)
  return p.result()
}

// ---------------------------------------------------------------------------------------------
// Prices and cost
// ---------------------------------------------------------------------------------------------

const Rate = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

/**
 * The price of one model, in USD per million tokens: `input` (uncached prompt tokens),
 * `cachedInput` (cache reads; default `input`), `cacheWrite` (cache writes; default `input`),
 * `output` (reasoning included).
 *
 * @since 0.1.0
 * @category models
 */
export const PriceSchema = Schema.Struct({
  input: Rate,
  cachedInput: Schema.optional(Rate),
  cacheWrite: Schema.optional(Rate),
  output: Rate
}).annotations({ identifier: "a price object {input, cachedInput?, cacheWrite?, output} (USD per 1e6 tokens)" })

/**
 * @since 0.1.0
 * @category models
 */
export type Price = typeof PriceSchema.Type

/**
 * A price table: `{ [model]: Price }` (JSON, e.g. `agent-loop stats --prices FILE`).
 *
 * @since 0.1.0
 * @category models
 */
export const PricesSchema = Schema.Record({ key: Schema.String, value: PriceSchema }).annotations({
  identifier: "a price table {[model]: {input, cachedInput?, cacheWrite?, output}}"
})

/**
 * @since 0.1.0
 * @category models
 */
export type Prices = typeof PricesSchema.Type

/**
 * A price table as written (a file, a scenario's `budget.prices`): `Prices` whose top-level keys
 * starting with `$` are comments, dropped when decoded (`"$comment"`).
 *
 * @since 0.1.0
 * @category models
 */
export const PricesInputSchema = Schema.transform(
  Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
    identifier: "a price table {[model]: {input, cachedInput?, cacheWrite?, output}}"
  }),
  PricesSchema,
  {
    strict: false,
    decode: (table) => Object.fromEntries(Object.entries(table).filter(([k]) => !k.startsWith("$"))),
    encode: (prices) => prices
  }
)

/**
 * A price table that is not one: `path` is the JSON path of the problem (`$["gpt-x"].input`).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidPrices extends Schema.TaggedError<InvalidPrices>()("InvalidPrices", {
  message: Schema.String,
  path: Schema.String
}) {}

/**
 * Decodes a price table (parsed JSON): `{ [model]: Price }`; unknown fields of a price are
 * errors; top-level keys starting with `$` are comments, ignored (`"$comment"`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const decodePrices = (input: unknown): Either.Either<Prices, InvalidPrices> => {
  const decoded = Schema.decodeUnknownEither(PricesInputSchema, { onExcessProperty: "error", errors: "first" })(input)
  if (Either.isRight(decoded)) return Either.right(decoded.right)
  const first = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)[0]
  return Either.left(
    new InvalidPrices({ message: first?.message ?? "invalid price table", path: jsonPath(first?.path ?? []) })
  )
}

/**
 * The price of `model`: its exact key, else the longest key that is a prefix of it
 * (`"gpt-4o"` prices `"gpt-4o-2024-08-06"`), else undefined (unknown).
 *
 * @since 0.1.0
 * @category combinators
 */
export const priceOf = (prices: Prices, model: string): Price | undefined => {
  if (Object.hasOwn(prices, model)) return prices[model]
  let best: string | undefined
  for (const key of Object.keys(prices)) {
    if (model.startsWith(key) && (best === undefined || key.length > best.length)) best = key
  }
  return best === undefined ? undefined : prices[best]
}

/**
 * The cost in USD of `usage` at `price`: `((input − cacheRead − cacheWrite)·input +
 * cacheRead·cachedInput + cacheWrite·cacheWrite + output·output) / 1e6` (cached tokens billed
 * once, at their own rate; the uncached part is never below 0).
 *
 * @example
 * ```ts
 * import { Usage } from "effect-agent-loop"
 *
 * // 1,000 prompt tokens of which 800 cached, 100 output; example rates, not real prices.
 * Usage.cost({ inputTokens: 1000, cacheReadTokens: 800, outputTokens: 100 }, { input: 2, cachedInput: 0.5, output: 8 })
 * // (200·2 + 800·0.5 + 100·8) / 1e6 = 0.0016
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const cost = (usage: Usage | Totals | undefined, price: Price): number => {
  const u = of(usage)
  const uncached = Math.max(0, u.inputTokens - u.cacheReadTokens - u.cacheWriteTokens)
  return (uncached * price.input +
    u.cacheReadTokens * (price.cachedInput ?? price.input) +
    u.cacheWriteTokens * (price.cacheWrite ?? price.input) +
    u.outputTokens * price.output) / 1e6
}

/**
 * The cost of `usage` under `model`'s price, or undefined when the table has no price for it.
 *
 * @since 0.1.0
 * @category combinators
 */
export const costOf = (prices: Prices, model: string, usage: Usage | Totals | undefined): number | undefined => {
  const price = priceOf(prices, model)
  return price === undefined ? undefined : cost(usage, price)
}

/**
 * The cost of usage by model: `byModel` (undefined for a model with no price), `known` (the sum
 * over priced models), `unpriced` (models in `byModel`, that is models that answered a request,
 * with no price: whatever tokens they reported, 0 included) and `total` (`known` when every model
 * has a price, else undefined: an unknown cost is never 0).
 *
 * @since 0.1.0
 * @category models
 */
export interface Costs {
  readonly total: number | undefined
  readonly known: number
  readonly byModel: { readonly [model: string]: number | undefined }
  readonly unpriced: ReadonlyArray<string>
}

/**
 * `Costs` of usage by model.
 *
 * @since 0.1.0
 * @category combinators
 */
export const costs = (prices: Prices, byModel: ByModel): Costs => {
  let known = 0
  const out: Record<string, number | undefined> = {}
  const unpriced: Array<string> = []
  for (const [model, usage] of Object.entries(byModel)) {
    const c = costOf(prices, model, usage)
    out[model] = c
    if (c !== undefined) known += c
    else unpriced.push(model)
  }
  return { total: unpriced.length === 0 ? known : undefined, known, byModel: out, unpriced }
}

/**
 * A USD amount as `$0.0016`: at least 2 and at most 6 decimals (trailing zeros cut); an amount
 * below a millionth of a dollar keeps two significant digits (`$0.00000012`), so that a cost
 * that is not 0 is never shown as `$0.00`.
 *
 * @since 0.1.0
 */
export const formatUsd = (usd: number): string => {
  const digits = usd > 0 && usd < 1e-6 ? Math.min(20, 1 - Math.floor(Math.log10(usd))) : 6
  const fixed = usd.toFixed(digits).replace(/0+$/, "")
  const [whole, decimals = ""] = fixed.split(".")
  return `$${whole}.${decimals.padEnd(2, "0")}`
}

// ---------------------------------------------------------------------------------------------
// Budgets
// ---------------------------------------------------------------------------------------------

/**
 * Options of `budget`: `maxTokens` (a positive number of total tokens, `inputTokens +
 * outputTokens`), `maxCost` (a positive USD amount; needs `prices`), `scope` (`"session"`, the
 * default: everything the session used, across turns and resumes; `"turn"`: the current turn).
 * At least one of the limits.
 *
 * @since 0.1.0
 * @category models
 */
export interface BudgetOptions {
  readonly maxTokens?: number | undefined
  readonly maxCost?: number | undefined
  readonly prices?: Prices | undefined
  readonly scope?: "session" | "turn" | undefined
}

/**
 * `budget` options that cannot make a budget (no limit, a limit that is not a positive number,
 * `maxCost` without prices, an invalid price table, an unknown scope). `field` names the option.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidBudget extends Schema.TaggedError<InvalidBudget>()("InvalidBudget", {
  message: Schema.String,
  field: Schema.String
}) {}

const positive = (n: unknown): boolean => typeof n === "number" && Number.isFinite(n) && n > 0

/**
 * The budget's pre-step listener (the pure form of `budget`, for `PreStep.layer([…])`), or why
 * the options make none.
 *
 * @since 0.1.0
 * @category constructors
 */
export const budgetListener = (options: BudgetOptions): Either.Either<PreStep.Listener, InvalidBudget> => {
  const { maxCost, maxTokens } = options
  const scope = options.scope ?? "session"
  const fail = (field: string, message: string) => Either.left(new InvalidBudget({ field, message }))
  const shown = (n: unknown) => typeof n === "number" ? String(n) : JSON.stringify(n) ?? String(n)
  if (scope !== "session" && scope !== "turn") {
    return fail("scope", `budget: scope must be "session" or "turn", got ${JSON.stringify(scope)}`)
  }
  if (maxTokens === undefined && maxCost === undefined) return fail("maxTokens", "budget: give maxTokens, maxCost or both")
  if (maxTokens !== undefined && !positive(maxTokens)) {
    return fail("maxTokens", `budget: maxTokens must be a positive number, got ${shown(maxTokens)}`)
  }
  if (maxCost !== undefined && !positive(maxCost)) {
    return fail("maxCost", `budget: maxCost must be a positive number (USD), got ${shown(maxCost)}`)
  }
  let prices: Prices = {}
  if (maxCost !== undefined && options.prices === undefined) {
    return fail("prices", "budget: maxCost needs prices (USD per 1e6 tokens by model)")
  }
  if (options.prices !== undefined) {
    const decoded = decodePrices(options.prices)
    if (Either.isLeft(decoded)) return fail("prices", `budget: prices: ${decoded.left.path}: ${decoded.left.message}`)
    prices = decoded.right
  }
  const who = scope === "session" ? "the session has" : "this turn has"
  const listener: PreStep.Listener = (payload, next) => {
    const usage = scope === "session" ? payload.usage.session : payload.usage.turn
    const unreported = scope === "session" ? payload.usage.unreported.session : payload.usage.unreported.turn
    if (unreported > 0) {
      const limit = maxTokens !== undefined ? `maxTokens ${maxTokens}` : `maxCost ${formatUsd(maxCost!)}`
      return Effect.succeed(PreStep.Decision.reject(
        `budget: the usage is unknown, ${unreported} model ${
          unreported === 1 ? "response" : "responses"
        } reported no token counts (${limit})`
      ))
    }
    if (maxTokens !== undefined) {
      const used = total(usage)
      if (used >= maxTokens) {
        return Effect.succeed(PreStep.Decision.reject(`budget reached: ${who} used ${used} tokens (maxTokens ${maxTokens})`))
      }
    }
    if (maxCost !== undefined) {
      const c = costs(prices, scope === "session" ? payload.usage.sessionByModel : payload.usage.turnByModel)
      if (c.total === undefined) {
        return Effect.succeed(PreStep.Decision.reject(
          `budget: the cost is unknown, no price for model ${c.unpriced.map((m) => JSON.stringify(m)).join(", ")} (maxCost ${
            formatUsd(maxCost)
          })`
        ))
      }
      if (c.total >= maxCost) {
        return Effect.succeed(
          PreStep.Decision.reject(`budget reached: ${who} cost ${formatUsd(c.total)} (maxCost ${formatUsd(maxCost)})`)
        )
      }
    }
    return next()
  }
  return Either.right(listener)
}

/**
 * A token or cost budget as a pre-step listener layer (§7, §18): before each
 * step's request it reads `payload.usage` (the session's or, `scope: "turn"`, the turn's usage so
 * far) and rejects the step once the total tokens reach `maxTokens` or the cost under `prices`
 * reaches `maxCost` (at `used ≥ limit`), with a reason that names the budget:
 * `budget reached: the session has used 300 tokens (maxTokens 250)`,
 * `budget reached: this turn has cost $0.012 (maxCost $0.01)`. A model used with no price makes
 * the cost unknown, and a `maxCost` budget then rejects (`budget: the cost is unknown, …`); a
 * response in the scope that reported no usage makes the usage unknown, and either budget rejects
 * (`budget: the usage is unknown, 1 model response reported no token counts (maxTokens 250)`). The
 * turn ends `blocked`, its claimed input is dropped `rejected`; a later followup runs when the
 * budget allows it (a turn budget starts each turn at 0; a session budget stays reached).
 * Otherwise it calls the inner listeners. Like `PreStep.listener`, it wraps the `PreStep` it is
 * provided with; invalid options fail the layer with `InvalidBudget`.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { PreStep, Usage } from "effect-agent-loop"
 *
 * // At most 200,000 tokens per session, around the default waterfall.
 * const waterfall = Usage.budget({ maxTokens: 200_000 }).pipe(Layer.provide(PreStep.layer([])))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const budget = (options: BudgetOptions): Layer.Layer<PreStep.PreStep, InvalidBudget, PreStep.PreStep> => {
  const listener = budgetListener(options)
  return Either.isLeft(listener) ? Layer.fail(listener.left) : PreStep.listener(listener.right)
}
