/**
 * Crash repair of a parent whose open turn holds a sub-agent call (§27 rule 16, §10): the call's
 * `subagent/start` has no end and no result, and its child's log alone decides what repair
 * appends. The crashed logs are taken from real runs (a snapshot of every session of the store
 * when the run stalls, or a run cut after the parent's `subagent/start`) and copied into a fresh
 * store, which `Agent.repair` / `Agent.resume` then repair:
 * (a) the child's task ended: the parent gets the `subagent/end` and the result the tool gave in
 * the run without the crash; (b) the child is mid-turn, waits for a person, or never started its
 * task: the child is repaired first (its open questions decided `unavailable`), the parent gets
 * `unfinished_at_resume` and `TOOL_OUTCOME_UNKNOWN`; (c) no child session: the same, saying it
 * never started. Also: grandchildren (the rule applied when the child is repaired), a parent
 * step waiting for a person beside the call, a live child (refused), idempotence, a repair cut
 * after the parent's `subagent/end`, a child repaired before its parent.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as Agent from "../src/Agent.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent, SessionHeader } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Subagent from "../src/Subagent.js"
import * as Tool from "../src/Tool.js"
import { advance, brief, layerTracked } from "./utils/agent.js"

const call = (id: string, prompt: string) => ({ id, name: "subagent", arguments: { prompt, description: "look it up" } })

const hang = Tool.make({ name: "hang", description: "", parameters: Schema.Struct({}), execute: () => Effect.never })
const guarded = Tool.make({
  name: "guarded",
  description: "",
  parameters: Schema.Struct({}),
  approval: "always",
  execute: () => Effect.succeed({ content: "done" })
})

interface Stored {
  readonly header: SessionHeader
  readonly events: ReadonlyArray<SessionEvent>
}

const dataOf = (events: ReadonlyArray<SessionEvent>, type: string): Array<any> =>
  events.filter((e) => e.type === type).map((e) => e.data)

const ZERO = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 }

/**
 * Runs a parent with `tools` on a memory store until it is idle or stalls, and returns every
 * session of the store as it was then (the parent first, then its descendants in creation order).
 */
const runAndSnapshot = (tools: ReadonlyArray<Tool.Tool<any>>, parentModel: Model.ModelService) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* SessionStore.SessionStore
    const agent = yield* Agent.make({ tools })
    yield* agent.followup("go")
    yield* advance(10)
    const sessions: Array<Stored> = []
    for (const id of yield* store.list) {
      const contents = yield* store.read(id)
      sessions.push({ header: contents.header, events: contents.events.slice() })
    }
    const parent = sessions.find((s) => s.header.id === agent.id)!
    const children = sessions.filter((s) => s.header.id !== agent.id).sort((a, b) =>
      a.header.createdAt - b.header.createdAt || (a.header.delegationDepth ?? 0) - (b.header.delegationDepth ?? 0)
    )
    return [parent, ...children]
  })).pipe(Effect.provide(Layer.mergeAll(SessionStore.layerMemory, IdGenerator.layerSeeded(11), Model.layer(parentModel))))

/** Copies sessions (header lineage and events) into a fresh memory store: the crashed process's files. */
const copyAll = (sessions: ReadonlyArray<Stored>) =>
  Effect.gen(function*() {
    const store = yield* SessionStore.makeMemory
    for (const { events, header } of sessions) {
      const log = yield* store.create({
        id: header.id,
        parentSession: header.parentSession,
        parentCallId: header.parentCallId as string | undefined,
        origin: header.origin,
        delegationDepth: header.delegationDepth
      })
      if (events.length > 0) yield* log.append(events.map((e) => ({ type: e.type, data: e.data })))
    }
    return store
  })

/** Repairs `id` in `store` (`Agent.repair`, seeded ids) and reads every session back. */
const repairIn = (store: SessionStore.SessionStoreService, id: string) =>
  Effect.gen(function*() {
    const appended = yield* Agent.repair(id)
    const logs = new Map<string, Stored>()
    for (const s of yield* store.list) {
      const contents = yield* store.read(s)
      logs.set(s, { header: contents.header, events: contents.events })
    }
    return { appended, logs }
  }).pipe(Effect.provideService(SessionStore.SessionStore, store), Effect.provide(IdGenerator.layerSeeded(99)))

/** The parent's log up to and including its `subagent/start`: a crash while the call ran. */
const untilStart = (events: ReadonlyArray<SessionEvent>) =>
  events.slice(0, events.findIndex((e) => e.type === "subagent/start") + 1)

const resultOf = (events: ReadonlyArray<SessionEvent>) => {
  const data = dataOf(events, "tool/result").at(-1)
  return { content: data.message.content[0].content, isError: data.message.content[0].isError, error: data.error }
}

const unfinishedText = (child: string) =>
  `The session stopped while this call's sub-agent (session ${child}) was working: it was interrupted by a crash ` +
  "before it finished, and its work must not be assumed complete. Check what it did before calling it again."

const expectValid = (logs: ReadonlyMap<string, Stored>) => {
  for (const { events, header } of logs.values()) expect(Invariant.check(events, { header })).toEqual([])
}

describe("crash repair of a sub-agent call (§27 rule 16)", () => {
  it.effect("(a) the child's task ended: the parent gets the subagent/end and the result of the run without the crash", () =>
    Effect.gen(function*() {
      for (
        const childModel of [
          ScriptedModel.make([{ text: "4" }]),
          ScriptedModel.make([{ error: { code: "MODEL_FAILED", message: "overloaded", retryable: false } }])
        ]
      ) {
        const [parent, child] = yield* runAndSnapshot(
          [Subagent.tool({ model: childModel })],
          ScriptedModel.make([{ toolCalls: [call("c1", "What is 2+2?")] }, { text: "It is 4." }])
        )
        const store = yield* copyAll([{ ...parent!, events: untilStart(parent!.events) }, child!])
        const { appended, logs } = yield* repairIn(store, parent!.header.id)
        expect(brief(appended)).toEqual([
          "subagent/end",
          `tool/result c1${
            child!.events.some((e) => e.type === "turn/end" && (e.data as any).reason.kind === "error") ? " TOOL_FAILED" : ""
          }`,
          "step/end 1.1",
          "turn/end 1 interrupted",
          "session/end-seed"
        ])
        // Exactly what the tool recorded and returned in the run without the crash.
        expect(dataOf(appended, "subagent/end")).toEqual(dataOf(parent!.events, "subagent/end"))
        expect(resultOf(appended)).toEqual(resultOf(untilResult(parent!.events)))
        // The child's log is not touched.
        expect(logs.get(child!.header.id)!.events.length).toBe(child!.events.length)
        expectValid(logs)
        // Repair is idempotent: nothing more, here or in the child.
        const again = yield* repairIn(store, parent!.header.id)
        expect(again.appended).toEqual([])
        expect(again.logs.get(child!.header.id)!.events.length).toBe(child!.events.length)
      }
    }).pipe(Effect.provide(layerTracked)))

  it.effect("(b) the child is mid-turn: it is repaired first, the parent's call ends unfinished_at_resume, TOOL_OUTCOME_UNKNOWN", () =>
    Effect.gen(function*() {
      const [parent, child] = yield* runAndSnapshot(
        [Subagent.tool({
          model: ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "hang", arguments: {} }] }]),
          tools: [hang]
        })],
        ScriptedModel.make([{ toolCalls: [call("c1", "wait")] }])
      )
      const childId = child!.header.id
      expect(brief(parent!.events).slice(-2)).toEqual(["tool/call c1 subagent", "subagent/start"])
      expect(brief(child!.events).slice(-1)).toEqual(["tool/call k1 hang"])
      const store = yield* copyAll([parent!, child!])
      const { appended, logs } = yield* repairIn(store, parent!.header.id)
      expect(brief(logs.get(childId)!.events.slice(child!.events.length))).toEqual([
        "tool/result k1 TOOL_OUTCOME_UNKNOWN",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      expect(brief(appended)).toEqual([
        "subagent/end",
        "tool/result c1 TOOL_OUTCOME_UNKNOWN",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      const start = dataOf(parent!.events, "subagent/start")[0]
      expect(dataOf(appended, "subagent/end")).toEqual([{
        runId: start.runId,
        provider: "spawn",
        id: childId,
        local: true,
        callId: "c1",
        stopReason: "unfinished_at_resume",
        reason: { kind: "interrupted" },
        // What the child spent (§27 rule 9): one scripted response, which reports no usage.
        usage: ZERO,
        byModel: { script: ZERO },
        unreported: 1
      }])
      expect(resultOf(appended)).toEqual({
        content: [{ type: "text", text: unfinishedText(childId) }],
        isError: true,
        error: { name: "OutcomeUnknown", code: "TOOL_OUTCOME_UNKNOWN" }
      })
      expectValid(logs)
      const again = yield* repairIn(store, parent!.header.id)
      expect(again.appended).toEqual([])
      expect(again.logs.get(childId)!.events.length).toBe(logs.get(childId)!.events.length)
    }).pipe(Effect.provide(layerTracked)))

  it.effect("(b) a child waiting for a person: its question is decided unavailable, its call DENIED, its turn closed", () =>
    Effect.gen(function*() {
      const [parent, child] = yield* runAndSnapshot(
        [Subagent.tool({
          model: ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "guarded", arguments: {} }] }]),
          tools: [guarded]
        })],
        ScriptedModel.make([{ toolCalls: [call("c1", "wait")] }])
      )
      const childId = child!.header.id
      const parentId = parent!.header.id
      const [question] = dataOf(child!.events, "approval/asked")
      const store = yield* copyAll([parent!, child!])
      const { appended, logs } = yield* repairIn(store, parentId)
      const repaired = logs.get(childId)!.events.slice(child!.events.length)
      const reason = `the sub-agent's parent call c1 (session ${parentId}) was closed after a crash: nobody is left to answer`
      expect(brief(repaired)).toEqual([
        `decided ${question.id} unavailable`,
        "tool/result k1 DENIED",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      expect(dataOf(repaired, "approval/decided")).toEqual([{ id: question.id, outcome: "unavailable", reason }])
      expect(resultOf(repaired).content).toEqual([{
        type: "text",
        text: `The call to guarded was refused: no approval was available: ${reason}`
      }])
      expect(brief(appended).slice(0, 2)).toEqual(["subagent/end", "tool/result c1 TOOL_OUTCOME_UNKNOWN"])
      expect(resultOf(appended).content).toEqual([{ type: "text", text: unfinishedText(childId) }])
      expectValid(logs)
    }).pipe(Effect.provide(layerTracked)))

  it.effect("(b) a child whose task never started, (c) no child session: unfinished_at_resume, saying which", () =>
    Effect.gen(function*() {
      const [parent, child] = yield* runAndSnapshot(
        [Subagent.tool({
          model: ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "hang", arguments: {} }] }]),
          tools: [hang]
        })],
        ScriptedModel.make([{ toolCalls: [call("c1", "wait")] }])
      )
      const childId = child!.header.id
      const start = dataOf(parent!.events, "subagent/start")[0]
      const run = { runId: start.runId, provider: "spawn", id: childId, local: true, callId: "c1" }
      // The task delivered, its turn not started.
      const queued = child!.events.slice(0, 2)
      expect(brief(queued)).toEqual(["subagent/descriptor", "splice next-turn 0 +[wait]"])
      const b = yield* repairIn(yield* copyAll([parent!, { ...child!, events: queued }]), parent!.header.id)
      expect(brief(b.logs.get(childId)!.events.slice(2))).toEqual(["session/end-seed"])
      expect(dataOf(b.appended, "subagent/end")).toEqual([{
        ...run,
        stopReason: "unfinished_at_resume",
        reason: { kind: "interrupted" },
        usage: ZERO,
        byModel: {},
        unreported: 0
      }])
      expect(resultOf(b.appended).content).toEqual([{ type: "text", text: unfinishedText(childId) }])
      expectValid(b.logs)
      // The crash came before the child's session was created.
      const c = yield* repairIn(yield* copyAll([parent!]), parent!.header.id)
      expect(c.logs.has(childId)).toBe(false)
      expect(brief(c.appended)).toEqual([
        "subagent/end",
        "tool/result c1 TOOL_OUTCOME_UNKNOWN",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      expect(dataOf(c.appended, "subagent/end")).toEqual([{ ...run, stopReason: "unfinished_at_resume" }])
      expect(resultOf(c.appended)).toEqual({
        content: [{
          type: "text",
          text: `The session stopped after this call began and before its sub-agent (session ${childId}) was created: ` +
            "the sub-agent never started, and nothing of its task was done."
        }],
        isError: true,
        error: { name: "OutcomeUnknown", code: "TOOL_OUTCOME_UNKNOWN" }
      })
      expectValid(c.logs)
    }).pipe(Effect.provide(layerTracked)))

  it.effect("a grandchild mid-turn: the rule applies when the child is repaired, from the bottom up", () =>
    Effect.gen(function*() {
      const grand = Subagent.tool({
        model: ScriptedModel.make([{ toolCalls: [{ id: "g1", name: "hang", arguments: {} }] }]),
        tools: [hang]
      })
      const [parent, child, grandchild] = yield* runAndSnapshot(
        [Subagent.tool({ model: ScriptedModel.make([{ toolCalls: [call("k1", "deeper")] }]), tools: [grand] })],
        ScriptedModel.make([{ toolCalls: [call("c1", "wait")] }])
      )
      expect(grandchild!.header.parentSession).toBe(child!.header.id)
      const store = yield* copyAll([parent!, child!, grandchild!])
      const { appended, logs } = yield* repairIn(store, parent!.header.id)
      expect(brief(logs.get(grandchild!.header.id)!.events.slice(grandchild!.events.length))).toEqual([
        "tool/result g1 TOOL_OUTCOME_UNKNOWN",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      const childRepair = logs.get(child!.header.id)!.events.slice(child!.events.length)
      expect(brief(childRepair)).toEqual([
        "subagent/end",
        "tool/result k1 TOOL_OUTCOME_UNKNOWN",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      expect(resultOf(childRepair).content).toEqual([{ type: "text", text: unfinishedText(grandchild!.header.id) }])
      expect(brief(appended).slice(0, 2)).toEqual(["subagent/end", "tool/result c1 TOOL_OUTCOME_UNKNOWN"])
      expect(resultOf(appended).content).toEqual([{ type: "text", text: unfinishedText(child!.header.id) }])
      expectValid(logs)
    }).pipe(Effect.provide(layerTracked)))

  it.effect("a parent step waiting for a person beside the call: only the subagent/end is appended; the resumed agent gives the result", () =>
    Effect.gen(function*() {
      const sub = Subagent.tool({
        model: ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "hang", arguments: {} }] }]),
        tools: [hang]
      })
      const [parent, child] = yield* runAndSnapshot(
        [sub, guarded],
        ScriptedModel.make([{ toolCalls: [call("c1", "wait"), { id: "w", name: "guarded", arguments: {} }] }])
      )
      const parentId = parent!.header.id
      const childId = child!.header.id
      const store = yield* copyAll([parent!, child!])
      const { appended, logs } = yield* repairIn(store, parentId)
      expect(brief(appended)).toEqual(["subagent/end"])
      expect(dataOf(appended, "subagent/end")[0].stopReason).toBe("unfinished_at_resume")
      expect(brief(logs.get(childId)!.events.slice(child!.events.length)).at(-2)).toBe("turn/end 1 interrupted")
      const resumed = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume(parentId, { tools: [sub, guarded] })
        expect(yield* agent.status).toBe("awaiting-approval")
        const [question] = yield* agent.pendingApprovals
        yield* agent.approve(question!.id)
        yield* advance(10)
        yield* agent.awaitIdle
        return agent.log.events().slice(parent!.events.length + 1)
      })).pipe(
        Effect.provideService(SessionStore.SessionStore, store),
        Effect.provide(Layer.merge(IdGenerator.layerSeeded(7), Model.layer(ScriptedModel.make([{ text: "ok" }]))))
      )
      expect(brief(resumed).slice(0, 4)).toEqual([
        `decided ${dataOf(parent!.events, "approval/asked")[0].id} allowed-once by person`,
        "tool/result c1 TOOL_OUTCOME_UNKNOWN",
        "tool/result w",
        "step/end 1.1"
      ])
      expect(resultOf(resumed.slice(0, 2)).content).toEqual([{ type: "text", text: unfinishedText(childId) }])
      expect(brief(resumed).at(-1)).toBe("turn/end 1 completed")
    }).pipe(Effect.provide(layerTracked)))

  it.effect("a parent released during its sub-agent's tool call and resumed in the same store: the released child is repaired, the call unfinished_at_resume", () =>
    Effect.gen(function*() {
      const sub = Subagent.tool({
        model: ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "hang", arguments: {} }] }]),
        tools: [hang]
      })
      const store = yield* SessionStore.makeMemory
      const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        effect.pipe(
          Effect.provideService(SessionStore.SessionStore, store),
          Effect.provide(
            Layer.merge(
              IdGenerator.layerSeeded(11),
              Model.layer(ScriptedModel.make([{ toolCalls: [call("c1", "wait")] }, { text: "ok" }]))
            )
          )
        )
      const released = yield* provide(Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.make({ tools: [sub] })
        yield* agent.followup("go")
        yield* advance(10)
        yield* agent.release
        return { id: agent.id, events: agent.log.events().slice() }
      })))
      const childId = dataOf(released.events, "subagent/start")[0].id
      const childBefore = (yield* store.read(childId)).events
      expect(brief(released.events).slice(-2)).toEqual(["tool/call c1 subagent", "subagent/start"])
      expect(brief(childBefore).slice(-1)).toEqual(["tool/call k1 hang"])
      const after = yield* provide(Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume(released.id, { tools: [sub] })
        return agent.log.events().slice(released.events.length)
      })))
      expect(brief(after)).toEqual([
        "subagent/end",
        "tool/result c1 TOOL_OUTCOME_UNKNOWN",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      expect(resultOf(after).content).toEqual([{ type: "text", text: unfinishedText(childId) }])
      const child = yield* store.read(childId)
      expect(brief(child.events.slice(childBefore.length))).toEqual([
        "tool/result k1 TOOL_OUTCOME_UNKNOWN",
        "step/end 1.1",
        "turn/end 1 interrupted",
        "session/end-seed"
      ])
      expect(Invariant.check(child.events, { header: child.header })).toEqual([])
    }).pipe(Effect.provide(layerTracked)))

  it.effect("a child held by a live agent is refused as any live session is; nothing is appended to the parent", () =>
    Effect.gen(function*() {
      const [parent, child] = yield* runAndSnapshot(
        [Subagent.tool({
          model: ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "hang", arguments: {} }] }]),
          tools: [hang]
        })],
        ScriptedModel.make([{ toolCalls: [call("c1", "wait")] }])
      )
      const store = yield* copyAll([parent!, child!])
      const error = yield* Effect.scoped(Effect.gen(function*() {
        yield* Agent.resume(child!.header.id)
        return yield* Effect.flip(Agent.repair(parent!.header.id))
      })).pipe(
        Effect.provideService(SessionStore.SessionStore, store),
        Effect.provide(Layer.merge(IdGenerator.layerSeeded(7), Model.layer(ScriptedModel.make([]))))
      )
      expect(error.message).toBe(
        `session "${child!.header.id}" is in use by a live agent of this process: dispose it before resuming or repairing`
      )
      expect((yield* store.read(parent!.header.id)).events.length).toBe(parent!.events.length)
    }).pipe(Effect.provide(layerTracked)))

  it.effect("a child repaired before its parent, and a repair cut after the parent's subagent/end: the same end and result", () =>
    Effect.gen(function*() {
      const [parent, child] = yield* runAndSnapshot(
        [Subagent.tool({
          model: ScriptedModel.make([{ toolCalls: [{ id: "k1", name: "hang", arguments: {} }] }]),
          tools: [hang]
        })],
        ScriptedModel.make([{ toolCalls: [call("c1", "wait")] }])
      )
      const parentId = parent!.header.id
      const childId = child!.header.id
      const whole = yield* repairIn(yield* copyAll([parent!, child!]), parentId)
      // The child repaired on its own first (a crash between the child's repair and the parent's).
      const store = yield* copyAll([parent!, child!])
      yield* repairIn(store, childId)
      const after = yield* repairIn(store, parentId)
      expect(shapes(after.appended)).toEqual(shapes(whole.appended))
      expect(shapes(after.logs.get(childId)!.events)).toEqual(shapes(whole.logs.get(childId)!.events))
      // The parent's repair cut after its subagent/end: the end alone gives the result, the child unread.
      const cut = whole.logs.get(parentId)!.events.slice(0, parent!.events.length + 1)
      expect(brief(cut).at(-1)).toBe("subagent/end")
      const rest = yield* repairIn(yield* copyAll([{ ...parent!, events: cut }]), parentId)
      expect(shapes(rest.appended)).toEqual(shapes(whole.appended.slice(1)))
    }).pipe(Effect.provide(layerTracked)))
})

/** Events as type and data, the ids of result messages left out (each repair draws its own). */
const shapes = (events: ReadonlyArray<SessionEvent>) =>
  events.map((e) =>
    e.type === "tool/result"
      ? [e.type, { ...(e.data as any), message: { ...(e.data as any).message, id: "-" } }]
      : [e.type, e.data]
  )

/** The parent's log through the sub-agent call's result. */
const untilResult = (events: ReadonlyArray<SessionEvent>) =>
  events.slice(0, events.findIndex((e) => e.type === "tool/result") + 1)
