import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Delivery from "../src/Delivery.js"
import * as Invariant from "../src/Invariant.js"
import * as Scenario from "../src/Scenario.js"
import * as Simulator from "../src/Simulator.js"
import { brief } from "./utils/agent.js"

const SCENARIOS = Path.resolve(process.cwd(), "../shared/scenarios")

const runFile = (name: string) =>
  Effect.suspend(() => {
    const text = Fs.readFileSync(Path.join(SCENARIOS, name), "utf8")
    const scenario = Either.getOrThrow(Scenario.parse(text))
    return Simulator.run(scenario, { seed: Scenario.seedOf(text) })
  })

/** Runs an inline scenario (seed 1). */
export const runScenario = (scenario: unknown) =>
  Effect.suspend(() => Simulator.run(Either.getOrThrow(Scenario.decode(scenario)), { seed: 1 }))

const usersOf = (events: ReadonlyArray<any>, turn: number, step: number) => {
  const out: Array<string> = []
  let open = false
  for (const e of events) {
    if (e.type === "step/start") open = e.data.turn === turn && e.data.step === step
    else if (e.type === "step/end") open = false
    else if (open && e.type === "user/message") {
      out.push(
        `${e.data.content.map((b: any) => b.text).join("")} <${e.data.source.kind}${
          e.data.source.plugin ? `:${e.data.source.plugin}` : ""
        }${e.data.source.callId ? `:${e.data.source.callId}` : ""}>`
      )
    }
  }
  return out
}

/** Every delivery record's outcome equals its fate on the log; the log is clean. */
export const checkRun = (result: Simulator.RunResult) => {
  expect(Invariant.check(result.events)).toEqual([])
  for (const d of result.deliveries) {
    if (d.messageId === undefined) continue
    const fate = Delivery.fateOf(result.events, d.messageId)
    if (d.outcome === undefined) expect(fate).toEqual({ _tag: "Pending" })
    else expect(d.outcome).toEqual(fate)
  }
}

describe("shared scenarios (../shared/scenarios/README.md)", () => {
  it.effect("tool-batch-with-steer: one turn, two steps; results in call order; contexts, steer, injection in order", () =>
    Effect.gen(function*() {
      const r = yield* runFile("tool-batch-with-steer.json")
      const log = brief(r.events)
      expect(log.filter((l) => l.startsWith("turn/") || l.startsWith("step/"))).toEqual([
        "turn/start 1",
        "step/start 1.1",
        "step/end 1.1",
        "step/start 1.2",
        "step/end 1.2",
        "turn/end 1 completed"
      ])
      expect(usersOf(r.events, 1, 1)).toEqual(["fetch both pages <user>"])
      // Both calls start together (t=20); call_b finishes at 100 but call_a's result comes first.
      const tools = r.events.filter((e) => e.type === "tool/call" || e.type === "tool/result")
      expect(tools.map((e) => `${brief([e])[0]} @${e.time}`)).toEqual([
        "tool/call call_a fetch @20",
        "tool/call call_b fetch @20",
        "tool/result call_a @320",
        "tool/result call_b @320"
      ])
      expect(usersOf(r.events, 1, 2)).toEqual([
        "fetch is cached for 60s <tool:call_a>",
        "fetch is cached for 60s <tool:call_b>",
        "only the headers, please <user>",
        "network is metered <plugin:netwatch>"
      ])
      expect(r.requests).toHaveLength(2)
      expect(r.requests[1]!.messages.slice(1)).toEqual([
        {
          role: "assistant",
          content: "",
          toolCalls: [
            { id: "call_a", name: "fetch", arguments: "{\"ms\":300}" },
            { id: "call_b", name: "fetch", arguments: "{\"ms\":80}" }
          ]
        },
        { role: "tool", content: "200 OK", toolCallId: "call_a" },
        { role: "tool", content: "200 OK", toolCallId: "call_b" },
        { role: "user", content: "fetch is cached for 60s" },
        { role: "user", content: "fetch is cached for 60s" },
        { role: "user", content: "only the headers, please" },
        { role: "user", content: "network is metered" }
      ])
      checkRun(r)
    }))

  it.effect("reject-then-queue: turn 2 is blocked with no step and no request; turn 3 runs without another delivery", () =>
    Effect.gen(function*() {
      const r = yield* runFile("reject-then-queue.json")
      const log = brief(r.events)
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
      expect(r.requests.map((q) => [q.turn, q.step])).toEqual([[1, 1], [3, 1]])
      expect(r.deliveries.map((d) => d.outcome)).toEqual([
        { _tag: "Entered", turn: 1, step: 1 },
        { _tag: "Dropped", reason: "rejected" },
        { _tag: "Entered", turn: 3, step: 1 }
      ])
      checkRun(r)
    }))

  it.effect("idle-inject: one splice at time 0 and nothing else until 1000 ms; then one step with context, then prompt", () =>
    Effect.gen(function*() {
      const r = yield* runFile("idle-inject.json")
      expect(r.events[0]!.type).toBe("agent/inbox/spliced")
      expect(r.events[0]!.time).toBe(0)
      expect(r.events[1]!.time).toBe(1000)
      expect(r.events.filter((e) => e.time < 1000)).toHaveLength(1)
      expect(usersOf(r.events, 1, 1)).toEqual(["git branch: main <plugin:scenario>", "which branch am I on? <user>"])
      expect(brief(r.events).filter((l) => l.startsWith("turn/end"))).toEqual(["turn/end 1 completed"])
      expect(r.requests).toEqual([
        {
          turn: 1,
          step: 1,
          messages: [{ role: "user", content: "git branch: main" }, { role: "user", content: "which branch am I on?" }]
        }
      ])
      checkRun(r)
    }))

  it.effect("every shared scenario gives a byte-identical log and requests on a second run", () =>
    Effect.gen(function*() {
      for (const name of Fs.readdirSync(SCENARIOS).filter((f) => f.endsWith(".json"))) {
        const a = yield* runFile(name)
        const b = yield* runFile(name)
        expect(b.log).toBe(a.log)
        expect(b.requestLines).toBe(a.requestLines)
        expect(a.log.split("\n")[0]).toMatch(
          /^\{"type":"session","format":"effect-agent-loop","version":1,"id":"[0-9a-f-]+","createdAt":0\}$/
        )
      }
    }))
})

describe("scenario validation (§15)", () => {
  const invalid = (input: unknown) => Either.flip(Scenario.decode(input)).pipe(Either.getOrThrow)

  it("unknown fields, wrong types, negative times and ambiguous actions are rejected with their JSON path", () => {
    expect(invalid({ model: [], actions: [], extra: 1 }).path).toBe("$.extra")
    expect(invalid({ model: [{ txt: "x" }], actions: [] }).path).toBe("$.model[0].txt")
    expect(invalid({ model: [{ latencyMs: "5" }], actions: [] })).toMatchObject({
      path: "$.model[0].latencyMs",
      message: "Expected number, actual \"5\""
    })
    expect(invalid({ model: [], actions: [{ at: -5, followup: "x" }] })).toMatchObject({
      path: "$.actions[0].at",
      message: "Expected a non-negative number, actual -5"
    })
    expect(invalid({ model: [], actions: [{ at: 0, followup: "x", steer: "y" }] })).toMatchObject({
      path: "$.actions[0]",
      message: "an action has one kind, this one has followup and steer"
    })
    expect(invalid({ model: [], actions: [{ at: 0 }] }).path).toBe("$.actions[0]")
    expect(invalid({ model: [], tools: { t: { durationMs: -1 } }, actions: [] }).path).toBe("$.tools.t.durationMs")
    expect(invalid({ model: [], preStep: [{ rejectIf: "x" }], actions: [] }).path).toBe("$.preStep[0].rejectIf")
    expect(invalid({ actions: [] }).path).toBe("$.model")
    expect(Either.flip(Scenario.parse("{ nope")).pipe(Either.getOrThrow).path).toBe("$")
    // Every action kind reports the field of its own kind.
    expect(invalid({ model: [], actions: [{ at: -1, steer: "x" }] })).toMatchObject({
      path: "$.actions[0].at",
      message: "Expected a non-negative number, actual -1"
    })
    expect(invalid({ model: [], actions: [{ at: 0, cancel: { keep: true } }] }).path).toBe("$.actions[0].cancel.keep")
    expect(invalid({ model: [], actions: [{ at: 0, cancel: { keepInbox: "yes" } }] }).path).toBe("$.actions[0].cancel.keepInbox")
    expect(invalid({ model: [], actions: [{ at: 0, followup: { text: "x", bogus: 1 } }] }).path).toBe(
      "$.actions[0].followup.bogus"
    )
    expect(invalid({ model: [], actions: [{ at: 0, inject: { source: { kind: "p" } } }] }).path).toBe("$.actions[0].inject.text")
    expect(invalid({ model: [], actions: [{ at: 0, dispose: { now: true } }] }).path).toBe("$.actions[0].dispose.now")
    expect(invalid({ model: [], actions: [{ at: 0, dispose: [] }] }).path).toBe("$.actions[0].dispose")
    expect(invalid({ model: [], actions: [{ at: "0", dispose: {} }] }).path).toBe("$.actions[0].at")
    expect(invalid({ model: [], actions: [7] }).path).toBe("$.actions[0]")
  })

  it("a value of the wrong kind is named in one short line, not with a dump of the expected type", () => {
    const cases: ReadonlyArray<readonly [unknown, string, string]> = [
      [[], "$", "Expected a scenario object {model, actions, …}, actual []"],
      [null, "$", "Expected a scenario object {model, actions, …}, actual null"],
      ["x", "$", "Expected a scenario object {model, actions, …}, actual \"x\""],
      [{ model: 5, actions: [] }, "$.model", "Expected an array of model responses, actual 5"],
      [{ model: [5], actions: [] }, "$.model[0]", "Expected a model response object, actual 5"],
      [
        { model: [{ toolCalls: [5] }], actions: [] },
        "$.model[0].toolCalls[0]",
        "Expected a tool call object {id, name, arguments?}, actual 5"
      ],
      [
        { model: [{ error: 5 }], actions: [] },
        "$.model[0].error",
        "Expected a model error object {code, message, retryable?, status?}, actual 5"
      ],
      [{ model: [], tools: 5, actions: [] }, "$.tools", "Expected an object of tools by name, actual 5"],
      [{ model: [], tools: { a: 5 }, actions: [] }, "$.tools.a", "Expected a tool object, actual 5"],
      [
        { model: [], preStep: [5], actions: [] },
        "$.preStep[0]",
        "Expected a pre-step listener ({rejectIfTextIncludes}, {failIfTextIncludes} or {appendText}), actual 5"
      ],
      [{ model: [], actions: 5 }, "$.actions", "Expected an array of actions, actual 5"],
      [
        { model: [], actions: [{ at: 0, followup: 5 }] },
        "$.actions[0].followup",
        "Expected a text object {text, source?}, actual 5"
      ],
      [
        { model: [], actions: [{ at: 0, followup: { text: "a", source: 5 } }] },
        "$.actions[0].followup.source",
        "Expected a message source object {kind, …}, actual 5"
      ],
      [
        { model: [], actions: [{ at: 0, cancel: 5 }] },
        "$.actions[0].cancel",
        "Expected a cancel object {keepInbox?, cause?}, actual 5"
      ],
      [
        { model: [{ usage: 5 }], actions: [] },
        "$.model[0].usage",
        "Expected a usage object {inputTokens?, outputTokens?, cacheReadTokens?, cacheWriteTokens?, reasoningTokens?}, actual 5"
      ],
      [
        { model: [], compaction: 5, actions: [] },
        "$.compaction",
        "Expected a compaction object {contextWindow?, reserve?, keepRecentTokens?, instructions?, policy?}, actual 5"
      ],
      [
        { model: [], actions: [{ at: 0, compact: 5 }] },
        "$.actions[0].compact",
        "Expected a compact object {instructions?}, actual 5"
      ]
    ]
    for (const [input, path, message] of cases) {
      expect(invalid(input)).toMatchObject({ path, message })
    }
  })

  it("compaction (§17): the block, usage, an error's status and the compact action are checked like the rest", () => {
    const UNEXPECTED_COMPACTION =
      "is unexpected, expected: \"contextWindow\" | \"reserve\" | \"keepRecentTokens\" | \"instructions\" | \"policy\""
    const cases: ReadonlyArray<readonly [unknown, string, string]> = [
      [{ model: [], compaction: { window: 100 }, actions: [] }, "$.compaction.window", UNEXPECTED_COMPACTION],
      [
        { model: [], compaction: { contextWindow: 0 }, actions: [] },
        "$.compaction.contextWindow",
        "Expected a positive number, actual 0"
      ],
      [
        { model: [], compaction: { contextWindow: 99.5 }, actions: [] },
        "$.compaction.contextWindow",
        "Expected an integer, actual 99.5"
      ],
      [
        { model: [], compaction: { reserve: -1 }, actions: [] },
        "$.compaction.reserve",
        "Expected a non-negative number, actual -1"
      ],
      [
        { model: [], compaction: { keepRecentTokens: "9" }, actions: [] },
        "$.compaction.keepRecentTokens",
        "Expected number, actual \"9\""
      ],
      [{ model: [], compaction: { instructions: 7 }, actions: [] }, "$.compaction.instructions", "Expected string, actual 7"],
      [
        { model: [], compaction: { policy: "truncate" }, actions: [] },
        "$.compaction.policy",
        "Expected \"summarize\" or \"prune\", actual \"truncate\""
      ],
      [
        { model: [], compaction: { contextWindow: 100, reserve: 100 }, actions: [] },
        "$.compaction.reserve",
        "must be less than contextWindow (100), actual 100"
      ],
      [
        { model: [], compaction: { policy: "prune", instructions: "keep names" }, actions: [] },
        "$.compaction.instructions",
        "instructions are for the summarization request, and the prune policy makes none"
      ],
      [
        { model: [{ usage: { inputTokens: -3 } }], actions: [] },
        "$.model[0].usage.inputTokens",
        "Expected a non-negative number, actual -3"
      ],
      [
        { model: [{ usage: { outputTokens: 1.5 } }], actions: [] },
        "$.model[0].usage.outputTokens",
        "Expected an integer, actual 1.5"
      ],
      [
        { model: [{ usage: { cacheWriteTokens: -1 } }], actions: [] },
        "$.model[0].usage.cacheWriteTokens",
        "Expected a non-negative number, actual -1"
      ],
      [
        { model: [{ usage: { totalTokens: 3 } }], actions: [] },
        "$.model[0].usage.totalTokens",
        "is unexpected, expected: \"inputTokens\" | \"outputTokens\" | \"cacheReadTokens\" | \"cacheWriteTokens\" | \"reasoningTokens\""
      ],
      [
        { model: [{ error: { code: "CONTEXT_OVERFLOW", message: "m", status: 42 } }], actions: [] },
        "$.model[0].error.status",
        "Expected a number between 100 and 599, actual 42"
      ],
      [
        { model: [{ error: { code: "CONTEXT_OVERFLOW", message: "m", status: "400" } }], actions: [] },
        "$.model[0].error.status",
        "Expected number, actual \"400\""
      ],
      [
        { model: [], actions: [{ at: 0, compact: { now: true } }] },
        "$.actions[0].compact.now",
        "is unexpected, expected: \"instructions\""
      ],
      [
        { model: [], actions: [{ at: 0, compact: { instructions: 1 } }] },
        "$.actions[0].compact.instructions",
        "Expected string, actual 1"
      ],
      [{ model: [], actions: [{ at: -1, compact: {} }] }, "$.actions[0].at", "Expected a non-negative number, actual -1"],
      [
        { model: [], actions: [{ at: 0, compact: {}, cancel: {} }] },
        "$.actions[0]",
        "an action has one kind, this one has cancel and compact"
      ],
      [
        { model: [], actions: [{ at: 0 }] },
        "$.actions[0]",
        "an action needs one of followup, steer, inject, cancel, dispose, compact, approve, reject, resume"
      ]
    ]
    for (const [input, path, message] of cases) {
      expect(invalid(input)).toMatchObject({ path, message })
    }
    const valid = Scenario.decode({
      model: [
        { text: "ok", usage: { inputTokens: 10, outputTokens: 2 } },
        { error: { code: "CONTEXT_OVERFLOW", message: "too long", status: 400 } },
        // The normalized shape of §18: the cache counts inside inputTokens, reasoning inside outputTokens.
        {
          text: "cached",
          usage: { inputTokens: 120, outputTokens: 9, cacheReadTokens: 80, cacheWriteTokens: 30, reasoningTokens: 4 }
        }
      ],
      compaction: { contextWindow: 100, reserve: 20, keepRecentTokens: 30, instructions: "be brief", policy: "summarize" },
      actions: [{ at: 0, compact: {} }, { at: 1, compact: { instructions: "keep the names" } }]
    })
    expect(Either.isRight(valid)).toBe(true)
    if (Either.isRight(valid)) {
      expect(valid.right.model[2]!.usage).toEqual({
        inputTokens: 120,
        outputTokens: 9,
        cacheReadTokens: 80,
        cacheWriteTokens: 30,
        reasoningTokens: 4
      })
    }
    expect(Either.isRight(Scenario.decode({ model: [], compaction: {}, actions: [] }))).toBe(true)
    expect(Either.isRight(Scenario.decode({ model: [], compaction: { policy: "prune", reserve: 5 }, actions: [] }))).toBe(true)
  })

  it("a scenario holds at most 10,000 actions: more is refused before anything runs", () => {
    const actions = (n: number) => Array.from({ length: n }, (_, i) => ({ at: i, inject: `c${i}` }))
    expect(Either.isRight(Scenario.decode({ model: [], actions: actions(Scenario.MAX_ACTIONS) }))).toBe(true)
    expect(invalid({ model: [], actions: actions(Scenario.MAX_ACTIONS + 1) })).toMatchObject({
      path: "$.actions",
      message: "a scenario holds at most 10,000 actions (this one has 10,001): the simulator's limit, §15"
    })
  })
})

describe("rules as scenarios (§4–§9)", () => {
  it.effect("claim order: a step claims all of next-step (context and steering in arrival order); the queued followup gets its own turn", () =>
    Effect.gen(function*() {
      const r = yield* runScenario({
        "model": [{ "latencyMs": 50, "text": "one" }, { "latencyMs": 10, "text": "two" }, { "latencyMs": 10, "text": "three" }],
        "actions": [{ "at": 0, "followup": "a" }, { "at": 10, "inject": "ctx1" }, { "at": 20, "followup": "b" }, {
          "at": 30,
          "steer": "s1"
        }]
      })
      expect(brief(r.events)).toEqual([
        "splice next-turn 0 +[a]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "step/start 1.1",
        "user a",
        "request/header",
        "splice next-step 0 +[ctx1]",
        "splice next-turn 0 +[b]",
        "splice next-step 1 +[s1] wake",
        "assistant one",
        "step/end 1.1",
        "splice next-step 0 -2",
        "step/start 1.2",
        "user ctx1 (plugin)",
        "user s1",
        "assistant two",
        "step/end 1.2",
        "turn/end 1 completed",
        "turn/start 2",
        "splice next-turn 0 -1",
        "step/start 2.1",
        "user b",
        "assistant three",
        "step/end 2.1",
        "turn/end 2 completed"
      ])
      expect(r.deliveries.map((d) => d.outcome ?? d.error ?? "pending")).toEqual([
        { "_tag": "Entered", "turn": 1, "step": 1 },
        { "_tag": "Entered", "turn": 1, "step": 2 },
        { "_tag": "Entered", "turn": 2, "step": 1 },
        { "_tag": "Entered", "turn": 1, "step": 2 }
      ])
      checkRun(r)
    }))

  it.effect("cancel mid-batch: canceled splices with cause, ABORTED for the running call, the computed result committed as is, later followup runs", () =>
    Effect.gen(function*() {
      const r = yield* runScenario({
        "model": [{
          "latencyMs": 10,
          "toolCalls": [{ "id": "t1", "name": "slow", "arguments": { "ms": 500 } }, {
            "id": "t2",
            "name": "fast",
            "arguments": {}
          }]
        }, { "latencyMs": 5, "text": "after" }],
        "tools": {
          "slow": { "result": "slow done" },
          "fast": { "result": "fast done", "durationMs": 5, "additionalContexts": ["fast ctx"] }
        },
        "actions": [{ "at": 0, "followup": "go" }, { "at": 50, "inject": "pending ctx" }, { "at": 60, "followup": "queued" }, {
          "at": 100,
          "cancel": {}
        }, { "at": 200, "followup": "again" }]
      })
      expect(brief(r.events)).toEqual([
        "splice next-turn 0 +[go]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "step/start 1.1",
        "user go",
        "request/header",
        "assistant slow({\"ms\":500}) fast({})",
        "tool/call t1 slow",
        "tool/call t2 fast",
        "splice next-step 0 +[pending ctx]",
        "splice next-turn 0 +[queued]",
        "splice next-step 0 -1 canceled cause=user",
        "splice next-turn 0 -1 canceled cause=user",
        "tool/result t1 ABORTED",
        "tool/result t2",
        "step/end 1.1",
        "turn/end 1 aborted:user",
        "splice next-turn 0 +[again]",
        "turn/start 2",
        "splice next-turn 0 -1",
        "step/start 2.1",
        "user again",
        "assistant after",
        "step/end 2.1",
        "turn/end 2 completed"
      ])
      expect(r.deliveries.map((d) => d.outcome ?? d.error ?? "pending")).toEqual([
        { "_tag": "Entered", "turn": 1, "step": 1 },
        { "_tag": "Dropped", "reason": "canceled" },
        { "_tag": "Dropped", "reason": "canceled" },
        { "_tag": "Entered", "turn": 2, "step": 1 }
      ])
      checkRun(r)
    }))

  it.effect("cancel({keepInbox}) keeps the followup pending, owed no turn; a later steer starts a turn claiming [steer, kept followup]", () =>
    Effect.gen(function*() {
      const r = yield* runScenario({
        "model": [{ "latencyMs": 100, "text": "first" }, { "latencyMs": 5, "text": "second" }, {
          "latencyMs": 5,
          "text": "third"
        }],
        "actions": [{ "at": 0, "followup": "one" }, { "at": 10, "followup": "kept" }, {
          "at": 20,
          "cancel": { "keepInbox": true, "cause": { "kind": "parent" } }
        }, { "at": 500, "steer": "wake up" }]
      })
      expect(brief(r.events)).toEqual([
        "splice next-turn 0 +[one]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "step/start 1.1",
        "user one",
        "request/header",
        "splice next-turn 0 +[kept]",
        "step/end 1.1",
        "turn/end 1 aborted:parent",
        "splice next-step 0 +[wake up] wake",
        "turn/start 2",
        "splice next-step 0 -1",
        "splice next-turn 0 -1",
        "step/start 2.1",
        "user wake up",
        "user kept",
        "assistant second",
        "step/end 2.1",
        "turn/end 2 completed"
      ])
      expect(r.deliveries.map((d) => d.outcome ?? d.error ?? "pending")).toEqual([{ "_tag": "Entered", "turn": 1, "step": 1 }, {
        "_tag": "Entered",
        "turn": 2,
        "step": 1
      }, { "_tag": "Entered", "turn": 2, "step": 1 }])
      checkRun(r)
    }))

  it.effect("dispose: pending injection disposed, running tool ABORTED, turn aborted {disposed}; a later delivery fails AgentDisposed", () =>
    Effect.gen(function*() {
      const r = yield* runScenario({
        "model": [{ "latencyMs": 10, "toolCalls": [{ "id": "w", "name": "wait", "arguments": { "ms": 1000 } }] }],
        "tools": { "wait": { "result": "ok" } },
        "actions": [{ "at": 0, "followup": "go" }, { "at": 20, "inject": "never seen" }, { "at": 30, "dispose": {} }, {
          "at": 40,
          "followup": "too late"
        }]
      })
      expect(brief(r.events)).toEqual([
        "splice next-turn 0 +[go]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "step/start 1.1",
        "user go",
        "request/header",
        "assistant wait({\"ms\":1000})",
        "tool/call w wait",
        "splice next-step 0 +[never seen]",
        "splice next-step 0 -1 canceled cause=disposed",
        "tool/result w ABORTED",
        "step/end 1.1",
        "turn/end 1 aborted:disposed"
      ])
      expect(r.deliveries.map((d) => d.outcome ?? d.error ?? "pending")).toEqual([{ "_tag": "Entered", "turn": 1, "step": 1 }, {
        "_tag": "Dropped",
        "reason": "disposed"
      }, "AgentDisposed"])
      checkRun(r)
    }))

  it.effect("max-tokens, unknown tool, retryable then final model errors and script exhaustion, one turn per followup", () =>
    Effect.gen(function*() {
      const r = yield* runScenario({
        "model": [
          { "latencyMs": 5, "text": "cut off", "finish": "length" },
          { "latencyMs": 5, "toolCalls": [{ "id": "u1", "name": "nope", "arguments": {} }] },
          { "latencyMs": 5, "text": "after unknown" },
          { "latencyMs": 5, "error": { "code": "HTTP_503", "message": "overloaded", "retryable": true } },
          { "latencyMs": 5, "text": "recovered" },
          { "latencyMs": 5, "error": { "code": "HTTP_400", "message": "bad" } }
        ],
        "actions": [{ "at": 0, "followup": "p1" }, { "at": 1, "followup": "p2" }, { "at": 2, "followup": "p3" }, {
          "at": 3,
          "followup": "p4"
        }, { "at": 4, "followup": "p5" }]
      })
      expect(brief(r.events)).toEqual([
        "splice next-turn 0 +[p1]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "step/start 1.1",
        "user p1",
        "request/header",
        "splice next-turn 0 +[p2]",
        "splice next-turn 1 +[p3]",
        "splice next-turn 2 +[p4]",
        "splice next-turn 3 +[p5]",
        "assistant cut off",
        "step/end 1.1",
        "turn/end 1 max-tokens",
        "turn/start 2",
        "splice next-turn 0 -1",
        "step/start 2.1",
        "user p2",
        "assistant nope({})",
        "tool/call u1 nope",
        "tool/result u1 UNKNOWN_TOOL",
        "step/end 2.1",
        "step/start 2.2",
        "assistant after unknown",
        "step/end 2.2",
        "turn/end 2 completed",
        "turn/start 3",
        "splice next-turn 0 -1",
        "step/start 3.1",
        "user p3",
        "assistant recovered",
        "step/end 3.1",
        "turn/end 3 completed",
        "turn/start 4",
        "splice next-turn 0 -1",
        "step/start 4.1",
        "user p4",
        "step/end 4.1",
        "turn/end 4 error:HTTP_400",
        "turn/start 5",
        "splice next-turn 0 -1",
        "step/start 5.1",
        "user p5",
        "step/end 5.1",
        "turn/end 5 error:SCRIPT_EXHAUSTED"
      ])
      expect(r.deliveries.map((d) => d.outcome ?? d.error ?? "pending")).toEqual([
        { "_tag": "Entered", "turn": 1, "step": 1 },
        { "_tag": "Entered", "turn": 2, "step": 1 },
        { "_tag": "Entered", "turn": 3, "step": 1 },
        { "_tag": "Entered", "turn": 4, "step": 1 },
        { "_tag": "Entered", "turn": 5, "step": 1 }
      ])
      checkRun(r)
    }))

  it.effect("a failing listener among several fails the proposal with nothing appended; additions come inner first, then outer", () =>
    Effect.gen(function*() {
      const r = yield* runScenario({
        "model": [{ "text": "ok" }, { "text": "ok2" }],
        "preStep": [{ "appendText": "outer" }, { "failIfTextIncludes": "boom" }, { "appendText": "inner" }],
        "actions": [{ "at": 0, "followup": "boom now" }, { "at": 0, "followup": "fine" }]
      })
      expect(brief(r.events)).toEqual([
        "splice next-turn 0 +[boom now]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "turn/end 1 error:PRE_STEP_FAILED",
        "splice next-turn 0 +[fine]",
        "turn/start 2",
        "splice next-turn 0 -1",
        "step/start 2.1",
        "user fine",
        "user inner (plugin)",
        "user outer (plugin)",
        "request/header",
        "assistant ok",
        "step/end 2.1",
        "turn/end 2 completed"
      ])
      expect(r.deliveries.map((d) => d.outcome ?? d.error ?? "pending")).toEqual([{ "_tag": "Dropped", "reason": "failed" }, {
        "_tag": "Entered",
        "turn": 2,
        "step": 1
      }])
      checkRun(r)
    }))
})

describe("simulator timing rules", () => {
  it.effect("an action due at the same instant as a sleep goes first: a steer at 100 joins turn 1", () =>
    Effect.gen(function*() {
      const r = yield* runScenario({
        model: [{ latencyMs: 100, text: "first" }, { latencyMs: 10, text: "second" }],
        actions: [{ at: 0, followup: "Q" }, { at: 100, steer: "S at 100" }]
      })
      expect(brief(r.events).slice(6)).toEqual([
        "splice next-step 0 +[S at 100] wake",
        "assistant first",
        "step/end 1.1",
        "splice next-step 0 -1",
        "step/start 1.2",
        "user S at 100",
        "assistant second",
        "step/end 1.2",
        "turn/end 1 completed"
      ])
      checkRun(r)
    }))

  it.effect("actions are applied in time order, fractional times included", () =>
    Effect.gen(function*() {
      const r = yield* runScenario({
        model: [{ latencyMs: 10, text: "ok" }],
        actions: [{ at: 0.000001, inject: "I" }, { at: 0, followup: "F at 0" }]
      })
      expect(usersOf(r.events, 1, 1)).toEqual(["F at 0 <user>"])
      expect(r.deliveries.map((d) => [d.kind, d.outcome?._tag ?? "pending"])).toEqual([["followup", "Entered"], [
        "inject",
        "pending"
      ]])
      checkRun(r)
    }))

  it.effect("a cancel during a retry wait logs nothing of the withdrawn attempt (§11)", () =>
    Effect.gen(function*() {
      const r = yield* runScenario({
        model: [
          { latencyMs: 10, text: "attempt one words", error: { code: "HTTP_429", message: "r", retryable: true } },
          { text: "never" }
        ],
        actions: [{ at: 0, followup: "Q1" }, { at: 200, cancel: {} }]
      })
      expect(brief(r.events).slice(-3)).toEqual(["request/header", "step/end 1.1", "turn/end 1 aborted:user"])
      expect(r.events.some((e) => e.type === "assistant/message")).toBe(false)
      checkRun(r)
    }))

  it.effect("tool call ids repeated in one response are made unique, so results pair unambiguously", () =>
    Effect.gen(function*() {
      const r = yield* runScenario({
        model: [
          { toolCalls: [{ id: "same", name: "t", arguments: {} }, { id: "same", name: "t", arguments: {} }] },
          { text: "done" }
        ],
        tools: { t: { result: "ok" } },
        actions: [{ at: 0, followup: "go" }]
      })
      expect(brief(r.events).filter((l) => l.startsWith("tool/"))).toEqual([
        "tool/call same t",
        "tool/call same#2 t",
        "tool/result same",
        "tool/result same#2"
      ])
      expect(r.requests[1]!.messages[1]!.toolCalls!.map((c) => c.id)).toEqual(["same", "same#2"])
      checkRun(r)
    }))
})
