/**
 * The programs of `examples/` (§25) run as a user runs them: each imports the library by
 * its package name (`effect-agent-loop`, `effect-agent-loop/sql`: `dist/`, built by the global
 * setup), and each test runs the example's exported program and checks exactly what it
 * produces: the log's events in order, the fates, the HTTP responses and the server-sent events
 * a real client gets on a loopback port, the log repaired after a real SIGKILL of a child process.
 * The only real waits are the HTTP exchanges and the child process, each bounded.
 */
import { HttpServer } from "@effect/platform"
import { afterEach, beforeEach, describe, expect, it, vi } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { Delivery, Invariant, SessionEvent } from "effect-agent-loop"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ClusterRunner from "../examples/cluster-runner.js"
import * as CompactionExample from "../examples/compaction.js"
import * as HttpServerSse from "../examples/http-server-sse.js"
import * as PreStepListener from "../examples/pre-step-listener.js"
import * as QuickStart from "../examples/quick-start.js"
import * as ResumeAfterCrash from "../examples/resume-after-crash.js"
import * as SqliteStore from "../examples/sqlite-store.js"
import * as SteeringTool from "../examples/steering-tool.js"
import * as TracingExample from "../examples/tracing.js"
import { CHILD_RUN_MS, CLI_RUN_MS, CLUSTER_TEST_MS, IN_PROCESS_MS, note } from "./utils/bounds.js"
import { run } from "./utils/child.js"
import { collectMarkdown } from "./utils/docExamples.js"
import { createDatabase, describePg, dropDatabase } from "./utils/pg.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const tmp = scratchDirs("effect-agent-loop-examples-")

/** What the examples print (console.log), captured instead of shown. */
let printed: Array<string> = []
beforeEach(() => {
  printed = []
  vi.spyOn(console, "log").mockImplementation((...args: Array<unknown>) => {
    printed.push(args.map(String).join(" "))
  })
})
afterEach(() => {
  vi.restoreAllMocks()
})

const types = (events: ReadonlyArray<{ readonly type: string }>) => events.map((e) => e.type)

describe("examples/run.js (npm run example -- NAME)", () => {
  it.live(
    "a name that is not an example: says so and lists the examples, exit 1; no name: the usage, exit 2",
    () =>
      Effect.gen(function*() {
        const names = Fs.readdirSync("examples").filter((f) => f.endsWith(".ts")).map((f) => f.slice(0, -3)).sort()
        expect(names).toContain("quick-start")
        // Before, an unknown name printed only the usage (exit 2), never saying the name was unknown.
        expect(yield* run(process.execPath, ["examples/run.js", "nosuch"], { withinMs: CLI_RUN_MS })).toEqual({
          status: 1,
          signal: null,
          stdout: "",
          stderr: `unknown example: nosuch\nexamples: ${names.join(", ")}\n`
        })
        expect(yield* run(process.execPath, ["examples/run.js"], { withinMs: CLI_RUN_MS })).toEqual({
          status: 2,
          signal: null,
          stdout: "",
          stderr: `usage: npm run example -- NAME [ARGS…]\nNAME: ${names.join(", ")}\n`
        })
      }),
    2 * CLI_RUN_MS
  )
})

describe("examples/quick-start", () => {
  it.effect("prints the tool call, the reply and the fate, exactly as the README's output block shows", () =>
    Effect.gen(function*() {
      yield* QuickStart.main
      const shown = collectMarkdown().filter((b) => b.attributes?.output === "quick-start")
      expect(shown.map((b) => b.file)).toEqual(["README.md"])
      expect(printed).toEqual([
        "tool call: weather {\"city\":\"Edinburgh\"}",
        "reply: Tool result (call_1): \"Edinburgh: 18°C, cloudy\"",
        "fate: {\"_tag\":\"Entered\",\"turn\":1,\"step\":1}"
      ])
      expect(printed).toEqual(shown[0]!.code.split("\n"))
    }))
})

describe("examples/compaction", () => {
  it.effect("a pressure compaction before turn 4, a manual one after it; the resumed history is the compacted one", () =>
    Effect.gen(function*() {
      const lines = yield* CompactionExample.main(tmp())
      const prompt1 = "(\"Plan a three-day trip to Lisbon: day one is the old town, A…\", "
      const prompt2 = "\"Day two should be Belém: the tower, the monastery and the c…\")"
      const summary1 = `Earlier: 2 prompts from you ${prompt1}${prompt2}, 0 tool results, 0 context messages.`
      expect(lines).toEqual([
        "agent.compact: compacted 175 → 150 tokens",
        "28 compaction/start turn=4 reason=pressure tokens=169",
        `29 compaction/summary shadowed=4 events (113 tokens): ${summary1}`,
        "31 compaction/end compacted tokens=124",
        "37 compaction/start turn=null reason=manual tokens=175",
        `38 compaction/summary shadowed=3 events (124 tokens): ${summary1} Then: 1 prompt from you ` +
        "(\"Day three is a train to Sintra for the palaces; be back in …\"), 0 tool results, 0 context messages.",
        "40 compaction/end compacted tokens=150",
        "resumed: 3 messages; the first is the checkpoint: \"Earlier: 2 prompts from you (\\\"Plan a three-day trip to Lisbo\"…"
      ])
    }))
})

describe("examples/pre-step-listener", () => {
  it.effect("redaction outside policy outside the default: the model sees the redacted batch, the policy blocks turn 2", () =>
    Effect.gen(function*() {
      const { events, outcomes } = yield* PreStepListener.main
      expect(events.map(PreStepListener.summary)).toEqual([
        " 0 agent/inbox/spliced next-turn +1",
        " 1 turn/start",
        " 2 agent/inbox/spliced next-turn -1",
        " 3 step/start",
        " 4 user/message \"my password is [redacted], remember it\"",
        " 5 request/header",
        " 6 assistant/message \"I received 1 message in this step: 1 from you (\\\"my password is [redacted], remember it\\\").\"",
        " 7 step/end",
        " 8 turn/end {\"kind\":\"completed\"}",
        " 9 agent/inbox/spliced next-turn +1",
        "10 turn/start",
        "11 agent/inbox/spliced next-turn -1",
        "12 turn/end {\"kind\":\"blocked\",\"reason\":\"policy: no destructive commands\"}"
      ])
      expect(outcomes).toEqual([{ _tag: "Entered", turn: 1, step: 1 }, { _tag: "Dropped", reason: "rejected" }])
      expect(Invariant.check(events)).toEqual([])
      expect(printed.slice(-2)).toEqual([
        "fates: [{\"_tag\":\"Entered\",\"turn\":1,\"step\":1},{\"_tag\":\"Dropped\",\"reason\":\"rejected\"}]",
        "from the log: [{\"_tag\":\"Entered\",\"turn\":1,\"step\":1},{\"_tag\":\"Dropped\",\"reason\":\"rejected\"}]"
      ])
    }))
})

describe("examples/steering-tool", () => {
  it.effect("a steer made during the batch enters at step 2, after both results", () =>
    Effect.gen(function*() {
      const { events, requests } = yield* SteeringTool.main
      expect(types(events)).toEqual([
        "agent/inbox/spliced", // the followup
        "turn/start",
        "agent/inbox/spliced", // its claim
        "step/start",
        "user/message",
        "request/header",
        "assistant/message",
        "tool/call",
        "tool/call",
        "agent/inbox/spliced", // the steer, durable while the batch runs
        "tool/result",
        "tool/result",
        "step/end",
        "agent/inbox/spliced", // step 2's claim
        "step/start",
        "user/message", // the steer
        "assistant/message",
        "step/end",
        "turn/end"
      ])
      const steer = events.find((e) => SessionEvent.is(e, "agent/inbox/spliced") && e.data.wake === true)
      const steerId = (steer?.data as SessionEvent.SplicedData).inserted[0]!.id
      expect(Delivery.fateOf(events, steerId)).toEqual({ _tag: "Entered", turn: 1, step: 2 })
      expect(requests.map((r) => [r.turn, r.step])).toEqual([[1, 1], [1, 2]])
      expect(requests[1]!.messages.map((m) => [m.role, m.source.kind, m.content.map((b) => b.type)])).toEqual([
        ["user", "user", ["text"]],
        ["assistant", "model", ["tool-call", "tool-call"]],
        ["user", "tool", ["tool-result"]],
        ["user", "tool", ["tool-result"]],
        ["user", "tool", ["text"]]
      ])
      expect(printed.at(-1)).toBe("  user (tool) api: the canary's error rate is 4%; tell the user before anything else")
      expect(printed[0]!.split("\n")).toEqual([
        "── turn 1 ──",
        "> deploy the api, then check the fleet",
        "→ deploy({\"service\":\"api\"})",
        "→ status({})",
        "← api deployed to the canary",
        "← 47 hosts green",
        "[context from tool:call_1] api: the canary's error rate is 4%; tell the user before anything else",
        "Tool result (call_1): \"api deployed to the canary\"",
        "Tool result (call_2): \"47 hosts green\"",
        "I received 1 message in this step: context from tool:call_1 (\"api: the canary's error rate is 4%; tell the user before an…\").",
        "turn 1 ended: completed",
        ""
      ])
    }))
})

describe("examples/tracing", () => {
  it.live("NodeSdk.layer records the turn's span tree: invoke_agent, its chat and execute_tool children", () =>
    Effect.gen(function*() {
      const { sessionId, spans } = yield* TracingExample.main
      const tree = [
        "SessionStore.create INTERNAL",
        `invoke_agent agent-loop INTERNAL gen_ai.conversation.id=${sessionId} agent_loop.turn=1`,
        "  chat offline-rules-1 CLIENT agent_loop.step=1",
        "  execute_tool clock INTERNAL agent_loop.step=1 gen_ai.tool.name=clock",
        "  chat offline-rules-1 CLIENT agent_loop.step=2"
      ]
      expect(TracingExample.tree(spans)).toEqual(tree)
      // What it printed: the same tree, each span with its duration.
      expect(printed.join("\n").split("\n").map((line) => line.replace(/ \(\d+\.\d ms\)$/, ""))).toEqual(tree)
      expect(new Set(spans.map((s) => s.resource.attributes["service.name"]))).toEqual(new Set(["tracing-example"]))
    }))
})

describe("examples/sqlite-store", () => {
  it.live("a session written to SQLite reads back equal through a new store", () =>
    Effect.gen(function*() {
      const filename = Path.join(tmp(), "db", "sessions.db")
      const { contents, sessions, written } = yield* SqliteStore.main(filename)
      expect(sessions).toEqual([written.id])
      expect(contents.events).toEqual(written.events)
      expect(contents.warnings).toEqual([])
      expect(Invariant.check(contents.events)).toEqual([])
      const turn = ["turn/start", "agent/inbox/spliced", "step/start", "user/message"]
      expect(types(contents.events)).toEqual([
        "agent/inbox/spliced",
        ...turn,
        "request/header",
        "assistant/message",
        "step/end",
        "turn/end",
        "agent/inbox/spliced",
        ...turn,
        "assistant/message",
        "step/end",
        "turn/end"
      ])
      expect(printed[1]).toBe("invariant violations: []")
    }))
})

describePg("examples/cluster-runner (PostgreSQL)", () => {
  it.live(
    "a runner serves session demo: a retried followup answers once, the injection enters with the next followup",
    () =>
      Effect.gen(function*() {
        const url = yield* Effect.acquireRelease(Effect.sync(createDatabase), (url) => Effect.sync(() => dropDatabase(url)))
        const port = yield* Effect.promise(() =>
          import("node:net").then((Net) =>
            new Promise<number>((resolve) => {
              const server = Net.createServer().listen(0, "127.0.0.1", () => {
                const { port } = server.address() as { port: number }
                server.close(() => resolve(port))
              })
            })
          )
        )
        const { contents, outcomes } = yield* ClusterRunner.main(url, port)
        expect(outcomes).toMatchObject({
          first: { messageId: "demo-1" },
          retried: { messageId: "demo-1" },
          entered: { _tag: "Entered", turn: 1, step: 1 },
          context: { _tag: "Entered", turn: 2, step: 1 },
          second: { _tag: "Entered", turn: 2, step: 1 }
        })
        expect(Invariant.check(contents.events)).toEqual([])
        const hellos = contents.events.filter((e) => e.type === "user/message" && JSON.stringify(e.data).includes("\"hello\""))
        expect(hellos.length).toBe(1)
        expect(printed).toContain("invariant violations: []")
      }).pipe(Effect.scoped),
    CLUSTER_TEST_MS
  )
})

/**
 * A fetch from the server the test runs (its own process), bounded by `IN_PROCESS_MS`; the
 * status, content type and body text.
 */
const request = async (url: string, init: RequestInit = {}) => {
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(IN_PROCESS_MS) })
  return { status: response.status, type: response.headers.get("content-type"), body: await response.text() }
}

/** A server-sent event stream read by a real client: `next(until)` reads events until one satisfies `until`. */
const openEvents = async (url: string) => {
  const abort = new AbortController()
  // Every read below is bounded by this (the stream was open 34 ms in all, under load).
  const timer = setTimeout(() => abort.abort(), IN_PROCESS_MS)
  const response = await fetch(url, { signal: abort.signal })
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ""
  const frames: Array<string> = []
  const next = async (until: (frame: string) => boolean): Promise<Array<string>> => {
    const got: Array<string> = []
    for (;;) {
      while (frames.length > 0) {
        const frame = frames.shift()!
        got.push(frame)
        if (until(frame)) return got
      }
      const { done, value } = await reader.read()
      if (done) throw new Error(`the event stream ended after ${JSON.stringify(got)}`)
      buffer += value
      const parts = buffer.split("\n\n")
      buffer = parts.pop()!
      for (const part of parts) frames.push(part)
    }
  }
  const close = () => {
    clearTimeout(timer)
    abort.abort()
  }
  return { status: response.status, type: response.headers.get("content-type"), next, close }
}

/** An SSE frame `event: T\ndata: JSON` as [T, the event]. */
const parseFrame = (frame: string): [string, any] => {
  const [event, data] = frame.split("\n")
  expect([event!.startsWith("event: "), data!.startsWith("data: ")]).toEqual([true, true])
  const parsed = JSON.parse(data!.slice(6))
  expect(parsed.type).toBe(event!.slice(7))
  return [parsed.type, parsed]
}

/** Event types with each run of `assistant/delta` folded into one entry. */
const folded = (events: ReadonlyArray<any>): Array<string> =>
  events.map((e) => e.type).filter((t, i, all) => t !== "assistant/delta" || all[i - 1] !== "assistant/delta")

describe("examples/http-server-sse", () => {
  it.live("sessions over HTTP: followup and steer delivered, agent.events as server-sent events to a real client", () =>
    Effect.gen(function*() {
      const directory = tmp()
      const context = yield* Layer.build(HttpServerSse.layer({ port: 0, directory }))
      const address = Context.get(context, HttpServer.HttpServer).address
      if (address._tag !== "TcpAddress") throw new Error("not a TCP address")
      const base = `http://127.0.0.1:${address.port}`
      const result = yield* Effect.promise(async () => {
        const created = await request(`${base}/sessions`, { method: "POST" })
        const id: string = JSON.parse(created.body).id
        const unknown = await request(`${base}/sessions/nope/followup`, { method: "POST", body: JSON.stringify({ text: "hi" }) })
        const badBody = await request(`${base}/sessions/${id}/followup`, { method: "POST", body: JSON.stringify({ txt: "hi" }) })
        const stream = await openEvents(`${base}/sessions/${id}/events`)
        try {
          const first = await stream.next(() => true)
          const followup = await request(`${base}/sessions/${id}/followup`, {
            method: "POST",
            body: JSON.stringify({ text: "what time is it?" })
          })
          const isIdle = (f: string) => f.startsWith("event: agent/status\n") && f.includes("\"idle\"")
          const turn1 = (await stream.next(isIdle)).map(parseFrame)
          const steer = await request(`${base}/sessions/${id}/steer`, {
            method: "POST",
            body: JSON.stringify({ text: "and say hello" })
          })
          const turn2 = (await stream.next(isIdle)).map(parseFrame)
          return {
            id,
            created,
            unknown,
            badBody,
            stream: { status: stream.status, type: stream.type, first },
            followup,
            steer,
            turn1,
            turn2
          }
        } finally {
          stream.close()
        }
      })
      const json = { status: 0, type: "application/json", body: "" }
      expect(result.created).toEqual({ ...json, status: 201, body: JSON.stringify({ id: result.id }) })
      expect(result.unknown).toEqual({ ...json, status: 404, body: JSON.stringify({ error: "no session nope" }) })
      expect([result.badBody.status, result.badBody.type, JSON.parse(result.badBody.body).error]).toEqual([
        400,
        "application/json",
        "{ readonly text: string }\n└─ [\"text\"]\n   └─ is missing"
      ])
      expect(result.stream).toEqual({ status: 200, type: "text/event-stream", first: [": subscribed"] })

      const turn1 = result.turn1.map(([, e]) => e)
      const turn2 = result.turn2.map(([, e]) => e)
      const followupId = turn1[0].data.inserted[0].id
      const steerId = turn2[0].data.inserted[0].id
      expect(result.followup).toEqual({ ...json, status: 202, body: JSON.stringify({ messageId: followupId }) })
      expect(result.steer).toEqual({ ...json, status: 202, body: JSON.stringify({ messageId: steerId }) })
      // "what time is it?": step 1 calls the clock, step 2 reads the result out.
      expect(folded(turn1)).toEqual([
        "agent/inbox/spliced",
        "agent/inbox/inserted",
        "agent/status",
        "turn/start",
        "agent/inbox/spliced",
        "agent/inbox/claimed",
        "step/start",
        "user/message",
        "request/header",
        "assistant/delta",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "assistant/delta",
        "assistant/message",
        "step/end",
        "turn/end",
        "agent/status"
      ])
      // A steer on an idle agent starts a turn (§5.1); the direct prompt of its step.
      expect(folded(turn2)).toEqual([
        "agent/inbox/spliced",
        "agent/inbox/inserted",
        "agent/status",
        "turn/start",
        "agent/inbox/spliced",
        "agent/inbox/claimed",
        "step/start",
        "user/message",
        "assistant/delta",
        "assistant/message",
        "step/end",
        "turn/end",
        "agent/status"
      ])
      const all = [...turn1, ...turn2]
      expect(all.filter((e) => e.type === "tool/call").map((e) => e.data.name)).toEqual(["clock"])
      expect(turn2[0].data).toEqual({
        target: "next-step",
        start: 0,
        inserted: [expect.objectContaining({ id: steerId })],
        wake: true
      })
      // The deltas of each step spell its assistant message's text.
      for (const message of all.filter((e) => e.type === "assistant/message")) {
        const { step, turn } = message.data
        const deltas = all.filter((e) => e.type === "assistant/delta" && e.turn === turn && e.step === step)
        expect(deltas.map((d) => d.text ?? "").join("")).toBe(message.data.message.content[0].text)
      }
      expect(all.filter((e) => e.type === "assistant/message").map((e) => e.data.message.content[0].text)).toEqual([
        "I received 1 message in this step: 1 from you (\"what time is it?\").",
        expect.stringMatching(/^Tool result \(call_1_1_1\): "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$/),
        "I received 1 message in this step: 1 from you (\"and say hello\")."
      ])
      // The durable events of the stream are the session's JSONL log, in order, nothing missing.
      const lines = Fs.readFileSync(Path.join(directory, `${result.id}.jsonl`), "utf8").trim().split("\n")
      expect(lines.slice(1).map((l) => JSON.parse(l))).toEqual(all.filter((e) => "seq" in e))
      expect(Invariant.check(all.filter((e) => "seq" in e))).toEqual([])
    }).pipe(Effect.scoped))
})

describe("examples/resume-after-crash", () => {
  it.live("a child killed by SIGKILL mid tool call; resume repairs the log and runs the queued followup", () =>
    Effect.gen(function*() {
      // The child runs the built example (as `npm run example` builds it), inside the repository so
      // that `effect-agent-loop` resolves to dist/ by package self-reference.
      Fs.mkdirSync(".scratch", { recursive: true })
      const built = Fs.mkdtempSync(Path.join(".scratch", "examples-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(built, { recursive: true, force: true })))
      const started = Date.now()
      const tsc = yield* run(process.execPath, [
        "node_modules/typescript/bin/tsc",
        "-p",
        "tsconfig.examples.json",
        "--outDir",
        built
      ], {
        withinMs: CHILD_RUN_MS
      })
      note("Examples: tsc of the examples", Date.now() - started)
      expect([tsc.status, tsc.stdout, tsc.stderr]).toEqual([0, "", ""])
      const directory = tmp()
      const { events, fates, repaired, signal } = yield* ResumeAfterCrash.main({
        directory,
        entry: Path.resolve(built, "resume-after-crash.js"),
        sessionId: "s"
      })
      expect(signal).toBe("SIGKILL")
      const crashed = [
        "agent/inbox/spliced", // "deploy the api"
        "agent/inbox/spliced", // "then tell me how it went", queued
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "request/header",
        "assistant/message",
        "tool/call" // deploy: SIGKILL inside the call
      ]
      expect(repaired.map((e) => [e.seq, e.type])).toEqual([
        [9, "tool/result"],
        [10, "step/end"],
        [11, "turn/end"],
        [12, "session/end-seed"]
      ])
      expect(repaired.map((e) => e.data)).toEqual([
        {
          turn: 1,
          step: 1,
          message: expect.objectContaining({
            role: "user",
            source: { kind: "tool", callId: "call_1" },
            content: [expect.objectContaining({ type: "tool-result", toolCallId: "call_1", isError: true })]
          }),
          error: { name: "OutcomeUnknown", code: "TOOL_OUTCOME_UNKNOWN" }
        },
        { turn: 1, step: 1 },
        { turn: 1, reason: { kind: "interrupted" } },
        {}
      ])
      expect(types(events)).toEqual([
        ...crashed,
        ...repaired.map((e) => e.type),
        "turn/start", // the queued followup, run by continuePending
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "request/header", // the offline model, not the child's scripted one
        "assistant/message",
        "step/end",
        "turn/end"
      ])
      expect(fates).toEqual([{ _tag: "Entered", turn: 1, step: 1 }, { _tag: "Entered", turn: 2, step: 1 }])
      expect(Invariant.check(events)).toEqual([])
      const answer = events.filter((e) => SessionEvent.is(e, "assistant/message")).at(-1)
      expect((answer?.data as SessionEvent.AssistantMessageData).message.content).toEqual([{
        type: "text",
        text: "Tool error (call_1): \"The session stopped while this tool call was running; whether it took effect is…\"\n" +
          "I received 1 message in this step: 1 from you (\"then tell me how it went\")."
      }])
      // The log on disk is the one the parent holds; the dead child's lock is gone with the parent's store.
      expect(Fs.readdirSync(directory)).toEqual(["s.jsonl"])
      expect(printed.slice(0, 6)).toEqual([
        "parent: the child died by SIGKILL",
        "parent: repair appended",
        "  9 tool/result call_1 TOOL_OUTCOME_UNKNOWN",
        "  10 step/end {\"turn\":1,\"step\":1}",
        "  11 turn/end {\"turn\":1,\"reason\":{\"kind\":\"interrupted\"}}",
        "  12 session/end-seed {}"
      ])
    }).pipe(Effect.scoped))
})
