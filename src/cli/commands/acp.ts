/** `agent-loop acp`: an Agent Client Protocol agent for editors on stdin/stdout (§22). */
import { Command } from "@effect/cli"
import { Effect, Option } from "effect"
import { compactionLayer, modelLayer, runOptions } from "../providerFlags.js"
import { VERSION } from "../version.js"
import { storeDirectory, storeOption } from "./shared.js"

/**
 * `acp [--store DIR] [provider flags, compaction flags and --max-steps, as run]` (§22;
 * `acp/agent.ts`, §22): an Agent Client Protocol v1 agent on stdin/stdout for
 * editors, until stdin ends (exit 0). stdout carries ACP messages only; notices go to stderr.
 * The ACP SDK and zod are bundled into the chunk this command loads (no other command loads it).
 */
export const acp = Command.make(
  "acp",
  { ...runOptions, store: storeOption },
  (options) =>
    Effect.gen(function*() {
      const model = yield* modelLayer(options)
      const compaction = yield* compactionLayer(options)
      const directory = yield* storeDirectory(options.store)
      const { runAcp } = yield* Effect.promise(() => import("../acp/agent.js"))
      yield* runAcp({
        directory,
        maxSteps: options.maxSteps,
        // Checked by compactionLayer above.
        contextWindow: Option.getOrUndefined(Option.map(options.contextWindow, (text) => Number(text.trim()))),
        model,
        compaction,
        version: VERSION
      })
    })
).pipe(Command.withDescription("Serve the Agent Client Protocol (ACP v1) on stdin/stdout, for editors such as Zed (§22)."))
