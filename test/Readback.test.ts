import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as History from "../src/History.js"
import * as IdGenerator from "../src/IdGenerator.js"
import { replay as replayInbox } from "../src/Inbox.js"
import { UserMessage } from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Tool from "../src/Tool.js"

describe("JSONL read-back", () => {
  it.scoped("a log written by a session reads back into the same history and inbox state", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "agent-loop-readback-"))
    const model = ScriptedModel.make([
      { text: "thinking", toolCalls: [{ id: "c1", name: "echo", arguments: { value: "x" } }] },
      { text: "done" }
    ])
    const echo = Tool.make({
      name: "echo",
      description: "echo",
      parameters: Schema.Struct({ value: Schema.String }),
      execute: ({ value }, c) =>
        Effect.map(Effect.orDie(c.makeMessage(`echoed ${value}`)), (ctx) => ({ content: value, additionalContexts: [ctx] }))
    })
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [echo] })
      yield* agent.followup("go")
      // The JSONL store does real I/O: wait for the run to end, not for virtual time.
      yield* agent.awaitIdle
      // Leave work pending.
      yield* agent.inject(yield* UserMessage.make({ text: "pending ctx", source: { kind: "plugin", plugin: "p" } }))
      const contents = yield* SessionStore.readFile(agent.log.path!)
      expect(contents.events).toEqual(agent.log.events())
      expect(History.derive(contents.events)).toEqual(yield* agent.history)
      const inbox = yield* agent.inbox
      const replayed = replayInbox(contents.events)
      expect(replayed.nextTurn).toEqual(inbox.nextTurn)
      expect(replayed.nextStep).toEqual(inbox.nextStep)
      expect(inbox.nextStep.map((p) => p.message.content)).toEqual([[{ type: "text", text: "pending ctx" }]])
      expect(contents.header).toMatchObject({ type: "session", format: "effect-agent-loop", version: 1, id: agent.id })
    }).pipe(
      Effect.provide(Layer.mergeAll(
        SessionStore.layerJsonl({ directory: dir }).pipe(Layer.provide(NodeFileSystem.layer)),
        NodeFileSystem.layer,
        IdGenerator.layerSeeded(3),
        Model.layer(model)
      ))
    )
  })
})
