// A parent whose call runs a sub-agent, in a child process for the sub-agent crash test
// (test/SubagentCrash.test.ts): on a JSONL store in DIR (session "p"), a followup makes the
// parent's model call `subagent`; the child's model calls `step`, which appends a line to RUNS
// and then never returns, so the process waits inside the child's tool call until the test kills
// it. Prints `returned <id>` (synchronously) once the followup has returned.
//   node subagentChild.mjs DIR RUNS
import { NodeFileSystem } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { appendFileSync, writeSync } from "node:fs"
import { Agent, IdGenerator, Model, ScriptedModel, SessionStore, Subagent, Tool } from "../../dist/index.js"

const [directory, runs] = process.argv.slice(2)

const step = Tool.make({
  name: "step",
  description: "one step of the task",
  parameters: Schema.Struct({}),
  execute: () => Effect.zipRight(Effect.sync(() => appendFileSync(runs, "step\n")), Effect.never)
})
const childModel = ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "step", arguments: {} }] }, { text: "3 files" }])
const parentModel = ScriptedModel.make([
  { toolCalls: [{ id: "c1", name: "subagent", arguments: { prompt: "Count the files.", description: "count files" } }] },
  { text: "done" }
])
const layers = Layer.mergeAll(
  SessionStore.layerJsonl({ directory }).pipe(Layer.provide(NodeFileSystem.layer)),
  IdGenerator.layerSeeded(21),
  Model.layer(parentModel)
)

await Effect.runPromise(
  Effect.scoped(Effect.gen(function*() {
    const agent = yield* Agent.make({ tools: [Subagent.tool({ model: childModel, tools: [step] })], sessionId: "p" })
    const delivery = yield* agent.followup("How many files?")
    writeSync(1, `returned ${delivery.messageId}\n`)
    yield* Effect.never
  })).pipe(Effect.provide(layers))
)
