/**
 * The agent (§5, §6, §9): delivery (`followup`, `steer`, `inject`), status, live
 * events, outcomes by message id, cancel, dispose and release (passivation), and the driver that
 * runs turns while there is waking work.
 *
 * This module holds the public shapes, the constructors (`make`, `resume`, `repair`) and the
 * agent's record: one mutable object per agent whose public members are bound on first use, so
 * that an idle agent is a plain record (§5.4). The concepts live in `internal/agent/`, plain
 * functions over the record, imported one way: delivery, cancel, resume → driver → model step,
 * tool batch → tool results → critical sections → observers → state. The card the runtime is
 * built to ("the inbox is a Ref-guarded queue, the pre-step waterfall is a composable Layer of
 * services, cancellation, disposal and failed-claim semantics fall out of structured concurrency
 * and typed errors") opens docs/design.md.
 *
 * @since 0.1.0
 */
import { Effect, Option, type Queue, type Schedule, Scope, type Stream } from "effect"
import type {
  AgentDisposed,
  ApprovalNotOpen,
  DeliveryError,
  DuplicateMessageId,
  InvalidEvent,
  MessageNotFound,
  MessageNotPending
} from "./AgentError.js"
import type { AgentEvent, AgentStatus } from "./AgentEvent.js"
import * as Approval from "./Approval.js"
import { Compaction, type CompactionPolicy, type CompactionReport } from "./Compaction.js"
import type { Delivery, DeliveryInput, DeliveryOutcome } from "./Delivery.js"
import * as IdGenerator from "./IdGenerator.js"
import type { InboxState } from "./Inbox.js"
import { type Accessible, type AgentAccess, AgentAccessId, type ParentAccess, ParentAccessId } from "./internal/agent/access.js"
import * as approvals from "./internal/agent/approvals.js"
import { cancel, dispose, finalize, release } from "./internal/agent/cancel.js"
import { appendEvent, clear, deliver, deliveryOf, refusal, remove, replace } from "./internal/agent/delivery.js"
import { requestCompact } from "./internal/agent/driver.js"
import * as observers from "./internal/agent/observers.js"
import { avoiding, continuePending, repairLog, restore, resumeWaiting } from "./internal/agent/resume.js"
import { commit } from "./internal/agent/section.js"
import {
  type AgentConfig,
  AgentState,
  countOption,
  history,
  liveLogs,
  mayAskFor,
  seen,
  toolsOf,
  usedIds
} from "./internal/agent/state.js"
import { inheritUsage, subagentEnded, usageNow } from "./internal/agent/usage.js"
import { DEFAULT_MAX_MESSAGE_BYTES } from "./internal/message.js"
import { type ChildSession, ChildSessionId, depthOf } from "./internal/subagent.js"
import type { InvalidMessage, Message, UserMessage } from "./Message.js"
import { Model, type ModelError, type ModelService, type ToolDefinition } from "./Model.js"
import { defaultService as defaultPreStep, PreStep, type PreStepService } from "./PreStep.js"
import type { AbortCause, SessionEvent } from "./SessionEvent.js"
import type { SessionLogError, SessionLogView, SessionNotFound, SessionStoreError, SessionWriteError } from "./SessionLog.js"
import { SessionStore, type SessionStoreService } from "./SessionStore.js"
import type * as Tool from "./Tool.js"

/**
 * An agent (§5). Made by `make` (a new session) or `resume` (an existing one); it is
 * disposed when the `Scope` it was made in closes, unless it was released before (`release`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Agent {
  /** The session id. */
  readonly id: string
  /** The session log, read-only (`id`, `header`, `path`, `events()`): only the agent appends to it. */
  readonly log: SessionLogView
  /** Queue a direct prompt in `next-turn` (waking). One send, one turn (§5.1). */
  readonly followup: (input: DeliveryInput) => Effect.Effect<Delivery, DeliveryError>
  /** Join the running turn at its next step boundary, or start a turn when idle (waking, §5.1). */
  readonly steer: (input: DeliveryInput) => Effect.Effect<Delivery, DeliveryError>
  /** Supplementary context in `next-step` (non-waking, §5.1): never causes a model request by itself. */
  readonly inject: (message: UserMessage) => Effect.Effect<Delivery, DeliveryError>
  /**
   * Cancel (§9): unless `keepInbox`, durably clears both queues (`outcome:"canceled"`, `cause`);
   * then interrupts the running turn, which ends `{kind:"aborted", reason: cause}`. Returns when
   * the interrupted turn is closed. `cause` defaults to `{kind:"user"}`; the first cause wins; a
   * cause that is not plain JSON with a string `kind` is `InvalidEvent`.
   */
  readonly cancel: (
    cause?: AbortCause | undefined,
    options?: { readonly keepInbox?: boolean | undefined }
  ) => Effect.Effect<void, SessionWriteError | InvalidEvent>
  /** Dispose (§9): deliveries fail with `AgentDisposed` from now on; cancel `{kind:"disposed"}`; wait for quiescence. */
  readonly dispose: Effect.Effect<void, SessionWriteError>
  /**
   * Release (passivation, not disposal): stops the agent without writing anything to the log
   * and without cancelling the inbox, so that the session goes on, as the log holds it, in the
   * next agent that resumes it (`Agent.resume`, here or in another process). From the call on,
   * deliveries and `replace` fail with `AgentDisposed` (its message says the agent was
   * released) and the other writing operations (`cancel`, `remove`, `clear`, `appendEvent`)
   * with a `SessionStoreError`. A running turn's driver is interrupted and closes nothing: the
   * turn stays open in the log exactly as after a crash, and the next resume repairs it with
   * the closers of §10 (its claimed messages are `Dropped interrupted` there; this agent's
   * waiters for them get that outcome at once). Queued followups, steering and injections stay
   * pending in the log and are in the inbox of the next resume (an injection enters with the
   * next turn's first step, §4). Outcome waiters of messages left undecided wait for the next
   * agent of the session resumed in this process (from the same store), and get the fate it
   * decides. Then the log is closed (when its store gives it a `close`: the writer lock is
   * freed), the session may be resumed in this process, and the live events end with
   * `agent/disposed` (after the `agent/status` idle of an interrupted run). Closing the agent's
   * scope afterwards does nothing; `release` on an agent already released or disposed does
   * nothing, and on a stopped one (its log broke, or a takeover fenced it) only closes the log.
   * It fails only if closing the log fails.
   */
  readonly release: Effect.Effect<void, SessionStoreError>
  /**
   * Compacts the history now (§17): on an idle agent a bracket of its
   * own between turns (`compaction/start {turn: null}` … `compaction/end`; no turn is opened, the
   * status is `running` meanwhile, a delivery made during it waits and then starts its turn as
   * usual); on a running agent at the running turn's next pre-step boundary (or between turns
   * when the turn ends first). Uses the `Compaction` policy of the agent's context, or
   * `Compaction.summarize({})` when it has none; `instructions` are added to the summarization
   * request. The inbox is never touched. Returns the report (`outcome` `compacted`, `skipped`
   * when nothing is old enough to replace, `failed` with `error`, `aborted` when a cancel cut it).
   * Fails with `AgentDisposed` on a disposed agent and with the store's error on a stopped one.
   */
  readonly compact: (
    options?: { readonly instructions?: string | undefined } | undefined
  ) => Effect.Effect<CompactionReport, AgentDisposed | SessionWriteError>
  /** Current status: `idle`, `running`, `awaiting-approval` (a question about a tool call is open, §26) or `stopped` (see `stopCause`). */
  readonly status: Effect.Effect<AgentStatus>
  /**
   * Why the agent stopped (status `stopped`), or none while it can go on (§3.3, §10).
   * An agent stops when its session log refuses to close a turn: the store failed every try of
   * the turn's closers (an I/O error is tried five more times over about 3 s first), the log
   * broke (an append whose outcome could not be found out, a failed fsync, the file changed
   * under it), or another writer took the session over (`SessionFenced`). From then on it writes
   * nothing: deliveries and every writing operation fail with this error, the live events end
   * with `agent/disposed`, the messages its open turn had claimed are `Dropped interrupted`.
   * What a caller does: release the stopped agent (`release`, which frees its writer) and, once
   * the store works again, `Agent.resume` the session: the repair closes the open turn (§10) and
   * the inbox goes on as the log holds it (`continuePending: true` runs the pending work). A
   * fenced session belongs to its new writer: do not resume it here. The cluster's entities do
   * this by themselves.
   */
  readonly stopCause: Effect.Effect<Option.Option<SessionWriteError>>
  /** The status now, then every change. */
  readonly statusChanges: Stream.Stream<AgentStatus>
  /** Waits until the agent is idle. */
  readonly awaitIdle: Effect.Effect<void>
  /** Live events (§5.3); subscribes when the stream starts. */
  readonly events: Stream.Stream<AgentEvent>
  /** Subscribes now (in the scope) and returns the queue of live events: subscribe first, then act. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<AgentEvent>, never, Scope.Scope>
  /** The inbox state now (an immutable value): the agent's inbox `Ref`, read-only (§4). */
  readonly inbox: Effect.Effect<InboxState>
  /** The model-visible history now (a copy). */
  readonly history: Effect.Effect<ReadonlyArray<Message>>
  /** Plugin operation (§4): replace a pending message; one `outcome:"canceled"` splice, no cause. */
  readonly replace: (
    id: string,
    message: UserMessage
  ) => Effect.Effect<void, MessageNotPending | InvalidMessage | DuplicateMessageId | AgentDisposed | SessionWriteError>
  /** Plugin operation (§4): remove a pending message; its fate is `discarded`. */
  readonly remove: (id: string) => Effect.Effect<void, MessageNotPending | SessionWriteError>
  /** Plugin operation (§4): clear one queue or both (`next-step` first). */
  readonly clear: (target?: "next-turn" | "next-step" | undefined) => Effect.Effect<void, SessionWriteError>
  /** Appends a standalone log-only plugin event `<plugin>/<name>`; it opens no turn (§3.2). Core types, the compaction bracket's (`compaction/start`, `compaction/summary`, `compaction/end`) and the sub-agent events (`subagent/start`, `subagent/end`, `subagent/descriptor`, §27): the loop writes them; they are `InvalidEvent`. */
  readonly appendEvent: (type: string, data: unknown) => Effect.Effect<SessionEvent, InvalidEvent | SessionWriteError>
  /**
   * The outcome (§5.1, §12) of any message this session delivered, also before a resume:
   * waits while it is undecided (pending or claimed), as `delivery.outcome` does; else its
   * fate in the log (`Delivery.fateOf`). Fails with `MessageNotFound` for an id the session
   * never inserted into the inbox (never used, or an assistant message, a tool result, a
   * message a pre-step added). Cost: an undecided or never used id is O(1); a decided one is
   * one scan of the log.
   */
  readonly outcome: (messageId: string) => Effect.Effect<DeliveryOutcome, MessageNotFound>
  /**
   * What the log holds for an inserted message id (`LoggedDelivery`: the message and the
   * delivery its splice reads as), or none for an id never inserted: so that a retried
   * delivery of the same id can be answered with the first one instead of a second copy
   * (idempotency by message id). O(1) for an id never used, else one scan of the log.
   */
  readonly deliveryOf: (messageId: string) => Option.Option<LoggedDelivery>
  /**
   * The questions the running step waits on (§26 rule 5), in the order they were asked: each
   * with its id, tool, call id, decoded arguments, turn, step and the time it was asked. Empty
   * unless the status is `awaiting-approval`. After a resume, the questions the log left open.
   */
  readonly pendingApprovals: Effect.Effect<ReadonlyArray<Approval.Pending>>
  /**
   * Allows the call an open question is about (§26 rules 3, 5): appends `approval/decided`
   * (`allowed-once`, or `allowed-always` with `always: true`, which also allows every later call
   * of that tool in this session, rule 6), then the call starts. Returns once the decision is
   * durable. `by` names the person (`{kind:"person", name}`; default `{kind:"person"}`). Fails
   * `ApprovalNotOpen` for an id that is not open (never asked, already decided: of two decisions
   * at once one wins, the other gets this; closed by a cancel) and with the store's error when
   * the decision cannot be appended (the question stays open).
   *
   * @example
   * ```ts
   * import { Effect, Stream } from "effect"
   * import type { Agent, Approval } from "effect-agent-loop"
   *
   * // Allow every question as it is asked, naming who decided.
   * const allowAll = (agent: Agent.Agent) =>
   *   agent.events.pipe(
   *     Stream.runForEach((e) =>
   *       e.type === "approval/asked" && "data" in e
   *         ? agent.approve((e.data as Approval.AskedData).id, { name: "ana" })
   *         : Effect.void
   *     )
   *   )
   * ```
   */
  readonly approve: (
    id: string,
    options?: { readonly always?: boolean | undefined; readonly name?: string | undefined } | undefined
  ) => Effect.Effect<void, ApprovalNotOpen | SessionWriteError>
  /**
   * Rejects the call an open question is about (§26 rules 3, 5): appends `approval/decided`
   * (`rejected`, or `rejected-always` with `always: true`: every later call of that tool in this
   * session is rejected without asking, rule 6) with the `reason`, then the call gets an error
   * `tool/result` `DENIED` whose text gives the reason, and the model's next step sees it. Fails
   * as `approve` does.
   */
  readonly reject: (
    id: string,
    options?: {
      readonly reason?: string | undefined
      readonly always?: boolean | undefined
      readonly name?: string | undefined
    } | undefined
  ) => Effect.Effect<void, ApprovalNotOpen | SessionWriteError>
}

/**
 * What the log holds for an inserted message (`agent.deliveryOf`): the message as its splice
 * inserted it (§4) and the delivery that splice reads as: `"steer"` for a splice
 * with `wake: true` (in `next-step`, or in `next-turn` for a steer made during a cancel, §9:
 * there `wake` changes nothing and marks the steer), `"followup"` for other `next-turn`
 * insertions, `"inject"` for other `next-step` insertions. Tool contexts (source
 * `{kind:"tool"}`) and replacements read by their queue.
 *
 * @since 0.1.0
 * @category models
 */
export interface LoggedDelivery {
  readonly message: UserMessage
  readonly delivery: "followup" | "steer" | "inject"
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
  /**
   * Tools whose list can change while the agent runs, such as MCP servers' (`Mcp.toolset`):
   * read at each step's start (§8). A name already taken by `tools` or an earlier toolset is
   * left out.
   */
  readonly toolsets?: ReadonlyArray<Tool.Toolset> | undefined
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
  /**
   * The largest message a delivery takes, in bytes: the UTF-8 length of the message's JSON text
   * (`JSON.stringify(message)`: id, content and source, as its splice logs it; an image counts
   * as its base64 `data`). Default 8 MiB (8,388,608). `followup`, `steer`, `inject`, `replace`
   * and `SessionReference.deliver` fail with `InvalidMessage` (path `"message"`, the message
   * gives the size and the limit) for a larger one, and log nothing (§5.1); a tool's
   * `additionalContexts` over it make the call's result `TOOL_FAILED` (§8). A message of exactly
   * the limit is taken. A limit guards the session: a message too large to be sent would make
   * every later request of the session fail. A whole number ≥ 1 (NaN: the default; Infinity:
   * no limit).
   */
  readonly maxMessageBytes?: number | undefined
  /**
   * How long a question may stay open, in milliseconds (§26 rule 5): then it is decided
   * `rejected` by `{kind:"timeout"}` and the call gets its `DENIED` result. Measured on the
   * Effect `Clock` (a `TestClock` in tests) from the moment the call starts waiting (after a
   * resume: from the resume). The same bound holds the tool's `approval` function and the policy:
   * one that has not answered by then decides `unavailable` (the call is refused). Default (also
   * NaN, Infinity): no timeout, and a question waits until someone decides; below 0 counts as 0.
   */
  readonly approvalTimeoutMs?: number | undefined
  /** Retry schedule for retryable model errors (default: 3 attempts, exponential from 500 ms, §11). */
  readonly retry?: Schedule.Schedule<unknown, ModelError> | undefined
  /** Session id (default: from the `IdGenerator`). */
  readonly sessionId?: string | undefined
  /** Recorded in the session header. */
  readonly cwd?: string | undefined
  /**
   * The agent's name in its traces: `gen_ai.agent.name`, and the turn span's name
   * `invoke_agent {name}` (default `"agent-loop"`; §19).
   */
  readonly name?: string | undefined
  /**
   * Traces (§19). `recordContent: true` records tool call arguments and
   * results on the `execute_tool` spans (`gen_ai.tool.call.arguments`/`.result`, JSON text);
   * they are user data, so the default is false. Spans are made only when the program provides
   * a tracer (e.g. `@effect/opentelemetry`'s `NodeSdk.layer`).
   */
  readonly tracing?: { readonly recordContent?: boolean | undefined } | undefined
}

const NO_TOOLS: ReadonlyMap<string, Tool.Tool<any>> = new Map()
const NO_DEFINITIONS: ReadonlyArray<ToolDefinition> = Object.freeze([])
const NONE: ReadonlyArray<never> = Object.freeze([])

/**
 * The agent's record (`AgentState`: log, configuration, mutable state) with its public members
 * (`Agent`). Public members are getters on the prototype, bound and cached on first use, so that
 * an idle agent that was never used allocates none of them (§5.4) and detached calls
 * (`Effect.flatMap(msg, agent.followup)`) still work.
 */
class AgentRecord extends AgentState implements Agent, Accessible {
  private bound: Record<string, unknown> | undefined = undefined

  private bind<T>(name: string, make: () => T): T {
    const bound = this.bound ?? (this.bound = {})
    return (bound[name] ?? (bound[name] = make())) as T
  }

  get log(): SessionLogView {
    const log = this.sessionLog
    return this.bind("log", (): SessionLogView =>
      Object.freeze(
        log.path === undefined
          ? { id: log.id, header: log.header, events: log.events }
          : { id: log.id, header: log.header, path: log.path, events: log.events }
      ))
  }
  get followup() {
    return this.bind("followup", () => (input: DeliveryInput) => deliver(this, input, "followup"))
  }
  get steer() {
    return this.bind("steer", () => (input: DeliveryInput) => deliver(this, input, "steer"))
  }
  get inject() {
    return this.bind("inject", () => (message: UserMessage) => deliver(this, message, "inject"))
  }
  /** What the rest of the library may see of the agent (`internal/agent/access.ts`). */
  get [AgentAccessId](): AgentAccess {
    return this.bind("access", (): AgentAccess => ({
      maxMessageBytes: this.config.maxMessageBytes,
      usedId: (id) => seen(this).has(id),
      observeOutcome: (id, observer) => observers.observeOutcome(this, id, observer)
    }))
  }
  /** What a running tool gets as `ctx.agent` (§8). */
  get toolAgent(): Tool.ToolAgent {
    return this.bind("toolAgent", (): Tool.ToolAgent & { readonly [ParentAccessId]: ParentAccess } => ({
      followup: this.followup,
      steer: this.steer,
      inject: this.inject,
      [ParentAccessId]: {
        sessionId: this.id,
        depth: depthOf(this.sessionLog.header),
        cwd: this.sessionLog.header.cwd,
        store: this.config.store,
        model: this.config.model,
        ids: this.config.ids,
        approvalListeners: this.config.approvalListeners,
        approvalTimeoutMs: this.config.approvalTimeout,
        recordContent: this.config.recordContent,
        preStep: this.config.preStep,
        usage: () => usageNow(this, this.current?.turn),
        events: () => this.sessionLog.events(),
        record: (type, data) =>
          type === "subagent/end"
            ? Effect.tap(commit(this, [{ type, data }], () => undefined), () => Effect.sync(() => subagentEnded(this, data)))
            : commit(this, [{ type, data }], () => undefined),
        adopt: (callId, child) => child instanceof AgentState ? approvals.adoptChild(this, callId, child) : () => {},
        released: () => this.released
      }
    }))
  }
  get replace() {
    return this.bind("replace", () => (id: string, message: UserMessage) => replace(this, id, message))
  }
  get remove() {
    return this.bind("remove", () => (id: string) => remove(this, id))
  }
  get clear() {
    return this.bind("clear", () => (target?: "next-turn" | "next-step" | undefined) => clear(this, target))
  }
  get appendEvent() {
    return this.bind("appendEvent", () => (type: string, data: unknown) => appendEvent(this, type, data))
  }
  get cancel() {
    return this.bind(
      "cancel",
      () => (cause?: AbortCause | undefined, options?: { readonly keepInbox?: boolean | undefined }) =>
        cancel(this, cause, options)
    )
  }
  get compact() {
    return this.bind(
      "compact",
      () => (options?: { readonly instructions?: string | undefined }) =>
        requestCompact(this, options?.instructions, () => (this.disposed ? refusal(this) : undefined)) as Effect.Effect<
          CompactionReport,
          AgentDisposed | SessionWriteError
        >
    )
  }
  get dispose(): Effect.Effect<void, SessionWriteError> {
    return dispose(this)
  }
  get release(): Effect.Effect<void, SessionStoreError> {
    return release(this)
  }
  get outcome() {
    return this.bind("outcome", () => (messageId: string) => observers.messageOutcome(this, messageId))
  }
  get deliveryOf() {
    return this.bind("deliveryOf", () => (messageId: string) => deliveryOf(this, messageId))
  }
  get status(): Effect.Effect<AgentStatus> {
    return Effect.sync(() => observers.status(this))
  }
  get stopCause(): Effect.Effect<Option.Option<SessionWriteError>> {
    return Effect.sync(() => this.stopped !== undefined && !this.released ? Option.some(this.stopped) : Option.none())
  }
  get awaitIdle(): Effect.Effect<void> {
    return observers.awaitIdle(this)
  }
  get subscribe(): Effect.Effect<Queue.Dequeue<AgentEvent>, never, Scope.Scope> {
    return observers.subscribe(this)
  }
  get events(): Stream.Stream<AgentEvent> {
    return observers.events(this)
  }
  get statusChanges(): Stream.Stream<AgentStatus> {
    return observers.statusChanges(this)
  }
  get pendingApprovals(): Effect.Effect<ReadonlyArray<Approval.Pending>> {
    return Effect.sync(() => approvals.pending(this))
  }
  get approve() {
    return this.bind(
      "approve",
      () => (id: string, options?: { readonly always?: boolean | undefined; readonly name?: string | undefined }) =>
        Effect.asVoid(
          approvals.decide(
            this,
            id,
            options?.always === true ? "allowed-always" : "allowed-once",
            person(options?.name),
            undefined
          )
        )
    )
  }
  get reject() {
    return this.bind(
      "reject",
      () =>
      (
        id: string,
        options?: {
          readonly reason?: string | undefined
          readonly always?: boolean | undefined
          readonly name?: string | undefined
        }
      ) =>
        Effect.asVoid(
          approvals.decide(
            this,
            id,
            options?.always === true ? "rejected-always" : "rejected",
            person(options?.name),
            options?.reason
          )
        )
    )
  }
  get history(): Effect.Effect<ReadonlyArray<Message>> {
    return Effect.sync((): ReadonlyArray<Message> => history(this).slice())
  }
}

/** `by` of a person's decision. */
const person = (name: string | undefined): Approval.DecidedBy =>
  name === undefined || name === "" ? { kind: "person" } : { kind: "person", name }

/** Whether any of the tools may need approval (§26): then calls are prepared one at a time. */
const mayNeedApproval = (tools: ReadonlyArray<Tool.Tool<any>> | undefined): boolean =>
  tools !== undefined && tools.some(mayAskFor)

/** A toolset's version as `refreshTools` reads it (one that throws: NaN, never equal). */
const versionOf = (set: Tool.Toolset): number => {
  try {
    return set.version()
  } catch {
    return NaN
  }
}

/** An agent's configuration (§5.4): the services and options, resolved once. */
const configOf = (
  services: {
    readonly store: SessionStoreService
    readonly model: ModelService
    readonly preStep: PreStepService
    readonly compaction: CompactionPolicy | undefined
    readonly approval: Approval.ApprovalService
    readonly ids: IdGenerator.IdGeneratorService
  },
  options: AgentOptions
): AgentConfig => {
  const tools = options.tools
  const toolsets = options.toolsets ?? NONE
  const guarded = options.guards !== undefined && options.guards.length > 0
  // The versions first: a list that changes while it is read is read again at the first step.
  const versions = toolsets.map(versionOf)
  const built = toolsets.length === 0 ? undefined : toolsOf(tools ?? NONE, toolsets)
  // An object literal with every field, no spread: a spread followed by more fields makes V8 keep
  // the object in dictionary mode (~+490 bytes per idle agent, measured with bench idle-agents).
  return {
    store: services.store,
    model: services.model,
    preStep: services.preStep,
    compaction: services.compaction,
    ids: services.ids,
    instructions: options.instructions,
    settings: options.settings,
    guards: options.guards ?? NONE,
    hooks: options.hooks ?? NONE,
    perCall: guarded || (built !== undefined ? built.mayAsk : mayNeedApproval(tools)),
    approvalListeners: services.approval.listeners,
    approvalTimeout: options.approvalTimeoutMs === undefined || Number.isNaN(options.approvalTimeoutMs) ||
        options.approvalTimeoutMs === Infinity
      ? undefined
      : Math.max(0, options.approvalTimeoutMs),
    retry: options.retry,
    tools: built !== undefined
      ? built.tools
      : tools === undefined || tools.length === 0
      ? NO_TOOLS
      : new Map(tools.map((t) => [t.name, t] as const)),
    toolDefinitions: built !== undefined
      ? built.definitions
      : tools === undefined || tools.length === 0
      ? NO_DEFINITIONS
      : tools.map((t) => t.definition),
    baseTools: tools ?? NONE,
    toolsets,
    toolsetVersions: versions,
    guarded,
    fastPreStep: services.preStep === defaultPreStep,
    toolBound: countOption(options.toolConcurrency, 8),
    maxSteps: countOption(options.maxSteps, 100),
    maxMessageBytes: countOption(options.maxMessageBytes, DEFAULT_MAX_MESSAGE_BYTES),
    name: options.name ?? "agent-loop",
    recordContent: options.tracing?.recordContent === true
  }
}

/**
 * The services `make` and `resume` take from the context: the store and `Model` (required);
 * `PreStep`, `Approval` and `IdGenerator`, references that give their default when none is
 * provided (enter the claimed batch; ask a person; random UUIDs); `Compaction` when provided
 * (none: no compaction, not a default policy).
 */
const services = Effect.all({
  store: SessionStore,
  model: Model,
  preStep: PreStep,
  compaction: Effect.map(Effect.serviceOption(Compaction), Option.getOrUndefined),
  approval: Approval.Approval,
  ids: IdGenerator.IdGenerator
})

/** The store's create options of a child session (§27): its header fields and a fork's seed. */
const childCreate = (id: string, cwd: string | undefined, child: ChildSession) => ({
  id,
  cwd,
  parentSession: child.parentSession,
  parentCallId: child.parentCallId,
  origin: child.origin,
  delegationDepth: child.delegationDepth,
  seed: child.seed
})

/** Registers the record as its log's live writer and disposes it when the scope closes (§9). */
const own = (agent: AgentRecord): Effect.Effect<void, never, Scope.Scope> =>
  // The scope's own finalizer API: `Effect.addFinalizer` also keeps the FiberRefs of this
  // fiber for the finalizer, which doubles what an idle agent holds (§5.4).
  Effect.flatMap(Effect.scope, (scope) => {
    liveLogs.add(agent.sessionLog)
    return Scope.addFinalizerExit(scope, () => finalize(agent))
  })

/**
 * Creates an agent on a new session of the `SessionStore` in context (§5). The agent
 * is disposed when the `Scope` closes (§9). Requires `Model`; uses `PreStep`, `Approval`,
 * `IdGenerator` and `Compaction` when provided (defaults: enter the claimed batch; ask a person;
 * random UUIDs; no compaction). Fails with
 * `SessionStoreError` when the session cannot be created (an id in use, an I/O failure).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, Model, Offline, SessionStore } from "effect-agent-loop"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const agent = yield* Agent.make({ instructions: "Be brief." })
 *   const delivery = yield* agent.followup("What time is it?")
 *   console.log(yield* delivery.outcome) // { _tag: "Entered", turn: 1, step: 1 }
 *   yield* agent.awaitIdle
 * }))
 * Effect.runPromise(program.pipe(Effect.provide(Layer.merge(SessionStore.layerMemory, Model.layer(Offline.make())))))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: AgentOptions = {}
): Effect.Effect<Agent, SessionStoreError, SessionStore | Model | Scope.Scope> =>
  Effect.gen(function*() {
    const { approval, compaction, ids, model, preStep, store } = yield* services
    const sessionId = options.sessionId ?? (yield* ids.next)
    // A sub-agent's session (§27, `Subagent.ts`): its header names the parent; a fork's log
    // starts with the parent's completed turns, which the agent is rebuilt from.
    const child = (options as { readonly [ChildSessionId]?: ChildSession })[ChildSessionId]
    const log = yield* store.create(
      child === undefined ? { id: sessionId, cwd: options.cwd } : childCreate(sessionId, options.cwd, child)
    )
    const agent = new AgentRecord(log, configOf({ store, ids, model, preStep, compaction, approval }, options))
    if (child !== undefined) {
      if (child.seed !== undefined) {
        const events = log.events()
        yield* restore(agent, events, usedIds(events))
      }
      // Its budget counts from its parent's usage (§18, §27); its turns nest in the call's span (§19).
      if (child.usage !== undefined) inheritUsage(agent, child.usage)
      if (child.parentSpan !== undefined) agent.trace = { run: undefined, callers: new Map(), parent: child.parentSpan }
      yield* Effect.orDie(commit(agent, [{ type: "subagent/descriptor", data: child.descriptor }], () => undefined))
    }
    yield* own(agent)
    return agent as Agent
  })

/**
 * Options of `resume`: the agent's options, and `continuePending` (default false). A log holds
 * the instructions and settings of its last `request/header` (§6.2): they are the defaults of
 * `instructions` and `settings`; tools, guards, hooks and the model are code, which the caller
 * gives again (a tool the log names but the caller does not give gets `UNKNOWN_TOOL`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ResumeOptions extends Omit<AgentOptions, "sessionId" | "cwd"> {
  /**
   * Start a run at once when the log leaves waking work pending (a queued followup, an
   * unclaimed steer). Without it resume starts nothing (§10).
   */
  readonly continuePending?: boolean | undefined
}

/** `options` with the instructions and settings of the log's last `request/header` where they are not given. */
const withLoggedRequest = (
  log: { readonly events: () => ReadonlyArray<SessionEvent> },
  options: ResumeOptions
): ResumeOptions => {
  if (options.instructions !== undefined && options.settings !== undefined) return options
  const events = log.events()
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!
    if (e.type !== "request/header") continue
    const data = e.data as { readonly instructions?: string; readonly settings?: { readonly [key: string]: unknown } }
    return { ...options, instructions: options.instructions ?? data.instructions, settings: options.settings ?? data.settings }
  }
  return options
}

/**
 * Resumes a session of the `SessionStore` in context (§10). The store cuts a torn
 * tail; when the last turn is open, the synthetic closers are appended durably before anything
 * else, in call order: an error `tool/result` `TOOL_OUTCOME_UNKNOWN` for a call with a
 * `tool/call` but no result; a `tool/call` and an error `tool/result` `TOOL_NOT_STARTED` for a
 * call of the last `assistant/message` without `tool/call`; then `step/end`,
 * `turn/end {kind:"interrupted"}`; then `session/end-seed` (also at the boundary of a log that
 * ended cleanly), unless the log already ends with one. Repair events take the time of the
 * event before them (§3.1). A sub-agent call cut short (a `subagent/start` without end or
 * result) is closed from its child's log in the same store instead (§27 rule 16): the child's
 * `subagent/end` and the result the tool would have given when its task ended; else, the child
 * repaired first (its open questions decided `unavailable`), `subagent/end {stopReason:
 * "unfinished_at_resume"}` and `TOOL_OUTCOME_UNKNOWN`. The inbox, history, used ids and turn counter are rebuilt from the
 * log; turn numbering continues. Resuming a repaired log appends nothing. A configuration that
 * differs from the last `request/header` (new instructions, tools, settings, model) is logged
 * in a new `request/header` before the next request (§6.2). Nothing runs unless
 * `continuePending`. The agent is disposed when the `Scope` closes.
 *
 * Fails with `SessionNotFound`, `SessionLogError` (a log that cannot be read, naming the line; or
 * one that, with its closers, still breaks an invariant of §12, which repair cannot fix by
 * appending: a log edited by hand, say; it names the first violation's rule, seq and line),
 * or `SessionStoreError` (also for a DSH v0 log: those are read, never appended to; and for a
 * session that a live agent of this process writes, or that another store or process has open:
 * one writer per session, §3.3; the same for the child of a sub-agent call it must close, and for
 * a session that call names whose header does not name it as parent).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, Model, Offline, SessionStore } from "effect-agent-loop"
 *
 * // After a crash: repair the log, rebuild the agent, run what was queued.
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const agent = yield* Agent.resume("s1", { continuePending: true })
 *   yield* agent.awaitIdle
 * }))
 * const layers = Layer.merge(SessionStore.layerJsonl({ directory: ".agent-loop/sessions" }), Model.layer(Offline.make()))
 * Effect.runPromise(program.pipe(Effect.provide(layers)))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const resume = (
  sessionId: string,
  options: ResumeOptions = {}
): Effect.Effect<Agent, SessionWriteError | SessionLogError | SessionNotFound, SessionStore | Model | Scope.Scope> =>
  Effect.gen(function*() {
    const { approval, compaction, ids, model, preStep, store } = yield* services
    const { log, used } = yield* repairLog(sessionId, ids)
    const agent = new AgentRecord(
      log,
      configOf({ store, ids: avoiding(ids, used), model, preStep, compaction, approval }, withLoggedRequest(log, options))
    )
    yield* restore(agent, log.events(), used)
    yield* own(agent)
    yield* resumeWaiting(agent, log.events())
    if (options.continuePending === true) yield* continuePending(agent)
    return agent as Agent
  })

/**
 * Crash repair alone (§10), without an agent: opens the session (a torn tail is cut)
 * and appends the closers `resume` would; returns the events appended (none for a repaired or
 * cleanly ended log that ends with `session/end-seed`), the children of sub-agent calls it closes
 * repaired first when they had not finished (§27 rule 16; their events are not in the returned
 * array). Nothing else is appended: no agent is
 * made, so none is disposed. Uses the `IdGenerator` in context when there is one. Fails as
 * `resume` does.
 *
 * @since 0.1.0
 * @category constructors
 */
export const repair = (
  sessionId: string
): Effect.Effect<ReadonlyArray<SessionEvent>, SessionWriteError | SessionLogError | SessionNotFound, SessionStore> =>
  Effect.flatMap(IdGenerator.current, (ids) => Effect.map(repairLog(sessionId, ids), ({ appended }) => appended))
