// A session run in a child process for the crash tests (test/Crash.test.ts). Runs a tool-using
// turn and queued work on a JSONL store (FSYNC "none" or "batch") or the SQLite store (FSYNC
// "sqlite": DIR/sessions.db, synchronous FULL) and kills itself with SIGKILL right after append number
// KILL_AT returns (never, when KILL_AT is -1). Prints `returned <id>` (synchronously) when a
// delivery call has returned, and `appends <n>` when the session finished.
//   node crashChild.mjs DIR FSYNC KILL_AT
import { NodeFileSystem } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { writeSync } from "node:fs"
import { Agent, IdGenerator, Message, Model, ScriptedModel, SessionStore, Tool } from "../../dist/index.js"
import * as SqlSessionStore from "../../dist/SqlSessionStore.js"

const [directory, fsync, killArg] = process.argv.slice(2)
const killAt = Number(killArg)
let appends = 0
const counted = (run) => {
  const r = run()
  if (appends++ === killAt) process.kill(process.pid, "SIGKILL")
  return r
}

const store = Layer.effect(
  SessionStore.SessionStore,
  Effect.map(SessionStore.SessionStore, (s) => ({
    ...s,
    create: (options) =>
      Effect.map(s.create(options), (log) => ({
        ...log,
        append: (drafts) => Effect.tap(log.append(drafts), () => Effect.sync(() => counted(() => undefined))),
        appendSync: log.appendSync === undefined ? undefined : (drafts, time) => counted(() => log.appendSync(drafts, time))
      }))
  }))
).pipe(
  Layer.provide(
    fsync === "sqlite"
      ? SqlSessionStore.layerSqlite({ filename: `${directory}/sessions.db` })
      : SessionStore.layerJsonl({ directory, fsync }).pipe(Layer.provide(NodeFileSystem.layer))
  )
)

const quick = Tool.make({
  name: "quick",
  description: "",
  parameters: Schema.Struct({}),
  execute: () => Effect.succeed({ content: "done" })
})
const slow = Tool.make({
  name: "slow",
  description: "",
  parameters: Schema.Struct({}),
  execute: () => Effect.as(Effect.promise(() => new Promise((r) => setTimeout(r, 5))), { content: "slow done" })
})
const model = ScriptedModel.make([
  {
    toolCalls: [{ id: "c1", name: "quick", arguments: {} }, { id: "c2", name: "slow", arguments: {} }, {
      id: "c3",
      name: "quick",
      arguments: {}
    }]
  },
  { text: "first answer" },
  { text: "second answer" }
])

const say = (line) => writeSync(1, line + "\n")

await Effect.runPromise(
  Effect.scoped(Effect.gen(function*() {
    const agent = yield* Agent.make({ tools: [quick, slow], sessionId: "s" })
    const a = yield* agent.followup("go")
    say(`returned ${a.messageId}`)
    const b = yield* agent.followup("then this")
    say(`returned ${b.messageId}`)
    const c = yield* agent.inject(
      yield* Message.UserMessage.make({ text: "context", source: { kind: "plugin", plugin: "test" } })
    )
    say(`returned ${c.messageId}`)
    yield* agent.awaitIdle
    say(`appends ${appends}`)
  })).pipe(Effect.provide(Layer.mergeAll(store, IdGenerator.layer, Model.layer(model))))
)
