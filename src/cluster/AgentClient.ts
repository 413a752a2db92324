/**
 * `AgentClient` (§21): the `AgentEntity` client, usable from any process of the cluster
 * (a runner, or a client-only process: `AgentRunner.layerClient`). Each method names the session
 * by id; deliveries reply `{messageId}` once durable, and are safe to retry with the same
 * `messageId` (the log holds one copy, the retry gets the same answer). `approve`, `reject` and
 * `pendingApprovals` answer a session's open questions (§26), whichever runner owns it now.
 *
 * Cold clients: a persisted message sent before this process knows who owns the session's shard
 * is only saved to storage, and waits for the owner's next storage poll (0.8–12.8 s measured with
 * the cluster's 10 s default). So the first persisted call of an `AgentClient` is preceded by a
 * `status` of its session (not persisted: it waits, retrying every 100 ms, until the owner is
 * known, then goes straight to it); the runners' 1 s message poll (`AgentRunner.defaults`) bounds
 * what is left.
 *
 * @since 0.1.0
 */
import type { AlreadyProcessingMessage, MailboxFull, PersistenceError } from "@effect/cluster/ClusterError"
import type { Sharding } from "@effect/cluster/Sharding"
import { Context, Effect, Layer, type Stream } from "effect"
import { randomUUID } from "node:crypto"
import type { InvalidEvent } from "../AgentError.js"
import type { AgentEvent } from "../AgentEvent.js"
import type { DeliveryOutcome } from "../Delivery.js"
import type { ContentBlock, MessageSource } from "../Message.js"
import type { AbortCause } from "../SessionEvent.js"
import {
  AgentEntity,
  type DecisionError,
  type Delivered,
  type DeliveryError,
  type DeliveryMessage,
  type MessageNotFound,
  type OpenError,
  type PendingApproval,
  type Status
} from "./AgentEntity.js"

/**
 * What the cluster itself can fail a call with: the entity's mailbox is full, the message is
 * already being processed (a duplicate still in flight elsewhere), message storage failed.
 *
 * @since 0.1.0
 * @category errors
 */
export type ClusterFailure = MailboxFull | AlreadyProcessingMessage | PersistenceError

/**
 * A message to deliver: text, or `{content, source?, id?}` (a `UserMessage` is one). An `id`
 * in the message is its delivery id unless `options.messageId` is given (they must agree).
 *
 * @since 0.1.0
 * @category models
 */
export type MessageInput =
  | string
  | {
    readonly id?: string | undefined
    readonly content: ReadonlyArray<ContentBlock>
    readonly source?: MessageSource | undefined
  }

/**
 * Options of a delivery: `messageId`, the message's id (default: the message's own `id`, else a
 * random UUID). Give it to retry safely: a delivery of an id the session's log already holds
 * answers with that delivery and logs nothing.
 *
 * @since 0.1.0
 * @category models
 */
export interface DeliveryOptions {
  readonly messageId?: string | undefined
}

/**
 * @since 0.1.0
 * @category services
 */
export interface AgentClientService {
  /** `followup` (§5.1): `{messageId}` once the splice is durable. */
  readonly followup: (
    sessionId: string,
    message: MessageInput,
    options?: DeliveryOptions
  ) => Effect.Effect<Delivered, DeliveryError | ClusterFailure>
  /** `steer` (§5.1). */
  readonly steer: (
    sessionId: string,
    message: MessageInput,
    options?: DeliveryOptions
  ) => Effect.Effect<Delivered, DeliveryError | ClusterFailure>
  /** `inject` (§5.1): text gets the source `{kind:"plugin", plugin:"cluster"}`. */
  readonly inject: (
    sessionId: string,
    message: MessageInput,
    options?: DeliveryOptions
  ) => Effect.Effect<Delivered, DeliveryError | ClusterFailure>
  /** `cancel` (§9): returns when the interrupted turn is closed. */
  readonly cancel: (
    sessionId: string,
    cause?: AbortCause | undefined,
    options?: { readonly keepInbox?: boolean | undefined }
  ) => Effect.Effect<void, InvalidEvent | OpenError | ClusterFailure>
  /** The session's status and pending counts (activates the session). */
  readonly status: (sessionId: string) => Effect.Effect<Status, OpenError | ClusterFailure>
  /** Waits for the fate of a message of the session (§12); `MessageNotFound` for an id never inserted. */
  readonly outcome: (
    sessionId: string,
    messageId: string
  ) => Effect.Effect<DeliveryOutcome, MessageNotFound | OpenError | ClusterFailure>
  /** The session's live events while the stream runs (§5.3). */
  readonly events: (sessionId: string) => Stream.Stream<AgentEvent, OpenError | ClusterFailure>
  /**
   * The session's open questions (§26 rule 5), in the order they were asked: id, tool, call id,
   * arguments, turn, step, `askedAt` (activates the session: a question its log left open is
   * reopened by the resume, §26 rule 8).
   */
  readonly pendingApprovals: (sessionId: string) => Effect.Effect<ReadonlyArray<PendingApproval>, OpenError | ClusterFailure>
  /**
   * Allows the call question `id` is about (§26 rule 5): `allowed-once`, or `allowed-always`
   * with `always`; `name` names the person. Returns once the decision is durable;
   * `ApprovalNotOpen` for a question not open (never asked, decided otherwise, closed by a
   * cancel), `InvalidDecision` for an empty id or a blank name.
   */
  readonly approve: (
    sessionId: string,
    id: string,
    options?: { readonly always?: boolean | undefined; readonly name?: string | undefined }
  ) => Effect.Effect<void, DecisionError | ClusterFailure>
  /** Refuses the call question `id` is about (`rejected`, or `rejected-always` with `always`), as `approve`. */
  readonly reject: (
    sessionId: string,
    id: string,
    options?: {
      readonly reason?: string | undefined
      readonly always?: boolean | undefined
      readonly name?: string | undefined
    }
  ) => Effect.Effect<void, DecisionError | ClusterFailure>
}

/**
 * @since 0.1.0
 * @category services
 */
export class AgentClient extends Context.Tag("effect-agent-loop/cluster/AgentClient")<AgentClient, AgentClientService>() {}

/** The delivery payload: the message on the wire and its id. */
const payloadOf = (message: MessageInput, options: DeliveryOptions | undefined) => {
  const messageId = options?.messageId ?? (typeof message === "string" ? undefined : message.id) ?? randomUUID()
  const wire: DeliveryMessage = typeof message === "string"
    ? message
    : message.source === undefined
    ? { id: message.id, content: message.content }
    : { id: message.id, content: message.content, source: message.source }
  return { messageId, message: wire }
}

/**
 * Makes the client from the `Sharding` in context (a runner's, or a client-only one).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<AgentClientService, never, Sharding> = Effect.gen(function*() {
  const client = yield* AgentEntity.client
  // Warm-up (see the module's comment): once per client, before its first persisted call.
  let warm = false
  const warmed = <A, E>(sessionId: string, call: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    warm ? call : Effect.zipRight(
      Effect.ignore(client(sessionId).status()),
      Effect.suspend(() => {
        warm = true
        return call
      })
    )
  return AgentClient.of({
    followup: (sessionId, message, options) => warmed(sessionId, client(sessionId).followup(payloadOf(message, options))),
    steer: (sessionId, message, options) => warmed(sessionId, client(sessionId).steer(payloadOf(message, options))),
    inject: (sessionId, message, options) => warmed(sessionId, client(sessionId).inject(payloadOf(message, options))),
    cancel: (sessionId, cause, options) => warmed(sessionId, client(sessionId).cancel({ cause, keepInbox: options?.keepInbox })),
    status: (sessionId) => client(sessionId).status(),
    outcome: (sessionId, messageId) =>
      warmed(
        sessionId,
        client(sessionId).outcome({ messageId }) as Effect.Effect<DeliveryOutcome, MessageNotFound | OpenError | ClusterFailure>
      ),
    events: (sessionId) => client(sessionId).events(),
    pendingApprovals: (sessionId) => client(sessionId).pendingApprovals(),
    approve: (sessionId, id, options) =>
      warmed(sessionId, client(sessionId).approve({ id, always: options?.always, name: options?.name })),
    reject: (sessionId, id, options) =>
      warmed(
        sessionId,
        client(sessionId).reject({ id, reason: options?.reason, always: options?.always, name: options?.name })
      )
  })
})

/**
 * `AgentClient` over the `Sharding` in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<AgentClient, never, Sharding> = Layer.effect(AgentClient, make)
