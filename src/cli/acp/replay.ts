/**
 * A session log as ACP v1 `session/update` notifications (§22): what `session/load` sends
 * before its response, and the per-item mappings the live agent uses so that a replayed session
 * and a live one look the same to the editor. Pure: it imports only types from the SDK
 * (`@agentclientprotocol/sdk`), and the updates are plain objects of the SDK's JSON schema
 * (`schema/v1/schema.json`, `SessionUpdate`).
 *
 * **What a replay shows.** The whole conversation as it happened, in log order, as the model saw
 * each message enter (§12): every `user/message` (what the user typed, and every piece
 * of context: injections, steering, tool and hook contexts, pre-step additions), every
 * `assistant/message` (its reasoning and text, block by block), every `tool/call` with its
 * `tool/result`. Messages that never entered a step (queued and canceled, §4) are not shown.
 * A compacted session is **not** shown as the compacted view `History.derive` gives the model:
 * an editor user expects to scroll back through what was said, so the messages a compaction
 * replaced stay, and each compaction that took effect is one marker where it happened (see
 * below). A DSH v0 log (`header.version === 0`, or `dsh: true`) shows only the messages of its
 * surface (message events with a `surfaceOp`, as `History` reads it; its `tool/call`s, which
 * never carry one, are all shown); a child session's inherited prefix
 * (`seedLength`) is shown too: it is the conversation the child continues. Turn ends, requests
 * and usage are not replayed (ACP v1 has no update for a past turn's end; `usage_update` needs
 * the context window, which the live agent sends).
 *
 * **The shapes** (one per kind of item; the live agent sends the same ones):
 * - A user-role message → one `user_message_chunk` per text or image block, each with
 *   `messageId` (our message id, ACP's own field) and
 *   `_meta: {"agent-loop": {messageId, source, via?, replaces?}}`: `source` is the message's
 *   `source` as logged (`{kind:"user"}` for what the user typed; any other kind is context);
 *   `via` says how it reached the inbox, read from the `agent/inbox/spliced` that inserted it:
 *   `"followup"` (next-turn), `"steer"` (next-step, waking) or `"inject"` (next-step, not waking;
 *   tool and hook contexts too); absent for a message entered without a splice (a pre-step
 *   addition). `replaces: {start, end}` (seqs) marks a DSH message that rewrote others in place.
 * - An assistant message → `agent_thought_chunk` for each reasoning block and
 *   `agent_message_chunk` for each text or image block, in block order, without `messageId` or
 *   `_meta`: the live agent streams them from deltas, which carry no message id, and the editor
 *   joins consecutive chunks either way. Empty blocks (and reasoning without text, e.g. an
 *   encrypted provider state) are skipped; tool-call blocks show as their `tool/call`.
 * - A `tool/call` → `tool_call {toolCallId: callId, title, name, kind, status: "pending",
 *   rawInput, locations?}` (`toolCall`): `rawInput` is the arguments parsed from their JSON
 *   string (the string itself when it is not JSON); `kind` from `toolKind(name)`; `title` from
 *   `toolTitle`; `locations` the absolute path a file tool names, when `cwd` is given.
 *   The live agent then sends `tool_call_update {status: "in_progress"}`; a replay does not.
 * - Approvals (§26): `approval/asked` and `approval/decided` give no update of their own (the
 *   live agent asks the client with `session/request_permission`, `permission.ts`). A call that
 *   waits for a decision stays `pending`: live, its `in_progress` comes with a decision that
 *   allows it (none for a refusal: its result follows, `failed`); at the end of a replay it is
 *   left `pending`, neither closed `failed` nor shown running.
 * - A `tool/result` → `tool_call_update {toolCallId, status: "completed" | "failed", content,
 *   rawOutput}` (`toolCallUpdate`): `failed` when the result is an error (`isError`, or a §8
 *   code in `data.error`); `content` the result's text and image blocks as
 *   `{type:"content", content}`; `rawOutput: {isError, text, error?: {name, code}}`.
 *   A call the log gives no result for (a log cut by a crash and not repaired: `session/load`
 *   repairs first, §10) is closed `failed` at the end of the replay, with that said as content;
 *   in a replay of a session whose agent is live (`running`), it is running: shown
 *   `tool_call_update {status: "in_progress"}` instead, and its result follows live.
 * - A compaction (§17) that took effect (its bracket ended `compacted`; in a DSH log, a
 *   checkpoint `user/message` of plugin `compact` where it stands) → when the client advertised
 *   the `session.compaction` capability (`compaction: true`), one `compaction_update
 *   {compactionId, status: "completed", summary}`; otherwise one `user_message_chunk` whose text
 *   is the marker line of `agent-loop transcript` (`TranscriptText.compactionLabel`, e.g.
 *   `[compaction: pressure, turn 3] compacted 118 → 80 tokens: seq 4..6 (59 tokens) summarized`)
 *   and the summary below it, with `messageId` the summary checkpoint's id and
 *   `_meta: {"agent-loop": {messageId, source, compaction}}` (`source` the checkpoint's,
 *   `{kind:"plugin", plugin:"compact", compactionId}`; `compaction` the marker's figures:
 *   `{compactionId, turn, step, reason?, outcome, tokensBefore?, tokensAfter?, shadowedRange?,
 *   shadowedTokenCount?, pruned?, replaced?}`). A compaction that did not take effect
 *   (`skipped`, `failed`, `aborted`, `interrupted`) changed nothing the model sees: without the
 *   capability it shows nothing; with it, `failed`/`interrupted` → `status: "failed"` with the
 *   error, `aborted` → `"cancelled"`, `skipped` → nothing.
 * The checkpoint messages of a compaction are part of its marker, never messages of their own.
 *
 * @since 0.1.0
 */
import type {
  ContentBlock as AcpContentBlock,
  SessionUpdate,
  ToolCallContent,
  ToolCallLocation,
  ToolKind
} from "@agentclientprotocol/sdk"
import { isAbsolute, resolve } from "node:path"
import { isDsh } from "../../internal/logOptions.js"
import type { AssistantMessage, ContentBlock, MessageSource, UserMessage } from "../../Message.js"
import { textOf } from "../../Message.js"
import type { SessionEvent, SplicedData, ToolCallData, ToolResultData } from "../../SessionEvent.js"
import type { LogOptions } from "../../SessionLog.js"
import { type CheckpointEntry, type CompactionMarkerEntry, projector as transcriptProjector } from "../../Transcript.js"
import { checkpointLabel, compactionLabel } from "../../TranscriptText.js"

export type { SessionUpdate }

/**
 * The key of our metadata in ACP's `_meta` objects: `_meta: {"agent-loop": {...}}`.
 *
 * @since 0.1.0
 * @category models
 */
export const META_KEY = "agent-loop"

/**
 * How a user-role message reached the inbox (§4, §5.1): `followup` (next-turn),
 * `steer` (next-step, waking), `inject` (next-step, not waking).
 *
 * @since 0.1.0
 * @category models
 */
export type Via = "followup" | "steer" | "inject"

/**
 * `_meta["agent-loop"]` of a `user_message_chunk`: our message id, its `source` as logged, how it
 * reached the inbox (`via`, when a splice inserted it), the seqs a DSH in-place rewrite replaced
 * (`replaces`), and the figures of a compaction marker (`compaction`).
 *
 * @since 0.1.0
 * @category models
 */
export interface MessageMeta {
  readonly messageId: string
  readonly source: MessageSource
  readonly via?: Via | undefined
  readonly replaces?: { readonly start: number; readonly end: number } | undefined
  readonly compaction?: CompactionFigures | undefined
}

/**
 * The figures of a compaction marker in `_meta` (a `Transcript.CompactionMarkerEntry` without its
 * `kind` and `summary`; the summary is the chunk's text or the update's `summary`).
 *
 * @since 0.1.0
 * @category models
 */
export type CompactionFigures = Omit<CompactionMarkerEntry, "kind" | "summary">

/**
 * Options of `replayUpdates` and `projector`:
 * - `header` / `dsh`: the log's flavour, as for `History.derive` (a DSH v0 log shows only its
 *   surface events);
 * - `cwd`: the session's working directory; when given, a file tool's `tool_call` carries the
 *   absolute path it names in `locations`;
 * - `compaction`: the client advertised `clientCapabilities.session.compaction` (ACP may then
 *   receive `compaction_update`); default `false` (a compaction is a `user_message_chunk`);
 * - `live`: the projection of a running session (the live agent): assistant messages are left
 *   out (their chunks are streamed from deltas, `assistantChunk`), each `tool_call` is followed by
 *   `tool_call_update {status: "in_progress"}`, and `end()` closes nothing;
 * - `running`: a replay of a session whose agent is live (open on the connection): `end()` shows
 *   each call without a result `in_progress` (it is running; its result follows live).
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayOptions extends Pick<LogOptions, "header" | "dsh"> {
  readonly cwd?: string | undefined
  readonly compaction?: boolean | undefined
  readonly live?: boolean | undefined
  /**
   * The session's agent is live and may be running a turn (a `session/load` of a session open
   * on this connection): a call without a result is running, and `end()` shows it
   * `tool_call_update {status: "in_progress"}` instead of closing it `failed` (a call waiting
   * for a decision, §26, stays `pending` either way).
   */
  readonly running?: boolean | undefined
  /**
   * Live: the event that follows `seq` in the log, when it is written (`agent.log.events()[seq +
   * 1]`). A call's question is appended with its `tool/call`, right after it (§26 rule 2), so
   * the live projection reads it there to leave out the `in_progress` of a call that waits for
   * a decision. Without it, every live `tool_call` is followed by `in_progress`.
   */
  readonly next?: ((seq: number) => SessionEvent | undefined) | undefined
  /**
   * What a call's title names instead of the tool's name (`toolTitle`), when it returns a label:
   * an MCP server's tool as `SERVER: TOOL` (`mcpServers.ts`'s `toolLabel`).
   */
  readonly toolLabel?: ((name: string) => string | undefined) | undefined
}

// ---------------------------------------------------------------------------------------------
// Per-item mappings (shared with the live agent)
// ---------------------------------------------------------------------------------------------

const KINDS: ReadonlyMap<string, ToolKind> = new Map<string, ToolKind>([
  // ours (OfflineTools) and DSH's
  ["read_file", "read"],
  ["read", "read"],
  ["read_image", "read"],
  ["view", "read"],
  ["cat", "read"],
  ["wait", "other"],
  ["clock", "other"],
  ["write", "edit"],
  ["write_file", "edit"],
  ["edit", "edit"],
  ["edit_file", "edit"],
  ["multi_edit", "edit"],
  ["str_replace_editor", "edit"],
  ["str_replace", "edit"],
  ["apply_patch", "edit"],
  ["notebook_edit", "edit"],
  ["delete", "delete"],
  ["delete_file", "delete"],
  ["rm", "delete"],
  ["move", "move"],
  ["move_file", "move"],
  ["rename", "move"],
  ["mv", "move"],
  ["grep", "search"],
  ["glob", "search"],
  ["search", "search"],
  ["find", "search"],
  ["ls", "search"],
  ["list", "search"],
  ["list_dir", "search"],
  ["list_files", "search"],
  ["web_search", "search"],
  ["bash", "execute"],
  ["shell", "execute"],
  ["sh", "execute"],
  ["pwsh", "execute"],
  ["powershell", "execute"],
  ["exec", "execute"],
  ["run", "execute"],
  ["run_code", "execute"],
  ["terminal", "execute"],
  ["fetch", "fetch"],
  ["web_fetch", "fetch"],
  ["http", "fetch"],
  ["think", "think"],
  ["todo_write", "think"]
])

/**
 * The ACP `ToolKind` of a tool name (case-insensitive): `read_file`/`read` → `read`,
 * `write`/`edit`/`str_replace_editor` → `edit`, `bash`/`pwsh`/`run_code` → `execute`,
 * `grep`/`glob`/`ls` → `search`, `web_fetch` → `fetch`, `think`/`todo_write` → `think`, `wait`,
 * `clock` and every name not in the table → `other`.
 *
 * @since 0.1.0
 * @category mappings
 */
export const toolKind = (name: string): ToolKind => KINDS.get(name.toLowerCase()) ?? "other"

/** The arguments' keys that name a file, in the order they are looked for. */
const PATH_KEYS = ["path", "file_path", "filePath", "filename"] as const
/** The arguments' keys a title shows, in the order they are looked for. */
const TITLE_KEYS = [...PATH_KEYS, "command", "url", "query", "pattern", "description"] as const
const TITLE_MAX = 100

const fieldOf = (input: unknown, keys: ReadonlyArray<string>): string | undefined => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return undefined
  const o = input as { readonly [key: string]: unknown }
  for (const key of keys) {
    const v = o[key]
    if (typeof v === "string" && v.trim() !== "") return v
  }
  return undefined
}

/**
 * A tool call's title: its name, then the first of its arguments `path`, `file_path`, `filePath`,
 * `filename`, `command`, `url`, `query`, `pattern`, `description` that is a non-empty string
 * (or `seconds` as `Ns`), on one line, at most 100 characters (`…` at the cut):
 * `read_file notes.txt`, `bash echo HELLO`, `wait 1s`, `clock`. With a `label` (an MCP
 * server's tool: `everything: echo`), the label stands for the name.
 *
 * @since 0.1.0
 * @category mappings
 */
export const toolTitle = (name: string, input: unknown, label?: string | undefined): string => {
  let arg = fieldOf(input, TITLE_KEYS)
  if (arg === undefined && typeof input === "object" && input !== null) {
    const seconds = (input as { readonly seconds?: unknown }).seconds
    if (typeof seconds === "number" && Number.isFinite(seconds)) arg = `${seconds}s`
  }
  const shown = label ?? name
  const title = arg === undefined ? shown : `${shown} ${arg.replace(/\s+/g, " ").trim()}`
  return title.length > TITLE_MAX ? title.slice(0, TITLE_MAX - 1) + "…" : title
}

/**
 * A tool call's `rawInput`: its arguments (the provider's JSON string, §3.2) parsed,
 * or the string itself when it is not JSON (a model's malformed arguments stay visible).
 *
 * @since 0.1.0
 * @category mappings
 */
export const rawInputOf = (args: unknown): unknown => {
  if (typeof args !== "string") return args
  try {
    return JSON.parse(args)
  } catch {
    return args
  }
}

/**
 * An image block as ACP content: `{type:"image", mimeType, data}` when the log holds its bytes
 * (base64 `data`); a DSH v0 image that only references a stored attachment
 * (`{type:"image", attachment:{attachmentId, mediaType, name?, …}}`, no `data`) becomes the
 * text `[image NAME (MEDIA TYPE), not in the session log]`, since ACP's image needs the bytes.
 */
const imageBlock = (b: Extract<ContentBlock, { readonly type: "image" }>): AcpContentBlock => {
  if (typeof b.data === "string" && typeof b.mediaType === "string") return { type: "image", mimeType: b.mediaType, data: b.data }
  const a =
    (b as { readonly attachment?: { readonly name?: unknown; readonly attachmentId?: unknown; readonly mediaType?: unknown } })
      .attachment
  const name = typeof a?.name === "string" ? a.name : typeof a?.attachmentId === "string" ? a.attachmentId : "attachment"
  const type = typeof b.mediaType === "string" ? b.mediaType : typeof a?.mediaType === "string" ? a.mediaType : "image"
  return { type: "text", text: `[image ${name} (${type}), not in the session log]` }
}

/**
 * Our content blocks as ACP content blocks (§2): `text` → `{type:"text", text}`,
 * `image {mediaType, data}` → `{type:"image", mimeType, data}` (a DSH image that only names a
 * stored attachment: a text placeholder, see `imageBlock`); the text and images of a nested
 * `tool-result` block are taken in place; `reasoning` and `tool-call` blocks are left out (they
 * have updates of their own). Empty texts are left out.
 *
 * @since 0.1.0
 * @category mappings
 */
export const contentBlocks = (content: ReadonlyArray<ContentBlock>): Array<AcpContentBlock> => {
  const out: Array<AcpContentBlock> = []
  const walk = (blocks: ReadonlyArray<ContentBlock>): void => {
    for (const b of blocks) {
      if (b.type === "text") {
        if (b.text !== "") out.push({ type: "text", text: b.text })
      } else if (b.type === "image") out.push(imageBlock(b))
      else if (b.type === "tool-result") walk(b.content)
    }
  }
  walk(content)
  return out
}

/**
 * The `user_message_chunk`s of a user-role message: one per text or image block, each with
 * `messageId` and `_meta: {"agent-loop": {messageId, source, via?, replaces?}}` (see the module
 * comment). A message without text or images gives none.
 *
 * @since 0.1.0
 * @category mappings
 */
export const userMessageChunks = (
  message: UserMessage,
  extra?: { readonly via?: Via | undefined; readonly replaces?: MessageMeta["replaces"] }
): Array<SessionUpdate> => {
  const meta: MessageMeta = {
    messageId: message.id,
    source: message.source,
    ...(extra?.via !== undefined ? { via: extra.via } : {}),
    ...(extra?.replaces !== undefined ? { replaces: extra.replaces } : {})
  }
  return contentBlocks(message.content ?? []).map((content) => ({
    sessionUpdate: "user_message_chunk",
    content,
    messageId: message.id,
    _meta: { [META_KEY]: meta }
  }))
}

/**
 * One assistant chunk, as the live agent sends a delta and a replay a whole block:
 * `{sessionUpdate: "agent_message_chunk" | "agent_thought_chunk", content: {type:"text", text}}`.
 *
 * @since 0.1.0
 * @category mappings
 */
export const assistantChunk = (
  kind: "agent_message_chunk" | "agent_thought_chunk",
  text: string
): SessionUpdate => ({ sessionUpdate: kind, content: { type: "text", text } })

/**
 * The chunks of an assistant message, in block order: `agent_thought_chunk` for reasoning,
 * `agent_message_chunk` for text and images; empty blocks and tool-call blocks left out.
 *
 * @since 0.1.0
 * @category mappings
 */
export const assistantChunks = (message: AssistantMessage): Array<SessionUpdate> => {
  const out: Array<SessionUpdate> = []
  for (const b of message.content ?? []) {
    if (b.type === "reasoning") {
      if (typeof b.text === "string" && b.text !== "") out.push(assistantChunk("agent_thought_chunk", b.text))
    } else if (b.type === "text") {
      if (b.text !== "") out.push(assistantChunk("agent_message_chunk", b.text))
    } else if (b.type === "image") {
      out.push({ sessionUpdate: "agent_message_chunk", content: imageBlock(b) })
    }
  }
  return out
}

/**
 * The `tool_call` of a `tool/call` (§3.2, §8): `{sessionUpdate: "tool_call",
 * toolCallId: callId, title, name, kind, status: "pending", rawInput, locations?}`; `locations`
 * holds the absolute path of a file tool's `path`-like argument when `cwd` is given; `toolLabel`
 * gives the title's label of a tool (`toolTitle`).
 *
 * @since 0.1.0
 * @category mappings
 */
export const toolCall = (
  call: Pick<ToolCallData, "callId" | "name" | "arguments">,
  options?: {
    readonly cwd?: string | undefined
    readonly toolLabel?: ((name: string) => string | undefined) | undefined
  }
): SessionUpdate => {
  const rawInput = rawInputOf(call.arguments)
  const kind = toolKind(call.name)
  const path = options?.cwd !== undefined && (kind === "read" || kind === "edit" || kind === "delete" || kind === "move")
    ? fieldOf(rawInput, PATH_KEYS)
    : undefined
  const locations: Array<ToolCallLocation> | undefined = path === undefined
    ? undefined
    : [{ path: isAbsolute(path) ? path : resolve(options!.cwd!, path) }]
  return {
    sessionUpdate: "tool_call",
    toolCallId: call.callId,
    title: toolTitle(call.name, rawInput, options?.toolLabel?.(call.name)),
    name: call.name,
    kind,
    status: "pending",
    rawInput,
    ...(locations !== undefined ? { locations } : {})
  }
}

/**
 * The update a live agent sends when a call starts running: `{sessionUpdate:
 * "tool_call_update", toolCallId, status: "in_progress"}`.
 *
 * @since 0.1.0
 * @category mappings
 */
export const toolCallStarted = (callId: string): SessionUpdate => ({
  sessionUpdate: "tool_call_update",
  toolCallId: callId,
  status: "in_progress"
})

/** The call id and the `tool-result` block of a result message (Transcript's reading). */
const resultOf = (message: UserMessage): {
  readonly callId: string | undefined
  readonly block: Extract<ContentBlock, { readonly type: "tool-result" }> | undefined
} => {
  let block: Extract<ContentBlock, { readonly type: "tool-result" }> | undefined
  for (const b of message.content ?? []) {
    if (b.type === "tool-result") {
      block = b
      break
    }
  }
  const fromSource = (message.source as { readonly callId?: unknown } | undefined)?.callId
  return { callId: typeof fromSource === "string" ? fromSource : block?.toolCallId, block }
}

/**
 * The `tool_call_update` of a `tool/result` (§3.2, §8): `{sessionUpdate:
 * "tool_call_update", toolCallId, status: "completed" | "failed", content, rawOutput}`; `failed`
 * when the result is an error (its block's `isError`, or a code in `data.error`); `content` its
 * text and image blocks, each `{type:"content", content}`; `rawOutput: {isError, text,
 * error?: {name, code}}` (`text` the result's text blocks joined with "\n").
 *
 * @since 0.1.0
 * @category mappings
 */
export const toolCallUpdate = (result: Pick<ToolResultData, "message" | "error">): SessionUpdate => {
  const { block, callId } = resultOf(result.message)
  const blocks = block !== undefined ? block.content : result.message.content ?? []
  const isError = block?.isError === true || result.error !== undefined
  const content: Array<ToolCallContent> = contentBlocks(blocks).map((c) => ({ type: "content", content: c }))
  return {
    sessionUpdate: "tool_call_update",
    toolCallId: callId ?? "",
    status: isError ? "failed" : "completed",
    content,
    rawOutput: {
      isError,
      text: textOf(blocks),
      ...(result.error !== undefined ? { error: { name: result.error.name, code: result.error.code } } : {})
    }
  }
}

/** The text of a call the log holds no result for, closed at the end of a replay. */
const NO_RESULT = "the session log holds no result for this call"

const noResult = (callId: string): SessionUpdate => ({
  sessionUpdate: "tool_call_update",
  toolCallId: callId,
  status: "failed",
  content: [{ type: "content", content: { type: "text", text: NO_RESULT } }],
  rawOutput: { isError: true, text: NO_RESULT }
})

const figuresOf = (entry: CompactionMarkerEntry): CompactionFigures => {
  const { kind: _, summary: __, ...figures } = entry
  return figures
}

/**
 * The updates of a compaction marker (`Transcript`'s entry at the bracket's end) or of a DSH
 * checkpoint outside any bracket: see the module comment. `checkpoint` is the summary
 * checkpoint message of the bracket (its first checkpoint), when the log holds one.
 *
 * @since 0.1.0
 * @category mappings
 */
export const compactionUpdates = (
  entry: CompactionMarkerEntry | CheckpointEntry,
  checkpoint: UserMessage | undefined,
  options?: { readonly compaction?: boolean | undefined }
): Array<SessionUpdate> => {
  if (entry.kind === "checkpoint") {
    const compactionId = entry.compactionId ?? entry.id
    if (options?.compaction === true) {
      return [{
        sessionUpdate: "compaction_update",
        compactionId,
        status: "completed",
        summary: entry.text === "" ? [] : [{ type: "text", text: entry.text }]
      }]
    }
    const meta: MessageMeta = { messageId: entry.id, source: entry.source, replaces: entry.replaces }
    return [{
      sessionUpdate: "user_message_chunk",
      content: { type: "text", text: entry.text === "" ? checkpointLabel(entry) : `${checkpointLabel(entry)}\n\n${entry.text}` },
      messageId: entry.id,
      _meta: { [META_KEY]: meta }
    }]
  }
  const figures = figuresOf(entry)
  if (options?.compaction === true) {
    switch (entry.outcome) {
      case "compacted":
        return [{
          sessionUpdate: "compaction_update",
          compactionId: entry.compactionId,
          status: "completed",
          summary: entry.summary === undefined ? [] : [{ type: "text", text: entry.summary }],
          _meta: { [META_KEY]: { compaction: figures } }
        }]
      case "aborted":
        return [{
          sessionUpdate: "compaction_update",
          compactionId: entry.compactionId,
          status: "cancelled",
          _meta: { [META_KEY]: { compaction: figures } }
        }]
      case "failed":
      case "interrupted":
        return [{
          sessionUpdate: "compaction_update",
          compactionId: entry.compactionId,
          status: "failed",
          error: entry.error !== undefined
            ? `${entry.error.code}${entry.error.message !== "" ? `: ${entry.error.message}` : ""}`
            : entry.outcome,
          _meta: { [META_KEY]: { compaction: figures } }
        }]
      default:
        return []
    }
  }
  if (entry.outcome !== "compacted") return []
  const label = compactionLabel(entry)
  const messageId = checkpoint?.id ?? entry.compactionId
  const meta: MessageMeta = {
    messageId,
    source: checkpoint?.source ?? { kind: "plugin", plugin: "compact", compactionId: entry.compactionId },
    compaction: figures
  }
  return [{
    sessionUpdate: "user_message_chunk",
    content: { type: "text", text: entry.summary === undefined ? label : `${label}\n\n${entry.summary}` },
    messageId,
    _meta: { [META_KEY]: meta }
  }]
}

// ---------------------------------------------------------------------------------------------
// The projection
// ---------------------------------------------------------------------------------------------

/**
 * The replay projection fed one event at a time: `push(event)` returns the updates that event
 * gives, in order; `end()` the updates that close what the log left open (a replay closes each
 * call without a result `failed`; a live projection closes nothing). `replayUpdates(events)` is
 * every `push`, then `end()`. The live agent feeds it the durable events of `agent.events` with
 * `live: true` and sends what it returns (leaving out the chunks of the prompt the client sent
 * itself, by their `messageId`), and streams assistant text and reasoning from deltas with
 * `assistantChunk`. `prime(event)` takes an event already shown some other way (a loaded log,
 * which its replay shows) for what later events need of it, and builds no update: the `via` of a
 * message spliced and not yet entered, and the calls and questions still open (`Agent.resume`
 * closes a loaded log's calls and compactions, §10, except the calls of a step that waits for a
 * decision, §26 rule 8, whose results come later).
 *
 * @since 0.1.0
 * @category projections
 */
export interface Projector {
  readonly push: (event: SessionEvent) => ReadonlyArray<SessionUpdate>
  readonly prime: (event: SessionEvent) => void
  readonly end: () => ReadonlyArray<SessionUpdate>
}

const NONE: ReadonlyArray<SessionUpdate> = []

const replaceOf = (event: SessionEvent): { readonly start: number; readonly end: number } | undefined => {
  const op = (event as { readonly surfaceOp?: unknown }).surfaceOp as
    | { readonly op?: unknown; readonly start?: unknown; readonly end?: unknown }
    | undefined
  if (typeof op !== "object" || op === null || op.op !== "replace") return undefined
  return typeof op.start === "number" && typeof op.end === "number" ? { start: op.start, end: op.end } : undefined
}

/** A compaction checkpoint: a `user/message` of plugin `compact` logged with a `replace` surfaceOp. */
const isCheckpoint = (event: SessionEvent, message: UserMessage): boolean => {
  const source = message.source as { readonly kind?: unknown; readonly plugin?: unknown } | undefined
  return source?.kind === "plugin" && source.plugin === "compact" && replaceOf(event) !== undefined
}

/**
 * A new replay projection (see `Projector` and the module comment for the shapes).
 *
 * @since 0.1.0
 * @category projections
 */
export const projector = (options?: ReplayOptions): Projector => {
  const dsh = isDsh(options)
  const live = options?.live === true
  const cwd = options?.cwd
  const toolLabel = options?.toolLabel
  const compaction = options?.compaction === true
  // The compaction markers come from the transcript projection (one per bracket, at its end).
  const transcript = transcriptProjector()
  /** How each message still to enter reached the inbox, by message id (taken when it enters). */
  const via = new Map<string, Via>()
  /** The first checkpoint of each compaction (its summary), by compaction id. */
  const checkpoints = new Map<string, UserMessage>()
  /** Calls shown and not yet answered, in call order. */
  const open = new Set<string>()
  /** The open questions (§26): the call each is about, by question id. */
  const questions = new Map<string, string>()
  /** The calls that wait for a decision (their question open). */
  const waiting = new Set<string>()
  const next = options?.next
  /** Records a question or its decision; returns the call a decision allows, when it allows one. */
  const approval = (event: SessionEvent): string | undefined => {
    const data = event.data as { readonly id?: unknown; readonly callId?: unknown; readonly outcome?: unknown } | null
    if (typeof data?.id !== "string") return undefined
    if (event.type === "approval/asked") {
      if (typeof data.callId === "string") {
        questions.set(data.id, data.callId)
        waiting.add(data.callId)
      }
      return undefined
    }
    const callId = questions.get(data.id)
    if (callId === undefined) return undefined
    questions.delete(data.id)
    waiting.delete(callId)
    return data.outcome === "allowed-once" || data.outcome === "allowed-always" ? callId : undefined
  }
  /** Whether the `tool/call` at `seq` has its question right after it (live). */
  const asked = (seq: number, callId: string): boolean => {
    const following = next?.(seq)
    return following?.type === "approval/asked" && (following.data as { readonly callId?: unknown }).callId === callId
  }
  /** Records how a splice's messages reached the inbox. */
  const spliced = (data: SplicedData): void => {
    const how: Via = data.target === "next-turn" ? "followup" : data.wake === true ? "steer" : "inject"
    for (const m of data.inserted ?? []) via.set(m.id, how)
  }
  const prime = (event: SessionEvent): void => {
    if (event.type === "agent/inbox/spliced") spliced(event.data as SplicedData)
    else if (event.type === "user/message") via.delete((event.data as UserMessage).id)
    else if (event.type === "tool/call") open.add((event.data as ToolCallData).callId)
    else if (event.type === "tool/result") open.delete(resultOf((event.data as ToolResultData).message).callId ?? "")
    else if (event.type === "approval/asked" || event.type === "approval/decided") approval(event)
  }
  const push = (event: SessionEvent): ReadonlyArray<SessionUpdate> => {
    let out: Array<SessionUpdate> | undefined
    const add = (updates: ReadonlyArray<SessionUpdate>): void => {
      if (updates.length === 0) return
      if (out === undefined) out = []
      for (const u of updates) out.push(u)
    }
    for (const entry of transcript.push(event)) {
      if (entry.kind === "compaction") {
        add(compactionUpdates(entry, checkpoints.get(entry.compactionId), { compaction }))
        checkpoints.delete(entry.compactionId)
      } else if (entry.kind === "checkpoint") {
        add(compactionUpdates(entry, undefined, { compaction }))
      }
    }
    // A DSH v0 event without a surfaceOp is log-only (History's rule).
    const visible = !dsh || (event as { readonly surfaceOp?: unknown }).surfaceOp !== undefined
    switch (event.type) {
      case "agent/inbox/spliced":
        spliced(event.data as SplicedData)
        break
      case "user/message": {
        const message = event.data as UserMessage
        const how = via.get(message.id)
        if (how !== undefined) via.delete(message.id)
        if (!visible) break
        if (isCheckpoint(event, message)) {
          const id = (message.source as { readonly compactionId?: unknown }).compactionId
          if (typeof id === "string" && !checkpoints.has(id)) checkpoints.set(id, message)
          break
        }
        add(userMessageChunks(message, { via: how, replaces: replaceOf(event) }))
        break
      }
      case "assistant/message": {
        if (live || !visible) break
        add(assistantChunks((event.data as { readonly message: AssistantMessage }).message))
        break
      }
      case "tool/call": {
        const data = event.data as ToolCallData
        open.add(data.callId)
        add([toolCall(data, { cwd, toolLabel })])
        if (live && !asked(event.seq, data.callId)) add([toolCallStarted(data.callId)])
        break
      }
      case "approval/asked":
        approval(event)
        break
      case "approval/decided": {
        const allowed = approval(event)
        if (live && allowed !== undefined && open.has(allowed)) add([toolCallStarted(allowed)])
        break
      }
      case "tool/result": {
        if (!visible) break
        const data = event.data as ToolResultData
        const update = toolCallUpdate(data)
        const callId = (update as { readonly toolCallId: string }).toolCallId
        if (!open.has(callId)) {
          // A result for a call the log never showed: show the call first, so the update has one.
          add([toolCall({ callId, name: "tool", arguments: "{}" }, { cwd, toolLabel })])
        }
        open.delete(callId)
        add([update])
        break
      }
    }
    return out ?? NONE
  }
  const end = (): ReadonlyArray<SessionUpdate> => {
    if (live || open.size === 0) return NONE
    const out: Array<SessionUpdate> = []
    for (const callId of open) {
      // A call waiting for a decision stays pending (§26).
      if (!waiting.has(callId)) out.push(options?.running === true ? toolCallStarted(callId) : noResult(callId))
    }
    open.clear()
    return out
  }
  return { push, prime, end }
}

/**
 * The `session/update`s that replay a session log (§22, `session/load`): the whole
 * conversation as it happened, in log order (see the module comment for what is shown and the
 * shape of each update). Send each as `{sessionId, update}` before the `session/load` response:
 * `for (const update of replayUpdates(log.events, {header: log.header, cwd})) notify({sessionId,
 * update})`. One pass. (A CLI module, not exported by the package: no `@example`.)
 *
 * @since 0.1.0
 * @category projections
 */
export const replayUpdates = (
  events: ReadonlyArray<SessionEvent>,
  options?: Omit<ReplayOptions, "live">
): ReadonlyArray<SessionUpdate> => {
  const p = projector({ ...options, live: false })
  const out: Array<SessionUpdate> = []
  for (let i = 0; i < events.length; i++) {
    const updates = p.push(events[i]!)
    for (let j = 0; j < updates.length; j++) out.push(updates[j]!)
  }
  for (const u of p.end()) out.push(u)
  return out
}
