/**
 * The source of message and session ids (§2): random UUIDs by default, seeded and
 * reproducible under the simulator (§15).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer } from "effect"
import { randomFillSync } from "node:crypto"
import { flatten } from "./internal/flat.js"

/**
 * @since 0.1.0
 * @category services
 */
export interface IdGeneratorService {
  /** A fresh id, flat string. */
  readonly next: Effect.Effect<string>
  /**
   * The same as `next` as a plain call, for generators that need no effect: the agent takes
   * the ids of a batch of tool results inside one synchronous critical section with it.
   * Optional: without it the agent runs `next` once per id.
   */
  readonly nextSync?: (() => string) | undefined
}

/**
 * The id generator in context, a `Context.Reference`: without a layer, `yield* IdGenerator`
 * gives `random` (§2), so `Agent.make`, `Agent.resume` and the stores' `create` do not require
 * it; `layer`, `layerSeeded(seed)` or `Layer.succeed(IdGenerator, ...)` replace it.
 *
 * @since 0.1.0
 * @category services
 */
export class IdGenerator extends Context.Reference<IdGenerator>()("effect-agent-loop/IdGenerator", {
  defaultValue: (): IdGeneratorService => random
}) {
  /**
   * A fresh id from the `IdGenerator` in context (`random` when none is provided). Its type
   * still names `IdGenerator`, as does that of `Message.UserMessage.make`: code that makes
   * messages says where their ids come from (a seeded simulation, an agent's own generator).
   */
  static readonly next: Effect.Effect<string, never, IdGenerator> = Effect.flatMap(IdGenerator, (g) => g.next)
}

/** How many ids' random bytes are drawn at a time (what `crypto.randomUUID` caches too). */
const POOL = 128
const HEX = new Uint8Array(Array.from("0123456789abcdef", (c) => c.charCodeAt(0)))
const randomBytes = new Uint8Array(16 * POOL)
const text = Buffer.allocUnsafe(36 * POOL)
let pooled = POOL

/**
 * Writes `POOL` version-4 UUIDs (RFC 9562 layout: version 4, variant 10) as ASCII into `text`,
 * from fresh random bytes of the same source as `crypto.randomUUID` (`randomFillSync`).
 */
const refill = (): void => {
  randomFillSync(randomBytes)
  let o = 0
  for (let u = 0; u < POOL; u++) {
    for (let b = 0; b < 16; b++) {
      let byte = randomBytes[16 * u + b]!
      if (b === 6) byte = (byte & 0x0f) | 0x40
      else if (b === 8) byte = (byte & 0x3f) | 0x80
      if (b === 4 || b === 6 || b === 8 || b === 10) text[o++] = 45 // "-"
      text[o++] = HEX[byte >> 4]!
      text[o++] = HEX[byte & 15]!
    }
  }
  pooled = 0
}

/**
 * A random UUID read out of the pool as one flat string (§24): ~0.12 µs and 56 bytes,
 * against ~0.22 µs and ~480 bytes of concatenations (then a flat copy) for
 * `flatten(crypto.randomUUID())`, measured here; an agent takes one per message.
 */
const flatUUID = (): string => {
  if (pooled === POOL) refill()
  const start = 36 * pooled++
  return text.toString("latin1", start, start + 36)
}

/**
 * Random UUIDs (version 4, from `crypto.randomFillSync` like `crypto.randomUUID`), flat strings.
 *
 * @since 0.1.0
 * @category constructors
 */
export const random: IdGeneratorService = { next: Effect.sync(() => flatUUID()), nextSync: () => flatUUID() }

/**
 * Deterministic UUID-shaped ids (version-4 layout, 122 bits from the generator) from a 32-bit
 * seed, for simulations and tests (§15). The generator is xoshiro128** (Blackman and
 * Vigna): 128 bits of state, period 2^128 − 1, four 32-bit outputs per id; its state is filled
 * from the seed by splitmix32, so distinct seeds start from distinct states. (It replaced a
 * 32-bit xorshift whose period was 4,095 outputs for every seed, so a run repeated its ids after
 * about 1,000 of them.)
 *
 * @since 0.1.0
 * @category constructors
 */
export const seeded = (seed: number): IdGeneratorService => {
  let m = seed >>> 0
  const splitmix32 = (): number => {
    m = (m + 0x9e3779b9) | 0
    let t = m ^ (m >>> 16)
    t = Math.imul(t, 0x21f0aaad)
    t ^= t >>> 15
    t = Math.imul(t, 0x735a2d97)
    return (t ^ (t >>> 15)) >>> 0
  }
  let s0 = splitmix32(), s1 = splitmix32(), s2 = splitmix32(), s3 = splitmix32()
  // The all-zero state is the one xoshiro never leaves.
  if ((s0 | s1 | s2 | s3) === 0) s0 = 1
  const rotl = (x: number, k: number) => (x << k) | (x >>> (32 - k))
  const nextU32 = (): number => {
    const result = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0
    const t = s1 << 9
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = rotl(s3, 11)
    return result
  }
  const hex = (n: number) => n.toString(16).padStart(8, "0")
  const nextSync = (): string => {
    const a = hex(nextU32()), b = hex(nextU32()), c = hex(nextU32()), d = hex(nextU32())
    return flatten(
      `${a}-${b.slice(0, 4)}-4${b.slice(5, 8)}-${(8 | (parseInt(c[0]!, 16) & 3)).toString(16)}${c.slice(1, 4)}-${c.slice(4)}${d}`
    )
  }
  return { next: Effect.sync(nextSync), nextSync }
}

/**
 * Random ids (the default).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<IdGenerator> = Layer.succeed(IdGenerator, random)

/**
 * Seeded ids.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSeeded = (seed: number): Layer.Layer<IdGenerator> => Layer.sync(IdGenerator, () => seeded(seed))

/**
 * The `IdGenerator` in context, or `random` when there is none: how every constructor that takes
 * ids (`Agent.make`, the stores' `create`, `SessionReference`) picks its generator. The same as
 * `yield* IdGenerator` (the reference's default).
 *
 * @since 0.1.0
 * @category constructors
 */
export const current: Effect.Effect<IdGeneratorService> = IdGenerator
