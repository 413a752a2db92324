/**
 * TypeScript 6.0 for the linter, TypeScript 7 for everything else.
 *
 * The project compiles with `typescript@7` (the native compiler), whose package exports no JS API
 * (`require("typescript")` gives only `{ version, versionMajorMinor }`). typescript-eslint parses
 * with TypeScript's JS API (`ts.createSourceFile`, `ts.SyntaxKind`) through plain
 * `require("typescript")` calls in `@typescript-eslint/*` and `ts-api-utils`, and supports
 * `typescript >=4.8.4 <6.1.0` (its experimental `tsgo` backend still needs TypeScript 6.0 beside
 * TypeScript 7.1).
 *
 * This package depends on `typescript@6.0.3`. npm cannot hoist it (the root has `typescript@7`), so it
 * stays in `tools/lint-typescript/node_modules`, and its `tsc` bin never shadows the root one. At the
 * root, a second TypeScript does: an alias (`"typescript-classic": "npm:typescript@6.0.3"`) linked its
 * `tsc` over TypeScript 7's in `node_modules/.bin` when added, and `@typescript/typescript6` (whose
 * hoisted dependency `@typescript/old` is `typescript@6`) did so on every `npm ci`: `npm run typecheck`
 * then ran TypeScript 6.0.3.
 *
 * Loaded first by `eslint.config.mjs`, this file makes `require("typescript")` (and `typescript/...`)
 * from any file under a `node_modules` folder resolve here, in the ESLint process only (the packages
 * that need it are CommonJS). The root `overrides` entry lets typescript-eslint's peer `typescript`
 * be the root one, so that npm does not stop on ERESOLVE.
 */
"use strict"
const Module = require("node:module")

const here = [__dirname]
const inDependency = /[\\/]node_modules[\\/]/
const resolveFilename = Module._resolveFilename

Module._resolveFilename = function(request, parent, isMain, options) {
  if (
    (request === "typescript" || request.startsWith("typescript/")) &&
    parent !== undefined && parent !== null && typeof parent.filename === "string" &&
    inDependency.test(parent.filename)
  ) {
    return resolveFilename.call(this, request, parent, isMain, { paths: here })
  }
  return resolveFilename.call(this, request, parent, isMain, options)
}

/** The TypeScript version the linter parses with. */
exports.version = require(require.resolve("typescript/package.json", { paths: here })).version
