import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Delivery from "../src/Delivery.js"
import * as Invariant from "../src/Invariant.js"
import * as Scenario from "../src/Scenario.js"
import { brief } from "./utils/agent.js"

const SCENARIOS = Path.resolve(process.cwd(), "../shared/scenarios")

const runFile = (name: string) =>
  Effect.suspend(() => {
    const text = Fs.readFileSync(Path.join(SCENARIOS, name), "utf8")
    const scenario = Either.getOrThrow(Scenario.parse(text))
    return Scenario.run(scenario, { seed: Scenario.seedOf(text) })
  })

/** Runs an inline scenario (seed 1). */
export const runScenario = (scenario: unknown) =>
  Effect.suspend(() => Scenario.run(Either.getOrThrow(Scenario.decode(scenario)), { seed: 1 }))

const usersOf = (events: ReadonlyArray<any>, turn: number, step: number) => {
  const out: Array<string> = []
  let open = false
  for (const e of events) {
    if (e.type === "step/start") open = e.data.turn === turn && e.data.step === step
    else if (e.type === "step/end") open = false
    else if (open && e.type === "user/message") {
      out.push(`${e.data.content.map((b: any) => b.text).join("")} <${e.data.source.kind}${e.data.source.plugin ? `:${e.data.source.plugin}` : ""}${e.data.source.callId ? `:${e.data.source.callId}` : ""}>`)
    }
  }
  return out
}

/** Every delivery record's outcome equals its fate on the log; the log is clean. */
export const checkRun = (result: Scenario.RunResult) => {
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
        { turn: 1, step: 1, messages: [{ role: "user", content: "git branch: main" }, { role: "user", content: "which branch am I on?" }] }
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
        expect(a.log.split("\n")[0]).toMatch(/^\{"type":"session","format":"effect-agent-loop","version":1,"id":"[0-9a-f-]+","createdAt":0\}$/)
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
  })
})
