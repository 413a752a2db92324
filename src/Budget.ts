/**
 * Token and cost budgets (§18; a pre-step listener, §7): a pre-step listener that rejects a step
 * once the tokens (or cost) used so far reach the limit (refused at `used ≥ limit`, checked at the
 * pre-step, before the step's request and before a compaction the step runs first: one step may
 * go past the limit by its own request and a compaction's), or once the usage is unknown (a
 * response in the budget's scope reported none); the turn ends `blocked` and its claimed input is
 * dropped `rejected`. It reads the usage the pre-step payload carries (`PreStep.PreStepUsage`,
 * the sums `Usage.fromEvents` gives from the log, the sub-agents' runs included) and prices it
 * with `Prices`. A budget covers the sub-agents (§27 rule 10): a child runs its parent's waterfall
 * with its usage starting from its parent's, and the parent counts the child's run once it ends.
 *
 * @since 0.1.0
 */
import { Effect, Either, Layer, Schema } from "effect"
import * as PreStep from "./PreStep.js"
import { costs, decode, formatUsd, type Prices } from "./Prices.js"
import { total } from "./Usage.js"

/**
 * Options of a budget (`layer`, `make`): `maxTokens` (a positive number of total tokens, `inputTokens +
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
 * Budget options that cannot make a budget (no limit, a limit that is not a positive number,
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
 * The budget's pre-step listener (the pure form of `layer`, for `PreStep.layer([…])`), or why
 * the options make none.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: BudgetOptions): Either.Either<PreStep.Listener, InvalidBudget> => {
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
    const decoded = decode(options.prices)
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
 * budget allows it (a turn budget starts each turn at 0; a session budget stays reached). A
 * sub-agent's tokens count against its parent's budget (§27 rule 10): the child is stopped at the
 * parent's limit (its call fails `TOOL_FAILED`), and so is the parent's next step.
 * Otherwise it calls the inner listeners. Like `PreStep.listener`, it wraps the `PreStep` it is
 * provided with; invalid options fail the layer with `InvalidBudget`.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Budget, PreStep } from "effect-agent-loop"
 *
 * // At most 200,000 tokens per session, around the default waterfall.
 * const waterfall = Budget.layer({ maxTokens: 200_000 }).pipe(Layer.provide(PreStep.layer([])))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: BudgetOptions): Layer.Layer<PreStep.PreStep, InvalidBudget, PreStep.PreStep> => {
  const listener = make(options)
  return Either.isLeft(listener) ? Layer.fail(listener.left) : PreStep.listener(listener.right)
}
