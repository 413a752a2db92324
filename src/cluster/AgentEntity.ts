/**
 * Agents as `@effect/cluster` entities (§21): `AgentEntity`, keyed by session id, whose
 * rpcs are the agent's API (`followup`, `steer`, `inject`, `cancel`, `status`, `outcome`, a
 * streaming `events`, and the approvals' `approve`, `reject`, `pendingApprovals`), and `layer`,
 * the handlers a runner registers.
 *
 * Rules (§21):
 * - Activation opens the session with `Agent.resume(id, {continuePending: true})`: crash repair
 *   first (§10), then the waking work the log leaves pending, so a session whose runner died
 *   mid-turn goes on on its new runner without anyone running `resume`. A session that does not
 *   exist yet is created (`Agent.make({sessionId})`), so the first `followup` to a new id starts it.
 * - Deliveries (`followup`, `steer`, `inject`) reply `{messageId}` once the splice is durable
 *   (§5.1). They are persisted messages, which the cluster delivers at least once; each carries
 *   its message id (the caller's, or one `AgentClient` draws), which with a hash of the message is
 *   the rpc's primary key (a retry while the cluster still holds the first answer gets that
 *   answer) and is the message's id in the log (a delivery of an id the log already holds, as
 *   the same kind with the same content and source, answers with that delivery and logs nothing;
 *   the id with another kind or another message is refused with `DuplicateMessageId`; an empty
 *   id is `InvalidMessage`). A caller never interrupts a delivery (`Uninterruptible` `"client"`):
 *   once sent it runs, whatever the caller does meanwhile.
 * - A transient store fault is never an rpc's answer (§3.3): a store error (a
 *   connection reset, a statement timeout, a full disk, a broken log) is tried again, 200 ms
 *   apart doubling up to 5 s, until the store answers, so that the cluster never stores it as a
 *   delivery's reply (it would answer every retry of the id with it); the caller waits meanwhile.
 *   Errors that no retry cures (an unreadable log, events the store refuses, the caller's
 *   mistakes) are answers.
 * - A stopped agent (its log refused to close a turn, §10) is released and the session reopened
 *   by the next rpc, or `healDelay` (500 ms) after the stop without one: `Agent.resume` repairs
 *   the open turn, then the pending work runs. The runner logs one line naming the session, the
 *   cause and what it does. A fenced agent is handled so after `fencedGrace`.
 * - The rpcs of one session run concurrently (`status`, `outcome`, `steer`, `inject`, `cancel`
 *   reach a session whose turn runs); the agent serializes its own inbox (§4).
 * - While a run is on, the entity is kept alive (`Entity.keepAlive`): a running turn is never
 *   passivated, and a turn outlives the rpc that started it (on failover the keep-alive message
 *   re-activates the session on its new runner). Keep-alive is on before a waking delivery
 *   replies. A session that waits for a person (`awaiting-approval`) is a run that is on: kept
 *   alive however long the wait.
 * - Passivation (`maxIdleTime`) and shard hand-over release the agent: it stops writing and its
 *   inbox stays in the log for the next activation, as do its open questions, which the next
 *   activation's resume reopens (§26 rule 8). Passivation is never disposal.
 * - Approvals (§21 rule 8): `pendingApprovals` answers the live agent (not persisted);
 *   `approve` and `reject` are persisted like deliveries and reply once the decision is
 *   durable. A question not open is `ApprovalNotOpen`, unless the log already holds the very
 *   decision asked for (a redelivery: answered as done); a malformed payload (an empty id, a
 *   blank name, an empty reason) is `InvalidDecision`, never a decision.
 * - Sub-agents (§21 rule 9): a child session that its parent's call drives (the parent's log holds
 *   the call's `subagent/start` and neither its end nor the call's result) is never opened by its
 *   own entity, whose rpcs fail `SessionDrivenByParent` (the parent's process holds its writer);
 *   checked at each open. Its questions are listed (with `sessionId`) and decided through the
 *   parent's entity. Once the call has ended it is opened as any session.
 *
 * Import `effect-agent-loop/cluster`; this module deep-imports `@effect/cluster` (never its index,
 * which loads `@effect/workflow`).
 *
 * @since 0.1.0
 */
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import type { Sharding } from "@effect/cluster/Sharding"
import * as Rpc from "@effect/rpc/Rpc"
import { Cause, Duration, Effect, ExecutionStrategy, Exit, Hash, type Layer, Option, Schema, Scope, Stream } from "effect"
import * as Agent from "../Agent.js"
import {
  AgentDisposed,
  ApprovalNotOpen,
  DuplicateMessageId,
  InvalidEvent,
  isDuplicateMessageId,
  MessageNotFound as AgentMessageNotFound
} from "../AgentError.js"
import type { AgentEvent } from "../AgentEvent.js"
import { isTransient, refusesEvents } from "../internal/store/common.js"
import { ContentBlock, InvalidMessage, MessageSource } from "../Message.js"
import type { Model } from "../Model.js"
import { SessionFenced, SessionLogError, SessionNotFound, SessionStoreError, type SessionWriteError } from "../SessionLog.js"
import { SessionStore as SessionStoreTag } from "../SessionStore.js"
import type { SessionStore } from "../SessionStore.js"
import { childrenEvents, drivingCall } from "./children.js"
import { decideOn, type DecisionPayload, invalidField } from "./decisions.js"
import { fromLog, insertedHere, type Kind, messageOf } from "./deliveries.js"

/**
 * No message with this id was ever inserted into the session's inbox (`outcome`, §12):
 * the agent's own error (`AgentError.MessageNotFound`).
 *
 * @since 0.1.0
 * @category errors
 */
export const MessageNotFound = AgentMessageNotFound
/**
 * @since 0.1.0
 * @category errors
 */
export type MessageNotFound = AgentMessageNotFound

/**
 * The message of a delivery rpc: text (one text block; source `{kind:"user"}` for `followup` and
 * `steer`, `{kind:"plugin", plugin:"cluster"}` for `inject`), or `{content, source?}` (our
 * `UserMessage` JSON; its `id` and `role`, when given, must agree with the delivery).
 *
 * @since 0.1.0
 * @category models
 */
export const DeliveryMessage = Schema.Union(
  Schema.String,
  Schema.Struct({
    id: Schema.optional(Schema.String),
    role: Schema.optional(Schema.Literal("user")),
    content: Schema.Array(ContentBlock),
    source: Schema.optional(MessageSource)
  })
)
/**
 * @since 0.1.0
 * @category models
 */
export type DeliveryMessage = typeof DeliveryMessage.Type

/**
 * The payload of `followup`, `steer` and `inject`: the message and its id. The id is the rpc's
 * primary key and the message's id in the log: a delivery of an id the log already holds answers
 * `{messageId}` again and logs nothing (safe retries of an at-least-once delivery).
 *
 * @since 0.1.0
 * @category models
 */
export const DeliveryPayload = {
  messageId: Schema.String,
  message: DeliveryMessage
}

/**
 * The reply of a delivery rpc, once its splice is durable (§5.1).
 *
 * @since 0.1.0
 * @category models
 */
export const Delivered = Schema.Struct({ messageId: Schema.String })
/**
 * @since 0.1.0
 * @category models
 */
export type Delivered = typeof Delivered.Type

/**
 * The session is a sub-agent's that its parent's call drives now (§21 rule 9, §27): the
 * parent's process holds its writer, so its own entity does not open it (never a second writer).
 * Every rpc to it fails so until the call ends (the child finished, or the parent's resume closed
 * the call); meanwhile its questions are listed and decided through the parent's entity
 * (`pendingApprovals`, `approve`, `reject` of `parentSession`). A delivery refused so is the
 * delivery's answer (the cluster keeps it for its message id): send again with a new id.
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionDrivenByParent extends Schema.TaggedError<SessionDrivenByParent>()("SessionDrivenByParent", {
  message: Schema.String,
  sessionId: Schema.String,
  parentSession: Schema.String,
  callId: Schema.String
}) {}

/**
 * The errors of a delivery rpc: the agent's delivery errors (§5.1), and what opening the session
 * can fail with (a store failure, an unreadable log, a child its parent drives).
 *
 * @since 0.1.0
 * @category errors
 */
export const DeliveryError = Schema.Union(
  InvalidMessage,
  DuplicateMessageId,
  AgentDisposed,
  SessionStoreError,
  SessionFenced,
  SessionLogError,
  SessionNotFound,
  SessionDrivenByParent
)
/**
 * @since 0.1.0
 * @category errors
 */
export type DeliveryError = typeof DeliveryError.Type

/**
 * Errors of opening the session (activation): a store failure, an unreadable log, a sub-agent's
 * session that its parent's call drives (`SessionDrivenByParent`, §21 rule 9).
 *
 * @since 0.1.0
 * @category errors
 */
export const OpenError = Schema.Union(SessionStoreError, SessionFenced, SessionLogError, SessionNotFound, SessionDrivenByParent)
/**
 * @since 0.1.0
 * @category errors
 */
export type OpenError = typeof OpenError.Type

/**
 * A delivery outcome (§5.1): `{_tag:"Entered", turn, step}` | `{_tag:"Dropped", reason}`.
 *
 * @since 0.1.0
 * @category models
 */
export const DeliveryOutcome = Schema.Union(
  Schema.Struct({ _tag: Schema.Literal("Entered"), turn: Schema.Number, step: Schema.Number }),
  Schema.Struct({
    _tag: Schema.Literal("Dropped"),
    reason: Schema.Literal("rejected", "failed", "canceled", "disposed", "interrupted", "discarded")
  })
)

/**
 * What `status` answers: the agent's status (§5.2) and the number of messages pending in each
 * queue of its inbox (§4).
 *
 * @since 0.1.0
 * @category models
 */
export const Status = Schema.Struct({
  status: Schema.Literal("idle", "running", "awaiting-approval"),
  nextTurn: Schema.Number,
  nextStep: Schema.Number
})
/**
 * @since 0.1.0
 * @category models
 */
export type Status = typeof Status.Type

/** An `AgentEvent` on the wire: plain JSON with a string `type`, every field kept. */
const AgentEventSchema: Schema.Schema<AgentEvent, any> = Schema.Struct(
  { type: Schema.String },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
) as any

/**
 * A delivery's primary key: its message id and a hash of its message, so that the cluster answers
 * a retry (the same id and message) with its stored reply, and a reuse of the id for another
 * message reaches the entity, which refuses it (`DuplicateMessageId`).
 */
const deliveryKey = (payload: { readonly messageId: string; readonly message: DeliveryMessage }): string =>
  `${payload.messageId}#${(Hash.string(JSON.stringify(payload.message)) >>> 0).toString(16)}`

const persisted = <R extends Rpc.Any>(rpc: R): R => (rpc as any).annotate(ClusterSchema.Persisted, true)

/**
 * A delivery: persisted, and never interrupted by its caller (`Uninterruptible` `"client"`): once
 * sent it is in the cluster's storage and runs, whatever the caller does meanwhile (a timeout,
 * Ctrl-C); a caller that stopped waiting learns its fate by retrying the same id or `outcome`.
 */
const delivery = <R extends Rpc.Any>(rpc: R): R => (persisted(rpc) as any).annotate(ClusterSchema.Uninterruptible, "client")

/**
 * `followup {messageId, message}` → `{messageId}`: queue a direct prompt in `next-turn` (waking, §5.1). Persisted.
 *
 * @since 0.1.0
 * @category rpcs
 */
export const Followup = delivery(
  Rpc.make("followup", { payload: DeliveryPayload, success: Delivered, error: DeliveryError, primaryKey: deliveryKey })
)
/**
 * `steer {messageId, message}` → `{messageId}`: join the running turn at its next step, or start one (waking). Persisted.
 *
 * @since 0.1.0
 * @category rpcs
 */
export const Steer = delivery(
  Rpc.make("steer", { payload: DeliveryPayload, success: Delivered, error: DeliveryError, primaryKey: deliveryKey })
)
/**
 * `inject {messageId, message}` → `{messageId}`: context in `next-step` (non-waking, §5.1). Persisted.
 *
 * @since 0.1.0
 * @category rpcs
 */
export const Inject = delivery(
  Rpc.make("inject", { payload: DeliveryPayload, success: Delivered, error: DeliveryError, primaryKey: deliveryKey })
)
/**
 * `cancel {cause?, keepInbox?}` (§9): returns when the interrupted turn is closed. Persisted.
 *
 * @since 0.1.0
 * @category rpcs
 */
export const Cancel = persisted(
  Rpc.make("cancel", {
    payload: {
      cause: Schema.optional(
        Schema.Struct({ kind: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
      ),
      keepInbox: Schema.optional(Schema.Boolean)
    },
    error: Schema.Union(InvalidEvent, OpenError)
  })
)
/**
 * `status` → `{status, nextTurn, nextStep}`. Not persisted (it answers the live agent); it also
 * warms a cold client (see `AgentClient`).
 *
 * @since 0.1.0
 * @category rpcs
 */
export const GetStatus = Rpc.make("status", { success: Status, error: OpenError })
/**
 * `outcome {messageId}` → the message's fate once decided (§12); `MessageNotFound` for an id never
 * inserted. Persisted: a wait outlives a failover of the session's runner.
 *
 * @since 0.1.0
 * @category rpcs
 */
export const Outcome = persisted(
  Rpc.make("outcome", {
    payload: { messageId: Schema.String },
    success: DeliveryOutcome,
    error: Schema.Union(AgentMessageNotFound, OpenError)
  })
)
/**
 * `events`: the session's live events (§5.3) while subscribed (a stream; not persisted): first
 * `{type:"agent/status", status}` (the status when the subscription started: from then on
 * nothing is missed), then every event. An open subscription keeps the entity active (never
 * passivated).
 *
 * @since 0.1.0
 * @category rpcs
 */
export const Events = Rpc.make("events", { success: AgentEventSchema, error: OpenError, stream: true })

/**
 * A decision the entity cannot take as given (§21, §26 rule 5): an empty question id, a
 * blank `name` or an empty `reason`. Nothing is appended: a malformed decision is never taken
 * for an approval or a refusal. `field` names the payload field at fault.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidDecision extends Schema.TaggedError<InvalidDecision>()("InvalidDecision", {
  message: Schema.String,
  field: Schema.Literal("id", "name", "reason")
}) {}

/**
 * An open question of the session (§26 rule 5), as `pendingApprovals` answers it: the agent's
 * `Approval.Pending` (id, tool, call id, decoded arguments, turn, step, `askedAt` in ms since
 * the epoch, the time of its `approval/asked`), and `sessionId` for a question of a sub-agent
 * that a running call of the session started (§27 rule 7: the child's session; `approve` and
 * `reject` of this session decide it).
 *
 * @since 0.1.0
 * @category models
 */
export const PendingApproval = Schema.Struct({
  id: Schema.String,
  toolName: Schema.String,
  callId: Schema.String,
  arguments: Schema.Unknown,
  turn: Schema.Number,
  step: Schema.Number,
  askedAt: Schema.Number,
  sessionId: Schema.optional(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type PendingApproval = typeof PendingApproval.Type

/**
 * The errors of `approve` and `reject`: the question is not open (`ApprovalNotOpen`: never
 * asked in the session, decided otherwise, closed by a cancel), the payload is malformed
 * (`InvalidDecision`), and what opening the session can fail with.
 *
 * @since 0.1.0
 * @category errors
 */
export const DecisionError = Schema.Union(
  ApprovalNotOpen,
  InvalidDecision,
  SessionStoreError,
  SessionFenced,
  SessionLogError,
  SessionNotFound,
  SessionDrivenByParent
)
/**
 * @since 0.1.0
 * @category errors
 */
export type DecisionError = typeof DecisionError.Type

/**
 * `approve {id, always?, name?}` (§26 rule 5): allows the call question `id` is about
 * (`allowed-once`, or `allowed-always` with `always`), decided by `{kind:"person", name?}`;
 * returns once the decision is durable. Persisted, never interrupted by its caller (as a
 * delivery). A decision the log already holds as asked (the same outcome, person and reason: a
 * redelivery after a failover) is answered as done, with nothing appended.
 *
 * @since 0.1.0
 * @category rpcs
 */
export const Approve = delivery(
  Rpc.make("approve", {
    payload: { id: Schema.String, always: Schema.optional(Schema.Boolean), name: Schema.optional(Schema.String) },
    error: DecisionError
  })
)
/**
 * `reject {id, reason?, always?, name?}` (§26 rule 5): refuses the call question `id` is about
 * (`rejected`, or `rejected-always` with `always`); the call gets its `DENIED` result. As
 * `approve` otherwise.
 *
 * @since 0.1.0
 * @category rpcs
 */
export const Reject = delivery(
  Rpc.make("reject", {
    payload: {
      id: Schema.String,
      reason: Schema.optional(Schema.String),
      always: Schema.optional(Schema.Boolean),
      name: Schema.optional(Schema.String)
    },
    error: DecisionError
  })
)
/**
 * `pendingApprovals` → the open questions of the session, in the order they were asked (§26
 * rule 5; empty unless its status is `awaiting-approval`). Not persisted (it answers the live
 * agent, as `status`); it activates the session, whose resume reopens the questions its log left
 * open (§26 rule 8).
 *
 * @since 0.1.0
 * @category rpcs
 */
export const PendingApprovals = Rpc.make("pendingApprovals", { success: Schema.Array(PendingApproval), error: OpenError })

/**
 * The entity: type `"effect-agent-loop/Agent"`, keyed by session id.
 *
 * @since 0.1.0
 * @category entities
 */
export const AgentEntity = Entity.make("effect-agent-loop/Agent", [
  Followup,
  Steer,
  Inject,
  Cancel,
  GetStatus,
  Outcome,
  Events,
  Approve,
  Reject,
  PendingApprovals
])

/**
 * Options of `layer`: the agent's options (`Agent.ResumeOptions` without `continuePending`,
 * which is always on), and `maxIdleTime` (default 5 minutes): how long an idle session stays
 * activated after its last rpc ended before it is passivated (released; the cluster checks at most
 * every 5 s).
 *
 * @since 0.1.0
 * @category models
 */
export interface EntityOptions extends Omit<Agent.ResumeOptions, "continuePending"> {
  readonly maxIdleTime?: Duration.DurationInput | undefined
  /**
   * How long an rpc that meets a fenced agent (`SessionFenced`: another writer took the session)
   * waits before it reopens the session (default 10 s; `AgentRunner.layer` gives two shard lock
   * refreshes). A runner that lost the session's shard is interrupted meanwhile, and the cluster
   * delivers the persisted message again to the new owner: the caller never gets the fence.
   */
  readonly fencedGrace?: Duration.DurationInput | undefined
  /**
   * How long after its agent stopped (its log refused to close a turn: a store that failed every
   * try of the closers, a broken log) the session is reopened by itself, if no rpc reopens it
   * first (default 500 ms). Reopening (`Agent.resume`) repairs the open turn, then the pending
   * work runs; it is tried again, 200 ms apart doubling up to 5 s, until the store lets it.
   */
  readonly healDelay?: Duration.DurationInput | undefined
}

/** An rpc's failure that a later try cures (`persevere`); `wait`: back off before it. */
class Retry {
  constructor(readonly error: { readonly message: string }, readonly wait: boolean) {}
}

/** A message on one line (a log line of the runner). */
const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, " ")

/**
 * The entity's handlers as a layer (registers `AgentEntity` with the `Sharding` in context):
 * each activation opens its session from the `SessionStore` with the `Model` in context
 * (`Agent.resume` with `continuePending`, or `Agent.make` for a new id), rpcs run concurrently,
 * passivation releases the agent. Activation failures (store, unreadable log) are the rpcs' typed
 * errors; the next rpc tries again.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: EntityOptions = {}): Layer.Layer<never, never, Sharding | SessionStore | Model> =>
  AgentEntity.toLayer(
    Effect.gen(function*() {
      const address = yield* Entity.CurrentAddress
      const scope = yield* Scope.Scope
      const context = yield* Effect.context<Sharding | Entity.CurrentAddress | SessionStore | Model>()
      const sessionId = address.entityId
      const { maxIdleTime: _, ...agentOptions } = options

      // Keep-alive follows the agent's status, and is on while a stopped agent is being
      // reopened. Each sync reads the status inside the lock, so that the last sync (the
      // watcher sees every change) leaves it as the agent is now.
      let keptAlive = false
      const keepAliveLock = yield* Effect.makeSemaphore(1)
      const setKeepAlive = (on: boolean) =>
        Effect.suspend(() => {
          if (keptAlive === on) return Effect.void
          keptAlive = on
          return Entity.keepAlive(on)
        }).pipe(Effect.provide(context))
      const syncKeepAlive = (agent: Agent.Agent) =>
        keepAliveLock.withPermits(1)(
          Effect.flatMap(
            agent.status,
            // A session that waits for a person is a run that is on (§26 rule 5): its step is
            // open and other calls of its batch may be running.
            (status) => setKeepAlive(status === "running" || status === "awaiting-approval")
          )
        )

      // Each agent of the entity in its own scope: a fenced or stopped agent is released with it
      // before the session is reopened.
      type Opened = { readonly agent: Agent.Agent; readonly scope: Scope.CloseableScope }
      const open: Effect.Effect<Opened, OpenError> = Effect.gen(function*() {
        // A child its parent's call drives is not opened here: the parent's process holds its
        // writer (§21 rule 9). Checked at each open, so that the next rpc after the call's end
        // opens it as any session.
        const driving = yield* Effect.flatMap(SessionStoreTag, (store) => drivingCall(store, sessionId))
        if (driving !== undefined) {
          return yield* Effect.fail(
            new SessionDrivenByParent({
              message: `session ${sessionId} is a sub-agent that its parent session ${driving.parentSession} drives ` +
                `(call ${driving.callId}): until that call ends it answers through ${driving.parentSession} ` +
                `(its questions: pendingApprovals, approve and reject of ${driving.parentSession})`,
              sessionId,
              ...driving
            })
          )
        }
        const agentScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        const agent: Agent.Agent = yield* Effect.gen(function*() {
          const agent = yield* Agent.resume(sessionId, { ...agentOptions, continuePending: true }).pipe(
            Effect.catchTag("SessionNotFound", () => Agent.make({ ...agentOptions, sessionId }))
          )
          // After the agent's own finalizer was added: runs before it (reverse order), so that
          // the agent is released, never disposed, when the entity is passivated or moves.
          yield* Effect.addFinalizer(() => Effect.ignoreLogged(agent.release))
          yield* agent.statusChanges.pipe(
            Stream.runForEach(() => syncKeepAlive(agent)),
            // The live events ended: the agent was released, or it stopped (its log refused to
            // close a turn), and then the session is reopened shortly, rpc or not.
            Effect.zipRight(
              Effect.flatMap(
                agent.stopCause,
                (cause) => Option.isSome(cause) ? Effect.asVoid(Effect.forkIn(heal(agent, cause.value), scope)) : Effect.void
              )
            ),
            Effect.forkScoped
          )
          return agent
        }).pipe(
          Scope.extend(agentScope),
          Effect.onError(() => Scope.close(agentScope, Exit.void))
        )
        return { agent, scope: agentScope }
      }).pipe(Effect.provide(context))

      // Opened at activation (a session that was running resumes now); a failed open is retried
      // by the next rpc, and after a stop by `heal`.
      let opened: Opened | undefined
      const lock = yield* Effect.makeSemaphore(1)
      const agentOf: Effect.Effect<Agent.Agent, OpenError> = lock.withPermits(1)(
        Effect.suspend(() =>
          opened !== undefined ? Effect.succeed(opened.agent) : Effect.map(open, (o) => {
            opened = o
            return o.agent
          })
        )
      )
      /**
       * Forgets `agent` (releasing it: it frees its writer) so that the next `agentOf` reopens
       * the session; true when it was the entity's agent (not forgotten before).
       */
      const forget = (agent: Agent.Agent, say: Effect.Effect<void> = Effect.void) =>
        lock.withPermits(1)(Effect.suspend(() => {
          if (opened === undefined || opened.agent !== agent) return Effect.succeed(false)
          const { scope: agentScope } = opened
          opened = undefined
          return Effect.as(Effect.zipRight(say, Scope.close(agentScope, Exit.void)), true)
        }))
      const fencedGrace = options.fencedGrace ?? Duration.seconds(10)
      const healDelay = options.healDelay ?? Duration.millis(500)

      /** Agents whose stop was logged: one line per stop, whoever reopens the session. */
      const announced = new WeakSet<Agent.Agent>()
      /**
       * The runner's one line about an agent it replaces: the session, what happened (`what`: its
       * agent stopped, its log failed), the cause, and when the session is reopened (`when`).
       */
      const announceStop = (agent: Agent.Agent, what: string, cause: { readonly message: string }, when: string) =>
        Effect.suspend(() => {
          if (announced.has(agent)) return Effect.void
          announced.add(agent)
          return Effect.logWarning(
            `session ${sessionId}: ${what} (${oneLine(cause.message)}); reopening the session ${when} ` +
              `(the repair closes the open turn, then the pending work runs)`
          )
        })

      /**
       * A stopped agent (§10): its log refused to close a turn (the store failed every
       * try of the closers, or the log broke), or another writer fenced it. After `healDelay`
       * (`fencedGrace` for a fence: a runner that lost the shard is interrupted meanwhile) the
       * agent is released and the session reopened through `Agent.resume`, whose repair closes
       * the open turn; then the pending work runs. Reopening is tried until it works (`persevere`).
       * One log line says so (a second one if the store still refuses).
       */
      const heal = (agent: Agent.Agent, cause: SessionWriteError): Effect.Effect<void> => {
        const fenced = cause instanceof SessionFenced
        const delay = fenced ? fencedGrace : healDelay
        return announceStop(
          agent,
          "its agent stopped",
          cause,
          `in ${Duration.format(delay)}${fenced ? " unless the shard moves" : ""}`
        ).pipe(
          Effect.zipRight(keepAliveLock.withPermits(1)(setKeepAlive(true))),
          Effect.zipRight(Effect.sleep(delay)),
          Effect.zipRight(forget(agent)),
          Effect.zipRight(persevere("reopening", () => Effect.void)),
          Effect.zipRight(Effect.flatMap(agentOf, syncKeepAlive)),
          Effect.catchAll((error) =>
            Effect.logWarning(`session ${sessionId}: could not be reopened (${oneLine(error.message)}); the next rpc tries again`)
          )
        )
      }

      /**
       * Runs `f` on the session's agent until the store lets it (§3.3): a failure that
       * a later try can cure is never the rpc's answer, so that a persisted delivery is never
       * stored with a transient store error as its reply (the cluster would answer every retry
       * of its id with it). Cured by trying again: a store error (an I/O failure, a closed or
       * broken log, a stopped or released agent: the agent is then released and the session
       * reopened, which repairs an open turn) and a fence (the rpc waits `fencedGrace`, in
       * which a runner that lost the shard is interrupted and the cluster delivers the persisted
       * message again to the new owner; still the owner, it reopens the session). Tries are 200 ms
       * apart, doubling up to 5 s; the first failure and the success after it are logged. Other
       * errors (an unreadable log, events the store refuses, the caller's mistakes) are answers.
       */
      const persevere = <A, E, R>(
        what: string,
        f: (agent: Agent.Agent) => Effect.Effect<A, E, R>
      ): Effect.Effect<A, E | OpenError, R> => {
        const attempt = Effect.flatMap(
          agentOf,
          (agent): Effect.Effect<A, E | OpenError | Retry, R> =>
            Effect.catchAll(f(agent), (error): Effect.Effect<never, E | Retry> => {
              if (error instanceof SessionFenced) {
                return Effect.logWarning(
                  `session ${sessionId}: fenced (${error.message}); reopening in ${
                    Duration.format(fencedGrace)
                  } unless the shard moves`
                ).pipe(
                  Effect.zipRight(Effect.sleep(fencedGrace)),
                  Effect.zipRight(forget(agent)),
                  Effect.zipRight(Effect.fail(new Retry(error, false)))
                )
              }
              if (!(error instanceof SessionStoreError || error instanceof AgentDisposed) || refusesEvents(error)) {
                return Effect.fail(error)
              }
              return Effect.flatMap(agent.status, (status) => {
                // A transient failure of a working agent: the same agent tries again. Otherwise
                // (stopped, broken or closed log, released or replaced agent) a new one does.
                if (status !== "stopped" && isTransient(error)) return Effect.fail(new Retry(error, true))
                const said = status === "stopped"
                  ? Effect.flatMap(
                    agent.stopCause,
                    (cause) => announceStop(agent, "its agent stopped", Option.getOrElse(cause, () => error), "now")
                  )
                  : error instanceof SessionStoreError
                  ? announceStop(agent, "its session log failed", error, "now")
                  : Effect.void
                return Effect.zipRight(forget(agent, said), Effect.fail(new Retry(error, true)))
              })
            })
        ).pipe(
          Effect.catchIf(
            (e): e is SessionStoreError & OpenError => e instanceof SessionStoreError && !refusesEvents(e),
            (e) => Effect.fail(new Retry(e, true))
          )
        )
        const loop = (tries: number): Effect.Effect<A, E | OpenError, R> =>
          Effect.matchEffect(attempt, {
            onFailure: (error) => {
              if (!(error instanceof Retry)) return Effect.fail(error)
              if (!error.wait) return loop(tries + 1)
              return Effect.zipRight(
                tries === 0
                  ? Effect.logWarning(
                    `session ${sessionId}: ${what} failed (${oneLine(error.error.message)}); trying again until the store answers`
                  )
                  : Effect.void,
                Effect.zipRight(Effect.sleep(Duration.millis(Math.min(200 * 2 ** Math.min(tries, 5), 5000))), loop(tries + 1))
              )
            },
            onSuccess: (value) =>
              tries === 0
                ? Effect.succeed(value)
                : Effect.as(Effect.logInfo(`session ${sessionId}: ${what} succeeded at try ${tries + 1}`), value)
          })
        return loop(0)
      }
      const first = yield* Effect.exit(agentOf)
      // A child its parent drives is no failure of the runner: each rpc says so to its caller.
      const error = Exit.isFailure(first) ? Cause.squash(first.cause) : undefined
      if (error !== undefined && !(error instanceof SessionDrivenByParent)) {
        // The cause in the line itself: a runner's logger prints no store error as a cause.
        yield* Effect.logWarning(
          `session ${sessionId}: could not be opened (${
            oneLine(error instanceof Error ? error.message : String(error))
          }); the next rpc tries again`
        )
      }

      const deliver = (kind: Kind, payload: { readonly messageId: string; readonly message: DeliveryMessage }) =>
        Effect.flatMap(
          messageOf(kind, payload),
          (message) =>
            persevere(`the ${kind} of ${payload.messageId}`, (agent) =>
              Effect.gen(function*() {
                const answered = { messageId: payload.messageId }
                // A retry of a delivery the log already holds: that delivery, nothing logged. The
                // same id for another kind, other content or another source is a caller's
                // mistake, refused.
                const logged = fromLog(agent, kind, message)
                if (logged !== undefined) return yield* logged
                const delivered = yield* agent[kind](message).pipe(
                  Effect.as(true),
                  // Delivered meanwhile by a concurrent retry of the same id.
                  Effect.catchIf(isDuplicateMessageId, (e) => {
                    const answer = fromLog(agent, kind, message)
                    return answer === undefined ? Effect.fail(e) : Effect.as(answer, false)
                  })
                )
                // A run is on before the reply: the session is kept alive from now on.
                if (delivered && kind !== "inject") yield* syncKeepAlive(agent)
                return answered
              }))
        )

      /** Fails with the stop cause when `agent` stopped (`persevere` then reopens the session); else its status. */
      const notStopped = (agent: Agent.Agent): Effect.Effect<Status["status"], SessionWriteError> =>
        Effect.flatMap(agent.status, (status) =>
          status === "stopped"
            ? Effect.flatMap(agent.stopCause, (cause) =>
              Effect.fail(Option.getOrElse(cause, () => new SessionStoreError({ message: "the agent stopped" }))))
            : Effect.succeed(status))

      /** `approve` and `reject` (§26 rule 5): `decisions.ts` `decideOn`, on the agent `persevere` gives. */
      const decideRpc = (kind: "approve" | "reject", payload: DecisionPayload) => {
        const invalid = invalidField(payload)
        if (invalid !== undefined) return Effect.fail(new InvalidDecision(invalid))
        // The session's log and those of the children it started: a question of a child (§27
        // rule 7) is decided through this session, and found again in the child's log.
        const stored = Effect.flatMap(SessionStoreTag, (store) =>
          Effect.flatMap(
            store.read(sessionId),
            (c) => Effect.map(childrenEvents(store, c.events), (children) => [...c.events, ...children])
          )).pipe(Effect.provide(context))
        return persevere(
          `the ${kind} of ${payload.id}`,
          decideOn({ kind, payload, stored, agentOf, forget, fencedGrace })
        )
      }

      return AgentEntity.of({
        followup: ({ payload }) => deliver("followup", payload),
        steer: ({ payload }) => deliver("steer", payload),
        inject: ({ payload }) => deliver("inject", payload),
        cancel: ({ payload }) => persevere("a cancel", (agent) => agent.cancel(payload.cause, { keepInbox: payload.keepInbox })),
        // A stopped agent is not answered for: the session is reopened first (`persevere`).
        status: () =>
          persevere("a status", (agent) =>
            Effect.flatMap(notStopped(agent), (status) =>
              Effect.map(agent.inbox, (inbox) => ({
                status,
                nextTurn: inbox.nextTurn.length,
                nextStep: inbox.nextStep.length
              })))),
        approve: ({ payload }) => decideRpc("approve", payload),
        reject: ({ payload }) => decideRpc("reject", payload),
        pendingApprovals: () =>
          persevere("a pendingApprovals", (agent) => Effect.zipRight(notStopped(agent), agent.pendingApprovals)),
        // An id this agent never saw may have been delivered by a writer that took the session
        // since (this agent does not know yet that it lost it): when the stored log holds it,
        // the session is reopened after `fencedGrace` (as for a fence) and asked again.
        outcome: ({ payload }) =>
          persevere("an outcome", (agent) =>
            agent.outcome(payload.messageId).pipe(
              Effect.catchTag("MessageNotFound", (e) =>
                Effect.flatMap(
                  Effect.flatMap(SessionStoreTag, (store) => store.read(sessionId)).pipe(
                    Effect.map((c) => c.events.some((ev) => insertedHere(ev, payload.messageId))),
                    Effect.orElseSucceed(() => false),
                    Effect.provide(context)
                  ),
                  (stored) =>
                    stored
                      ? Effect.sleep(fencedGrace).pipe(
                        Effect.zipRight(forget(agent)),
                        Effect.zipRight(Effect.flatMap(agentOf, (a) => a.outcome(payload.messageId)))
                      )
                      : Effect.fail(e)
                ))
            )),
        events: () =>
          Stream.unwrapScoped(Effect.gen(function*() {
            const agent = yield* agentOf
            // Subscribed before the status is read: the first element says the stream is live.
            const queue = yield* agent.subscribe
            const now: AgentEvent = { type: "agent/status", status: yield* agent.status }
            return Stream.concat(
              Stream.succeed(now),
              Stream.takeUntil(Stream.fromQueue(queue), (e) => e.type === "agent/disposed")
            )
          }))
      })
    }),
    {
      concurrency: "unbounded",
      maxIdleTime: options.maxIdleTime ?? Duration.minutes(5)
    }
  )
