/**
 * The agent's state (§5.4, §6): one mutable record per agent (`AgentState`, which the
 * facade's class implements) and the per-turn and per-call records of the driver. Every module
 * of `internal/agent/` is plain functions over these records, so that the hot path allocates no
 * service, fiber or generator per step (§24).
 *
 * An idle agent is the record alone: its `inbox` `Ref` holds the shared empty inbox, and the
 * driver fiber, events hub, outcome waiters, seen-id set and history are allocated on first use.
 */
import { type Deferred, Effect, type Fiber, type FiberSet, Ref, type Schedule, type Scope, SynchronizedRef } from "effect"
import type { AgentEvent } from "../../AgentEvent.js"
import type * as Approval from "../../Approval.js"
import type { CompactionPolicy, CompactionReport } from "../../Compaction.js"
import type { DeliveryOutcome } from "../../Delivery.js"
import type { IdGeneratorService } from "../../IdGenerator.js"
import * as Inbox from "../../Inbox.js"
import type { InboxState } from "../../Inbox.js"
import type { ContentBlock, Message, UserMessage } from "../../Message.js"
import type { ModelError, ModelService, ToolDefinition } from "../../Model.js"
import type { PreStepService } from "../../PreStep.js"
import type { AbortCause, FinishReason, SessionEvent, ToolErrorCode, Usage } from "../../SessionEvent.js"
import type { SessionLog, SessionWriteError } from "../../SessionLog.js"
import type { SessionStoreService } from "../../SessionStore.js"
import type * as Tool from "../../Tool.js"
import type { AgentTrace, TurnTrace } from "../tracing.js"
import type { Resume } from "../waiters.js"
import type { Hub } from "./hub.js"

/** The phase of a tool call in its step (§8, §9): what an abort gives it. */
type CallPhase = "pending" | "running" | "done" | "committed"

/** One tool call of a response: its result is recorded here until it is committed (§8). */
export interface CallState {
  readonly id: string
  readonly name: string
  readonly rawArguments: string
  phase: CallPhase
  callLogged: boolean
  content: ReadonlyArray<ContentBlock>
  isError: boolean
  error: { readonly name: string; readonly code: ToolErrorCode } | undefined
  contexts: ReadonlyArray<UserMessage>
}

/** A call of a response, before it runs. */
export const newCall = (c: { readonly id: string; readonly name: string; readonly rawArguments: string }): CallState => ({
  id: c.id,
  name: c.name,
  rawArguments: c.rawArguments,
  phase: "pending",
  callLogged: false,
  content: [],
  isError: false,
  error: undefined,
  contexts: []
})

/** A model response as it streams in (§11). */
export interface Accumulator {
  content: Array<ContentBlock>
  toolCalls: Array<{ readonly id: string; readonly name: string; readonly rawArguments: string }>
  usage: Usage | undefined
  /** The provider's usage object as sent (§18). */
  rawUsage: unknown
  /** The provider's response id and model (§18). */
  response: { readonly id?: string | undefined; readonly model?: string | undefined } | undefined
  finish: FinishReason | undefined
  streamed: boolean
  /** Text and reasoning deltas joined so far (`modelStep.ts` flattens the text every 16th). */
  joined: number
}

/** The turn the driver runs (§6.1). */
export interface TurnState {
  turn: number
  turnOpen: boolean
  step: number
  stepOpen: boolean
  /** Claimed at the current pre-step and not yet decided. */
  claimed: ReadonlyArray<UserMessage> | undefined
  acc: Accumulator | undefined
  assistantLogged: boolean
  calls: Array<CallState> | undefined
  nextCommit: number
  contextsInserted: number
  maxTokens: boolean
  /** The current step was entered in the same append as its claim (default pre-step). */
  entered: boolean
  /** The compaction bracket open in this turn (or the manual one of this run), until its end is durable. */
  compaction: { readonly id: string; readonly turn: number | null } | undefined
  /** The open step's request overflowed once and was compacted (§17: one retry). */
  overflowRetried: boolean
  /** The history's length when the open step's input was entered (-1: none yet). */
  enteredFrom: number
  /** State update of a prefix draft appended with the step's end. */
  onCommit: (() => void) | undefined
  /** The turn's span (§19), while it is open in a traced run. */
  trace: TurnTrace | undefined
}

export const newTurnState = (): TurnState => ({
  turn: 0,
  turnOpen: false,
  step: 0,
  stepOpen: false,
  claimed: undefined,
  acc: undefined,
  assistantLogged: false,
  calls: undefined,
  nextCommit: 0,
  contextsInserted: 0,
  maxTokens: false,
  entered: false,
  onCommit: undefined,
  compaction: undefined,
  overflowRetried: false,
  enteredFrom: -1,
  trace: undefined
})

/**
 * The compaction state of an agent with a compaction policy or a pending `compact` (§17),
 * allocated on first use: the running estimate of the request (`tokens` covers the fixed part
 * and `history[0, counted)`), the level below which pressure does not compact again, and the
 * pending manual request with its waiters.
 */
export interface CompactionState {
  tokens: number
  counted: number
  retryAbove: number
  /** After a compaction: the seqs of the surface it left, and the first seq after its append. */
  surface: { readonly seqs: ReadonlyArray<number>; readonly next: number } | undefined
  request: { readonly instructions: string | undefined; readonly waiters: Array<Resume<CompactionReport>> } | undefined
}

/**
 * An open question of the running step (§26): the call it is about and its decision once durable.
 * `decided` completes when the `approval/decided` is appended (by a person, the timeout or a
 * cancel); the call's fiber waits on it.
 */
export interface Question {
  readonly id: string
  readonly call: CallState
  readonly arguments: unknown
  readonly turn: number
  readonly step: number
  readonly askedAt: number
  readonly decided: Deferred.Deferred<Approval.DecidedData>
}

/**
 * An agent's approval state (§26): the open questions by id, the remembered answers by tool name
 * (`allowed-always` / `rejected-always`, rule 6), and the lock every decision is appended under,
 * so that of two decisions of one question exactly one is appended.
 */
export interface ApprovalState {
  readonly open: Map<string, Question>
  readonly remembered: Map<string, Approval.Outcome>
  readonly lock: Effect.Semaphore
}

/**
 * The fibers an agent owns (§9 "The card, in code"): a `Scope` of its own, made at its first run
 * (`fibers.ts` `ownFibers`) and closed by its disposal, holding two `FiberSet`s: `runs`, the
 * driver fiber of each run (one at a time, but the fiber of a run that has just gone idle may
 * still be finishing when the next starts), and `calls`, the tool-call fibers of the running
 * step's batch. Cancel interrupts the current run's fiber, whose batch interrupts `calls`;
 * closing `scope` interrupts and awaits both (runs first). Nothing else of the agent runs on a
 * fiber of its own: a compaction runs on the driver, waiters are callbacks of their callers'
 * fibers.
 */
export interface AgentFibers {
  readonly scope: Scope.CloseableScope
  readonly runs: FiberSet.FiberSet<void, never>
  readonly calls: FiberSet.FiberSet<void, never>
}

/**
 * An agent's links to its sub-agents (§27): the live children of its running calls by call id,
 * how many of them wait for a person (then it waits for one too), and the agent whose call runs
 * it with the call, while it runs (its status follows this one's questions, its live events
 * carry this one's).
 */
export interface Family {
  children: Map<string, AgentState> | undefined
  childrenAwaiting: number
  parentLink: { readonly parent: AgentState; readonly callId: string } | undefined
}

/** The agent's family record, made on first use. */
export const familyOf = (a: AgentState): Family =>
  a.family ?? (a.family = { children: undefined, childrenAwaiting: 0, parentLink: undefined })

/** What an agent is made with (built by `Agent.make`/`resume` from `AgentOptions`), fixed for its life. */
export interface AgentConfig {
  /**
   * The store the log was opened from: with the session id, the key under which a stopped or
   * released agent leaves its outcome waiters for the next agent of the session (a store may
   * hand out a new `SessionLog` for the session once the old one is closed).
   */
  readonly store: SessionStoreService
  readonly model: ModelService
  readonly preStep: PreStepService
  /** The compaction policy (§17), if one was provided. */
  readonly compaction: CompactionPolicy | undefined
  readonly ids: IdGeneratorService
  readonly instructions: string | undefined
  readonly settings: { readonly [key: string]: unknown } | undefined
  /** Pre-execute guards and post-processing hooks, outermost first (§8). */
  readonly guards: ReadonlyArray<Tool.ToolGuard>
  readonly hooks: ReadonlyArray<Tool.ToolHook>
  /**
   * Calls are prepared one at a time (`toolBatch.ts` `prepare`): there are guards, or a tool whose
   * calls may need approval (§26). Otherwise a group of calls is validated and logged in one append.
   */
  perCall: boolean
  /** The approval policy's listeners, outermost first (§26 rule 1; none: ask a person). */
  readonly approvalListeners: ReadonlyArray<Approval.Listener>
  /** `approvalTimeoutMs` (§26 rule 5): a question open this long is decided `rejected` by `timeout`. */
  readonly approvalTimeout: number | undefined
  readonly retry: Schedule.Schedule<unknown, ModelError> | undefined
  /**
   * The tools of the current step (§8): `baseTools`, then each toolset's tools whose names are
   * free. Rebuilt by `refreshTools` at a step's start when a toolset's version moved.
   */
  tools: ReadonlyMap<string, Tool.Tool<any>>
  toolDefinitions: ReadonlyArray<ToolDefinition>
  /** `tools` of `Agent.make`, and its `toolsets` with the versions last read (none: empty). */
  readonly baseTools: ReadonlyArray<Tool.Tool<any>>
  readonly toolsets: ReadonlyArray<Tool.Toolset>
  readonly toolsetVersions: Array<number>
  /** Whether `perCall` holds without any tool (guards). */
  readonly guarded: boolean
  /** The default pre-step (enter the claimed batch): a claim and its step are one append. */
  readonly fastPreStep: boolean
  /** `toolConcurrency` and `maxSteps`, whole numbers ≥ 1 (`countOption`). */
  readonly toolBound: number
  readonly maxSteps: number
  /** `maxMessageBytes` (§5.1): the most UTF-8 bytes of JSON a delivered message may have. */
  readonly maxMessageBytes: number
  /** `gen_ai.agent.name` of the agent's spans (§19; default "agent-loop"). */
  readonly name: string
  /** Tool arguments and results on `execute_tool` spans (§19; default false). */
  readonly recordContent: boolean
}

/**
 * The agent's record (§5.4): its log, its configuration, and the mutable state every
 * module of `internal/agent/` works on. The facade (`Agent.ts`) extends it with the public
 * members, bound on first use.
 */
export abstract class AgentState {
  readonly id: string
  /** The log's synchronous append, when it has one: sections are then one `Ref.modify`. */
  readonly appendSync: SessionLog["appendSync"]
  /** Every message id pending or ever logged in this session (§2); allocated on first use. */
  seenCell: Set<string> | undefined = undefined
  /**
   * Ids delivered (or claimed) whose fate is not decided yet: a plain set, so that `outcome` and
   * `observeOutcome` check and register in one synchronous step (the inbox `Ref` can only be read
   * inside an effect, which a decision could fall between).
   */
  undecidedCell: Set<string> | undefined = undefined
  /** The model-visible history (§6.2), maintained incrementally. */
  historyCell: Array<Message> | undefined = undefined
  /** Compaction state (§17), allocated on first use. */
  compactionCell: CompactionState | undefined = undefined
  /** Approval state (§26: open questions, remembered answers), allocated on first use. */
  approvalCell: ApprovalState | undefined = undefined
  /** The key of the last `request/header` logged. */
  headerKey: string | undefined = undefined
  turnCounter = 0
  running = false
  /** Set by `dispose` (from the moment it is called), by a stop and by `release`: deliveries fail. */
  disposed = false
  /**
   * Set by `release` (passivation): the driver is interrupted and closes nothing, the log is
   * left as it is (an open turn for the next resume to repair, §10), `stopped` holds the error
   * every writing operation fails with.
   */
  released = false
  /**
   * Set when the agent stopped because its turn could not be closed durably (a full disk, a
   * broken log; §10), or was released: nothing is appended any more, and every operation fails
   * with this error until the session is resumed (which repairs the open turn).
   */
  stopped: SessionWriteError | undefined = undefined
  /** Turns in a row that failed before their claim was durable (`driver.ts` `closeAborted`). */
  claimFailures = 0
  /** Set by `cancel` until the agent is idle (first cause wins, §9). */
  cancelCause: AbortCause | undefined = undefined
  /** A waking delivery arrived during a cancel (§9). */
  latch = false
  /** Its sub-agents and its parent (§27): allocated when it starts a child or is one. */
  family: Family | undefined = undefined
  /** The fibers the agent owns (see `AgentFibers`), from its first run on. */
  fibers: AgentFibers | undefined = undefined
  /** The running run's driver fiber (a member of `fibers.runs`), while `running`. */
  driver: Fiber.RuntimeFiber<void, never> | undefined = undefined
  /** The turn the driver is running. */
  current: TurnState | undefined = undefined
  hub: Hub<AgentEvent> | undefined = undefined
  subscribers = 0
  waiters: Map<string, Array<Resume<DeliveryOutcome>>> | undefined = undefined
  observers: Map<string, (outcome: DeliveryOutcome) => void> | undefined = undefined
  idleWaiters: Array<Resume<void>> | undefined = undefined
  /** Tracing (§19): the run's tracer and the caller spans of deliveries; allocated on first use. */
  trace: AgentTrace | undefined = undefined
  /** The request key's cache; `refreshTools` clears it when the tools change. */
  requestKeyCell: string | undefined = undefined
  private inboxCell: Ref.Ref<InboxState> | undefined = undefined

  constructor(
    /** The session log this agent writes (its only writer, §3.3). */
    readonly sessionLog: SessionLog,
    readonly config: AgentConfig
  ) {
    this.id = sessionLog.id
    this.appendSync = sessionLog.appendSync
  }

  /**
   * The delivery methods a running tool gets (`ctx.agent`, §8), given by the facade, so that the
   * tool batch never imports the delivery module (imports run one way).
   */
  abstract readonly toolAgent: Tool.ToolAgent

  /**
   * The request configuration as one key (provider, model, instructions, tool definitions,
   * settings), computed at the first step: a `request/header` is logged whenever it differs from
   * the last one logged (§6.2).
   */
  get requestKey(): string {
    const c = this.config
    return this.requestKeyCell ??
      (this.requestKeyCell = requestKeyOf({
        provider: c.model.provider,
        model: c.model.model,
        instructions: c.instructions,
        tools: c.toolDefinitions,
        settings: c.settings
      }))
  }

  /**
   * The inbox (§4): an immutable value in a `Ref`, replaced only together with its durable
   * splice (a `SynchronizedRef` when the log's appends are asynchronous; see `section.ts`). Made
   * on first use: a `Ref` is ~290 bytes here, more than the rest of an idle agent's own fields.
   */
  get inbox(): Ref.Ref<InboxState> {
    return this.inboxCell ??
      (this.inboxCell = this.appendSync !== undefined ? Ref.unsafeMake(Inbox.empty) : SynchronizedRef.unsafeMake(Inbox.empty))
  }
}

export const seen = (a: AgentState): Set<string> => a.seenCell ?? (a.seenCell = new Set())

export const undecided = (a: AgentState): Set<string> => a.undecidedCell ?? (a.undecidedCell = new Set())

export const approvalState = (a: AgentState): ApprovalState =>
  a.approvalCell ?? (a.approvalCell = { open: new Map(), remembered: new Map(), lock: Effect.unsafeMakeSemaphore(1) })

export const history = (a: AgentState): Array<Message> => a.historyCell ?? (a.historyCell = [])

/** Whether a call of `tool` may need approval (§26 rule 1): then calls are prepared one at a time. */
export const mayAskFor = (tool: Tool.Tool<any>): boolean => tool.approval !== undefined && tool.approval !== "never"

/**
 * The tools of an agent (§8): `base` (the `tools` of `Agent.make`), then each toolset's tools
 * in order, a name already taken left out; their definitions; whether any may need approval
 * (§26: then calls are prepared one at a time).
 */
export const toolsOf = (
  base: ReadonlyArray<Tool.Tool<any>>,
  toolsets: ReadonlyArray<Tool.Toolset>
): {
  readonly tools: ReadonlyMap<string, Tool.Tool<any>>
  readonly definitions: ReadonlyArray<ToolDefinition>
  readonly mayAsk: boolean
} => {
  const tools = new Map<string, Tool.Tool<any>>()
  const definitions: Array<ToolDefinition> = []
  let mayAsk = false
  const add = (tool: Tool.Tool<any>) => {
    if (tools.has(tool.name)) return
    tools.set(tool.name, tool)
    definitions.push(tool.definition)
    if (mayAskFor(tool)) mayAsk = true
  }
  for (const tool of base) add(tool)
  for (const set of toolsets) {
    let listed: ReadonlyArray<Tool.Tool<any>> = []
    try {
      listed = set.tools()
    } catch {
      // A toolset that cannot list its tools offers none this step.
    }
    for (const tool of listed) add(tool)
  }
  return { tools, definitions, mayAsk }
}

/**
 * Reads the agent's toolsets at a step's start (§8): when a version moved, the tools, their
 * definitions and `perCall` are rebuilt, and the request key is cleared so that the next
 * request logs a `request/header` with the new tools (§6.2). A version that throws counts as
 * unmoved.
 */
export const refreshTools = (a: AgentState): void => {
  const c = a.config
  const sets = c.toolsets
  if (sets.length === 0) return
  let moved = false
  for (let i = 0; i < sets.length; i++) {
    let version: number
    try {
      version = sets[i]!.version()
    } catch {
      continue
    }
    if (version !== c.toolsetVersions[i]) {
      c.toolsetVersions[i] = version
      moved = true
    }
  }
  if (!moved) return
  const built = toolsOf(c.baseTools, sets)
  c.tools = built.tools
  c.toolDefinitions = built.definitions
  c.perCall = c.guarded || built.mayAsk
  a.requestKeyCell = undefined
}

/**
 * A count option (`toolConcurrency`, `maxSteps`) as a whole number ≥ 1: absent or NaN gives the
 * default, a fraction is rounded down, anything below 1 gives 1, Infinity stays (no bound).
 */
export const countOption = (value: number | undefined, fallback: number): number => {
  if (value === undefined || Number.isNaN(value)) return fallback
  return value === Infinity ? Infinity : Math.max(1, Math.floor(value))
}

/**
 * The key of a request configuration (§6.2): provider, model, instructions, tool definitions and
 * settings. A `request/header` is logged whenever the key differs from the last one logged, so
 * that a session resumed with new instructions, tools or settings records them before the next
 * request. The logged header's data gives the same key (it is these values as JSON).
 */
export const requestKeyOf = (config: {
  readonly provider: string
  readonly model: string
  readonly instructions?: string | undefined
  readonly tools: ReadonlyArray<unknown>
  readonly settings?: unknown
}): string => JSON.stringify([config.provider, config.model, config.instructions ?? null, config.tools, config.settings ?? {}])

/**
 * The ids a log has used (inserted, entered, assistant and tool result messages; §2:
 * ids are unique per session): a resumed agent starts from them, its id generator skips them,
 * and `SessionReference` checks against them.
 */
export const usedIds = (events: ReadonlyArray<SessionEvent>): Set<string> => {
  const used = new Set<string>()
  for (const e of events) {
    const data = e.data as any
    switch (e.type) {
      case "agent/inbox/spliced":
        for (const m of data.inserted ?? []) used.add(m.id)
        break
      case "user/message":
        used.add(data.id)
        break
      case "assistant/message":
      case "tool/result":
        used.add(data.message?.id)
        break
    }
  }
  return used
}

/**
 * The logs that a live (not yet disposed) agent of this process writes: one writer per session
 * (§3.3). `resume` and `repair` refuse them (a store hands out one `SessionLog` per
 * session, so a second agent would share it); the stores refuse a session that another store or
 * process has open for writing.
 */
export const liveLogs = new WeakSet<SessionLog>()

export const USER_CAUSE: AbortCause = Object.freeze({ kind: "user" })
export const DISPOSED_CAUSE: AbortCause = Object.freeze({ kind: "disposed" })
