/**
 * Permission requests of an ACP session (§26, §22 item 10; `permission.ts` for the shapes). Each
 * open question of a session is asked once on this connection: `session/request_permission` is
 * written at once, in the order the questions were asked (the forwarder for a live
 * `approval/asked`, after its call's updates; `session/load` for the questions a loaded log left
 * open, once its response is written), and its answer is awaited in a fiber of the session's
 * `requests`, so that a client that never answers holds up nothing but that call. The answer
 * decides the question (`Permission.decisionOf`: `approve`/`reject` named by the client's
 * `clientInfo.name`, or a cancel of the turn); an answer that decides nothing (malformed, an
 * error response) is noticed and leaves the question open, to be asked again by the next
 * `session/load`. A question decided otherwise (a cancel, a dispose) drops its request (`drop`).
 *
 * A sub-agent's question (§27: listed by the parent's `pendingApprovals` with its `sessionId`,
 * decided through the parent) is asked the same way, its call's `tool_call` made from the
 * question: on the child's session with the call's own id when the client takes sub-agent
 * sessions (`children.ts`), else on the parent's session with the call id `CHILD/CALL` (the
 * child's call ids repeat the parent's). Its `_meta["agent-loop"].sessionId` names the child.
 *
 * @since 0.1.0
 */
import type { RequestPermissionRequest } from "@agentclientprotocol/sdk"
import { Effect, Either, Fiber, FiberMap, Option } from "effect"
import type * as Agent from "../../Agent.js"
import type * as Approval from "../../Approval.js"
import * as Permission from "./permission.js"

/**
 * What asking needs of an ACP session: its id, agent and `cwd`, the fibers of its requests and
 * their abort controllers, and its `sending` permit.
 *
 * @since 0.1.0
 * @category models
 */
export interface AskingSession {
  readonly id: string
  readonly agent: Agent.Agent
  readonly cwd: string
  readonly requests: FiberMap.FiberMap<string>
  readonly asking: Map<string, AbortController>
  readonly sending: Effect.Semaphore
  /** A call's title label of a tool (an MCP server's: `SERVER: TOOL`), as its `tool_call` had it. */
  readonly toolLabel?: ((name: string) => string | undefined) | undefined
}

/**
 * What asking needs of the connection: how to send a request, whether it closed, where notices
 * go, the client's name (the person who decides, §26 `by`), whether it takes sub-agent sessions.
 *
 * @since 0.1.0
 * @category models
 */
export interface AskingDeps {
  readonly request: (
    params: RequestPermissionRequest,
    options: { readonly cancellationSignal: AbortSignal; readonly stopWaitingOnCancel: boolean }
  ) => Promise<unknown>
  readonly closed: () => boolean
  readonly notice: (text: string) => Effect.Effect<void>
  readonly personName: () => string | undefined
  readonly childSessions: () => boolean
}

/**
 * The `session/request_permission` params of `question` (see the module comment): an own
 * question's call from the session's log; a sub-agent's from the question.
 *
 * @since 0.1.0
 * @category constructors
 */
export const requestOf = (
  session: Pick<AskingSession, "id" | "agent" | "cwd" | "toolLabel">,
  question: Approval.Pending,
  childSessions: boolean
): RequestPermissionRequest => {
  if (question.sessionId === undefined) {
    return Permission.request(
      session.id,
      Permission.toolCallOf(session.agent.log.events(), session.cwd, question, session.toolLabel),
      question
    )
  }
  const call = childSessions ? question : { ...question, callId: `${question.sessionId}/${question.callId}` }
  return Permission.request(
    childSessions ? question.sessionId : session.id,
    // A sub-agent has its parent's MCP servers (the same connections): the same titles.
    Permission.toolCallOf([], session.cwd, call, session.toolLabel),
    question
  )
}

/**
 * The asking of a connection (see the module comment): `ask` one question, `askOne` a question
 * the forwarder saw asked (its `approval/asked` data), `askOpen` every open question, `drop` the
 * request of a question decided otherwise (its `approval/decided` data).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (deps: AskingDeps) => {
  const ask = (session: AskingSession, question: Approval.Pending): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (FiberMap.unsafeHas(session.requests, question.id)) return Effect.void
      const controller = new AbortController()
      const response: Promise<unknown> = deps.request(
        requestOf(session, question, deps.childSessions()),
        { cancellationSignal: controller.signal, stopWaitingOnCancel: true }
      )
      // Awaited by the fiber; rejected before it awaits (dropped at once), it is no unhandled rejection.
      response.then(undefined, () => {})
      session.asking.set(question.id, controller)
      return Effect.asVoid(FiberMap.run(
        session.requests,
        question.id,
        Effect.onInterrupt(
          answered(session, question, response, controller),
          () => Effect.sync(() => abort(session, question.id))
        )
      ))
    })

  /** Asks a question the forwarder saw asked, if it is still open (a policy may have decided it in the same append). */
  const askOne = (session: AskingSession, data: unknown): Effect.Effect<void> =>
    Effect.flatMap(session.agent.pendingApprovals, (pending) => {
      const id = (data as { readonly id?: unknown } | null)?.id
      const question = pending.find((q) => q.id === id)
      return question === undefined ? Effect.void : ask(session, question)
    })

  /** Asks every open question of the session that has no request on this connection, in the order they were asked. */
  const askOpen = (session: AskingSession): Effect.Effect<void> =>
    session.sending.withPermits(1)(
      Effect.flatMap(session.agent.pendingApprovals, (pending) =>
        Effect.forEach(pending, (q) => ask(session, q), { discard: true }))
    )

  /** Aborts a request not yet answered: the SDK sends `$/cancel_request` for it and stops waiting. */
  const abort = (session: AskingSession, id: string): void => {
    const controller = session.asking.get(id)
    if (controller === undefined) return
    session.asking.delete(id)
    controller.abort()
  }

  /**
   * Drops the request of a question decided otherwise: aborted at once (so its
   * `$/cancel_request` comes before the updates that follow the decision), its fiber
   * interrupted, not awaited (the forwarder goes on). A request already answered is left alone.
   */
  const drop = (session: AskingSession, data: unknown): Effect.Effect<void> =>
    Effect.suspend(() => {
      const id = (data as { readonly id?: unknown } | null)?.id
      if (typeof id !== "string") return Effect.void
      abort(session, id)
      const fiber = FiberMap.unsafeGet(session.requests, id)
      return Option.isSome(fiber) ? Effect.asVoid(Fiber.interruptFork(fiber.value)) : Effect.void
    })

  /** Awaits the client's answer, then decides the question by it (uninterruptibly: a decision is never cut short). */
  const answered = (
    session: AskingSession,
    question: Approval.Pending,
    response: Promise<unknown>,
    controller: AbortController
  ): Effect.Effect<void> =>
    Effect.flatMap(Effect.either(Effect.tryPromise({ try: () => response, catch: (cause) => cause })), (result) => {
      // Dropped (the question was decided otherwise): nothing to decide.
      if (controller.signal.aborted) return Effect.void
      session.asking.delete(question.id)
      if (Either.isLeft(result)) {
        // The connection closed (stdin ended): no answer; the dispose that follows decides the question.
        if (deps.closed()) return Effect.never
        return undecided(
          session,
          new Permission.PermissionRequestFailed({
            message: `the client's session/request_permission failed: ${Permission.describeError(result.left)}`,
            approvalId: question.id,
            cause: result.left
          })
        )
      }
      const decision = Permission.decisionOf(question.id, result.right)
      if (Either.isLeft(decision)) return undecided(session, decision.left)
      return Effect.uninterruptible(decideBy(session, question, decision.right))
    })

  const undecided = (session: AskingSession, error: Permission.PermissionError) =>
    deps.notice(
      `session ${session.id}: approval ${error.approvalId}: ${error.message}; the question stays open ` +
        `(a session/load asks again, session/cancel cancels the turn)`
    )

  /** Decides a question as the client answered (§26): approve or reject named by the client, or cancel the turn. */
  const decideBy = (session: AskingSession, question: Approval.Pending, decision: Permission.Decision): Effect.Effect<void> => {
    const name = deps.personName()
    const decided: Effect.Effect<void, { readonly _tag: string; readonly message: string }> = decision._tag === "Allow"
      ? session.agent.approve(question.id, { always: decision.always, name })
      : decision._tag === "Reject"
      ? session.agent.reject(question.id, { always: decision.always, reason: decision.reason, name })
      // ACP's `cancelled`: the client cancelled the prompt turn (as `session/cancel` does, whose
      // clearing of the queues it leaves to that notification).
      : session.agent.cancel({ kind: "user" }, { keepInbox: true })
    return decided.pipe(
      Effect.catchAll((e) =>
        // Decided meanwhile (a cancel, a dispose): the answer came too late, and changes nothing.
        e._tag === "ApprovalNotOpen"
          ? Effect.void
          : deps.notice(`session ${session.id}: approval ${question.id}: the client's answer could not be recorded: ${e.message}`)
      )
    )
  }

  return { ask, askOne, askOpen, drop }
}
