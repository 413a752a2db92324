/**
 * The transcript: a session log as people read it (§12, §14). `fromEvents` turns the
 * log into entries that are exactly the `agent-loop transcript --json` line shapes of §14, in log
 * order:
 * - `{kind:"user"|"context", turn, step, id, text, source}` for each entered user-role message
 *   (`user` when `source.kind === "user"`, else `context`, with its producer in `source`);
 * - `{kind:"assistant", turn, step, text, interrupted?}` for each assistant message that has text
 *   or was interrupted (a response made only of tool calls shows as its `tool-call` entries);
 * - `{kind:"tool-call", turn, step, callId, name, arguments}`;
 * - `{kind:"tool-result", turn, step, callId, text, isError}`;
 * - `{kind:"turn-end", turn, reason}`;
 * - `{kind:"compaction", turn, step, compactionId, reason?, outcome?, tokensBefore?, tokensAfter?,
 *   shadowedRange?, shadowedTokenCount?, summary?, pruned?, replaced?, error?}` for each compaction
 *   bracket (§17: `compaction/start` … `compaction/end`), one entry at its end; the
 *   checkpoint `user/message`s inside the bracket are part of it, not messages of their own.
 *   DSH's brackets are read in DSH's shape: a `summary` made of content blocks, and an end
 *   without `outcome` (success) or with `error: string` (a failed or aborted compaction);
 * - `{kind:"checkpoint", turn, step, id, compactionId?, replaces, text, source}` for a compaction
 *   checkpoint outside any bracket (a DSH log's `user/message` of plugin `compact` with
 *   `surfaceOp: {op:"replace"}`);
 * - `{kind:"approval", event, turn, step, id, …}` for a question about a tool call (§26);
 * - `{kind:"session", turn: 0, step: 0, id, parentSession?, origin?, delegationDepth?,
 *   seedLength?}` first, for a child session (a sub-agent's: its header names its lineage), when
 *   `fromEvents` is given the header;
 * - `{kind:"subagent", event:"descriptor", turn, step, mode?, provider?, label?, agentProvider?,
 *   agentModel?}` for a child's `subagent/descriptor`, and `{kind:"subagent", event:"start"|"end",
 *   turn, step, id, provider?, runId?, callId?, stopReason?, text?}` for a parent's
 *   `subagent/start` and `subagent/end` (`id` the child's session, `text` the child's final
 *   answer). DSH's shapes: `src/internal/subagentLog.ts`.
 * `text` joins a message's text blocks with "\n" (images and reasoning are not part of it).
 * `toJsonLines` prints one JSON object a line; `TranscriptText.render` prints entries as
 * readable text. Works on our logs and DSH v0 logs alike; other event types are skipped. One
 * pass; `projector` is the same projection fed one event at a time (a live view).
 *
 * @since 0.1.0
 */
import { lineageOf } from "./internal/subagentLog.js"
import { escapeJson } from "./internal/terminalText.js"
import type { ContentBlock, MessageSource, UserMessage } from "./Message.js"
import { textOf } from "./Message.js"
import type {
  AssistantMessageData,
  SessionEvent,
  SessionHeader,
  ToolCallData,
  ToolResultData,
  TurnEndReason
} from "./SessionEvent.js"

/**
 * A user-role message that entered a step: `user` when `source.kind === "user"`, else `context`
 * (§14). `turn`/`step` are those of the open step (0 outside any).
 *
 * @since 0.1.0
 * @category models
 */
export interface MessageEntry {
  readonly kind: "user" | "context"
  readonly turn: number
  readonly step: number
  readonly id: string
  readonly text: string
  readonly source: MessageSource
}

/**
 * An assistant response's text (§14); `interrupted: true` for a prefix kept at cancel.
 *
 * @since 0.1.0
 * @category models
 */
export interface AssistantEntry {
  readonly kind: "assistant"
  readonly turn: number
  readonly step: number
  readonly text: string
  readonly interrupted?: true | undefined
}

/**
 * A tool call; `arguments` is the raw JSON string as logged (§14).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCallEntry {
  readonly kind: "tool-call"
  readonly turn: number
  readonly step: number
  readonly callId: string
  readonly name: string
  readonly arguments: string
}

/**
 * A tool result: the text of its content and whether it is an error (§14).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolResultEntry {
  readonly kind: "tool-result"
  readonly turn: number
  readonly step: number
  readonly callId: string
  readonly text: string
  readonly isError: boolean
}

/**
 * The end of a turn with its reason as logged (§6.4, §14).
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnEndEntry {
  readonly kind: "turn-end"
  readonly turn: number
  readonly reason: TurnEndReason
}

/**
 * A compaction bracket (§17), one entry at its `compaction/end`: `turn` is the turn it ran
 * in (0 for a manual compaction between turns, `turn: null` in the log), `step` the step open or
 * last ended then; `reason` (`pressure`, `overflow`, `manual`) and `tokensBefore` (the estimate
 * when it started) from `compaction/start`; `outcome`, `tokensAfter` (the estimate after a
 * `compacted` one) and `error` from `compaction/end` (`outcome` absent: the log holds no end for
 * it, e.g. a log cut by a crash; a DSH end, which has no `outcome`, is `compacted`, or `failed`
 * with `error: {code: "ERROR", message}` when it carries DSH's `error` string); `summary` (the
 * text of DSH's content blocks), `shadowedRange` (the seqs of the first and last
 * event it replaced) and `shadowedTokenCount` from `compaction/summary`; `pruned` the number of
 * tool results replaced one by one (a pruning policy), `replaced` the number of other messages
 * replaced one by one. Fields the log does not hold are absent. Tokens are the loop's estimate
 * (`Compaction.estimateTokens`).
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionMarkerEntry {
  readonly kind: "compaction"
  readonly turn: number
  readonly step: number
  readonly compactionId: string
  readonly reason?: string | undefined
  readonly outcome?: string | undefined
  readonly tokensBefore?: number | undefined
  readonly tokensAfter?: number | undefined
  readonly shadowedRange?: { readonly start: number; readonly end: number } | undefined
  readonly shadowedTokenCount?: number | undefined
  readonly summary?: string | undefined
  readonly pruned?: number | undefined
  readonly replaced?: number | undefined
  readonly error?: { readonly code: string; readonly message: string } | undefined
}

/**
 * A compaction checkpoint outside any bracket (a DSH log's `user/message` whose source is
 * `{kind:"plugin", plugin:"compact"}`, logged with `surfaceOp: {op:"replace", start, end}`): the
 * text that replaced the surface events `replaces.start`..`replaces.end` (seqs).
 *
 * @since 0.1.0
 * @category models
 */
export interface CheckpointEntry {
  readonly kind: "checkpoint"
  readonly turn: number
  readonly step: number
  readonly id: string
  readonly compactionId?: string | undefined
  readonly replaces: { readonly start: number; readonly end: number }
  readonly text: string
  readonly source: MessageSource
}

/**
 * A question about a tool call (§26), one entry when it is asked (`event: "asked"`, with the
 * asker's `reason`) and one when it is decided (`event: "decided"`, with `outcome`, `by` and the
 * decision's `reason` as logged). `toolName` and `callId` are the question's; a decision names
 * them from its question (absent when the log holds no question for it).
 *
 * @since 0.1.0
 * @category models
 */
export interface ApprovalEntry {
  readonly kind: "approval"
  readonly event: "asked" | "decided"
  readonly turn: number
  readonly step: number
  readonly id: string
  readonly toolName?: string | undefined
  readonly callId?: string | undefined
  readonly reason?: string | undefined
  readonly outcome?: string | undefined
  readonly by?: unknown
}

/**
 * A child session's lineage, from its header (§14): the first entry of `fromEvents` when given
 * the header of a session that has a `parentSession`, an `origin` or a `seedLength` (a
 * sub-agent's session, DSH's shape: `parentSession` the parent's session id, `origin:
 * "subagent"`, `delegationDepth` the number of delegations above it, `seedLength` the seqs
 * inherited from the parent, which the entries that follow include).
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionEntry {
  readonly kind: "session"
  readonly turn: number
  readonly step: number
  readonly id: string
  readonly parentSession?: string | undefined
  readonly origin?: string | undefined
  readonly delegationDepth?: number | undefined
  readonly seedLength?: number | undefined
}

/**
 * A sub-agent event (§14): a child's `subagent/descriptor` (`event: "descriptor"`: how it was made,
 * `mode` `one-shot` or `continuable`, the `provider` that made it, its `label`, and for a
 * continuable child the model it runs), or a parent's `subagent/start` / `subagent/end` (`id` the
 * child's session id, `runId` and `callId` as logged, `stopReason` and the `text` of the child's
 * final answer at the end). Fields the event does not hold are absent.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubagentEntry {
  readonly kind: "subagent"
  readonly event: "descriptor" | "start" | "end"
  readonly turn: number
  readonly step: number
  readonly id?: string | undefined
  readonly provider?: string | undefined
  readonly mode?: string | undefined
  readonly label?: string | undefined
  readonly agentProvider?: string | undefined
  readonly agentModel?: string | undefined
  readonly runId?: string | undefined
  readonly callId?: string | undefined
  readonly stopReason?: string | undefined
  readonly text?: string | undefined
}

/**
 * One transcript entry: exactly one `transcript --json` line (§14).
 *
 * @since 0.1.0
 * @category models
 */
export type Entry =
  | MessageEntry
  | AssistantEntry
  | ToolCallEntry
  | ToolResultEntry
  | TurnEndEntry
  | CompactionMarkerEntry
  | CheckpointEntry
  | ApprovalEntry
  | SessionEntry
  | SubagentEntry

const toolResultOf = (
  message: UserMessage
): { readonly callId: string | undefined; readonly block: ContentBlock | undefined } => {
  let block: ContentBlock | undefined
  for (const b of message.content) {
    if (b.type === "tool-result") {
      block = b
      break
    }
  }
  const fromSource = (message.source as { readonly callId?: unknown }).callId
  const callId = typeof fromSource === "string"
    ? fromSource
    : block !== undefined && block.type === "tool-result"
    ? block.toolCallId
    : undefined
  return { callId, block }
}

/** A compaction bracket the projection has seen start and not yet end. */
interface OpenBracket {
  readonly compactionId: string
  readonly turn: number
  readonly step: number
  readonly reason: string | undefined
  readonly tokensBefore: number | undefined
  summary:
    | { readonly text: string; readonly start: number; readonly end: number; readonly tokens: number | undefined }
    | undefined
  pruned: number
  replaced: number
}

const num = (value: unknown): number | undefined => typeof value === "number" ? value : undefined
const str = (value: unknown): string | undefined => typeof value === "string" ? value : undefined

/**
 * The replaced range of a checkpoint's envelope (`surfaceOp: {op:"replace", start, end}`, also
 * spelled `startSeq`/`endSeq` as later DSH versions write it), if it is one.
 */
const replaceOf = (event: SessionEvent): { readonly start: number; readonly end: number } | undefined => {
  const op = (event as { readonly surfaceOp?: unknown }).surfaceOp as
    | {
      readonly op?: unknown
      readonly start?: unknown
      readonly end?: unknown
      readonly startSeq?: unknown
      readonly endSeq?: unknown
    }
    | undefined
  if (typeof op !== "object" || op === null || op.op !== "replace") return undefined
  const start = num(op.start) ?? num(op.startSeq)
  const end = num(op.end) ?? num(op.endSeq)
  return start === undefined || end === undefined ? undefined : { start, end }
}

/**
 * The marker of a bracket, at its `compaction/end` (`end`) or without one. An end without
 * `outcome` is DSH's (our loop and crash repair always write one): DSH logs `compaction/end
 * {compactionId, turn}` when the compaction succeeded (its checkpoint applies) and adds
 * `error: string` when it failed or was aborted (no checkpoint was logged), so it reads as
 * `compacted`, or `failed` with the error `{code: "ERROR", message}`.
 */
const markerOf = (
  b: OpenBracket,
  end: { readonly outcome?: unknown; readonly tokens?: unknown; readonly error?: unknown } | undefined
): CompactionMarkerEntry => {
  const e = end?.error as { readonly code?: unknown; readonly message?: unknown } | string | undefined
  const error = typeof e === "string"
    ? { code: "ERROR", message: e }
    : typeof e === "object" && e !== null
    ? { code: str(e.code) ?? "ERROR", message: str(e.message) ?? "" }
    : undefined
  const outcome = end === undefined
    ? undefined
    : end.outcome === undefined
    ? (end.error === undefined ? "compacted" : "failed")
    : str(end.outcome)
  const tokensAfter = num(end?.tokens)
  return {
    kind: "compaction",
    turn: b.turn,
    step: b.step,
    compactionId: b.compactionId,
    ...(b.reason !== undefined ? { reason: b.reason } : {}),
    ...(outcome !== undefined ? { outcome } : {}),
    ...(b.tokensBefore !== undefined ? { tokensBefore: b.tokensBefore } : {}),
    ...(tokensAfter !== undefined ? { tokensAfter } : {}),
    ...(b.summary !== undefined ? { shadowedRange: { start: b.summary.start, end: b.summary.end } } : {}),
    ...(b.summary?.tokens !== undefined ? { shadowedTokenCount: b.summary.tokens } : {}),
    ...(b.summary !== undefined ? { summary: b.summary.text } : {}),
    ...(b.pruned > 0 ? { pruned: b.pruned } : {}),
    ...(b.replaced > 0 ? { replaced: b.replaced } : {}),
    ...(error !== undefined ? { error } : {})
  }
}

/**
 * The transcript projection fed one event at a time (a live view: the chat, `run`):
 * `push(event)` returns the entries that event completes, in log order; `end()` the markers of
 * the compaction brackets still open (a log that stops inside one, as a crash leaves it), which a
 * live view leaves out while the bracket may still end. `fromEvents(events)` is every `push`,
 * then `end()`.
 *
 * @since 0.1.0
 * @category projections
 */
export interface Projector {
  readonly push: (event: SessionEvent) => ReadonlyArray<Entry>
  readonly end: () => ReadonlyArray<Entry>
}

const NONE: ReadonlyArray<Entry> = []

const stringOr = (value: unknown): string | undefined => typeof value === "string" ? value : undefined

/** The string fields `keys` of `data` that are strings, in that order. */
const strings = (data: Record<string, unknown>, keys: ReadonlyArray<string>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const key of keys) if (typeof data[key] === "string") out[key] = data[key]
  return out
}

/** The entry of a `subagent/*` event, read leniently (fields of the wrong type are left out). */
const subagentEntry = (
  event: "descriptor" | "start" | "end",
  data: Record<string, unknown>,
  turn: number,
  step: number
): SubagentEntry => {
  if (event === "descriptor") {
    return {
      kind: "subagent",
      event,
      turn,
      step,
      ...strings(data, ["mode", "provider", "label", "agentProvider", "agentModel"])
    }
  }
  const last = data.lastAssistantMessage
  const text = event === "end" && Array.isArray(last) ? textOf(last as ReadonlyArray<ContentBlock>) : undefined
  return {
    kind: "subagent",
    event,
    turn,
    step,
    ...strings(data, ["id", "provider", "runId", "callId", "stopReason"]),
    ...(text !== undefined ? { text } : {})
  }
}

/**
 * A new transcript projection (see `Projector`).
 *
 * @since 0.1.0
 * @category projections
 */
export const projector = (): Projector => {
  let turn = 0
  let step = 0
  // Questions by id (§26): a decision names its question's tool and call.
  const questions = new Map<string, { readonly toolName?: string | undefined; readonly callId?: string | undefined }>()
  // Brackets by id: a log holds at most one open, but a hand-made or foreign one may not.
  const open = new Map<string, OpenBracket>()
  /** Closes the brackets a log left open before an event that cannot be inside one. */
  const flush = (): Array<Entry> => {
    const out: Array<Entry> = []
    for (const b of open.values()) out.push(markerOf(b, undefined))
    open.clear()
    return out
  }
  const one = (entry: Entry): ReadonlyArray<Entry> => {
    if (open.size === 0) return [entry]
    const out = flush()
    out.push(entry)
    return out
  }
  const push = (event: SessionEvent): ReadonlyArray<Entry> => {
    switch (event.type) {
      case "turn/start": {
        const out = open.size === 0 ? NONE : flush()
        turn = (event.data as { readonly turn: number }).turn
        step = 0
        return out
      }
      case "step/start": {
        const out = open.size === 0 ? NONE : flush()
        const data = event.data as { readonly turn: number; readonly step: number }
        turn = data.turn
        step = data.step
        return out
      }
      case "compaction/start": {
        const data = event.data as {
          readonly compactionId?: unknown
          readonly turn?: unknown
          readonly reason?: unknown
          readonly tokens?: unknown
        }
        const compactionId = str(data?.compactionId) ?? ""
        const inTurn = data?.turn === null ? 0 : num(data?.turn) ?? turn
        open.set(compactionId, {
          compactionId,
          turn: inTurn,
          step: inTurn === 0 ? 0 : step,
          reason: str(data?.reason),
          tokensBefore: num(data?.tokens),
          summary: undefined,
          pruned: 0,
          replaced: 0
        })
        return NONE
      }
      case "compaction/summary": {
        const data = event.data as {
          readonly compactionId?: unknown
          readonly summary?: unknown
          readonly shadowedRange?: { readonly start?: unknown; readonly end?: unknown }
          readonly shadowedTokenCount?: unknown
        }
        const b = open.get(str(data?.compactionId) ?? "")
        // Ours is a string; DSH's is the summarizer's content blocks (`ContentBlock[]`).
        const text = Array.isArray(data?.summary) ? textOf(data.summary as ReadonlyArray<ContentBlock>) : str(data?.summary)
        const start = num(data?.shadowedRange?.start)
        const end = num(data?.shadowedRange?.end)
        if (b !== undefined && text !== undefined && start !== undefined && end !== undefined) {
          b.summary = { text, start, end, tokens: num(data.shadowedTokenCount) }
        }
        return NONE
      }
      case "compaction/end": {
        const data = event.data as {
          readonly compactionId?: unknown
          readonly turn?: unknown
          readonly outcome?: unknown
          readonly tokens?: unknown
          readonly error?: unknown
        }
        const compactionId = str(data?.compactionId) ?? ""
        const b = open.get(compactionId)
        if (b !== undefined) {
          open.delete(compactionId)
          return [markerOf(b, data)]
        }
        // An end without its start (a cut log): what the end says.
        const inTurn = data?.turn === null ? 0 : num(data?.turn) ?? turn
        return [markerOf({
          compactionId,
          turn: inTurn,
          step: inTurn === 0 ? 0 : step,
          reason: undefined,
          tokensBefore: undefined,
          summary: undefined,
          pruned: 0,
          replaced: 0
        }, data)]
      }
      case "user/message": {
        const message = event.data as UserMessage
        const source = message.source as
          | { readonly kind?: unknown; readonly plugin?: unknown; readonly compactionId?: unknown }
          | undefined
        const replaces = source?.kind === "plugin" && source.plugin === "compact" ? replaceOf(event) : undefined
        if (replaces !== undefined) {
          const compactionId = str(source?.compactionId)
          const b = compactionId === undefined ? undefined : open.get(compactionId)
          if (b !== undefined) {
            // Part of its bracket: the summary's checkpoint, or one message replaced (pruning).
            const isSummary = b.summary !== undefined && b.summary.start === replaces.start && b.summary.end === replaces.end
            if (!isSummary) {
              if ((message.content ?? []).some((c) => c.type === "tool-result")) b.pruned++
              else b.replaced++
            }
            return NONE
          }
          return one({
            kind: "checkpoint",
            turn,
            step,
            id: message.id,
            ...(compactionId !== undefined ? { compactionId } : {}),
            replaces,
            text: textOf(message.content ?? []),
            source: message.source
          })
        }
        return one({
          kind: message.source?.kind === "user" ? "user" : "context",
          turn,
          step,
          id: message.id,
          text: textOf(message.content ?? []),
          source: message.source
        })
      }
      case "assistant/message": {
        const data = event.data as AssistantMessageData
        const text = textOf(data.message?.content ?? [])
        if (data.interrupted === true) {
          return one({ kind: "assistant", turn: data.turn, step: data.step, text, interrupted: true })
        }
        return text !== "" ? one({ kind: "assistant", turn: data.turn, step: data.step, text }) : NONE
      }
      case "tool/call": {
        const data = event.data as ToolCallData
        return one({
          kind: "tool-call",
          turn: data.turn,
          step: data.step,
          callId: data.callId,
          name: data.name,
          arguments: typeof data.arguments === "string" ? data.arguments : JSON.stringify(data.arguments)
        })
      }
      case "tool/result": {
        const data = event.data as ToolResultData
        const { block, callId } = toolResultOf(data.message)
        const isError = block !== undefined && block.type === "tool-result" && block.isError !== undefined
          ? block.isError
          : data.error !== undefined
        return one({
          kind: "tool-result",
          turn: data.turn,
          step: data.step,
          callId: callId ?? "",
          text: block !== undefined && block.type === "tool-result" ? textOf(block.content) : textOf(data.message.content),
          isError
        })
      }
      case "turn/end": {
        const data = event.data as { readonly turn: number; readonly reason: TurnEndReason }
        return one({ kind: "turn-end", turn: data.turn, reason: data.reason })
      }
      case "approval/asked": {
        const data = event.data as Record<string, unknown> | null
        if (data === null || typeof data !== "object" || typeof data.id !== "string") return NONE
        const question = { toolName: stringOr(data.toolName), callId: stringOr(data.callId) }
        questions.set(data.id, question)
        return one({ kind: "approval", event: "asked", turn, step, id: data.id, ...question, reason: stringOr(data.reason) })
      }
      case "approval/decided": {
        const data = event.data as Record<string, unknown> | null
        if (data === null || typeof data !== "object" || typeof data.id !== "string") return NONE
        const question = questions.get(data.id)
        return one({
          kind: "approval",
          event: "decided",
          turn,
          step,
          id: data.id,
          toolName: question?.toolName,
          callId: question?.callId,
          outcome: stringOr(data.outcome),
          by: data.by,
          reason: stringOr(data.reason)
        })
      }
      case "subagent/descriptor":
      case "subagent/start":
      case "subagent/end": {
        const data = event.data as Record<string, unknown> | null
        if (data === null || typeof data !== "object") return NONE
        return one(subagentEntry(event.type.slice(9) as "descriptor" | "start" | "end", data, turn, step))
      }
      default:
        return NONE
    }
  }
  return { push, end: flush }
}

/**
 * Options of `fromEvents`: the log's `header`, whose lineage (a child session's) is the first
 * entry.
 *
 * @since 0.1.0
 * @category models
 */
export interface FromEventsOptions {
  readonly header?: SessionHeader | undefined
}

/** The `session` entry of a child session's header, or undefined for a top-level session. */
const sessionEntry = (header: SessionHeader | undefined): SessionEntry | undefined => {
  const lineage = lineageOf(header)
  return header === undefined || lineage === undefined
    ? undefined
    : { kind: "session", turn: 0, step: 0, id: header.id, ...lineage }
}

/**
 * The transcript entries of a log, in log order (§12, §14): a compaction bracket the
 * log leaves open is shown at the end (its marker without `outcome`). With the log's `header`,
 * a child session's lineage comes first (`SessionEntry`). One pass.
 *
 * @since 0.1.0
 * @category projections
 */
export const fromEvents = (events: ReadonlyArray<SessionEvent>, options?: FromEventsOptions): Array<Entry> => {
  const p = projector()
  const first = sessionEntry(options?.header)
  const out: Array<Entry> = first === undefined ? [] : [first]
  for (const event of events) {
    const entries = p.push(event)
    for (let i = 0; i < entries.length; i++) out.push(entries[i]!)
  }
  for (const entry of p.end()) out.push(entry)
  return out
}

/**
 * The child sessions the entries name, in order, each once: the `id` of each sub-agent start
 * entry (a parent's `subagent/start`, §27). A DSH parent log names none (DSH does not log
 * `subagent/start`): its children name it instead, in their headers.
 *
 * @since 0.1.0
 * @category projections
 */
export const childSessions = (entries: ReadonlyArray<Entry>): Array<string> => {
  const ids: Array<string> = []
  for (const entry of entries) {
    if (entry.kind === "subagent" && entry.event === "start" && entry.id !== undefined && !ids.includes(entry.id)) {
      ids.push(entry.id)
    }
  }
  return ids
}

/**
 * The entries as JSON lines, one object a line, each ending with "\n" (§14
 * `transcript --json`). Safe to print: the control, format and separator characters that
 * `JSON.stringify` leaves raw (C1, bidi, zero-width, U+2028) are written as `\uNNNN` escapes, so
 * each line still parses to its entry exactly.
 *
 * @since 0.1.0
 * @category rendering
 */
export const toJsonLines = (entries: ReadonlyArray<Entry>): string => {
  let out = ""
  for (const entry of entries) out += escapeJson(JSON.stringify(entry)) + "\n"
  return out
}
