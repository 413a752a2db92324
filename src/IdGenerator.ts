/**
 * The source of message and session ids (DESIGN.md §2): random UUIDs by default, seeded and
 * reproducible under the simulator (DESIGN.md §15).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
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
 * @since 0.1.0
 * @category services
 */
export class IdGenerator extends Context.Tag("effect-agent-loop/IdGenerator")<IdGenerator, IdGeneratorService>() {
  /** A fresh id from the `IdGenerator` in context. */
  static readonly next: Effect.Effect<string, never, IdGenerator> = Effect.flatMap(IdGenerator, (g) => g.next)
}

const flatUUID = (): string => flatten(randomUUID())

/**
 * Random UUIDs (`crypto.randomUUID`), flat strings.
 *
 * @since 0.1.0
 * @category constructors
 */
export const random: IdGeneratorService = { next: Effect.sync(() => flatUUID()), nextSync: () => flatUUID() }

/**
 * Deterministic UUID-shaped ids from a 32-bit seed (xorshift128+), for simulations and tests.
 *
 * @since 0.1.0
 * @category constructors
 */
export const seeded = (seed: number): IdGeneratorService => {
  let s0 = (seed >>> 0) || 0x9e3779b9
  let s1 = 0x85ebca6b ^ s0
  const nextU32 = () => {
    let x = s0
    const y = s1
    s0 = y
    x ^= x << 23
    x ^= x >>> 17
    x ^= y ^ (y >>> 26)
    s1 = x >>> 0
    return (s0 + s1) >>> 0
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
 * ids (`Agent.make`, the stores' `create`, `SessionReference`) picks its generator.
 *
 * @since 0.1.0
 * @category constructors
 */
export const current: Effect.Effect<IdGeneratorService> = Effect.map(
  Effect.serviceOption(IdGenerator),
  Option.getOrElse(() => random)
)
