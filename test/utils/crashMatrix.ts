/**
 * The crash-point matrix's harness (§23, §3.3, §10, §12): a scenario runs on a
 * virtual clock against a store whose appends go through a failpoint plan
 * (`test/utils/failpoints.ts`). When the plan crashes the store, the agent is dropped
 * (its scope closed: its appends are refused, as nothing of a killed process reaches the disk),
 * the store is closed (freeing its writer locks, as a dead writer's are taken over), and a new
 * store over the same files resumes the session (`Agent.resume`, repair first, with
 * `continuePending`); the rest of the scenario then runs to its end. A fault that is not a crash
 * (a full disk) lets the process live on; if the agent stopped because it could not close its
 * turn, the session is resumed the same way.
 *
 * What a cell checks is in `crashMatrixChecks.ts` (`checkCell`). Actions that were not applied
 * before the crash are applied after the resume at their time (at once when it has passed),
 * except `cancel`: the turn it was aimed at died with the process. The approval scenarios (§26)
 * have an approver instead of timed decisions: a person who decides each question a fixed time
 * after it is open, in the running agent or, when the crash left it open, in the resumed one.
 * The sub-agent scenario (§27) runs a child agent on the same store, through the same failpoints
 * (its appends are counted with the parent's); what the crash left of each child is read too.
 */
import { Effect, Exit, Fiber, Layer, Logger, LogLevel, Schema, Scope } from "effect"
import * as Fs from "node:fs"
import * as Agent from "../../src/Agent.js"
import * as Approval from "../../src/Approval.js"
import * as Compaction from "../../src/Compaction.js"
import type * as Delivery from "../../src/Delivery.js"
import * as History from "../../src/History.js"
import * as IdGenerator from "../../src/IdGenerator.js"
import * as Inbox from "../../src/Inbox.js"
import { AgentState } from "../../src/internal/agent/state.js"
import { pendingSubagents } from "../../src/internal/repair.js"
import { FiberTracker, settle } from "../../src/internal/settle.js"
import { makeJsonlWith, nodeIo } from "../../src/internal/store/jsonl.js"
import { VirtualClock } from "../../src/internal/virtualClock.js"
import { type Message, textOf, UserMessage } from "../../src/Message.js"
import * as Model from "../../src/Model.js"
import * as PreStep from "../../src/PreStep.js"
import * as ScriptedModel from "../../src/ScriptedModel.js"
import type { EventDraft, SessionEvent, SessionHeader } from "../../src/SessionEvent.js"
import * as SessionStore from "../../src/SessionStore.js"
import * as SqlSessionStore from "../../src/SqlSessionStore.js"
import * as Subagent from "../../src/Subagent.js"
import * as Tool from "../../src/Tool.js"
import { type Failpoint, failpointIo, Failpoints, withFailpoints } from "./failpoints.js"
import { createDatabase, pgUrl } from "./pg.js"

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

export type Action =
  | { readonly at: number; readonly followup: string }
  | { readonly at: number; readonly steer: string }
  | { readonly at: number; readonly inject: string }
  | { readonly at: number; readonly cancel: { readonly keepInbox: boolean } }
  | { readonly at: number; readonly compact: true }

export interface Scenario {
  readonly name: string
  readonly actions: ReadonlyArray<Action>
  /** A pre-step listener rejects a batch whose text includes this. */
  readonly rejectIfIncludes?: string | undefined
  /**
   * The session starts from a log that crashed during a tool call and was repaired (`Agent.repair`)
   * before the matrix's appends are counted; the scenario resumes it.
   */
  readonly repairedStart?: boolean | undefined
  /**
   * The agent has the sub-agent tool `delegate` (§27), whose child calls `echo` (the same tools,
   * counted the same way). Its ids take the session id as prefix, so that the children of the
   * cells, which share a store, do not collide. Only crashes are injected (`crashOnly`).
   */
  readonly subagent?: boolean | undefined
  /** Only the crash faults (before, after, torn): the scenario is there for crash repair. */
  readonly crashOnly?: boolean | undefined
  /** The agent is made under `Compaction.layer(...)` with these options (§17). */
  readonly compaction?: Compaction.SummarizeOptions | undefined
  /**
   * A person who answers every question (§26) `afterMs` after it is open: open in the running
   * agent, or in the resumed one after a crash (the question asked again). A decision the store
   * refused is tried again `afterMs` later.
   */
  readonly approver?: {
    readonly afterMs: number
    readonly decision: { readonly approve: { readonly always: boolean } } | { readonly reject: { readonly reason: string } }
    /** The decisions of the run without a fault, `OUTCOME by KIND` each (the reference's check). */
    readonly expected: ReadonlyArray<string>
  } | undefined
}

/**
 * The model: a function of the request, so that a resumed session gets the answers a run
 * without the crash would. A last user message `tools:a,b` asks for those tools (call ids from
 * the message id); anything else gets a text answer.
 */
const respond = (request: Model.ModelRequest): ScriptedModel.ScriptedResponse => {
  // A compaction's summarization request (§17): its summary names how much it read.
  if (request.purpose === "compaction") return { text: `summary of ${textOf(request.messages[0]!.content).length} characters` }
  const last = request.messages[request.messages.length - 1]
  if (last !== undefined && last.role === "user" && last.content[0]?.type === "text") {
    const text = textOf(last.content)
    if (text.startsWith("tools:")) {
      const names = text.slice(6).split(",")
      return {
        toolCalls: names.map((name, i) => ({
          id: `${last.id}.${i}`,
          name,
          // The sub-agent's task: one call of `echo`, then its answer.
          arguments: name === "delegate" ? { prompt: "tools:echo", description: "echo" } : {}
        }))
      }
    }
    return { text: `answer to ${text}` }
  }
  return { text: "done" }
}

/**
 * The tools (their durations in virtual ms); every start is counted by call id. With `approvals`
 * also `write`, which needs approval (§26): each call waits for the scenario's approver. (Only
 * then: another tool definition would move the compaction scenario's token counts.)
 */
const tools = (executions: Map<string, number>, approvals: boolean, subagent = false): ReadonlyArray<Tool.Tool<any>> => {
  const tool = (
    name: string,
    durationMs: number,
    body?: (ctx: Tool.ToolContext) => Effect.Effect<Tool.ToolOutput, Tool.ToolError>,
    approval: "never" | "always" = "never"
  ) =>
    Tool.make({
      name,
      description: `crash matrix tool ${name}`,
      parameters: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
      approval,
      execute: (_args, ctx) =>
        Effect.gen(function*() {
          executions.set(ctx.callId, (executions.get(ctx.callId) ?? 0) + 1)
          if (durationMs > 0) yield* Effect.sleep(durationMs)
          return body === undefined ? { content: `${name} ok` } : yield* body(ctx)
        })
    })
  return [
    tool("echo", 10),
    tool("fast", 10),
    tool("slow", 30),
    ...(approvals ? [tool("write", 10, undefined, "always")] : []),
    ...(subagent ? [delegate(executions, tool("echo", 10))] : []),
    // A delivery from a tool: a followup and an injection through the tool's agent, and a
    // tool context appended after the batch.
    tool("notify", 10, (ctx) =>
      Effect.gen(function*() {
        yield* record("tool followup", ctx.agent.followup("from the tool"))
        const inject = yield* Effect.orDie(ctx.makeMessage({ text: "tool note", source: { kind: "tool", callId: ctx.callId } }))
        yield* record("tool inject", ctx.agent.inject(inject))
        const context = yield* Effect.orDie(ctx.makeMessage("tool context"))
        return { content: "notified", additionalContexts: [context] }
      }))
  ]
}

/**
 * The sub-agent tool (§27): its child has `echo` and answers with the same function of the
 * request as the parent's model (no request check: the child's log is not `current`'s). Each
 * start of a call is counted by call id, as the other tools' are.
 */
const delegate = (executions: Map<string, number>, echo: Tool.Tool<any>): Tool.Tool<any> => {
  const sub = Subagent.tool({
    name: "delegate",
    model: ScriptedModel.make([respond], { loop: true, record: false }),
    tools: [echo]
  })
  return {
    ...sub,
    execute: (args, ctx) =>
      Effect.suspend(() => {
        executions.set(ctx.callId, (executions.get(ctx.callId) ?? 0) + 1)
        return sub.execute(args, ctx)
      })
  }
}

/** `ids` with each id prefixed. */
const prefixed = (ids: IdGenerator.IdGeneratorService, prefix: string): IdGenerator.IdGeneratorService => {
  const nextSync = ids.nextSync
  return {
    next: Effect.map(ids.next, (id) => `${prefix}${id}`),
    nextSync: nextSync === undefined ? undefined : () => `${prefix}${nextSync()}`
  }
}

export const scenarios: ReadonlyArray<Scenario> = [
  { name: "text turn", actions: [{ at: 0, followup: "hello" }] },
  { name: "single tool", actions: [{ at: 0, followup: "tools:echo" }] },
  { name: "parallel tools", actions: [{ at: 0, followup: "tools:slow,fast" }] },
  {
    name: "steer during a tool batch",
    actions: [{ at: 0, followup: "tools:slow,fast" }, { at: 20, steer: "only the headers" }]
  },
  {
    name: "inject while idle then followup",
    actions: [{ at: 0, inject: "git branch: main" }, { at: 1000, followup: "which branch?" }]
  },
  {
    name: "pre-step reject with later input",
    rejectIfIncludes: "rm -rf",
    actions: [{ at: 0, followup: "tools:echo" }, { at: 2, followup: "run rm -rf /" }, { at: 3, followup: "weather?" }]
  },
  {
    name: "cancel mid-tool with keepInbox",
    actions: [{ at: 0, followup: "tools:slow" }, { at: 5, followup: "after the cancel" }, {
      at: 15,
      cancel: { keepInbox: true }
    }, { at: 100, followup: "go on" }]
  },
  {
    name: "resume of an already repaired log",
    repairedStart: true,
    actions: [{ at: 0, followup: "tools:echo" }, { at: 50, followup: "thanks" }]
  },
  { name: "a delivery from a tool", actions: [{ at: 0, followup: "tools:notify" }] },
  {
    // The fourth prompt passes the window's line (the tool definitions are ~190 of its tokens):
    // a compaction before its step, a steer after it (its own turn); then a manual compaction.
    name: "compaction before a step, then a manual one",
    compaction: { contextWindow: 560, reserve: 60, keepRecentTokens: 60 },
    actions: [
      { at: 0, followup: "a".repeat(180) },
      { at: 100, followup: "b".repeat(180) },
      { at: 200, followup: "c".repeat(180) },
      { at: 300, followup: "d".repeat(180) },
      { at: 300, steer: "steer after it" },
      { at: 400, compact: true }
    ]
  },
  {
    // §26: a crash at each append of an approval flow (the question with its call, the decision,
    // the results, the step's end), the "always" answer remembered across the resume for the
    // next turn's call.
    name: "approval: a waiting call beside a free one, allowed always; the next call decided by the remembered answer",
    approver: {
      afterMs: 20,
      decision: { approve: { always: true } },
      expected: ["allowed-always by person", "allowed-once by policy"]
    },
    actions: [{ at: 0, followup: "tools:write,fast" }, { at: 100, followup: "tools:write" }]
  },
  {
    name: "approval: a rejection the model's next step sees",
    approver: { afterMs: 20, decision: { reject: { reason: "not now" } }, expected: ["rejected by person"] },
    actions: [{ at: 0, followup: "tools:write" }]
  },
  {
    // §27 rule 16: a crash at each append of the parent and of its sub-agent (the child's
    // creation and task, its tool call and result, its answer; the parent's start and end of the
    // call); the parent's next turn after the repair.
    name: "a sub-agent that calls a tool",
    subagent: true,
    crashOnly: true,
    actions: [{ at: 0, followup: "tools:delegate" }, { at: 200, followup: "thanks" }]
  }
]

// ---------------------------------------------------------------------------------------------
// Stores
// ---------------------------------------------------------------------------------------------

export type StoreKind = "memory" | "jsonl" | "jsonl-batch" | "sqlite" | "postgresql"

/** The stores of the matrix: PostgreSQL when a test server is set (`test/utils/pg.ts`). */
export const storeKinds: ReadonlyArray<StoreKind> = [
  "memory",
  "jsonl",
  "jsonl-batch",
  "sqlite",
  ...(pgUrl === undefined ? [] : ["postgresql" as const])
]

/**
 * Where a store kind keeps its sessions: one directory (PostgreSQL: one database, its URL) for
 * every cell (each has its own session id).
 */
export interface StorePlace {
  readonly kind: StoreKind
  readonly directory: string
  /** The memory store: its sessions outlive the store instances (as a file outlives a process). */
  readonly memory?: SessionStore.SessionStoreService | undefined
}

/** A store instance over `place`, in `scope`, its appends through `fp`. */
const openStore = (place: StorePlace, fp: Failpoints, scope: Scope.Scope) => {
  const base: Effect.Effect<SessionStore.SessionStoreService, unknown, Scope.Scope> = place.kind === "memory"
    ? Effect.succeed(place.memory!)
    : place.kind === "postgresql"
    ? Effect.map(
      Layer.build(SqlSessionStore.layerPg({ url: place.directory, maxConnections: 2 })),
      (context) => context.unsafeMap.get(SessionStore.SessionStore.key) as SessionStore.SessionStoreService
    )
    : place.kind === "sqlite"
    ? Effect.map(
      Layer.build(SqlSessionStore.layerSqlite({ filename: `${place.directory}/sessions.db`, synchronous: "normal" })),
      (context) => context.unsafeMap.get(SessionStore.SessionStore.key) as SessionStore.SessionStoreService
    )
    : makeJsonlWith(
      { directory: place.directory, fsync: place.kind === "jsonl-batch" ? "batch" : "none" },
      failpointIo(fp, nodeIo)
    )
  return Effect.map(
    Effect.orDie(Scope.extend(base, scope)),
    (store) => withFailpoints(store, fp, place.kind === "jsonl" || place.kind === "jsonl-batch")
  )
}

// ---------------------------------------------------------------------------------------------
// Running a cell
// ---------------------------------------------------------------------------------------------

/** A session's log as read from a store. */
export interface StoredLog {
  readonly header: SessionHeader
  readonly events: ReadonlyArray<SessionEvent>
}

/** What became of one delivery: its key (the action's index, or what a tool delivered). */
export interface DeliveryRecord {
  readonly key: string
  readonly messageId?: string | undefined
  readonly error?: string | undefined
  /** Acknowledged before the store crashed. */
  readonly beforeCrash: boolean
}

export interface CellRun {
  readonly events: ReadonlyArray<SessionEvent>
  readonly header: { readonly id: string }
  readonly appends: number
  readonly crashed: boolean
  readonly fired: boolean
  readonly restarted: boolean
  /** The agent was idle and alive with its turn open (it should have closed it or stopped). */
  readonly openWhileAlive: boolean
  readonly deliveries: ReadonlyArray<DeliveryRecord>
  readonly executions: ReadonlyMap<string, number>
  /**
   * Tool call ids whose `tool/call` was durable and whose `tool/result` was not at the crash,
   * but for those whose approval question was open then (§26 rule 8: they wait again).
   */
  readonly unanswered: ReadonlySet<string>
  /** Tool call ids whose approval question was open at the crash (§26). */
  readonly openAtCrash: ReadonlySet<string>
  /**
   * The sub-agent calls (§27) whose `subagent/start` was durable at the crash without its end or
   * result, by call id: the child's log as it was then (null: no child session yet).
   */
  readonly subagentsAtCrash: ReadonlyMap<string, StoredLog | null>
  /** Sub-agent calls whose `subagent/end` was durable at the crash without their result: its `stopReason`. */
  readonly subagentsEndedAtCrash: ReadonlyMap<string, string>
  /** The logs of the children the parent's log names, at the end. */
  readonly children: ReadonlyArray<StoredLog>
  /** Model requests whose messages were not `History.derive` of the log when they were made. */
  readonly requestMismatches: ReadonlyArray<string>
  readonly requests: number
}

/** The current run's delivery records (set while a cell runs; tools record through it). */
let records: Array<DeliveryRecord> = []
let crashedNow: () => boolean = () => false

const record = <E extends { readonly _tag: string }, R>(
  key: string,
  delivery: Effect.Effect<Delivery.Delivery, E, R>
): Effect.Effect<void, never, R> =>
  Effect.map(Effect.either(delivery), (result) => {
    records.push(
      result._tag === "Right"
        ? { key, messageId: result.right.messageId, beforeCrash: !crashedNow() }
        : { key, error: result.left._tag, beforeCrash: !crashedNow() }
    )
  })

const yieldToEventLoop = Effect.async<void>((resume) => {
  setImmediate(() => resume(Effect.void))
})

/** The closers `Agent.repair` appends to a log that crashed during a tool call (the repaired start). */
const repairedStartDrafts = (events: ReadonlyArray<SessionEvent>): ReadonlyArray<EventDraft> => {
  const cut = events.findIndex((e) => e.type === "tool/call")
  return events.slice(0, cut + 1).map((e) => ({ type: e.type, data: e.data }))
}

/**
 * Runs `scenario` on a store of `place` as session `sessionId` with the plan `failpoint`
 * (none: the reference run). `repairedPrefix`: for `repairedStart`, the events of the crashed
 * start (from the reference run of "single tool").
 */
export const runCell = (
  scenario: Scenario,
  place: StorePlace,
  sessionId: string,
  failpoint: Failpoint | undefined,
  repairedPrefix?: ReadonlyArray<SessionEvent>
): Effect.Effect<CellRun> => {
  const clock = new VirtualClock()
  const tracker = new FiberTracker()
  const fp = new Failpoints(failpoint)
  const executions = new Map<string, number>()
  const mismatches: Array<string> = []
  let requests = 0
  let current: Agent.Agent | undefined = undefined
  const model = ScriptedModel.make([(request) => {
    requests++
    if (current !== undefined && request.purpose !== "compaction") {
      const expected = History.derive(current.log.events())
      if (!sameMessages(request.messages, expected)) {
        mismatches.push(`turn ${request.turn} step ${request.step}: ${request.messages.length} messages, log ${expected.length}`)
      }
    }
    return respond(request)
  }], { loop: true, record: false })
  const seededIds = IdGenerator.seeded(scenario.repairedStart === true ? 0xab5 : 0x5eed)
  const ids = scenario.subagent === true ? prefixed(seededIds, `${sessionId}-`) : seededIds
  const preStep = PreStep.layer(
    scenario.rejectIfIncludes === undefined ? [] : [
      (p: PreStep.PreStepPayload, next: PreStep.Next) =>
        p.messages.some((m) => textOf(m.content).includes(scenario.rejectIfIncludes!))
          ? Effect.succeed(PreStep.Decision.reject(`text includes "${scenario.rejectIfIncludes}"`))
          : next()
    ]
  )
  const services = Layer.mergeAll(
    Model.layer(model),
    Layer.succeed(IdGenerator.IdGenerator, ids),
    preStep,
    scenario.compaction === undefined ? Layer.empty : Layer.orDie(Compaction.layer(scenario.compaction))
  )
  const agentTools = tools(executions, scenario.approver !== undefined, scenario.subagent === true)
  let actions = scenario.actions.map((a, i) => [a, i] as const).sort(([a, i], [b, j]) => a.at - b.at || i - j)
  let next = 0
  records = []
  crashedNow = () => fp.crashed
  let unanswered = new Set<string>()
  let openAtCrash = new Set<string>()
  let subagentsAtCrash = new Map<string, StoredLog | null>()
  let subagentsEndedAtCrash = new Map<string, string>()
  let children: ReadonlyArray<StoredLog> = []
  let active = fp
  const retries = new Map<number, number>()
  let giveUp = false

  const apply = (agent: Agent.Agent, action: Action, index: number): Effect.Effect<void, never, IdGenerator.IdGenerator> => {
    const key = `action ${index}`
    if ("followup" in action) return record(key, agent.followup(action.followup))
    if ("steer" in action) return record(key, agent.steer(action.steer))
    if ("inject" in action) {
      return record(
        key,
        Effect.flatMap(UserMessage.make({ text: action.inject, source: { kind: "plugin", plugin: "matrix" } }), agent.inject)
      )
    }
    // A compaction returns when it ended: in its own fiber.
    if ("compact" in action) return Effect.asVoid(Effect.fork(Effect.either(agent.compact())))

    // A cancel returns when the turn is closed: in its own fiber.
    return Effect.asVoid(Effect.fork(Effect.either(agent.cancel(undefined, { keepInbox: action.cancel.keepInbox }))))
  }

  /**
   * Applies an action; a delivery the store refused (not a crash: a full disk) is sent again at
   * once, as its caller would; refused again, the session is restarted (resumed).
   */
  const applyRetrying = (agent: Agent.Agent, action: Action, index: number) =>
    Effect.map(apply(agent, action, index), () => {
      const last = records[records.length - 1]
      if ("cancel" in action || last === undefined || last.key !== `action ${index}` || last.error === undefined || fp.crashed) {
        return
      }
      const tries = (retries.get(index) ?? 0) + 1
      retries.set(index, tries)
      if (tries > 1) giveUp = true
      else actions.splice(next, 0, [action, index])
    })

  /**
   * The approver's decisions (§26): when each open question is to be decided (by id), and the
   * questions it decided (durably: `approve`/`reject` returned) or found closed.
   */
  const due = new Map<string, number>()
  const answered = new Set<string>()
  const approver = scenario.approver

  /** Schedules the questions open in `agent` that the approver has not seen yet. */
  const notice = (agent: Agent.Agent, now: number) =>
    Effect.map(agent.pendingApprovals, (pending) => {
      for (const q of pending) if (!due.has(q.id) && !answered.has(q.id)) due.set(q.id, now + approver!.afterMs)
    })

  /**
   * Decides question `id`. A decision the store refused leaves the question open (§26 rule 5):
   * as a refused delivery, it is sent again at once, and refused again the session is restarted
   * (a log that cannot be written, as after `EIO` from `fdatasync`, refuses it for good). After a
   * crash or a restart, the resumed agent's question, if it is still open there, is decided anew.
   */
  const refusals = new Map<string, number>()
  const decide = (agent: Agent.Agent, id: string, now: number) => {
    const decision = approver!.decision
    due.delete(id)
    return Effect.map(
      Effect.either(
        "approve" in decision
          ? agent.approve(id, { always: decision.approve.always })
          : agent.reject(id, { reason: decision.reject.reason })
      ),
      (result) => {
        if (result._tag === "Right" || result.left._tag === "ApprovalNotOpen") answered.add(id)
        else if (!fp.crashed) {
          const tries = (refusals.get(id) ?? 0) + 1
          refusals.set(id, tries)
          if (tries > 1) giveUp = true
          else due.set(id, now)
        }
      }
    )
  }

  /** Runs actions, decisions and the clock until the scenario ends or the store crashed. */
  const drive = (agent: Agent.Agent, dead: () => boolean) =>
    Effect.gen(function*() {
      while (true) {
        yield* Effect.orDie(settle(tracker, { maxRounds: 10_000 }))
        if (active.inflight > 0 && !dead()) {
          yield* yieldToEventLoop
          continue
        }
        if (dead()) return
        const now = clock.unsafeCurrentTimeMillis()
        if (approver !== undefined) yield* notice(agent, now)
        const nextAction = next < actions.length ? actions[next]![0].at : undefined
        let nextDecision: [string, number] | undefined = undefined
        for (const entry of due) if (nextDecision === undefined || entry[1] < nextDecision[1]) nextDecision = entry
        const nextSleep = clock.nextSleep()
        if (nextAction !== undefined && nextAction <= now) {
          const [action, index] = actions[next]!
          next++
          if (!("cancel" in action) || !fp.crashed) yield* applyRetrying(agent, action, index)
          continue
        }
        if (nextDecision !== undefined && nextDecision[1] <= now) {
          yield* decide(agent, nextDecision[0], now)
          continue
        }
        const nextTimed = nextDecision === undefined
          ? nextAction
          : nextAction === undefined
          ? nextDecision[1]
          : Math.min(nextAction, nextDecision[1])
        if (nextSleep !== undefined && (nextTimed === undefined || nextSleep < nextTimed)) {
          clock.wakeNext()
          continue
        }
        if (nextTimed === undefined) return
        clock.setTime(nextTimed)
      }
    })

  /**
   * Runs `effect` while the clock runs: disposing or releasing an agent waits for its turn to be
   * closed, whose closers wait between their tries (a full disk) on this clock, which nothing else
   * drives then.
   */
  const driving = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      const closing = yield* Effect.fork(effect)
      while (closing.unsafePoll() === null) {
        yield* Effect.orDie(settle(tracker, { maxRounds: 10_000 }))
        if (closing.unsafePoll() !== null) break
        if (clock.nextSleep() !== undefined) clock.wakeNext()
        else yield* yieldToEventLoop
      }
      yield* Fiber.join(closing)
    })

  /** Tool calls logged without a result in `events` (at the crash). */
  const unansweredIn = (events: ReadonlyArray<SessionEvent>) => {
    const open = new Set<string>()
    for (const e of events) {
      if (e.type === "tool/call") open.add((e.data as { callId: string }).callId)
      if (e.type === "tool/result") {
        open.delete(
          (e.data as { message: Message }).message.content[0]!.type === "tool-result"
            ? ((e.data as { message: Message }).message.content[0] as { toolCallId: string }).toolCallId
            : ""
        )
      }
    }
    return open
  }

  const program = Effect.gen(function*() {
    const storeScope1 = yield* Scope.make()
    const store1 = yield* openStore(place, fp, storeScope1)
    if (scenario.repairedStart === true) {
      // The crashed start, repaired, before the counted appends.
      fp.paused = true
      const log = yield* Effect.orDie(Scope.extend(
        Effect.flatMap(
          Effect.provideService(store1.create({ id: sessionId, createdAt: 0 }), IdGenerator.IdGenerator, ids),
          (l) => Effect.as(l.append(repairedStartDrafts(repairedPrefix!)), l)
        ),
        storeScope1
      ))
      void log
      yield* Effect.orDie(Agent.repair(sessionId).pipe(Effect.provideService(SessionStore.SessionStore, store1)))
      fp.paused = false
    }
    const agentScope = yield* Scope.make()
    const made = yield* Effect.either(
      Scope.extend(
        scenario.repairedStart === true
          ? Agent.resume(sessionId, { tools: agentTools, continuePending: true })
          : Agent.make({ tools: agentTools, sessionId }),
        agentScope
      ).pipe(Effect.provideService(SessionStore.SessionStore, store1))
    )
    if (made._tag === "Left" && !fp.crashed) return yield* Effect.die(made.left)
    const agent1 = made._tag === "Right" ? made.right : undefined
    current = agent1
    const stoppedNow = () => agent1 instanceof AgentState && agent1.stopped !== undefined
    if (agent1 !== undefined) yield* drive(agent1, () => fp.crashed || giveUp || stoppedNow())
    let restarted = false
    let log1 = agent1 === undefined ? [] : agent1.log.events().slice()
    const stopped = stoppedNow()
    // An agent that is alive and idle with its turn open is a defect, not a reason to restart.
    const openWhileAlive = !fp.crashed && !stopped && !giveUp && lastTurnOpen(log1)
    // A claim refused twice in a row leaves its work waiting for the next delivery (driver.ts):
    // with none left in the scenario, the session is resumed with `continuePending`, as its
    // operator would.
    const waiting = !fp.crashed && !stopped && Inbox.hasWakingWork(Inbox.replay(log1))
    if (fp.crashed || stopped || giveUp || waiting) {
      // A delivery the fault failed (its last try) is sent again after the restart, as its
      // caller would, before the actions still due.
      const failed = scenario.actions.flatMap((a, i) => {
        const last = records.filter((d) => d.key === `action ${i}`).pop()
        return !("cancel" in a) && last?.error !== undefined ? [[a, i] as const] : []
      })
      actions = [...failed, ...actions.slice(next)]
      next = 0
      restarted = true
      if (fp.crashed) {
        // What is durable at the crash: read from the files with a store of its own.
        const durable = yield* durableEvents(place, sessionId)
        openAtCrash = new Set(Approval.openQuestions(durable.parent).map((q) => q.callId!))
        unanswered = unansweredIn(durable.parent)
        for (const callId of openAtCrash) unanswered.delete(callId)
        subagentsAtCrash = durable.children
        subagentsEndedAtCrash = durable.ended
      }
      current = undefined
      // A restart, as its operator makes one: the agent that still lives (a delivery refused
      // twice, or work waiting for the next delivery) is released, not disposed, so that its
      // inbox stays for the resumed agent (disposal would drop it).
      if (agent1 !== undefined && !fp.crashed && !stopped) yield* driving(Effect.ignore(agent1.release))
      yield* driving(Scope.close(agentScope, Exit.void))
      yield* Effect.orDie(settle(tracker, { maxRounds: 10_000 }))
      yield* Scope.close(storeScope1, Exit.void)
      const storeScope2 = yield* Scope.make()
      active = new Failpoints(undefined)
      const store2 = yield* openStore(place, active, storeScope2)
      const agentScope2 = yield* Scope.make()
      const agent2 = yield* Effect.orDie(
        Scope.extend(Agent.resume(sessionId, { tools: agentTools, continuePending: true }), agentScope2).pipe(
          Effect.provideService(SessionStore.SessionStore, store2)
        )
      )
      current = agent2
      yield* drive(agent2, () => false)
      log1 = agent2.log.events().slice()
      children = yield* childrenOf(store2, log1)
      current = undefined
      yield* driving(Scope.close(agentScope2, Exit.void))
      yield* Effect.orDie(settle(tracker, { maxRounds: 10_000 }))
      yield* Scope.close(storeScope2, Exit.void)
    } else {
      current = undefined
      children = yield* childrenOf(store1, log1)
      yield* driving(Scope.close(agentScope, Exit.void))
      yield* Effect.orDie(settle(tracker, { maxRounds: 10_000 }))
      yield* Scope.close(storeScope1, Exit.void)
    }
    return {
      events: log1,
      header: { id: sessionId },
      appends: fp.appends,
      crashed: fp.crashed,
      fired: fp.fired,
      restarted,
      openWhileAlive,
      deliveries: records.slice(),
      executions,
      unanswered,
      openAtCrash,
      subagentsAtCrash,
      subagentsEndedAtCrash,
      children,
      requestMismatches: mismatches,
      requests
    } satisfies CellRun
  })
  return program.pipe(
    Effect.supervised(tracker),
    Effect.provide(services),
    Effect.withClock(clock),
    Logger.withMinimumLogLevel(LogLevel.None)
  )
}

/**
 * The events durable in `place` for the session (read with a fresh store), and the children of
 * its sub-agent calls cut short (§27 rule 16: a `subagent/start` without end or result) as they
 * are durable (null: no such session).
 */
const durableEvents = (place: StorePlace, sessionId: string) =>
  Effect.scoped(
    Effect.flatMap(
      Effect.flatMap(Effect.scope, (scope) => openStore(place, new Failpoints(undefined), scope)),
      (store) =>
        Effect.gen(function*() {
          const parent = (yield* Effect.orDie(store.read(sessionId))).events
          const children = new Map<string, StoredLog | null>()
          // A call whose end is durable without its result: the end alone gives the result.
          const answered = new Set(
            parent.filter((e) => e.type === "tool/result").map((e) => (e.data as any).message.content[0].toolCallId)
          )
          const ended = new Map<string, string>()
          for (const e of parent) {
            const data = e.data as { readonly callId?: string; readonly stopReason?: string }
            if (e.type === "subagent/end" && !answered.has(data.callId)) ended.set(data.callId!, data.stopReason!)
          }
          for (const start of pendingSubagents(parent)) {
            const child = yield* Effect.orDie(
              Effect.catchTag(store.read(start.id), "SessionNotFound", () => Effect.succeed(null))
            )
            children.set(start.callId, child === null ? null : { header: child.header, events: child.events })
          }
          return { parent, children, ended }
        })
    )
  )

/**
 * The logs of the children the `subagent/start` events of `events` name (§27), read from `store`
 * (a call a crash cut short before its child was created has none).
 */
const childrenOf = (store: SessionStore.SessionStoreService, events: ReadonlyArray<SessionEvent>) =>
  Effect.map(
    Effect.forEach(
      events.filter((e) => e.type === "subagent/start"),
      (e) =>
        store.read((e.data as { readonly id: string }).id).pipe(
          Effect.map((c): StoredLog | undefined => ({ header: c.header, events: c.events })),
          Effect.catchTag("SessionNotFound", () => Effect.succeed(undefined)),
          Effect.orDie
        )
    ),
    (logs) => logs.filter((log): log is StoredLog => log !== undefined)
  )

/** Whether the last turn of `events` is open. */
export const lastTurnOpen = (events: ReadonlyArray<SessionEvent>): boolean => {
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i]!.type === "turn/end") return false
    if (events[i]!.type === "turn/start") return true
  }
  return false
}

const sameMessages = (a: ReadonlyArray<Message>, b: ReadonlyArray<Message>): boolean =>
  a.length === b.length && a.every((m, i) => JSON.stringify(m) === JSON.stringify(b[i]))

/** A fresh place for a store kind. */
export const makePlace = (kind: StoreKind, directory: string): Effect.Effect<StorePlace> =>
  kind === "memory"
    ? Effect.map(SessionStore.makeMemory, (memory) => ({ kind, directory, memory }))
    : kind === "postgresql"
    ? Effect.sync(() => ({ kind, directory: createDatabase() }))
    : Effect.sync(() => {
      Fs.mkdirSync(directory, { recursive: true })
      return { kind, directory }
    })
