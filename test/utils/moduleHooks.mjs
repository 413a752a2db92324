// Module resolution hooks for tests that run a child Node process, registered with
// `node --import ./test/utils/moduleHooks.mjs …` (this file registers itself as the hooks module
// with `module.register`; Node 20 runs the hooks on their own thread; Node 26 deprecates it with a
// DEP0205 warning on stderr, which tests comparing the CLI's stderr turn off with
// `--disable-warning=DEP0205`). Driven by the environment:
//
// - RECORD_IMPORTS_FILE=PATH: appends the URL of every module the process resolves to PATH, one a
//   line (written synchronously by the resolve hook, so the file is complete as soon as an
//   `import()` settles), and, at exit, the files of the CommonJS module cache (what CommonJS
//   packages `require` never goes through the ESM hooks).
// - HIDE_PACKAGES=a,b: a bare import of those packages (`ink`, `react/jsx-runtime`) is resolved
//   as if from a directory with no node_modules, so Node fails it with its own
//   ERR_MODULE_NOT_FOUND ("Cannot find package 'ink' imported from …"), as when the package is
//   not installed.
import { appendFileSync } from "node:fs"
import { createRequire, register } from "node:module"
import { isMainThread } from "node:worker_threads"

if (isMainThread) {
  register(import.meta.url, { data: { record: process.env.RECORD_IMPORTS_FILE, hide: process.env.HIDE_PACKAGES } })
  const file = process.env.RECORD_IMPORTS_FILE
  if (file !== undefined && file !== "") {
    const cache = createRequire(import.meta.url).cache
    process.on("exit", () => appendFileSync(file, Object.keys(cache).map((f) => `cjs:${f}\n`).join("")))
  }
}

let record
let hidden = new Set()

export function initialize(data) {
  record = data?.record || undefined
  hidden = new Set((data?.hide ?? "").split(",").filter((name) => name !== ""))
}

/** `react/jsx-runtime` → `react`, `@scope/pkg/sub` → `@scope/pkg`; undefined for relative or URL specifiers. */
const packageOf = (specifier) => {
  if (/^[./]|^[a-z]+:/i.test(specifier)) return undefined
  const parts = specifier.split("/")
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]
}

export async function resolve(specifier, context, next) {
  const name = packageOf(specifier)
  const resolved = name !== undefined && hidden.has(name)
    ? await next(specifier, { ...context, parentURL: "file:///hidden-by-moduleHooks/x.mjs" })
    : await next(specifier, context)
  if (record !== undefined) appendFileSync(record, `${resolved.url}\n`)
  return resolved
}
