/**
 * `agent-loop demo` (`npm start`): a short session on the offline model (no network, no key)
 * that shows the three ways to deliver a message (§5.1) and the fate of each:
 *
 * 1. a `followup` while idle starts turn 1, and the model calls the `wait` tool;
 * 2. a `steer` sent while that tool runs joins the same turn at its next step (the model then
 *    calls `clock` and reports the time);
 * 3. an `inject` sent while idle does not wake the agent (its status stays idle): it waits in
 *    the inbox and enters the next model request, beside
 * 4. the next `followup`, which starts turn 2.
 *
 * It prints the plan, the transcript, the fates the deliveries resolved with, and the log's path.
 */
import { Command } from "@effect/cli"
import { Console, Effect, Layer, Queue } from "effect"
import * as Agent from "../../Agent.js"
import type { Delivery, DeliveryOutcome } from "../../Delivery.js"
import * as IdGenerator from "../../IdGenerator.js"
import { escapeLine } from "../../internal/terminalText.js"
import { UserMessage } from "../../Message.js"
import * as Model from "../../Model.js"
import * as Offline from "../../providers/Offline.js"
import * as OfflineTools from "../../providers/OfflineTools.js"
import * as SessionStore from "../../SessionStore.js"
import { exit } from "../exit.js"
import { printTranscript, storeDirectory, storeOption } from "./shared.js"

const FIRST = "Please wait 1 second."
const STEER = "Also tell me the time."
const CONTEXT = "The user is on branch main."
const SECOND = "What do you know so far?"

const PLAN = [
  "effect-agent-loop demo: one agent on the offline model (rule-based, no network).",
  `1. followup "${FIRST}" while idle: starts turn 1; the model calls the wait tool.`,
  `2. steer "${STEER}" while wait runs: joins turn 1 at its next step.`,
  `3. inject "${CONTEXT}" (plugin:git) while idle: does not wake the agent;`,
  "   it waits in the inbox and enters the next model request.",
  `4. followup "${SECOND}": starts turn 2, the injected context beside it.`,
  ""
]

const fateText = (outcome: DeliveryOutcome): string =>
  outcome._tag === "Entered" ? `entered turn ${outcome.turn}, step ${outcome.step}` : `dropped (${outcome.reason})`

/**
 * `demo`: the session above on the offline model, in the JSONL store of `--store`.
 *
 * @since 0.1.0
 */
export const demo = Command.make(
  "demo",
  { store: storeOption },
  ({ store }) =>
    Effect.gen(function*() {
      const directory = yield* storeDirectory(store)
      const { fates, idleAfterInject, log } = yield* Effect.scoped(Effect.gen(function*() {
        const tools = yield* OfflineTools.all()
        const agent = yield* Agent.make({ tools, cwd: process.cwd(), instructions: "You are the effect-agent-loop demo." })
        const events = yield* agent.subscribe
        const deliveries: Array<readonly [kind: string, text: string, Delivery]> = []
        deliveries.push(["followup", FIRST, yield* agent.followup(FIRST)])
        // Steer once the wait tool runs, so that the steer arrives in the middle of the turn.
        while (true) {
          const event = yield* Queue.take(events)
          if (event.type === "tool/call") break
        }
        deliveries.push(["steer", STEER, yield* agent.steer(STEER)])
        yield* agent.awaitIdle
        const context = yield* UserMessage.make({ text: CONTEXT, source: { kind: "plugin", plugin: "git" } })
        deliveries.push(["inject", CONTEXT, yield* agent.inject(context)])
        const idleAfterInject = yield* agent.status
        deliveries.push(["followup", SECOND, yield* agent.followup(SECOND)])
        yield* agent.awaitIdle
        const fates: Array<string> = []
        for (const [kind, text, delivery] of deliveries) {
          fates.push(`  ${kind.padEnd(8)} ${JSON.stringify(text).padEnd(30)} ${fateText(yield* delivery.outcome)}`)
        }
        return { fates, idleAfterInject, log: agent.log }
      })).pipe(
        Effect.provide(Layer.mergeAll(Model.layer(Offline.make()), SessionStore.layerJsonl({ directory }), IdGenerator.layer)),
        Effect.catchAll((e) => exit(2, `demo failed: ${e.message}`))
      )
      yield* Console.log(PLAN.join("\n"))
      yield* printTranscript(log.events())
      yield* Console.log("")
      yield* Console.log(`fates (status right after the inject: ${idleAfterInject}):`)
      yield* Console.log(fates.join("\n"))
      yield* Console.log("")
      yield* Console.log(escapeLine(`session log: ${log.path ?? log.id}`))
      yield* Console.log(escapeLine(`replay it with: npx agent-loop transcript ${log.path ?? log.id}`))
    })
).pipe(Command.withDescription("Run a short offline demo session and print its transcript."))
