// ESLint (with dprint as the `@effect/dprint` rule) for the whole tree: `npm run lint` checks, `npm run format`
// fixes. Modelled on the Effect monorepo's eslint.config.mjs (branch v3).
//
// `npm run format` fixes in two runs: every fix but dprint's (`--fix-type problem,suggestion,directive`), then
// dprint's alone (`--fix-type layout`). In one run ESLint applies dprint's character-level diff together with
// other rules' fixes whenever their ranges do not overlap, and the result can be wrong: dprint swapping
// `import * as SessionStore` / `import * as SessionLog` while consistent-type-imports put `type` on the second
// line gave `import type * as SessionStore` (9 tsc errors). Editors' "fix all" on save runs one pass too.
//
// First import: typescript-eslint needs TypeScript's JS API, which typescript@7 does not have; this makes
// `require("typescript")` from node_modules resolve to TypeScript 6.0 in this process (see its header).
import "./tools/lint-typescript/index.cjs"

import * as effectEslint from "@effect/eslint-plugin"
import js from "@eslint/js"
import reactHooks from "eslint-plugin-react-hooks"
import { defineConfig } from "eslint/config"
import globals from "globals"
import tseslint from "typescript-eslint"

export default defineConfig(
  {
    ignores: [
      "**/dist/",
      "dist.next-*/",
      "dist.old-*/",
      "build/",
      "dist-examples/",
      "**/coverage/",
      ".agent-loop/",
      ".scratch/",
      "bench/results/"
    ]
  },
  {
    files: ["**/*.{ts,tsx,mts,cts,js,mjs,cjs}"],
    extends: [js.configs.recommended, tseslint.configs.recommended, effectEslint.configs.dprint],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: globals.node,
      parserOptions: { ecmaFeatures: { jsx: true } }
    },
    linterOptions: {
      reportUnusedDisableDirectives: "error"
    },
    rules: {
      // Formatting: dprint, with the Effect monorepo's settings except the line width: the code here
      // is written to about 130 columns (src/: 1.1% of lines over 120, 0.4% over 130; Effect uses 120).
      // dprint also sorts import declarations and named imports (case-insensitive), as in Effect.
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 130,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }],

      // As in the Effect monorepo.
      "object-shorthand": "error",
      "no-restricted-syntax": ["error", {
        selector: "CallExpression[callee.property.name='push'] > SpreadElement.arguments",
        message: "Do not use spread arguments in Array.push"
      }],
      "require-yield": "off", // Effect.gen(function*() { ... }) without a yield is normal.
      "no-duplicate-imports": ["error", { allowSeparateTypeImports: true }],
      "@typescript-eslint/array-type": ["error", { default: "generic", readonly: "generic" }],
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "@typescript-eslint/no-unused-vars": ["error", {
        argsIgnorePattern: "^_",
        varsIgnorePattern: "^_",
        caughtErrorsIgnorePattern: "^_"
      }],
      // Off (as in Effect): they fight deliberate patterns. `x[i]!` after a bounds check under
      // noUncheckedIndexedAccess (257 places); `any` for existential types (`Tool.Tool<any>`) and
      // foreign JSON in tests (133); `Tool.Tool<{}>`, the decoded `Schema.Struct({})` of a tool without arguments.
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-empty-object-type": "off",
      // `const self = this` before `Effect.gen(function*() { ... })` in class methods.
      "@typescript-eslint/no-this-alias": ["error", { allowedNames: ["self"] }]
      // no-control-regex stays on: the code already marks its deliberate escape-sequence regexps with
      // `// eslint-disable-next-line no-control-regex` (Transcript.ts, ChatModel.ts, App.tsx).
    }
  },
  {
    // The library writes through Effect's Console / the CLI's streams, never console.* (as in Effect).
    files: ["src/**/*"],
    rules: {
      "no-console": "error"
    }
  },
  {
    // The page of `agent-loop inspect` runs in the browser.
    files: ["ui/**/*"],
    languageOptions: { globals: globals.browser }
  },
  {
    // The chat UI (Ink). Only the two classic hooks rules: the React Compiler rules of
    // eslint-plugin-react-hooks 7 (refs, purity, set-state-in-effect) reject the deliberate
    // ref-based line editor (13 problems in App.tsx).
    files: ["**/*.tsx"],
    plugins: { "react-hooks": reactHooks },
    rules: {
      "react-hooks/rules-of-hooks": "error",
      "react-hooks/exhaustive-deps": "error"
    }
  },
  {
    // Plain JavaScript (bench/, test/utils/*.mjs, configs): ESM with Node globals; .cjs is CommonJS.
    files: ["**/*.{js,mjs,cjs}"],
    rules: {
      "@typescript-eslint/no-require-imports": "off"
    }
  },
  {
    files: ["**/*.cjs"],
    languageOptions: { sourceType: "commonjs" }
  }
)
