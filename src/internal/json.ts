/**
 * Plain-JSON checking and deep freezing for values that enter the session log (§2).
 * Two functions, two contracts: `checkJson` is for values from outside (a caller's message, a
 * plugin's data, a tool's result): it checks that the value is plain JSON and freezes it;
 * `deepFreeze` is for values the runtime built itself or the log reader parsed (JSON by
 * construction): it only freezes.
 */

/**
 * The deepest a line of a session log may nest: arrays and objects on the deepest path, the
 * line's own object counting 1 (`{"data":[[]]}` nests 3). The reader refuses a deeper line and
 * the stores refuse to append one. Parsing is not the problem (`JSON.parse` takes 10^7 levels);
 * what walks a value afterwards is: freezing, validating, `JSON.stringify`, the projections. Measured
 * here (Node 20): freezing overflowed the stack between 5,000 and 8,000 levels, the schema check
 * of nested tool results between 1,000 and 2,000, `JSON.stringify` in `transcript` at 4,000; 256
 * leaves a margin of four and more, and no real log comes close (§3.1).
 */
export const MAX_LINE_DEPTH = 256

/**
 * The deepest a value handed in from outside (a message, event data, a tool's result, a cause)
 * may nest: `checkJson` refuses a deeper one. Less than `MAX_LINE_DEPTH`, so that the value still
 * fits in the event that logs it (which puts it at most 6 levels down: a tool result's content).
 */
export const MAX_VALUE_DEPTH = MAX_LINE_DEPTH - 16

/** The message of a value nested deeper than `max` levels. */
const tooDeep = (max: number): string => `nested deeper than ${max} levels of arrays and objects`

/** A path cut to its first 80 characters (the path of a too deep value is as long as it is deep). */
const shortPath = (path: string): string => path.length <= 80 ? path : `${path.slice(0, 80)}…`

/** A value is not plain JSON; `path` is a dotted path to the offending part. */
export class InvalidJson extends Error {
  constructor(message: string, readonly path: string) {
    super(`${message} (at ${path})`)
  }
}

/**
 * Checks that `value` is plain JSON (null, boolean, finite number, string, array, plain object;
 * no cycles; no getters, setters or `toJSON`, which would make `JSON.stringify` write something
 * else than what was checked; at most `MAX_VALUE_DEPTH` levels of arrays and objects) and
 * deep-freezes it in place. Returns the same value. Throws `InvalidJson`.
 */
export const checkJson = <A>(value: A, path: string): A => {
  // The fast walk builds no paths and allocates nothing; only a value that fails it is walked
  // again, with paths, to name the offending part.
  let ok: boolean
  try {
    ok = fastWalk(value)
  } catch {
    ok = false // a Proxy that throws, say: the slow walk names it
  } finally {
    ancestors.length = 0
  }
  if (!ok) walk(value, path, new Set())
  return value
}

/** What makes an object's JSON differ from what a walk of its values sees. */
const hasHiddenJson = (value: object): boolean => {
  if (Object.prototype.hasOwnProperty.call(value, "toJSON")) return true
  return false
}

/** The objects on the path from the root to the value being checked (cycle detection). */
const ancestors: Array<object> = []

/** Checks and freezes like `walk`, without paths; false when the value is not plain JSON. */
const fastWalk = (value: unknown): boolean => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true
    case "number":
      return Number.isFinite(value)
    case "object": {
      if (value === null) return true
      if (ancestors.length >= MAX_VALUE_DEPTH) return false
      for (let i = 0; i < ancestors.length; i++) if (ancestors[i] === value) return false
      let ok = true
      if (hasHiddenJson(value)) return false
      if (Array.isArray(value)) {
        ancestors.push(value)
        for (let i = 0; i < value.length; i++) {
          const item: unknown = value[i]
          if (item === undefined || !fastWalk(item)) {
            ok = false
            break
          }
        }
      } else {
        const proto = Object.getPrototypeOf(value)
        if (proto !== Object.prototype && proto !== null) return false
        ancestors.push(value)
        const keys = Object.keys(value)
        for (let i = 0; i < keys.length; i++) {
          const descriptor = Object.getOwnPropertyDescriptor(value, keys[i]!)!
          if (descriptor.get !== undefined || descriptor.set !== undefined) {
            ok = false
            break
          }
          const item: unknown = descriptor.value
          if (item !== undefined && !fastWalk(item)) {
            ok = false
            break
          }
        }
      }
      ancestors.pop()
      if (ok) Object.freeze(value)
      return ok
    }
    default:
      return false
  }
}

const walk = (value: unknown, path: string, seen: Set<object>): void => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return
    case "number":
      if (!Number.isFinite(value)) throw new InvalidJson(`non-finite number ${value}`, path)
      return
    case "object": {
      if (value === null) return
      // `seen` holds the objects on the path from the root: its size is this value's depth.
      if (seen.size >= MAX_VALUE_DEPTH) throw new InvalidJson(tooDeep(MAX_VALUE_DEPTH), shortPath(path))
      if (seen.has(value)) throw new InvalidJson("cycle", path)
      if (hasHiddenJson(value)) throw new InvalidJson("has a toJSON method", path)
      if (Array.isArray(value)) {
        seen.add(value)
        for (let i = 0; i < value.length; i++) {
          const item = value[i]
          if (item === undefined) throw new InvalidJson("undefined array element", `${path}[${i}]`)
          walk(item, `${path}[${i}]`, seen)
        }
        seen.delete(value)
        Object.freeze(value)
        return
      }
      const proto = Object.getPrototypeOf(value)
      if (proto !== Object.prototype && proto !== null) {
        throw new InvalidJson(`not a plain object (${(value as object).constructor?.name ?? "unknown"})`, path)
      }
      seen.add(value)
      for (const key of Object.keys(value)) {
        const descriptor = Object.getOwnPropertyDescriptor(value, key)!
        if (descriptor.get !== undefined || descriptor.set !== undefined) {
          throw new InvalidJson("has a getter or setter", `${path}.${key}`)
        }
        const item: unknown = descriptor.value
        if (item === undefined) continue
        walk(item, `${path}.${key}`, seen)
      }
      seen.delete(value)
      Object.freeze(value)
      return
    }
    default:
      throw new InvalidJson(`${typeof value} is not JSON`, path)
  }
}

/**
 * Deep-freezes a JSON value in place and returns it. A subtree that is already frozen is taken
 * as deep-frozen and not walked again (values `checkJson` checked freeze bottom-up).
 */
export const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) freezeWalk(value)
  return value
}

const freezeWalk = (value: object): void => {
  Object.freeze(value)
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item = value[i]
      if (typeof item === "object" && item !== null && !Object.isFrozen(item)) freezeWalk(item)
    }
  } else {
    for (const key in value) {
      const item = (value as Record<string, unknown>)[key]
      if (typeof item === "object" && item !== null && !Object.isFrozen(item)) freezeWalk(item)
    }
  }
}

/**
 * Deep-freezes a freshly parsed JSON value in place (every level: nothing of it is frozen yet)
 * unless it nests deeper than `max` levels of arrays and objects; returns whether it did not.
 * Recurses at most `max + 1` levels, so a hostile depth cannot overflow the stack.
 */
export const freezeWithin = (value: unknown, max: number): boolean =>
  typeof value !== "object" || value === null || objectFreezeWithin(value, max)

/** `freezeWithin` of an object; recurses into objects only (no call per string or number). */
const objectFreezeWithin = (value: object, max: number): boolean => {
  if (max <= 0) return false
  Object.freeze(value)
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i]
      if (typeof item === "object" && item !== null && !objectFreezeWithin(item, max - 1)) return false
    }
  } else {
    for (const key in value) {
      const item: unknown = (value as Record<string, unknown>)[key]
      if (typeof item === "object" && item !== null && !objectFreezeWithin(item, max - 1)) return false
    }
  }
  return true
}

/**
 * Whether `value` nests deeper than `max` levels of arrays and objects (frozen parts included;
 * it stops looking one level past `max`).
 */
export const deeperThan = (value: unknown, max: number): boolean =>
  typeof value === "object" && value !== null && objectDeeperThan(value, max)

/** `deeperThan` of an object; recurses into objects only (a third faster than a call per value). */
const objectDeeperThan = (value: object, max: number): boolean => {
  if (max <= 0) return true
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i]
      if (typeof item === "object" && item !== null && objectDeeperThan(item, max - 1)) return true
    }
  } else {
    for (const key in value) {
      const item: unknown = (value as Record<string, unknown>)[key]
      if (typeof item === "object" && item !== null && objectDeeperThan(item, max - 1)) return true
    }
  }
  return false
}

/**
 * A decoding path as JSON path text: `$.actions[2].at`, `$["gpt-4o"].input` (keys that are not
 * identifiers quoted). Scenario and price-table errors name the problem's place with it.
 */
export const jsonPath = (path: ReadonlyArray<PropertyKey>): string =>
  "$" +
  path.map((k) =>
    typeof k === "number"
      ? `[${k}]`
      : /^[A-Za-z_$][\w$]*$/.test(String(k))
      ? `.${String(k)}`
      : `[${JSON.stringify(String(k))}]`
  ).join("")
