import { defineConfig } from "vitest/config"
import { HOOK_TIMEOUT_MS, TEST_TIMEOUT_MS } from "./test/utils/bounds.js"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/utils/globalSetup.ts"],
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    // What they are derived from: test/utils/bounds.ts.
    testTimeout: TEST_TIMEOUT_MS,
    hookTimeout: HOOK_TIMEOUT_MS
  }
})
