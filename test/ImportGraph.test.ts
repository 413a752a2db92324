/**
 * The modules of `src/` import each other without a circle: every relative static import
 * (`import`, `import type`, `export … from`, a bare `import "./x.js"`) of every `src/` `.ts`/`.tsx`
 * file is an edge, and the graph's strongly connected components (Tarjan) are all single modules
 * that do not import themselves. A type-only import counts: two modules that need each other's
 * types are one concept split in two, or share a piece that belongs in a third module. Dynamic
 * `import()` does not count (it is how an optional peer is loaded late, not a dependency of the
 * module's evaluation). The check itself is shown to fail on canary graphs.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

type Graph = ReadonlyMap<string, ReadonlyArray<string>>

/**
 * The relative module specifiers a source text imports statically. Only statements that start a
 * line count, so an `import` in a doc comment's example (` * import …`) is not an edge.
 */
const importsOf = (text: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  const statement = /^(?:import|export)\b[^;"'`]*?(?:\bfrom\s*)?["'](\.{1,2}\/[^"']+)["']/gm
  for (const m of text.matchAll(statement)) out.push(m[1]!)
  return out
}

/** The `.ts`/`.tsx` file a relative `.js` specifier names, relative to `root`, if it exists. */
const resolve = (root: string, from: string, specifier: string): string | undefined => {
  const base = Path.resolve(Path.dirname(Path.join(root, from)), specifier).replace(/\.jsx?$/, "")
  for (const ext of [".ts", ".tsx"]) {
    if (Fs.existsSync(base + ext)) return Path.relative(root, base + ext).split(Path.sep).join("/")
  }
  return undefined
}

/** The import graph of every `.ts`/`.tsx` file under `root` (keys and edges relative to it). */
const graphOf = (root: string): Graph => {
  const graph = new Map<string, Array<string>>()
  const walk = (dir: string): void => {
    for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
      const file = Path.join(dir, entry.name)
      if (entry.isDirectory()) walk(file)
      else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith(".d.ts")) {
        const key = Path.relative(root, file).split(Path.sep).join("/")
        const edges = new Set<string>()
        for (const specifier of importsOf(Fs.readFileSync(file, "utf8"))) {
          const target = resolve(root, key, specifier)
          if (target === undefined) throw new Error(`${key}: cannot resolve ${specifier}`)
          edges.add(target)
        }
        graph.set(key, [...edges].sort())
      }
    }
  }
  walk(root)
  return graph
}

/**
 * The circles of a graph: each strongly connected component of more than one node, or of one
 * node with an edge to itself (Tarjan's algorithm), as its sorted node names; sorted.
 */
const cycles = (graph: Graph): ReadonlyArray<ReadonlyArray<string>> => {
  let counter = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const out: Array<ReadonlyArray<string>> = []
  const connect = (v: string): void => {
    index.set(v, counter)
    low.set(v, counter)
    counter++
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!))
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: Array<string> = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(component.sort())
    }
  }
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) connect(v)
  return out.sort((a, b) => a[0]!.localeCompare(b[0]!))
}

const SRC = Path.resolve(import.meta.dirname, "../src")

describe("the import graph of src/", () => {
  it("has no circle", () => {
    const graph = graphOf(SRC)
    // The walk found the modules and their imports (a graph with no edge would have no circle).
    expect(graph.get("index.ts")).toContain("Usage.ts")
    expect(graph.get("Budget.ts")).toEqual(["PreStep.ts", "Prices.ts", "Usage.ts"])
    expect(cycles(graph)).toEqual([])
  })

  it("canary: a circle, a self-import and a circle through one more edge of the real graph are named", () => {
    const canary: Graph = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["c.ts"]],
      ["c.ts", ["a.ts", "d.ts"]],
      ["d.ts", []],
      ["e.ts", ["e.ts"]],
      ["f.ts", ["a.ts", "d.ts"]]
    ])
    expect(cycles(canary)).toEqual([["a.ts", "b.ts", "c.ts"], ["e.ts"]])
    const real = new Map(graphOf(SRC))
    real.set("Usage.ts", [...real.get("Usage.ts")!, "Budget.ts"])
    // Budget imports PreStep and Prices, which both import Usage: the four make one circle.
    expect(cycles(real)).toEqual([["Budget.ts", "PreStep.ts", "Prices.ts", "Usage.ts"]])
  })

  it("canary: every form of static import is an edge; a doc comment's and a dynamic import are not", () => {
    const text = [
      `import { a } from "./a.js"`,
      `import type { B } from "../b.js"`,
      `import {`,
      `  c,`,
      `  type C`,
      `} from "./c.js"`,
      `export * as D from "./d.js"`,
      `export { e } from './e.js'`,
      `import "./f.js"`,
      `import * as Effect from "effect"`,
      ` * import { g } from "./g.js"`,
      `const h = await import("./h.js")`
    ].join("\n")
    expect(importsOf(text)).toEqual(["./a.js", "../b.js", "./c.js", "./d.js", "./e.js", "./f.js"])
  })
})
