#!/usr/bin/env node
/**
 * The `agent-loop` executable: runs `main` on the process arguments and exits with its code
 * (130 when interrupted with Ctrl-C; `runner`: 0, its normal stop). The build bundles it, with everything it imports, into
 * `dist/cli/bin.js` and lazily loaded chunks (`scripts/build-cli.js`).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit } from "effect"
import { escapeText } from "../internal/terminalText.js"
import { interruptExitCode, main } from "./main.js"

NodeRuntime.runMain(main(process.argv.slice(2)).pipe(Effect.provide(NodeContext.layer)), {
  disableErrorReporting: true,
  teardown: (exit, onExit) => {
    if (Exit.isSuccess(exit)) onExit(exit.value as number)
    else if (Cause.isInterruptedOnly(exit.cause)) onExit(interruptExitCode())
    else {
      // A defect's text may quote a provider or a log: escaped (§23).
      process.stderr.write(escapeText(Cause.pretty(exit.cause)) + "\n")
      onExit(1)
    }
  }
})
