/**
 * Sub-agent logs as DeepSeek Harness writes them, read in place from `../shared/fixtures/dsh`
 * (`acp__subagent-*`, `acp__product-subagent-*`; a `.1`/`.2` suffix is a child session): the
 * reader keeps a child's lineage typed in the decoded header, `subagent/descriptor` decodes as
 * `DescriptorData`, `Invariant.check` accepts every parent and child, the transcript shows a
 * child's lineage and descriptor (and a parent's `subagent/start` / `subagent/end`, which DSH
 * never logs: a log of ours is made by hand for them), and `stats` reports both sides. The
 * expected values were read off the fixture lines by hand (`docs/dsh-subagent-logs.md`).
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Either, Schema } from "effect"
import { join } from "node:path"
import { main } from "../src/cli/main.js"
import { statsOf } from "../src/cli/stats.js"
import { decodeLog } from "../src/internal/logCodec.js"
import { DescriptorData, descriptorOf, EndData, lineageOf, StartData } from "../src/internal/subagentLog.js"
import * as Invariant from "../src/Invariant.js"
import type { SessionHeader } from "../src/SessionEvent.js"
import * as Transcript from "../src/Transcript.js"
import * as TranscriptText from "../src/TranscriptText.js"
import {
  assistant,
  claim,
  dshDir,
  dshFixtures,
  entered,
  events,
  followup,
  foreign,
  msg,
  readDsh,
  stepEnd,
  stepStart,
  toolCall,
  toolResult,
  turnEnd,
  turnStart
} from "./utils/events.js"

const fixture = (test: string, child = 0): string => `acp__${test}__session${child === 0 ? "" : `.${child}`}.jsonl`

/** Every fixture of a sub-agent test (parents and children) and every child session. */
const subagentFixtures = dshFixtures.filter((f) => f.includes("subagent"))
const FORK = fixture("subagent-fork-in-process", 1)
const CONTINUABLE = fixture("subagent-continuable", 1)

/** The header lines of the child sessions, as `{file: lineage}` (read off line 1 of each file). */
const CHILDREN: ReadonlyArray<readonly [string, string, Record<string, unknown>]> = [
  [fixture("subagent-spawn-in-process", 1), "ea339828-7885-42e1-9083-4355e6f1708d", {
    parentSession: "5138ed0d-e86e-4a7d-b75b-803307e92b17",
    origin: "subagent",
    delegationDepth: 1
  }],
  [FORK, "ada8966c-9fa3-441b-8721-37ff1e795e6a", {
    parentSession: "96cf59c9-b347-48b9-b234-a5200913ad05",
    origin: "subagent",
    delegationDepth: 1,
    seedLength: 42
  }],
  [fixture("subagent-depth-two-rejection", 1), "22222222-2222-4222-8222-222222222222", {
    parentSession: "11111111-1111-4111-8111-111111111111",
    origin: "subagent",
    delegationDepth: 1
  }],
  [fixture("subagent-depth-two-rejection", 2), "33333333-3333-4333-8333-333333333333", {
    parentSession: "22222222-2222-4222-8222-222222222222",
    origin: "subagent",
    delegationDepth: 2
  }],
  [fixture("subagent-multi", 1), "553f8e92-aac1-4df3-8657-eacbb58f9581", {
    parentSession: "14dda109-5728-45ba-a002-7db9543fe50e",
    origin: "subagent",
    delegationDepth: 1
  }],
  [fixture("subagent-multi", 2), "5f49e80c-16fc-42c7-a617-0b6bd0680aa3", {
    parentSession: "14dda109-5728-45ba-a002-7db9543fe50e",
    origin: "subagent",
    delegationDepth: 1
  }],
  [fixture("subagent-parallel", 1), "bbbbbbbb-0000-4000-8000-000000000002", {
    parentSession: "aaaaaaaa-0000-4000-8000-000000000001",
    origin: "subagent",
    delegationDepth: 1
  }],
  [CONTINUABLE, "33333333-3333-4333-8333-333333333333", {
    parentSession: "11111111-1111-4111-8111-111111111111",
    origin: "subagent",
    delegationDepth: 1
  }]
]

/** The child's descriptor and the seq of its `subagent/descriptor` (read off the fixture lines). */
const DESCRIPTORS: ReadonlyArray<readonly [string, number, DescriptorData]> = [
  [fixture("subagent-spawn-in-process", 1), 4, {
    version: 2,
    mode: "one-shot",
    provider: "spawn",
    label: "Reply with CHILD_OK"
  }],
  [FORK, 47, { version: 2, mode: "one-shot", provider: "fork", label: "Recall project codeword" }],
  [fixture("subagent-depth-two-rejection", 2), 4, {
    version: 2,
    mode: "one-shot",
    provider: "spawn",
    label: "Start depth two"
  }],
  [CONTINUABLE, 0, {
    version: 2,
    mode: "continuable",
    provider: "spawn",
    label: "Reply with CHILD_OK",
    agentProvider: "deepseek-official",
    agentModel: "deepseek-v4-flash"
  }],
  [fixture("workflow-run", 1), 4, { version: 2, mode: "one-shot", provider: "spawn" }]
]

describe("DSH sub-agent logs: the reader", () => {
  it("keeps a child's lineage typed in the decoded header; a parent's header has none", async () => {
    for (const [file, id, lineage] of CHILDREN) {
      const { header } = await readDsh(file)
      expect([file, header.id, lineageOf(header)]).toEqual([file, id, lineage])
      expect([file, header.parentSession, header.origin, header.delegationDepth, header.seedLength]).toEqual([
        file,
        lineage.parentSession,
        "subagent",
        lineage.delegationDepth,
        lineage.seedLength
      ])
    }
    const parent = await readDsh(fixture("subagent-depth-two-rejection"))
    expect([parent.header.id, parent.header.delegationDepth, lineageOf(parent.header)]).toEqual([
      "11111111-1111-4111-8111-111111111111",
      0,
      undefined
    ])
  })

  it("refuses a header whose lineage DSH's own header check refuses, naming line 1", () => {
    const header = (extra: string) =>
      `{"type":"session","version":0,"id":"c","createdAt":1,"parentSession":"p",${extra}}\n{"type":"turn/start","data":{"turn":1}}\n`
    const message = (extra: string) => {
      const result = decodeLog(header(extra))
      return Either.isLeft(result) ? result.left : "read"
    }
    expect(message(`"origin":"subagent","delegationDepth":1`)).toBe("read")
    expect(message(`"origin":"fork","delegationDepth":1`)).toEqual({
      line: 1,
      message: expect.stringContaining("not a session header")
    })
    expect(message(`"origin":"subagent","delegationDepth":-1`)).toEqual({
      line: 1,
      message: expect.stringContaining("not a session header")
    })
    expect(message(`"origin":"subagent","delegationDepth":1.5`)).toEqual({
      line: 1,
      message: expect.stringContaining("not a session header")
    })
  })

  it("decodes every subagent/descriptor of the fixtures as DescriptorData; no fixture logs subagent/start or /end", async () => {
    const types: Record<string, number> = {}
    let descriptors = 0
    for (const file of dshFixtures) {
      const { events: log } = await readDsh(file)
      for (const e of log) {
        if (!e.type.startsWith("subagent/")) continue
        types[e.type] = (types[e.type] ?? 0) + 1
        if (e.type === "subagent/descriptor") {
          expect([file, Schema.is(DescriptorData)(e.data)]).toEqual([file, true])
          descriptors++
        }
      }
    }
    // 17 child logs, one descriptor each; DSH emits start/end on its bus only
    expect([types, descriptors]).toEqual([{ "subagent/descriptor": 17 }, 17])
  })

  it("finds each child's own descriptor (after the inherited prefix) where DSH appends it", async () => {
    for (const [file, seq, descriptor] of DESCRIPTORS) {
      const { events: log, header } = await readDsh(file)
      const at = log.filter((e) => e.type === "subagent/descriptor").map((e) => e.seq)
      expect([file, at, descriptorOf(log, header.seedLength ?? 0)]).toEqual([file, [seq], descriptor])
    }
    // one-shot: inside turn 1, right after the claim and before step 1; continuable: seq 0, then
    // session/end-seed; fork: after the 42 inherited seqs, its end-seed at seq 42
    const spawn = (await readDsh(fixture("subagent-spawn-in-process", 1))).events
    expect(spawn.slice(2, 6).map((e) => e.type)).toEqual([
      "turn/start",
      "agent/inbox/spliced",
      "subagent/descriptor",
      "step/start"
    ])
    const continuable = (await readDsh(CONTINUABLE)).events
    expect(continuable.slice(0, 4).map((e) => e.type)).toEqual([
      "subagent/descriptor",
      "session/end-seed",
      "approval/policy",
      "agent/inbox/spliced"
    ])
    const fork = (await readDsh(FORK)).events
    expect(fork.slice(41, 48).map((e) => e.type)).toEqual([
      "turn/end",
      "session/end-seed",
      "approval/policy",
      "agent/inbox/spliced",
      "turn/start",
      "agent/inbox/spliced",
      "subagent/descriptor"
    ])
  })

  it("Invariant.check accepts every parent and child of the sub-agent tests", async () => {
    expect(subagentFixtures.length).toBe(27)
    for (const file of subagentFixtures) {
      const { events: log, header } = await readDsh(file)
      expect([file, Invariant.check(log, { header })]).toEqual([file, []])
    }
  })
})

describe("DSH sub-agent logs: the transcript", () => {
  it("a forked child: its lineage first, the inherited turn, then its descriptor in its own turn", async () => {
    const { events: log, header } = await readDsh(FORK)
    const entries = Transcript.fromEvents(log, { header })
    expect(entries[0]).toEqual({
      kind: "session",
      turn: 0,
      step: 0,
      id: "ada8966c-9fa3-441b-8721-37ff1e795e6a",
      parentSession: "96cf59c9-b347-48b9-b234-a5200913ad05",
      origin: "subagent",
      delegationDepth: 1,
      seedLength: 42
    })
    expect(entries.filter((e) => e.kind === "subagent")).toEqual([{
      kind: "subagent",
      event: "descriptor",
      turn: 2,
      step: 0,
      mode: "one-shot",
      provider: "fork",
      label: "Recall project codeword"
    }])
    const lines = TranscriptText.render(entries).split("\n").filter((l) => !l.startsWith("[context") && !l.startsWith("  "))
    expect(lines).toEqual([
      "[subagent session ada8966c-9fa3-441b-8721-37ff1e795e6a of 96cf59c9-b347-48b9-b234-a5200913ad05, depth 1; seq 0..41 inherited from the parent]",
      "── turn 1 ──",
      "> Remember this fact for later: the project codeword is MARMALADE. Reply with the single word OK and stop. Do not use any tools.",
      "OK",
      "turn 1 ended: completed",
      "── turn 2 ──",
      "[subagent: one-shot via fork, \"Recall project codeword\"]",
      "> What is the project codeword mentioned earlier in this conversation? Reply with exactly that one word and nothing else.",
      "MARMALADE",
      "turn 2 ended: completed",
      ""
    ])
    // without the header: no lineage entry
    expect(Transcript.fromEvents(log)[0]!.kind).toBe("user")
  })

  it("the depth-two child: depth 2, and the rejected third delegation as an error result", async () => {
    const { events: log, header } = await readDsh(fixture("subagent-depth-two-rejection", 2))
    const lines = TranscriptText.render(Transcript.fromEvents(log, { header })).split("\n")
      .filter((l) => !l.startsWith("[context") && !l.startsWith("  "))
    expect(lines).toEqual([
      "[subagent session 33333333-3333-4333-8333-333333333333 of 22222222-2222-4222-8222-222222222222, depth 2]",
      "── turn 1 ──",
      "[subagent: one-shot via spawn, \"Start depth two\"]",
      "> Attempt one subagent call beyond the configured cap, then report the rejection.",
      "→ subagent({\"description\":\"Exceed depth cap\",\"prompt\":\"This child must never start.\",\"run_in_background\":false})",
      "← error: Error: subagent depth 3 exceeds maxDepth 2",
      "DEPTH_REJECTED",
      "turn 1 ended: completed",
      ""
    ])
  })

  it("a continuable child: its descriptor before turn 1, the parent's followups labelled with the parent's id", async () => {
    const { events: log, header } = await readDsh(CONTINUABLE)
    const entries = Transcript.fromEvents(log, { header })
    expect(entries.slice(0, 2)).toEqual([
      {
        kind: "session",
        turn: 0,
        step: 0,
        id: "33333333-3333-4333-8333-333333333333",
        parentSession: "11111111-1111-4111-8111-111111111111",
        origin: "subagent",
        delegationDepth: 1
      },
      {
        kind: "subagent",
        event: "descriptor",
        turn: 0,
        step: 0,
        mode: "continuable",
        provider: "spawn",
        label: "Reply with CHILD_OK",
        agentProvider: "deepseek-official",
        agentModel: "deepseek-v4-flash"
      }
    ])
    const lines = TranscriptText.render(entries).split("\n")
    expect(lines.slice(0, 2)).toEqual([
      "[subagent session 33333333-3333-4333-8333-333333333333 of 11111111-1111-4111-8111-111111111111, depth 1]",
      "[subagent: continuable via spawn, \"Reply with CHILD_OK\", model deepseek-official/deepseek-v4-flash]"
    ])
    expect(lines.filter((l) => l.startsWith("[context from coordinator"))).toEqual([
      "[context from coordinator:11111111-1111-4111-8111-111111111111 (relay)] Now reply with exactly SECOND_OK."
    ])
  })

  it("a parent: the child's answer (or the error and partial output) is its tool result; a settled notice names the child", async () => {
    const spawn = await readDsh(fixture("subagent-spawn-in-process"))
    const parent = Transcript.fromEvents(spawn.events, { header: spawn.header })
    expect(parent.filter((e) => e.kind === "tool-call" || e.kind === "tool-result" || e.kind === "session")).toEqual([
      {
        kind: "tool-call",
        turn: 1,
        step: 1,
        callId: "call_00_gVbLWC12Qu8JheZpVRRz8749",
        name: "subagent",
        arguments:
          "{\"description\": \"Reply with CHILD_OK\", \"prompt\": \"Reply with exactly the word CHILD_OK and nothing else.\", \"run_in_background\":false}"
      },
      { kind: "tool-result", turn: 1, step: 1, callId: "call_00_gVbLWC12Qu8JheZpVRRz8749", text: "CHILD_OK", isError: false }
    ])
    const partial = await readDsh(fixture("subagent-max-tokens-partial"))
    expect(Transcript.fromEvents(partial.events).filter((e) => e.kind === "tool-result")).toEqual([{
      kind: "tool-result",
      turn: 1,
      step: 1,
      callId: "call_parent_1",
      text: "Error: subagent run hit its token limit before finishing\nPartial output before the run ended:\npartial one",
      isError: true
    }])
    const continuable = await readDsh(fixture("subagent-continuable"))
    const lines = TranscriptText.render(Transcript.fromEvents(continuable.events)).split("\n")
    expect(lines.filter((l) => l.includes("subagent 3333") || l.startsWith("[context from subagent"))).toEqual([
      "← started subagent 33333333-3333-4333-8333-333333333333",
      "← message queued as the next turn for subagent 33333333-3333-4333-8333-333333333333",
      "← message queued as the next turn for subagent 33333333-3333-4333-8333-333333333333",
      "[context from subagent-settled:33333333-3333-4333-8333-333333333333 (notice)] Background subagent 33333333-3333-4333-8333-333333333333 failed before it finished."
    ])
  })
})

// A parent log of ours that records its children (DSH's `SubagentRunInfo` / `SubagentRunEndInfo`
// payloads, plus the `callId` of the tool call that started each).
const start = (id: string, callId: string) => ({ runId: `run-${id}`, provider: "spawn", id, local: true, callId })
const U1 = msg("u1", "delegate twice")
const PARENT = events(
  followup(U1),
  turnStart(1),
  claim("next-turn", 1),
  stepStart(1, 1),
  entered(U1),
  assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "subagent" }, { id: "c2", name: "subagent" }] }),
  toolCall(1, 1, "c1", "subagent", "{\"description\":\"a\",\"prompt\":\"say A\"}"),
  toolCall(1, 1, "c2", "subagent", "{\"description\":\"b\",\"prompt\":\"say B\"}"),
  foreign("subagent/start", start("child-a", "c1")),
  foreign("subagent/start", start("child-b", "c2")),
  foreign("subagent/end", {
    ...start("child-a", "c1"),
    stopReason: "completed",
    lastAssistantMessage: [{ type: "text", text: "A" }]
  }),
  foreign("subagent/end", {
    ...start("child-b", "c2"),
    stopReason: "max-tokens",
    lastAssistantMessage: [{ type: "text", text: "partial" }, { type: "text", text: "B" }]
  }),
  toolResult(1, 1, "c1", "A"),
  toolResult(1, 1, "c2", "Error: subagent run hit its token limit before finishing", { name: "ToolFailed", code: "TOOL_FAILED" }),
  stepEnd(1, 1),
  turnEnd(1)
)
const OURS: SessionHeader = { type: "session", format: "effect-agent-loop", version: 1, id: "parent", createdAt: 0 }

describe("a parent log of ours with subagent/start and subagent/end", () => {
  it("the shapes decode, the check accepts it, and the transcript shows each child's start and end with its id", () => {
    expect(PARENT.filter((e) => e.type === "subagent/start").every((e) => Schema.is(StartData)(e.data))).toBe(true)
    expect(PARENT.filter((e) => e.type === "subagent/end").every((e) => Schema.is(EndData)(e.data))).toBe(true)
    expect(Invariant.check(PARENT, { header: OURS })).toEqual([])
    const entries = Transcript.fromEvents(PARENT, { header: OURS })
    expect(entries.filter((e) => e.kind === "subagent")).toEqual([
      {
        kind: "subagent",
        event: "start",
        turn: 1,
        step: 1,
        id: "child-a",
        provider: "spawn",
        runId: "run-child-a",
        callId: "c1"
      },
      {
        kind: "subagent",
        event: "start",
        turn: 1,
        step: 1,
        id: "child-b",
        provider: "spawn",
        runId: "run-child-b",
        callId: "c2"
      },
      {
        kind: "subagent",
        event: "end",
        turn: 1,
        step: 1,
        id: "child-a",
        provider: "spawn",
        runId: "run-child-a",
        callId: "c1",
        stopReason: "completed",
        text: "A"
      },
      {
        kind: "subagent",
        event: "end",
        turn: 1,
        step: 1,
        id: "child-b",
        provider: "spawn",
        runId: "run-child-b",
        callId: "c2",
        stopReason: "max-tokens",
        text: "partial\nB"
      }
    ])
    expect(TranscriptText.render(entries).split("\n")).toEqual([
      "── turn 1 ──",
      "> delegate twice",
      "→ subagent({\"description\":\"a\",\"prompt\":\"say A\"})",
      "→ subagent({\"description\":\"b\",\"prompt\":\"say B\"})",
      "⇒ subagent child-a started via spawn",
      "⇒ subagent child-b started via spawn",
      "⇐ subagent child-a ended: completed: A",
      "⇐ subagent child-b ended: max-tokens: partial",
      "  B",
      "← A",
      "← error: Error: subagent run hit its token limit before finishing",
      "turn 1 ended: completed",
      ""
    ])
  })

  it("stats counts the children it started and their stop reasons", () => {
    const stats = statsOf({ header: OURS, events: PARENT, warnings: [], validBytes: 0, tornTail: false }, undefined)
    // Its ends record no usage (a log from before they did): each run counts 0.
    const none = {
      inputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: 0,
      reasoningTokens: 0,
      totalTokens: 0
    }
    expect([stats.subagent, stats.subagents]).toEqual([null, {
      started: 2,
      ended: 2,
      stopReasons: { completed: 1, "max-tokens": 1 },
      children: ["child-a", "child-b"],
      tokens: none,
      tokensByModel: {},
      unreportedRequests: 0,
      runs: [
        { id: "child-a", callId: "c1", stopReason: "completed", tokens: none },
        { id: "child-b", callId: "c2", stopReason: "max-tokens", tokens: none }
      ]
    }])
  })
})

describe("DSH sub-agent logs: stats and the CLI", () => {
  it("stats of a child: its lineage and descriptor; of a parent: none", async () => {
    const fork = statsOf(await readDsh(FORK), undefined)
    expect([fork.subagent, fork.toolCalls, fork.turns]).toEqual([
      {
        parentSession: "96cf59c9-b347-48b9-b234-a5200913ad05",
        origin: "subagent",
        delegationDepth: 1,
        seedLength: 42,
        descriptor: { mode: "one-shot", provider: "fork", label: "Recall project codeword" }
      },
      0,
      1
    ])
    const deep = statsOf(await readDsh(fixture("subagent-depth-two-rejection", 2)), undefined)
    expect([deep.subagent, deep.toolCallsByName]).toEqual([{
      parentSession: "22222222-2222-4222-8222-222222222222",
      origin: "subagent",
      delegationDepth: 2,
      seedLength: 0,
      descriptor: { mode: "one-shot", provider: "spawn", label: "Start depth two" }
    }, { subagent: 1 }])
    const parent = statsOf(await readDsh(fixture("subagent-multi")), undefined)
    expect([parent.subagent, parent.subagents, parent.toolCallsByName]).toEqual([
      null,
      {
        started: 0,
        ended: 0,
        stopReasons: {},
        children: [],
        tokens: { inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0, totalTokens: 0 },
        tokensByModel: {},
        unreportedRequests: 0,
        runs: []
      },
      { subagent: 2 }
    ])
  })

  /** Runs the CLI in-process; exit code and stdout lines. */
  const cli = (argv: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const out: Array<string> = []
      const base = yield* Console.consoleWith(Effect.succeed)
      const capture: Console.Console = {
        ...base,
        log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(args.map(String).join(" "))),
        error: () => Effect.void
      }
      const code = yield* main(argv).pipe(Effect.withConsole(capture), Effect.provide(NodeContext.layer))
      return { code, out: out.join("\n").split("\n") }
    })

  it.effect("agent-loop transcript, stats and check on a forked child", () =>
    Effect.gen(function*() {
      const file = join(dshDir, FORK)
      const transcript = yield* cli(["transcript", file])
      expect([transcript.code, transcript.out[0]]).toEqual([
        0,
        "[subagent session ada8966c-9fa3-441b-8721-37ff1e795e6a of 96cf59c9-b347-48b9-b234-a5200913ad05, depth 1; seq 0..41 inherited from the parent]"
      ])
      const json = yield* cli(["transcript", file, "--json"])
      expect(JSON.parse(json.out[0]!)).toEqual({
        kind: "session",
        turn: 0,
        step: 0,
        id: "ada8966c-9fa3-441b-8721-37ff1e795e6a",
        parentSession: "96cf59c9-b347-48b9-b234-a5200913ad05",
        origin: "subagent",
        delegationDepth: 1,
        seedLength: 42
      })
      const stats = yield* cli(["stats", file])
      expect([stats.code, stats.out.filter((l) => l.startsWith("subagent"))]).toEqual([0, [
        "subagent of     96cf59c9-b347-48b9-b234-a5200913ad05 (depth 1, one-shot via fork \"Recall project codeword\", seq 0..41 inherited)"
      ]])
      const check = yield* cli(["check", file])
      expect([check.code, check.out]).toEqual([0, [`${file}: ok (99 events)`]])
    }))
})
