/**
 * Agent.resume and crash repair (§10): the synthetic closers of an open turn, in call
 * order, written before anything else; state rebuilt from the log; idempotence; turn numbering;
 * continuePending; a torn JSONL tail.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import * as NodeFs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as Delivery from "../src/Delivery.js"
import * as History from "../src/History.js"
import * as IdGenerator from "../src/IdGenerator.js"
import { repairDrafts } from "../src/internal/repair.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { EventDraft, SessionEvent } from "../src/SessionEvent.js"
import { SessionLogError } from "../src/SessionLog.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Tool from "../src/Tool.js"
import { advance, brief, layerTracked } from "./utils/agent.js"
import {
  assistant,
  claim,
  compactionEnd,
  compactionStart,
  entered,
  events as seqd,
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

const quick = Tool.make({
  name: "quick",
  description: "",
  parameters: Schema.Struct({}),
  execute: () => Effect.succeed({ content: "done" })
})
const hang = Tool.make({ name: "hang", description: "", parameters: Schema.Struct({}), execute: () => Effect.never })

const batch = {
  toolCalls: [{ id: "c1", name: "quick", arguments: {} }, { id: "c2", name: "hang", arguments: {} }, {
    id: "c3",
    name: "quick",
    arguments: {}
  }]
}

/** Runs a session until it stalls, then copies its log into a new session: the "crashed" one. */
const crashedCopy = (model: Model.ModelService, cut: (events: ReadonlyArray<SessionEvent>) => ReadonlyArray<SessionEvent>) =>
  Effect.gen(function*() {
    const store = yield* SessionStore.SessionStore
    const events = yield* Effect.scoped(Effect.gen(function*() {
      const agent = yield* Agent.make({ tools: [quick, hang], toolConcurrency: 1 })
      yield* agent.followup("go")
      yield* advance(10)
      return cut(agent.log.events().slice())
    })).pipe(Effect.provideService(Model.Model, model))
    const copy = yield* store.create({ id: "crashed" })
    yield* copy.append(events.map((e) => ({ type: e.type, data: e.data })))
    return copy
  })

const layers = Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layerSeeded(5), layerTracked)

describe("Agent.resume (§10)", () => {
  it.effect("a log in which a turn starts while another is open is refused, naming the line; nothing is appended", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore.SessionStore
      const log = yield* store.create({ id: "nested" })
      yield* log.append([
        { type: "turn/start", data: { turn: 1 } },
        { type: "turn/start", data: { turn: 2 } },
        { type: "turn/end", data: { turn: 2, reason: { kind: "completed" } } }
      ])
      const error = yield* Effect.flip(Effect.scoped(Agent.resume("nested")))
      expect(error).toMatchObject({
        _tag: "SessionLogError",
        line: 3,
        message: "session \"nested\": turn 2 starts at seq 1 while turn 1 is open (written by an older version after a " +
          "failed append); the log cannot be repaired by appending"
      })
      expect(log.events().length).toBe(3)
    }).pipe(Effect.provide(Layer.merge(layers, Model.layer(ScriptedModel.make([]))))))

  it.scoped("an open tool step gets its closers in call order; state is rebuilt; a second resume appends nothing", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make([batch, { text: "after" }])
      const copy = yield* crashedCopy(model, (events) => events)
      const before = copy.events().length
      // The crash: c1 done, c2 running (its tool/call durable), c3 waiting for a slot.
      expect(brief(copy.events()).slice(-3)).toEqual(["tool/call c1 quick", "tool/call c2 hang", "tool/result c1"])
      const agent = yield* Agent.resume("crashed", { tools: [quick, hang] }).pipe(Effect.provideService(Model.Model, model))
      const events = agent.log.events()
      expect(brief(events.slice(before))).toEqual([
        "tool/result c2 TOOL_OUTCOME_UNKNOWN",
        "tool/call c3 quick",
        "tool/result c3 TOOL_NOT_STARTED",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      // Repair events take the time of the event before them (§3.1).
      expect(new Set(events.slice(before - 1).map((e) => e.time)).size).toBe(1)
      expect(Invariant.check(events)).toEqual([])
      expect(yield* agent.status).toBe("idle")
      // The prompt was entered in turn 1; the history holds every result.
      const history = yield* agent.history
      expect(history.map((m) => m.role)).toEqual(["user", "assistant", "user", "user", "user"])
      // Turn numbering continues; ids stay unique.
      const next = yield* agent.followup("again")
      yield* advance(10)
      expect(yield* next.outcome).toEqual({ _tag: "Entered", turn: 2, step: 1 })
      expect(Invariant.check(agent.log.events())).toEqual([])
      // Ids from before the crash stay used.
      const used = agent.log.events().find((e) => e.type === "user/message")!.data as any
      expect((yield* Effect.flip(agent.followup({ ...used })))._tag).toBe("DuplicateMessageId")
    }).pipe(Effect.provide(layers)))

  it.scoped("resuming a repaired log appends nothing and gives the same state", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make([batch])
      yield* crashedCopy(model, (events) => events)
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const a = yield* Agent.resume("crashed", { tools: [quick, hang] })
        return { events: a.log.events().length, history: yield* a.history, inbox: yield* a.inbox }
      })).pipe(Effect.provideService(Model.Model, model))
      // Disposal of an idle agent with an empty inbox logs nothing either.
      const second = yield* Effect.scoped(Effect.gen(function*() {
        const a = yield* Agent.resume("crashed", { tools: [quick, hang] })
        return { events: a.log.events().length, history: yield* a.history, inbox: yield* a.inbox }
      })).pipe(Effect.provideService(Model.Model, model))
      expect(second).toEqual(first)
    }).pipe(Effect.provide(layers)))

  it.scoped("a crash between the claim and the step closes the turn interrupted; the claimed prompt is Dropped interrupted", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make([{ text: "never" }])
      const copy = yield* crashedCopy(model, (events) => events.slice(0, events.findIndex((e) => e.type === "step/start")))
      const prompt = (copy.events()[0]!.data as any).inserted[0].id
      const agent = yield* Agent.resume("crashed").pipe(Effect.provideService(Model.Model, model))
      expect(brief(agent.log.events())).toEqual([
        "splice next-turn 0 +[go]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      expect(Delivery.fateOf(agent.log.events(), prompt)).toEqual({ _tag: "Dropped", reason: "interrupted" })
      expect(Invariant.check(agent.log.events())).toEqual([])
    }).pipe(Effect.provide(layers)))

  it.scoped("pending followups wait after resume unless continuePending", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make([{ text: "one" }, { text: "two" }], { loop: true })
      const store = yield* SessionStore.SessionStore
      // A log whose only events are two queued followups (the process died before the run).
      const events = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make()
        yield* agent.followup("first")
        yield* agent.followup("second")
        return agent.log.events().filter((e) =>
          e.type === "agent/inbox/spliced" && (e.data as any).target === "next-turn" && (e.data as any).inserted.length > 0
        )
      })).pipe(Effect.provideService(Model.Model, model))
      for (const id of ["idle", "runs"]) {
        const log = yield* store.create({ id })
        yield* log.append(events.map((e) => ({ type: e.type, data: e.data })))
      }
      const idle = yield* Agent.resume("idle").pipe(Effect.provideService(Model.Model, model))
      yield* advance(10)
      expect(yield* idle.status).toBe("idle")
      expect((yield* idle.inbox).nextTurn.map((m) => (m.content[0] as any).text)).toEqual(["first", "second"])
      const runs = yield* Agent.resume("runs", { continuePending: true }).pipe(Effect.provideService(Model.Model, model))
      yield* advance(10)
      expect(brief(runs.log.events()).filter((e) => e.startsWith("turn/end"))).toEqual([
        "turn/end 1 completed",
        "turn/end 2 completed"
      ])
      expect(Invariant.check(runs.log.events())).toEqual([])
    }).pipe(Effect.provide(layers)))

  it.scoped("one writer per session: a live agent's session is refused by resume and repair until it is disposed", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make([{ text: "one" }, { text: "two" }])
      const scope = yield* Scope.make()
      const live = yield* Agent.make({ sessionId: "live" }).pipe(Effect.provideService(Model.Model, model), Scope.extend(scope))
      yield* live.followup("hi")
      yield* advance(10)
      const before = live.log.events().length
      const message = "session \"live\" is in use by a live agent of this process: dispose it before resuming or repairing"
      const resumed = yield* Effect.flip(Agent.resume("live").pipe(Effect.provideService(Model.Model, model)))
      expect([resumed._tag, resumed.message]).toEqual(["SessionStoreError", message])
      const repaired = yield* Effect.flip(Agent.repair("live"))
      expect([repaired._tag, repaired.message]).toEqual(["SessionStoreError", message])
      expect(live.log.events().length).toBe(before)
      yield* Scope.close(scope, Exit.void)
      const again = yield* Agent.resume("live").pipe(Effect.provideService(Model.Model, model))
      expect(again.log.events().at(-1)!.type).toBe("session/end-seed")
      expect(Invariant.check(again.log.events())).toEqual([])
    }).pipe(Effect.provide(layers)))

  it.scoped("a generator restarted with the same seed gives the repair and the resumed agent no id the log holds", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make([batch, { text: "after" }, { text: "again" }])
      const seeded = IdGenerator.layerSeeded(1)
      const copy = yield* crashedCopy(model, (events) => events).pipe(Effect.provide(seeded))
      const before = copy.events().length
      // The same seed again, as after a restart.
      const agent = yield* Agent.resume("crashed", { tools: [quick, hang] }).pipe(
        Effect.provideService(Model.Model, model),
        Effect.provide(seeded)
      )
      yield* agent.followup("again")
      yield* advance(10)
      const events = agent.log.events()
      expect(events.length).toBeGreaterThan(before + 6)
      const ids = events.flatMap((e): ReadonlyArray<string> => {
        const data = e.data as any
        if (e.type === "user/message") return [data.id]
        if (e.type === "assistant/message" || e.type === "tool/result") return [data.message.id]
        return []
      })
      expect(new Set(ids).size).toBe(ids.length)
      expect(Invariant.check(events)).toEqual([])
    }).pipe(Effect.provide(Layer.merge(SessionStore.layerMemory, layerTracked))))

  it.scoped("a DSH v0 log is refused (SessionStoreError) and left unchanged", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const fixture = Path.resolve(process.cwd(), "../shared/fixtures/dsh/acp__text-turn__session.jsonl")
      const bytes = NodeFs.readFileSync(fixture)
      const id = JSON.parse(bytes.toString("utf8").split("\n")[0]!).id as string
      NodeFs.writeFileSync(Path.join(dir, `${id}.jsonl`), bytes)
      const jsonl = SessionStore.layerJsonl({ directory: dir })
      const repaired = yield* Effect.flip(Agent.repair(id).pipe(Effect.provide(jsonl), Effect.scoped))
      expect(repaired).toMatchObject({ _tag: "SessionStoreError", message: expect.stringContaining("DSH v0 log") })
      const resumed = yield* Effect.flip(
        Agent.resume(id).pipe(Effect.provide(Layer.mergeAll(jsonl, Model.layer(ScriptedModel.make([])))), Effect.scoped)
      )
      expect(resumed._tag).toBe("SessionStoreError")
      expect(NodeFs.readFileSync(Path.join(dir, `${id}.jsonl`))).toEqual(bytes)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("JSONL: a torn tail is cut, the closers are written, a new store reads the same log and resumes with nothing to add", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const model = ScriptedModel.make([batch])
      const jsonl = SessionStore.layerJsonl({ directory: dir })
      const path = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [quick, hang], toolConcurrency: 1, sessionId: "s" })
        yield* agent.followup("go")
        yield* advance(10)
        return agent.log.path!
      })).pipe(Effect.provide(Layer.mergeAll(jsonl, IdGenerator.layerSeeded(9), Model.layer(model))))
      // The scope disposed the agent (turn aborted); write a crash-like log instead: cut the
      // disposal's events and add a torn line.
      const lines = NodeFs.readFileSync(path, "utf8").split("\n").filter((l) => l.length > 0)
      const keep = lines.slice(0, lines.findIndex((l) => l.includes("\"tool/result\"") && l.includes("Aborted")) >>> 0)
      const crashed = keep.filter((l) =>
        !l.includes("ABORTED") && !l.includes("TOOL_ABORTED") && !l.includes("\"turn/end\"") && !l.includes("\"step/end\"")
      )
      NodeFs.writeFileSync(path, crashed.join("\n") + "\n{\"type\":\"tool/res")
      const repaired = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("s", { tools: [quick, hang] })
        return agent.log.events().slice()
      })).pipe(
        Effect.provide(
          Layer.mergeAll(SessionStore.layerJsonl({ directory: dir }), IdGenerator.layerSeeded(10), Model.layer(model))
        )
      )
      expect(brief(repaired).slice(-6)).toEqual([
        "tool/result c2 TOOL_OUTCOME_UNKNOWN",
        "tool/call c3 quick",
        "tool/result c3 TOOL_NOT_STARTED",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      expect(Invariant.check(repaired)).toEqual([])
      const read = yield* SessionStore.readFile(path)
      expect(read.events).toEqual(repaired)
      expect(read.warnings).toEqual([])
      const again = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("s", { tools: [quick, hang] })
        return agent.log.events().length
      })).pipe(
        Effect.provide(
          Layer.mergeAll(SessionStore.layerJsonl({ directory: dir }), IdGenerator.layerSeeded(11), Model.layer(model))
        )
      )
      expect(again).toBe(repaired.length)
    }).pipe(Effect.provide(Layer.merge(NodeFileSystem.layer, layerTracked))))

  it.scoped("§6.2: resumed without instructions or settings, the agent keeps those of the log's last request/header", () => {
    const model = ScriptedModel.make([{ text: "one" }, { text: "two" }])
    return Effect.gen(function*() {
      yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make({ sessionId: "keep", instructions: "Be brief.", settings: { temperature: 0 } })
        yield* agent.followup("first")
        yield* agent.awaitIdle
      }))
      const events = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("keep")
        yield* agent.followup("second")
        yield* agent.awaitIdle
        return agent.log.events().slice()
      }))
      expect(events.filter((e) => e.type === "request/header")).toHaveLength(1)
      expect(model.requests.map((r) => r.instructions)).toEqual(["Be brief.", "Be brief."])
      expect(Invariant.check(events)).toEqual([])
    }).pipe(Effect.provide(Layer.mergeAll(layers, Model.layer(model))))
  })

  it.scoped("§6.2: resumed with new instructions, tools or settings, a new request/header precedes the next request; the log holds what the model saw", () => {
    const model = ScriptedModel.make([{ text: "one" }, { text: "two" }, { text: "three" }, { text: "four" }])
    return Effect.gen(function*() {
      const headers = (events: ReadonlyArray<SessionEvent>) =>
        events.filter((e) => e.type === "request/header").map((e) => {
          const d = e.data as any
          return {
            turn: d.turn,
            step: d.step,
            instructions: d.instructions,
            tools: d.tools.map((t: any) => t.name),
            settings: d.settings
          }
        })
      // Turn 1 on the first configuration.
      yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make({ sessionId: "cfg", instructions: "Be brief." })
        yield* agent.followup("first")
        yield* agent.awaitIdle
      }))
      // Resumed with the same configuration: no new header.
      yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("cfg", { instructions: "Be brief." })
        yield* agent.followup("second")
        yield* agent.awaitIdle
      }))
      // Resumed with new instructions, then with a tool and settings too.
      yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("cfg", { instructions: "Answer in French." })
        yield* agent.followup("third")
        yield* agent.awaitIdle
      }))
      const events = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("cfg", {
          instructions: "Answer in French.",
          tools: [quick],
          settings: { temperature: 0 }
        })
        yield* agent.followup("fourth")
        yield* agent.awaitIdle
        return agent.log.events().slice()
      }))
      expect(headers(events)).toEqual([
        { turn: 1, step: 1, instructions: "Be brief.", tools: [], settings: {} },
        { turn: 3, step: 1, instructions: "Answer in French.", tools: [], settings: {} },
        { turn: 4, step: 1, instructions: "Answer in French.", tools: ["quick"], settings: { temperature: 0 } }
      ])
      // Each header comes right before its step's request: after step/start and the prompt.
      const at = events.findIndex((e) => e.type === "request/header" && (e.data as any).turn === 3)
      expect(brief(events.slice(at - 2, at + 2))).toEqual(["step/start 3.1", "user third", "request/header", "assistant three"])
      // What the model was sent is what the log holds: instructions of the last header before
      // each request, and the history derived from the log up to it.
      expect(model.requests.map((r) => r.instructions)).toEqual([
        "Be brief.",
        "Be brief.",
        "Answer in French.",
        "Answer in French."
      ])
      expect(model.requests.map((r) => r.tools.map((t) => t.name))).toEqual([[], [], [], ["quick"]])
      const lastRequest = model.requests[3]!
      const upTo = events.slice(0, events.findIndex((e) => e.type === "assistant/message" && (e.data as any).turn === 4))
      expect(lastRequest.messages).toEqual(History.derive(upTo))
      expect(Invariant.check(events)).toEqual([])
    }).pipe(Effect.provide(Layer.mergeAll(layers, Model.layer(model))))
  })
})

describe("a log repair cannot make valid (§10, §12)", () => {
  /** A JSONL session "s" of `turns` completed turns (scripted answers), its agent released. */
  const sessionOf = (dir: string, turns: number) =>
    Effect.scoped(Effect.gen(function*() {
      const agent = yield* Agent.make({ sessionId: "s" })
      for (let i = 1; i <= turns; i++) {
        yield* agent.followup(`prompt ${i}`)
        yield* advance(10)
      }
      const path = agent.log.path!
      yield* agent.release
      return path
    })).pipe(
      Effect.provide(
        Layer.mergeAll(
          SessionStore.layerJsonl({ directory: dir }),
          IdGenerator.layerSeeded(21),
          Model.layer(ScriptedModel.make([{ text: "one" }, { text: "two" }, { text: "three" }]))
        )
      )
    )

  /** The log with `from` replaced by `to` on the line of event `seq` (line seq + 2). */
  const edit = (path: string, seq: number, from: string, to: string) => {
    const lines = NodeFs.readFileSync(path, "utf8").split("\n")
    expect(lines[seq + 1]).toContain(from)
    lines[seq + 1] = lines[seq + 1]!.replace(from, to)
    NodeFs.writeFileSync(path, lines.join("\n"))
  }

  it.scoped("JSONL: a turn/start whose turn was edited is refused by resume and repair, naming rule, seq and line; nothing is appended", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir
      const path = yield* sessionOf(dir, 3)
      const events = (yield* SessionStore.readFile(path)).events
      const third = events.findIndex((e) => e.type === "turn/start" && (e.data as any).turn === 3)
      expect(third).toBe(18)
      edit(path, third, "{\"turn\":3}", "{\"turn\":7}")
      const tampered = NodeFs.readFileSync(path)
      const read = yield* SessionStore.readFile(path)
      expect(Invariant.check(read.events, { header: read.header })[0]).toEqual({
        seq: 18,
        rule: 1,
        message: "turn/start of turn 7 where turn 3 was expected"
      })
      const message = "session \"s\": seq 18 (line 20) breaks invariant 1 (§12): turn/start of turn 7 " +
        "where turn 3 was expected; repair cannot fix that by appending, so the session is not resumed " +
        "(agent-loop check lists every violation)"
      const layer = Layer.mergeAll(
        SessionStore.layerJsonl({ directory: dir }),
        Model.layer(ScriptedModel.make([{ text: "four" }]))
      )
      const resumed = yield* Effect.flip(Effect.scoped(Agent.resume("s", { continuePending: true })).pipe(Effect.provide(layer)))
      expect(resumed).toBeInstanceOf(SessionLogError)
      expect({ ...resumed, message: resumed.message }).toEqual({ _tag: "SessionLogError", message, path, line: 20 })
      const repaired = yield* Effect.flip(Agent.repair("s").pipe(Effect.provide(layer), Effect.scoped))
      expect([repaired._tag, repaired.message]).toEqual(["SessionLogError", message])
      expect(NodeFs.readFileSync(path)).toEqual(tampered)
    }).pipe(Effect.provide(Layer.merge(NodeFileSystem.layer, layerTracked))))

  it.scoped("a crashed turn whose step number was edited: the closers would close it, the edit is still refused", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore.SessionStore
      const log = yield* store.create({ id: "edited" })
      yield* log.append([
        followup(msg("m1", "go"), 0),
        turnStart(1),
        claim("next-turn", 1),
        stepStart(1, 2),
        entered(msg("m1", "go"))
      ])
      expect(repairDrafts(log.events(), () => "r").map((d) => d.type)).toEqual(["step/end", "turn/end", "session/end-seed"])
      const error = yield* Effect.flip(Effect.scoped(Agent.resume("edited")))
      expect([error._tag, error.message, (error as SessionLogError).line]).toEqual([
        "SessionLogError",
        "session \"edited\": seq 3 (line 5) breaks invariant 1 (§12): step/start of step 2 where step 1 " +
        "was expected; repair cannot fix that by appending, so the session is not resumed (agent-loop check lists every violation)",
        5
      ])
      expect(log.events()).toHaveLength(5)
    }).pipe(Effect.provide(Layer.merge(layers, Model.layer(ScriptedModel.make([]))))))
})

describe("crash repair of a compaction bracket (§17)", () => {
  const turn1 = [
    followup(msg("u1", "one")),
    turnStart(1),
    claim("next-turn", 1),
    stepStart(1, 1),
    entered(msg("u1", "one")),
    assistant(1, 1, "ok"),
    stepEnd(1, 1),
    turnEnd(1)
  ]
  /** The drafts, then the repaired log: valid, and a second repair needs nothing. */
  const repaired = (cut: ReadonlyArray<EventDraft>) => {
    let n = 0
    const drafts = repairDrafts(seqd(cut), () => `fix${n++}`)
    const log = seqd(cut, drafts)
    expect(Invariant.check(log)).toEqual([])
    expect(repairDrafts(log, () => "again")).toEqual([])
    return drafts
  }

  it("an open pressure bracket at a turn's start (its compaction/start only): compaction/end interrupted, then the turn's closers", () => {
    const cut = [...turn1, followup(msg("u2", "two")), turnStart(2), claim("next-turn", 1), compactionStart("k1", 2, "pressure")]
    expect(repaired(cut)).toEqual([
      { type: "compaction/end", data: { compactionId: "k1", turn: 2, outcome: "interrupted" } },
      { type: "turn/end", data: { turn: 2, reason: { kind: "interrupted" } } },
      { type: "session/end-seed", data: {} }
    ])
    // A bracket that ended before the crash gets no second end.
    expect(repaired([...cut, compactionEnd("k1", 2), stepStart(2, 1), entered(msg("u2", "two"))])).toEqual([
      { type: "step/end", data: { turn: 2, step: 1 } },
      { type: "turn/end", data: { turn: 2, reason: { kind: "interrupted" } } },
      { type: "session/end-seed", data: {} }
    ])
  })

  it("an open overflow bracket inside a step, after a tool step: compaction/end, step/end, turn/end, session/end-seed", () => {
    const cut = [
      followup(msg("u1", "one")),
      turnStart(1),
      claim("next-turn", 1),
      stepStart(1, 1),
      entered(msg("u1", "one")),
      assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "quick" }] }),
      toolCall(1, 1, "c1", "quick"),
      toolResult(1, 1, "c1", "done"),
      stepEnd(1, 1),
      stepStart(1, 2),
      compactionStart("k1", 1, "overflow")
    ]
    expect(repaired(cut)).toEqual([
      { type: "compaction/end", data: { compactionId: "k1", turn: 1, outcome: "interrupted" } },
      { type: "step/end", data: { turn: 1, step: 2 } },
      { type: "turn/end", data: { turn: 1, reason: { kind: "interrupted" } } },
      { type: "session/end-seed", data: {} }
    ])
  })

  it("an open manual bracket between turns: compaction/end (turn null), then session/end-seed", () => {
    expect(repaired([...turn1, compactionStart("k1", null, "manual"), followup(msg("u2", "two"))])).toEqual([
      { type: "compaction/end", data: { compactionId: "k1", turn: null, outcome: "interrupted" } },
      { type: "session/end-seed", data: {} }
    ])
  })

  it.scoped("Agent.resume closes an open manual bracket; the history stays as it was; a second resume appends nothing", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore.SessionStore
      const log = yield* store.create({ id: "compacting" })
      yield* log.append([...turn1, compactionStart("k1", null, "manual")])
      const before = log.events().slice()
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("compacting")
        const events = agent.log.events()
        expect(events.slice(before.length).map((e) => [e.type, e.data])).toEqual([
          ["compaction/end", { compactionId: "k1", turn: null, outcome: "interrupted" }],
          ["session/end-seed", {}]
        ])
        expect(Invariant.check(events)).toEqual([])
        expect(yield* agent.history).toEqual(History.derive(before))
        return events.length
      }))
      const again = yield* Effect.scoped(Effect.map(Agent.resume("compacting"), (agent) => agent.log.events().length))
      expect(again).toBe(first)
    }).pipe(Effect.provide(Layer.merge(layers, Model.layer(ScriptedModel.make([]))))))

  it.scoped("a bracket left open before the log's end (turns after it) is a SessionLogError naming its line; nothing is appended", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore.SessionStore
      const log = yield* store.create({ id: "unclosed" })
      yield* log.append([compactionStart("k1", null, "manual"), ...turn1])
      const before = log.events().length
      const error = yield* Effect.flip(Effect.scoped(Agent.resume("unclosed")))
      expect([error._tag, error.message]).toEqual([
        "SessionLogError",
        "session \"unclosed\": compaction k1 starts at seq 0 and is not ended before turn/start at seq 2; " +
        "the log cannot be repaired by appending"
      ])
      expect((yield* store.read("unclosed")).events.length).toBe(before)
    }).pipe(Effect.provide(Layer.merge(layers, Model.layer(ScriptedModel.make([]))))))
})
