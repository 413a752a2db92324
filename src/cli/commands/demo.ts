/** `agent-loop demo`: a short offline session that shows followup, steer and inject (`npm start`). */
import { Command } from "@effect/cli"
import { Path } from "@effect/platform"
import { Console, Effect, Layer } from "effect"
import * as Agent from "../../Agent.js"
import * as IdGenerator from "../../IdGenerator.js"
import { escapeLine } from "../../internal/terminalText.js"
import { UserMessage } from "../../Message.js"
import * as Model from "../../Model.js"
import * as OfflineTools from "../../OfflineTools.js"
import * as SessionStore from "../../SessionStore.js"
import { exit } from "../exit.js"
import { printTranscript, storeOption } from "./shared.js"

/**
 * `demo`: a session on the offline model in which a context is injected while idle, a prompt
 * runs two tools, a steer arrives while the `wait` tool runs, and another context is injected.
 */
export const demo = Command.make(
  "demo",
  { store: storeOption },
  ({ store }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const directory = path.resolve(store)
      const log = yield* Effect.scoped(Effect.gen(function*() {
        const tools = yield* OfflineTools.all()
        const agent = yield* Agent.make({ tools, cwd: process.cwd(), instructions: "You are the effect-agent-loop demo." })
        yield* agent.inject(
          yield* UserMessage.make({ text: "The user is on branch main.", source: { kind: "plugin", plugin: "git" } })
        )
        yield* agent.followup("Please wait 1 second and tell me the time.")
        yield* Effect.sleep("300 millis")
        yield* agent.steer("Also read file package.json, please.")
        yield* agent.inject(
          yield* UserMessage.make({ text: "The network is metered.", source: { kind: "plugin", plugin: "netwatch" } })
        )
        yield* agent.awaitIdle
        return agent.log
      })).pipe(
        Effect.provide(Layer.mergeAll(Model.layer(Model.offline()), SessionStore.layerJsonl({ directory }), IdGenerator.layer)),
        Effect.catchAll((e) => exit(2, `demo failed: ${e.message}`))
      )
      yield* printTranscript(log.events())
      yield* Console.log("")
      yield* Console.log(escapeLine(`session log: ${log.path ?? log.id}`))
      yield* Console.log(escapeLine(`replay it with: npx agent-loop transcript ${log.path ?? log.id}`))
    })
).pipe(Command.withDescription("Run a short offline demo session and print its transcript."))
