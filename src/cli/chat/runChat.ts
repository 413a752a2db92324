/**
 * `agent-loop chat` (§14): the Effect program that owns the agent and mounts the Ink
 * view. This module is the whole Effect/React boundary, and it is thin on purpose:
 *
 * - Effect → React: one fiber (forked in the chat's scope) takes the agent's live events from
 *   `agent.subscribe` in batches and feeds them to a `ChatModel`, a plain object that React
 *   reads with `useSyncExternalStore`. React never sees an `Effect`.
 * - React → Effect: the view calls the `ChatController` callbacks, which only offer an action
 *   to an unbounded `Queue` (`Queue.unsafeOffer`, synchronous) or complete the exit `Deferred`.
 *   One fiber performs the actions in order (`followup`/`steer`/`inject`/`cancel`, the
 *   commands), so two quick sends reach the inbox in the order they were typed; a failure is
 *   shown as a notice, never thrown into React.
 * - Lifetime: everything lives in one `Scope`. Closing it (on `/quit`, Ctrl-C as a key, or the
 *   interruption SIGINT/SIGTERM cause under `NodeRuntime.runMain`) unmounts Ink first (the
 *   terminal leaves raw mode), stops both fibers, then disposes the agent (§9: a
 *   running turn ends aborted `{kind:"disposed"}`, whatever is queued is canceled). The log's
 *   path is printed after that, whatever the exit.
 * - No lock without a terminal (§23): SIGHUP, the end of stdin or an error writing stdout
 *   (EIO, EPIPE) means the terminal is gone: the chat closes its scope as above (the agent
 *   disposed, the writer's lock released) and exits 129. Signals are listened to from before the
 *   session is opened, so that a chat still loading a big log leaves too.
 *
 * A plain line is sent by the agent's status when the action runs: `followup` when idle,
 * `steer` while running, through `SessionReference.deliver`, which also prepares the snapshot
 * of each `@session:ID` it mentions (§13: idle, the snapshot enters right after the
 * message; running, it is injected, then the message steered). Alt+Enter queues a `followup`;
 * a queued message may not mention sessions (its snapshot would have to wait for its pre-step,
 * which `SessionReference.deliver` offers only to an idle agent): it is refused with a notice
 * that gives its text back. Commands: `/inject TEXT` (context with source
 * `{kind:"plugin", plugin:"chat"}`), `/followup TEXT` (queue a followup: the same as Alt+Enter,
 * for terminals that cannot send it), `/compact [INSTRUCTIONS]` (`agent.compact`, §17: on
 * an idle agent its own bracket between turns, on a running one at the turn's next step
 * boundary; it runs in its own fiber, so that keys and other commands go on meanwhile, and its
 * report is a notice; the marker comes with the log's events), `/sessions`, `/mcp` (the MCP
 * servers of `--mcp-config`, §28: each one's state, its tools, a failed one's error), `/help`,
 * `/quit`.
 * With `compaction` (the CLI's `--context-window`) the agent also compacts by itself (pressure,
 * overflow).
 *
 * Approvals (§26): the view answers a question with `controller.answer` (the answer keys);
 * `/approve`, `/approve-always`, `/reject [REASON]` and `/reject-always [REASON]` answer the
 * first question that has no answer yet. An answer is `agent.approve`/`agent.reject`; one
 * that comes too late (`ApprovalNotOpen`: the timeout, a cancel or another client decided first)
 * or cannot be appended is a notice, and the question stays answerable when it is still open.
 * While a question is open the agent is busy: Enter steers, Alt+Enter queues a followup, Esc
 * cancels (deciding the open questions `cancelled`).
 */
import type { FileSystem, Path } from "@effect/platform"
import { Chunk, Console, Deferred, Effect, Exit, FiberRef, HashSet, Layer, Logger, LogLevel, Queue, type Scope } from "effect"
import { render } from "ink"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { createElement } from "react"
import * as Agent from "../../Agent.js"
import { isApprovalNotOpen } from "../../AgentError.js"
import type * as Compaction from "../../Compaction.js"
import * as IdGenerator from "../../IdGenerator.js"
import { isSessionId } from "../../internal/store/common.js"
import { escapeLine } from "../../internal/terminalText.js"
import type * as Mcp from "../../Mcp.js"
import { UserMessage } from "../../Message.js"
import type * as Model from "../../Model.js"
import * as PreStep from "../../PreStep.js"
import type * as Prices from "../../Prices.js"
import * as OfflineTools from "../../providers/OfflineTools.js"
import type * as SessionLog from "../../SessionLog.js"
import * as SessionReference from "../../SessionReference.js"
import * as SessionStore from "../../SessionStore.js"
import type * as Tool from "../../Tool.js"
import { faultText, type McpTools } from "../commands/mcpFlag.js"
import { entryText } from "../storeFailures.js"
import { App, type ChatController, type Decision } from "./App.js"
import { busy, ChatModel, oneLine } from "./ChatModel.js"
import { cleanStdin } from "./stdin.js"

/** Options of `runChat`. */
export interface ChatOptions {
  /** The JSONL store's directory (absolute). */
  readonly directory: string
  /** Resume this session of the store (its history is shown); else a new session. */
  readonly sessionId?: string | undefined
  /** The model, from the CLI's provider flags. */
  readonly model: Layer.Layer<Model.Model>
  /** The compaction policy, from `--context-window` and its flags; none: `/compact` only (`summarize({})`). */
  readonly compaction?: Layer.Layer<Compaction.Compaction> | undefined
  /** `--prices FILE` (§18): the status line shows the session's cost beside its tokens. */
  readonly prices?: Prices.Prices | undefined
  /** `--instructions`/`--instructions-file`: the agent's system instructions (resumed: instead of the log's). */
  readonly instructions?: string | undefined
  /** The agent's tools (`--ask` makes some need approval, §26); default `OfflineTools.all()`. */
  readonly tools?: ReadonlyArray<Tool.Tool<any>> | undefined
  /** The MCP servers of `--mcp-config` (§28), connected: their tools are the agent's too; `/mcp` lists them. */
  readonly mcp?: McpTools | undefined
}

/** The source of what `/inject` delivers (§2: context names its producer). */
export const INJECT_SOURCE = { kind: "plugin", plugin: "chat" } as const

const HELP = [
  "Enter sends: a followup when idle (a new turn), a steer while running (joins the turn at its next step).",
  "@session:ID in a message adds a quoted snapshot of that session of the store (up to 3), as context next to it.",
  "Alt+Enter queues a followup while running (it runs as the next turn). Esc or Ctrl-C cancels the running turn and clears the queue.",
  "/inject TEXT  context for the next step that runs (source plugin:chat); it never starts a turn by itself.",
  "  The model gets injected context as an ordinary user message: it is not told who injected it.",
  "/followup TEXT  queue a followup (as Alt+Enter)   /sessions  the store's sessions: date, first prompt",
  "/mcp  the MCP servers of --mcp-config: each one's state and tools, or why it failed",
  "/quit  leave (also Ctrl-C when idle, or a second Ctrl-C while running)",
  "/compact [INSTRUCTIONS]  summarize the older conversation now (while running: at the turn's next step)",
  "A tool call that needs approval is shown with its arguments and waits (the status line: awaiting approval).",
  "  Answer with a line of one letter + Enter: y allow once, a allow always (this tool, this session),",
  "  n reject, r reject always (both then ask for an optional reason; Esc goes back). The first open question is answered.",
  "/approve  /approve-always  /reject [REASON]  /reject-always [REASON]  the same, as commands",
  "Tab after @session: completes a session id. //TEXT sends TEXT with its leading /. Esc while idle clears the line.",
  "Pasted lines are sent one by one (each line is a message)."
].join("\n")

type Action =
  | { readonly _tag: "submit"; readonly text: string; readonly mode: "enter" | "queue" }
  | { readonly _tag: "cancel" }
  | { readonly _tag: "answer"; readonly id: string; readonly toolName: string; readonly decision: Decision }
  | { readonly _tag: "refresh-sessions" }

/** How an answer reads in a notice: `allow once`, `reject always`. */
const decisionLabel = (decision: Decision): string =>
  decision.kind === "allow" ? (decision.always ? "allow always" : "allow once") : decision.always ? "reject always" : "reject"

/**
 * Sends a person's answer to question `id` about `toolName` (§26): `agent.approve` or
 * `agent.reject`; the question is marked answered in `model` until its decision lands. An answer
 * that comes too late (`ApprovalNotOpen`: decided by the timeout, a cancel or another client) is
 * a notice; one that cannot be appended is a notice too, and the question can be answered again.
 * A reason that was not recorded is given back.
 *
 * @internal
 */
export const answer = (
  agent: Agent.Agent,
  model: ChatModel,
  id: string,
  toolName: string,
  decision: Decision
): Effect.Effect<void> =>
  Effect.catchAll(
    decision.kind === "allow"
      ? agent.approve(id, { always: decision.always })
      : agent.reject(id, { always: decision.always, reason: decision.reason }),
    (e) =>
      Effect.sync(() => {
        model.answering(id, false)
        const lost = decision.kind === "reject" && decision.reason !== undefined ? `\nnot sent: ${decision.reason}` : ""
        if (isApprovalNotOpen(e)) {
          model.notice(
            `your answer (${decisionLabel(decision)}) to ${toolName} came too late: the question was decided already ` +
              `(the transcript shows how)${lost}`,
            "warn"
          )
        } else model.notice(`your answer to ${toolName} was not recorded: ${e.message}${lost}`, "error")
      })
  )

/** `/approve`, `/approve-always`, `/reject [REASON]`, `/reject-always [REASON]`: answers the first open question. */
const answerCommand = (agent: Agent.Agent, model: ChatModel, command: string, rest: string): Effect.Effect<void> => {
  const question = model.firstQuestion()
  if (question === undefined) {
    return Effect.sync(() => model.notice(`${command}: no question is open${rest === "" ? "" : `\nnot sent: ${rest}`}`, "warn"))
  }
  const always = command.endsWith("-always")
  const decision: Decision = command.startsWith("/approve")
    ? { kind: "allow", always }
    : { kind: "reject", always, reason: rest === "" ? undefined : rest }
  model.answering(question.id, true)
  return answer(agent, model, question.id, question.toolName, decision)
}

/** Queues a followup (Alt+Enter, `/followup`): refused when it mentions a session (see above). */
const queueFollowup = (agent: Agent.Agent, model: ChatModel, text: string) =>
  Effect.gen(function*() {
    const message = yield* UserMessage.make({ text })
    const referenced = yield* SessionReference.mentions(message)
    if (referenced.length > 0) {
      model.notice(
        `not queued: a message that mentions a session goes with Enter (its snapshot enters with it):\n${text}`,
        "warn"
      )
      return
    }
    yield* agent.followup(message)
  })

/** The notice of a `/compact` report. */
const reportNotice = (model: ChatModel, report: Compaction.CompactionReport): void => {
  switch (report.outcome) {
    case "compacted":
      return model.notice(`/compact: compacted ${report.tokensBefore} → ${report.tokensAfter} tokens`)
    case "skipped":
      return model.notice(`/compact: nothing to compact (${report.tokensBefore} tokens)`)
    case "failed":
      return model.notice(
        `/compact: failed, nothing kept${report.error !== undefined ? `: ${report.error.code}: ${report.error.message}` : ""}`,
        "error"
      )
    default:
      return model.notice(`/compact: ${report.outcome}, nothing kept`, "warn")
  }
}

/**
 * `/compact [instructions]`: `agent.compact` in a fiber of the chat's scope (a running agent
 * serves it at its next step boundary, which may take a while: Esc and other input go on).
 */
const compact = (agent: Agent.Agent, model: ChatModel, instructions: string) =>
  Effect.gen(function*() {
    if ((yield* agent.status) === "running") {
      model.notice("/compact: busy; it compacts at the next step boundary or after what runs now")
    }
    yield* Effect.forkScoped(
      agent.compact(instructions === "" ? {} : { instructions }).pipe(
        Effect.matchEffect({
          onFailure: (e) => Effect.sync(() => model.notice(`/compact: ${e.message}`, "error")),
          // After the marker (the events fiber applies the bracket's end on its own schedule).
          onSuccess: (report) => Effect.sync(() => model.afterCompaction(report.compactionId, () => reportNotice(model, report)))
        })
      )
    )
  })

/** Performs one action of the view; failures become notices. */
const perform = (
  agent: Agent.Agent,
  references: SessionReference.SessionReferenceService,
  store: SessionStore.SessionStoreService,
  model: ChatModel,
  quit: (code: number) => void,
  action: Action,
  directory: string,
  mcp: McpTools | undefined
): Effect.Effect<void, never, IdGenerator.IdGenerator | Scope.Scope> => {
  const shown = <A, E extends { readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.catchAll(Effect.asVoid(effect), (e) => Effect.sync(() => model.notice(e.message, "error")))
  if (action._tag === "refresh-sessions") {
    // Only ids a mention can name (the store's rule): a file name with escapes never reaches the line.
    return Effect.ignore(
      Effect.map(store.list, (ids) => model.setSessionIds(ids.filter((id) => id !== agent.id && isSessionId(id))))
    )
  }
  if (action._tag === "cancel") {
    return shown(Effect.flatMap(agent.status, (status) => busy(status) ? agent.cancel() : Effect.void))
  }
  if (action._tag === "answer") return answer(agent, model, action.id, action.toolName, action.decision)
  let text = action.text.trim()
  if (text === "") return Effect.void
  // "//…" sends a message that starts with "/" (e.g. a path).
  const escaped = text.startsWith("//")
  if (escaped) text = text.slice(1)
  if (escaped || !text.startsWith("/")) {
    // A refused message is given back in the notice: nothing typed is lost silently.
    const given = <A, E extends { readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.catchAll(
        Effect.asVoid(effect),
        (e) => Effect.sync(() => model.notice(`${e.message}\nnot sent: ${text}`, "error"))
      )
    return given(Effect.flatMap(
      agent.status,
      // Idle, Alt+Enter is a plain send: `deliver` followups (with the snapshots of mentions).
      (status) => action.mode === "queue" && busy(status) ? queueFollowup(agent, model, text) : references.deliver(agent, text)
    ))
  }
  const space = text.search(/\s/)
  const command = space < 0 ? text : text.slice(0, space)
  const rest = space < 0 ? "" : text.slice(space + 1).trim()
  switch (command) {
    case "/quit":
    case "/exit":
      return Effect.sync(() => quit(0))
    case "/help":
      return Effect.sync(() => model.notice(HELP))
    case "/inject":
      if (rest === "") return Effect.sync(() => model.notice("usage: /inject TEXT", "warn"))
      return shown(Effect.flatMap(UserMessage.make({ text: rest, source: INJECT_SOURCE }), agent.inject))
    case "/followup":
      if (rest === "") return Effect.sync(() => model.notice("usage: /followup TEXT", "warn"))
      return shown(Effect.flatMap(
        agent.status,
        (status) => busy(status) ? queueFollowup(agent, model, rest) : references.deliver(agent, rest)
      ))
    case "/approve":
    case "/approve-always":
      if (rest !== "") {
        return Effect.sync(() => model.notice(`usage: ${command} (no argument)\nnot sent: ${text}`, "warn"))
      }
      return answerCommand(agent, model, command, rest)
    case "/reject":
    case "/reject-always":
      return answerCommand(agent, model, command, rest)
    case "/compact":
      return compact(agent, model, rest)
    case "/mcp":
      return Effect.sync(() => model.notice(mcpReport(mcp?.servers())))
    case "/sessions":
      return shown(
        Effect.flatMap(store.list, (ids) =>
          Effect.map(
            Effect.promise(() => Promise.all(ids.map((id) => sessionHead(directory, id)))),
            (heads) => {
              model.notice(`sessions in the store (${ids.length}):\n${sessionLines(heads, agent.id).join("\n")}`)
            }
          ))
      )
    default:
      return Effect.sync(() =>
        model.notice(
          `unknown command ${command} (/help lists them; start a message with // to send a leading /)\nnot sent: ${text}`,
          "warn"
        )
      )
  }
}

/** The most code points of a tool's description `/mcp` shows (its first line). */
const DESCRIPTION_SHOWN = 80

/** `n thing`, `n things`. */
const count = (n: number, thing: string): string => `${n} ${thing}${n === 1 ? "" : "s"}`

/**
 * The welcome notice's line about the MCP servers: `MCP: 1 of 2 servers connected, 12 tools
 * (/mcp lists them)`.
 *
 * @internal
 */
export const mcpSummary = (servers: ReadonlyArray<Mcp.ServerStatus>): string => {
  const connected = servers.filter((server) => server.state === "connected")
  const tools = connected.reduce((n, server) => n + server.tools.length, 0)
  return `MCP: ${connected.length} of ${count(servers.length, "server")} connected, ${count(tools, "tool")} (/mcp lists them)`
}

/**
 * What `/mcp` shows: each server of `--mcp-config` on a line, `everything: connected (stdio,
 * mcp-servers/everything 2.0.0), 12 tools`, then its tools one a line with the first line of
 * their description (`  everything__echo: Echoes back the input string`); a failed server with
 * its error (`broken: failed (stdio): could not start: spawn x ENOENT`), a connected one (or one
 * that exited, which the next call starts again) with the last fault of a call, if any. The caller shows it through `shown` (escaped, bounded).
 *
 * @internal
 */
export const mcpReport = (servers: ReadonlyArray<Mcp.ServerStatus> | undefined): string => {
  if (servers === undefined) return "/mcp: no MCP servers (start the chat with --mcp-config FILE)"
  if (servers.length === 0) return "/mcp: the --mcp-config file names no server (or only disabled ones)"
  const lines = [`MCP servers (${servers.length}):`]
  for (const server of servers) {
    const about = [server.type, ...(server.server === undefined ? [] : [`${server.server.name} ${server.server.version}`])]
    const restarts = server.restarts > 0 ? `, restarted ${count(server.restarts, "time")} in a row` : ""
    if (server.state === "connected" || server.state === "exited") {
      const state = server.state === "exited" ? "exited, started again by the next call" : "connected"
      lines.push(`${server.name}: ${state} (${about.join(", ")}), ${count(server.tools.length, "tool")}${restarts}`)
      if (server.error !== undefined) lines.push(`  last fault: ${faultText(server)}`)
      for (const tool of server.tools) {
        const description = tool.description.trim().split("\n")[0]!.trim()
        lines.push(`  ${tool.name}${description === "" ? "" : `: ${oneLine(description, DESCRIPTION_SHOWN)}`}`)
      }
    } else {
      lines.push(
        `${server.name}: ${server.state} (${about.join(", ")})${server.error === undefined ? "" : `: ${faultText(server)}`}`
      )
    }
  }
  return lines.join("\n")
}

/** What `/sessions` shows of a session: when it was created and its first prompt, from the head of its log. */
interface SessionHead {
  readonly id: string
  readonly createdAt: number | undefined
  readonly prompt: string | undefined
}

/** How much of each log `/sessions` reads (the header and, usually, the first prompt). */
const HEAD_BYTES = 16 * 1024

/**
 * The creation time (the header's `createdAt`) and the first user prompt (the text of the first
 * `user/message` from the user) found in the first `HEAD_BYTES` of `DIR/<id>.jsonl`; what cannot
 * be read or found is `undefined`.
 */
const sessionHead = async (directory: string, id: string): Promise<SessionHead> => {
  let head = ""
  try {
    const handle = await NodeFs.promises.open(
      NodePath.join(directory, `${id}.jsonl`),
      NodeFs.constants.O_RDONLY | NodeFs.constants.O_NONBLOCK
    )
    try {
      if ((await handle.stat()).isFile()) {
        const buffer = new Uint8Array(HEAD_BYTES)
        const { bytesRead } = await handle.read(buffer, 0, HEAD_BYTES, 0)
        head = new TextDecoder().decode(buffer.subarray(0, bytesRead))
      }
    } finally {
      await handle.close()
    }
  } catch {
    // unreadable: shown without date and prompt
  }
  let createdAt: number | undefined
  let prompt: string | undefined
  // The last line may be cut: only whole lines are parsed.
  for (const line of head.split("\n").slice(0, -1)) {
    let value: any
    try {
      value = JSON.parse(line)
    } catch {
      continue
    }
    if (value?.type === "session" && typeof value.createdAt === "number") createdAt = value.createdAt
    if (value?.type === "user/message" && value.data?.source?.kind === "user" && Array.isArray(value.data.content)) {
      prompt = value.data.content.filter((c: any) => c?.type === "text").map((c: any) => String(c.text)).join(" ")
      break
    }
  }
  return { id, createdAt, prompt }
}

const pad = (n: number): string => String(n).padStart(2, "0")

/** A time as `YYYY-MM-DD HH:MM`, local time. */
const localTime = (ms: number): string => {
  const d = new Date(ms)
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`
}

/** The most sessions `/sessions` lists (the most recent ones). */
const MAX_LISTED = 20

/**
 * The lines of `/sessions`: oldest first, the most recent `MAX_LISTED`, each
 * `YYYY-MM-DD HH:MM  <id>  "first prompt"` (the prompt on one line, at most 60 characters).
 */
const sessionLines = (heads: ReadonlyArray<SessionHead>, current: string): Array<string> => {
  if (heads.length === 0) return ["no sessions"]
  const sorted = [...heads].sort((a, b) => (a.createdAt ?? 0) - (b.createdAt ?? 0) || a.id.localeCompare(b.id))
  const listed = sorted.slice(-MAX_LISTED)
  const lines = listed.map((h) => {
    const when = h.createdAt === undefined ? "????-??-?? ??:??" : localTime(h.createdAt)
    const text = h.prompt?.replace(/\s+/g, " ").trim()
    const prompt = text === undefined || text === ""
      ? "(no prompt yet)"
      : JSON.stringify(text.length > 60 ? text.slice(0, 59) + "…" : text)
    return `${when}  ${h.id}  ${prompt}${h.id === current ? "  (this session)" : ""}`
  })
  return sorted.length > listed.length ? [`… ${sorted.length - listed.length} older`, ...lines] : lines
}

/**
 * The chat in its scope: makes or resumes the agent, mounts the view, waits for the exit code.
 */
const session = (
  options: ChatOptions,
  onLog: (path: string) => void,
  quit: (code: number) => void
): Effect.Effect<
  never,
  SessionLog.SessionWriteError | SessionLog.SessionLogError | SessionLog.SessionNotFound,
  | SessionStore.SessionStore
  | SessionReference.SessionReference
  | PreStep.PreStep
  | Model.Model
  | IdGenerator.IdGenerator
  | FileSystem.FileSystem
  | Path.Path
  | Scope.Scope
> =>
  Effect.gen(function*() {
    const tools = options.tools ?? (yield* OfflineTools.all())
    const toolsets = options.mcp === undefined ? undefined : [options.mcp.toolset]
    const agent = options.sessionId === undefined
      ? yield* Agent.make({ tools, toolsets, cwd: process.cwd(), instructions: options.instructions })
      : yield* Agent.resume(options.sessionId, { tools, toolsets, instructions: options.instructions })
    const logPath = agent.log.path ?? agent.id
    onLog(logPath)
    const store = yield* SessionStore.SessionStore
    const references = yield* SessionReference.SessionReference
    // Subscribe first, then read the state: nothing is lost between the two.
    const events = yield* agent.subscribe
    const model = new ChatModel(
      agent.id,
      agent.log.events().slice(),
      yield* agent.inbox,
      yield* agent.status,
      Date.now,
      options.prices
    )
    // What the runtime logs (a failed append, a run that failed) is a notice in the view, one
    // line with its cause's message: a logger writing to the terminal would draw over Ink's frame
    // (and the default one prints stack traces). The driver and tool fibers are forked from the
    // fibers started below, so they log here too.
    yield* Effect.locallyScopedWith(FiberRef.currentLoggers, () => HashSet.make(noticeLogger(model)))
    model.notice(
      (options.sessionId === undefined
        ? `new session ${agent.id}`
        : `resumed session ${agent.id}: ${model.turns} turn${model.turns === 1 ? "" : "s"} so far`) +
        `\nlog: ${logPath}${options.mcp === undefined ? "" : `\n${mcpSummary(options.mcp.servers())}`}` +
        "\n/help lists the keys and commands"
    )
    yield* Effect.forkScoped(Effect.forever(Effect.flatMap(
      Queue.takeBetween(events, 1, 4096),
      (batch) => Effect.sync(() => model.apply(Chunk.toReadonlyArray(batch)))
    )))

    const actions = yield* Queue.unbounded<Action>()
    yield* Effect.forkScoped(Effect.forever(Effect.flatMap(
      Queue.take(actions),
      (action) => perform(agent, references, store, model, quit, action, options.directory, options.mcp)
    )))
    const controller: ChatController = {
      submit: (text, mode) => {
        Queue.unsafeOffer(actions, { _tag: "submit", text, mode })
      },
      cancel: () => {
        Queue.unsafeOffer(actions, { _tag: "cancel" })
      },
      answer: (id, decision) => {
        const toolName = model.getSnapshot().questions.find((q) => q.id === id)?.toolName ?? "the tool"
        model.answering(id, true)
        Queue.unsafeOffer(actions, { _tag: "answer", id, toolName, decision })
      },
      quit,
      sessionIds: () => {
        Queue.unsafeOffer(actions, { _tag: "refresh-sessions" })
        return model.sessionIds
      }
    }
    // The store's sessions are read once before the view is drawn: a Tab right after the first
    // frame completes from them (a read queued here raced the first keys on a loaded machine).
    yield* perform(agent, references, store, model, quit, { _tag: "refresh-sessions" }, options.directory, options.mcp)
    // Ctrl-C is a key in raw mode: the view handles it (quit 130), not Ink.
    const ink = yield* Effect.acquireRelease(
      Effect.sync(() =>
        render(createElement(App, { model, controller }), { exitOnCtrlC: false, stdin: cleanStdin(process.stdin) })
      ),
      // After a turn of the event loop: React commits what the last key changed (it flushes in a
      // microtask, as this finalizer runs), so that the last frame Ink leaves is current.
      (ink) =>
        Effect.zipRight(Effect.promise(() => new Promise((resolve) => setImmediate(resolve))), Effect.sync(() => ink.unmount()))
    )
    // Should the view stop by itself (a render error, shown by Ink), the chat ends too.
    ink.waitUntilExit().then(() => quit(0), () => quit(1))
    return yield* Effect.never
  })

/** Log entries as notices of the view: the message and its cause's message, no stack trace. */
const noticeLogger = (model: ChatModel) =>
  Logger.make((entry) => {
    model.notice(entryText(entry), LogLevel.greaterThanEqual(entry.logLevel, LogLevel.Error) ? "error" : "warn")
  })

/** The exit code when the terminal is gone (SIGHUP, or stdin/stdout closed): 128 + SIGHUP. */
const TERMINAL_GONE = 129

/**
 * Listens, for the whole chat, to what ends it from outside: SIGINT and SIGTERM (kill, Ctrl-C
 * before the view puts the terminal in raw mode) quit 130; SIGHUP, the end of stdin or an error
 * writing stdout or stderr (EIO, EPIPE: the terminal is gone) quit 129. Installed before the
 * session is opened, so that a signal while a big log loads is not lost (§23). The signal
 * listeners also keep Ink's exit hook (signal-exit) from re-sending the signal, which would kill
 * the process before the agent is disposed and its lock released. The error listeners on
 * stdout/stderr stay to the end of the process: the clean-up still writes (Ink's last frame, the
 * log's path), and a write to a closed terminal must not throw.
 */
const outside = (quit: (code: number) => void, onGone: () => void): Effect.Effect<void, never, Scope.Scope> => {
  const interrupt = () => quit(130)
  const gone = () => {
    onGone()
    quit(TERMINAL_GONE)
  }
  return Effect.asVoid(Effect.acquireRelease(
    Effect.sync(() => {
      process.on("SIGINT", interrupt)
      process.on("SIGTERM", interrupt)
      process.on("SIGHUP", gone)
      process.stdin.on("end", gone)
      process.stdin.on("error", gone)
      process.stdout.on("error", gone)
      process.stderr.on("error", gone)
    }),
    () =>
      Effect.sync(() => {
        process.off("SIGINT", interrupt)
        process.off("SIGTERM", interrupt)
        process.off("SIGHUP", gone)
        process.stdin.off("end", gone)
        process.stdin.off("error", gone)
      })
  ))
}

/**
 * The chat until it is asked to end: by the view (`/quit`, Ctrl-C) or from outside (`outside`),
 * whichever comes first, also while the session is still being opened (the opening is then
 * interrupted; what it acquired is released with the scope).
 */
const chatUntilQuit = (
  options: ChatOptions,
  onLog: (path: string) => void,
  onGone: () => void
) =>
  Effect.gen(function*() {
    const done = yield* Deferred.make<number>()
    const quit = (code: number) => {
      Deferred.unsafeDone(done, Exit.succeed(code))
    }
    yield* outside(quit, onGone)
    return yield* Effect.raceFirst(Deferred.await(done), session(options, onLog, quit))
  })

/**
 * Runs the chat until `/quit` (exit code 0), Ctrl-C or SIGTERM (130), or until the terminal is
 * gone (129: SIGHUP, stdin ended, stdout broken); a new session on the JSONL store
 * of `options.directory`, or the resumed `options.sessionId` (repaired first if its process
 * died, §10; queued work is shown, not run). The agent is disposed before this
 * returns, and the log's path is printed last (also when interrupted). Fails with the store's
 * errors when the session cannot be made or resumed (nothing is shown then).
 */
export const runChat = (
  options: ChatOptions
): Effect.Effect<
  number,
  SessionLog.SessionWriteError | SessionLog.SessionLogError | SessionLog.SessionNotFound,
  FileSystem.FileSystem | Path.Path
> => {
  let logPath: string | undefined
  let gone = false
  return Effect.scoped(chatUntilQuit(options, (path) => {
    logPath = path
  }, () => {
    gone = true
  })).pipe(
    // The agent is made with the references' pre-step in context (§13).
    Effect.provide(
      Layer.mergeAll(
        options.model,
        options.compaction ?? Layer.empty,
        IdGenerator.layer,
        SessionReference.layer.pipe(Layer.provide(Layer.merge(PreStep.layer([]), IdGenerator.layer)))
      ).pipe(Layer.provideMerge(SessionStore.layerJsonl({ directory: options.directory })))
    ),
    Effect.ensuring(
      Effect.suspend(() => logPath === undefined ? Effect.void : Console.log(`session log: ${escapeLine(logPath)}`))
    ),
    Effect.ensuring(Effect.sync(() => {
      if (gone) closeStdio()
    }))
  )
}

/**
 * Closes file descriptors 0–2 once the terminal is gone, right before the process exits. At
 * exit Node 20 restores the terminal's settings on each stdio descriptor that is still the
 * terminal, and aborts (an assertion in `ResetStdio`, exit 134, a core dump where enabled) when
 * that fails with EIO, as it does on a closed pty; a closed descriptor is skipped. Nothing can
 * be shown by then anyway.
 */
const closeStdio = () => {
  for (const fd of [0, 1, 2]) {
    try {
      NodeFs.closeSync(fd)
    } catch {
      // already closed
    }
  }
}
