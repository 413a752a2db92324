/**
 * The agent (DESIGN.md §5, §6, §9): delivery methods (`followup`, `steer`, `inject`), status,
 * live events, cancel and dispose, and the driver that runs turns while there is waking work.
 *
 * An idle agent is a plain record: the driver fiber, the events hub and the outcome waiters are
 * created on first use and released when the run ends (§5.4). Every inbox mutation is one
 * critical section: validate → durable splice → state → notifications (§4). The driver's
 * decisions that read the inbox (claim, the continuation rule of §6.3 and the next-turn rule of
 * §6.5) are critical sections too, atomic with the append they decide on. When the log appends
 * synchronously (`SessionLog.appendSync`) a section is one synchronous step (nothing can
 * interleave, no lock); otherwise it runs under the agent's lock. The per-step path is written
 * as plain effect chains with no generator, `Deferred` or `Effect.fork` (STYLE.md "Hot path").
 * Cancellation is fiber interruption; the interrupted turn is closed durably by the driver
 * itself before the agent goes idle (§9).
 *
 * @since 0.1.0
 */
import {
  Cause,
  Clock,
  Duration,
  Effect,
  Either,
  Equal,
  Exit,
  Fiber,
  Option,
  ParseResult,
  PubSub,
  Queue,
  Runtime,
  Schedule,
  Schema,
  Scope,
  Stream
} from "effect"
import * as Delivery from "./Delivery.js"
import { IdGenerator, type IdGeneratorService, random as randomIds } from "./IdGenerator.js"
import * as Inbox from "./Inbox.js"
import { deepFreezeJson, InvalidJson } from "./internal/json.js"
import { freezeJson, isContentShape, isUserMessageShape } from "./internal/logCodec.js"
import { replayInbox } from "./internal/fate.js"
import { currentRuntime } from "./internal/fork.js"
import { repairDrafts } from "./internal/repair.js"
import { VirtualClock } from "./internal/virtualClock.js"
import * as History from "./History.js"
import { Mutex } from "./internal/mutex.js"
import { type Resume, resumeAll, waitIn } from "./internal/waiters.js"
import {
  type AssistantMessage,
  type ContentBlock,
  flatten,
  InvalidMessage,
  type Message,
  type MessageId,
  UserMessage
} from "./Message.js"
import { Model, ModelError, type ModelPart, type ModelRequest, type ModelService } from "./Model.js"
import { defaultService as defaultPreStep, PreStep, type PreStepDecision, type PreStepService } from "./PreStep.js"
import type {
  AbortCause,
  EventDraft,
  FinishReason,
  SessionEvent,
  SplicedData,
  ToolErrorCode,
  TurnEndReason,
  Usage
} from "./SessionEvent.js"
import { coreEventTypes } from "./SessionEvent.js"
import {
  type SessionLog,
  type SessionLogError,
  type SessionNotFound,
  SessionStoreError
} from "./SessionLog.js"
import { SessionStore } from "./SessionStore.js"
import * as Tool from "./Tool.js"

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/**
 * The agent was disposed: deliveries fail from the moment `dispose` is called (DESIGN.md §9).
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentDisposed extends Schema.TaggedError<AgentDisposed>()("AgentDisposed", {
  message: Schema.String,
  agentId: Schema.String
}) {}

/**
 * A message id that is pending or was ever logged in this session (DESIGN.md §2, §4).
 *
 * @since 0.1.0
 * @category errors
 */
export class DuplicateMessageId extends Schema.TaggedError<DuplicateMessageId>()("DuplicateMessageId", {
  message: Schema.String,
  messageId: Schema.String
}) {}

/**
 * A plugin operation named a message that is not pending (DESIGN.md §4).
 *
 * @since 0.1.0
 * @category errors
 */
export class MessageNotPending extends Schema.TaggedError<MessageNotPending>()("MessageNotPending", {
  message: Schema.String,
  messageId: Schema.String
}) {}

/**
 * A standalone plugin event with a core type, a type without a `/`, or non-JSON data.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidEvent extends Schema.TaggedError<InvalidEvent>()("InvalidEvent", {
  message: Schema.String
}) {}

/**
 * Errors of the delivery methods (DESIGN.md §5.1): nothing is logged when one is returned.
 *
 * @since 0.1.0
 * @category errors
 */
export type DeliveryError = InvalidMessage | DuplicateMessageId | AgentDisposed | SessionStoreError

// ---------------------------------------------------------------------------------------------
// Public shapes
// ---------------------------------------------------------------------------------------------

/**
 * `"idle" | "running"` (DESIGN.md §5.2). Status stays `running` across the turns of one run.
 *
 * @since 0.1.0
 * @category models
 */
export type AgentStatus = "idle" | "running"

/**
 * A live notification that is not a durable event (DESIGN.md §4, §5.3).
 *
 * @since 0.1.0
 * @category models
 */
export type AgentNotification =
  | { readonly type: "agent/inbox/inserted"; readonly message: Message }
  | { readonly type: "agent/inbox/claimed"; readonly message: Message; readonly turn: number }
  | { readonly type: "agent/inbox/discarded"; readonly message: Message }
  | { readonly type: "agent/status"; readonly status: AgentStatus }
  | {
    readonly type: "assistant/delta"
    readonly turn: number
    readonly step: number
    readonly text?: string | undefined
    readonly reasoning?: string | undefined
    readonly toolCall?: { readonly id: string; readonly name: string; readonly arguments: string } | undefined
  }
  | { readonly type: "assistant/retry"; readonly turn: number; readonly step: number; readonly attempt: number }

/**
 * What `agent.events` carries: every durable event as it commits (it has a `seq`), and the live
 * notifications (DESIGN.md §5.3).
 *
 * @since 0.1.0
 * @category models
 */
export type AgentEvent = SessionEvent | AgentNotification

/**
 * The delivery input: a `UserMessage`, or a string (one text block, source `{kind:"user"}`).
 *
 * @since 0.1.0
 * @category models
 */
export type DeliveryInput = UserMessage | string

/**
 * An agent (DESIGN.md §5).
 *
 * @since 0.1.0
 * @category models
 */
export interface Agent {
  /** The session id. */
  readonly id: string
  /** The session log this agent writes. */
  readonly log: SessionLog
  /** Queue a direct prompt in `next-turn` (waking). One send, one turn (§5.1). */
  readonly followup: (input: DeliveryInput) => Effect.Effect<Delivery.Delivery, DeliveryError>
  /** Join the running turn at its next step boundary, or start a turn when idle (waking, §5.1). */
  readonly steer: (input: DeliveryInput) => Effect.Effect<Delivery.Delivery, DeliveryError>
  /** Supplementary context in `next-step` (non-waking, §5.1): never causes a model request by itself. */
  readonly inject: (message: UserMessage) => Effect.Effect<Delivery.Delivery, DeliveryError>
  /**
   * Cancel (§9): unless `keepInbox`, durably clears both queues (`outcome:"canceled"`, `cause`);
   * then interrupts the running turn, which ends `{kind:"aborted", reason: cause}`. Returns when
   * the interrupted turn is closed. `cause` defaults to `{kind:"user"}`; the first cause wins.
   */
  readonly cancel: (
    cause?: AbortCause | undefined,
    options?: { readonly keepInbox?: boolean | undefined }
  ) => Effect.Effect<void, SessionStoreError | InvalidEvent>
  /** Dispose (§9): deliveries fail with `AgentDisposed` from now on; cancel `{kind:"disposed"}`; wait for quiescence. */
  readonly dispose: Effect.Effect<void, SessionStoreError>
  /** Current status. */
  readonly status: Effect.Effect<AgentStatus>
  /** The status now, then every change. */
  readonly statusChanges: Stream.Stream<AgentStatus>
  /** Waits until the agent is idle. */
  readonly awaitIdle: Effect.Effect<void>
  /** Live events (§5.3); subscribes when the stream starts. */
  readonly events: Stream.Stream<AgentEvent>
  /** Subscribes now (in the scope) and returns the queue of live events: subscribe first, then act. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<AgentEvent>, never, Scope.Scope>
  /** The inbox state now. */
  readonly inbox: Effect.Effect<Inbox.InboxState>
  /** The model-visible history now (a copy). */
  readonly history: Effect.Effect<ReadonlyArray<Message>>
  /** Plugin operation (§4): replace a pending message; one `outcome:"canceled"` splice, no cause. */
  readonly replace: (
    id: string,
    message: UserMessage
  ) => Effect.Effect<void, MessageNotPending | InvalidMessage | DuplicateMessageId | AgentDisposed | SessionStoreError>
  /** Plugin operation (§4): remove a pending message; its fate is `discarded`. */
  readonly remove: (id: string) => Effect.Effect<void, MessageNotPending | SessionStoreError>
  /** Plugin operation (§4): clear one queue or both (`next-step` first). */
  readonly clear: (target?: "next-turn" | "next-step" | undefined) => Effect.Effect<void, SessionStoreError>
  /** Appends a standalone log-only plugin event `<plugin>/<name>`; it opens no turn (§3.2). */
  readonly appendEvent: (type: string, data: unknown) => Effect.Effect<SessionEvent, InvalidEvent | SessionStoreError>
}

/**
 * Options of `Agent.make`.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentOptions {
  /** Session instructions (recorded in `request/header`, sent as the system prompt). */
  readonly instructions?: string | undefined
  readonly tools?: ReadonlyArray<Tool.Tool<any>> | undefined
  /** Pre-execute guards, outermost first (§8). */
  readonly guards?: ReadonlyArray<Tool.ToolGuard> | undefined
  /** Post-processing hooks, outermost first (§8). */
  readonly hooks?: ReadonlyArray<Tool.ToolHook> | undefined
  /** Provider settings passed with every request (`maxTokens`, `temperature`, …). */
  readonly settings?: { readonly [key: string]: unknown } | undefined
  /** Bound on concurrently running tool calls of one response (default 8, §8). */
  readonly toolConcurrency?: number | undefined
  /**
   * The most steps one turn may run (default 100). When a step ends and another would run past
   * the limit, the turn ends `{kind:"error", error:{code:"MAX_STEPS"}}` instead; pending steering
   * then starts the next turn as usual (§6.5). Guards against a model that calls tools forever.
   */
  readonly maxSteps?: number | undefined
  /** Retry schedule for retryable model errors (default: 3 attempts, exponential from 500 ms, §11). */
  readonly retry?: Schedule.Schedule<unknown, ModelError> | undefined
  /** Session id (default: random). */
  readonly sessionId?: string | undefined
  readonly cwd?: string | undefined
}

// ---------------------------------------------------------------------------------------------
// Internal state
// ---------------------------------------------------------------------------------------------

type CallPhase = "pending" | "running" | "done" | "committed"

interface CallState {
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

interface Accumulator {
  content: Array<ContentBlock>
  toolCalls: Array<{ readonly id: string; readonly name: string; readonly rawArguments: string }>
  usage: Usage | undefined
  finish: FinishReason | undefined
  streamed: boolean
}

interface TurnState {
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
  /** State update of a prefix draft appended with the step's end. */
  onCommit: (() => void) | undefined
}

const newTurnState = (): TurnState => ({
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
  onCommit: undefined
})

/** A validated tool call: its tool and decoded arguments, or the error result to record (§8). */
type Validated =
  | { readonly ok: true; readonly tool: Tool.Tool<any>; readonly args: unknown }
  | { readonly ok: false; readonly code: ToolErrorCode; readonly text: string }

/** Each tool's arguments decoder, built once (all errors reported). */
const decoders = new WeakMap<Tool.Tool<any>, (u: unknown) => Either.Either<unknown, ParseResult.ParseError>>()
const decoderOf = (tool: Tool.Tool<any>) => {
  let decode = decoders.get(tool)
  if (decode === undefined) {
    const decodeEither = Schema.decodeUnknownEither(tool.parameters, { errors: "all" })
    decode = (u) => decodeEither(u)
    decoders.set(tool, decode)
  }
  return decode
}

/** A tool call's context (§8): a class, so that a call allocates one object, not closures. */
class CallContext implements Tool.ToolContext {
  constructor(
    readonly callId: string,
    readonly turn: number,
    readonly step: number,
    readonly agent: Tool.ToolAgent,
    private readonly ids: IdGeneratorService
  ) {}
  get makeMessage(): Tool.ToolContext["makeMessage"] {
    return (input) =>
      UserMessage.make(
        typeof input === "string"
          ? { text: input, source: { kind: "tool", callId: this.callId } }
          : input.source === undefined
          ? { ...input, source: { kind: "tool", callId: this.callId } }
          : input
      ).pipe(Effect.provideService(IdGenerator, this.ids))
  }
}

/** What a critical section appends, and the state update to apply once it is durable. */
interface Section<R> {
  readonly drafts: ReadonlyArray<EventDraft>
  readonly apply: (events: ReadonlyArray<SessionEvent>) => R
}

const NO_EVENTS: ReadonlyArray<SessionEvent> = Object.freeze([])

/**
 * A count option (`toolConcurrency`, `maxSteps`) as a whole number ≥ 1: absent or NaN gives the
 * default, a fraction is rounded down, anything below 1 gives 1, Infinity stays (no bound).
 */
const countOption = (value: number | undefined, fallback: number): number => {
  if (value === undefined || Number.isNaN(value)) return fallback
  return value === Infinity ? Infinity : Math.max(1, Math.floor(value))
}

/** Raw tool arguments that decode as `{}`. */
const BLANK = /^\s*$/

const USER_CAUSE: AbortCause = Object.freeze({ kind: "user" })
const NO_TOOLS: ReadonlyMap<string, Tool.Tool<any>> = new Map()
const NO_DEFINITIONS: ReadonlyArray<Tool.Tool["definition"]> = Object.freeze([])
const DISPOSED_CAUSE: AbortCause = Object.freeze({ kind: "disposed" })

const defaultRetry: Schedule.Schedule<unknown, ModelError> = Schedule.exponential("500 millis").pipe(
  Schedule.zipRight(Schedule.identity<ModelError>()),
  Schedule.modifyDelay((error, delay) =>
    error.retryAfterMs !== undefined ? Duration.max(delay, Duration.millis(error.retryAfterMs)) : delay
  ),
  Schedule.intersect(Schedule.recurs(2))
) as any

const errorName: Record<ToolErrorCode, string> = {
  UNKNOWN_TOOL: "UnknownTool",
  INVALID_ARGUMENTS: "InvalidArguments",
  DENIED: "Denied",
  TOOL_FAILED: "ToolFailed",
  TRUNCATED: "Truncated",
  ABORTED: "Aborted",
  TOOL_ABORTED_BEFORE_DISPATCH: "AbortedBeforeDispatch",
  TOOL_OUTCOME_UNKNOWN: "OutcomeUnknown",
  TOOL_NOT_STARTED: "NotStarted"
}

const messageOf = (u: unknown): string => {
  if (u instanceof Error) return u.message
  if (typeof u === "object" && u !== null && "message" in u) return String((u as { message: unknown }).message)
  return String(u)
}

const causeMessage = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return messageOf(failure.value)
  const defect = Cause.dieOption(cause)
  if (Option.isSome(defect)) return messageOf(defect.value)
  return Cause.pretty(cause)
}

class AgentImpl implements Agent {
  readonly id: string
  readonly log: SessionLog
  private readonly model: ModelService
  private readonly preStep: PreStepService
  private readonly ids: IdGeneratorService
  private readonly options: AgentOptions
  private readonly tools: ReadonlyMap<string, Tool.Tool<any>>
  private lockCell: Mutex | undefined = undefined
  /** The inbox state; replaced only under the lock, after the splice is durable (§4). */
  // Allocated on first use (§5.4: an idle agent is a plain record).
  private queuesCell: Inbox.MutableInbox | undefined = undefined
  private seenCell: Set<string> | undefined = undefined
  private historyCell: Array<Message> | undefined = undefined
  private get queues(): Inbox.MutableInbox {
    return this.queuesCell ?? (this.queuesCell = new Inbox.MutableInbox())
  }
  /** Every message id pending or ever logged in this session (§2). */
  private get seen(): Set<string> {
    return this.seenCell ?? (this.seenCell = new Set())
  }
  private get historyList(): Array<Message> {
    return this.historyCell ?? (this.historyCell = [])
  }
  private turnCounter = 0
  private running = false
  private disposed = false
  private cancelCause: AbortCause | undefined = undefined
  private latch = false
  private driver: Fiber.RuntimeFiber<void, never> | undefined = undefined
  private current: TurnState | undefined = undefined
  private hub: PubSub.PubSub<AgentEvent> | undefined = undefined
  private subscribers = 0
  private waiters: Map<string, Array<Resume<Delivery.DeliveryOutcome>>> | undefined = undefined
  private observers: Map<string, (outcome: Delivery.DeliveryOutcome) => void> | undefined = undefined
  private idleWaiters: Array<Resume<void>> | undefined = undefined
  private headerKey: string | undefined = undefined
  private readonly toolDefinitions: ReadonlyArray<Tool.Tool["definition"]>
  private readonly fastPreStep: boolean
  private readonly hasGuards: boolean
  /** `toolConcurrency` and `maxSteps`, made whole numbers ≥ 1 (see `countOption`). */
  private readonly toolBound: number
  private readonly maxSteps: number
  /** The log's synchronous append, when it has one: critical sections are then one step, unlocked. */
  private readonly appendSync: SessionLog["appendSync"]

  constructor(
    log: SessionLog,
    model: ModelService,
    preStep: PreStepService,
    ids: IdGeneratorService,
    options: AgentOptions
  ) {
    this.id = log.id
    this.log = log
    this.model = model
    this.preStep = preStep
    this.fastPreStep = preStep === defaultPreStep
    this.appendSync = log.appendSync
    this.hasGuards = options.guards !== undefined && options.guards.length > 0
    this.toolBound = countOption(options.toolConcurrency, 8)
    this.maxSteps = countOption(options.maxSteps, 100)
    this.ids = ids
    this.options = options
    if (options.tools === undefined || options.tools.length === 0) {
      this.tools = NO_TOOLS
      this.toolDefinitions = NO_DEFINITIONS
    } else {
      const tools = new Map<string, Tool.Tool<any>>()
      for (const tool of options.tools) tools.set(tool.name, tool)
      this.tools = tools
      this.toolDefinitions = options.tools.map((t) => t.definition)
    }
  }

  /**
   * The state of a resumed session, rebuilt from its (repaired) log (§10): the inbox from its
   * splices, the history from its surface events, the ids ever used, the turn counter from the
   * last `turn/start`, the request configuration last logged.
   */
  restore(events: ReadonlyArray<SessionEvent>): void {
    const options = { header: this.log.header }
    this.queuesCell = Inbox.MutableInbox.from(replayInbox(events, options), this.log.header.version === 0)
    this.historyCell = History.derive(events, options)
    const seen = new Set<string>()
    let turns = 0
    for (const e of events) {
      const data = e.data as any
      switch (e.type) {
        case "agent/inbox/spliced":
          for (const m of data.inserted ?? []) seen.add(m.id)
          break
        case "user/message":
          seen.add(data.id)
          break
        case "assistant/message":
        case "tool/result":
          seen.add(data.message.id)
          break
        case "turn/start":
          if (data.turn > turns) turns = data.turn
          break
        case "request/header":
          this.headerKey = `${data.provider}\u0000${data.model}`
          break
      }
    }
    this.seenCell = seen
    this.turnCounter = turns
  }

  /** Starts a run when waking work is pending (resume with `continuePending`). */
  continuePending(): Effect.Effect<void, SessionStoreError> {
    return this.critical(() => ({
      drafts: [],
      apply: () => {
        if (!this.running && !this.disposed && this.queues.hasWakingWork) this.startRun()
      }
    }))
  }

  // -------------------------------------------------------------------------------------------
  // Plumbing
  // -------------------------------------------------------------------------------------------

  private withLock<A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> {
    const lock = this.lockCell ?? (this.lockCell = new Mutex())
    return lock.withLock(effect)
  }

  /**
   * Runs a critical section (§4): `build` reads the state and returns the drafts to append and
   * the update to apply once they are durable (or an effect: an early exit, nothing appended).
   * When the log appends synchronously the whole section is one synchronous step, which nothing
   * can interleave with; otherwise it runs under the agent's lock, uninterruptibly.
   */
  private critical<R, E = never>(
    build: () => Section<R> | Effect.Effect<R, E>
  ): Effect.Effect<R, E | SessionStoreError> {
    const appendSync = this.appendSync
    if (appendSync !== undefined) {
      return Effect.clockWith((clock): Effect.Effect<R, E | SessionStoreError> => {
        const section = build()
        return Effect.isEffect(section) ? section : this.commitNow(appendSync, clock, section)
      })
    }
    return this.withLock(Effect.suspend((): Effect.Effect<R, E | SessionStoreError> => {
      const section = build()
      return Effect.isEffect(section) ? section : Effect.map(this.append(section.drafts), section.apply)
    }))
  }

  /**
   * Appends `drafts` outside the lock and applies `apply` once they are durable (one
   * synchronous step, or uninterruptibly). For appends whose position no other section decides.
   */
  private commit<R>(
    drafts: ReadonlyArray<EventDraft>,
    apply: (events: ReadonlyArray<SessionEvent>) => R
  ): Effect.Effect<R, SessionStoreError> {
    const appendSync = this.appendSync
    if (appendSync !== undefined) {
      return Effect.clockWith((clock) => this.commitNow(appendSync, clock, { drafts, apply }))
    }
    return Effect.uninterruptible(Effect.map(this.append(drafts), apply))
  }

  private commitNow<R>(
    appendSync: NonNullable<SessionLog["appendSync"]>,
    clock: Clock.Clock,
    section: Section<R>
  ): Effect.Effect<R, SessionStoreError> {
    if (section.drafts.length === 0) return Effect.succeed(section.apply(NO_EVENTS))
    const events = appendSync(section.drafts, clock.unsafeCurrentTimeMillis())
    if (events instanceof SessionStoreError) return Effect.fail(events)
    this.publishAll(events)
    return Effect.succeed(section.apply(events))
  }

  private publish(event: AgentEvent): void {
    if (this.hub !== undefined) this.hub.unsafeOffer(event)
  }

  private publishAll(events: ReadonlyArray<AgentEvent>): void {
    if (this.hub !== undefined) for (const e of events) this.hub.unsafeOffer(e)
  }

  /** Appends drafts durably and publishes the committed events. */
  private append(drafts: ReadonlyArray<EventDraft>): Effect.Effect<ReadonlyArray<SessionEvent>, SessionStoreError> {
    return Effect.tap(this.log.append(drafts), (events) => {
      this.publishAll(events)
    })
  }

  private resolve(id: string, outcome: Delivery.DeliveryOutcome): void {
    const observers = this.observers
    if (observers !== undefined) {
      const observer = observers.get(id)
      if (observer !== undefined) {
        observers.delete(id)
        observer(outcome)
      }
    }
    const waiters = this.waiters
    if (waiters === undefined) return
    const list = waiters.get(id)
    if (list !== undefined) {
      waiters.delete(id)
      resumeAll(list, Effect.succeed(outcome))
    }
  }

  private nextId(): Effect.Effect<string> {
    return this.ids.next
  }

  private setIdle(): void {
    this.running = false
    this.driver = undefined
    this.cancelCause = undefined
    this.latch = false
    this.current = undefined
    this.publish({ type: "agent/status", status: "idle" })
    const waiters = this.idleWaiters
    if (waiters !== undefined) {
      this.idleWaiters = undefined
      resumeAll(waiters, Effect.void)
    }
  }

  /** Starts a run: called inside a critical section. */
  private startRun(): void {
    this.running = true
    this.publish({ type: "agent/status", status: "running" })
    this.forkDriver()
  }

  /**
   * Forks the driver fiber at once, from plain code inside a critical section, as a daemon that
   * inherits the current fiber's context and FiberRefs (as `Effect.forkDaemon` does); it starts
   * on the scheduler, after the section, uninterruptible until its first turn begins, so that a
   * cancel landing before it runs still closes the turn and settles the agent.
   */
  private forkDriver(): void {
    this.driver = Runtime.runFork(currentRuntime(true))(this.runLoop(), { immediate: false })
  }

  // -------------------------------------------------------------------------------------------
  // Delivery (§5.1)
  // -------------------------------------------------------------------------------------------

  private toMessage(input: DeliveryInput): Effect.Effect<UserMessage, InvalidMessage> {
    if (typeof input === "string") {
      return Effect.map(this.nextId(), (id) => Object.freeze({
        id: flatten(id) as MessageId,
        role: "user" as const,
        content: Object.freeze([Object.freeze({ type: "text" as const, text: input })]),
        source: Object.freeze({ kind: "user" })
      }))
    }
    return this.checkMessage(input)
  }

  /**
   * Checks a caller's message before anything is logged (§2): plain JSON (deep-frozen in place;
   * frozen or not, every part is checked) and the shape the log reader accepts, so that every
   * logged message reads back.
   */
  private checkMessage(message: UserMessage): Effect.Effect<UserMessage, InvalidMessage> {
    return Effect.try({
      try: () => {
        deepFreezeJson(message, "message")
        if (!isUserMessageShape(message)) {
          throw new InvalidJson(
            "is not a UserMessage (string id, role \"user\", content blocks, source with a string kind)",
            "message"
          )
        }
        return message
      },
      catch: (e) =>
        new InvalidMessage({
          message: e instanceof InvalidJson ? `message ${e.message}` : String(e),
          path: e instanceof InvalidJson ? e.path : "message"
        })
    })
  }

  private disposedError(): AgentDisposed {
    return new AgentDisposed({ message: `agent ${this.id} is disposed`, agentId: this.id })
  }

  private deliver(
    input: DeliveryInput,
    mode: "followup" | "steer" | "inject"
  ): Effect.Effect<Delivery.Delivery, DeliveryError> {
    if (this.disposed) return Effect.fail(this.disposedError())
    return Effect.flatMap(this.toMessage(input), (message) =>
      this.critical((): Section<Delivery.Delivery> | Effect.Effect<never, DeliveryError> => {
        if (this.disposed) return Effect.fail(this.disposedError())
        if (this.seen.has(message.id)) {
          return Effect.fail(
            new DuplicateMessageId({
              message: `message id ${message.id} is pending or was already logged in session ${this.id}`,
              messageId: message.id
            })
          )
        }
        const state = this.queues
        // From a cancel until idle, a waking delivery goes to next-turn and sets the latch (§9).
        const unwinding = this.cancelCause !== undefined
        const target = mode === "followup" || (mode === "steer" && unwinding) ? "next-turn" : "next-step"
        const data: SplicedData = target === "next-turn"
          ? { target, start: state.nextTurn.length, inserted: [message] }
          : mode === "steer"
          ? { target, start: state.nextStep.length, inserted: [message], wake: true }
          : { target, start: state.nextStep.length, inserted: [message] }
        return {
          drafts: [{ type: "agent/inbox/spliced", data }],
          apply: () => {
            this.seen.add(message.id)
            state.apply(data)
            this.publish({ type: "agent/inbox/inserted", message })
            if (mode !== "inject") {
              if (unwinding) this.latch = true
              else if (!this.running) this.startRun()
            }
            return { messageId: message.id, outcome: this.outcomeOf(message.id) }
          }
        }
      }))
  }

  // Public members are getters on the prototype, bound and cached on first use, so that an
  // idle agent that was never used allocates none of them (§5.4) and detached calls
  // (`Effect.flatMap(msg, agent.followup)`) still work.
  private bound: Record<string, unknown> | undefined = undefined
  private bind<T>(name: string, make: () => T): T {
    const bound = this.bound ?? (this.bound = {})
    return (bound[name] ?? (bound[name] = make())) as T
  }

  get followup() {
    return this.bind("followup", () => (input: DeliveryInput) => this.deliver(input, "followup"))
  }
  get steer() {
    return this.bind("steer", () => (input: DeliveryInput) => this.deliver(input, "steer"))
  }
  get inject() {
    return this.bind("inject", () => (message: UserMessage) => this.deliver(message, "inject"))
  }

  private outcomeOf(id: string): Effect.Effect<Delivery.DeliveryOutcome> {
    return Effect.suspend(() => {
      if (this.isUndecided(id)) {
        const waiters = this.waiters ?? (this.waiters = new Map())
        let list = waiters.get(id)
        if (list === undefined) {
          list = []
          waiters.set(id, list)
        }
        return waitIn(list)
      }
      const fate = Delivery.fateOf(this.log.events(), id)
      if (fate === undefined || fate._tag === "Pending") {
        return Effect.dieMessage(`no fate for message ${id} in session ${this.id}`)
      }
      return Effect.succeed(fate as Delivery.DeliveryOutcome)
    })
  }

  /**
   * Calls `observer` when the fate of a pending or claimed message is decided, synchronously
   * with the decision (no fiber). Returns false when the message is not undecided.
   */
  observeOutcome(id: string, observer: (outcome: Delivery.DeliveryOutcome) => void): boolean {
    if (!this.isUndecided(id)) return false
    ;(this.observers ?? (this.observers = new Map())).set(id, observer)
    return true
  }

  private isUndecided(id: string): boolean {
    if (Inbox.find(this.queues, id) !== undefined) return true
    const claimed = this.current?.claimed
    if (claimed !== undefined) for (const m of claimed) if (m.id === id) return true
    return false
  }

  // -------------------------------------------------------------------------------------------
  // Plugin inbox operations (§4)
  // -------------------------------------------------------------------------------------------

  private notPending(id: string): MessageNotPending {
    return new MessageNotPending({ message: `message ${id} is not pending in session ${this.id}`, messageId: id })
  }

  get replace() {
    return this.bind("replace", () => (id: string, message: UserMessage) => this.replaceImpl(id, message))
  }

  private replaceImpl(id: string, message: UserMessage) {
    if (this.disposed) return Effect.fail(this.disposedError())
    return Effect.flatMap(this.checkMessage(message), (msg) =>
      this.critical((): Section<void> | Effect.Effect<never, MessageNotPending | DuplicateMessageId> => {
        const state = this.queues
        const at = Inbox.find(state, id)
        if (at === undefined) return Effect.fail(this.notPending(id))
        if (this.seen.has(msg.id)) {
          return Effect.fail(
            new DuplicateMessageId({ message: `message id ${msg.id} is already used`, messageId: msg.id })
          )
        }
        const data: SplicedData = { target: at[0], start: at[1], removedCount: 1, inserted: [msg], outcome: "canceled" }
        const splices = this.spliceSection(state, [data])
        return {
          drafts: splices.drafts,
          apply: (events) => {
            splices.apply(events)
            this.seen.add(msg.id)
            this.publish({ type: "agent/inbox/inserted", message: msg })
          }
        }
      }))
  }

  get remove() {
    return this.bind("remove", () => (id: string) => this.removeImpl(id))
  }

  private removeImpl(id: string) {
    return this.critical((): Section<void> | Effect.Effect<never, MessageNotPending> => {
      const state = this.queues
      const at = Inbox.find(state, id)
      if (at === undefined) return Effect.fail(this.notPending(id))
      return this.spliceSection(state, [{ target: at[0], start: at[1], removedCount: 1, inserted: [], outcome: "canceled" }])
    })
  }

  get clear() {
    return this.bind("clear", () => (target?: "next-turn" | "next-step" | undefined) => this.clearImpl(target))
  }

  private clearImpl(target?: "next-turn" | "next-step" | undefined) {
    return this.critical(() => {
      const state = this.queues
      const splices = Inbox.clearAll(state, undefined).filter((s) => target === undefined || s.target === target)
      return this.spliceSection(state, splices)
    })
  }

  /**
   * The section of canceled splices: append them, apply them, publish `discarded` and resolve
   * the removed messages' outcomes (by cause, §12). Built inside a critical section.
   */
  private spliceSection(state: Inbox.MutableInbox, splices: ReadonlyArray<SplicedData>): Section<void> {
    return {
      drafts: splices.map((data) => ({ type: "agent/inbox/spliced", data })),
      apply: () => {
        for (const data of splices) {
          const reason = data.cause === undefined ? "discarded" : data.cause.kind === "disposed" ? "disposed" : "canceled"
          for (const item of state.apply(data).removed) {
            this.publish({ type: "agent/inbox/discarded", message: item.message })
            this.resolve(item.message.id, Delivery.dropped(reason))
          }
        }
      }
    }
  }

  get appendEvent() {
    return this.bind("appendEvent", () => (type: string, data: unknown) => this.appendEventImpl(type, data))
  }

  private appendEventImpl(type: string, data: unknown) {
    if (coreEventTypes.has(type) || !type.includes("/") || type === "session") {
      return Effect.fail(new InvalidEvent({ message: `"${type}" is not a plugin event type (<plugin>/<name>, not a core type)` }))
    }
    return Effect.try({
      try: () => deepFreezeJson(data, "data"),
      catch: (e) => new InvalidEvent({ message: `event data is not JSON: ${messageOf(e)}` })
    }).pipe(Effect.flatMap((d) => this.commit([{ type, data: d }], (events) => events[0]!)))
  }

  // -------------------------------------------------------------------------------------------
  // Status, events
  // -------------------------------------------------------------------------------------------

  get status(): Effect.Effect<AgentStatus> {
    return Effect.sync((): AgentStatus => (this.running ? "running" : "idle"))
  }

  get awaitIdle(): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (!this.running) return Effect.void
      return waitIn(this.idleWaiters ?? (this.idleWaiters = []))
    })
  }

  get subscribe(): Effect.Effect<Queue.Dequeue<AgentEvent>, never, Scope.Scope> {
    return Effect.suspend(() => {
    const hub = this.hub ?? (this.hub = Effect.runSync(PubSub.unbounded<AgentEvent>()))
    this.subscribers++
    return Effect.flatMap(
      Effect.addFinalizer(() =>
        Effect.sync(() => {
          this.subscribers--
          if (this.subscribers === 0 && this.hub === hub) this.hub = undefined
        })
      ),
      () => PubSub.subscribe(hub)
    )
    })
  }

  get events(): Stream.Stream<AgentEvent> {
    return Stream.unwrapScoped(Effect.map(this.subscribe, (queue) => Stream.fromQueue(queue)))
  }

  get statusChanges(): Stream.Stream<AgentStatus> {
    return Stream.unwrapScoped(Effect.map(this.subscribe, (queue) =>
      Stream.concat(
        Stream.sync((): AgentStatus => (this.running ? "running" : "idle")),
        Stream.fromQueue(queue).pipe(
          Stream.filterMap((e) => e.type === "agent/status" ? Option.some((e as { status: AgentStatus }).status) : Option.none())
        )
      ))
    )
  }

  get inbox(): Effect.Effect<Inbox.InboxState> {
    return Effect.sync(() => this.queues.snapshot())
  }

  get history(): Effect.Effect<ReadonlyArray<Message>> {
    return Effect.sync((): ReadonlyArray<Message> => this.historyList.slice())
  }

  // -------------------------------------------------------------------------------------------
  // Cancel and dispose (§9)
  // -------------------------------------------------------------------------------------------

  get cancel() {
    return this.bind(
      "cancel",
      () => (cause?: AbortCause | undefined, options?: { readonly keepInbox?: boolean | undefined }) =>
        this.cancelImpl(cause, options)
    )
  }

  private cancelImpl(cause?: AbortCause | undefined, options?: { readonly keepInbox?: boolean | undefined }) {
    const c = cause ?? USER_CAUSE
    // The cause is logged (in splices and `turn/end`): it must be plain JSON with a string kind.
    if (c !== USER_CAUSE && c !== DISPOSED_CAUSE) {
      try {
        deepFreezeJson(c, "cause")
        if (typeof c !== "object" || c === null || typeof c.kind !== "string") throw new InvalidJson("has no string kind", "cause")
      } catch (e) {
        return Effect.fail(new InvalidEvent({ message: `the cancel cause is not plain JSON with a string kind: ${messageOf(e)}` }))
      }
    }
    return this.cancelNow(c, options)
  }

  private cancelNow(c: AbortCause, options?: { readonly keepInbox?: boolean | undefined }): Effect.Effect<void, SessionStoreError> {
    return Effect.flatMap(
      this.critical((): Section<Fiber.RuntimeFiber<void> | undefined> => {
        const state = this.queues
        const clear = options?.keepInbox === true ? undefined : this.spliceSection(state, Inbox.clearAll(state, c))
        return {
          drafts: clear === undefined ? [] : clear.drafts,
          apply: (events) => {
            if (clear !== undefined) clear.apply(events)
            if (!this.running) return undefined
            if (this.cancelCause === undefined) this.cancelCause = c
            return this.driver
          }
        }
      }),
      (fiber) =>
        fiber === undefined
          ? Effect.void
          : Effect.flatMap(Effect.fiberId, (self) =>
            Equal.equals(self, fiber.id()) ? Effect.interrupt : Effect.asVoid(Fiber.interrupt(fiber)))
    )
  }

  /** Disposes the agent when its scope closes; a store failure is logged. */
  get finalize(): Effect.Effect<void> {
    return Effect.catchAllCause(Effect.orDie(this.dispose), Effect.logError)
  }

  get dispose(): Effect.Effect<void, SessionStoreError> {
    return Effect.suspend(() => {
      this.disposed = true
      return Effect.ensuring(
        Effect.zipRight(this.cancelNow(DISPOSED_CAUSE), this.awaitIdle),
        Effect.sync(() => liveLogs.delete(this.log))
      )
    })
  }

  // -------------------------------------------------------------------------------------------
  // The driver (§6)
  // -------------------------------------------------------------------------------------------

  /**
   * The driver fiber's body: turns while the run goes on (§6.5). Written as plain effect
   * chains, not generators: this runs once per model step (STYLE.md "Hot path").
   */
  private runLoop(): Effect.Effect<void> {
    // The fiber starts uninterruptible (see `forkDriver`); only the turns are interruptible, so
    // a cancel that lands even before the fiber runs ends in `stopRun`'s clean-up.
    const loop = (t: TurnState): Effect.Effect<void> =>
      Effect.matchCauseEffect(Effect.interruptible(this.runTurn(t)), {
        onSuccess: (next) => (next === undefined ? Effect.void : loop(next)),
        onFailure: (cause) => this.stopRun(t, cause)
      })
    return Effect.suspend(() => {
      const first = newTurnState()
      this.current = first
      return loop(first)
    })
  }

  /** Ends a run that failed or was interrupted (§9): closes the aborted turn, or goes idle. */
  private stopRun(t: TurnState, cause: Cause.Cause<SessionStoreError>): Effect.Effect<void> {
    const idle = Effect.orDie(this.critical(() => ({ drafts: [], apply: () => this.setIdle() })))
    if (Cause.isInterruptedOnly(cause)) {
      // `current` is the turn the interruption hit (possibly the next one, already opened).
      return Effect.catchAllCause(
        Effect.asVoid(this.closeAborted(this.current ?? t)),
        (closed) => Effect.zipRight(Effect.logError("agent: could not close the aborted turn", closed), idle)
      )
    }
    // A defect (a broken plugin, a bug) or a failed append: the turn is closed durably with
    // `{kind:"error", code:"RUN_FAILED"}` like an aborted one, so the log stays valid; if even
    // that cannot be appended, the agent goes idle with the turn open (the store is broken).
    return Effect.zipRight(
      Effect.logError(`agent ${this.id}: the run failed`, cause),
      Effect.catchAllCause(
        Effect.asVoid(this.closeAborted(this.current ?? t, causeMessage(cause))),
        (closed) => Effect.zipRight(Effect.logError("agent: could not close the failed turn", closed), idle)
      )
    )
  }

  /**
   * One turn. Returns the next turn when the run goes on (opened, with its claim, in the same
   * append as this turn's `turn/end`, §6.5), else `undefined` (the agent went idle).
   */
  private runTurn(t: TurnState): Effect.Effect<TurnState | undefined, SessionStoreError> {
    if (t.turnOpen) return this.runStep(t, false)
    // The first turn of a run: turn/start and the claim, atomically (§6.1, §4).
    return Effect.flatMap(
      this.critical(() => {
        const drafts: Array<EventDraft> = []
        const open = this.openTurn(drafts)
        return { drafts, apply: () => open(t) }
      }),
      () => this.runStep(t, false)
    )
  }

  /** One step: the pre-step (unless entered with its claim), the model call, tools, the step's end. */
  private runStep(t: TurnState, toolContinuation: boolean): Effect.Effect<TurnState | undefined, SessionStoreError> {
    if (t.entered) {
      // With the default pre-step the step was entered together with its claim.
      t.entered = false
      return this.modelStep(t)
    }
    const batch = t.claimed ?? []
    return Effect.flatMap(
      Effect.exit(Effect.suspend(() => this.preStep.run({ agentId: this.id, turn: t.turn, step: t.step, messages: batch }))),
      (decision): Effect.Effect<TurnState | undefined, SessionStoreError> => {
        if (Exit.isFailure(decision)) {
          if (Cause.isInterruptedOnly(decision.cause)) return Effect.failCause(decision.cause as Cause.Cause<never>)
          return this.endTurn(t, {
            kind: "error",
            error: { message: causeMessage(decision.cause), code: "PRE_STEP_FAILED" }
          })
        }
        const d: PreStepDecision = decision.value
        const malformed = typeof d !== "object" || d === null
          ? "the pre-step returned no decision"
          : d._tag === "Reject"
          ? (typeof d.reason === "string" ? undefined : "a pre-step Reject reason is not a string")
          : d._tag === "Enter"
          ? undefined
          : "the pre-step returned something that is not a decision (Enter or Reject)"
        if (malformed !== undefined) {
          return this.endTurn(t, { kind: "error", error: { message: malformed, code: "PRE_STEP_FAILED" } })
        }
        if (d._tag === "Reject") return this.endTurn(t, { kind: "blocked", reason: d.reason })
        const checked = this.checkEntered(batch, d.messages)
        if (Either.isLeft(checked)) {
          return this.endTurn(t, { kind: "error", error: { message: checked.left, code: "PRE_STEP_FAILED" } })
        }
        const entered = checked.right
        if (entered.length === 0 && (t.step === 1 || !toolContinuation)) {
          return this.endTurn(t, { kind: "completed" }, true)
        }
        return Effect.flatMap(this.enterStep(t, batch, entered), () => this.modelStep(t))
      }
    )
  }

  /** The model call of an entered step and what follows it: tools, the step's end, the next step. */
  private modelStep(t: TurnState): Effect.Effect<TurnState | undefined, SessionStoreError> {
    return Effect.flatMap(this.callModel(t), (response): Effect.Effect<TurnState | undefined, SessionStoreError> => {
      if (Either.isLeft(response)) {
        const e = response.left
        return this.endTurn(t, {
          kind: "error",
          error: e.status !== undefined ? { message: e.message, code: e.code, status: e.status } : { message: e.message, code: e.code }
        })
      }
      const acc = response.right
      const truncated = acc.finish === "length"
      if (truncated) t.maxTokens = true
      const withTools = acc.toolCalls.length > 0
      const ended: Effect.Effect<"step" | TurnState | undefined, SessionStoreError> = withTools
        ? (truncated ? Effect.flatMap(this.logAssistant(t, acc, false), () => this.truncateCalls(t)) : this.toolStep(t, acc))
          .pipe(Effect.flatMap(() => this.endStep(t, !truncated)))
        : Effect.flatMap(this.nextId(), (id) => this.endStep(t, false, this.assistantDraft(t, acc, false, id)))
      return Effect.flatMap(ended, (next) =>
        next === "step" ? this.runStep(t, withTools && !truncated) : Effect.succeed(next))
    })
  }

  /**
   * Validates the entered batch (§7, §12 rule 6): each message was claimed at this pre-step
   * (same id) or has an id never seen; no id twice; plain frozen JSON.
   */
  private checkEntered(
    claimed: ReadonlyArray<UserMessage>,
    messages: ReadonlyArray<UserMessage>
  ): Either.Either<ReadonlyArray<UserMessage>, string> {
    if (!Array.isArray(messages)) return Either.left("pre-step Enter.messages is not an array")
    const ids = new Set<string>()
    const out: Array<UserMessage> = []
    for (const m of messages) {
      if (typeof m !== "object" || m === null || m.role !== "user" || typeof m.id !== "string") {
        return Either.left("pre-step returned something that is not a UserMessage")
      }
      if (!isUserMessageShape(m)) return Either.left(`pre-step returned message ${m.id}, which is not a well-formed UserMessage`)
      if (ids.has(m.id)) return Either.left(`pre-step returned message id ${m.id} twice`)
      ids.add(m.id)
      const wasClaimed = claimed.some((c) => c.id === m.id)
      if (!wasClaimed && this.seen.has(m.id)) {
        return Either.left(`pre-step returned message id ${m.id}, which was not claimed and is already used`)
      }
      try {
        deepFreezeJson(m, "message")
      } catch (e) {
        return Either.left(`pre-step returned a message that is not plain JSON: ${messageOf(e)}`)
      }
      out.push(m)
    }
    return Either.right(out)
  }

  /**
   * Adds `step/start`, one `user/message` per entered message, and `request/header` when it
   * changed, to `drafts`; returns the state update to run once they are durable.
   */
  private stepDrafts(
    turn: number,
    step: number,
    claimed: ReadonlyArray<UserMessage>,
    entered: ReadonlyArray<UserMessage>,
    drafts: Array<EventDraft>
  ): (t: TurnState) => void {
    drafts.push({ type: "step/start", data: { turn, step } })
    for (const m of entered) drafts.push({ type: "user/message", data: m })
    const key = this.requestKey()
    if (key !== this.headerKey) {
      drafts.push({
        type: "request/header",
        data: {
          turn,
          step,
          provider: this.model.provider,
          model: this.model.model,
          ...(this.options.instructions !== undefined ? { instructions: this.options.instructions } : {}),
          tools: this.toolDefinitions,
          settings: this.options.settings ?? {}
        }
      })
    }
    return (t) => {
      this.headerKey = key
      t.stepOpen = true
      t.claimed = undefined
      t.acc = undefined
      t.assistantLogged = false
      t.calls = undefined
      t.nextCommit = 0
      t.contextsInserted = 0
      for (const m of entered) {
        this.seen.add(m.id)
        this.historyList.push(m)
      }
      const outcome = Delivery.entered(turn, step)
      for (const m of entered) this.resolve(m.id, outcome)
      if (claimed !== entered) {
        for (const c of claimed) {
          if (!entered.some((m) => m.id === c.id)) this.resolve(c.id, Delivery.dropped("discarded"))
        }
      }
    }
  }

  /** Enters a step after a pre-step decided (its own append). */
  private enterStep(t: TurnState, claimed: ReadonlyArray<UserMessage>, entered: ReadonlyArray<UserMessage>) {
    const drafts: Array<EventDraft> = []
    const apply = this.stepDrafts(t.turn, t.step, claimed, entered, drafts)
    return this.commit(drafts, () => apply(t))
  }

  /**
   * With the default pre-step (enter the claimed batch as it is), a claim and the step it enters
   * are one append: the waterfall's answer is known when the claim is made. Not when the batch is
   * empty at a boundary that is not a tool continuation (that turn ends with no step).
   */
  private enterNow(batch: ReadonlyArray<UserMessage>, toolContinuation: boolean): boolean {
    return this.fastPreStep && (batch.length > 0 || toolContinuation)
  }

  private requestKey(): string {
    return `${this.model.provider}\u0000${this.model.model}`
  }

  /** Closes the turn with `reason` (and the open step) and decides the next turn (§6.5), under the lock. */
  private endTurn(t: TurnState, reason: TurnEndReason, enteredEmpty = false): Effect.Effect<TurnState | undefined, SessionStoreError> {
    return this.critical(() =>
      this.closeTurn(t, reason, [], enteredEmpty ? Delivery.dropped("discarded") : this.dropFor(reason))
    )
  }

  /** Runs the state update of a prefix draft (the assistant message) once the append is durable. */
  private committed(t: TurnState): void {
    const apply = t.onCommit
    if (apply !== undefined) {
      t.onCommit = undefined
      apply()
    }
  }

  /**
   * Adds `turn/start` and the turn-boundary claim to `drafts`; returns what to apply once they
   * are durable. Called under the lock.
   */
  private openTurn(drafts: Array<EventDraft>): (t: TurnState) => void {
    const turn = this.turnCounter + 1
    const claim = Inbox.claim(this.queues, true)
    drafts.push({ type: "turn/start", data: { turn } })
    for (const data of claim.splices) drafts.push({ type: "agent/inbox/spliced", data })
    const enter = this.enterNow(claim.batch, false)
      ? this.stepDrafts(turn, 1, claim.batch, claim.batch, drafts)
      : undefined
    return (t) => {
      this.turnCounter = turn
      for (const data of claim.splices) this.queues.apply(data)
      t.turn = turn
      t.turnOpen = true
      t.step = 1
      t.claimed = claim.batch
      this.current = t
      for (const m of claim.batch) this.publish({ type: "agent/inbox/claimed", message: m, turn })
      if (enter !== undefined) {
        enter(t)
        t.entered = true
      }
    }
  }

  /**
   * Appends `step/end` (if a step is open) and `turn/end {reason}`, and, iff waking work is
   * pending (§6.5), the next turn's `turn/start` and claim in the same append. Resolves the
   * undecided claimed messages with `claimedOutcome`. Built inside a critical section.
   */
  private closeTurn(
    t: TurnState,
    reason: TurnEndReason,
    prefix: ReadonlyArray<EventDraft>,
    claimedOutcome: Delivery.DeliveryOutcome
  ): Section<TurnState | undefined> {
    const drafts: Array<EventDraft> = prefix.slice()
    if (t.stepOpen) drafts.push({ type: "step/end", data: { turn: t.turn, step: t.step } })
    drafts.push({ type: "turn/end", data: { turn: t.turn, reason } })
    const open = !this.disposed && this.queues.hasWakingWork ? this.openTurn(drafts) : undefined
    return { drafts, apply: () => {
      this.committed(t)
      t.stepOpen = false
      t.turnOpen = false
      this.resolveClaimed(t, claimedOutcome)
      if (open === undefined) {
        this.setIdle()
        return undefined
      }
      const next = newTurnState()
      open(next)
      return next
    } }
  }

  private dropFor(reason: TurnEndReason): Delivery.DeliveryOutcome {
    switch (reason.kind) {
      case "blocked":
        return Delivery.dropped("rejected")
      case "error":
        return Delivery.dropped("failed")
      case "aborted":
        return Delivery.dropped(reason.reason.kind === "disposed" ? "disposed" : "canceled")
      case "interrupted":
        return Delivery.dropped("interrupted")
      default:
        return Delivery.dropped("discarded")
    }
  }

  private resolveClaimed(t: TurnState, outcome: Delivery.DeliveryOutcome): void {
    const claimed = t.claimed
    t.claimed = undefined
    if (claimed !== undefined) for (const m of claimed) this.resolve(m.id, outcome)
  }

  /** `step/end` and the continuation rule (§6.3), atomically; claims for the next step when one runs. */
  private endStep(
    t: TurnState,
    toolContinuation: boolean,
    assistant?: { readonly draft: EventDraft; readonly apply: () => void }
  ): Effect.Effect<"step" | TurnState | undefined, SessionStoreError> {
    return this.critical((): Section<"step" | TurnState | undefined> => {
      const state = this.queues
      const maxSteps = this.maxSteps
      // A response without tool calls is logged in the same append as its step's end; so are
      // the last results of a tool step.
      let prefix: ReadonlyArray<EventDraft> = []
      if (assistant !== undefined) {
        prefix = [assistant.draft]
        t.onCommit = assistant.apply
      } else {
        const results = this.pendingResults(t)
        if (results !== undefined) {
          prefix = results.drafts
          t.onCommit = results.apply
        }
      }
      if ((toolContinuation || state.hasWakingStep) && t.step >= maxSteps) {
        return this.closeTurn(t, {
          kind: "error",
          error: { message: `the turn reached its limit of ${maxSteps} steps`, code: "MAX_STEPS" }
        }, prefix, Delivery.dropped("failed"))
      }
      if (toolContinuation || state.hasWakingStep) {
        const drafts: Array<EventDraft> = [...prefix, { type: "step/end", data: { turn: t.turn, step: t.step } }]
        const claim = Inbox.claim(state, false)
        for (const data of claim.splices) drafts.push({ type: "agent/inbox/spliced", data })
        const enter = this.enterNow(claim.batch, toolContinuation)
          ? this.stepDrafts(t.turn, t.step + 1, claim.batch, claim.batch, drafts)
          : undefined
        return { drafts, apply: () => {
          this.committed(t)
          t.stepOpen = false
          t.step++
          t.claimed = claim.batch
          for (const data of claim.splices) state.apply(data)
          for (const m of claim.batch) this.publish({ type: "agent/inbox/claimed", message: m, turn: t.turn })
          if (enter !== undefined) {
            enter(t)
            t.entered = true
          }
          return "step" as const
        } }
      }
      const reason: TurnEndReason = t.maxTokens ? { kind: "max-tokens" } : { kind: "completed" }
      return this.closeTurn(t, reason, prefix, Delivery.dropped("discarded"))
    })
  }

  // -------------------------------------------------------------------------------------------
  // Model step (§6.2, §11)
  // -------------------------------------------------------------------------------------------

  private callModel(t: TurnState): Effect.Effect<Either.Either<Accumulator, ModelError>> {
    const request: ModelRequest = {
      sessionId: this.id,
      turn: t.turn,
      step: t.step,
      instructions: this.options.instructions,
      tools: this.toolDefinitions,
      messages: this.historyList,
      settings: this.options.settings
    }
    let attempt = 0
    const once = Effect.suspend(() => {
      attempt++
      if (attempt > 1) this.publish({ type: "assistant/retry", turn: t.turn, step: t.step, attempt })
      const acc: Accumulator = { content: [], toolCalls: [], usage: undefined, finish: undefined, streamed: false }
      t.acc = acc
      return Effect.as(this.model.respond(request, this.sinkFor(t, acc)), acc)
    })
    // The first attempt runs bare (no schedule driver on the success path); a retryable failure
    // is fed to the retry schedule, whose driver sleeps before each further attempt (§11).
    const outcome = (cause: Cause.Cause<ModelError>): Effect.Effect<Either.Either<Accumulator, ModelError>> => {
      if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
      // The failed attempt's deltas are withdrawn: a cancel during the retry wait logs no prefix.
      t.acc = undefined
      const failure = Cause.failureOption(cause)
      if (Option.isNone(failure)) {
        return Effect.succeed(Either.left(
          new ModelError({ code: "MODEL_FAILED", message: causeMessage(cause), retryable: false })
        ))
      }
      return Effect.succeed(Either.left(failure.value))
    }
    const schedule = this.options.retry ?? defaultRetry
    const retryFrom = (first: ModelError) =>
      Effect.flatMap(Schedule.driver(schedule), (driver) => {
        const loop = (error: ModelError): Effect.Effect<Either.Either<Accumulator, ModelError>> =>
          !error.retryable
            ? Effect.succeed(Either.left(error))
            : Effect.matchEffect(driver.next(error), {
              onFailure: () => Effect.succeed(Either.left(error)),
              onSuccess: () =>
                Effect.matchCauseEffect(once, {
                  onSuccess: (acc) => Effect.succeed(Either.right(acc)),
                  onFailure: (cause) =>
                    Effect.flatMap(outcome(cause), (e) => (Either.isLeft(e) ? loop(e.left) : Effect.succeed(e)))
                })
            })
        return loop(first)
      })
    return Effect.matchCauseEffect(once, {
      onSuccess: (acc) => Effect.succeed(Either.right(acc)),
      onFailure: (cause) =>
        Effect.flatMap(outcome(cause), (e) =>
          Either.isLeft(e) && e.left.retryable && e.left.code !== "MODEL_FAILED" ? retryFrom(e.left) : Effect.succeed(e))
    })
  }

  private sinkFor(t: TurnState, acc: Accumulator) {
    return {
      part: (part: ModelPart) =>
        Effect.sync(() => {
          const content = acc.content
          switch (part.type) {
            case "text-delta": {
              if (part.text.length === 0) return
              const last = content[content.length - 1]
              if (last !== undefined && last.type === "text") content[content.length - 1] = { type: "text", text: last.text + part.text }
              else content.push({ type: "text", text: part.text })
              acc.streamed = true
              if (this.hub) this.publish({ type: "assistant/delta", turn: t.turn, step: t.step, text: part.text })
              return
            }
            case "reasoning-delta": {
              const last = content[content.length - 1]
              if (last !== undefined && last.type === "reasoning") {
                const providerState = part.providerState ?? last.providerState
                content[content.length - 1] = providerState === undefined
                  ? { type: "reasoning", text: last.text + part.text }
                  : { type: "reasoning", text: last.text + part.text, providerState }
              } else {
                content.push(
                  part.providerState === undefined
                    ? { type: "reasoning", text: part.text }
                    : { type: "reasoning", text: part.text, providerState: part.providerState }
                )
              }
              acc.streamed = true
              if (this.hub) this.publish({ type: "assistant/delta", turn: t.turn, step: t.step, reasoning: part.text })
              return
            }
            case "tool-call": {
              // A call id repeated within one response would pair results ambiguously (§12 rule 3):
              // later duplicates get a suffix, in the logged message and in their tool events alike.
              let id = part.id
              if (acc.toolCalls.some((c) => c.id === id)) {
                let n = 2
                while (acc.toolCalls.some((c) => c.id === `${part.id}#${n}`)) n++
                id = `${part.id}#${n}`
              }
              content.push({ type: "tool-call", id, name: part.name, arguments: part.rawArguments })
              acc.toolCalls.push(id === part.id ? part : { ...part, id })
              acc.streamed = true
              if (this.hub) {
                this.publish({
                  type: "assistant/delta",
                  turn: t.turn,
                  step: t.step,
                  toolCall: { id: part.id, name: part.name, arguments: part.rawArguments }
                })
              }
              return
            }
            case "usage":
              acc.usage = part.usage
              return
            case "finish":
              acc.finish = part.reason
              return
          }
        })
    }
  }

  /** The `assistant/message` draft of a response, and the state update once it is durable. */
  private assistantDraft(
    t: TurnState,
    acc: Accumulator,
    interrupted: boolean,
    id: string
  ): { readonly draft: EventDraft; readonly apply: () => void; readonly calls: Array<CallState> | undefined } {
    const calls = acc.toolCalls.length > 0 ? acc.toolCalls.map((c) => this.newCall(c)) : undefined
    // The message is our own literals over strings from the adapter; only a reasoning block's
    // `providerState` is the adapter's own value, checked to be plain JSON.
    for (const block of acc.content) {
      if (block.type === "reasoning" && block.providerState !== undefined) deepFreezeJson(block.providerState, "providerState")
    }
    const message: AssistantMessage = freezeJson({
      id: id as MessageId,
      role: "assistant",
      content: acc.content,
      source: { kind: "model", provider: this.model.provider, model: this.model.model }
    }) as AssistantMessage
    const data = {
      turn: t.turn,
      step: t.step,
      message,
      ...(acc.usage !== undefined ? { usage: acc.usage } : {}),
      ...(interrupted ? { interrupted: true as const } : { finish: acc.finish ?? "stop" })
    }
    return {
      draft: { type: "assistant/message", data },
      calls,
      apply: () => {
        t.assistantLogged = true
        this.seen.add(message.id)
        this.historyList.push(message)
        // The calls exist from the moment their message is durable: an abort from here on
        // closes each of them (§9).
        if (calls !== undefined) {
          t.calls = calls
          t.nextCommit = 0
          t.contextsInserted = 0
        }
      }
    }
  }

  private logAssistant(t: TurnState, acc: Accumulator, interrupted: boolean): Effect.Effect<void, SessionStoreError> {
    return Effect.flatMap(this.nextId(), (id) => {
      const { apply, draft } = this.assistantDraft(t, acc, interrupted, id)
      return this.commit([draft], apply)
    })
  }

  // -------------------------------------------------------------------------------------------
  // Tools (§8)
  // -------------------------------------------------------------------------------------------

  private newCall(c: { readonly id: string; readonly name: string; readonly rawArguments: string }): CallState {
    return {
      id: c.id,
      name: c.name,
      rawArguments: c.rawArguments,
      phase: "pending",
      callLogged: false,
      content: [],
      isError: false,
      error: undefined,
      contexts: []
    }
  }

  private fail(call: CallState, code: ToolErrorCode, text: string): void {
    call.phase = "done"
    call.content = [{ type: "text", text }]
    call.isError = true
    call.error = { name: errorName[code], code }
    call.contexts = []
  }

  /** A truncated response runs none of its calls: each gets `tool/call` + `TRUNCATED` (§6.4). */
  private truncateCalls(t: TurnState): Effect.Effect<void, SessionStoreError> {
    const calls = t.calls ?? []
    for (const c of calls) this.fail(c, "TRUNCATED", "The response was truncated (max tokens); this tool call was not run.")
    return this.commitAbortedCalls(t, calls, false)
  }

  /**
   * Logs a response with tool calls and runs them (§8). Without guards, the assistant message
   * and the `tool/call`s of the first group (the calls that can start together) are one append.
   */
  private toolStep(t: TurnState, acc: Accumulator): Effect.Effect<void, SessionStoreError> {
    if (this.hasGuards) return Effect.flatMap(this.logAssistant(t, acc, false), () => this.runTools(t, undefined))
    return Effect.flatMap(this.nextId(), (id) => {
      const assistant = this.assistantDraft(t, acc, false, id)
      const calls = assistant.calls!
      const end = this.groupEnd(calls, 0, 0)
      if (end === 0) return Effect.flatMap(this.commit([assistant.draft], assistant.apply), () => this.runTools(t, undefined))
      const group = this.groupSection(t, calls.slice(0, end))
      return Effect.flatMap(
        this.commit([assistant.draft, ...group.drafts], () => {
          assistant.apply()
          return group.apply()
        }),
        (runs) => this.runTools(t, { end, runs })
      )
    })
  }

  /**
   * The end of the group of calls from `start` that can start together: up to the free slots
   * (`running` calls run), up to the next `exclusive` call (a leading exclusive call: none).
   */
  private groupEnd(calls: ReadonlyArray<CallState>, start: number, running: number): number {
    const bound = this.toolBound
    let end = start
    while (end < calls.length && end - start < bound - running && !(this.tools.get(calls[end]!.name)?.exclusive ?? false)) end++
    return end
  }

  /** Runs the calls of `t`, the first group already logged when `first` is given. */
  private runTools(
    t: TurnState,
    first: { readonly end: number; readonly runs: ReadonlyArray<Effect.Effect<void> | undefined> } | undefined
  ): Effect.Effect<void, SessionStoreError> {
    const calls = t.calls ?? []
    if (calls.length === 1) {
      // Fast path: no fiber for a single call.
      const prepared = first !== undefined
        ? Effect.succeed(first.runs[0])
        : this.hasGuards
        ? this.prepare(t, calls[0]!)
        : Effect.map(this.prepareGroup(t, calls), (runs) => runs[0])
      return prepared.pipe(
        Effect.flatMap((run) => (run === undefined ? Effect.void : run)),
        Effect.flatMap(() => this.commitBeforeStepEnd(t))
      )
    }
    return Effect.suspend(() => this.runBatch(t, calls, first))
  }

  /**
   * Runs a batch of calls (§8): each is prepared (validated, guarded, `tool/call` logged) in
   * model order and started at once in its own fiber, which runs on the spot until it completes
   * or suspends (a synchronous tool costs no scheduling); at most `toolConcurrency` run at a
   * time; an `exclusive` call waits for the running ones and runs alone. The driver commits the
   * results in call order whenever it waits, and at the end, several in one append.
   */
  private runBatch(
    t: TurnState,
    calls: ReadonlyArray<CallState>,
    first: { readonly end: number; readonly runs: ReadonlyArray<Effect.Effect<void> | undefined> } | undefined
  ): Effect.Effect<void, SessionStoreError> {
    const bound = this.toolBound
    const runtime = currentRuntime()
    const fibers: Array<Fiber.RuntimeFiber<void>> = []
    let running = 0
    let wake: Resume<void> | undefined = undefined
    const settled = () => {
      running--
      const resume = wake
      if (resume !== undefined) {
        wake = undefined
        resume(Effect.void)
      }
    }
    // Resumes at the next completion, or at once when `ready()` holds (checked as it registers).
    const completion = (ready: () => boolean) =>
      Effect.async<void>((resume) => {
        if (ready()) return resume(Effect.void)
        wake = resume
        return Effect.sync(() => {
          wake = undefined
        })
      })
    // Commits what is ready only when it has to wait (a batch that never waits commits its
    // results with the step's end).
    const waitUntil = (ready: () => boolean): Effect.Effect<void, SessionStoreError> =>
      Effect.suspend(() =>
        ready() ? Effect.void : Effect.flatMap(this.commitReady(t), () =>
          ready() ? Effect.void : Effect.flatMap(completion(ready), () => waitUntil(ready)))
      )
    const idle = () => running === 0
    const free = () => running < bound
    const isExclusive = (call: CallState) => this.tools.get(call.name)?.exclusive ?? false
    const start = (run: Effect.Effect<void> | undefined) => {
      if (run === undefined) return
      const fiber = Runtime.runFork(runtime)(run)
      if (fiber.unsafePoll() === null) {
        running++
        fibers.push(fiber)
        fiber.addObserver(settled)
      }
    }
    const dispatch = (i: number): Effect.Effect<void, SessionStoreError> => {
      // Once none runs, every result is done: the rest go with the step's end.
      if (i === calls.length) return Effect.flatMap(waitUntil(idle), () => this.commitBeforeStepEnd(t))
      const call = calls[i]!
      if (isExclusive(call)) {
        // A barrier: the running calls finish and their results are committed first; its
        // result is committed before any later call starts.
        return waitUntil(idle).pipe(
          Effect.flatMap(() => this.commitReady(t)),
          Effect.flatMap(() => this.prepare(t, call)),
          Effect.flatMap((run) => (run === undefined ? Effect.void : run)),
          Effect.flatMap(() => this.commitReady(t)),
          Effect.flatMap(() => dispatch(i + 1))
        )
      }
      if (!free()) return Effect.flatMap(waitUntil(free), () => dispatch(i))
      if (this.hasGuards) {
        return Effect.flatMap(this.prepare(t, call), (run) => {
          start(run)
          return dispatch(i + 1)
        })
      }
      // As many calls as there are free slots, up to the next exclusive one, in one append.
      const end = this.groupEnd(calls, i, running)
      return Effect.flatMap(this.prepareGroup(t, calls.slice(i, end)), (runs) => {
        for (const run of runs) start(run)
        return dispatch(end)
      })
    }
    const begin = first === undefined ? dispatch(0) : Effect.suspend(() => {
      for (const run of first.runs) start(run)
      return dispatch(first.end)
    })
    return Effect.onInterrupt(begin, () => Fiber.interruptAll(fibers))
  }

  /** The `tool/call` draft of a call (§8). */
  private callDraft(t: TurnState, call: CallState): EventDraft {
    return {
      type: "tool/call",
      data: { turn: t.turn, step: t.step, callId: call.id, name: call.name, arguments: call.rawArguments }
    }
  }

  /**
   * Validates a call (§8): a known tool and arguments that are JSON and decode with its
   * parameters `Schema`. Returns the decoded arguments, or the error result to record.
   */
  private validate(call: CallState): Validated {
    const tool = this.tools.get(call.name)
    if (tool === undefined) {
      return {
        ok: false,
        code: "UNKNOWN_TOOL",
        text: `Unknown tool "${call.name}". Available tools: ${[...this.tools.keys()].join(", ") || "none"}.`
      }
    }
    let parsed: unknown
    try {
      parsed = BLANK.test(call.rawArguments) ? {} : JSON.parse(call.rawArguments)
    } catch (e) {
      return { ok: false, code: "INVALID_ARGUMENTS", text: `The arguments of ${call.name} are not valid JSON: ${messageOf(e)}` }
    }
    const decoded = decoderOf(tool)(parsed)
    if (Either.isLeft(decoded)) {
      const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
        .map((i) => (i.path.length > 0 ? `${i.path.join(".")}: ` : "") + i.message)
        .join("; ")
      return { ok: false, code: "INVALID_ARGUMENTS", text: `Invalid arguments for ${call.name}: ${issues}` }
    }
    return { ok: true, tool, args: decoded.right }
  }

  /**
   * Validates, guards and logs `tool/call` for one call, in model order (§8). Returns the
   * execution (execute + hooks) to run, or `undefined` when the call already has its error
   * result (unknown tool, invalid arguments, denied, guard failure). Never fails but for the
   * store. Without guards, see `prepareGroup`.
   */
  private prepare(t: TurnState, call: CallState): Effect.Effect<Effect.Effect<void> | undefined, SessionStoreError> {
    return Effect.suspend(() => {
      const logCall = (after: () => void) =>
        this.commit([this.callDraft(t, call)], () => {
          // Still "pending": the call is running once its execution starts (§9 codes).
          call.callLogged = true
          after()
        })
      const failWith = (code: ToolErrorCode, text: string) =>
        Effect.as(logCall(() => this.fail(call, code, text)), undefined)
      const checked = this.validate(call)
      if (!checked.ok) return failWith(checked.code, checked.text)
      const guards = this.options.guards ?? []
      if (guards.length === 0) return Effect.as(logCall(() => {}), this.execution(t, call, checked.tool, checked.args))
      const info: Tool.ToolCall = {
        callId: call.id,
        name: call.name,
        arguments: checked.args,
        rawArguments: call.rawArguments,
        turn: t.turn,
        step: t.step
      }
      return Effect.flatMap(Effect.exit(runGuards(guards, info)), (g) => {
        if (Exit.isFailure(g)) {
          if (Cause.isInterruptedOnly(g.cause)) return Effect.failCause(g.cause as Cause.Cause<never>)
          return failWith("TOOL_FAILED", `The guard of ${call.name} failed: ${causeMessage(g.cause)}`)
        }
        if (g.value._tag === "Deny") return failWith("DENIED", `The call to ${call.name} was denied: ${g.value.reason}`)
        return Effect.as(logCall(() => {}), this.execution(t, call, checked.tool, checked.args))
      })
    })
  }

  /**
   * With no guards, validation is synchronous: a group of calls is validated and their
   * `tool/call`s logged in one append, in model order (§8). Returns each call's execution, or
   * `undefined` for a call that got its error result.
   */
  private prepareGroup(
    t: TurnState,
    calls: ReadonlyArray<CallState>
  ): Effect.Effect<ReadonlyArray<Effect.Effect<void> | undefined>, SessionStoreError> {
    return Effect.suspend(() => {
      const group = this.groupSection(t, calls)
      return this.commit(group.drafts, group.apply)
    })
  }

  /** The `tool/call` drafts of a group (validated now), and what to apply once they are durable. */
  private groupSection(
    t: TurnState,
    calls: ReadonlyArray<CallState>
  ): { readonly drafts: Array<EventDraft>; readonly apply: () => ReadonlyArray<Effect.Effect<void> | undefined> } {
    const drafts: Array<EventDraft> = []
    const checks: Array<Validated> = []
    for (const call of calls) {
      drafts.push(this.callDraft(t, call))
      checks.push(this.validate(call))
    }
    return {
      drafts,
      apply: () => {
        const runs: Array<Effect.Effect<void> | undefined> = []
        for (let k = 0; k < calls.length; k++) {
          const call = calls[k]!
          const checked = checks[k]!
          call.callLogged = true
          if (checked.ok) runs.push(this.execution(t, call, checked.tool, checked.args))
          else {
            this.fail(call, checked.code, checked.text)
            runs.push(undefined)
          }
        }
        return runs
      }
    }
  }

  /**
   * A validated, allowed call's execution: `execute`, then the hooks; its result is recorded
   * on `call` (a failure is a `TOOL_FAILED` result). Fails only by interruption.
   */
  private execution(t: TurnState, call: CallState, tool: Tool.Tool<any>, args: unknown): Effect.Effect<void> {
    const ctx: Tool.ToolContext = new CallContext(call.id, t.turn, t.step, this.toolAgent, this.ids)
    const failed = (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
      if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
      this.fail(call, "TOOL_FAILED", `Tool ${call.name} failed: ${causeMessage(cause)}`)
      return Effect.void
    }
    // The call counts as started (an abort then gives ABORTED, not TOOL_ABORTED_BEFORE_DISPATCH)
    // when its execution begins, not when its `tool/call` is durable.
    const started = Effect.suspend(() => {
      call.phase = "running"
      return tool.execute(args, ctx)
    })
    const hooks = this.options.hooks ?? []
    // A defect anywhere in recording the result (ours or a plugin's) is this call's failure,
    // never the batch's: the call gets a TOOL_FAILED result.
    const contained = (run: Effect.Effect<void>): Effect.Effect<void> =>
      Effect.catchAllCause(run, (cause) => {
        if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
        this.fail(call, "TOOL_FAILED", `Tool ${call.name} failed: ${causeMessage(cause)}`)
        return Effect.void
      })
    if (hooks.length === 0) {
      return contained(Effect.matchCauseEffect(started, {
        onSuccess: (output) => {
          this.finish(call, { output, isError: false })
          return Effect.void
        },
        onFailure: (cause) => {
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
          this.finish(call, { output: { content: `Tool ${call.name} failed: ${causeMessage(cause)}` }, isError: true })
          return Effect.void
        }
      }))
    }
    const info: Tool.ToolCall = {
      callId: call.id,
      name: call.name,
      arguments: args,
      rawArguments: call.rawArguments,
      turn: t.turn,
      step: t.step
    }
    const executed = Effect.flatMap(Effect.exit(started), (exit): Effect.Effect<Tool.HookResult> => {
      if (Exit.isSuccess(exit)) return Effect.succeed({ output: exit.value, isError: false })
      if (Cause.isInterruptedOnly(exit.cause)) return Effect.failCause(exit.cause as Cause.Cause<never>)
      return Effect.succeed({ output: { content: `Tool ${call.name} failed: ${causeMessage(exit.cause)}` }, isError: true })
    })
    return contained(Effect.matchCauseEffect(Effect.flatMap(executed, (r) => runHooks(hooks, info, r)), {
      onSuccess: (result) => {
        this.finish(call, result)
        return Effect.void
      },
      onFailure: failed
    }))
  }

  private finish(call: CallState, result: Tool.HookResult): void {
    let contexts: ReadonlyArray<UserMessage>
    let content: ReadonlyArray<ContentBlock>
    try {
      const output: unknown = typeof result === "object" && result !== null ? result.output : undefined
      if (typeof output !== "object" || output === null) throw new Error("it is not a ToolOutput ({content, additionalContexts?})")
      const given = (output as Tool.ToolOutput).additionalContexts ?? []
      if (!Array.isArray(given)) throw new Error("its additionalContexts is not an array")
      contexts = given
      const raw = (output as Tool.ToolOutput).content
      if (typeof raw !== "string" && !Array.isArray(raw)) throw new Error("its content is not a string or an array of content blocks")
      content = deepFreezeJson(Tool.contentOf(raw), "content") as ReadonlyArray<ContentBlock>
      if (!isContentShape(content)) throw new Error("its content is not a string or an array of content blocks")
      const ids = contexts.length === 0 ? undefined : new Set<string>()
      for (const m of contexts) {
        deepFreezeJson(m, "additionalContexts")
        if (!isUserMessageShape(m)) throw new Error("an additional context is not a UserMessage")
        if (ids!.has(m.id) || this.seen.has(m.id)) throw new Error(`additional context id ${m.id} is already used`)
        ids!.add(m.id)
      }
    } catch (e) {
      this.fail(call, "TOOL_FAILED", `Tool ${call.name} returned an invalid result: ${messageOf(e)}`)
      return
    }
    if (result.isError) {
      call.phase = "done"
      call.content = content
      call.isError = true
      call.error = { name: "ToolFailed", code: "TOOL_FAILED" }
      call.contexts = contexts
      return
    }
    call.phase = "done"
    call.content = content
    call.isError = false
    call.error = undefined
    call.contexts = contexts
  }

  private get toolAgent(): Tool.ToolAgent {
    return this.bind("toolAgent", (): Tool.ToolAgent => ({
      followup: (m) => this.deliver(m, "followup"),
      steer: (m) => this.deliver(m, "steer"),
      inject: (m) => this.deliver(m, "inject")
    }))
  }

  private resultMessage(call: CallState, id: string): UserMessage {
    return Object.freeze({
      id: id as MessageId,
      role: "user" as const,
      content: Object.freeze([Object.freeze({
        type: "tool-result" as const,
        toolCallId: call.id,
        content: call.content,
        isError: call.isError
      })]),
      source: Object.freeze({ kind: "tool", callId: call.id })
    })
  }

  /**
   * Commits every consecutive done result from `nextCommit`, in call order (§8), in one append:
   * each `tool/result`, followed by its contexts spliced into `next-step` at the batch's index.
   */
  private commitReady(t: TurnState): Effect.Effect<void, SessionStoreError> {
    return Effect.suspend(() => {
      const calls = t.calls
      if (calls === undefined) return Effect.void
      const first = t.nextCommit
      let end = first
      let withContexts = false
      while (end < calls.length && calls[end]!.phase === "done") {
        if (calls[end]!.contexts.length > 0) withContexts = true
        end++
      }
      if (end === first) return Effect.void
      const ready = calls.slice(first, end)
      return Effect.flatMap(this.takeIds(ready.length), (ids) => {
        if (!withContexts) {
          const { drafts, apply } = this.resultDrafts(t, ready, ids)
          return this.commit(drafts, apply)
        }
        return this.critical((): Section<void> => {
          // A context id used since the call returned (by another call of the batch, or a
          // delivery meanwhile) fails that call's result: ids are unique per session (§2).
          const used = new Set<string>()
          for (const call of ready) {
            for (const m of call.contexts) {
              if (this.seen.has(m.id) || used.has(m.id)) {
                this.fail(call, "TOOL_FAILED", `Tool ${call.name} returned an invalid result: additional context id ${m.id} is already used`)
                break
              }
            }
            for (const m of call.contexts) used.add(m.id)
          }
          const { drafts, apply: committed } = this.resultDrafts(t, ready, ids)
          const state = this.queues
          const all: Array<EventDraft> = []
          const splices: Array<SplicedData> = []
          let start = Math.min(t.contextsInserted, state.nextStep.length)
          for (let k = 0; k < ready.length; k++) {
            all.push(drafts[k]!)
            const contexts = ready[k]!.contexts
            if (contexts.length === 0) continue
            const data: SplicedData = { target: "next-step", start, inserted: contexts }
            all.push({ type: "agent/inbox/spliced", data })
            splices.push(data)
            start += contexts.length
          }
          return {
            drafts: all,
            apply: () => {
              committed()
              t.contextsInserted = start
              for (const data of splices) {
                for (const m of data.inserted) {
                  this.seen.add(m.id)
                  this.publish({ type: "agent/inbox/inserted", message: m })
                }
                state.apply(data)
              }
            }
          }
        })
      })
    })
  }

  /** The `tool/result` drafts of `ready` (the calls from `nextCommit` on), and their state update. */
  private resultDrafts(
    t: TurnState,
    ready: ReadonlyArray<CallState>,
    ids: ReadonlyArray<string>
  ): { readonly drafts: Array<EventDraft>; readonly apply: () => void } {
    const results: Array<UserMessage> = []
    const drafts: Array<EventDraft> = []
    for (let k = 0; k < ready.length; k++) {
      const call = ready[k]!
      const message = this.resultMessage(call, ids[k]!)
      results.push(message)
      drafts.push({
        type: "tool/result",
        data: call.error === undefined
          ? { turn: t.turn, step: t.step, message }
          : { turn: t.turn, step: t.step, message, error: call.error }
      })
    }
    const end = t.nextCommit + ready.length
    return {
      drafts,
      apply: () => {
        for (let k = 0; k < ready.length; k++) {
          ready[k]!.phase = "committed"
          this.seen.add(results[k]!.id)
          this.historyList.push(results[k]!)
        }
        t.nextCommit = end
      }
    }
  }

  /**
   * The results still to commit when the batch is over can go in the same append as the step's
   * end (events and order unchanged), unless one carries contexts (they must be in the inbox
   * before the claim) or ids need an effect: then they are committed now.
   */
  private commitBeforeStepEnd(t: TurnState): Effect.Effect<void, SessionStoreError> {
    return Effect.suspend(() => {
      const calls = t.calls
      if (calls === undefined || this.ids.nextSync === undefined) return this.commitReady(t)
      for (let i = t.nextCommit; i < calls.length; i++) {
        if (calls[i]!.contexts.length > 0) return this.commitReady(t)
      }
      return Effect.void
    })
  }

  /**
   * Inside `endStep`: the section of the done results not committed yet (none has contexts,
   * ids from `nextSync`; see `commitBeforeStepEnd`), or undefined.
   */
  private pendingResults(t: TurnState): { readonly drafts: Array<EventDraft>; readonly apply: () => void } | undefined {
    const calls = t.calls
    const nextSync = this.ids.nextSync
    if (calls === undefined || nextSync === undefined) return undefined
    let end = t.nextCommit
    while (end < calls.length && calls[end]!.phase === "done" && calls[end]!.contexts.length === 0) end++
    if (end === t.nextCommit) return undefined
    const ready = calls.slice(t.nextCommit, end)
    const ids = ready.map(() => flatten(nextSync()))
    return this.resultDrafts(t, ready, ids)
  }

  /** `n` fresh ids (flat strings), in one step when the generator has `nextSync`. */
  private takeIds(n: number): Effect.Effect<ReadonlyArray<string>> {
    const nextSync = this.ids.nextSync
    if (nextSync !== undefined) {
      return Effect.sync(() => {
        const ids = new Array<string>(n)
        for (let i = 0; i < n; i++) ids[i] = flatten(nextSync())
        return ids
      })
    }
    const next = this.ids.next
    return Effect.all(Array.from({ length: n }, () => next))
  }

  /** `tool/result` (+ contexts spliced into `next-step` at the batch's index, §8). */
  private commitOne(t: TurnState, call: CallState, withContexts: boolean): Effect.Effect<void, SessionStoreError> {
    return Effect.flatMap(this.nextId(), (id) => {
      const message = this.resultMessage(call, id)
      const result: EventDraft = {
        type: "tool/result",
        data: call.error === undefined
          ? { turn: t.turn, step: t.step, message }
          : { turn: t.turn, step: t.step, message, error: call.error }
      }
      const contexts = withContexts ? call.contexts : []
      const after = () => {
        call.phase = "committed"
        t.nextCommit++
        this.seen.add(message.id)
        this.historyList.push(message)
      }
      if (contexts.length === 0) return this.commit([result], after)
      return this.critical((): Section<void> => {
        const state = this.queues
        const start = Math.min(t.contextsInserted, state.nextStep.length)
        const data: SplicedData = { target: "next-step", start, inserted: contexts }
        return { drafts: [result, { type: "agent/inbox/spliced", data }], apply: () => {
          after()
          t.contextsInserted = start + contexts.length
          for (const m of contexts) {
            this.seen.add(m.id)
            this.publish({ type: "agent/inbox/inserted", message: m })
          }
          state.apply(data)
        } }
      })
    })
  }

  /** Commits every uncommitted call in order as it stands (used for truncation and abort). */
  private commitAbortedCalls(
    t: TurnState,
    calls: ReadonlyArray<CallState>,
    aborting: boolean,
    why: "was canceled" | "failed" = "was canceled"
  ): Effect.Effect<void, SessionStoreError> {
    const self = this
    return Effect.gen(function*() {
      for (let i = t.nextCommit; i < calls.length; i++) {
        const call = calls[i]!
        if (call.phase === "committed") continue
        if (call.phase === "pending") {
          if (aborting) self.fail(call, "TOOL_ABORTED_BEFORE_DISPATCH", `The turn ${why} before this tool call started.`)
        } else if (call.phase === "running") {
          self.fail(call, "ABORTED", `The turn ${why} while this tool call was running.`)
        }
        if (!call.callLogged) {
          yield* self.commit([{
            type: "tool/call",
            data: { turn: t.turn, step: t.step, callId: call.id, name: call.name, arguments: call.rawArguments }
          }], () => {
            call.callLogged = true
          })
        }
        yield* self.commitOne(t, call, !aborting)
      }
    })
  }

  // -------------------------------------------------------------------------------------------
  // Abort (§9)
  // -------------------------------------------------------------------------------------------

  /**
   * Closes an interrupted turn durably: opens it first when the run was about to start it,
   * logs the streamed prefix (`interrupted: true`), closes every tool call, `step/end`,
   * `turn/end {aborted}`; then, iff the latch is set (never after dispose), the run goes on in a
   * new driver fiber.
   */
  private closeAborted(t: TurnState, failure?: string): Effect.Effect<boolean, SessionStoreError> {
    const self = this
    return Effect.gen(function*() {
      const cause = self.cancelCause ?? USER_CAUSE
      const reason: TurnEndReason = failure === undefined
        ? { kind: "aborted", reason: cause }
        : { kind: "error", error: { message: failure, code: "RUN_FAILED" } }
      if (!t.turnOpen) {
        yield* self.critical((): Section<void> => {
          const turn = self.turnCounter + 1
          return { drafts: [{ type: "turn/start", data: { turn } }], apply: () => {
            self.turnCounter = turn
            t.turn = turn
            t.turnOpen = true
          } }
        })
      }
      if (t.stepOpen) {
        const acc = t.acc
        if (!t.assistantLogged && acc !== undefined && acc.streamed) {
          yield* self.logAssistant(t, acc, true)
        }
        if (t.calls !== undefined) {
          yield* self.commitAbortedCalls(t, t.calls, true, failure === undefined ? "was canceled" : "failed")
        }
      }
      return yield* self.critical((): Section<boolean> => {
        const drafts: Array<EventDraft> = []
        if (t.stepOpen) drafts.push({ type: "step/end", data: { turn: t.turn, step: t.step } })
        drafts.push({ type: "turn/end", data: { turn: t.turn, reason } })
        return { drafts, apply: () => {
          t.stepOpen = false
          t.turnOpen = false
          if (failure !== undefined) {
            self.resolveClaimed(t, Delivery.dropped("failed"))
            // As after any turn (§6.5): pending waking work runs next, in a new driver fiber.
            if (!self.disposed && self.cancelCause === undefined && self.queues.hasWakingWork) {
              self.forkDriver()
              return false
            }
            self.setIdle()
            return false
          }
          self.resolveClaimed(t, Delivery.dropped(cause.kind === "disposed" ? "disposed" : "canceled"))
          if (self.latch && !self.disposed) {
            // This fiber is interrupted: the run goes on in a new driver fiber (§9 latch).
            self.cancelCause = undefined
            self.latch = false
            self.forkDriver()
            return false
          }
          self.setIdle()
          return false
        } }
      })
    })
  }
}

const runGuards = (guards: ReadonlyArray<Tool.ToolGuard>, call: Tool.ToolCall): Effect.Effect<Tool.GuardDecision, unknown> => {
  const at = (i: number): Effect.Effect<Tool.GuardDecision, unknown> =>
    i >= guards.length ? Effect.succeed(Tool.Guard.allow) : Effect.suspend(() => guards[i]!(call, () => at(i + 1)))
  return at(0)
}

const runHooks = (
  hooks: ReadonlyArray<Tool.ToolHook>,
  call: Tool.ToolCall,
  innermost: Tool.HookResult
): Effect.Effect<Tool.HookResult, unknown> => {
  const at = (i: number): Effect.Effect<Tool.HookResult, unknown> =>
    i >= hooks.length ? Effect.succeed(innermost) : Effect.suspend(() => hooks[i]!(call, () => at(i + 1)))
  return at(0)
}

// ---------------------------------------------------------------------------------------------
// Constructors
// ---------------------------------------------------------------------------------------------

/**
 * The logs that a live (not yet disposed) agent of this process writes: one writer per session
 * (DESIGN.md §3.3). `resume` and `repair` refuse them (a store hands out one `SessionLog` per
 * session, so a second agent would share it); the stores refuse a session that another store or
 * process has open for writing.
 */
const liveLogs = new WeakSet<SessionLog>()

/**
 * The ids a log has used (inserted, entered, assistant and tool result messages): a resumed
 * agent's generator skips them, so that a deterministic generator restarted after a crash
 * (e.g. `IdGenerator.layerSeeded`) cannot give a repair result or a new message an id the log
 * already holds.
 */
const usedIds = (events: ReadonlyArray<SessionEvent>): Set<string> => {
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

/** `ids` without the ids in `used` (checked at each call; `used` may grow). */
const avoiding = (ids: IdGeneratorService, used: ReadonlySet<string>): IdGeneratorService => {
  const next: Effect.Effect<string> = Effect.flatMap(ids.next, (id) => used.has(id) ? next : Effect.succeed(id))
  const nextSync = ids.nextSync
  return {
    next,
    nextSync: nextSync === undefined ? undefined : () => {
      let id = nextSync()
      while (used.has(id)) id = nextSync()
      return id
    }
  }
}

const inUse = (sessionId: string): SessionStoreError =>
  new SessionStoreError({
    message: `session "${sessionId}" is in use by a live agent of this process: dispose it before resuming or repairing`,
    sessionId
  })

/**
 * Creates an agent on a new session of the `SessionStore` in context. The agent is disposed
 * when the `Scope` closes (DESIGN.md §9). Requires `Model`; uses `PreStep` and `IdGenerator`
 * when provided (defaults: enter the claimed batch; random UUIDs).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: AgentOptions = {}
): Effect.Effect<Agent, SessionStoreError, SessionStore | Model | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const model = yield* Model
    const preStep = Option.getOrElse(yield* Effect.serviceOption(PreStep), () => defaultPreStep)
    const ids = Option.getOrElse(yield* Effect.serviceOption(IdGenerator), () => randomIds)
    const sessionId = options.sessionId ?? (yield* ids.next)
    const log = yield* store.create({ id: sessionId, cwd: options.cwd })
    liveLogs.add(log)
    const agent = new AgentImpl(log, model, preStep, ids, options)
    // The scope's own finalizer API: `Effect.addFinalizer` also keeps the FiberRefs of this
    // fiber for the finalizer, which doubles what an idle agent holds (§5.4).
    const scope = yield* Effect.scope
    yield* Scope.addFinalizerExit(scope, () => agent.finalize)
    return agent as Agent
  })

/**
 * Options of `resume`: the agent's options (its tools, instructions…: a log does not hold
 * them), and `continuePending` (default false).
 *
 * @since 0.1.0
 * @category models
 */
export interface ResumeOptions extends Omit<AgentOptions, "sessionId" | "cwd"> {
  /**
   * Start a run at once when the log leaves waking work pending (a queued followup, an
   * unclaimed steer). Without it resume starts nothing (DESIGN.md §10).
   */
  readonly continuePending?: boolean | undefined
}

/**
 * Resumes a session of the `SessionStore` in context (DESIGN.md §10). The store cuts a torn
 * tail; when the last turn is open, the synthetic closers are appended durably before anything
 * else, in call order: an error `tool/result` `TOOL_OUTCOME_UNKNOWN` for a call with a
 * `tool/call` but no result; a `tool/call` and an error `tool/result` `TOOL_NOT_STARTED` for a
 * call of the last `assistant/message` without `tool/call`; then `step/end`,
 * `turn/end {kind:"interrupted"}`; then `session/end-seed` (also at the boundary of a log that
 * ended cleanly), unless the log already ends with one. Repair events take the time of the
 * event before them (§3.1). The inbox, history, used ids and turn counter are rebuilt from the
 * log; turn numbering continues. Resuming a repaired log appends nothing. Nothing runs unless
 * `continuePending`. The agent is disposed when the `Scope` closes.
 *
 * Fails with `SessionNotFound`, `SessionLogError` (a log that cannot be read, naming the line),
 * or `SessionStoreError` (also for a DSH v0 log: those are read, never appended to; and for a
 * session that a live agent of this process writes, or that another store or process has open:
 * one writer per session, DESIGN.md §3.3).
 *
 * @since 0.1.0
 * @category constructors
 */
export const resume = (
  sessionId: string,
  options: ResumeOptions = {}
): Effect.Effect<Agent, SessionStoreError | SessionLogError | SessionNotFound, SessionStore | Model | Scope.Scope> =>
  Effect.gen(function*() {
    const model = yield* Model
    const preStep = Option.getOrElse(yield* Effect.serviceOption(PreStep), () => defaultPreStep)
    const ids = Option.getOrElse(yield* Effect.serviceOption(IdGenerator), () => randomIds)
    const { log } = yield* repairLog(sessionId, ids)
    liveLogs.add(log)
    const agent = new AgentImpl(log, model, preStep, avoiding(ids, usedIds(log.events())), options)
    agent.restore(log.events())
    const scope = yield* Effect.scope
    yield* Scope.addFinalizerExit(scope, () => agent.finalize)
    if (options.continuePending === true) yield* agent.continuePending()
    return agent as Agent
  })

/**
 * Crash repair alone (DESIGN.md §10), without an agent: opens the session (a torn tail is cut)
 * and appends the closers `resume` would; returns the events appended (none for a repaired or
 * cleanly ended log that ends with `session/end-seed`). Nothing else is appended: no agent is
 * made, so none is disposed. Uses the `IdGenerator` in context when there is one.
 *
 * @since 0.1.0
 * @category constructors
 */
export const repair = (
  sessionId: string
): Effect.Effect<ReadonlyArray<SessionEvent>, SessionStoreError | SessionLogError | SessionNotFound, SessionStore> =>
  Effect.flatMap(Effect.serviceOption(IdGenerator), (ids) =>
    Effect.map(repairLog(sessionId, Option.getOrElse(ids, () => randomIds)), ({ appended }) => appended))

const repairLog = (sessionId: string, ids: IdGeneratorService) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    // A DSH v0 log is read, never appended to (checked before `open`, which may cut its tail).
    const { header } = yield* store.read(sessionId)
    if (header.version === 0) {
      return yield* Effect.fail(
        new SessionStoreError({
          message: `session "${sessionId}" is a DSH v0 log: it can be read (transcript, check), not resumed or appended to`,
          sessionId
        })
      )
    }
    const log = yield* store.open(sessionId)
    if (liveLogs.has(log)) return yield* Effect.fail(inUse(sessionId))
    const before = log.events()
    // Ids for the synthetic results: counted first, then taken (the generator may be effectful),
    // skipping the ids the log already holds.
    let needed = 0
    repairDrafts(before, () => String(needed++))
    const fresh: Array<string> = []
    if (needed > 0) {
      const next = avoiding(ids, usedIds(before)).next
      for (let i = 0; i < needed; i++) fresh.push(flatten(yield* next))
    }
    const drafts = repairDrafts(before, () => fresh.shift()!)
    if (drafts.length === 0) return { log, appended: [] as ReadonlyArray<SessionEvent> }
    // Repair events take the time of the event before them (§3.1).
    const clock = new VirtualClock()
    clock.setTime(before.length > 0 ? before[before.length - 1]!.time : 0)
    const appended = yield* Effect.withClock(log.append(drafts), clock)
    return { log, appended }
  })

/**
 * Calls `observer` with a message's outcome when the agent decides it, without a fiber (used by
 * the simulator to record live outcomes). Returns false when the message is not pending.
 *
 * @internal
 */
export const observeOutcome = (
  agent: Agent,
  messageId: string,
  observer: (outcome: Delivery.DeliveryOutcome) => void
): boolean => agent instanceof AgentImpl && agent.observeOutcome(messageId, observer)

export { UserMessage }
