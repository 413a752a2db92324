/**
 * `Prices`: the price lookup (exact, longest prefix, unknown), the cost formula (cached tokens
 * billed once, at their own rate), the USD format and the price table's decoding.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as Prices from "../src/Prices.js"

describe("Prices", () => {
  const prices = {
    "gpt-4o": { input: 2.5, cachedInput: 1.25, output: 10 },
    "gpt-4o-mini": { input: 0.15, output: 0.6 },
    "gpt": { input: 99, output: 99 }
  }

  it("lookup: the exact name, else the longest key that is a prefix, else unknown", () => {
    expect(Prices.priceOf(prices, "gpt-4o")).toBe(prices["gpt-4o"])
    expect(Prices.priceOf(prices, "gpt-4o-2024-08-06")).toBe(prices["gpt-4o"])
    expect(Prices.priceOf(prices, "gpt-4o-mini-2024-07-18")).toBe(prices["gpt-4o-mini"])
    expect(Prices.priceOf(prices, "gpt-5")).toBe(prices.gpt)
    expect(Prices.priceOf(prices, "claude-x")).toBeUndefined()
    expect(Prices.priceOf(prices, "toString")).toBeUndefined()
    expect(Prices.costOf(prices, "claude-x", { inputTokens: 10 })).toBeUndefined()
  })

  it("cost: cached tokens billed once, at their own rate; cachedInput and cacheWrite default to input", () => {
    // 10,000 prompt tokens of which 8,000 cached: 2,000·2.5 + 8,000·1.25 + 500·10 = 20,000 micro-USD.
    expect(Prices.cost({ inputTokens: 10_000, cacheReadTokens: 8_000, outputTokens: 500 }, prices["gpt-4o"])).toBe(0.02)
    // cacheWrite defaults to input: 1,000 written + 1,000 uncached at 2.5, no output.
    expect(Prices.cost({ inputTokens: 2_000, cacheWriteTokens: 1_000 }, prices["gpt-4o"])).toBe(0.005)
    // Reasoning is a part of the output: not billed again.
    expect(Prices.cost({ outputTokens: 1_000_000, reasoningTokens: 999_999 }, prices["gpt-4o-mini"])).toBe(0.6)
    expect(Prices.formatUsd(0.02)).toBe("$0.02")
    expect(Prices.formatUsd(0.0016)).toBe("$0.0016")
    expect(Prices.formatUsd(12.5)).toBe("$12.50")
    expect(Prices.formatUsd(1.2e-7)).toBe("$0.00000012")
    expect(Prices.formatUsd(4.56e-10)).toBe("$0.00000000046")
    expect(Prices.formatUsd(0)).toBe("$0.00")
  })

  it("decode: a table of {input, cachedInput?, cacheWrite?, output}; a problem is named by its JSON path", () => {
    expect(Prices.decode({ m: { input: 1, output: 2 } })).toEqual(Either.right({ m: { input: 1, output: 2 } }))
    const error = (u: unknown) =>
      Either.match(Prices.decode(u), { onLeft: (e) => `${e.path}: ${e.message}`, onRight: () => "ok" })
    expect(error({ "gpt-4o": { input: 1 } })).toBe("$[\"gpt-4o\"].output: is missing")
    expect(error({ m: { input: 1, output: 2, cached: 1 } })).toBe(
      "$.m.cached: is unexpected, expected: \"input\" | \"cachedInput\" | \"cacheWrite\" | \"output\""
    )
    expect(error([1])).toMatch(/^\$: Expected a price table/)
  })
})
