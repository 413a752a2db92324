/**
 * `agent-loop acp` (§22): an Agent Client Protocol v1 agent over
 * stdio, built on the official SDK (`@agentclientprotocol/sdk`, bundled with `zod` into the CLI
 * chunk that only this command loads). One JSON-RPC message a line on stdin and stdout; stdout
 * carries nothing else (notices go to stderr). Every ACP session is an agent of the JSONL store
 * (`--store`), with the offline tools of `run` confined to the session's `cwd`; when the client
 * offers `fs.readTextFile`, `read_file` reads through its `fs/read_text_file` (`clientFs.ts`).
 *
 * - `initialize`: protocol version 1 (the only one; asked for another, we answer 1, the latest we
 *   support), `agentCapabilities {loadSession: true, promptCapabilities {image: true, audio:
 *   false, embeddedContext: true}, mcpCapabilities {http: true, sse: true}, sessionCapabilities
 *   {close: {}}, _meta: {"agent-loop": {extensions}}}`, `authMethods: []`, `agentInfo`. Other requests before it are refused by the SDK (-32600). Once: a second
 *   `initialize` is -32600 and changes nothing (the sessions open took their `read_file` route
 *   and update shapes from the first one's capabilities).
 * - `session/new {cwd, mcpServers}`: `Agent.make` on a new session (`cwd` the absolute path of an
 *   existing directory, else -32602; the same for `session/load`), with its MCP servers' tools.
 * - MCP servers (§22 item 12; `mcpServers.ts`): the `mcpServers` of `session/new` and of a
 *   `session/load` that opens the session are checked by our params parser in place of the
 *   SDK's (a malformed entry is -32602 naming it, and nothing starts), converted to
 *   `Mcp.ServerConfig`s and connected with `Mcp.connect` (loaded on first use) in the session's
 *   scope before its agent is made or resumed; their toolset is the agent's (`toolsets`), beside
 *   the offline tools. Their calls ask for approval (MCP servers are untrusted, §26): a
 *   `session/request_permission` whose call is titled `SERVER: TOOL`. A server that cannot
 *   start does not fail the request: it is told on stderr, and to a client that offers
 *   `clientCapabilities.session.notices` as a `notice` update (ACP's information that is not
 *   session history; no agent message, which would pass for the model's and which no replay
 *   shows), after the response; the session goes on without its tools. The servers close with
 *   the session's scope (`session/close`, stdin's end). A `session/load` of a session already
 *   open on this connection keeps its servers (those it names are not started: a notice).
 * - `session/close {sessionId}` (`sessionCapabilities.close`): as `session/cancel`, then the
 *   agent is disposed (an open question decided `cancelled`, its request dropped), and the
 *   session's scope closed: its MCP servers end, its log is closed (a later `session/load`
 *   opens it again). An unknown session is -32002.
 * - `session/load {sessionId, cwd, mcpServers}`: `Agent.resume` (which repairs a crashed log first,
 *   §10; nothing pending is run), the conversation replayed as `session/update`
 *   notifications before the response (`replay.ts`), then prompts go on in it. Input a crashed
 *   process left pending (its queued prompts, steering, injections: durable, kept by §10) is
 *   not in the replay (it has not entered a step); it runs at the next prompt, in its own turn
 *   before the prompt's, and its updates stream as they happen (its messages as
 *   `user_message_chunk` with their `via`: the session's live projector is primed with the
 *   loaded log, its output discarded), with no prompt of this connection to answer. A session
 *   another process writes (its lock held) is an error response (-32603 naming it), never a
 *   second writer; an unknown session is -32002. A log or lock file in the store that is not a
 *   regular file (a fifo) is -32603 naming it, at once: the store never reads one (a blocked
 *   read would keep the process alive after stdin ends). A session already open on this
 *   connection is replayed again, with the same agent: a call it is running (no result in the
 *   log yet) is shown `in_progress` (replay's `running`), and its result follows live.
 * - One stream of updates a session: its updates are sent holding the session's `sending`
 *   permit, which the forwarder of its live events takes for each event and `session/load` for
 *   its whole replay, the log read inside it. So a replay is never interleaved with live
 *   updates, and it shows the log as far as it is written then: the live updates sent before
 *   it come before it (and are shown again in it), and of the events the forwarder has not yet
 *   handled, those up to the last one the replay read are left out (their updates are the
 *   replay's; the deltas before it are of a message the replay shows whole; only a
 *   `usage_update`, which a replay has none of, is still sent), and the rest follow it live.
 *   A call running at the load is thus `tool_call`, `in_progress` (once) in the replay, then its
 *   `completed` live.
 * - `session/prompt`: the blocks become one `UserMessage` (`prompt.ts`; a block we do not take is
 *   -32602 and nothing is logged) delivered as a `followup` (§5.1: queued while a turn runs, then
 *   its own turn). Its response comes when its own turn ends (`stopReasonOf`), after every update
 *   of that turn, with `_meta["agent-loop"].messageId` (the message's id in the log); a
 *   prompt the inbox dropped before a turn claimed it (a cancel, §9) is `cancelled` at once.
 * - `session/cancel`: `agent.cancel({kind:"user"})` (§9): the queues are cleared (queued prompts
 *   answer `cancelled`), the running turn ends aborted (its prompt answers `cancelled`, the last
 *   message about it).
 * - Approvals (§26; `permission.ts` for the shapes, `asking.ts` for the requests): with `ask` (`--ask TOOL`), the calls of
 *   those tools wait for a person. Each open question is asked with one
 *   `session/request_permission` (the call's `tool_call` shape, options `allow_once`,
 *   `allow_always`, `reject_once`, `reject_always`), written after the call's updates, in the
 *   order the questions were asked; a `session/load` asks the open questions of the log (reopened
 *   by `Agent.resume`) that have no request on this connection, once its response is written. The
 *   answer awaits in a fiber of its own, scoped to the session (a client that never answers holds
 *   up nothing else). A selected option is `agent.approve`/`agent.reject` with `always` and the
 *   client's `clientInfo.name` as the person's name (none without one); an option or outcome we
 *   do not know is a rejection naming it; `cancelled` (ACP: the client cancelled the prompt turn)
 *   is `agent.cancel({kind:"user"}, {keepInbox: true})`, which decides the question `cancelled`
 *   by `{kind:"cancel"}` (the queues are `session/cancel`'s to clear). A malformed answer or an
 *   error response decides nothing: a notice on stderr, and the question stays open. A question
 *   decided otherwise (`session/cancel`, a dispose) drops its request (`$/cancel_request`).
 *   `initialize` declares nothing for it (every ACP client takes `session/request_permission`),
 *   and no session state is sent: ACP v1 has none for `awaiting-approval` to map to (the v2
 *   draft's `state_update` `requires_action`).
 * - Sub-agents (§27, `--subagent`; `children.ts`): a client that offers
 *   `clientCapabilities.subagents` (read from the `initialize` message: the stable schema drops
 *   it) gets `subagent_update`s and each child's updates and questions on the child's session;
 *   any other client the children's progress as the content of the `subagent` call. A child's
 *   question is asked like the session's own (`asking.ts`) and decided through the parent.
 * - `_session/steer {sessionId, prompt}` → `agent.steer`, `_session/inject {sessionId, prompt,
 *   source?}` → `agent.inject` (default source `{kind:"plugin", plugin: <clientInfo.name, else
 *   "acp-client">}`; a given source is a `MessageSource` of kind `plugin {plugin}`, `hook {hook}` or
 *   `user`, else -32602 naming the problem): each answers `{messageId}` once its splice is
 *   durable (`EXTENSIONS`).
 * - Updates while turns run: `updates.ts`. Malformed lines (-32700), unknown methods (-32601),
 *   invalid params (-32602) are answered by the SDK; unknown notifications are ignored. An
 *   object that is no request, notification or response (a bad `jsonrpc`, `id` or `method`; an
 *   `id` without a `method`, `result` or `error`) is -32600 with its id, `null` only when it has
 *   none of a valid type (`envelope.ts`).
 * - A stdin line over `LINE_LIMIT` (the SDK's 32 MiB, which would end the connection) is dropped
 *   as it streams (`lineLimit.ts`) and answered `-32600 "message too large: N bytes, the limit
 *   is 32 MiB"` with the line's id (`null` when it is a response or its id cannot be read:
 *   `LineLimit.answerId`), with a notice on stderr; nothing else changes. A client's response over the limit
 *   fails the agent's request it answers (its `fs/read_text_file`: a tool error).
 * - stdin closed: the connection closes, every agent is disposed (§9: a running turn ends
 *   aborted `{kind:"disposed"}`), the logs are closed, the command returns (exit 0). A
 *   `read_file` waiting on the client's `fs/read_text_file` then is no tool error (the request
 *   fails "ACP connection closed"): it waits for the dispose's interruption, like any call.
 *
 * @since 0.1.0
 */
import * as acp from "@agentclientprotocol/sdk"
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import {
  Cause,
  Chunk,
  Console,
  Deferred,
  Effect,
  Either,
  ExecutionStrategy,
  Exit,
  FiberId,
  FiberMap,
  Layer,
  Option,
  Queue,
  Runtime,
  Schema,
  Scope
} from "effect"
import * as NodePath from "node:path"
import { Readable, Writable } from "node:stream"
import * as Agent from "../../Agent.js"
import type { AgentEvent, AgentNotification } from "../../AgentEvent.js"
import type * as Compaction from "../../Compaction.js"
import * as IdGenerator from "../../IdGenerator.js"
import { isSessionId } from "../../internal/store/common.js"
import { escapeLine } from "../../internal/terminalText.js"
import type * as Mcp from "../../Mcp.js"
import { MessageSource, UserMessage } from "../../Message.js"
import type * as Model from "../../Model.js"
import type { TurnEndReason } from "../../SessionEvent.js"
import * as SessionStore from "../../SessionStore.js"
import type * as Tool from "../../Tool.js"
import { type SubagentFlags, withSubagents } from "../commands/subagentFlag.js"
import { oneLineLogger } from "../storeFailures.js"
import * as Asking from "./asking.js"
import * as Children from "./children.js"
import * as ClientFs from "./clientFs.js"
import * as Envelope from "./envelope.js"
import * as LineLimit from "./lineLimit.js"
import * as McpServers from "./mcpServers.js"
import { contentOf } from "./prompt.js"
import { META_KEY, replayUpdates } from "./replay.js"
import { projector, type UpdateProjector } from "./updates.js"

/**
 * What `runAcp` takes (checked by `main.ts`).
 *
 * @since 0.1.0
 * @category models
 */
export interface AcpOptions {
  /** The directory of the JSONL session store. */
  readonly directory: string
  readonly maxSteps: number
  /** `--context-window`, for `usage_update.size` (undefined: 0, unknown). */
  readonly contextWindow: number | undefined
  readonly model: Layer.Layer<Model.Model>
  readonly compaction: Layer.Layer<Compaction.Compaction> | undefined
  /** `--ask`: the tools whose calls need approval (`approval: "always"`, §26), asked with `session/request_permission`. */
  readonly ask?: ReadonlyArray<string> | undefined
  /** `--subagent`, `--subagent-fork`: the sub-agent tools (§27), a child with the session's tools. */
  readonly subagents?: SubagentFlags | undefined
  /**
   * The tools of `--mcp-config`'s MCP servers (§28), connected once for the process by the
   * command (`commands/mcpFlag.ts`): every session's agent gets them (`agentOptions`).
   */
  readonly mcpConfigToolset?: Tool.Toolset | undefined
  /** The agent's version in `agentInfo`. */
  readonly version: string
  /** Where messages are read and written (default: the process's stdin and stdout). */
  readonly input?: NodeJS.ReadableStream | undefined
  readonly output?: NodeJS.WritableStream | undefined
}

/**
 * The extension methods (ACP reserves names that begin with `_`), by what they do: advertised in
 * `agentCapabilities._meta["agent-loop"].extensions`. A later alias (another agent's
 * `_session/steering`, a standard `session/inject`) is one more entry for the same handler.
 *
 * @since 0.1.0
 */
export const EXTENSIONS = { steer: "_session/steer", inject: "_session/inject" } as const

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

type PromptResult = { readonly stopReason: acp.StopReason } | { readonly error: acp.RequestError }

/**
 * A prompt waiting for its answer: the turn that claimed it, once it is known; `handed` settles
 * when its handler has given the SDK the response to write.
 */
interface PromptWaiter {
  readonly answer: Deferred.Deferred<PromptResult>
  readonly handed: Promise<void>
  turn: number | undefined
}

/** An ACP session on this connection: its agent and its prompts waiting for their turn's end. */
interface Session {
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
   * `session/load` for its whole replay), so that they never interleave (the module comment).
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

/** A server of a session's `mcpServers` that could not start, and why (its `McpError`'s message). */
interface FailedServer {
  readonly name: string
  readonly message: string
}

/**
 * How long `session/close` waits for the forwarder to send what the session's cancel and dispose
 * gave (it waits on nothing but the client reading its stdout) before it ends it anyway.
 */
const CLOSE_DRAIN_MS = 5_000

/**
 * The longest stdin line taken, in bytes (without its newline): the SDK's own limit
 * (`DEFAULT_MAX_MESSAGE_BYTES`, 32 MiB). A longer line is answered -32600 (`lineLimit.ts`).
 *
 * @since 0.1.0
 */
export const LINE_LIMIT: number = acp.DEFAULT_MAX_MESSAGE_BYTES

type Services = SessionStore.SessionStore | Model.Model | IdGenerator.IdGenerator | FileSystem.FileSystem | Path.Path

/** The error message of a second `initialize` (-32600). */
const SECOND_INITIALIZE = "Invalid request: initialize was already answered on this connection"

const invalidParams = (message: string) => new acp.RequestError(-32602, `Invalid params: ${message}`, { message })
const internal = (message: string) => new acp.RequestError(-32603, message)

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The kinds of source an injection takes (§2), with the field each requires: `plugin`
 * (`plugin`), `hook` (`hook`), `user`. The others are the runtime's own (`tool` results and
 * contexts, `session-reference`, `model`); `MessageSource` is an open union, so a kind outside
 * this list would be logged as it came.
 */
const INJECT_KINDS: Readonly<Record<string, string | undefined>> = { plugin: "plugin", hook: "hook", user: undefined }

/** A `_session/inject` source: a `MessageSource` (Message.ts) of a kind in `INJECT_KINDS`, else -32602 naming the problem. */
const injectSource = (source: unknown): MessageSource => {
  const decoded = Schema.decodeUnknownEither(MessageSource)(source)
  if (Either.isLeft(decoded)) {
    throw invalidParams("source: an object with a string kind is required ({kind: \"plugin\", plugin: NAME})")
  }
  const { kind } = decoded.right
  if (!Object.hasOwn(INJECT_KINDS, kind)) {
    const kinds = Object.keys(INJECT_KINDS).map((k) => JSON.stringify(k))
    throw invalidParams(
      `source.kind: ${JSON.stringify(kind)} is not a source an injection can have (${kinds.slice(0, -1).join(", ")} or ${
        kinds.at(-1)
      })`
    )
  }
  const field = INJECT_KINDS[kind]
  if (field !== undefined) {
    const value = decoded.right[field]
    if (typeof value !== "string" || value === "") {
      throw invalidParams(`source.${field}: a non-empty string is required for a source of kind ${JSON.stringify(kind)}`)
    }
  }
  return source as MessageSource
}

/** A sub-agent's event without its wrapping (§27: `subagent/event`, a grandchild's twice), or the event. */
const innermost = (event: AgentEvent): AgentEvent =>
  event.type === "subagent/event" && !("seq" in event)
    ? innermost((event as Extract<AgentEvent, { readonly type: "subagent/event" }>).event)
    : event

/** The params of the extension methods (the SDK checks only the standard methods'). */
interface ExtensionParams {
  readonly sessionId: string
  readonly prompt: unknown
  readonly source?: MessageSource | undefined
}
const extensionParams = (withSource: boolean) => (params: unknown): ExtensionParams => {
  if (!isRecord(params) || typeof params.sessionId !== "string") throw invalidParams("sessionId: a string is required")
  if (!Array.isArray(params.prompt)) throw invalidParams("prompt: an array of content blocks is required")
  const source = params.source
  if (source !== undefined && source !== null) {
    if (!withSource) throw invalidParams("source: not a parameter of this method")
    return { sessionId: params.sessionId, prompt: params.prompt, source: injectSource(source) }
  }
  return { sessionId: params.sessionId, prompt: params.prompt }
}

/**
 * The params parser of `session/new` or `session/load` (in place of the SDK's check of them):
 * `mcpServers` checked entry by entry and converted (`mcpServers.ts`), -32602 naming the entry
 * that is wrong.
 */
const sessionParams = <A>(
  read: (params: unknown) => { readonly ok: true; readonly params: A } | { readonly ok: false; readonly message: string }
) =>
(params: unknown): A => {
  const result = read(params)
  if (!result.ok) throw invalidParams(result.message)
  return result.params
}

/**
 * Serves ACP on stdin/stdout until stdin ends (see the module comment), then disposes every
 * agent and returns. Needs the Node file system and path services (the tools).
 *
 * @since 0.1.0
 * @category constructors
 */
export const runAcp = (options: AcpOptions): Effect.Effect<void, never, FileSystem.FileSystem | Path.Path> =>
  Effect.scoped(Effect.gen(function*() {
    const runtime = yield* Effect.runtime<Services>()
    const top = yield* Effect.scope
    const sessions = new Map<string, Session>()
    /** `initialize` was answered: a second one is refused. */
    let initialized = false
    let clientName = "acp-client"
    /** The client's `clientInfo.name`, when it gave one: who decided a permission request (§26 `by`). */
    let clientInfoName: string | undefined = undefined
    /** The client takes `compaction_update` (`clientCapabilities.session.compaction`). */
    let compaction = false
    /** The client offers `fs/read_text_file` (`clientCapabilities.fs.readTextFile`): `read_file` reads through it. */
    let clientFs = false
    /** The client takes `notice` updates (`clientCapabilities.session.notices`): an MCP server that could not start. */
    let notices = false
    /** The client takes sub-agent sessions (`clientCapabilities.subagents`, unstable: `children.ts`). */
    let subagentSessions = false
    /** What the last `initialize` read offered of it (the first answered one decides). */
    let offeredSubagents = false

    /** Runs a handler's effect: its failure (a `RequestError`) is thrown for the SDK to answer; a defect is -32603. */
    const run = <A>(effect: Effect.Effect<A, acp.RequestError, Services>): Promise<A> =>
      Runtime.runPromiseExit(runtime)(effect).then((exit) => {
        if (Exit.isSuccess(exit)) return exit.value
        const failure = Cause.failureOption(exit.cause)
        if (Option.isSome(failure)) throw failure.value
        const squashed = Cause.squash(exit.cause)
        throw internal(`Internal error: ${squashed instanceof Error ? squashed.message : String(squashed)}`)
      })

    const sessionOf = (id: string): Effect.Effect<Session, acp.RequestError> => {
      const session = sessions.get(id)
      return session === undefined ? Effect.fail(acp.RequestError.sessionNotFound(id)) : Effect.succeed(session)
    }

    const notice = (text: string) => Console.error(escapeLine(`agent-loop acp: ${text}`))

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
        const connection = yield* loaded.right.connect(servers, { clientName: "agent-loop", clientVersion: options.version })
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
        notices
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

    /** `cwd` must be an absolute path of an existing directory (links followed), else -32602. */
    const checkCwd = (cwd: string) =>
      Effect.gen(function*() {
        if (!NodePath.isAbsolute(cwd)) {
          return yield* Effect.fail(invalidParams(`cwd: an absolute path is required, got ${JSON.stringify(cwd)}`))
        }
        const fs = yield* FileSystem.FileSystem
        const info = yield* fs.stat(cwd).pipe(Effect.mapError((e) =>
          invalidParams(
            e._tag === "SystemError" && e.reason === "NotFound"
              ? `cwd: no such directory ${JSON.stringify(cwd)}`
              : `cwd: cannot read ${JSON.stringify(cwd)}: ${e.message}`
          )
        ))
        if (info.type !== "Directory") return yield* Effect.fail(invalidParams(`cwd: ${JSON.stringify(cwd)} is not a directory`))
        return cwd
      })

    /** Sends one update; a closed connection drops it (the process is ending). */
    const send = (sessionId: string, update: acp.SessionUpdate): Effect.Effect<void> =>
      Effect.promise(() => connection.client.notify(acp.methods.client.session.update, { sessionId, update }).catch(() => {}))

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

    const asking = Asking.make({
      request: (params, o) => connection.client.request(acp.methods.client.session.requestPermission, params, o),
      closed: () => connection.signal.aborted,
      notice,
      personName: () => clientInfoName,
      childSessions: () => subagentSessions
    })
    const { askOne, askOpen, drop } = asking

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
            sessions: subagentSessions,
            contextWindow: options.contextWindow,
            compaction
          }),
          updates: projector({
            cwd,
            toolLabel: (name) => session.toolLabel(name),
            isPrompt: (id) => prompts.has(id),
            contextWindow: options.contextWindow,
            compaction,
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

    /**
     * The session's tools (`run`'s offline tools, confined to `cwd`); when the client offers
     * `fs/read_text_file`, `read_file` reads through it (the editor's buffer, saved or not),
     * else from disk (`clientFs.ts`). `sessionId` is read when the tool runs (a new session's id
     * is known once its agent is made).
     */
    const agentOptions = (cwd: string, sessionId: () => string, toolsets: ReadonlyArray<Tool.Toolset>) =>
      Effect.map(
        ClientFs.tools({
          root: cwd,
          read: clientFs
            ? (path, line, limit) =>
              ClientFs.clientReader(
                sessionId(),
                (params, o) => connection.client.request(acp.methods.client.fs.readTextFile, params, o)
              )(path, line, limit).pipe(
                // The connection closed (stdin ended): no tool result; the dispose that follows
                // interrupts the call, and the turn ends aborted `disposed` like any other.
                Effect.catchAll((e) => connection.signal.aborted ? Effect.never : Effect.fail(e))
              )
            : undefined
        }),
        (tools) => ({
          tools: withSubagents(tools, options.subagents ?? { subagent: false, subagentFork: false }, options.ask ?? []),
          // The session's own servers, then `--mcp-config`'s (the same for every session).
          toolsets: options.mcpConfigToolset === undefined ? toolsets : [...toolsets, options.mcpConfigToolset],
          maxSteps: options.maxSteps
        })
      )

    /** The user message of a prompt's blocks, or -32602 naming the block (nothing is logged). */
    const messageOf = (blocks: unknown, source?: MessageSource | undefined) => {
      const converted = contentOf(blocks)
      if (!converted.ok) return Effect.fail(invalidParams(converted.message))
      return UserMessage.make({ content: converted.content, source }).pipe(
        Effect.mapError((e) => invalidParams(e.message))
      )
    }

    const deliveryFailure = (e: { readonly _tag: string; readonly message: string }) =>
      e._tag === "InvalidMessage" ? invalidParams(e.message) : internal(e.message)

    const app = acp.agent({ name: "agent-loop" })
      .onRequest(acp.methods.agent.initialize, ({ params }) => {
        // Once: the sessions opened since took their read_file route and update shapes from the
        // capabilities, which a second initialize cannot change under them.
        if (initialized) throw new acp.RequestError(-32600, SECOND_INITIALIZE)
        initialized = true
        if (params.clientInfo?.name !== undefined && params.clientInfo.name !== "") {
          clientName = params.clientInfo.name
          clientInfoName = params.clientInfo.name
        }
        compaction = params.clientCapabilities?.session?.compaction != null
        notices = params.clientCapabilities?.session?.notices != null
        subagentSessions = offeredSubagents
        clientFs = ClientFs.offersReadTextFile(params.clientCapabilities)
        return {
          protocolVersion: acp.PROTOCOL_VERSION,
          agentCapabilities: {
            loadSession: true,
            promptCapabilities: { image: true, audio: false, embeddedContext: true },
            // stdio servers are every ACP agent's; http (streamable) and sse too (mcpServers.ts).
            mcpCapabilities: { http: true, sse: true },
            sessionCapabilities: { close: {} },
            _meta: { [META_KEY]: { extensions: { ...EXTENSIONS } } }
          },
          authMethods: [],
          agentInfo: { name: "agent-loop", title: "effect-agent-loop", version: options.version }
        }
      })
      .onRequest(acp.methods.agent.session.new, sessionParams(McpServers.newSessionParams), ({ params }) => {
        let handOver: () => void = () => {}
        const handed = new Promise<void>((resolve) => (handOver = resolve))
        return run(Effect.gen(function*() {
          const cwd = yield* checkCwd(params.cwd)
          let id = ""
          const { failed, session } = yield* open(
            (toolsets) => Effect.flatMap(agentOptions(cwd, () => id, toolsets), (o) => Agent.make({ ...o, cwd })),
            cwd,
            false,
            params.servers
          ).pipe(Effect.mapError((e) => e instanceof acp.RequestError ? e : internal(`cannot create the session: ${e.message}`)))
          id = session.id
          sessions.set(session.id, session)
          yield* reportFailed(session, failed, handed)
          return { sessionId: session.id }
        })).finally(handOver)
      })
      .onRequest(acp.methods.agent.session.load, sessionParams(McpServers.loadSessionParams), ({ params }) => {
        let handOver: () => void = () => {}
        const handed = new Promise<void>((resolve) => (handOver = resolve))
        return run(Effect.gen(function*() {
          const cwd = yield* checkCwd(params.cwd)
          const id = params.sessionId
          let session = sessions.get(id)
          // Open on this connection: its agent is live, a call without a result is running.
          const running = session !== undefined
          if (session !== undefined && params.servers.length > 0) {
            yield* notice(
              `session/load: session ${id} is open on this connection and keeps its MCP servers; ` +
                `the ${params.servers.length} given are not started (${params.servers.map((s) => s.name).join(", ")})`
            )
          }
          if (session === undefined) {
            if (!isSessionId(id)) return yield* Effect.fail(acp.RequestError.sessionNotFound(id))
            const opened = yield* open(
              (toolsets) => Effect.flatMap(agentOptions(cwd, () => id, toolsets), (o) => Agent.resume(id, o)),
              cwd,
              true,
              params.servers
            ).pipe(
              Effect.catchTags({
                SessionNotFound: () => Effect.fail(acp.RequestError.sessionNotFound(id)),
                SessionLogError: (e) => Effect.fail(internal(`cannot load session ${id}: ${e.message}`)),
                SessionStoreError: (e) => Effect.fail(internal(`cannot load session ${id}: ${e.message}`)),
                SessionFenced: (e) => Effect.fail(internal(`cannot load session ${id}: ${e.message}`))
              })
            )
            session = opened.session
            yield* reportFailed(opened.session, opened.failed, handed)
          }
          const loaded = session
          // The conversation as it happened (replay.ts), before the response; the log read and
          // its replay sent holding `sending`: what the forwarder has not yet sent of it, it
          // leaves out (`replayed`, see `handle`), and what follows it comes after the replay.
          yield* loaded.sending.withPermits(1)(Effect.suspend(() => {
            const events = loaded.agent.log.events()
            const replay = replayUpdates(events, {
              header: loaded.agent.log.header,
              cwd,
              compaction,
              running,
              toolLabel: loaded.toolLabel
            })
            if (events.length > 0) loaded.replayed = events[events.length - 1]!.seq
            return Effect.forEach(replay, (u) => send(id, u), { discard: true })
          }))
          sessions.set(id, loaded)
          // The open questions (§26; reopened by `Agent.resume`) are asked once the response is
          // written (its handler returned, and a macrotask passed, in which the SDK writes it).
          yield* Effect.forkIn(
            Effect.zipRight(
              Effect.promise(() => handed.then(() => new Promise<void>((resolve) => setImmediate(resolve)))),
              askOpen(loaded)
            ),
            loaded.scope
          )
          return {}
        })).finally(handOver)
      })
      .onRequest(acp.methods.agent.session.prompt, ({ params }) => {
        let handOver: () => void = () => {}
        const handed = new Promise<void>((resolve) => (handOver = resolve))
        return run(Effect.gen(function*() {
          const session = yield* sessionOf(params.sessionId)
          const message = yield* messageOf(params.prompt)
          const waiter: PromptWaiter = { answer: Deferred.unsafeMake<PromptResult>(FiberId.none), handed, turn: undefined }
          session.prompts.set(message.id, waiter)
          yield* session.agent.followup(message).pipe(
            Effect.tapError(() => Effect.sync(() => session.prompts.delete(message.id))),
            Effect.mapError(deliveryFailure)
          )
          const result = yield* Deferred.await(waiter.answer)
          if ("error" in result) return yield* Effect.fail(result.error)
          return { stopReason: result.stopReason, _meta: { [META_KEY]: { messageId: message.id as string } } }
        })).finally(handOver)
      })
      .onNotification(acp.methods.agent.session.cancel, ({ params }) =>
        run(Effect.gen(function*() {
          const session = sessions.get(params.sessionId)
          if (session === undefined) return yield* notice(`session/cancel: no session ${params.sessionId}`)
          yield* session.agent.cancel({ kind: "user" }).pipe(
            Effect.catchAll((e) => notice(`session/cancel: ${e.message}`))
          )
        })))
      .onRequest(acp.methods.agent.session.close, ({ params }) =>
        run(Effect.gen(function*() {
          const session = yield* sessionOf(params.sessionId)
          yield* closeSession(session)
          return {}
        })))
      .onRequest(EXTENSIONS.steer, extensionParams(false), ({ params }) =>
        run(Effect.gen(function*() {
          const session = yield* sessionOf(params.sessionId)
          const message = yield* messageOf(params.prompt)
          const delivery = yield* session.agent.steer(message).pipe(Effect.mapError(deliveryFailure))
          return { messageId: delivery.messageId as string }
        })))
      .onRequest(EXTENSIONS.inject, extensionParams(true), ({ params }) =>
        run(Effect.gen(function*() {
          const session = yield* sessionOf(params.sessionId)
          const message = yield* messageOf(params.prompt, params.source ?? { kind: "plugin", plugin: clientName })
          const delivery = yield* session.agent.inject(message).pipe(Effect.mapError(deliveryFailure))
          return { messageId: delivery.messageId as string }
        })))

    const input = Readable.toWeb((options.input ?? process.stdin) as Readable) as unknown as ReadableStream<Uint8Array>
    const output = Writable.toWeb((options.output ?? process.stdout) as Writable) as WritableStream<Uint8Array>
    // A line over the SDK's limit would error its stream (and close the connection): it is
    // dropped before the SDK sees it, answered here, and noticed (lineLimit.ts).
    const lines = acp.ndJsonStream(output, input.pipeThrough(LineLimit.limitLines(LINE_LIMIT, (o) => tooLarge(o))))
    // Our error responses go through the SDK's writer, in order with its own messages.
    const writer = lines.writable.getWriter()
    const tooLarge = (o: LineLimit.Oversize) => {
      const message = LineLimit.tooLargeMessage(o.bytes, LINE_LIMIT)
      const id = LineLimit.answerId(o)
      writer.write({ jsonrpc: "2.0", id, error: { code: -32600, message, data: { bytes: o.bytes, limit: LINE_LIMIT } } })
        .catch(() => {})
      Runtime.runFork(runtime)(notice(
        `dropped a line of ${o.bytes} bytes (${o.kind}${o.id !== undefined ? ` ${JSON.stringify(o.id)}` : ""}): ${message}`
      ))
    }
    // An object that is no request, notification or response is answered here, with its id
    // when it has one of a valid type (envelope.ts); the SDK would use null, or not answer.
    const answerInvalid = (invalid: Envelope.InvalidEnvelope) =>
      writer.write({ jsonrpc: "2.0", id: invalid.id, error: { code: -32600, message: invalid.message } }).catch(() => {})
    const connection: acp.AgentConnection = app.connect({
      readable: lines.readable.pipeThrough(Envelope.checkEnvelopes<acp.AnyMessage>(answerInvalid)).pipeThrough(
        new TransformStream<acp.AnyMessage, acp.AnyMessage>({
          // The SDK's stable schema drops `clientCapabilities.subagents`: read from the message.
          transform(message, controller) {
            const m = message as { readonly method?: unknown; readonly params?: unknown }
            if (m.method === acp.methods.agent.initialize) offeredSubagents = Children.offersSubagents(m.params)
            controller.enqueue(message)
          }
        })
      ),
      writable: new WritableStream<acp.AnyMessage>({ write: (message) => writer.write(message) })
    })
    yield* Effect.promise(() => connection.closed)
  })).pipe(
    Effect.provide(Layer.mergeAll(
      options.model,
      options.compaction ?? Layer.empty,
      SessionStore.layerJsonl({ directory: options.directory }),
      IdGenerator.layer,
      oneLineLogger
    ))
  )
