/**
 * The log reader's fast checks against the event Schemas (§3.1, §3.2): the reader
 * validates each core event's `data` with a hand-written check and asks the Schema only when
 * the check says no, so each check must accept exactly what its Schema decodes. For arbitrary
 * values of each Schema (`Arbitrary.make`), both accept; for arbitrary mutations of them (a
 * field removed, a value of another type put anywhere in the value), both give the same answer;
 * a required field removed or set to `null` is refused by both. Our format (`coreDataSchemas`)
 * and DSH v0's (`legacyDataSchemas`) alike. Seeded runs.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Either, FastCheck as fc, Schema } from "effect"
import { currentChecks, legacyChecks, legacyDataSchemas } from "../src/internal/logCodec.js"
import { coreDataSchemas, coreEventTypes } from "../src/SessionEvent.js"

const SEED = 20240917
const RUNS = 150

// Small values (arrays of a few messages of a few blocks): the run takes seconds, not minutes.
fc.configureGlobal({ baseSize: "xsmall" })

type Path = ReadonlyArray<string | number>

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Every path into `u` (itself included), objects and arrays only, at most `depth` deep. */
const pathsOf = (u: unknown, depth: number, at: Path = [], out: Array<Path> = []): Array<Path> => {
  out.push(at)
  if (depth === 0) return out
  if (Array.isArray(u)) u.forEach((v, i) => pathsOf(v, depth - 1, [...at, i], out))
  else if (isRecord(u)) { for (const key of Object.keys(u)) pathsOf(u[key], depth - 1, [...at, key], out) }
  return out
}

/** A copy of `u` with the value at `path` removed (`replacement` undefined) or replaced. */
const mutate = (u: unknown, path: Path, replacement: { readonly value: unknown } | undefined): unknown => {
  if (path.length === 0) return replacement === undefined ? undefined : replacement.value
  const [head, ...rest] = path
  if (Array.isArray(u)) {
    const copy = [...u]
    const i = head as number
    if (rest.length === 0 && replacement === undefined) copy.splice(i, 1)
    else copy[i] = mutate(u[i], rest, replacement)
    return copy
  }
  const copy = { ...(u as Record<string, unknown>) }
  const key = head as string
  if (rest.length === 0 && replacement === undefined) delete copy[key]
  else copy[key] = mutate(copy[key], rest, replacement)
  return copy
}

/** Values of every JSON kind, and the edges of the number checks. */
const WRONG: ReadonlyArray<unknown> = [null, 42, -1, 1.5, 2 ** 53, "x", "", true, false, [], {}, [{}], { kind: 1 }]

const mutation = fc.record({
  path: fc.nat(),
  remove: fc.boolean(),
  wrong: fc.constantFrom(...WRONG)
})

const cases = [
  {
    format: "ours",
    schemas: coreDataSchemas as { readonly [type: string]: Schema.Schema<any, any, never> },
    checks: currentChecks
  },
  { format: "DSH v0", schemas: legacyDataSchemas, checks: legacyChecks }
] as const

describe.each(cases)("fast checks of $format core data", ({ checks, schemas }) => {
  it("cover exactly the core event types", () => {
    expect(Object.keys(checks).sort()).toEqual([...coreEventTypes].sort())
    expect(Object.keys(schemas).sort()).toEqual([...coreEventTypes].sort())
  })

  describe.each([...coreEventTypes])("%s", (type) => {
    const schema = schemas[type]!
    const check = checks[type]!
    const decodes = (u: unknown): boolean => Either.isRight(Schema.decodeUnknownEither(schema)(u))
    const arbitrary = Arbitrary.make(schema)

    it("accepts every value of its Schema", () => {
      fc.assert(
        fc.property(arbitrary, (value) => {
          expect([check(value), decodes(value)]).toEqual([true, true])
        }),
        { seed: SEED, numRuns: RUNS }
      )
    })

    it("agrees with its Schema on every mutation of a value", () => {
      let refused = 0
      fc.assert(
        fc.property(arbitrary, mutation, (value, m) => {
          const paths = pathsOf(value, 6)
          const path = paths[m.path % paths.length]!
          const mutated = mutate(value, path, m.remove ? undefined : { value: m.wrong })
          const verdict = decodes(mutated)
          expect(check(mutated)).toBe(verdict)
          if (!verdict) refused++
        }),
        { seed: SEED, numRuns: RUNS }
      )
      // Not vacuous: a good part of the mutations make invalid data.
      expect(refused).toBeGreaterThan(RUNS / 30)
    })

    it("refuses a required field removed or set to null", () => {
      const [value] = fc.sample(arbitrary, { seed: SEED, numRuns: 1 })
      const ast = Schema.typeSchema(schema).ast
      const required = ast._tag === "TypeLiteral"
        ? ast.propertySignatures.filter((p) => !p.isOptional && p.type._tag !== "UnknownKeyword").map((p) => p.name)
        : []
      for (const key of required) {
        for (const mutated of [mutate(value, [key as string], undefined), mutate(value, [key as string], { value: null })]) {
          expect([String(key), check(mutated), decodes(mutated)]).toEqual([String(key), false, false])
        }
      }
      expect([check(null), decodes(null), check([]), decodes([]), check("x"), decodes("x")]).toEqual([
        false,
        false,
        false,
        false,
        false,
        false
      ])
    })
  })
})
