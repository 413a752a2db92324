/**
 * The size limit of delivered messages (`maxMessageBytes`, §5.1): the UTF-8 bytes of
 * the message's JSON. Over it, every path that inserts a message into the inbox (followup,
 * steer, inject, replace, a tool's additional contexts) refuses it and logs nothing; a message
 * of exactly the limit is taken and runs end to end.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Agent from "../src/Agent.js"
import * as IdGenerator from "../src/IdGenerator.js"
import type { InvalidMessage, UserMessage } from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Tool from "../src/Tool.js"
import { advance, brief, layer, layerTracked, text } from "./utils/agent.js"
import { tmpDir } from "./utils/tmp.js"

/** A user message with the given id and one text block. */
const message = (id: string, t: string): UserMessage =>
  ({ id, role: "user", content: [{ type: "text", text: t }], source: { kind: "user" } }) as unknown as UserMessage

/** UTF-8 bytes of a value's JSON text. */
const bytesOf = (value: unknown): number => Buffer.byteLength(JSON.stringify(value), "utf8")

/** A message of id `id` whose JSON is exactly `bytes` bytes (ASCII text). */
const sized = (id: string, bytes: number): UserMessage => message(id, "x".repeat(bytes - bytesOf(message(id, ""))))

/** The refusal of a message of `bytes` over `limit`, as a plain object (`toEqual` ignores an Error's `message`). */
const over = (bytes: number, limit: number) => ({
  _tag: "InvalidMessage",
  message: `message is ${bytes} bytes of JSON, over the limit of ${limit} bytes (maxMessageBytes)`,
  path: "message"
})

/** A delivery's failure as a plain object with its tag, message and path. */
const refusal = <A, R>(effect: Effect.Effect<A, { readonly _tag: string; readonly message: string }, R>) =>
  Effect.map(Effect.flip(effect), (e) => ({ _tag: e._tag, message: e.message, path: (e as InvalidMessage).path }))

describe("maxMessageBytes", () => {
  it.scoped("followup, steer, inject and replace refuse a message one byte over the limit and log nothing; exactly the limit is taken", () => {
    const model = ScriptedModel.make([{ text: "ok" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ maxMessageBytes: 1000 })
      const big = sized("big", 1001)
      expect(bytesOf(big)).toBe(1001)
      expect(yield* refusal(agent.followup(big))).toEqual(over(1001, 1000))
      expect(yield* refusal(agent.steer(big))).toEqual(over(1001, 1000))
      expect(yield* refusal(agent.inject(big))).toEqual(over(1001, 1000))
      expect(agent.log.events()).toEqual([])
      expect(yield* agent.inbox).toEqual({ nextTurn: [], nextStep: [] })
      // The id was not used: the same id is taken once the message fits.
      const fits = sized("big", 1000)
      const c = yield* agent.inject(fits)
      expect(c.messageId).toBe("big")
      const replaced = yield* refusal(agent.replace("big", sized("other", 1001)))
      expect(replaced).toEqual(over(1001, 1000))
      expect(agent.log.events()).toHaveLength(1)
      // A string prompt is measured as the message it becomes (id and source included).
      const prompt = "y".repeat(1000)
      const refused = yield* refusal(agent.followup(prompt))
      // Its strings alone (text, id, keys) are over the limit: refused without being serialized.
      expect(refused.message).toBe("message is at least 1079 bytes of JSON, over the limit of 1000 bytes (maxMessageBytes)")
      expect(agent.log.events()).toHaveLength(1)
      const d = yield* agent.followup("hello")
      yield* advance(10)
      expect(yield* d.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
      expect(yield* c.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
      expect(model.requests[0]!.messages.map((m) => text(m).length)).toEqual([1000 - bytesOf(message("big", "")), 5])
    }).pipe(Effect.provide(layer(model)))
  })

  it.scoped("the size is UTF-8 bytes of the JSON: escapes, multi-byte characters and image data count", () =>
    Effect.gen(function*() {
      // "é" is 2 bytes, "😀" 4, a newline 2 (\n), a control character 6 (\u0001).
      const mixed = message("m", "é😀\n\u0001")
      expect(bytesOf(mixed)).toBe(bytesOf(message("m", "")) + 14)
      const image: UserMessage = {
        id: "img",
        role: "user",
        content: [{ type: "image", mediaType: "image/png", data: "A".repeat(200) }],
        source: { kind: "user" }
      } as unknown as UserMessage
      const imageBytes = bytesOf(image)
      const small = yield* Agent.make({ maxMessageBytes: imageBytes - 1 })
      expect(yield* refusal(small.followup(image))).toEqual(over(imageBytes, imageBytes - 1))
      const limit = bytesOf(mixed)
      const tight = yield* Agent.make({ maxMessageBytes: limit - 1 })
      expect(yield* refusal(tight.followup(mixed))).toEqual(over(limit, limit - 1))
      const exact = yield* Agent.make({ maxMessageBytes: limit })
      expect((yield* exact.followup(mixed)).messageId).toBe("m")
      expect(small.log.events()).toEqual([])
      expect(tight.log.events()).toEqual([])
    }).pipe(Effect.provide(layer(ScriptedModel.make([{ text: "ok" }])))))

  it.scoped("default 8 MiB: a message far over it is refused without being serialized; one byte over is refused", () =>
    Effect.gen(function*() {
      const agent = yield* Agent.make()
      const huge = "x".repeat(16 * 1024 * 1024)
      expect(yield* refusal(agent.followup(huge))).toEqual({
        _tag: "InvalidMessage",
        // At least one byte per character of its strings (id and keys included).
        message: `message is at least ${huge.length + 79} bytes of JSON, over the limit of 8388608 bytes (maxMessageBytes)`,
        path: "message"
      })
      expect(yield* refusal(agent.followup(sized("big", 8 * 1024 * 1024 + 1)))).toEqual(over(8388609, 8388608))
      expect(agent.log.events()).toEqual([])
    }).pipe(Effect.provide(layer(ScriptedModel.make([])))))

  it.scoped("a tool's additional context over the limit makes its result TOOL_FAILED; nothing is spliced", () => {
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "c1", name: "noisy", arguments: {} }] },
      { text: "done" }
    ])
    const noisy = Tool.make({
      name: "noisy",
      description: "",
      parameters: Schema.Struct({}),
      execute: () => Effect.succeed({ content: "ok", additionalContexts: [sized("ctx", 1001)] })
    })
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [noisy], maxMessageBytes: 1000 })
      yield* agent.followup("go")
      yield* advance(10)
      const events = agent.log.events()
      expect(brief(events).filter((l) => l.startsWith("splice"))).toEqual(["splice next-turn 0 +[go]", "splice next-turn 0 -1"])
      const result = events.find((e) => e.type === "tool/result")!.data as any
      expect(result.error).toEqual({ name: "ToolFailed", code: "TOOL_FAILED" })
      expect(text(result.message.content[0])).toBe(
        "Tool noisy returned an invalid result: additional context ctx is 1001 bytes of JSON, over the limit of 1000 bytes (maxMessageBytes)"
      )
    }).pipe(Effect.provide(layer(model)))
  })

  it.scoped("JSONL: a message of exactly 8 MiB is durable, enters, reaches the model, and resumes", () => {
    const model = ScriptedModel.make([{ text: "read it" }, { text: "again" }])
    return Effect.gen(function*() {
      const dir = yield* tmpDir
      const big = sized("big", 8 * 1024 * 1024)
      const layers = Layer.mergeAll(SessionStore.layerJsonl({ directory: dir }), IdGenerator.layerSeeded(3), Model.layer(model))
      yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make({ sessionId: "s" })
        const d = yield* agent.followup(big)
        yield* advance(10)
        expect(yield* d.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        yield* agent.release
      })).pipe(Effect.provide(layers))
      const lines = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("s")
        yield* agent.followup("and now?")
        yield* advance(10)
        return brief(agent.log.events()).map((l) => l.slice(0, 30))
      })).pipe(Effect.provide(layers))
      expect(lines.filter((l) => l.startsWith("turn/end"))).toEqual(["turn/end 1 completed", "turn/end 2 completed"])
      const length = 8 * 1024 * 1024 - bytesOf(message("big", ""))
      expect(model.requests.map((r) => r.messages.map((m) => text(m).length))).toEqual([[length], [length, 7, 8]])
    }).pipe(Effect.provide(Layer.merge(NodeFileSystem.layer, layerTracked)))
  })
})
