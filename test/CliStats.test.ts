/**
 * `agent-loop stats FILE [--json] [--prices FILE]` (§18), run as a user runs it:
 * `dist/cli/bin.js` in a child process (built by the global setup). Exact output on a recorded
 * DSH v0 log (tool calls, cache reads; no event times) and on a log of ours written by
 * `simulate` (virtual times, so the times are exact), priced by `examples/prices.example.json`;
 * a missing log, an unreadable log and a bad price table exit 2 with one line.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Subagent from "../src/Subagent.js"
import { CLI_RUN_MS } from "./utils/bounds.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const ROOT = process.cwd()
const BIN = Path.join(ROOT, "dist/cli/bin.js")
const DSH_LOG = Path.resolve(ROOT, "../shared/fixtures/dsh/acp__fs-delete-recreate__session.jsonl")
const PRICES = Path.join(ROOT, "examples/prices.example.json")

const tmp = scratchDirs("agent-loop-stats-")

const stats = (...args: ReadonlyArray<string>) => {
  const r = spawnSync(process.execPath, [BIN, "stats", ...args], { encoding: "utf8", timeout: CLI_RUN_MS, cwd: ROOT })
  return { code: r.status, out: r.stdout, err: r.stderr }
}

/** A session of ours: a tool step and a text step, then a second turn; usage with cache reads and writes. */
const SCENARIO = {
  name: "my-model-mini-2026",
  tools: { lookup: { result: "42", durationMs: 5 } },
  model: [
    {
      latencyMs: 20,
      toolCalls: [{ id: "c1", name: "lookup", arguments: {} }],
      usage: { inputTokens: 1000, cacheReadTokens: 800, outputTokens: 50, reasoningTokens: 10 }
    },
    {
      latencyMs: 30,
      text: "It is 42.",
      usage: { inputTokens: 1100, cacheReadTokens: 1000, cacheWriteTokens: 50, outputTokens: 20 }
    },
    { latencyMs: 10, text: "Bye.", usage: { inputTokens: 1200, cacheReadTokens: 1100, outputTokens: 5 } }
  ],
  actions: [{ at: 0, followup: "Look it up." }, { at: 100, followup: "Thanks." }]
}

/** Writes the scenario's log with `simulate`; returns its path and session id. */
const ourLog = (scenarioJson: unknown = SCENARIO) => {
  const dir = tmp()
  const scenario = Path.join(dir, "s.json")
  const log = Path.join(dir, "s.jsonl")
  Fs.writeFileSync(scenario, JSON.stringify(scenarioJson))
  const r = spawnSync(process.execPath, [BIN, "simulate", scenario, "--out", log], { encoding: "utf8", timeout: CLI_RUN_MS })
  expect(r.status).toBe(0)
  const id = JSON.parse(Fs.readFileSync(log, "utf8").split("\n")[0]!).id as string
  return { dir, log, id }
}

describe("agent-loop stats", () => {
  it("a recorded DSH v0 log: counts, tool calls by name, tokens with the cache reads inside the input, no times", () => {
    const r = stats(DSH_LOG)
    expect([r.code, r.err]).toEqual([0, ""])
    expect(r.out).toBe(
      [
        `${DSH_LOG}: session b8c89c36-55db-48cf-9f3e-76140cd37aff (DSH v0 log, 191 events)`,
        "turns           1 (completed 1)",
        "steps           5",
        "model requests  5",
        "tool calls      4 (bash 1, read 2, write 1)",
        "",
        "tokens              input  cache read  cache write  output  reasoning   total",
        "deepseek-v4-flash  31,865      25,344            0     286         64  32,151",
        "session            31,865      25,344            0     286         64  32,151",
        "(cache read and cache write are parts of input, reasoning a part of output; total = input + output)",
        "",
        "cost            give --prices FILE (USD per 1e6 tokens by model)",
        "",
        "time            the log records no event times",
        ""
      ].join("\n")
    )
  })

  it("a recorded DSH v0 log, --json, with a price table that has no price for its model: the cost is unknown", () => {
    const r = stats(DSH_LOG, "--json", "--prices", PRICES)
    expect([r.code, r.err]).toEqual([0, ""])
    const tokens = {
      inputTokens: 31865,
      cacheReadTokens: 25344,
      cacheWriteTokens: 0,
      outputTokens: 286,
      reasoningTokens: 64,
      totalTokens: 32151
    }
    expect(r.out.endsWith("\n") && r.out.split("\n").length).toBe(2)
    expect(JSON.parse(r.out)).toEqual({
      sessionId: "b8c89c36-55db-48cf-9f3e-76140cd37aff",
      format: "dsh-v0",
      events: 191,
      turns: 1,
      turnEnds: { completed: 1 },
      steps: 5,
      modelRequests: 5,
      unreportedRequests: 0,
      compactionRequests: 0,
      toolCalls: 4,
      toolCallsByName: { read: 2, bash: 1, write: 1 },
      approvals: { asked: 0, outcomes: {}, open: 0 },
      subagent: null,
      subagents: {
        started: 0,
        ended: 0,
        stopReasons: {},
        children: [],
        tokens: { inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0, totalTokens: 0 },
        tokensByModel: {},
        unreportedRequests: 0,
        runs: []
      },
      tokens,
      tokensByModel: { "deepseek-v4-flash": tokens },
      cost: { total: null, byModel: { "deepseek-v4-flash": null }, unpriced: ["deepseek-v4-flash"], subagents: 0 },
      time: null
    })
  })

  it("a recorded DSH v0 log with questions about tool calls: asked, decided by outcome, open", () => {
    const rejected = stats(Path.resolve(ROOT, "../shared/fixtures/dsh/acp__escalation-rejected__session.jsonl"))
    const approved = stats(Path.resolve(ROOT, "../shared/fixtures/dsh/acp__fs-escalation-approved__session.jsonl"), "--json")
    expect([rejected.code, rejected.err]).toEqual([0, ""])
    expect(rejected.out.split("\n").filter((l) => l.startsWith("approvals"))).toEqual([
      "approvals       1 asked (rejected 1), 0 open"
    ])
    expect([approved.code, JSON.parse(approved.out).approvals]).toEqual([0, {
      asked: 1,
      outcomes: { "allowed-once": 1 },
      open: 0
    }])
  })

  it("a log of ours with prices: cost by the longest prefix key, time per turn and per model request from event times", () => {
    const { id, log } = ourLog()
    const r = stats(log, "--prices", PRICES)
    expect([r.code, r.err]).toEqual([0, ""])
    // my-model-mini: (200·0.5 + 800·0.05 + 50·2) + (50·0.5 + 1,000·0.05 + 50·0.5 + 20·2) + (100·0.5 + 1,100·0.05 + 5·2)
    // = 240 + 140 + 115 micro-USD. Times (virtual ms): turn 1 is 20 + 5 (the tool) + 30, turn 2 is 10.
    expect(r.out).toBe(
      [
        `${log}: session ${id} (log, 22 events)`,
        "turns           2 (completed 2)",
        "steps           3",
        "model requests  3",
        "tool calls      1 (lookup 1)",
        "",
        "tokens              input  cache read  cache write  output  reasoning  total",
        "my-model-mini-2026  3,300       2,900           50      75         10  3,375",
        "session             3,300       2,900           50      75         10  3,375",
        "(cache read and cache write are parts of input, reasoning a part of output; total = input + output)",
        "",
        "cost (USD)",
        "my-model-mini-2026  $0.000495",
        "session             $0.000495",
        "",
        "time (ms)",
        "turn 1     55  completed",
        "turn 2     10  completed",
        "per turn           min 10, median 32.5, max 55 (2)",
        "per model request  min 10, median 20, max 30 (3)",
        ""
      ].join("\n")
    )
    const json = JSON.parse(stats(log, "--json", "--prices", PRICES).out)
    expect(json.cost).toEqual({ total: 0.000495, byModel: { "my-model-mini-2026": 0.000495 }, unpriced: [], subagents: 0 })
    expect(json.time).toEqual({
      turns: [{ turn: 1, ms: 55, end: "completed" }, { turn: 2, ms: 10, end: "completed" }],
      perTurn: { count: 2, min: 10, median: 32.5, max: 55 },
      perModelRequest: { count: 3, min: 10, median: 20, max: 30 }
    })
  })

  it("names from the log are shown on one line each: a newline or an escape in a model's or tool's name cannot break a table", () => {
    const { log } = ourLog({
      ...SCENARIO,
      name: "evil\nmodel \u001b[31m",
      tools: { "look\nup": SCENARIO.tools.lookup },
      model: [{ ...SCENARIO.model[0], toolCalls: [{ id: "c1", name: "look\nup", arguments: {} }] }, SCENARIO.model[1]],
      actions: [SCENARIO.actions[0]]
    })
    const r = stats(log)
    expect([r.code, r.err]).toEqual([0, ""])
    const lines = r.out.split("\n")
    expect(lines[4]).toBe("tool calls      1 (look\\nup 1)")
    expect(lines.filter((l) => l.startsWith("evil"))).toEqual([
      "evil\\nmodel \\x1b[31m  2,100       1,800           50      70         10  2,170"
    ])
  })

  it("responses that reported no usage are counted and said: the totals are a lower bound", () => {
    const { log } = ourLog({ ...SCENARIO, model: [{ latencyMs: 10, text: "no usage here" }], actions: [SCENARIO.actions[0]] })
    const r = stats(log)
    expect([r.code, r.err]).toEqual([0, ""])
    expect(r.out.split("\n").filter((l) => l.startsWith("(1 model"))).toEqual([
      "(1 model response reported no usage: counted 0, so these totals are a lower bound)"
    ])
    expect(JSON.parse(stats(log, "--json").out).unreportedRequests).toBe(1)
  })

  it.scoped("a parent, its child and its grandchild: each one's totals include its descendants' runs from its own log, never twice", () => {
    const dir = tmp()
    // parent (my-model) → child (my-model-mini) → grandchild (my-model-mini): a task each.
    const grandchild = Subagent.tool({
      name: "deeper",
      model: ScriptedModel.make([{ text: "noon", usage: { inputTokens: 100, outputTokens: 5 } }], {
        model: "my-model-mini-2026"
      })
    })
    const child = Subagent.tool({
      name: "research",
      tools: [grandchild],
      model: ScriptedModel.make([
        {
          toolCalls: [{ id: "k1", name: "deeper", arguments: { prompt: "ask" } }],
          usage: { inputTokens: 400, outputTokens: 40 }
        },
        { text: "12:00", usage: { inputTokens: 500, cacheReadTokens: 400, outputTokens: 10 } }
      ], { model: "my-model-mini-2026" })
    })
    const parentModel = ScriptedModel.make([
      {
        toolCalls: [{ id: "c1", name: "research", arguments: { prompt: "time?" } }],
        usage: { inputTokens: 1000, outputTokens: 100 }
      },
      { text: "It is noon.", usage: { inputTokens: 1200, cacheReadTokens: 1000, outputTokens: 20 } }
    ], { model: "my-model" })
    return Effect.gen(function*() {
      const agent = yield* Agent.make({ sessionId: "parent", tools: [child] })
      yield* agent.followup("What time is it?")
      yield* agent.awaitIdle
      const ends = (events: ReadonlyArray<{ readonly type: string; readonly data: unknown }>) =>
        events.filter((e) => e.type === "subagent/end").map((e) => (e.data as { id: string }).id)
      const [childId] = ends(agent.log.events())
      const file = (id: string) => Path.join(dir, `${id}.jsonl`)
      const [grandchildId] = ends(Fs.readFileSync(file(childId!), "utf8").trim().split("\n").slice(1).map((l) => JSON.parse(l)))
      const r = stats(file("parent"), "--prices", PRICES)
      expect([r.code, r.err]).toEqual([0, ""])
      // my-model: 1,200·2.5 + 1,000·0.25 + 120·10 = 4,450 µUSD; the children (my-model-mini): the child's
      // 500·0.5 + 400·0.05 + 50·2 = 370 and the grandchild's 100·0.5 + 5·2 = 60, as the child's end records them.
      expect(r.out.split("\n").slice(1, 19)).toEqual([
        "turns           1 (completed 1)",
        "steps           2",
        "model requests  2",
        "tool calls      1 (research 1)",
        "subagents       1 started, 1 ended (completed 1)",
        `  child ${childId}: completed, 1,055 tokens`,
        "",
        "tokens              input  cache read  cache write  output  reasoning  total",
        "my-model            2,200       1,000            0     120          0  2,320",
        "my-model-mini-2026  1,000         400            0      55          0  1,055",
        "session             3,200       1,400            0     175          0  3,375",
        "of which children   1,000         400            0      55          0  1,055",
        "(cache read and cache write are parts of input, reasoning a part of output; total = input + output)",
        "(children: what the sub-agents' runs spent, as this log's subagent/end events record it)",
        "",
        "cost (USD)",
        "my-model            $0.00445",
        "my-model-mini-2026  $0.00043"
      ])
      expect(r.out.split("\n").slice(19, 21)).toEqual(["session             $0.00488", "of which children   $0.00043"])
      // The child's stats: its own requests and its child's; the grandchild's: its own. Nothing twice.
      const json = (id: string) => JSON.parse(stats(file(id), "--json", "--prices", PRICES).out)
      const [p, c, g] = [json("parent"), json(childId!), json(grandchildId!)]
      expect([p, c, g].map((s) => [s.tokens.totalTokens, s.subagents.tokens.totalTokens, s.cost.total, s.cost.subagents]))
        .toEqual([[3375, 1055, 0.00488, 0.00043], [1055, 105, 0.00043, 0.00006], [105, 0, 0.00006, 0]])
      expect(c.subagents.runs).toEqual([{
        id: grandchildId,
        callId: "k1",
        stopReason: "completed",
        tokens: {
          inputTokens: 100,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          outputTokens: 5,
          reasoningTokens: 0,
          totalTokens: 105
        }
      }])
      expect(p.subagents.tokensByModel).toEqual({
        "my-model-mini-2026": {
          inputTokens: 1000,
          cacheReadTokens: 400,
          cacheWriteTokens: 0,
          outputTokens: 55,
          reasoningTokens: 0,
          totalTokens: 1055
        }
      })
    }).pipe(
      Effect.provide(Layer.mergeAll(
        SessionStore.layerJsonl({ directory: dir }).pipe(Layer.provide(NodeContext.layer)),
        IdGenerator.layerSeeded(7),
        Model.layer(parentModel)
      ))
    )
  })

  it("a missing log, a log that is not one, a price table that is not one: one line on stderr, exit 2", () => {
    const dir = tmp()
    const missing = Path.join(dir, "missing.jsonl")
    expect(stats(missing)).toEqual({ code: 2, out: "", err: `${missing}: cannot read: no such file\n` })
    const garbage = Path.join(dir, "garbage.jsonl")
    Fs.writeFileSync(garbage, "garbage\n")
    expect(stats(garbage)).toEqual({
      code: 2,
      out: "",
      err: `${garbage}, line 1: not JSON: Unexpected token 'g', "garbage" is not valid JSON\n`
    })
    const prices = Path.join(dir, "prices.json")
    Fs.writeFileSync(prices, JSON.stringify({ "my-model": { input: 1 } }))
    expect(stats(DSH_LOG, "--prices", prices)).toEqual({
      code: 2,
      out: "",
      err: `--prices ${prices}: not a price table at $["my-model"].output: is missing\n`
    })
    // A parser's message that quotes the file's lines stays on one line.
    Fs.writeFileSync(prices, "nope\n")
    expect(stats(DSH_LOG, "--prices", prices)).toMatchObject({ code: 2, out: "", err: expect.stringMatching(/^[^\n]*\n$/) })
    Fs.writeFileSync(prices, "{")
    expect(stats(DSH_LOG, "--prices", prices)).toMatchObject({
      code: 2,
      out: "",
      err: expect.stringMatching(/^--prices .*: not JSON: /)
    })
    expect(stats(DSH_LOG, "--prices", dir)).toEqual({
      code: 2,
      out: "",
      err: `--prices ${dir}: cannot read: not a regular file (a directory)\n`
    })
    // Before, the platform's text: `NotFound: FileSystem.stat (…): ENOENT: no such file or directory, stat '…'`.
    const nope = Path.join(dir, "nope.json")
    expect(stats(DSH_LOG, "--prices", nope)).toEqual({
      code: 2,
      out: "",
      err: `--prices ${nope}: cannot read: no such file\n`
    })
  })
})
