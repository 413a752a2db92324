/**
 * Plain-JSON checking and deep freezing for values that enter the session log (DESIGN.md §2).
 */

/** A value is not plain JSON; `path` is a dotted path to the offending part. */
export class InvalidJson extends Error {
  constructor(message: string, readonly path: string) {
    super(`${message} (at ${path})`)
  }
}

/**
 * Checks that `value` is plain JSON (null, boolean, finite number, string, array, plain object;
 * no cycles) and deep-freezes it in place. Returns the same value. Throws `InvalidJson`.
 */
export const deepFreezeJson = (value: unknown, path: string): unknown => {
  walk(value, path, new Set())
  return value
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
      if (seen.has(value)) throw new InvalidJson("cycle", path)
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
        const item = (value as Record<string, unknown>)[key]
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
