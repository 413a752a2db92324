/**
 * The sessions of one `agent-loop acp` connection (§22; `agent.ts` answers the requests): the
 * table of those open on it and each one's lifecycle. `open` gives a session a scope of its own
 * under the connection's, connects its MCP servers in it (`Mcp.connect`, loaded on first use;
 * `mcpServers.ts`), makes or resumes its agent with their tools, and forwards its live events for
 * ever: its updates sent holding its `sending` permit (`updates.ts`, `children.ts`), its
 * questions asked and dropped (`asking.ts`), its prompts answered when their turn ends
 * (`stopReasonOf`). `reportFailed` tells of the servers that could not start; `close` cancels,
 * disposes and closes a session (`session/close`). What the client offered is read when it is
 * needed (`SessionsDeps`), for `initialize` may come after the table is made.
 *
 * @since 0.1.0
 */
import * as acp from "@agentclientprotocol/sdk"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import { Chunk, Deferred, Effect, Either, ExecutionStrategy, Exit, FiberId, FiberMap, Queue, Scope } from "effect"
import type * as Agent from "../../Agent.js"
import type { AgentEvent, AgentNotification } from "../../AgentEvent.js"
import type * as IdGenerator from "../../IdGenerator.js"
import type * as Mcp from "../../Mcp.js"
import type * as Model from "../../Model.js"
import type { TurnEndReason } from "../../SessionEvent.js"
import type * as SessionStore from "../../SessionStore.js"
import type * as Tool from "../../Tool.js"
import type * as Asking from "./asking.js"
import * as Children from "./children.js"
import * as McpServers from "./mcpServers.js"
import { invalidParams } from "./params.js"
import { projector, type UpdateProjector } from "./updates.js"

/**
 * The JSON-RPC error of a turn that ended `error` (§6.4): -32603, message `CODE: message`,
 * `data {code, message, status?}`.
 *
 * @since 0.1.0
 */
export const TURN_ERROR = -32603

/**
 * A prompt's answer from the end reason of its turn (§22): `completed` → `end_turn`,
 * `max-tokens` → `max_tokens`, error `MAX_STEPS` → `max_turn_requests`, `blocked` → `refusal`,
 * `aborted`/`interrupted` → `cancelled`; another error → a JSON-RPC error (`TURN_ERROR`).
 *
 * @since 0.1.0
 * @category models
 */
export const stopReasonOf = (
  reason: TurnEndReason
): { readonly stopReason: acp.StopReason } | { readonly error: acp.RequestError } => {
  switch (reason.kind) {
    case "completed":
      return { stopReason: "end_turn" }
    case "max-tokens":
      return { stopReason: "max_tokens" }
    case "blocked":
      return { stopReason: "refusal" }
    case "aborted":
    case "interrupted":
      return { stopReason: "cancelled" }
    case "error":
      return reason.error.code === "MAX_STEPS"
        ? { stopReason: "max_turn_requests" }
        : { error: new acp.RequestError(TURN_ERROR, `${reason.error.code}: ${reason.error.message}`, reason.error) }
    default:
      return { stopReason: "end_turn" }
  }
}

/**
 * A prompt's answer: its stop reason, or the error of its turn (`stopReasonOf`).
 *
 * @since 0.1.0
 * @category models
 */
export type PromptResult = { readonly stopReason: acp.StopReason } | { readonly error: acp.RequestError }

/**
 * A prompt waiting for its answer: the turn that claimed it, once it is known; `handed` settles
 * when its handler has given the SDK the response to write.
 *
 * @since 0.1.0
 * @category models
 */
export interface PromptWaiter {
  readonly answer: Deferred.Deferred<PromptResult>
  readonly handed: Promise<void>
  turn: number | undefined
}

/**
 * An ACP session on this connection: its agent and its prompts waiting for their turn's end.
 *
 * @since 0.1.0
 * @category models
 */
export interface Session {
  readonly id: string
  readonly agent: Agent.Agent
  readonly cwd: string
  /** The session's scope on this connection (closed when stdin ends). */
  readonly scope: Scope.CloseableScope
  /**
   * The permission requests waiting for the client's answer, one fiber per open question (§26),
   * by question id: ended by the answer, or interrupted when the question is decided otherwise
   * (which drops the request: `$/cancel_request`).
   */
  readonly requests: FiberMap.FiberMap<string>
  /** The abort controllers of the permission requests not yet answered, by question id. */
  readonly asking: Map<string, AbortController>
  /** Prompts by message id, until answered. */
  readonly prompts: Map<string, PromptWaiter>
  /** Prompt message ids by the turn that claimed them. */
  readonly byTurn: Map<number, Array<string>>
  readonly updates: UpdateProjector
  /** Its sub-agents' updates (§27, `children.ts`). */
  readonly children: Children.ChildrenProjector
  /**
   * One permit: whoever sends this session's updates holds it (the forwarder for each event, a
   * `session/load` for its whole replay), so that they never interleave (`agent.ts`'s module comment).
   */
  readonly sending: Effect.Semaphore
  /** The seq of the last durable event the forwarder has handled (or primed); -1: none. */
  handled: number
  /** The seq of the last event the last replay showed; -1: none (see `handle`). */
  replayed: number
  /** Its MCP servers (`session/new`'s or the first `session/load`'s `mcpServers`), closed with its scope. */
  readonly mcp: ReadonlyArray<Mcp.McpConnection>
  /** A call's title label of a tool: an MCP server's tool is `SERVER: TOOL` (`mcpServers.ts`). */
  readonly toolLabel: (name: string) => string | undefined
  /** Done when the forwarder has handled `agent/disposed` (the session's last live event). */
  readonly ended: Deferred.Deferred<void>
}

/**
 * A server of a session's `mcpServers` that could not start, and why (its `McpError`'s message).
 *
 * @since 0.1.0
 * @category models
 */
export interface FailedServer {
  readonly name: string
  readonly message: string
}

/**
 * How long `session/close` waits for the forwarder to send what the session's cancel and dispose
 * gave (it waits on nothing but the client reading its stdout) before it ends it anyway.
 */
const CLOSE_DRAIN_MS = 5_000

/**
 * The services a session's agent runs with (the command's layers).
 *
 * @since 0.1.0
 * @category models
 */
export type Services = SessionStore.SessionStore | Model.Model | IdGenerator.IdGenerator | FileSystem.FileSystem | Path.Path

/**
 * What the table needs of its connection: the scope sessions open under (the command's), the
 * agent's version (the MCP client's) and `--context-window`, what the client offered (read when
 * needed: `clientCapabilities.session.compaction`, `.session.notices`, `.subagents`), how an
 * update is sent and a notice written, and the permission requests (`asking.ts`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionsDeps {
  readonly top: Scope.Scope
  readonly version: string
  readonly contextWindow: number | undefined
  readonly compaction: () => boolean
  readonly notices: () => boolean
  readonly subagentSessions: () => boolean
  readonly send: (sessionId: string, update: acp.SessionUpdate) => Effect.Effect<void>
  readonly notice: (text: string) => Effect.Effect<void>
  readonly asking: Pick<ReturnType<typeof Asking.make>, "askOne" | "drop">
}

/**
 * The sessions open on a connection (see the module comment).
 *
 * @since 0.1.0
 * @category models
 */
export interface Sessions {
  /** The open session `id`, if any. */
  readonly get: (id: string) => Session | undefined
  /** The open session `id`, else -32002 (`session not found`). */
  readonly sessionOf: (id: string) => Effect.Effect<Session, acp.RequestError>
  /** Puts `session` in the table as `id` (a session `open` gave, or one `session/load` replayed). */
  readonly set: (id: string, session: Session) => void
  /**
   * Opens a session around the agent `make` builds (its MCP servers connected first, their
   * toolsets given to `make`) and forwards its events; also returns the servers that could not
   * start. Not in the table until `set`.
   */
  readonly open: <E>(
    make: (toolsets: ReadonlyArray<Tool.Toolset>) => Effect.Effect<Agent.Agent, E, Services | Scope.Scope>,
    cwd: string,
    loaded: boolean,
    servers: ReadonlyArray<Mcp.ServerConfig>
  ) => Effect.Effect<
    { readonly session: Session; readonly failed: ReadonlyArray<FailedServer> },
    E | acp.RequestError,
    Services
  >
  /** Tells of the servers that could not start: on stderr, and as `notice` updates once `handed`. */
  readonly reportFailed: (session: Session, failed: ReadonlyArray<FailedServer>, handed: Promise<void>) => Effect.Effect<void>
  /** `session/close`: out of the table, cancelled, disposed, its scope closed. */
  readonly close: (session: Session) => Effect.Effect<void>
}

/** A sub-agent's event without its wrapping (§27: `subagent/event`, a grandchild's twice), or the event. */
const innermost = (event: AgentEvent): AgentEvent =>
  event.type === "subagent/event" && !("seq" in event)
    ? innermost((event as Extract<AgentEvent, { readonly type: "subagent/event" }>).event)
    : event

/**
 * The session table of a connection (see the module comment).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (deps: SessionsDeps): Sessions => {
  const { asking, notice, send, top } = deps
  const { askOne, drop } = asking
  const sessions = new Map<string, Session>()

  const sessionOf = (id: string): Effect.Effect<Session, acp.RequestError> => {
    const session = sessions.get(id)
    return session === undefined ? Effect.fail(acp.RequestError.sessionNotFound(id)) : Effect.succeed(session)
  }

  /**
   * Connects a session's MCP servers in its scope (`Mcp.connect`, loaded on first use: the
   * MCP SDK is in a chunk of its own). A server that cannot start does not fail the session:
   * it is returned among `failed` (`reportFailed` tells the client), and the session goes on
   * without its tools.
   */
  const connectServers = (
    servers: ReadonlyArray<Mcp.ServerConfig>,
    scope: Scope.Scope
  ): Effect.Effect<
    { readonly connections: ReadonlyArray<Mcp.McpConnection>; readonly failed: ReadonlyArray<FailedServer> },
    acp.RequestError
  > =>
    servers.length === 0 ? Effect.succeed({ connections: [], failed: [] }) : Effect.gen(function*() {
      const loaded = yield* Effect.either(Effect.tryPromise(() => import("../../Mcp.js")))
      if (Either.isLeft(loaded)) {
        const why = loaded.left.cause instanceof Error ? loaded.left.cause.message : String(loaded.left.cause)
        return {
          connections: [],
          failed: servers.map((s) => ({
            name: s.name,
            message: `MCP server ${JSON.stringify(s.name)} could not start: the MCP client could not be loaded (${why})`
          }))
        }
      }
      const connection = yield* loaded.right.connect(servers, { clientName: "agent-loop", clientVersion: deps.version })
        .pipe(
          Scope.extend(scope),
          // A bad configuration: our check of `mcpServers` (mcpServers.ts) refuses it first.
          Effect.mapError((e) => invalidParams(e.message))
        )
      const failed = connection.servers().filter((s) => s.state === "failed").map((s) => ({
        name: s.name,
        message: s.error?.message ?? `MCP server ${JSON.stringify(s.name)} could not start`
      }))
      return { connections: [connection], failed }
    })

  /**
   * Tells of the servers of a session that could not start: a line on stderr each, at once
   * (the editor's log of the agent); and, to a client that offers
   * `clientCapabilities.session.notices`, a `notice` update each (ACP's information for the
   * user that is not part of the session's history) once the response that names the session
   * is written. Not an agent message: it is not the model's, and no replay would show it.
   */
  const reportFailed = (session: Session, failed: ReadonlyArray<FailedServer>, handed: Promise<void>) =>
    failed.length === 0 ? Effect.void : Effect.zipRight(
      Effect.forEach(
        failed,
        (f) => notice(`session ${session.id}: ${f.message}; the session goes on without its tools`),
        { discard: true }
      ),
      deps.notices()
        ? Effect.asVoid(Effect.forkIn(
          Effect.zipRight(
            Effect.promise(() => handed.then(() => new Promise<void>((resolve) => setImmediate(resolve)))),
            session.sending.withPermits(1)(Effect.forEach(
              failed,
              (f) => send(session.id, McpServers.failedNotice(f.name, f.message)),
              { discard: true }
            ))
          ),
          session.scope
        ))
        : Effect.void
    )

  /**
   * Closes a session (`session/close`): as `session/cancel` (its turn ends aborted, its queued
   * prompts answer `cancelled`), then its agent is disposed (an open question is decided
   * `cancelled` and its request dropped), the forwarder sends what that gave, and its scope
   * is closed: its MCP servers are closed (a stdio server's process ended), its log closed.
   */
  const closeSession = (session: Session): Effect.Effect<void> =>
    Effect.gen(function*() {
      sessions.delete(session.id)
      yield* session.agent.cancel({ kind: "user" }).pipe(Effect.catchAll((e) => notice(`session/close: ${e.message}`)))
      yield* session.agent.dispose.pipe(Effect.catchAll((e) => notice(`session/close: ${e.message}`)))
      yield* Deferred.await(session.ended).pipe(Effect.timeout(CLOSE_DRAIN_MS), Effect.ignore)
      yield* Scope.close(session.scope, Exit.void)
      // Prompts the forwarder did not answer (it was ended first): cancelled.
      for (const waiter of session.prompts.values()) {
        Deferred.unsafeDone(waiter.answer, Exit.succeed({ stopReason: "cancelled" }))
      }
      session.prompts.clear()
    })

  /** Answers a prompt (once) and forgets it; returns when its handler hands the response over. */
  const answer = (session: Session, messageId: string, result: PromptResult, handed: Array<Promise<void>>) => {
    const waiter = session.prompts.get(messageId)
    if (waiter === undefined) return
    session.prompts.delete(messageId)
    Deferred.unsafeDone(waiter.answer, Exit.succeed(result))
    handed.push(waiter.handed)
  }

  /**
   * One live event: its updates are sent (in order, holding `sending`), then the prompts it
   * decides are answered. An event a replay showed (a durable one up to `replayed`, a live
   * notification before it: the deltas of a message the replay showed whole) is projected, but
   * only its `usage_update` is sent (a replay has none). The forwarder then waits until the
   * responses are queued for writing (their handlers returned, and a macrotask passed, in which
   * the SDK writes them): so the next turn's updates never overtake the response of the prompt
   * before it.
   */
  const handle = (session: Session, event: AgentEvent, following?: AgentEvent): Effect.Effect<void> => {
    const sent = session.sending.withPermits(1)(Effect.suspend(() => {
      const all = session.updates.push(event)
      const fromChildren = session.children.push(event, following)
      const durable = "seq" in event
      const shown = durable ? event.seq <= session.replayed : session.handled < session.replayed
      if (durable) session.handled = event.seq
      const updates = shown ? all.filter((u) => u.sessionUpdate === "usage_update") : all
      const outgoing = shown ? [] : fromChildren
      const sent = updates.length === 0 && outgoing.length === 0 ? Effect.void : Effect.zipRight(
        Effect.forEach(updates, (u) => send(session.id, u), { discard: true }),
        Effect.forEach(outgoing, (o) => send(o.sessionId, o.update), { discard: true })
      )
      // A question is asked after its call's updates; one a replay showed, once the load is
      // answered. A sub-agent's comes wrapped (§27): it is asked through this session.
      const own = innermost(event)
      if (own.type === "approval/asked" && !shown) return Effect.zipRight(sent, askOne(session, own.data))
      if (own.type === "approval/decided") return Effect.zipRight(sent, drop(session, own.data))
      return sent
    }))
    return Effect.zipRight(
      sent,
      Effect.suspend(() => {
        const handed: Array<Promise<void>> = []
        decide(session, event, handed)
        return handed.length === 0
          ? Effect.void
          : Effect.promise(() => Promise.all(handed).then(() => new Promise<void>((resolve) => setImmediate(resolve))))
      })
    )
  }

  const decide = (session: Session, event: AgentEvent, handed: Array<Promise<void>>): void => {
    if ("seq" in event) {
      if (event.type !== "turn/end") return
      const data = event.data as { readonly turn: number; readonly reason: TurnEndReason }
      const ids = session.byTurn.get(data.turn)
      if (ids === undefined) return
      session.byTurn.delete(data.turn)
      const result = stopReasonOf(data.reason)
      for (const id of ids) answer(session, id, result, handed)
      return
    }
    const live = event as AgentNotification
    switch (live.type) {
      case "agent/inbox/claimed": {
        const waiter = session.prompts.get(live.message.id)
        if (waiter === undefined) return
        waiter.turn = live.turn
        const ids = session.byTurn.get(live.turn)
        if (ids === undefined) session.byTurn.set(live.turn, [live.message.id])
        else ids.push(live.message.id)
        return
      }
      case "agent/inbox/discarded": {
        // Dropped before a turn claimed it: a cancel cleared the queue (§9), or dispose.
        const waiter = session.prompts.get(live.message.id)
        if (waiter !== undefined && waiter.turn === undefined) {
          answer(session, live.message.id, { stopReason: "cancelled" }, handed)
        }
        return
      }
      case "agent/disposed":
        for (const id of [...session.prompts.keys()]) answer(session, id, { stopReason: "cancelled" }, handed)
        Deferred.unsafeDone(session.ended, Exit.void)
        return
      default:
        return
    }
  }

  /**
   * Opens a session around the agent `make` builds, in a scope of its own under the command's
   * (closed by `session/close`, or when stdin ends): connects its MCP servers first (their
   * toolsets go to `make`: `Agent.resume` validates a waiting call again with the tools it is
   * given, §26 rule 8), then subscribes, then forwards its events for ever. Also returns the
   * servers that could not start.
   */
  const open = <E>(
    make: (toolsets: ReadonlyArray<Tool.Toolset>) => Effect.Effect<Agent.Agent, E, Services | Scope.Scope>,
    cwd: string,
    loaded: boolean,
    servers: ReadonlyArray<Mcp.ServerConfig>
  ): Effect.Effect<
    { readonly session: Session; readonly failed: ReadonlyArray<FailedServer> },
    E | acp.RequestError,
    Services
  > =>
    Effect.gen(function*() {
      const scope = yield* Scope.fork(top, ExecutionStrategy.sequential)
      const { connections, failed } = yield* connectServers(servers, scope).pipe(
        Effect.onError(() => Scope.close(scope, Exit.void))
      )
      const agent = yield* make(connections.map((c) => c.toolset)).pipe(
        Scope.extend(scope),
        Effect.onError(() => Scope.close(scope, Exit.void))
      )
      const queue = yield* Scope.extend(agent.subscribe, scope)
      const requests = yield* Scope.extend(FiberMap.make<string>(), scope)
      const prompts = new Map<string, PromptWaiter>()
      const sending = yield* Effect.makeSemaphore(1)
      const session: Session = {
        id: agent.id,
        agent,
        cwd,
        scope,
        requests,
        asking: new Map(),
        prompts,
        byTurn: new Map(),
        children: Children.projector(agent.id, {
          cwd,
          sessions: deps.subagentSessions(),
          contextWindow: deps.contextWindow,
          compaction: deps.compaction()
        }),
        updates: projector({
          cwd,
          toolLabel: (name) => session.toolLabel(name),
          isPrompt: (id) => prompts.has(id),
          contextWindow: deps.contextWindow,
          compaction: deps.compaction(),
          next: (seq) => agent.log.events()[seq + 1]
        }),
        sending,
        handled: -1,
        replayed: -1,
        mcp: connections,
        toolLabel: McpServers.toolLabel(() => connections),
        ended: Deferred.unsafeMake<void>(FiberId.none)
      }
      // A loaded session's live projector is first primed with its log (the replay shows it),
      // so that what the log left pending (a crashed process's queued input, §10) has its
      // `via` from the splice that inserted it when it enters. A durable event the queue also
      // holds (logged after the subscription) is not handled twice.
      let primedThrough = -1
      if (loaded) {
        for (const e of agent.log.events()) {
          session.updates.prime(e)
          primedThrough = e.seq
        }
        session.handled = primedThrough
      }
      yield* Effect.forkIn(
        Effect.forever(Effect.flatMap(Queue.takeBetween(queue, 1, 256), (batch) => {
          const events = Chunk.toReadonlyArray(batch)
          return Effect.forEach(
            events,
            (e, i) => ("seq" in e && e.seq <= primedThrough ? Effect.void : handle(session, e, events[i + 1])),
            { discard: true }
          )
        })),
        scope
      )
      return { session, failed }
    })

  return {
    get: (id) => sessions.get(id),
    sessionOf,
    set: (id, session) => void sessions.set(id, session),
    open,
    reportFailed,
    close: closeSession
  }
}
