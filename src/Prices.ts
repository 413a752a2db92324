/**
 * Prices and the cost of token usage (§18). A price table gives USD per million tokens, per
 * model; a model is looked up by its exact name, else the longest key that is a prefix of it. A
 * model with no price has an unknown cost, never 0. No price is shipped as a fact
 * (`examples/prices.example.json` shows the shape).
 *
 * Decisions:
 * - `costs`: a model that answered a request and has no price makes the total unknown, whatever
 *   tokens it reported (0 included).
 * - Cached tokens are billed once, at their own rate (`cachedInput`, `cacheWrite`; default
 *   `input`); reasoning tokens are part of the output.
 *
 * @since 0.1.0
 */
import { Either, ParseResult, Schema } from "effect"
import { jsonPath } from "./internal/json.js"
import { type ByModel, of, type Totals, type Usage } from "./Usage.js"

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
export const decode = (input: unknown): Either.Either<Prices, InvalidPrices> => {
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
 * import { Prices } from "effect-agent-loop"
 *
 * // 1,000 prompt tokens of which 800 cached, 100 output; example rates, not real prices.
 * Prices.cost({ inputTokens: 1000, cacheReadTokens: 800, outputTokens: 100 }, { input: 2, cachedInput: 0.5, output: 8 })
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
