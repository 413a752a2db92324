// A session that waits for a person, run in a child process for the approval crash test
// (test/ApprovalCrash.test.ts): on a JSONL store in DIR (session "s"), a followup makes the model
// call `write_file` (approval "always"); the call is asked about and nobody answers, so the
// process waits until the test kills it. Each run of the tool appends a line to RUNS (it must
// not run here). Prints `returned <id>` (synchronously) once the followup has returned.
//   node approvalChild.mjs DIR RUNS
import { NodeFileSystem } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { appendFileSync, writeSync } from "node:fs"
import { Agent, IdGenerator, Model, ScriptedModel, SessionStore, Tool } from "../../dist/index.js"

const [directory, runs] = process.argv.slice(2)

const writeFile = Tool.make({
  name: "write_file",
  description: "writes a file",
  parameters: Schema.Struct({ path: Schema.String }),
  approval: "always",
  execute: ({ path }) => Effect.sync(() => appendFileSync(runs, `${path}\n`)).pipe(Effect.as({ content: `wrote ${path}` }))
})
const model = ScriptedModel.make([
  { toolCalls: [{ id: "w", name: "write_file", arguments: { path: "NOTES.md" } }] },
  { text: "done" }
])
const layers = Layer.mergeAll(
  SessionStore.layerJsonl({ directory }).pipe(Layer.provide(NodeFileSystem.layer)),
  IdGenerator.layer,
  Model.layer(model)
)

await Effect.runPromise(
  Effect.scoped(Effect.gen(function*() {
    const agent = yield* Agent.make({ tools: [writeFile], sessionId: "s" })
    const delivery = yield* agent.followup("Update the notes.")
    writeSync(1, `returned ${delivery.messageId}\n`)
    yield* Effect.never
  })).pipe(Effect.provide(layers))
)
