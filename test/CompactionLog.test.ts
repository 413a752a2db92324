/**
 * Reading logs that hold a compaction (§17, "Reading"). No shared DSH fixture has a
 * compaction bracket (the one checkpoint of `acp__agent-instructions` replaces one message and
 * stands alone, History.test.ts and DshImport.test.ts cover it), so the DSH v0 log here is built
 * by hand from DSH's shapes: two tool turns, then DSH's `compaction/start`, `compaction/summary`,
 * a checkpoint `user/message` whose `surfaceOp` replaces the first turn (prompt, assistant tool
 * call, its result, answer), `compaction/end` without `outcome` (DSH v0), then a further turn.
 * In a DSH v0 log the bracket is foreign and the checkpoint applies where it stands; in our logs
 * it applies only when its bracket ends `compacted`.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { spawnSync } from "node:child_process"
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
// The DSH v0 log, row by row (seq = line index − 1, written on every row as DSH does)
// ---------------------------------------------------------------------------------------------

const DSH_ID = "5b0d3c1e-compaction-by-hand"
const MODEL = { kind: "model", provider: "deepseek-official", model: "deepseek-v4-flash" }
const user = (id: string, text: string): Json => ({
  content: [{ type: "text", text }],
  source: { kind: "user" },
  role: "user",
  id
})
const checkpoint: Json = {
  content: [{ type: "text", text: "Earlier context was compacted. The user listed the files: a.txt and b.txt." }],
  source: { kind: "plugin", plugin: "compact", compactionId: "cmp-1" },
  role: "user",
  id: "k1"
}

/** One tool turn: prompt, a step with one tool call and its result, a text step. */
const toolTurn = (
  turn: number,
  prompt: Json,
  call: { id: string; name: string; args: string },
  result: string,
  answer: string
) => {
  const usage = { inputTokens: 100 * turn, outputTokens: 10 }
  return [
    { type: "agent/inbox/spliced", data: { target: "next-turn", start: 0, inserted: [prompt] } },
    { type: "turn/start", data: { turn } },
    { type: "agent/inbox/spliced", data: { target: "next-turn", start: 0, removedCount: 1, inserted: [] } },
    { type: "step/start", data: { turn, step: 1 } },
    { type: "user/message", data: prompt, surfaceOp: "append" },
    {
      type: "assistant/message",
      data: {
        turn,
        step: 1,
        message: {
          role: "assistant",
          content: [{ type: "tool-call", id: call.id, name: call.name, arguments: call.args }],
          source: MODEL,
          id: `a${turn}.1`
        },
        usage
      },
      surfaceOp: "append"
    },
    { type: "tool/call", data: { turn, step: 1, callId: call.id, name: call.name, arguments: call.args } },
    {
      type: "tool/result",
      data: {
        turn,
        step: 1,
        message: {
          source: { kind: "tool", callId: call.id },
          content: [{ type: "tool-result", toolCallId: call.id, content: [{ type: "text", text: result }], isError: false }],
          role: "user",
          id: `r${turn}`
        }
      },
      surfaceOp: "append"
    },
    { type: "step/end", data: { turn, step: 1 } },
    { type: "step/start", data: { turn, step: 2 } },
    {
      type: "assistant/message",
      data: {
        turn,
        step: 2,
        message: { role: "assistant", content: [{ type: "text", text: answer }], source: MODEL, id: `a${turn}.2` },
        usage
      },
      surfaceOp: "append"
    },
    { type: "step/end", data: { turn, step: 2 } },
    { type: "turn/end", data: { turn, reason: { kind: "completed" } } }
  ]
}

const dshRows: Array<Json> = [
  // seqs 0–12: turn 1 (prompt 4, tool call 5, tool/call 6, result 7, answer 10)
  ...toolTurn(1, user("u1", "List the files."), { id: "c1", name: "ls", args: "{}" }, "a.txt\nb.txt", "Two files."),
  // seqs 13–25: turn 2 (prompt 17, tool call 18, result 20, answer 23)
  ...toolTurn(2, user("u2", "Read a.txt."), { id: "c2", name: "read", args: "{\"path\":\"a.txt\"}" }, "hello", "It says hello."),
  // seqs 26–28: turn 3 claims its prompt, then compacts before its first step
  { type: "agent/inbox/spliced", data: { target: "next-turn", start: 0, inserted: [user("u3", "And b.txt?")] } },
  { type: "turn/start", data: { turn: 3 } },
  { type: "agent/inbox/spliced", data: { target: "next-turn", start: 0, removedCount: 1, inserted: [] } },
  // seqs 29–32: the bracket; the checkpoint (31) replaces the surface from seq 4 through seq 10
  { type: "compaction/start", data: { compactionId: "cmp-1", turn: 3 } },
  {
    type: "compaction/summary",
    data: {
      compactionId: "cmp-1",
      summary: "The user listed the files: a.txt and b.txt.",
      shadowedRange: { start: 4, end: 10 },
      shadowedSeqs: [4, 5, 7, 10],
      shadowedTokenCount: 41,
      provider: "deepseek-official",
      model: "deepseek-v4-flash",
      usage: { inputTokens: 60, outputTokens: 12 }
    }
  },
  { type: "user/message", data: checkpoint, sourceEventSeqs: [4, 5, 7, 10], surfaceOp: { op: "replace", start: 4, end: 10 } },
  { type: "compaction/end", data: { compactionId: "cmp-1", turn: 3 } },
  // seqs 33–37: turn 3's step
  { type: "step/start", data: { turn: 3, step: 1 } },
  { type: "user/message", data: user("u3", "And b.txt?"), surfaceOp: "append" },
  {
    type: "assistant/message",
    data: {
      turn: 3,
      step: 1,
      message: { role: "assistant", content: [{ type: "text", text: "b.txt is empty." }], source: MODEL, id: "a3.1" },
      usage: { inputTokens: 300, outputTokens: 10 }
    },
    surfaceOp: "append"
  },
  { type: "step/end", data: { turn: 3, step: 1 } },
  { type: "turn/end", data: { turn: 3, reason: { kind: "completed" } } }
].map((row, seq) => ({ ...row, seq, time: 1_783_000_000_000 + seq }))

const dshText = [
  JSON.stringify({ type: "session", version: 0, id: DSH_ID, createdAt: 1_783_000_000_000, cwd: "/w", delegationDepth: 0 }),
  ...dshRows.map((row) => JSON.stringify(row))
].join("\n") + "\n"

/** The message a raw row puts on the surface. */
const rowMessage = (seq: number): Json => {
  const row = dshRows[seq]!
  return row.type === "user/message" ? row.data : row.data.message
}

/** DSH's history after the compaction: the checkpoint in place of turn 1, then turns 2 and 3. */
const DSH_HISTORY = ["k1", "u2", "a2.1", "r2", "a2.2", "u3", "a3.1"]
const DSH_SURFACE_SEQS = [31, 17, 18, 20, 23, 34, 35]

const writeDsh = (dir: string): string => {
  const path = Path.join(dir, `${DSH_ID}.jsonl`)
  NodeFs.writeFileSync(path, dshText)
  return path
}

const readLog = (path: string) => SessionStore.readFile(path)

describe("A DSH v0 log with a compaction (hand-built from DSH's shapes)", () => {
  it.scoped("History.derive gives the checkpoint in place of the range it replaces, then the later turns", () =>
    Effect.gen(function*() {
      const { events: log, header } = yield* readLog(writeDsh(yield* tmpDir))
      expect(header.version).toBe(0)
      expect(log.map((e) => e.seq)).toEqual(dshRows.map((_, i) => i))
      // the rows the seqs of the test name
      expect([4, 5, 7, 10, 31].map((s) => rowMessage(s).id)).toEqual(["u1", "a1.1", "r1", "a1.2", "k1"])
      const history = History.derive(log, { header })
      expect(history.map((m) => m.id)).toEqual(DSH_HISTORY)
      expect(history).toEqual(DSH_SURFACE_SEQS.map(rowMessage))
      expect(History.surface(log, { header }).map((e) => e.seq)).toEqual(DSH_SURFACE_SEQS)
      // the replaced range held turn 1's tool call and its result: no call is left without its result
      expect(rowMessage(5).content[0]).toMatchObject({ type: "tool-call", id: "c1" })
      expect(history.flatMap((m) => m.content.filter((b) => b.type === "tool-call").map((b) => b.id))).toEqual(["c2"])
      expect(history.flatMap((m) => m.content.filter((b) => b.type === "tool-result").map((b) => b.toolCallId))).toEqual([
        "c2"
      ])
      // Before the bracket the history is the two turns, uncompacted.
      expect(History.derive(log.slice(0, 31), { header }).map((m) => m.id)).toEqual([
        "u1",
        "a1.1",
        "r1",
        "a1.2",
        "u2",
        "a2.1",
        "r2",
        "a2.2"
      ])
      // Read by our rules instead, the bracket (no outcome: not "compacted") would keep nothing:
      // the flavour is what makes DSH's checkpoint apply.
      expect(History.derive(log, { dsh: false }).map((m) => m.id)).toEqual([
        "u1",
        "a1.1",
        "r1",
        "a1.2",
        "u2",
        "a2.1",
        "r2",
        "a2.2",
        "u3",
        "a3.1"
      ])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("Invariant.check with DSH's rules finds nothing", () =>
    Effect.gen(function*() {
      const { events: log, header } = yield* readLog(writeDsh(yield* tmpDir))
      expect(Invariant.check(log, { header })).toEqual([])
      expect(Invariant.check(log, { dsh: true })).toEqual([])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("Agent.resume refuses it (DSH v0 logs are read, never appended to) and leaves the file as it was", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const path = writeDsh(dir)
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

  it.scoped("agent-loop transcript (text and --json) and check read it (exit 0)", () =>
    Effect.gen(function*() {
      const path = writeDsh(yield* tmpDir)
      const bin = Path.resolve("dist/cli/bin.js")
      for (const argv of [["transcript", path], ["transcript", path, "--json"], ["check", path]]) {
        const r = spawnSync(process.execPath, [bin, ...argv], { encoding: "utf8", timeout: 20_000 })
        expect([argv.join(" "), r.status, r.stderr]).toEqual([argv.join(" "), 0, ""])
        expect(r.stdout.length).toBeGreaterThan(0)
      }
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})

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
