/**
 * Reading logs that hold a compaction (§17, "Reading"). No shared DSH fixture has a compaction
 * bracket (the one checkpoint of `acp__agent-instructions` replaces one message and stands alone,
 * History.test.ts and DshImport.test.ts cover it), so `test/fixtures/dsh-compaction.jsonl` is a
 * DSH v0 log written here in the exact shape DSH's compaction writes (its `compaction` and
 * `compaction-basic` packages): `compaction/start {compactionId, turn}`; on success
 * `compaction/summary {compactionId, summary: ContentBlock[], rawOutput, llmStreamCall,
 * shadowedRange, shadowedSeqs, shadowedTokenCount, provider, model, maxTokens, usage}`, then the
 * checkpoint `user/message` (source `{kind:"plugin", plugin:"compact", compactionId}`, content the
 * summary framed by DSH's preamble and `<compacted-summary>` tags, `sourceEventSeqs` [start,
 * summary, ...shadowed], `surfaceOp: {op:"replace", start, end}`), then `compaction/end
 * {compactionId, turn}`, no `outcome`; a failed or aborted one is `compaction/start` then
 * `compaction/end {compactionId, turn, error: string}`, no summary, no checkpoint. Turn 1 reads
 * two files and compacts before its third step (the prompt, the first call and its result are
 * replaced); turn 2's compaction fails. The raw rows are parsed here with `JSON.parse` (the
 * oracle). In a DSH v0 log the bracket is foreign and the checkpoint applies where it stands; in
 * our logs it applies only when its bracket ends `compacted`.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as NodeFs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as History from "../src/History.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import type { Message, MessageId, UserMessage } from "../src/Message.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { EventDraft } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Transcript from "../src/Transcript.js"
import * as TranscriptText from "../src/TranscriptText.js"
import { run } from "./utils/child.js"
import {
  assistant,
  claim,
  entered,
  events,
  followup,
  msg,
  stepEnd,
  stepStart,
  toolCall,
  toolResult,
  turnEnd,
  turnStart
} from "./utils/events.js"
import { tmpDir } from "./utils/tmp.js"

type Json = any

// ---------------------------------------------------------------------------------------------
// The DSH v0 log (test/fixtures/dsh-compaction.jsonl), read raw
// ---------------------------------------------------------------------------------------------

const DSH_PATH = Path.resolve("test/fixtures/dsh-compaction.jsonl")
const dshText = NodeFs.readFileSync(DSH_PATH, "utf8")
const [dshHeader, ...dshRows] = dshText.trimEnd().split("\n").map((line) => JSON.parse(line) as Json)
const DSH_ID: string = dshHeader.id
const DSH_COMPACTED = "0c9e7a52-5d8f-4f0e-9a41-3c2b1d0e7f61"
const DSH_FAILED = "5a7b1f30-2c4d-4e8f-b6a9-0d1c2b3a4f5e"
const SUMMARY =
  "The user asked for a summary of notes.md and todo.md. notes.md: the release is on Friday; the build needs Node 20."

/** The message a raw row puts on the surface. */
const rowMessage = (seq: number): Json => {
  const row = dshRows[seq]!
  return row.type === "user/message" ? row.data : row.data.message
}

/** DSH's surface after both turns: the checkpoint (17) in place of 4..8, then 11, 13 and the answers. */
const DSH_SURFACE_SEQS = [17, 11, 13, 20, 29, 30]

const readLog = (path: string) => SessionStore.readFile(path)

describe("A DSH v0 log with a compaction (test/fixtures/dsh-compaction.jsonl, DSH's shapes)", () => {
  it("the fixture holds the rows the tests name, with DSH's bracket shapes", () => {
    expect(dshHeader).toMatchObject({ type: "session", version: 0 })
    expect(dshRows.map((row, i) => row.seq === i)).not.toContain(false)
    expect(dshRows.filter((row) => row.type.startsWith("compaction/")).map((row) => [row.seq, row.type])).toEqual([
      [15, "compaction/start"],
      [16, "compaction/summary"],
      [18, "compaction/end"],
      [26, "compaction/start"],
      [27, "compaction/end"]
    ])
    expect(dshRows[18].data).toEqual({ compactionId: DSH_COMPACTED, turn: 1 })
    expect(dshRows[27].data).toEqual({
      compactionId: DSH_FAILED,
      turn: 2,
      error: "summary is not smaller than the shadowed content (215 estimated framed tokens >= 188)"
    })
    expect(dshRows[16].data.summary).toEqual([{ type: "text", text: SUMMARY }])
    const checkpoint = dshRows[17]
    expect([checkpoint.type, checkpoint.data.source, checkpoint.sourceEventSeqs, checkpoint.surfaceOp]).toEqual([
      "user/message",
      { kind: "plugin", plugin: "compact", compactionId: DSH_COMPACTED },
      [15, 16, 4, 6, 8],
      { op: "replace", start: 4, end: 8 }
    ])
    expect(checkpoint.data.content.map((b: Json) => b.text)).toEqual([
      "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up " +
      "context. Treat the captured context as established background and build on it without restating it. " +
      "Continue the task directly from the messages that follow, without acknowledging this checkpoint.\n\n" +
      "<compacted-summary>",
      SUMMARY,
      "</compacted-summary>"
    ])
    expect([4, 6, 8, 11, 13].map((s) => rowMessage(s).content[0].type)).toEqual([
      "text",
      "tool-call",
      "tool-result",
      "tool-call",
      "tool-result"
    ])
  })

  it.effect("History.derive: the checkpoint in place of the range it replaces, then the rest; a failed compaction changes nothing", () =>
    Effect.gen(function*() {
      const { events: log, header } = yield* readLog(DSH_PATH)
      expect(header.version).toBe(0)
      expect(log.map((e) => e.seq)).toEqual(dshRows.map((_, i) => i))
      const history = History.derive(log, { header })
      expect(history).toEqual(DSH_SURFACE_SEQS.map(rowMessage))
      expect(History.surface(log, { header }).map((e) => e.seq)).toEqual(DSH_SURFACE_SEQS)
      // The replaced range held the first call and its result: no call is left without its result.
      const calls = (ms: ReadonlyArray<Message>) =>
        ms.flatMap((m) =>
          m.content.flatMap((b) => b.type === "tool-call" ? [b.id] : b.type === "tool-result" ? [`←${b.toolCallId}`] : [])
        )
      expect(calls(history)).toEqual(["call_read_todo", "←call_read_todo"])
      // Before the bracket the history is the first two steps, uncompacted.
      expect(History.derive(log.slice(0, 17), { header })).toEqual([4, 6, 8, 11, 13].map(rowMessage))
      // A log cut between the checkpoint and its end (DSH applies a replace when it is appended).
      expect(History.derive(log.slice(0, 18), { header })).toEqual([17, 11, 13].map(rowMessage))
      // Read by our rules instead, a bracket without `outcome: "compacted"` keeps nothing:
      // the flavour is what makes DSH's checkpoint apply.
      expect(History.derive(log, { dsh: false })).toEqual([4, 6, 8, 11, 13, 20, 29, 30].map(rowMessage))
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("Transcript: a compacted marker with the summary, a failed one with DSH's error, no message for the checkpoint", () =>
    Effect.gen(function*() {
      const { events: log } = yield* readLog(DSH_PATH)
      const entries = Transcript.fromEvents(log)
      expect(entries.filter((e) => e.kind === "compaction" || e.kind === "checkpoint")).toEqual([
        {
          kind: "compaction",
          turn: 1,
          step: 2,
          compactionId: DSH_COMPACTED,
          outcome: "compacted",
          shadowedRange: { start: 4, end: 8 },
          shadowedTokenCount: 412,
          summary: SUMMARY
        },
        {
          kind: "compaction",
          turn: 2,
          step: 0,
          compactionId: DSH_FAILED,
          outcome: "failed",
          error: {
            code: "ERROR",
            message: "summary is not smaller than the shadowed content (215 estimated framed tokens >= 188)"
          }
        }
      ])
      expect(entries.filter((e) => e.kind === "context")).toEqual([])
      expect(TranscriptText.render(entries).split("\n")).toEqual(TRANSCRIPT)
      // Later DSH versions spell the replace `{op, startSeq, endSeq}`: read the same.
      const respelled = log.map((e): Json => e.seq === 17 ? { ...e, surfaceOp: { op: "replace", startSeq: 4, endSeq: 8 } } : e)
      expect(Transcript.fromEvents(respelled)).toEqual(entries)
      expect(History.derive(respelled, { dsh: true })).toEqual(DSH_SURFACE_SEQS.map(rowMessage))
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("Invariant.check with DSH's rules finds nothing", () =>
    Effect.gen(function*() {
      const { events: log, header } = yield* readLog(DSH_PATH)
      expect(Invariant.check(log, { header })).toEqual([])
      expect(Invariant.check(log, { dsh: true })).toEqual([])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("Agent.resume refuses it (DSH v0 logs are read, never appended to) and leaves the file as it was", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const path = Path.join(dir, `${DSH_ID}.jsonl`)
      NodeFs.writeFileSync(path, dshText)
      const model = ScriptedModel.make([{ text: "never" }])
      const refused = yield* Effect.flip(
        Agent.resume(DSH_ID).pipe(
          Effect.provide(Layer.mergeAll(SessionStore.layerJsonl({ directory: dir }), Model.layer(model))),
          Effect.scoped
        )
      )
      expect(refused).toMatchObject({ _tag: "SessionStoreError", message: expect.stringContaining("DSH v0 log") })
      expect(model.requests).toEqual([])
      expect(NodeFs.readFileSync(path, "utf8")).toBe(dshText)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.live("agent-loop transcript prints it (text and --json), check finds it ok (exit 0)", () =>
    Effect.gen(function*() {
      const { events: log } = yield* readLog(DSH_PATH)
      const cli = (...argv: Array<string>) =>
        run(process.execPath, [Path.resolve("dist/cli/bin.js"), ...argv], { withinMs: CLI_MS })
      expect(yield* cli("transcript", DSH_PATH)).toEqual({ status: 0, signal: null, stdout: TRANSCRIPT.join("\n"), stderr: "" })
      const json = yield* cli("transcript", DSH_PATH, "--json")
      expect([json.status, json.stderr]).toEqual([0, ""])
      expect(json.stdout.trimEnd().split("\n").map((l) => JSON.parse(l))).toEqual(
        JSON.parse(JSON.stringify(Transcript.fromEvents(log)))
      )
      expect(yield* cli("check", DSH_PATH)).toEqual({
        status: 0,
        signal: null,
        stdout: `${DSH_PATH}: ok (33 events)\n`,
        stderr: ""
      })
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})

/**
 * The bound of one `agent-loop` run on this log: 1.6 to 3.2 s measured (6 runs) on 2 cores loaded
 * by two busy loops and other test runs (load average 13); one that takes ten times that is stuck.
 */
const CLI_MS = 30_000

/** `agent-loop transcript` of the fixture, line by line (the last line is empty: the text ends with "\n"). */
const TRANSCRIPT = [
  "── turn 1 ──",
  "> Summarize notes.md and todo.md for me.",
  "→ read({\"file_path\":\"notes.md\"})",
  "← # Notes",
  "  The release is on Friday.",
  "  The build needs Node 20.",
  "→ read({\"file_path\":\"todo.md\"})",
  "← # Todo",
  "  - write the changelog",
  "  - tag v1.2",
  "[compaction, turn 1] compacted: seq 4..8 (412 tokens) summarized",
  `  ${SUMMARY}`,
  "The release is on Friday (Node 20); still to do: the changelog and the v1.2 tag.",
  "turn 1 ended: completed",
  "── turn 2 ──",
  "[compaction, turn 2] failed: nothing kept (error: ERROR: summary is not smaller than the shadowed content (215 estimated framed tokens >= 188))",
  "> Which one first?",
  "The changelog, then the tag.",
  "turn 2 ended: completed",
  ""
]

// ---------------------------------------------------------------------------------------------
// Our format: the same turns, a bracket whose outcome decides
// ---------------------------------------------------------------------------------------------

const u1 = msg("u1", "List the files.")
const u2 = msg("u2", "Read a.txt.")
const u3 = msg("u3", "And b.txt?")
const u4 = msg("u4", "And now?")
const ours = (id: string, text: string): UserMessage =>
  ({
    id: id as MessageId,
    role: "user",
    content: [{ type: "text", text }],
    source: { kind: "plugin", plugin: "compact", compactionId: "cmp-1" }
  }) as UserMessage

const oursCheckpoint = ours(
  "k1",
  "The conversation before this point was compacted. Summary:\n\nThe user listed a.txt and b.txt."
)

const oursTurn = (turn: number, prompt: UserMessage, callId: string, name: string, result: string): Array<EventDraft> => [
  followup(prompt),
  turnStart(turn),
  claim("next-turn", 1),
  stepStart(turn, 1),
  entered(prompt),
  assistant(turn, 1, undefined, { toolCalls: [{ id: callId, name }] }),
  toolCall(turn, 1, callId, name),
  toolResult(turn, 1, callId, result),
  stepEnd(turn, 1),
  stepStart(turn, 2),
  assistant(turn, 2, `answer ${turn}`),
  stepEnd(turn, 2),
  turnEnd(turn)
]

/** seqs 0–12 turn 1 (prompt 4, call 5, result 7, answer 10), 13–25 turn 2, 26–28 turn 3's claim. */
const BEFORE: Array<EventDraft> = [
  ...oursTurn(1, u1, "c1", "ls", "a.txt\nb.txt"),
  ...oursTurn(2, u2, "c2", "read", "hello"),
  followup(u3),
  turnStart(3),
  claim("next-turn", 1)
]

const start: EventDraft = {
  type: "compaction/start",
  data: { compactionId: "cmp-1", turn: 3, reason: "pressure", tokens: 900 }
}
const summary: EventDraft = {
  type: "compaction/summary",
  data: {
    compactionId: "cmp-1",
    summary: "The user listed a.txt and b.txt.",
    shadowedRange: { start: 4, end: 10 },
    shadowedSeqs: [4, 5, 7, 10],
    shadowedTokenCount: 41,
    provider: "test",
    model: "test",
    instructions: "Summarize."
  }
}
const checkpointDraft = {
  type: "user/message",
  data: oursCheckpoint,
  surfaceOp: { op: "replace", start: 4, end: 10 }
} as EventDraft
const end = (outcome: string, extra: object = {}): EventDraft => ({
  type: "compaction/end",
  data: { compactionId: "cmp-1", turn: 3, outcome, ...extra }
})
/** Turn 3's step after the bracket. */
const AFTER: Array<EventDraft> = [stepStart(3, 1), entered(u3), assistant(3, 1, "b.txt is empty."), stepEnd(3, 1), turnEnd(3)]

const ids = (messages: ReadonlyArray<Message>) => messages.map((m) => m.id)
const UNCOMPACTED = ["u1", "a1.1", "r.c1", "a1.2", "u2", "a2.1", "r.c2", "a2.2"]
const COMPACTED = ["k1", "u2", "a2.1", "r.c2", "a2.2"]

describe("Our log: a bracket's checkpoint applies only when the bracket ends compacted", () => {
  it("compacted: the checkpoint takes the place of turn 1 (its tool call and result included)", () => {
    const log = events(BEFORE, start, summary, checkpointDraft, end("compacted", { tokens: 300 }), AFTER)
    expect(ids(History.derive(log))).toEqual([...COMPACTED, "u3", "a3.1"])
    expect(History.surface(log).map((e) => e.seq)).toEqual([31, 17, 18, 20, 23, 34, 35])
    // inside the bracket, before its end, nothing applies yet
    expect(ids(History.derive(log.slice(0, 32)))).toEqual(UNCOMPACTED)
  })

  it("aborted, failed, interrupted: nothing of the bracket applies", () => {
    const cases: Array<[string, Array<EventDraft>]> = [
      ["aborted", [end("aborted"), turnEnd(3, "aborted")]],
      ["failed", [end("failed", { error: { code: "SUMMARY_FAILED", message: "boom" } }), ...AFTER]],
      ["interrupted", [end("interrupted"), turnEnd(3, "interrupted")]]
    ]
    for (const [outcome, rest] of cases) {
      const log = events(BEFORE, start, summary, checkpointDraft, rest)
      const want = outcome === "failed" ? [...UNCOMPACTED, "u3", "a3.1"] : UNCOMPACTED
      expect([outcome, ids(History.derive(log))]).toEqual([outcome, want])
      expect([outcome, History.surface(log).map((e) => e.message.id)]).toEqual([outcome, want])
    }
  })

  it("a bracket that never ends (the log stops inside it) keeps nothing", () => {
    const log = events(BEFORE, start, summary, checkpointDraft)
    expect(ids(History.derive(log))).toEqual(UNCOMPACTED)
    // nor does a message appended after it (a crash, then more events: the checkpoint stays held)
    expect(ids(History.derive(events(BEFORE, start, summary, checkpointDraft, AFTER)))).toEqual([
      ...UNCOMPACTED,
      "u3",
      "a3.1"
    ])
  })

  it("a later compacted bracket applies its own checkpoint only", () => {
    const second = ours("k2", "second summary")
    const log = events(
      BEFORE,
      start,
      summary,
      checkpointDraft,
      end("aborted"),
      turnEnd(3, "aborted"),
      followup(u4),
      turnStart(4),
      claim("next-turn", 1),
      { type: "compaction/start", data: { compactionId: "cmp-2", turn: 4, reason: "pressure", tokens: 900 } },
      { ...summary, data: { ...(summary.data as object), compactionId: "cmp-2" } },
      {
        type: "user/message",
        data: { ...second, source: { ...second.source, compactionId: "cmp-2" } },
        surfaceOp: {
          op: "replace",
          start: 4,
          end: 10
        }
      } as EventDraft,
      { type: "compaction/end", data: { compactionId: "cmp-2", turn: 4, outcome: "compacted" } }
    )
    expect(ids(History.derive(log))).toEqual(["k2", "u2", "a2.1", "r.c2", "a2.2"])
  })

  it.scoped("Agent.resume of the compacted log (JSONL) continues from the compacted history", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const log = events(BEFORE, start, summary, checkpointDraft, end("compacted", { tokens: 300 }), AFTER)
      const header = { type: "session", format: "effect-agent-loop", version: 1, id: "compacted", createdAt: 0 }
      NodeFs.writeFileSync(
        Path.join(dir, "compacted.jsonl"),
        [header, ...log].map((line) => JSON.stringify(line)).join("\n") + "\n"
      )
      const derived = History.derive(log)
      const model = ScriptedModel.make([{ text: "c.txt is empty too." }])
      const final = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("compacted")
        expect(yield* agent.history).toEqual(derived)
        yield* agent.followup("And c.txt?")
        yield* agent.awaitIdle
        return yield* agent.history
      })).pipe(
        Effect.provide(
          Layer.mergeAll(SessionStore.layerJsonl({ directory: dir }), IdGenerator.layerSeeded(5), Model.layer(model))
        )
      )
      expect(model.requests.length).toBe(1)
      const sent = model.requests[0]!.messages
      expect(sent.slice(0, -1)).toEqual(derived)
      expect(ids(sent.slice(0, -1))).toEqual([...COMPACTED, "u3", "a3.1"])
      expect(sent.at(-1)).toMatchObject({
        role: "user",
        content: [{ type: "text", text: "And c.txt?" }],
        source: { kind: "user" }
      })
      // the live history after the turn: the request and its answer; the file derives the same
      expect(final.slice(0, -1)).toEqual(sent)
      expect(final.at(-1)).toMatchObject({ role: "assistant", content: [{ type: "text", text: "c.txt is empty too." }] })
      const reread = yield* readLog(Path.join(dir, "compacted.jsonl"))
      expect(History.derive(reread.events, { header: reread.header })).toEqual(final)
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
