// ESLint (with dprint as the `@effect/dprint` rule) for the whole tree: `npm run lint` checks, `npm run format`
// fixes. Modelled on the Effect monorepo's eslint.config.mjs (branch v3).
//
// First import: typescript-eslint needs TypeScript's JS API, which typescript@7 does not have; this makes
// `require("typescript")` from node_modules resolve to TypeScript 6.0 in this process (see its header).
import "./tools/lint-typescript/index.cjs"

import * as effectEslint from "@effect/eslint-plugin"
import js from "@eslint/js"
import { defineConfig } from "eslint/config"
import globals from "globals"
import tseslint from "typescript-eslint"

export default defineConfig(
  {
    ignores: ["**/dist/", "**/coverage/", ".agent-loop/", ".scratch/", "bench/results/"]
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
      // Formatting: dprint, with the Effect monorepo's settings.
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
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
      "require-yield": "off",
      "@typescript-eslint/array-type": ["error", { default: "generic", readonly: "generic" }],
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "@typescript-eslint/no-unused-vars": ["error", {
        argsIgnorePattern: "^_",
        varsIgnorePattern: "^_",
        caughtErrorsIgnorePattern: "^_"
      }],
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-empty-object-type": "off",
      "@typescript-eslint/no-namespace": "off",
      "@typescript-eslint/ban-ts-comment": "off"
    }
  },
  {
    // Node scripts (bench/, test/utils/*.mjs): CommonJS-free ESM, Node globals only.
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
