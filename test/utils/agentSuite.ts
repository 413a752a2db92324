/**
 * The agent suite, run in each store mode by a test file of its own (`test/Agent.test.ts`,
 * `test/AgentLocked.test.ts`): the same tests, names and assertions on a store whose appends are
 * synchronous (each critical section one synchronous step) and on one whose appends wait for a
 * flush (every critical section takes the lock path, as with JSONL `fsync: "batch"`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Fiber, FiberRef, Layer, Queue, Schema } from "effect"
import * as Agent from "../../src/Agent.js"
import * as IdGenerator from "../../src/IdGenerator.js"
import { UserMessage } from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as PreStep from "../../src/PreStep.js"
import * as ScriptedModel from "../../src/ScriptedModel.js"
import * as SessionLog from "../../src/SessionLog.js"
import * as SessionStore from "../../src/SessionStore.js"
import * as Tool from "../../src/Tool.js"
import { advance, brief, checkLog, layer as agentLayer, layerTracked, storeLayer, type StoreMode, text } from "./agent.js"

const ctx = (t: string, plugin = "netwatch") =>
  UserMessage.make({ text: t, source: { kind: "plugin", plugin } }).pipe(Effect.provide(IdGenerator.layerSeeded(7 + t.length)))

/** A tool that sleeps `ms` (virtual time) and returns "ok", with optional contexts. */
const sleeper = (name: string, contexts: ReadonlyArray<string> = [], extra?: { exclusive?: boolean }) =>
  Tool.make({
    name,
    description: "sleeps",
    parameters: Schema.Struct({ ms: Schema.Number }),
    exclusive: extra?.exclusive ?? false,
    execute: ({ ms }, c) =>
      Effect.gen(function*() {
        yield* Effect.sleep(ms)
        const additionalContexts = []
        for (const t of contexts) {
          additionalContexts.push(
            yield* Effect.orDie(c.makeMessage(t))
          )
        }
        return { content: `${name} ok`, additionalContexts }
      })
  })
/** Defines the agent suite on the store of `mode` (test/utils/agent.ts `StoreMode`). */
export const agentSuite = (mode: StoreMode): void => {
  /** Layers for an agent test in this suite's store mode. */
  const layer = (model: Model.ModelService, preStep?: Layer.Layer<PreStep.PreStep>) => agentLayer(model, preStep, mode)

  describe("Agent: delivery and turns", () => {
    it.scoped("a followup runs one turn with one step and enters as Entered {1, 1}", () => {
      const model = ScriptedModel.make([{ text: "hello there" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const d = yield* agent.followup("hi")
        expect(yield* d.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        yield* agent.awaitIdle
        expect(brief(agent.log.events())).toEqual([
          "splice next-turn 0 +[hi]",
          "turn/start 1",
          "splice next-turn 0 -1",
          "step/start 1.1",
          "user hi",
          "request/header",
          "assistant hello there",
          "step/end 1.1",
          "turn/end 1 completed"
        ])
        expect(yield* agent.status).toBe("idle")
        yield* checkLog(agent, [d])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("an idle inject appends exactly one splice; a later followup enters the context before the prompt", () => {
      const model = ScriptedModel.make([{ latencyMs: 5, text: "You are on branch main." }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const c = yield* ctx("git branch: main", "git")
        const di = yield* agent.inject(c)
        yield* advance(1000)
        expect(brief(agent.log.events())).toEqual(["splice next-step 0 +[git branch: main]"])
        expect(agent.log.events()[0]!.time).toBe(0)
        expect(yield* agent.status).toBe("idle")
        const df = yield* agent.followup("which branch am I on?")
        yield* advance(100)
        expect(brief(agent.log.events())).toEqual([
          "splice next-step 0 +[git branch: main]",
          "splice next-turn 0 +[which branch am I on?]",
          "turn/start 1",
          "splice next-step 0 -1",
          "splice next-turn 0 -1",
          "step/start 1.1",
          "user git branch: main (plugin)",
          "user which branch am I on?",
          "request/header",
          "assistant You are on branch main.",
          "step/end 1.1",
          "turn/end 1 completed"
        ])
        expect(agent.log.events()[1]!.time).toBe(1000)
        // Consecutive user-role messages reach the model as separate messages, in order.
        expect(model.requests).toHaveLength(1)
        expect(model.requests[0]!.messages.map((m) => [m.role, text(m), m.source.kind])).toEqual([
          ["user", "git branch: main", "plugin"],
          ["user", "which branch am I on?", "user"]
        ])
        expect(yield* di.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        yield* checkLog(agent, [di, df])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("two followups never share a turn; a steer on an idle agent starts a turn", () => {
      const model = ScriptedModel.make([{ latencyMs: 10, text: "one" }, { text: "two" }, { text: "three" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const a = yield* agent.followup("first")
        const b = yield* agent.followup("second")
        yield* advance(50)
        const s = yield* agent.steer("steering while idle")
        yield* advance(50)
        expect(yield* a.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        expect(yield* b.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        expect(yield* s.outcome).toEqual({ _tag: "Entered", turn: 3, step: 1 })
        const log = brief(agent.log.events())
        expect(log.filter((l) => l.startsWith("turn/end"))).toEqual([
          "turn/end 1 completed",
          "turn/end 2 completed",
          "turn/end 3 completed"
        ])
        expect(log).toContain("splice next-step 0 +[steering while idle] wake")
        yield* checkLog(agent, [a, b, s])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("delivery records and live notifications carry only the message; the splice keeps target and coordinates", () => {
      const model = ScriptedModel.make([{ latencyMs: 10, text: "ok" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const queue = yield* agent.subscribe
        const c = yield* ctx("fyi")
        const d = yield* agent.inject(c)
        expect(Object.keys(d).sort()).toEqual(["messageId", "outcome"])
        const events = Chunk.toReadonlyArray(yield* Queue.takeAll(queue))
        expect(events.map((e) => e.type)).toEqual(["agent/inbox/spliced", "agent/inbox/inserted"])
        const inserted = events[1] as { type: string; message: unknown }
        expect(Object.keys(inserted).sort()).toEqual(["message", "type"])
        expect(inserted.message).toBe(c)
        expect((events[0] as any).data).toEqual({ target: "next-step", start: 0, inserted: [c] })
        // The message is the one frozen, identified shape.
        expect(Object.isFrozen(c) && Object.isFrozen(c.content) && Object.isFrozen(c.source)).toBe(true)
        expect(Object.keys(c).sort()).toEqual(["content", "id", "role", "source"])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("invalid input: a duplicate id, non-JSON content and a disposed agent fail typed and log nothing", () => {
      const model = ScriptedModel.make([])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const c = yield* ctx("once")
        yield* agent.inject(c)
        const dup = yield* Effect.flip(agent.inject(c))
        expect(dup._tag).toBe("DuplicateMessageId")
        const bad = { id: "x1", role: "user", content: [{ type: "text", text: "t", extra: () => 1 }], source: { kind: "user" } }
        const invalid = yield* Effect.flip(agent.followup(bad as any))
        expect(invalid._tag).toBe("InvalidMessage")
        const nan = yield* Effect.flip(
          UserMessage.make({ content: [{ type: "text", text: "t" }], source: { kind: "plugin", n: NaN } as any })
        )
        expect(nan._tag).toBe("InvalidMessage")
        expect(agent.log.events()).toHaveLength(1)
        yield* agent.dispose
        const disposed = yield* Effect.flip(agent.followup("late"))
        expect(disposed._tag).toBe("AgentDisposed")
        // dispose cleared the pending injection: canceled, cause disposed
        expect(brief(agent.log.events())).toEqual([
          "splice next-step 0 +[once]",
          "splice next-step 0 -1 canceled cause=disposed"
        ])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("malformed messages fail InvalidMessage before anything is logged, frozen or not; the log stays readable", () => {
      const model = ScriptedModel.make([{ text: "ok" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const malformed: Array<unknown> = [
          { id: "m1", role: "user", content: "hello", source: { kind: "user" } },
          { id: "m2", role: "user", content: [{ type: "text", text: "t" }] },
          { id: "m3", role: "user", content: [{ type: "bogus" }], source: { kind: "user" } },
          { id: "m4", role: "user", content: [{ type: "text" }], source: { kind: "user" } },
          Object.freeze({ id: "m5", role: "assistant", content: Object.freeze([]), source: Object.freeze({ kind: "user" }) }),
          Object.freeze({ id: 42, role: "user", content: Object.freeze([]), source: Object.freeze({ kind: "user" }) }),
          Object.freeze({
            id: "m7",
            role: "user",
            content: Object.freeze([Object.freeze({ type: "text", text: "t", f: () => 1 })]),
            source: Object.freeze({ kind: "user" })
          }),
          null,
          5
        ]
        const tags: Array<string> = []
        for (const m of malformed) tags.push((yield* Effect.flip(agent.followup(m as any)))._tag)
        expect(tags).toEqual(Array(malformed.length).fill("InvalidMessage"))
        expect(agent.log.events()).toEqual([])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("an assistant message's id cannot be delivered again (ids unique per session, §2)", () => {
      const model = ScriptedModel.make([{ text: "ok" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("go")
        yield* advance(10)
        const assistant = agent.log.events().find((e) => e.type === "assistant/message")!.data as any
        const again = yield* UserMessage.make({ id: assistant.message.id, text: "again", source: { kind: "user" } })
        const error = yield* Effect.flip(agent.followup(again))
        expect(error._tag).toBe("DuplicateMessageId")
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("no prompt prefix, envelope or context/message event exists anywhere", () => {
      const model = ScriptedModel.make([{ text: "a" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.inject(yield* ctx("context"))
        yield* agent.followup("prompt")
        yield* advance(10)
        const types = new Set(agent.log.events().map((e) => e.type))
        expect(types.has("context/message")).toBe(false)
        const json = JSON.stringify(agent.log.events())
        expect(json).not.toMatch(/prefix|envelope|context\/message/)
        const users = agent.log.events().filter((e) => e.type === "user/message").map((e) => (e.data as any).content)
        expect(users).toEqual([[{ type: "text", text: "context" }], [{ type: "text", text: "prompt" }]])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a standalone plugin event opens no turn", () => {
      const model = ScriptedModel.make([])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const e = yield* agent.appendEvent("session/title", { title: "hello" })
        expect(e).toMatchObject({ type: "session/title", seq: 0, data: { title: "hello" } })
        expect(yield* agent.status).toBe("idle")
        const bad = yield* Effect.flip(agent.appendEvent("turn/start", { turn: 9 }))
        expect(bad._tag).toBe("InvalidEvent")
        expect(agent.log.events()).toHaveLength(1)
      }).pipe(Effect.provide(layer(model)))
    })
  })

  describe("Agent: injection timing and the continuation rule (§6.3)", () => {
    it.scoped("an injection during a tool step is claimed at the next pre-step, after the complete result batch", () => {
      const model = ScriptedModel.make([
        { latencyMs: 10, toolCalls: [{ id: "c1", name: "sleep", arguments: { ms: 100 } }] },
        { latencyMs: 10, text: "done" }
      ])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [sleeper("sleep")] })
        const f = yield* agent.followup("go")
        yield* advance(50)
        const i = yield* agent.inject(yield* ctx("fyi"))
        yield* advance(200)
        expect(brief(agent.log.events())).toEqual([
          "splice next-turn 0 +[go]",
          "turn/start 1",
          "splice next-turn 0 -1",
          "step/start 1.1",
          "user go",
          "request/header",
          "assistant sleep({\"ms\":100})",
          "tool/call c1 sleep",
          "splice next-step 0 +[fyi]",
          "tool/result c1",
          "step/end 1.1",
          "splice next-step 0 -1",
          "step/start 1.2",
          "user fyi (plugin)",
          "assistant done",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
        expect(model.requests[1]!.messages.map((m) => [m.role, text(m)])).toEqual([
          ["user", "go"],
          ["assistant", "sleep({\"ms\":100})"],
          ["user", "result:sleep ok"],
          ["user", "fyi"]
        ])
        expect(yield* i.outcome).toEqual({ _tag: "Entered", turn: 1, step: 2 })
        yield* checkLog(agent, [f, i])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("an injection pending at the end of a text-only step does not open a step; it waits", () => {
      const model = ScriptedModel.make([{ latencyMs: 100, text: "long answer" }, { text: "second" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("go")
        yield* advance(50)
        const i = yield* agent.inject(yield* ctx("late context"))
        yield* advance(500)
        expect(brief(agent.log.events()).slice(-4)).toEqual([
          "splice next-step 0 +[late context]",
          "assistant long answer",
          "step/end 1.1",
          "turn/end 1 completed"
        ])
        expect(model.requests).toHaveLength(1)
        expect(yield* agent.status).toBe("idle")
        expect((yield* agent.inbox).nextStep.map((p) => text(p.message))).toEqual(["late context"])
        // A steer, by contrast, wakes: it is served by the next decision.
        yield* agent.steer("now")
        yield* advance(10)
        expect(yield* i.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        yield* checkLog(agent, [i])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a steer during a text step opens another step in the same turn", () => {
      const model = ScriptedModel.make([{ latencyMs: 100, text: "first" }, { latencyMs: 10, text: "second" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("go")
        yield* advance(50)
        const s = yield* agent.steer("also this")
        yield* advance(500)
        expect(brief(agent.log.events()).slice(-8)).toEqual([
          "assistant first",
          "step/end 1.1",
          "splice next-step 0 -1",
          "step/start 1.2",
          "user also this",
          "assistant second",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
        expect(yield* s.outcome).toEqual({ _tag: "Entered", turn: 1, step: 2 })
        yield* checkLog(agent, [s])
      }).pipe(Effect.provide(layer(model)))
    })
  })

  describe("Agent: tools (§8)", () => {
    it.scoped("concurrent calls commit results in call order; contexts go ahead of steering and injections", () => {
      const model = ScriptedModel.make([
        {
          latencyMs: 20,
          toolCalls: [
            { id: "call_a", name: "fetch", arguments: { ms: 300 } },
            { id: "call_b", name: "fetch", arguments: { ms: 80 } }
          ]
        },
        { latencyMs: 20, text: "Both fetched." }
      ])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [sleeper("fetch", ["fetch is cached for 60s"])] })
        const f = yield* agent.followup("fetch both pages")
        yield* advance(100)
        const s = yield* agent.steer("only the headers, please")
        yield* advance(20)
        const i = yield* agent.inject(yield* ctx("network is metered"))
        yield* advance(1000)
        const log = brief(agent.log.events())
        expect(log.slice(log.indexOf("tool/call call_a fetch"))).toEqual([
          "tool/call call_a fetch",
          "tool/call call_b fetch",
          "splice next-step 0 +[only the headers, please] wake",
          "splice next-step 1 +[network is metered]",
          "tool/result call_a",
          "splice next-step 0 +[fetch is cached for 60s]",
          "tool/result call_b",
          "splice next-step 1 +[fetch is cached for 60s]",
          "step/end 1.1",
          "splice next-step 0 -4",
          "step/start 1.2",
          "user fetch is cached for 60s (tool)",
          "user fetch is cached for 60s (tool)",
          "user only the headers, please",
          "user network is metered (plugin)",
          "assistant Both fetched.",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
        const req = model.requests[1]!.messages
        expect(req.map((m) => [m.role, text(m), m.source.kind])).toEqual([
          ["user", "fetch both pages", "user"],
          ["assistant", "fetch({\"ms\":300}) fetch({\"ms\":80})", "model"],
          ["user", "result:fetch ok", "tool"],
          ["user", "result:fetch ok", "tool"],
          ["user", "fetch is cached for 60s", "tool"],
          ["user", "fetch is cached for 60s", "tool"],
          ["user", "only the headers, please", "user"],
          ["user", "network is metered", "plugin"]
        ])
        expect((req[4]!.source as any).callId).toBe("call_a")
        expect((req[5]!.source as any).callId).toBe("call_b")
        // call_b finished first (t=100) but its result is committed after call_a's (t=320)
        const results = agent.log.events().filter((e) => e.type === "tool/result")
        expect(results.map((e) => e.time)).toEqual([320, 320])
        yield* checkLog(agent, [f, s, i])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("an exclusive call is a barrier", () => {
      const model = ScriptedModel.make([
        {
          toolCalls: [
            { id: "a", name: "par", arguments: { ms: 50 } },
            { id: "b", name: "excl", arguments: { ms: 10 } },
            { id: "c", name: "par", arguments: { ms: 5 } }
          ]
        },
        { text: "ok" }
      ])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [sleeper("par"), sleeper("excl", [], { exclusive: true })] })
        yield* agent.followup("go")
        yield* advance(1000)
        const events = agent.log.events().filter((e) => e.type === "tool/call" || e.type === "tool/result")
        expect(events.map((e) => `${brief([e])[0]} @${e.time}`)).toEqual([
          "tool/call a par @0",
          "tool/result a @50",
          "tool/call b excl @50",
          "tool/result b @60",
          "tool/call c par @60",
          "tool/result c @65"
        ])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("unknown tool, invalid arguments, denied call, failure, defect and hooks become results with §8 codes", () => {
      const model = ScriptedModel.make([
        {
          toolCalls: [
            { id: "u", name: "nope", arguments: {} },
            { id: "j", name: "echo", arguments: "{not json" },
            { id: "s", name: "echo", arguments: { value: 42 } },
            { id: "d", name: "echo", arguments: { value: "forbidden" } },
            { id: "f", name: "fail", arguments: {} },
            { id: "x", name: "boom", arguments: {} },
            { id: "ok", name: "echo", arguments: { value: "hi" } }
          ]
        },
        { text: "done" }
      ])
      const echo = Tool.make({
        name: "echo",
        description: "echo",
        parameters: Schema.Struct({ value: Schema.String }),
        execute: ({ value }) => Effect.succeed({ content: value })
      })
      const fail = Tool.make({
        name: "fail",
        description: "fails",
        parameters: Schema.Struct({}),
        execute: () => Effect.fail(new Tool.ToolError({ message: "disk full" }))
      })
      const boom = Tool.make({
        name: "boom",
        description: "dies",
        parameters: Schema.Struct({}),
        execute: () => Effect.die(new Error("kaboom"))
      })
      const guard: Tool.ToolGuard = (call, next) =>
        (call.arguments as any).value === "forbidden" ? Effect.succeed(Tool.Guard.deny("not allowed")) : next()
      const hook: Tool.ToolHook = (call, next) =>
        Effect.map(next(), (r) =>
          call.callId === "ok"
            ? {
              ...r,
              output: {
                content: `${typeof r.output.content === "string" ? r.output.content : ""}!`,
                additionalContexts: [
                  {
                    id: "hook-ctx-1",
                    role: "user",
                    content: [{ type: "text", text: "hooked" }],
                    source: { kind: "hook", hook: "bang" }
                  } as any
                ]
              }
            }
            : r)
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [echo, fail, boom], guards: [guard], hooks: [hook] })
        yield* agent.followup("go")
        yield* advance(10)
        const results = agent.log.events().filter((e) => e.type === "tool/result").map((e) => {
          const d = e.data as any
          const block = d.message.content[0]
          return [block.toolCallId, d.error?.code ?? null, block.isError, block.content[0].text]
        })
        expect(results).toEqual([
          ["u", "UNKNOWN_TOOL", true, "Unknown tool \"nope\". Available tools: echo, fail, boom."],
          ["j", "INVALID_ARGUMENTS", true, expect.stringContaining("not valid JSON")],
          ["s", "INVALID_ARGUMENTS", true, expect.stringContaining("Expected string, actual 42")],
          ["d", "DENIED", true, "The call to echo was denied: not allowed"],
          ["f", "TOOL_FAILED", true, "Tool fail failed: disk full"],
          ["x", "TOOL_FAILED", true, "Tool boom failed: kaboom"],
          ["ok", null, false, "hi!"]
        ])
        const calls = agent.log.events().filter((e) => e.type === "tool/call").map((e) => (e.data as any).arguments)
        expect(calls[1]).toBe("{not json")
        expect(calls[2]).toBe("{\"value\":42}")
        const step2 = brief(agent.log.events()).slice(-6)
        expect(step2).toEqual([
          "splice next-step 0 -1",
          "step/start 1.2",
          "user hooked (hook)",
          "assistant done",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("an output with isError is a TOOL_FAILED result with its content, for a call alone and for calls run together", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "one", name: "refuse", arguments: { why: "alone" } }] },
        {
          toolCalls: [
            { id: "a", name: "refuse", arguments: { why: "first" } },
            { id: "b", name: "refuse", arguments: { why: "" } },
            { id: "c", name: "refuse", arguments: { why: "third" } }
          ]
        },
        { text: "done" }
      ])
      // An error reported with content (as an MCP server's isError result); "" reports none.
      const refuse = Tool.make({
        name: "refuse",
        description: "refuses",
        parameters: Schema.Struct({ why: Schema.String }),
        execute: ({ why }) =>
          Effect.succeed(
            why === "" ? { content: "fine" } : { content: [{ type: "text" as const, text: `refused: ${why}` }], isError: true }
          )
      })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [refuse] })
        yield* agent.followup("go")
        yield* advance(10)
        const results = agent.log.events().filter((e) => e.type === "tool/result").map((e) => {
          const d = e.data as any
          const block = d.message.content[0]
          return [block.toolCallId, d.error?.code ?? null, block.isError, block.content[0].text]
        })
        expect(results).toEqual([
          ["one", "TOOL_FAILED", true, "refused: alone"],
          ["a", "TOOL_FAILED", true, "refused: first"],
          ["b", null, false, "fine"],
          ["c", "TOOL_FAILED", true, "refused: third"]
        ])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("tools can deliver through ctx.agent; a steer from a tool lands after the whole batch", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "a", name: "steerer", arguments: {} }, { id: "b", name: "slow", arguments: { ms: 30 } }] },
        { text: "done" }
      ])
      const steerer = Tool.make({
        name: "steerer",
        description: "steers",
        parameters: Schema.Struct({}),
        execute: (_, c) => Effect.as(Effect.orDie(c.agent.steer("from the tool")), { content: "steered" })
      })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [steerer, sleeper("slow")] })
        yield* agent.followup("go")
        yield* advance(100)
        expect(brief(agent.log.events()).slice(-12)).toEqual([
          "tool/call a steerer",
          "tool/call b slow",
          "splice next-step 0 +[from the tool] wake",
          "tool/result a",
          "tool/result b",
          "step/end 1.1",
          "splice next-step 0 -1",
          "step/start 1.2",
          "user from the tool",
          "assistant done",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })
    it.scoped("the calls of a batch start in model order, each with the FiberRefs of the batch's start", () => {
      // Instant calls share fibers (one runs them while each completes at once, toolBatch.ts):
      // a FiberRef one call sets is not seen by the next, and a fiber close to its yield leaves
      // the rest to a fresh one rather than start a later call first (every budget of operations
      // before a yield from 12 to 43 is tried: some yield between two calls).
      const probe = FiberRef.unsafeMake(0)
      let started: Array<number> = []
      let seen: Array<number> = []
      const tool = Tool.make({
        name: "probe",
        description: "records its start and the FiberRef it sees, then sets it",
        parameters: Schema.Struct({ k: Schema.Number }),
        execute: ({ k }) =>
          Effect.gen(function*() {
            started.push(k)
            seen.push(yield* FiberRef.get(probe))
            yield* FiberRef.set(probe, k + 1)
            if (k % 7 === 3) yield* Effect.sleep(5)
            return { content: `ok ${k}` }
          })
      })
      const calls = Array.from({ length: 24 }, (_, k) => ({ id: `c${k}`, name: "probe", arguments: { k } }))
      const model = ScriptedModel.make([{ toolCalls: calls }, { text: "done" }], { loop: true })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [tool], toolConcurrency: 24 })
        for (const ops of [undefined, ...Array.from({ length: 32 }, (_, i) => 12 + i)]) {
          started = []
          seen = []
          const go = agent.followup("go")
          yield* ops === undefined ? go : go.pipe(Effect.withMaxOpsBeforeYield(ops))
          yield* advance(100)
          expect({ ops, started }).toEqual({ ops, started: calls.map((_, k) => k) })
          expect({ ops, seen }).toEqual({ ops, seen: calls.map(() => 0) })
        }
        const results = agent.log.events().filter((e) => e.type === "tool/result")
        expect(results.slice(-24).map((e) => (e.data as any).message.content[0].toolCallId)).toEqual(calls.map((c) => c.id))
        expect(brief(agent.log.events()).at(-1)).toBe("turn/end 33 completed")
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a batch of instant calls where one steers: every result is committed, in call order, before the steer enters", () => {
      const calls = ["c0", "c1", "c2", "c3"].map((id, k) => ({ id, name: k === 1 ? "steerer" : "instant", arguments: {} }))
      const model = ScriptedModel.make([{ toolCalls: calls }, { text: "done" }])
      const steerer = Tool.make({
        name: "steerer",
        description: "steers",
        parameters: Schema.Struct({}),
        execute: (_, c) => Effect.as(Effect.orDie(c.agent.steer("steer")), { content: "steered" })
      })
      const instant = Tool.make({
        name: "instant",
        description: "answers at once",
        parameters: Schema.Struct({}),
        execute: () => Effect.succeed({ content: "ok" })
      })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [steerer, instant] })
        yield* agent.followup("go")
        yield* advance(10)
        const kept = brief(agent.log.events()).filter((e) => /^(tool\/result|user|assistant|step|turn\/end)/.test(e))
        expect(kept).toEqual([
          "step/start 1.1",
          "user go",
          "assistant instant({}) steerer({}) instant({}) instant({})",
          "tool/result c0",
          "tool/result c1",
          "tool/result c2",
          "tool/result c3",
          "step/end 1.1",
          "step/start 1.2",
          "user steer",
          "assistant done",
          "step/end 1.2",
          "turn/end 1 completed"
        ])
        const request = model.requests[1]!.messages.map((m) => text(m))
        expect(request.slice(-5)).toEqual(["result:ok", "result:steered", "result:ok", "result:ok", "steer"])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })
  })

  describe("Agent: tool results that would break the log (§2, §8)", () => {
    it.scoped("the same context returned by two calls of a batch enters once; the later call fails TOOL_FAILED", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "a", name: "t", arguments: {} }, { id: "b", name: "t", arguments: {} }] },
        { text: "done" }
      ])
      return Effect.gen(function*() {
        const shared = yield* UserMessage.make({ id: "shared-ctx", text: "SHARED", source: { kind: "plugin", plugin: "x" } })
        const t = Tool.make({
          name: "t",
          description: "returns a constant context",
          parameters: Schema.Struct({}),
          execute: () => Effect.succeed({ content: "ok", additionalContexts: [shared] })
        })
        const agent = yield* Agent.make({ tools: [t] })
        yield* agent.followup("go")
        yield* advance(10)
        const events = agent.log.events()
        const results = events.filter((e) => e.type === "tool/result").map((e) => (e.data as any).error?.code ?? "ok")
        expect(results).toEqual(["ok", "TOOL_FAILED"])
        expect(events.filter((e) => e.type === "user/message" && (e.data as any).id === "shared-ctx")).toHaveLength(1)
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("tool output whose content or contexts are malformed is a TOOL_FAILED result; the log stays valid", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "n", name: "num", arguments: {} }, { id: "c", name: "ctx", arguments: {} }] },
        { text: "done" }
      ])
      const num = Tool.make({
        name: "num",
        description: "returns a number as content",
        parameters: Schema.Struct({}),
        execute: () => Effect.succeed({ content: 42 as any })
      })
      const badCtx = Tool.make({
        name: "ctx",
        description: "returns a context without a source",
        parameters: Schema.Struct({}),
        execute: () =>
          Effect.succeed({
            content: "ok",
            additionalContexts: [{ id: "c1", role: "user", content: [{ type: "text", text: "x" }] } as any]
          })
      })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [num, badCtx] })
        yield* agent.followup("go")
        yield* advance(10)
        const results = agent.log.events().filter((e) => e.type === "tool/result").map((e) => (e.data as any).error?.code ?? "ok")
        expect(results).toEqual(["TOOL_FAILED", "TOOL_FAILED"])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })
  })

  describe("Agent: broken plugins and bad options never leave the log invalid", () => {
    it.scoped("a tool that returns undefined gets TOOL_FAILED; its sibling's result stands; the turn completes", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "bad", name: "bad", arguments: {} }, { id: "ok", name: "echo", arguments: {} }] },
        { toolCalls: [{ id: "bad2", name: "bad", arguments: {} }] },
        { text: "done" }
      ])
      const bad = Tool.make({
        name: "bad",
        description: "",
        parameters: Schema.Struct({}),
        execute: () => Effect.succeed(undefined as any)
      })
      const echo = Tool.make({
        name: "echo",
        description: "",
        parameters: Schema.Struct({}),
        execute: () => Effect.succeed({ content: "hi" })
      })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [bad, echo] })
        const d = yield* agent.followup("go")
        yield* advance(10)
        const results = agent.log.events().filter((e) => e.type === "tool/result").map((e) => [
          (e.data as any).message.content[0].toolCallId,
          (e.data as any).error?.code ?? "ok"
        ])
        expect(results).toEqual([["bad", "TOOL_FAILED"], ["ok", "ok"], ["bad2", "TOOL_FAILED"]])
        expect(yield* d.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        expect(brief(agent.log.events()).at(-1)).toBe("turn/end 1 completed")
        yield* checkLog(agent, [d])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a listener that throws, answers undefined or rejects with a non-string ends the turn PRE_STEP_FAILED; the next turn runs", () => {
      const model = ScriptedModel.make([{ text: "fine" }])
      let call = 0
      const broken: PreStep.Listener = (_p, next) => {
        call++
        if (call === 1) throw new Error("thrown")
        if (call === 2) return Effect.succeed(undefined as any)
        if (call === 3) return Effect.succeed({ _tag: "Reject", reason: 42 } as any)
        return next()
      }
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const ds = []
        for (const text of ["a", "b", "c", "d"]) {
          ds.push(yield* agent.followup(text))
          yield* advance(10)
        }
        const ends = agent.log.events().filter((e) => e.type === "turn/end").map((e) => {
          const r = (e.data as any).reason
          return r.kind === "error" ? r.error.code : r.kind
        })
        expect(ends).toEqual(["PRE_STEP_FAILED", "PRE_STEP_FAILED", "PRE_STEP_FAILED", "completed"])
        const outcomes = []
        for (const d of ds) outcomes.push(yield* d.outcome)
        expect(outcomes.map((o) => o._tag)).toEqual(["Dropped", "Dropped", "Dropped", "Entered"])
        yield* checkLog(agent, ds)
      }).pipe(Effect.provide(layer(model, PreStep.layer([broken]))))
    })

    it.scoped("a failed append in the middle of a turn closes it error RUN_FAILED; the agent goes on", () => {
      const model = ScriptedModel.make([{ toolCalls: [{ id: "c", name: "t", arguments: {} }] }, { text: "done" }, {
        text: "again"
      }])
      let failNext = false
      const t = Tool.make({
        name: "t",
        description: "makes the next append fail",
        parameters: Schema.Struct({}),
        execute: () =>
          Effect.sync(() => {
            failNext = true
            return { content: "ok" }
          })
      })
      const failing = Layer.effect(
        SessionStore.SessionStore,
        Effect.map(SessionStore.makeMemory, (store) => ({
          ...store,
          create: (options) =>
            Effect.map(store.create(options), (log): SessionLog.SessionLog => {
              const once = (): SessionLog.SessionStoreError | undefined => {
                if (!failNext) return undefined
                failNext = false
                return new SessionLog.SessionStoreError({ message: "disk full (test)", sessionId: log.id })
              }
              return {
                ...log,
                append: (drafts) =>
                  Effect.suspend(() => {
                    const e = once()
                    return e === undefined ? log.append(drafts) : Effect.fail(e)
                  }),
                appendSync: (drafts, time) => once() ?? log.appendSync!(drafts, time)
              }
            })
        }))
      )
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [t] })
        const d = yield* agent.followup("go")
        yield* advance(10)
        const ends = agent.log.events().filter((e) => e.type === "turn/end").map((e) => (e.data as any).reason)
        expect(ends).toEqual([{ kind: "error", error: { message: "disk full (test)", code: "RUN_FAILED" } }])
        expect(yield* d.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        expect(yield* agent.status).toBe("idle")
        const next = yield* agent.followup("again")
        yield* advance(10)
        expect(yield* next.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        yield* checkLog(agent, [d, next])
      }).pipe(
        Effect.provide(Layer.mergeAll(failing, IdGenerator.layerSeeded(42), Model.layer(model), PreStep.layer([]), layerTracked))
      )
    })

    it.scoped("a cancel cause that is not plain JSON fails InvalidEvent and changes nothing", () => {
      const model = ScriptedModel.make([{ text: "fine" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.inject(yield* ctx("pending"))
        const error = yield* Effect.flip(agent.cancel({ kind: "plugin", n: 1n } as any))
        expect(error._tag).toBe("InvalidEvent")
        expect(brief(agent.log.events())).toEqual(["splice next-step 0 +[pending]"])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a message whose JSON differs from its values (toJSON, a getter) fails InvalidMessage", () => {
      const model = ScriptedModel.make([{ text: "fine" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const hidden = { id: "h1", role: "user", content: [{ type: "text", text: "t" }], source: { kind: "user" } }
        Object.defineProperty(hidden, "toJSON", { value: () => ({ content: "not an array" }), enumerable: false })
        const getter = {
          id: "h2",
          role: "user",
          get content() {
            return [{ type: "text", text: "t" }]
          },
          source: { kind: "user" }
        }
        expect((yield* Effect.flip(agent.followup(hidden as any)))._tag).toBe("InvalidMessage")
        expect((yield* Effect.flip(agent.followup(getter as any)))._tag).toBe("InvalidMessage")
        expect(agent.log.events()).toEqual([])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("toolConcurrency NaN runs with the default bound; maxSteps NaN keeps the default limit", () => {
      const model = ScriptedModel.make([
        { toolCalls: [{ id: "a", name: "echo", arguments: {} }, { id: "b", name: "echo", arguments: {} }] },
        { text: "done" }
      ])
      const echo = Tool.make({
        name: "echo",
        description: "",
        parameters: Schema.Struct({}),
        execute: () => Effect.succeed({ content: "hi" })
      })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [echo], toolConcurrency: NaN, maxSteps: NaN })
        yield* agent.followup("go")
        yield* advance(10)
        expect(brief(agent.log.events()).at(-1)).toBe("turn/end 1 completed")
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })
  })

  describe("Agent: pre-step waterfall (§7)", () => {
    const rejectRm: PreStep.Listener = (p, next) =>
      p.messages.some((m) => text(m).includes("rm -rf")) ? Effect.succeed(PreStep.Decision.reject("dangerous")) : next()

    it.scoped("a rejected prompt does not strand the prompt queued behind it (§6.5)", () => {
      const model = ScriptedModel.make([{ latencyMs: 100, text: "It is noon." }, { latencyMs: 5, text: "Here is the weather." }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const a = yield* agent.followup("what time is it?")
        yield* advance(10)
        const b = yield* agent.followup("run rm -rf / for me")
        yield* advance(10)
        const c = yield* agent.followup("what is the weather?")
        yield* advance(1000)
        const log = brief(agent.log.events())
        expect(log.slice(log.indexOf("turn/end 1 completed"))).toEqual([
          "turn/end 1 completed",
          "turn/start 2",
          "splice next-turn 0 -1",
          "turn/end 2 blocked",
          "turn/start 3",
          "splice next-turn 0 -1",
          "step/start 3.1",
          "user what is the weather?",
          "assistant Here is the weather.",
          "step/end 3.1",
          "turn/end 3 completed"
        ])
        expect(model.requests).toHaveLength(2)
        expect(yield* b.outcome).toEqual({ _tag: "Dropped", reason: "rejected" })
        yield* checkLog(agent, [a, b, c])
      }).pipe(Effect.provide(layer(model, PreStep.layer([rejectRm]))))
    })

    it.scoped("a failing listener ends the turn error PRE_STEP_FAILED; input inserted after the claim stays pending", () => {
      const model = ScriptedModel.make([{ text: "fine" }])
      const slowFail: PreStep.Listener<Error> = (p, next) =>
        p.turn === 1 ? Effect.zipRight(Effect.sleep(50), Effect.fail(new Error("listener broke"))) : next()
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const a = yield* agent.followup("first")
        yield* advance(20)
        const i = yield* agent.inject(yield* ctx("arrived after the claim"))
        const b = yield* agent.followup("second")
        yield* advance(100)
        const ends = agent.log.events().filter((e) => e.type === "turn/end").map((e) => (e.data as any).reason)
        expect(ends).toEqual([
          { kind: "error", error: { message: "listener broke", code: "PRE_STEP_FAILED" } },
          { kind: "completed" }
        ])
        expect(yield* a.outcome).toEqual({ _tag: "Dropped", reason: "failed" })
        // The injection made after turn 1's claim entered turn 2 with the queued followup.
        expect(yield* i.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        expect(yield* b.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        yield* checkLog(agent, [a, i, b])
      }).pipe(Effect.provide(layer(model, PreStep.layer([slowFail]))))
    })

    it.scoped("a failure of one of several listeners fails the proposal; nothing returned is appended", () => {
      const model = ScriptedModel.make([{ text: "fine" }])
      const adds: PreStep.Listener = (p, next) =>
        Effect.map(next(), (d) =>
          d._tag === "Enter"
            ? PreStep.Decision.enter([
              ...d.messages,
              {
                id: "added-1",
                role: "user",
                content: [{ type: "text", text: "added" }],
                source: { kind: "plugin", plugin: "outer" }
              } as any
            ])
            : d)
      const dies: PreStep.Listener = () => Effect.die(new Error("inner defect"))
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const a = yield* agent.followup("x")
        yield* advance(10)
        expect(brief(agent.log.events())).toEqual([
          "splice next-turn 0 +[x]",
          "turn/start 1",
          "splice next-turn 0 -1",
          "turn/end 1 error:PRE_STEP_FAILED"
        ])
        expect(yield* a.outcome).toEqual({ _tag: "Dropped", reason: "failed" })
        yield* checkLog(agent, [a])
      }).pipe(Effect.provide(layer(model, PreStep.layer([adds, dies]))))
    })

    it.scoped("listener order: outer additions come after inner ones; Layer.provide composes like PreStep.layer", () => {
      const model = ScriptedModel.make([{ text: "one" }, { text: "two" }])
      const appender = (name: string): PreStep.Listener => (_p, next) =>
        Effect.map(next(), (d) =>
          d._tag === "Enter"
            ? PreStep.Decision.enter([
              ...d.messages,
              {
                id: `${name}-${_p.turn}`,
                role: "user",
                content: [{ type: "text", text: name }],
                source: { kind: "plugin", plugin: name }
              } as any
            ])
            : d)
      const composed = PreStep.listener(appender("outer")).pipe(
        Layer.provide(PreStep.listener(appender("inner"))),
        Layer.provide(PreStep.layer([]))
      )
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("prompt")
        yield* advance(10)
        const users = agent.log.events().filter((e) => e.type === "user/message").map((e) => text(e.data as any))
        expect(users).toEqual(["prompt", "inner", "outer"])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model, composed)))
    })

    it.scoped("the PreStep in context: without a layer the default enters the claimed batch in its claim's append; a provided one runs instead", () => {
      // The event types of each append of the session, in order.
      const appends: Array<string> = []
      const recording = Layer.effect(
        SessionStore.SessionStore,
        Effect.map(SessionStore.SessionStore, (store) => ({
          ...store,
          create: (options) =>
            Effect.map(store.create(options), (log): SessionLog.SessionLog => ({
              ...log,
              append: (drafts) =>
                Effect.suspend(() => {
                  appends.push(drafts.map((d) => d.type).join(" "))
                  return log.append(drafts)
                }),
              appendSync: log.appendSync === undefined ? undefined : (drafts, time) => {
                appends.push(drafts.map((d) => d.type).join(" "))
                return log.appendSync!(drafts, time)
              }
            }))
        }))
      ).pipe(Layer.provide(storeLayer(mode)))
      const base = Layer.mergeAll(recording, IdGenerator.layerSeeded(42), layerTracked)
      const seen: Array<string> = []
      const passThrough: PreStep.Listener = (p, next) => {
        seen.push(p.messages.map(text).join("|"))
        return next()
      }
      const session = Effect.scoped(Effect.gen(function*() {
        appends.length = 0
        const agent = yield* Agent.make()
        const d = yield* agent.followup("hi")
        yield* advance(10)
        expect(yield* d.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        expect(brief(agent.log.events())).toEqual([
          "splice next-turn 0 +[hi]",
          "turn/start 1",
          "splice next-turn 0 -1",
          "step/start 1.1",
          "user hi",
          "request/header",
          "assistant hello",
          "step/end 1.1",
          "turn/end 1 completed"
        ])
        yield* checkLog(agent, [d])
        return appends.slice()
      }))
      const model = () => Model.layer(ScriptedModel.make([{ text: "hello" }]))
      return Effect.gen(function*() {
        // No PreStep provided: the reference's default, the claim and the step it enters one append (§7, §24).
        const byDefault = yield* session.pipe(Effect.provide(Layer.merge(base, model())))
        expect(seen).toEqual([])
        // A provided waterfall runs on the claimed batch; its decision is appended after the claim.
        const byListener = yield* session.pipe(Effect.provide(Layer.mergeAll(base, model(), PreStep.layer([passThrough]))))
        expect(seen).toEqual(["hi"])
        expect({ byDefault, byListener }).toEqual({
          byDefault: [
            "agent/inbox/spliced",
            "turn/start agent/inbox/spliced step/start user/message request/header",
            "assistant/message step/end turn/end"
          ],
          byListener: [
            "agent/inbox/spliced",
            "turn/start agent/inbox/spliced",
            "step/start user/message request/header",
            "assistant/message step/end turn/end"
          ]
        })
      })
    })

    it.effect("merging listener layers fails loudly", () =>
      Effect.gen(function*() {
        const l: PreStep.Listener = (_p, next) => next()
        const merged = Layer.mergeAll(PreStep.listener(l), PreStep.listener(l)).pipe(Layer.provide(PreStep.layer([])))
        const exit = yield* Effect.exit(Effect.scoped(Layer.build(merged)))
        expect(Exit.isFailure(exit)).toBe(true)
        expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain("two listeners wrap the same PreStep")
      }))

    it.scoped("a listener that drops a claimed message discards it; the step still enters", () => {
      const model = ScriptedModel.make([{ text: "ok" }])
      const dropCtx: PreStep.Listener = (p, next) => next({ ...p, messages: p.messages.filter((m) => m.source.kind === "user") })
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const i = yield* agent.inject(yield* ctx("drop me"))
        const f = yield* agent.followup("keep me")
        yield* advance(10)
        expect(yield* i.outcome).toEqual({ _tag: "Dropped", reason: "discarded" })
        expect(yield* f.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        yield* checkLog(agent, [i, f])
      }).pipe(Effect.provide(layer(model, PreStep.layer([dropCtx]))))
    })
  })

  describe("Agent: model responses (§6.4, §11)", () => {
    it.scoped("a truncated response runs none of its calls (TRUNCATED) and the turn ends max-tokens", () => {
      const model = ScriptedModel.make([
        { text: "partial", toolCalls: [{ id: "t1", name: "echo", arguments: { value: "x" } }], finish: "length" }
      ])
      const echo = Tool.make({
        name: "echo",
        description: "echo",
        parameters: Schema.Struct({ value: Schema.String }),
        execute: ({ value }) => Effect.succeed({ content: value })
      })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [echo] })
        yield* agent.followup("go")
        yield* advance(10)
        expect(brief(agent.log.events()).slice(-5)).toEqual([
          "assistant partial echo({\"value\":\"x\"})",
          "tool/call t1 echo",
          "tool/result t1 TRUNCATED",
          "step/end 1.1",
          "turn/end 1 max-tokens"
        ])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a retryable model error is retried in the same step; the failed attempt leaves no message", () => {
      const model = ScriptedModel.make([
        { latencyMs: 5, text: "lost words", error: { code: "HTTP_503", message: "overloaded", retryable: true } },
        { text: "recovered" }
      ])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const queue = yield* agent.subscribe
        yield* agent.followup("go")
        yield* advance(5000)
        const live = Chunk.toReadonlyArray(yield* Queue.takeAll(queue))
        expect(live.filter((e) => e.type === "assistant/retry")).toEqual([
          { type: "assistant/retry", turn: 1, step: 1, attempt: 2 }
        ])
        expect(brief(agent.log.events()).slice(-3)).toEqual(["assistant recovered", "step/end 1.1", "turn/end 1 completed"])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("retries wait for retryAfterMs on the clock (else the backoff: 500 ms, 1 s), 3 attempts in all", () => {
      const limited = { code: "HTTP_429", message: "slow down", status: 429, retryable: true, retryAfterMs: 2000 } as const
      const overloaded = { code: "HTTP_529", message: "overloaded", status: 529, retryable: true } as const
      const model = ScriptedModel.make([
        { text: "lost", error: limited },
        { error: overloaded },
        { text: "third time" },
        { error: limited },
        { error: overloaded },
        { error: overloaded }
      ])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const queue = yield* agent.subscribe
        yield* agent.followup("go")
        yield* advance(0)
        expect(model.requests).toHaveLength(1)
        yield* advance(1999) // retryAfterMs 2000 wins over the first backoff (500 ms)
        expect(model.requests).toHaveLength(1)
        yield* advance(1)
        expect(model.requests).toHaveLength(2)
        yield* advance(999) // second backoff: 1 s
        expect(model.requests).toHaveLength(2)
        yield* advance(1)
        expect(model.requests).toHaveLength(3)
        yield* advance(10)
        const live = Chunk.toReadonlyArray(yield* Queue.takeAll(queue))
        // The failed attempt's delta is withdrawn by the retry notice; no message is logged for it.
        expect(
          live.filter((e) => e.type === "assistant/retry" || e.type === "assistant/delta").map((e) =>
            e.type === "assistant/retry" ? `retry ${e.attempt}` : "delta"
          )
        ).toEqual([
          "delta",
          "retry 2",
          "retry 3",
          "delta", // "third"
          "delta" // " time"
        ])
        expect(brief(agent.log.events()).filter((l) => l.startsWith("assistant"))).toEqual(["assistant third time"])
        // A second turn whose three attempts all fail ends error with the last error.
        yield* agent.followup("again")
        yield* advance(10_000)
        expect(model.requests).toHaveLength(6)
        expect(brief(agent.log.events()).slice(-2)).toEqual(["step/end 2.1", "turn/end 2 error:HTTP_529"])
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a final model error ends the turn error with its code; the queued followup still runs", () => {
      const model = ScriptedModel.make([
        { latencyMs: 50, error: { code: "HTTP_400", message: "bad request", status: 400 } },
        { text: "fine" }
      ])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const a = yield* agent.followup("one")
        yield* advance(10)
        const b = yield* agent.followup("two")
        yield* advance(100)
        const ends = agent.log.events().filter((e) => e.type === "turn/end").map((e) => (e.data as any).reason)
        expect(ends).toEqual([
          { kind: "error", error: { message: "bad request", code: "HTTP_400", status: 400 } },
          { kind: "completed" }
        ])
        expect(yield* a.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        expect(yield* b.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        yield* checkLog(agent, [a, b])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a request past the end of the script fails the turn SCRIPT_EXHAUSTED", () => {
      const model = ScriptedModel.make([])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("go")
        yield* advance(10)
        expect(brief(agent.log.events()).slice(-2)).toEqual(["step/end 1.1", "turn/end 1 error:SCRIPT_EXHAUSTED"])
        expect(model.requests).toHaveLength(1)
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })
  })

  describe("Agent: cancel and dispose (§9)", () => {
    it.scoped("cancel during a tool run: canceled splices with cause, discarded notifications, ABORTED result, turn aborted", () => {
      const model = ScriptedModel.make([
        {
          toolCalls: [{ id: "long", name: "sleep", arguments: { ms: 10_000 } }, {
            id: "never",
            name: "sleep",
            arguments: { ms: 1 }
          }]
        }
      ])
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [sleeper("sleep", [], { exclusive: true })] })
        const queue = yield* agent.subscribe
        const f = yield* agent.followup("go")
        yield* advance(50)
        const i = yield* agent.inject(yield* ctx("pending context"))
        const q = yield* agent.followup("queued prompt")
        yield* Queue.takeAll(queue)
        yield* agent.cancel()
        const live = Chunk.toReadonlyArray(yield* Queue.takeAll(queue))
        expect(live.filter((e) => e.type === "agent/inbox/discarded").map((e) => text((e as any).message))).toEqual([
          "pending context",
          "queued prompt"
        ])
        expect(brief(agent.log.events()).slice(-7)).toEqual([
          "splice next-step 0 -1 canceled cause=user",
          "splice next-turn 0 -1 canceled cause=user",
          "tool/result long ABORTED",
          "tool/call never sleep",
          "tool/result never TOOL_ABORTED_BEFORE_DISPATCH",
          "step/end 1.1",
          "turn/end 1 aborted:user"
        ])
        expect(yield* agent.status).toBe("idle")
        expect(yield* i.outcome).toEqual({ _tag: "Dropped", reason: "canceled" })
        expect(yield* q.outcome).toEqual({ _tag: "Dropped", reason: "canceled" })
        expect(yield* f.outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
        yield* checkLog(agent, [f, i, q])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("cancel mid-stream keeps the streamed prefix with interrupted: true", () => {
      const model = ScriptedModel.make([{ latencyMs: 100, text: "one two three four" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("go")
        yield* advance(60)
        yield* agent.cancel({ kind: "parent", by: "supervisor" })
        const events = agent.log.events()
        expect(brief(events).slice(-3)).toEqual(["assistant one two (interrupted)", "step/end 1.1", "turn/end 1 aborted:parent"])
        expect((events[events.length - 1]!.data as any).reason).toEqual({
          kind: "aborted",
          reason: { kind: "parent", by: "supervisor" }
        })
        yield* checkLog(agent)
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("cancel({ keepInbox }) keeps pending work, owed no turn until a new waking delivery", () => {
      const model = ScriptedModel.make([{ latencyMs: 100, text: "first" }, { text: "second" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("one")
        yield* advance(10)
        const kept = yield* agent.followup("kept")
        yield* agent.cancel(undefined, { keepInbox: true })
        yield* advance(100)
        expect(yield* agent.status).toBe("idle")
        expect((yield* agent.inbox).nextTurn.map((m) => text(m))).toEqual(["kept"])
        expect(brief(agent.log.events()).slice(-2)).toEqual(["step/end 1.1", "turn/end 1 aborted:user"])
        yield* checkLog(agent)
        const later = yield* agent.followup("later")
        yield* advance(10)
        expect(yield* kept.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        expect(yield* later.outcome).toEqual({ _tag: "Entered", turn: 3, step: 1 })
        yield* checkLog(agent, [kept, later])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a waking delivery made while the cancel unwinds runs afterwards (the latch)", () => {
      const model = ScriptedModel.make([{ toolCalls: [{ id: "t", name: "stubborn", arguments: {} }] }, { text: "after" }])
      const stubborn = Tool.make({
        name: "stubborn",
        description: "takes 100 ms to stop",
        parameters: Schema.Struct({}),
        execute: () => Effect.as(Effect.never.pipe(Effect.onInterrupt(() => Effect.sleep(100))), { content: "never" })
      })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [stubborn] })
        yield* agent.followup("go")
        yield* advance(10)
        const canceling = yield* Effect.fork(agent.cancel())
        yield* advance(50)
        const s = yield* agent.steer("during unwinding")
        yield* advance(200)
        yield* Fiber.join(canceling)
        const log = brief(agent.log.events())
        expect(log.slice(log.indexOf("splice next-turn 0 +[during unwinding] wake"))).toEqual([
          "splice next-turn 0 +[during unwinding] wake",
          "tool/result t ABORTED",
          "step/end 1.1",
          "turn/end 1 aborted:user",
          "turn/start 2",
          "splice next-turn 0 -1",
          "step/start 2.1",
          "user during unwinding",
          "assistant after",
          "step/end 2.1",
          "turn/end 2 completed"
        ])
        expect(yield* s.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        yield* checkLog(agent, [s])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a cancel that lands before the driver fiber has run still closes the turn; the agent goes idle", () => {
      const model = ScriptedModel.make([{ text: "never" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const d = yield* agent.followup("go")
        yield* agent.cancel() // no yield in between: the driver has not run yet
        expect(yield* agent.status).toBe("idle")
        // The prompt was still queued: the cancel clears it; the run it started closes its turn.
        expect(brief(agent.log.events())).toEqual([
          "splice next-turn 0 +[go]",
          "splice next-turn 0 -1 canceled cause=user",
          "turn/start 1",
          "turn/end 1 aborted:user"
        ])
        expect(yield* d.outcome).toEqual({ _tag: "Dropped", reason: "canceled" })
        yield* checkLog(agent, [d])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("cancel on an idle agent only clears", () => {
      const model = ScriptedModel.make([])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const i = yield* agent.inject(yield* ctx("idle context"))
        yield* agent.cancel()
        expect(brief(agent.log.events())).toEqual([
          "splice next-step 0 +[idle context]",
          "splice next-step 0 -1 canceled cause=user"
        ])
        expect(yield* i.outcome).toEqual({ _tag: "Dropped", reason: "canceled" })
      }).pipe(Effect.provide(layer(model)))
    })

    it.effect("closing the agent's scope disposes it: aborted {disposed}, pending work disposed, deliveries fail", () => {
      const model = ScriptedModel.make([{ toolCalls: [{ id: "w", name: "sleep", arguments: { ms: 10_000 } }] }])
      return Effect.gen(function*() {
        const scope = yield* Effect.scope
        const { agent, i } = yield* Effect.scoped(Effect.gen(function*() {
          const agent = yield* Agent.make({ tools: [sleeper("sleep")] })
          yield* agent.followup("go")
          yield* advance(10)
          const i = yield* agent.inject(yield* ctx("never seen"))
          return { agent, i }
        }))
        void scope
        expect(brief(agent.log.events()).slice(-5)).toEqual([
          "splice next-step 0 +[never seen]",
          "splice next-step 0 -1 canceled cause=disposed",
          "tool/result w ABORTED",
          "step/end 1.1",
          "turn/end 1 aborted:disposed"
        ])
        expect(yield* i.outcome).toEqual({ _tag: "Dropped", reason: "disposed" })
        const err = yield* Effect.flip(agent.steer("too late"))
        expect(err._tag).toBe("AgentDisposed")
        yield* checkLog(agent, [i])
      }).pipe(Effect.provide(layer(model)), Effect.scoped)
    })
  })

  describe("Agent: step limit", () => {
    it.scoped("a turn that would run past maxSteps ends error MAX_STEPS; a pending steer runs next", () => {
      const model = ScriptedModel.make([{ toolCalls: [{ id: "again", name: "sleep", arguments: { ms: 10 } }] }], { loop: true })
      return Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [sleeper("sleep")], maxSteps: 3 })
        yield* agent.followup("loop forever")
        yield* advance(25)
        const s = yield* agent.steer("stop it")
        yield* advance(100)
        yield* agent.cancel()
        const ends = agent.log.events().filter((e) => e.type === "turn/end").map((e) => (e.data as any).reason)
        expect(ends[0]).toEqual({ kind: "error", error: { message: "the turn reached its limit of 3 steps", code: "MAX_STEPS" } })
        expect(brief(agent.log.events()).filter((l) => l.startsWith("step/start 1."))).toEqual([
          "step/start 1.1",
          "step/start 1.2",
          "step/start 1.3"
        ])
        // The steer arrived during step 3: it starts turn 2.
        expect(yield* s.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
        yield* checkLog(agent, [s])
      }).pipe(Effect.provide(layer(model)))
    })
  })

  describe("Agent: where it differs from DSH (§16)", () => {
    it.scoped("streaming deltas are live notifications, never durable events (§16, point 6)", () => {
      const model = ScriptedModel.make([{ latencyMs: 30, text: "one two three" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const queue = yield* agent.subscribe
        yield* agent.followup("go")
        yield* advance(100)
        const live = Chunk.toReadonlyArray(yield* Queue.takeAll(queue))
        expect(live.filter((e) => e.type === "assistant/delta")).toEqual([
          { type: "assistant/delta", turn: 1, step: 1, text: "one" },
          { type: "assistant/delta", turn: 1, step: 1, text: " two" },
          { type: "assistant/delta", turn: 1, step: 1, text: " three" }
        ])
        const types = new Set(agent.log.events().map((e) => e.type))
        expect([...types].filter((t) => t.includes("chunk") || t.includes("delta"))).toEqual([])
        // Every durable event reached subscribers too, in log order.
        expect(live.filter((e) => "seq" in e).map((e) => (e as { seq: number }).seq)).toEqual(
          agent.log.events().map((e) => e.seq)
        )
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("a block of many deltas is logged as their concatenation (its text is flattened every 16 deltas)", () => {
      const reasoning = Array.from({ length: 130 }, (_, i) => `r${i} `)
      const words = Array.from({ length: 300 }, (_, i) => `w${i} `)
      const model: Model.ModelService = {
        provider: "test",
        model: "many-deltas",
        respond: (_request, sink) =>
          Effect.gen(function*() {
            for (const text of reasoning) yield* sink.part({ type: "reasoning-delta", text })
            for (const text of words) yield* sink.part({ type: "text-delta", text })
            yield* sink.part({ type: "finish", reason: "stop" })
          })
      }
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("go")
        yield* agent.awaitIdle
        const message = agent.log.events().find((e) => e.type === "assistant/message")
        expect((message?.data as { message: { content: unknown } }).message.content).toEqual([
          { type: "reasoning", text: reasoning.join("") },
          { type: "text", text: words.join("") }
        ])
      }).pipe(Effect.provide(layer(model)))
    })

    it.scoped("ids are unique per session, not only among pending items (§16, point 9)", () => {
      const model = ScriptedModel.make([{ text: "ok" }])
      return Effect.gen(function*() {
        const agent = yield* Agent.make()
        const c = yield* ctx("once")
        yield* agent.inject(c)
        yield* agent.followup("go")
        yield* advance(10)
        expect((yield* agent.inbox).nextStep).toEqual([])
        const again = yield* Effect.flip(agent.inject(c))
        expect(again).toMatchObject({ _tag: "DuplicateMessageId", messageId: c.id })
        expect(agent.log.events().filter((e) => e.type === "agent/inbox/spliced" && (e.data as any).inserted.length > 0))
          .toHaveLength(2)
      }).pipe(Effect.provide(layer(model)))
    })
  })
}
