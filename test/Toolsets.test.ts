/**
 * Toolsets (§8): tools whose list changes while the agent runs, read at each step's start; a
 * changed list is in the next request and its `request/header`, never in the middle of a step;
 * a name already taken is left out. And what a tool may report beside its result: an error
 * with content (`ToolOutput.isError`) and progress (`ToolContext.progress`, live `tool/progress`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Queue, Schema } from "effect"
import type { AgentEvent } from "../src/AgentEvent.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import * as Subagent from "../src/Subagent.js"
import * as Tool from "../src/Tool.js"
import { Agent, brief, layer, settle } from "./utils/agent.js"

const named = (name: string, answer: string) =>
  Tool.make({
    name,
    description: `the ${name} tool`,
    parameters: Schema.Struct({}),
    execute: () => Effect.succeed({ content: answer })
  })

/** A toolset whose list the test replaces. */
const mutable = (initial: ReadonlyArray<Tool.Tool<any>>) => {
  let tools = initial
  let version = 0
  return {
    set: (next: ReadonlyArray<Tool.Tool<any>>) => {
      tools = next
      version++
    },
    toolset: { name: "test", tools: () => tools, version: () => version } satisfies Tool.Toolset
  }
}

const headers = (events: ReadonlyArray<SessionEvent>) =>
  events.filter((e) => e.type === "request/header").map((e) => (e.data as any).tools.map((t: any) => t.name))

const resultTexts = (events: ReadonlyArray<SessionEvent>) =>
  events.filter((e) => e.type === "tool/result").map((e) => {
    const d = e.data as any
    return `${d.message.content[0].content.map((b: any) => b.type === "text" ? b.text : `[${b.type}]`).join("")}${
      d.error ? ` ${d.error.code}` : ""
    }`
  })

describe("toolsets (§8)", () => {
  it.scoped("a list changed during a step is in the next step's request and request/header; a removed tool is unknown", () => {
    const set = mutable([named("alpha", "A")])
    const model = ScriptedModel.make([
      (request) => {
        // The list changes while the first request runs: this step keeps the tools it started with.
        set.set([named("beta", "B")])
        expect(request.tools.map((t) => t.name)).toEqual(["base", "alpha"])
        return { toolCalls: [{ id: "c1", name: "alpha", arguments: {} }] }
      },
      { toolCalls: [{ id: "c2", name: "alpha", arguments: {} }, { id: "c3", name: "beta", arguments: {} }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [named("base", "0")], toolsets: [set.toolset] })
      yield* agent.followup("go")
      yield* settle
      const events = agent.log.events()
      expect(model.requests.map((r) => r.tools.map((t) => t.name))).toEqual([
        ["base", "alpha"],
        ["base", "beta"],
        ["base", "beta"]
      ])
      expect(headers(events)).toEqual([["base", "alpha"], ["base", "beta"]])
      expect(brief(events).filter((e) => /^(step\/start|request\/header|tool\/result)/.test(e))).toEqual([
        "step/start 1.1",
        "request/header",
        "tool/result c1",
        "step/start 1.2",
        "request/header",
        "tool/result c2 UNKNOWN_TOOL",
        "tool/result c3",
        "step/start 1.3"
      ])
      expect(resultTexts(events)).toEqual(["A", "Unknown tool \"alpha\". Available tools: base, beta. UNKNOWN_TOOL", "B"])
    }).pipe(Effect.provide(layer(model)))
  })

  it.scoped("a name already taken by tools or an earlier toolset is left out; an unmoved version is not read again", () => {
    let reads = 0
    const first = { name: "one", tools: () => [named("same", "from one"), named("own", "own")], version: () => 1 }
    const second: Tool.Toolset = {
      name: "two",
      tools: () => {
        reads++
        return [named("base", "shadowed"), named("same", "from two")]
      },
      version: () => 7
    }
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "c1", name: "base", arguments: {} }, { id: "c2", name: "same", arguments: {} }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [named("base", "base")], toolsets: [first, second] })
      yield* agent.followup("go")
      yield* settle
      expect(model.requests[0]!.tools.map((t) => t.name)).toEqual(["base", "same", "own"])
      expect(resultTexts(agent.log.events())).toEqual(["base", "from one"])
      expect(reads).toBe(1)
    }).pipe(Effect.provide(layer(model)))
  })

  it.scoped("a toolset that throws offers no tools that step and fails nothing", () => {
    let broken = true
    let version = 0
    const flaky: Tool.Toolset = {
      name: "flaky",
      tools: () => {
        if (broken) throw new Error("cannot list")
        return [named("late", "here")]
      },
      version: () => version
    }
    const model = ScriptedModel.make([
      () => {
        broken = false
        version++
        return { toolCalls: [{ id: "c1", name: "late", arguments: {} }] }
      },
      { toolCalls: [{ id: "c2", name: "late", arguments: {} }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ toolsets: [flaky] })
      yield* agent.followup("go")
      yield* settle
      expect(model.requests.map((r) => r.tools.map((t) => t.name))).toEqual([[], ["late"], ["late"]])
      expect(resultTexts(agent.log.events())).toEqual([
        "Unknown tool \"late\". Available tools: none. UNKNOWN_TOOL",
        "here"
      ])
    }).pipe(Effect.provide(layer(model)))
  })

  it.scoped("a toolset tool that needs approval makes calls wait for one (§26)", () => {
    const asking = Tool.make({
      name: "ask",
      description: "asks",
      parameters: Schema.Struct({}),
      approval: "always",
      execute: () => Effect.succeed({ content: "ran" })
    })
    const set = mutable([])
    const model = ScriptedModel.make([
      () => {
        set.set([asking])
        return { text: "first" }
      },
      { toolCalls: [{ id: "c1", name: "ask", arguments: {} }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ toolsets: [set.toolset] })
      yield* agent.followup("one")
      yield* settle
      yield* agent.followup("two")
      yield* settle
      const pending = yield* agent.pendingApprovals
      expect(pending.map((p) => `${p.toolName} ${p.callId}`)).toEqual(["ask c1"])
      yield* agent.approve(pending[0]!.id)
      yield* settle
      expect(resultTexts(agent.log.events())).toEqual(["ran"])
    }).pipe(Effect.provide(layer(model)))
  })

  it.scoped("a sub-agent's toolsets are its own (§27): the child's requests have them, the parent's do not", () => {
    const set = mutable([named("remote", "R")])
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "p1", name: "subagent", arguments: { prompt: "use remote" } }] },
      { toolCalls: [{ id: "k1", name: "remote", arguments: {} }] },
      { text: "child done" },
      { text: "parent done" }
    ])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [Subagent.tool({ toolsets: [set.toolset] })] })
      yield* agent.followup("delegate")
      yield* settle
      expect(model.requests.map((r) => r.tools.map((t) => t.name))).toEqual([
        ["subagent"],
        ["remote"],
        ["remote"],
        ["subagent"]
      ])
      expect(resultTexts(agent.log.events())[0]).toMatch(/^child done/)
    }).pipe(Effect.provide(layer(model)))
  })
})

describe("what a tool reports beside its result (§8)", () => {
  it.scoped("isError: an error result TOOL_FAILED with the tool's own content, images kept", () => {
    const reporting = Tool.make({
      name: "report",
      description: "fails with content",
      parameters: Schema.Struct({}),
      execute: () =>
        Effect.succeed({
          content: [{ type: "text" as const, text: "quota exceeded" }, {
            type: "image" as const,
            mediaType: "image/png",
            data: "AAAA"
          }],
          isError: true
        })
    })
    const model = ScriptedModel.make([{ toolCalls: [{ id: "c1", name: "report", arguments: {} }] }, { text: "done" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [reporting] })
      yield* agent.followup("go")
      yield* settle
      const result = agent.log.events().find((e) => e.type === "tool/result")!.data as any
      expect(result.error).toEqual({ name: "ToolFailed", code: "TOOL_FAILED" })
      expect(result.message.content[0]).toEqual({
        type: "tool-result",
        toolCallId: "c1",
        isError: true,
        content: [{ type: "text", text: "quota exceeded" }, { type: "image", mediaType: "image/png", data: "AAAA" }]
      })
    }).pipe(Effect.provide(layer(model)))
  })

  it.scoped("progress: live tool/progress events between the call and its result, never in the log", () => {
    const slow = Tool.make({
      name: "slow",
      description: "reports progress",
      parameters: Schema.Struct({}),
      execute: (_args, ctx) =>
        Effect.gen(function*() {
          yield* ctx.progress({ progress: 1, total: 2 })
          yield* ctx.progress({ progress: 2, total: 2, message: "almost" })
          yield* ctx.progress({ progress: 3 })
          return { content: "ok" }
        })
    })
    const model = ScriptedModel.make([{ toolCalls: [{ id: "c1", name: "slow", arguments: {} }] }, { text: "done" }])
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [slow] })
      const queue = yield* agent.subscribe
      yield* agent.followup("go")
      yield* settle
      const events = Chunk.toReadonlyArray(yield* Queue.takeAll(queue)) as ReadonlyArray<AgentEvent>
      const around = events.filter((e) => e.type === "tool/call" || e.type === "tool/progress" || e.type === "tool/result")
      expect(around.map((e) => e.type === "tool/progress" ? { ...e } : e.type)).toEqual([
        "tool/call",
        { type: "tool/progress", callId: "c1", turn: 1, step: 1, progress: 1, total: 2 },
        { type: "tool/progress", callId: "c1", turn: 1, step: 1, progress: 2, total: 2, message: "almost" },
        { type: "tool/progress", callId: "c1", turn: 1, step: 1, progress: 3 },
        "tool/result"
      ])
      expect(agent.log.events().some((e) => (e.type as string) === "tool/progress")).toBe(false)
    }).pipe(Effect.provide(layer(model)))
  })
})
