/**
 * A tool that steers (§5.1, §6.3, §8). While `deploy` runs it finds something the
 * model must act on and calls `ctx.agent.steer`: the steer is durable at once (its splice is in
 * the log before the tool's result), but it joins the turn at the next step boundary, the step
 * after the batch's results. So the next request reads the tool results in call order, then the
 * steer. (A result's `additionalContexts` would go there too, ahead of the steer; a steer is
 * waking: it would open a step even if no tool results were owed one.)
 *
 * The model is scripted: step 1 calls `deploy` and `status` in one batch; step 2 answers with
 * the offline model's summary of what it received. Prints the transcript and step 2's request.
 *
 * Run: npm run example -- steering-tool
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Schema } from "effect"
import { Agent, Message, Model, Offline, ScriptedModel, SessionStore, Tool, Transcript, TranscriptText } from "effect-agent-loop"
import { fileURLToPath } from "node:url"

export const deploy = Tool.make({
  name: "deploy",
  description: "Deploys a service to a canary host",
  parameters: Schema.Struct({ service: Schema.String }),
  execute: ({ service }, ctx) =>
    Effect.gen(function*() {
      // Source {kind:"tool", callId}: the model sees who steered.
      const warning = yield* ctx.makeMessage(`${service}: the canary's error rate is 4%; tell the user before anything else`)
      yield* ctx.agent.steer(warning)
      return { content: `${service} deployed to the canary` }
    }).pipe(Effect.mapError((cause) => new Tool.ToolError({ message: cause.message, cause })))
})

export const status = Tool.make({
  name: "status",
  description: "The state of the fleet",
  parameters: Schema.Struct({}),
  execute: () => Effect.succeed({ content: "47 hosts green" })
})

const show = (block: Message.ContentBlock): string => {
  switch (block.type) {
    case "tool-result":
      return `result of ${block.toolCallId}: ${Message.textOf(block.content)}`
    case "tool-call":
      return `call ${block.id} ${block.name}`
    case "text":
      return block.text
    default:
      return block.type
  }
}

/** Runs one turn; returns the log and the requests the model got. */
export const main = Effect.gen(function*() {
  const model = ScriptedModel.make([
    { toolCalls: [{ id: "call_1", name: "deploy", arguments: { service: "api" } }, { id: "call_2", name: "status" }] },
    Offline.plan
  ])
  const agent = yield* Agent.make({ tools: [deploy, status] }).pipe(Effect.provideService(Model.Model, model))
  yield* agent.followup("deploy the api, then check the fleet")
  yield* agent.awaitIdle
  const events = agent.log.events().slice()
  console.log(TranscriptText.render(Transcript.fromEvents(events)))
  console.log("\nstep 2's request:")
  for (const m of model.requests[1]?.messages ?? []) {
    console.log(`  ${m.role} (${m.source.kind}) ${m.content.map(show).join(" | ")}`)
  }
  return { events, requests: model.requests }
}).pipe(Effect.scoped, Effect.provide(SessionStore.layerMemory))

if (process.argv[1] === fileURLToPath(import.meta.url)) NodeRuntime.runMain(main)
