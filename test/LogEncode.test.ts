/**
 * The stores' line encoder for appends (`encodeCommitted`, `src/internal/logCodec.ts`) writes the
 * envelope by hand around `JSON.stringify(data)`: its bytes must be those of `encodeEvents`
 * (`JSON.stringify(event)` per line) for every event `commitDrafts` makes, including the cases
 * where it falls back (a `surfaceOp`, a `time` that is not finite, `data` with a `toJSON` or that
 * serializes to nothing), and with the type's JSON made once per type (a memo that must give every
 * type its own, in any order).
 */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { commitDrafts, encodeCommitted, encodeEvents } from "../src/internal/logCodec.js"
import type { EventDraft } from "../src/SessionEvent.js"

const same = (drafts: ReadonlyArray<EventDraft>, seq: number, time: number) => {
  const events = commitDrafts(drafts, seq, time)
  expect(encodeCommitted(events)).toBe(encodeEvents(events))
}

describe("encodeCommitted", () => {
  it("gives the bytes of encodeEvents for the cases it writes by hand and those it leaves to JSON.stringify", () => {
    const withKeyedToJson = { toJSON: (key: string) => ({ key }) }
    const drafts: ReadonlyArray<EventDraft> = [
      { type: "plugin/note", data: { i: 1, text: "é \u2028 \ud800 \"quoted\" \\ \n" } },
      { type: "plugin/\"odd\" type ✓", data: [1, "two", null, { three: [true] }] },
      { type: "plugin/scalar", data: "text" },
      { type: "plugin/number", data: -0 },
      { type: "plugin/null", data: null },
      { type: "plugin/none", data: undefined },
      { type: "plugin/date", data: new Date(86_400_000) },
      { type: "plugin/keyed", data: withKeyedToJson },
      { type: "plugin/nested-date", data: { at: new Date(0), n: Number.NaN, inf: -Infinity } },
      { type: "plugin/surface", data: { i: 2 }, surfaceOp: { op: "replace", start: 1, end: 3 } },
      { type: "plugin/é ✓ \ud83d\ude00 \udfff", data: { text: "€ \ud83d\ude00 \ud800 ☃" } },
      { type: "plugin/note", data: { i: 3 } }
    ]
    for (const time of [0, 1_733_000_000_123, -5, 1e21, 0.5, Number.NaN, Infinity]) same(drafts, 7, time)
    // The keyed toJSON is called with "data", as JSON.stringify(event) calls it.
    expect(encodeCommitted(commitDrafts([drafts[7]!], 0, 0))).toBe(
      "{\"type\":\"plugin/keyed\",\"seq\":0,\"time\":0,\"data\":{\"key\":\"data\"}}\n"
    )
  })

  it("gives the bytes of encodeEvents for arbitrary JSON data", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            type: fc.oneof(fc.constantFrom("plugin/a", "plugin/b"), fc.string({ minLength: 1, unit: "binary" })),
            data: fc.oneof(fc.jsonValue({ maxDepth: 4 }), fc.jsonValue({ maxDepth: 2, stringUnit: "binary" }))
          }),
          { maxLength: 4 }
        ),
        fc.nat(),
        fc.oneof(fc.integer(), fc.double()),
        (drafts, seq, time) => same(drafts, seq, time)
      ),
      { numRuns: 500 }
    )
  })
})
