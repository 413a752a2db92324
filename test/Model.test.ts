import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Fiber, Layer, Schema, Stream, TestClock } from "effect"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import type { Message, MessageId } from "../src/Message.js"
import * as Model from "../src/Model.js"
import type { ModelRequest } from "../src/Model.js"
import * as Offline from "../src/providers/Offline.js"
import * as OfflineTools from "../src/providers/OfflineTools.js"
import * as Scenario from "../src/Scenario.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import { advance, bareToolContext, brief, layer, text } from "./utils/agent.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const user = (id: string, t: string, source: Record<string, unknown> = { kind: "user" }): Message => ({
  id: id as MessageId,
  role: "user",
  content: [{ type: "text", text: t }],
  source: source as any
})

const request = (messages: ReadonlyArray<Message>, tools = ["wait", "clock", "read_file"]): ModelRequest => ({
  sessionId: "s",
  turn: 1,
  step: 1,
  tools: tools.map((name) => ({ name, description: "", parameters: {} })),
  messages
})

describe("ScriptedModel.make", () => {
  it.effect("streams text as word deltas at ⌊i·latency/n⌋ ms, then finish; toStream offers the same parts", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make([{ latencyMs: 10, text: "one two three" }])
      const fiber = yield* Effect.fork(Stream.runCollect(Model.toStream(model, request([user("u", "hi")]))))
      yield* TestClock.adjust(10)
      const parts = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
      expect(parts).toEqual([
        { type: "text-delta", text: "one" },
        { type: "text-delta", text: " two" },
        { type: "text-delta", text: " three" },
        { type: "finish", reason: "stop" }
      ])
      expect(model.requests[0]!.messages.map(text)).toEqual(["hi"])
    }))

  it.effect("an error entry fails with a typed ModelError; past the end is SCRIPT_EXHAUSTED", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make([{
        error: { code: "HTTP_429", message: "slow down", retryable: true, retryAfterMs: 2000 }
      }])
      const sink = { part: () => Effect.void }
      const e1 = yield* Effect.flip(model.respond(request([]), sink))
      expect([e1.code, e1.retryable, e1.retryAfterMs]).toEqual(["HTTP_429", true, 2000])
      const e2 = yield* Effect.flip(model.respond(request([]), sink))
      expect([e2.code, e2.retryable]).toEqual(["SCRIPT_EXHAUSTED", false])
    }))
})

describe("ModelErrorCode", () => {
  const decode = (u: unknown) => Either.isRight(Schema.decodeUnknownEither(Model.ModelErrorCode)(u))

  it("holds the codes the adapters and the loop fail with, HTTP_<status>, Anthropic's error types; nothing else", () => {
    const codes = [
      "HTTP_429",
      "HTTP_503",
      "CONTEXT_OVERFLOW",
      "PROVIDER_ERROR",
      "NETWORK",
      "TIMEOUT",
      "STREAM_INCOMPLETE",
      "DEADLINE_EXCEEDED",
      "RESPONSE_TOO_LARGE",
      "BAD_RESPONSE",
      "INVALID_URL",
      "INVALID_REQUEST",
      "MALFORMED_INPUT",
      "MALFORMED_OUTPUT",
      "MODEL_FAILED",
      "SCRIPT_EXHAUSTED",
      "overloaded_error",
      "rate_limit_error",
      "invalid_request_error"
    ]
    expect(codes.filter((c) => !decode(c))).toEqual([])
    expect(["RATE_LIMITED", "HTTP_", "HTTP_x", "http_429", "overloaded", "", 429].filter(decode)).toEqual([])
  })

  it("a scenario's scripted error with a code that is not a ModelErrorCode is refused", () => {
    const decoded = Scenario.decode({ model: [{ error: { code: "RATE_LIMITED", message: "m" } }], actions: [] })
    expect(Either.isLeft(decoded) && decoded.left.path).toBe("$.model[0].error.code")
  })
})

describe("Offline.make (§14)", () => {
  it("asked to wait N seconds it calls wait; for the time it calls clock; to read a file it calls read_file", () => {
    expect(Offline.plan(request([user("u", "please wait 2 seconds")]))).toEqual({
      text: "I received 1 message in this step: 1 from you (\"please wait 2 seconds\").",
      toolCalls: [{ id: "call_1_1_1", name: "wait", arguments: { seconds: 2 } }]
    })
    expect(Offline.plan(request([user("u", "what time is it?")])).toolCalls).toEqual([
      { id: "call_1_1_1", name: "clock", arguments: {} }
    ])
    expect(Offline.plan(request([user("u", "read file src/index.ts, please")])).toolCalls).toEqual([
      { id: "call_1_1_1", name: "read_file", arguments: { path: "src/index.ts" } }
    ])
    // Tools it was not given are never called.
    expect(Offline.plan(request([user("u", "wait 2 seconds")], [])).toolCalls).toBeUndefined()
  })

  it("asked to call a tool by name (call TOOL [with {JSON}]), it calls it; several in one message, one a step, in order", () => {
    const tools = ["wait", "clock", "echo"]
    const twice = "call echo with {\"message\":\"a}\"} and then call echo with {\"message\":\"b\"}"
    expect(Offline.plan(request([user("u", twice)], tools)).toolCalls).toEqual([
      { id: "call_1_1_1", name: "echo", arguments: { message: "a}" } }
    ])
    // The second step: one call made since the message, so the second one.
    const afterFirst: ReadonlyArray<Message> = [
      user("u", twice),
      {
        id: "a1" as MessageId,
        role: "assistant",
        content: [{ type: "tool-call", id: "call_1_1_1", name: "echo", arguments: "{}" }],
        source: { kind: "model", provider: "offline", model: "offline-rules-1" }
      }
    ]
    expect(Offline.plan(request(afterFirst, tools)).toolCalls).toEqual([
      { id: "call_1_1_1", name: "echo", arguments: { message: "b" } }
    ])
    // No JSON: {}; the text inside the JSON asks for nothing more; "call clock" calls it once.
    expect(Offline.plan(request([user("u", "use the tool `clock`")], tools)).toolCalls).toEqual([
      { id: "call_1_1_1", name: "clock", arguments: {} }
    ])
    expect(Offline.plan(request([user("u", "call echo with {\"message\": \"wait 2 seconds\"}")], tools)).toolCalls).toEqual([
      { id: "call_1_1_1", name: "echo", arguments: { message: "wait 2 seconds" } }
    ])
    // A name it was not given, or JSON that is not an object, calls nothing.
    expect(Offline.plan(request([user("u", "call me later; call echo with [1]")], tools)).toolCalls).toBeUndefined()
  })

  it("asked to ask a sub-agent, it calls subagent with the rest as the task; a sub-agent's task it does as a prompt (§27)", () => {
    const tools = ["wait", "clock", "read_file", "subagent", "subagent_fork"]
    // The task is the rest of the text: the wait it mentions is the sub-agent's to do.
    expect(Offline.plan(request([user("u", "Please ask a sub-agent to wait 2 seconds")], tools))).toEqual({
      text: "I received 1 message in this step: 1 from you (\"Please ask a sub-agent to wait 2 seconds\").",
      toolCalls: [{ id: "call_1_1_1", name: "subagent", arguments: { prompt: "wait 2 seconds" } }]
    })
    // What comes before it is done first, in the order of the text.
    expect(Offline.plan(request([user("u", "tell me the time, then have the forked subagent read file a.txt")], tools)))
      .toEqual({
        text: "I received 1 message in this step: 1 from you (\"tell me the time, then have the forked subagent read file a…\").",
        toolCalls: [{ id: "call_1_1_1", name: "clock", arguments: {} }]
      })
    // Without the tool, no delegation: the task's own requests are its own.
    expect(Offline.plan(request([user("u", "ask a sub-agent to wait 2 seconds")])).toolCalls).toEqual([
      { id: "call_1_1_1", name: "wait", arguments: { seconds: 2 } }
    ])
    const task = user("t", "wait 2 seconds", { kind: "subagent", parentSession: "p", callId: "c" })
    expect(Offline.plan(request([task], tools))).toEqual({
      text: "I received 1 message in this step: a task from the parent session (\"wait 2 seconds\").",
      toolCalls: [{ id: "call_1_1_1", name: "wait", arguments: { seconds: 2 } }]
    })
  })

  it("otherwise it summarizes the step's messages by source, and reports tool results", () => {
    expect(Offline.plan(request([
      user("c", "git branch: main", { kind: "plugin", plugin: "git" }),
      user("u", "which branch?")
    ]))).toEqual({
      text: "I received 2 messages in this step: 1 from you (\"which branch?\"); context from plugin:git (\"git branch: main\")."
    })
    const afterTool: Array<Message> = [
      user("u", "wait 1 second"),
      {
        id: "a" as MessageId,
        role: "assistant",
        content: [{ type: "tool-call", id: "c1", name: "wait", arguments: "{}" }],
        source: { kind: "model" }
      },
      {
        id: "r" as MessageId,
        role: "user",
        content: [{
          type: "tool-result",
          toolCallId: "c1",
          content: [{ type: "text", text: "waited 1 second" }],
          isError: false
        }],
        source: { kind: "tool", callId: "c1" }
      }
    ]
    expect(Offline.plan(request(afterTool))).toEqual({ text: "Tool result (c1): \"waited 1 second\"" })
    // Several tools asked in one message run one step after another, in the order of the text.
    const both = user("u", "wait 2 seconds and tell me the time")
    expect(Offline.plan(request([both])).toolCalls).toEqual([{ id: "call_1_1_1", name: "wait", arguments: { seconds: 2 } }])
    const afterWait: Array<Message> = [
      both,
      {
        id: "a" as MessageId,
        role: "assistant",
        content: [{ type: "tool-call", id: "w", name: "wait", arguments: "{}" }],
        source: { kind: "model" }
      },
      {
        id: "r" as MessageId,
        role: "user",
        content: [{
          type: "tool-result",
          toolCallId: "w",
          content: [{ type: "text", text: "waited 2 seconds" }],
          isError: false
        }],
        source: { kind: "tool", callId: "w" }
      }
    ]
    expect(Offline.plan({ ...request(afterWait), step: 2 })).toEqual({
      text: "Tool result (w): \"waited 2 seconds\"",
      toolCalls: [{ id: "call_1_2_1", name: "clock", arguments: {} }]
    })
    // Quotes are cut on code points, never inside a surrogate pair.
    const emoji = Offline.plan(request([user("u", "🎉".repeat(70))])).text!
    expect(emoji).toBe(`I received 1 message in this step: 1 from you ("${"🎉".repeat(59)}…").`)
  })

  it.scoped("end to end: the wait tool sleeps on the virtual clock while a steer arrives", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "agent-loop-offline-"))
    return Effect.gen(function*() {
      const tools = yield* OfflineTools.all(dir)
      const agent = yield* Agent.make({ tools })
      yield* agent.followup("wait 5 seconds")
      yield* advance(1000)
      yield* agent.steer("and what time is it?")
      yield* advance(10_000)
      const log = brief(agent.log.events())
      expect(log.filter((l) => l.startsWith("tool/") || l.startsWith("user") || l.startsWith("turn/end"))).toEqual([
        "user wait 5 seconds",
        "tool/call call_1_1_1 wait",
        "tool/result call_1_1_1",
        "user and what time is it?",
        "tool/call call_1_2_1 clock",
        "tool/result call_1_2_1",
        "turn/end 1 completed"
      ])
      const results = agent.log.events().filter((e) => e.type === "tool/result").map((e) => text((e.data as any).message))
      expect(results).toEqual(["result:waited 5 seconds", "result:1970-01-01T00:00:05.000Z"])
      expect(agent.log.events().find((e) => e.type === "tool/result")!.time).toBe(5000)
    }).pipe(Effect.provide(Layer.merge(layer(Offline.make()), NodeContext.layer)))
  })

  it.scoped("read_file is confined to the working directory", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "agent-loop-read-"))
    Fs.writeFileSync(Path.join(dir, "notes.txt"), "hello notes")
    Fs.symlinkSync("/etc/hostname", Path.join(dir, "escape"))
    return Effect.gen(function*() {
      const read = yield* OfflineTools.readFile(dir)
      expect(yield* read.execute({ path: "notes.txt" }, bareToolContext)).toEqual({ content: "hello notes" })
      const outside = yield* Effect.flip(read.execute({ path: "../../etc/passwd" }, bareToolContext))
      expect(outside.message).toBe("../../etc/passwd is outside the working directory")
      const absolute = yield* Effect.flip(read.execute({ path: "/etc/passwd" }, bareToolContext))
      expect(absolute.message).toBe("/etc/passwd is outside the working directory")
      const link = yield* Effect.flip(read.execute({ path: "escape" }, bareToolContext))
      expect(link.message).toBe("escape resolves outside the working directory")
      const missing = yield* Effect.flip(read.execute({ path: "nope.txt" }, bareToolContext))
      expect(missing.message).toBe("cannot read nope.txt: no such file")
      const dir2 = yield* Effect.flip(read.execute({ path: "." }, bareToolContext))
      expect(dir2.message).toBe(". is a directory")
    }).pipe(Effect.provide(NodeContext.layer))
  })
})

describe("read_file limits (§23)", () => {
  const scratch = scratchDirs("agent-loop-read-")

  it.scoped("a name that starts with two dots is inside the working directory; .. and ../x are not", () => {
    const dir = scratch()
    Fs.writeFileSync(Path.join(dir, "..notparent.txt"), "inside")
    Fs.mkdirSync(Path.join(dir, "sub"))
    Fs.writeFileSync(Path.join(dir, "sub", "..x"), "deeper")
    Fs.symlinkSync(Path.join(dir, "..notparent.txt"), Path.join(dir, "sub", "link"))
    return Effect.gen(function*() {
      const read = yield* OfflineTools.readFile(dir)
      expect(yield* read.execute({ path: "..notparent.txt" }, bareToolContext)).toEqual({ content: "inside" })
      expect(yield* read.execute({ path: "sub/..x" }, bareToolContext)).toEqual({ content: "deeper" })
      expect(yield* read.execute({ path: "sub/link" }, bareToolContext)).toEqual({ content: "inside" })
      expect(yield* read.execute({ path: "sub/../..notparent.txt" }, bareToolContext)).toEqual({ content: "inside" })
      for (const path of ["..", "../x", "sub/../../x", `../${Path.basename(dir)}x/secret`]) {
        const refused = yield* Effect.flip(read.execute({ path }, bareToolContext))
        expect(refused.message).toBe(`${path} is outside the working directory`)
      }
    }).pipe(Effect.provide(NodeContext.layer))
  })

  it.scoped("what is not a regular file (a fifo, a device) is refused without being opened", () => {
    const dir = scratch()
    const made = spawnSync("mkfifo", [Path.join(dir, "pipe")])
    expect(made.status).toBe(0)
    return Effect.gen(function*() {
      const read = yield* OfflineTools.readFile(dir)
      // Opening a fifo for reading blocks until a writer comes: read_file hung `run`.
      const fifo = yield* Effect.flip(read.execute({ path: "pipe" }, bareToolContext))
      expect(fifo.message).toBe("pipe is not a regular file (a fifo)")
      const devices = yield* OfflineTools.readFile("/dev")
      const device = yield* Effect.flip(devices.execute({ path: "null" }, bareToolContext))
      expect(device.message).toBe("null is not a regular file (a character device)")
    }).pipe(Effect.provide(NodeContext.layer))
  })

  it.live("a fifo swapped in after the stat is refused from the opened descriptor, without blocking", () => {
    const dir = scratch()
    expect(spawnSync("mkfifo", [Path.join(dir, "race")]).status).toBe(0)
    // The stat sees the regular file that was there a moment before (the swap raced it).
    const racing = Layer.effect(
      FileSystem.FileSystem,
      Effect.map(FileSystem.FileSystem, (fs) => ({
        ...fs,
        stat: (path: string) => Effect.map(fs.stat(path), (info) => ({ ...info, type: "File" as const }))
      }))
    ).pipe(Layer.provide(NodeContext.layer))
    return Effect.gen(function*() {
      const read = yield* OfflineTools.readFile(dir)
      const error = yield* Effect.flip(read.execute({ path: "race" }, bareToolContext))
      expect(error.message).toBe("race is not a regular file (it changed while it was read)")
    }).pipe(Effect.provide(racing), Effect.provide(NodeContext.layer), Effect.timeout("5 seconds"))
  })

  it.scoped("a cut file's note says how many lines are not shown: the true count, or at least how many past 64 MiB", () => {
    const dir = scratch()
    // 100,000 lines of 2 bytes: the first 64 KiB end on a line feed, after line 32,768.
    Fs.writeFileSync(Path.join(dir, "lines.txt"), "x\n".repeat(100_000))
    // The cut falls inside a line: the rest of it is not counted as a line of its own.
    Fs.writeFileSync(Path.join(dir, "mid.txt"), "y".repeat(70_000) + "\nlast\n" + "tail")
    Fs.writeFileSync(Path.join(dir, "one.txt"), "z".repeat(65_540) + "\n")
    // 2 lines shown past 64 KiB + 64 MiB counted: 1 MiB lines, so at least 64 more lines.
    const fd = Fs.openSync(Path.join(dir, "huge.txt"), "w")
    const mib = Buffer.alloc(1024 * 1024, "w")
    mib[mib.length - 1] = 10
    for (let i = 0; i < 70; i++) Fs.writeSync(fd, mib)
    Fs.closeSync(fd)
    return Effect.gen(function*() {
      const read = yield* OfflineTools.readFile(dir)
      expect(yield* read.execute({ path: "lines.txt" }, bareToolContext)).toEqual({
        content: `${"x\n".repeat(32_768)}\n[… 67,232 more lines not shown: truncated at 64 KiB of 200,000 bytes]`
      })
      expect(yield* read.execute({ path: "mid.txt" }, bareToolContext)).toEqual({
        content: `${"y".repeat(65_536)}\n[… 2 more lines not shown: truncated at 64 KiB of 70,010 bytes]`
      })
      expect(yield* read.execute({ path: "one.txt" }, bareToolContext)).toEqual({
        content: `${"z".repeat(65_536)}\n[… the rest of the last line not shown: truncated at 64 KiB of 65,541 bytes]`
      })
      const huge = (yield* read.execute({ path: "huge.txt" }, bareToolContext)).content as string
      expect(huge.slice(65_536)).toBe("\n[… at least 64 more lines not shown: truncated at 64 KiB of 73,400,320 bytes]")
    }).pipe(Effect.provide(NodeContext.layer))
  })

  it.scoped("a file larger than 64 KiB is read only as far as it is returned (a 3 GiB file could not be read at all)", () => {
    const dir = scratch()
    const big = Path.join(dir, "big.txt")
    // Sparse: 3 GiB that take no disk. Reading it whole failed (more than 2 GiB) or took its size in memory.
    const fd = Fs.openSync(big, "w")
    Fs.writeSync(fd, "a".repeat(70_000))
    Fs.ftruncateSync(fd, 3 * 1024 ** 3)
    Fs.closeSync(fd)
    Fs.writeFileSync(Path.join(dir, "small.txt"), "b".repeat(65_536))
    return Effect.gen(function*() {
      const read = yield* OfflineTools.readFile(dir)
      expect(yield* read.execute({ path: "big.txt" }, bareToolContext)).toEqual({
        content: `${
          "a".repeat(65_536)
        }\n[… the rest (no line break in the next 64 MiB) not shown: truncated at 64 KiB of 3,221,225,472 bytes]`
      })
      expect(yield* read.execute({ path: "small.txt" }, bareToolContext)).toEqual({ content: "b".repeat(65_536) })
    }).pipe(Effect.provide(NodeContext.layer))
  })
})

describe("Agent.statusChanges", () => {
  it.scoped("reports idle, running across the turns of one run, then idle", () => {
    const model = ScriptedModel.make([{ latencyMs: 10, text: "a" }, { latencyMs: 10, text: "b" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      const fiber = yield* Effect.fork(Stream.runCollect(Stream.take(agent.statusChanges, 3)))
      yield* advance(0)
      yield* agent.followup("one")
      yield* agent.followup("two")
      yield* advance(100)
      expect(Chunk.toReadonlyArray(yield* Fiber.join(fiber))).toEqual(["idle", "running", "idle"])
    }).pipe(Effect.provide(layer(model)))
  })
})
