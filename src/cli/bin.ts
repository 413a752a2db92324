#!/usr/bin/env node
/**
 * The `agent-loop` executable: runs `main` on the process arguments and exits with its code
 * (130 when interrupted with Ctrl-C). The build bundles it, with everything it imports, into
 * `dist/cli/bin.js` and lazily loaded chunks (`scripts/build-cli.js`).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit } from "effect"
import { escapeText } from "../internal/terminalText.js"
import { main } from "./main.js"

NodeRuntime.runMain(main(process.argv.slice(2)).pipe(Effect.provide(NodeContext.layer)), {
  disableErrorReporting: true,
  teardown: (exit, onExit) => {
    if (Exit.isSuccess(exit)) onExit(exit.value as number)
    else if (Cause.isInterruptedOnly(exit.cause)) onExit(130)
    else {
      // A defect's text may quote a provider or a log: escaped (issue 13).
      process.stderr.write(escapeText(Cause.pretty(exit.cause)) + "\n")
      onExit(1)
    }
  }
})
