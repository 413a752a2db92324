/**
 * `agent-loop acp` (§22): an Agent Client Protocol v1 agent over
 * stdio, built on the official SDK (`@agentclientprotocol/sdk`, bundled with `zod` into the CLI
 * chunk that only this command loads). One JSON-RPC message a line on stdin and stdout; stdout
 * carries nothing else (notices go to stderr). Every ACP session is an agent of the JSONL store
 * (`--store`), with the offline tools of `run` confined to the session's `cwd`; when the client
 * offers `fs.readTextFile`, `read_file` reads through its `fs/read_text_file` (`clientFs.ts`).
 * This module answers the requests; the sessions open on the connection, their lifecycle and the
 * forwarding of their events are `sessions.ts`'s, the params the SDK does not check `params.ts`'s.
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
 *   its own turn). Its response comes when its own turn ends (`stopReasonOf`, `sessions.ts`),
 *   after every update of that turn, with `_meta["agent-loop"].messageId` (the message's id in
 *   the log); a prompt the inbox dropped before a turn claimed it (a cancel, §9) is `cancelled`
 *   at once.
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
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import { Cause, Console, Deferred, Effect, Exit, FiberId, Layer, Option, Runtime } from "effect"
import { Readable, Writable } from "node:stream"
import * as Agent from "../../Agent.js"
import type * as Compaction from "../../Compaction.js"
import * as IdGenerator from "../../IdGenerator.js"
import { isSessionId } from "../../internal/store/common.js"
import { escapeLine } from "../../internal/terminalText.js"
import { type MessageSource, UserMessage } from "../../Message.js"
import type * as Model from "../../Model.js"
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
import { checkCwd, extensionParams, internal, invalidParams, sessionParams } from "./params.js"
import { contentOf } from "./prompt.js"
import { META_KEY, replayUpdates } from "./replay.js"
import * as Sessions from "./sessions.js"

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
 * The longest stdin line taken, in bytes (without its newline): the SDK's own limit
 * (`DEFAULT_MAX_MESSAGE_BYTES`, 32 MiB). A longer line is answered -32600 (`lineLimit.ts`).
 *
 * @since 0.1.0
 */
export const LINE_LIMIT: number = acp.DEFAULT_MAX_MESSAGE_BYTES

/** The error message of a second `initialize` (-32600). */
const SECOND_INITIALIZE = "Invalid request: initialize was already answered on this connection"

/**
 * Serves ACP on stdin/stdout until stdin ends (see the module comment), then disposes every
 * agent and returns. Needs the Node file system and path services (the tools).
 *
 * @since 0.1.0
 * @category constructors
 */
export const runAcp = (options: AcpOptions): Effect.Effect<void, never, FileSystem.FileSystem | Path.Path> =>
  Effect.scoped(Effect.gen(function*() {
    const runtime = yield* Effect.runtime<Sessions.Services>()
    const top = yield* Effect.scope
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
    const run = <A>(effect: Effect.Effect<A, acp.RequestError, Sessions.Services>): Promise<A> =>
      Runtime.runPromiseExit(runtime)(effect).then((exit) => {
        if (Exit.isSuccess(exit)) return exit.value
        const failure = Cause.failureOption(exit.cause)
        if (Option.isSome(failure)) throw failure.value
        const squashed = Cause.squash(exit.cause)
        throw internal(`Internal error: ${squashed instanceof Error ? squashed.message : String(squashed)}`)
      })

    const notice = (text: string) => Console.error(escapeLine(`agent-loop acp: ${text}`))

    /** Sends one update; a closed connection drops it (the process is ending). */
    const send = (sessionId: string, update: acp.SessionUpdate): Effect.Effect<void> =>
      Effect.promise(() => connection.client.notify(acp.methods.client.session.update, { sessionId, update }).catch(() => {}))

    const asking = Asking.make({
      request: (params, o) => connection.client.request(acp.methods.client.session.requestPermission, params, o),
      closed: () => connection.signal.aborted,
      notice,
      personName: () => clientInfoName,
      childSessions: () => subagentSessions
    })
    const { askOpen } = asking
    const sessions = Sessions.make({
      top,
      version: options.version,
      contextWindow: options.contextWindow,
      compaction: () => compaction,
      notices: () => notices,
      subagentSessions: () => subagentSessions,
      send,
      notice,
      asking
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
        (tools) => {
          // The session's own servers, then `--mcp-config`'s (the same for every session); a
          // sub-agent has them too.
          const all = options.mcpConfigToolset === undefined ? toolsets : [...toolsets, options.mcpConfigToolset]
          return {
            tools: withSubagents(
              tools,
              options.subagents ?? { subagent: false, subagentFork: false },
              options.ask ?? [],
              all.length === 0 ? undefined : all
            ),
            toolsets: all,
            maxSteps: options.maxSteps
          }
        }
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
          const { failed, session } = yield* sessions.open(
            (toolsets) => Effect.flatMap(agentOptions(cwd, () => id, toolsets), (o) => Agent.make({ ...o, cwd })),
            cwd,
            false,
            params.servers
          ).pipe(Effect.mapError((e) => e instanceof acp.RequestError ? e : internal(`cannot create the session: ${e.message}`)))
          id = session.id
          sessions.set(session.id, session)
          yield* sessions.reportFailed(session, failed, handed)
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
            const opened = yield* sessions.open(
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
            yield* sessions.reportFailed(opened.session, opened.failed, handed)
          }
          const loaded = session
          // The conversation as it happened (replay.ts), before the response; the log read and
          // its replay sent holding `sending`: what the forwarder has not yet sent of it, it
          // leaves out (`replayed`, see `handle` in `sessions.ts`), and what follows it comes
          // after the replay.
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
          const session = yield* sessions.sessionOf(params.sessionId)
          const message = yield* messageOf(params.prompt)
          const waiter: Sessions.PromptWaiter = {
            answer: Deferred.unsafeMake<Sessions.PromptResult>(FiberId.none),
            handed,
            turn: undefined
          }
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
          const session = yield* sessions.sessionOf(params.sessionId)
          yield* sessions.close(session)
          return {}
        })))
      .onRequest(EXTENSIONS.steer, extensionParams(false), ({ params }) =>
        run(Effect.gen(function*() {
          const session = yield* sessions.sessionOf(params.sessionId)
          const message = yield* messageOf(params.prompt)
          const delivery = yield* session.agent.steer(message).pipe(Effect.mapError(deliveryFailure))
          return { messageId: delivery.messageId as string }
        })))
      .onRequest(EXTENSIONS.inject, extensionParams(true), ({ params }) =>
        run(Effect.gen(function*() {
          const session = yield* sessions.sessionOf(params.sessionId)
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
