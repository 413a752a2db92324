/**
 * The quick start of the README: one agent, one tool, one turn, offline. The model is scripted:
 * its first response calls the `weather` tool, its second is the offline model's reply, which
 * reads back the tool result it got. Prints each tool call, the reply and the fate of the prompt.
 *
 * Run: npm run example -- quick-start
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, Schema } from "effect"
import { Agent, Model, Offline, ScriptedModel, SessionEvent, SessionStore, Tool } from "effect-agent-loop"
import { fileURLToPath } from "node:url"

const weather = Tool.make({
  name: "weather",
  description: "Current weather for a city",
  parameters: Schema.Struct({ city: Schema.String }),
  execute: ({ city }) => Effect.succeed({ content: `${city}: 18°C, cloudy` })
})

export const main = Effect.gen(function*() {
  const agent = yield* Agent.make({ instructions: "Be brief.", tools: [weather] })
  const delivery = yield* agent.followup("What's the weather in Edinburgh?")
  yield* agent.awaitIdle
  for (const event of agent.log.events()) {
    if (SessionEvent.is(event, "tool/call")) console.log(`tool call: ${event.data.name} ${event.data.arguments}`)
    if (SessionEvent.is(event, "assistant/message")) {
      for (const block of event.data.message.content) if (block.type === "text") console.log(`reply: ${block.text}`)
    }
  }
  console.log("fate:", JSON.stringify(yield* delivery.outcome))
}).pipe(
  Effect.scoped, // closing the agent's scope disposes it
  Effect.provide(Layer.merge(
    SessionStore.layerMemory, // or SessionStore.layerJsonl({ directory: ".agent-loop/sessions" })
    // A scripted model, so that this runs offline: step 1 calls the tool, step 2 answers by the
    // offline model's rules (it reads back the tool result). A provider goes here instead.
    Model.layer(ScriptedModel.make([
      { toolCalls: [{ id: "call_1", name: "weather", arguments: { city: "Edinburgh" } }] },
      Offline.plan
    ]))
  ))
)

// Runs when this file is the program (a test imports `main` instead).
if (process.argv[1] === fileURLToPath(import.meta.url)) NodeRuntime.runMain(main)
