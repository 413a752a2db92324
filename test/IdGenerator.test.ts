import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Agent from "../src/Agent.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as SessionStore from "../src/SessionStore.js"

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe("IdGenerator.seeded", () => {
  it("gives 100,000 distinct UUID-shaped ids for each seed (the old generator repeated after 4,095)", () => {
    for (const seed of [0, 42, 0xffffffff]) {
      const next = IdGenerator.seeded(seed).nextSync!
      const seen = new Set<string>()
      for (let i = 0; i < 100_000; i++) {
        const id = next()
        if (i < 1000) expect(id).toMatch(UUID_V4)
        seen.add(id)
      }
      expect([seed, seen.size]).toEqual([seed, 100_000])
    }
  })

  it.effect("is deterministic per seed, and seeds give different sequences", () =>
    Effect.gen(function*() {
      const take = (seed: number) => Array.from({ length: 50 }, IdGenerator.seeded(seed).nextSync!)
      expect(take(7)).toEqual(take(7))
      // `next` and `nextSync` draw from the same sequence.
      const g = IdGenerator.seeded(7)
      const mixed = [yield* g.next, g.nextSync!(), yield* g.next]
      expect(mixed).toEqual(take(7).slice(0, 3))
      const firsts = new Set([0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((s) => take(s)[0]))
      expect(firsts.size).toBe(10)
      const flat = new Set([...take(1), ...take(2)])
      expect(flat.size).toBe(100)
    }))
})

describe("IdGenerator.random", () => {
  it.effect("gives version-4 UUIDs, 100,000 distinct; `next` and `nextSync` draw from the same pool", () =>
    Effect.gen(function*() {
      const next = IdGenerator.random.nextSync!
      const seen = new Set<string>()
      // Past several refills of the pool (128 ids each), version and variant bits in every id.
      for (let i = 0; i < 100_000; i++) {
        const id = next()
        if (!UUID_V4.test(id)) expect(id).toMatch(UUID_V4)
        seen.add(id)
      }
      expect(seen.size).toBe(100_000)
      const more = [yield* IdGenerator.random.next, next(), yield* IdGenerator.random.next]
      for (const id of more) expect([id, seen.has(id)]).toEqual([expect.stringMatching(UUID_V4), false])
      expect(new Set(more).size).toBe(3)
    }))
})

describe("the IdGenerator in context (a Context.Reference, §2)", () => {
  const idsOf = (events: ReadonlyArray<{ readonly type: string; readonly data: unknown }>) =>
    events.flatMap((e) =>
      e.type === "user/message"
        ? [(e.data as any).id as string]
        : e.type === "assistant/message"
        ? [(e.data as any).message.id as string]
        : []
    )

  it.effect("none provided: `yield* IdGenerator` and `current` give `random`; a provided one replaces it", () =>
    Effect.gen(function*() {
      expect(yield* IdGenerator.IdGenerator).toBe(IdGenerator.random)
      expect(yield* IdGenerator.current).toBe(IdGenerator.random)
      const seeded = IdGenerator.seeded(5)
      const provided = Layer.succeed(IdGenerator.IdGenerator, seeded)
      expect(yield* Effect.provide(IdGenerator.IdGenerator, provided)).toBe(seeded)
      expect(yield* Effect.provide(IdGenerator.current, provided)).toBe(seeded)
      const two = Effect.all([IdGenerator.IdGenerator.next, IdGenerator.IdGenerator.next])
      const expected = Array.from({ length: 2 }, IdGenerator.seeded(6).nextSync!)
      expect(yield* Effect.provide(two, IdGenerator.layerSeeded(6))).toEqual(expected)
    }))

  it.scoped("an agent made without one names its session and messages with random UUIDs", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make()
      yield* agent.followup("hi")
      yield* agent.awaitIdle
      const ids = [agent.id, ...idsOf(agent.log.events())]
      expect(ids).toHaveLength(3)
      for (const id of ids) expect(id).toMatch(UUID_V4)
      expect(new Set(ids).size).toBe(3)
    }).pipe(Effect.provide(Layer.merge(SessionStore.layerMemory, Model.layer(ScriptedModel.make([{ text: "hello" }]))))))

  it.scoped("an agent made under `layerSeeded` takes its ids from it, in order", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make()
      yield* agent.followup("hi")
      yield* agent.awaitIdle
      expect([agent.id, ...idsOf(agent.log.events())]).toEqual(Array.from({ length: 3 }, IdGenerator.seeded(9).nextSync!))
    }).pipe(
      Effect.provide(
        Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layerSeeded(9), Model.layer(ScriptedModel.make([{ text: "hello" }])))
      )
    ))
})
