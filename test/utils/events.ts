/**
 * A tiny builder for hand-written session logs: event drafts for every core event, and `events`
 * to assign `seq` (the index) and `time` (seq × 10). Also the DSH v0 fixtures
 * (`../shared/fixtures/dsh`, never copied), read with the real reader `SessionStore.readFile`.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { Effect } from "effect"
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { MessageId, MessageSource, UserMessage } from "../../src/Message.js"
import type { AbortCause, EventDraft, InboxTarget, SessionEvent, TurnEndReason } from "../../src/SessionEvent.js"
import type { LogContents } from "../../src/SessionLog.js"
import { readFile } from "../../src/SessionStore.js"

/** Assigns `seq` = index and `time` = 10 × index. */
export const events = (...drafts: ReadonlyArray<EventDraft | ReadonlyArray<EventDraft>>): Array<SessionEvent> =>
  drafts.flat().map((draft, seq) => ({ ...draft, seq, time: seq * 10 }) as SessionEvent)

/** A user-role message (default source `{kind:"user"}`). */
export const msg = (id: string, text: string, source: MessageSource = { kind: "user" }): UserMessage => ({
  id: id as MessageId,
  role: "user",
  content: [{ type: "text", text }],
  source
})

/** A context message from a plugin. */
export const ctx = (id: string, text: string, plugin = "netwatch"): UserMessage => msg(id, text, { kind: "plugin", plugin })

export const splice = (
  target: InboxTarget,
  start: number,
  removedCount: number,
  inserted: ReadonlyArray<UserMessage>,
  extra: { readonly outcome?: "canceled"; readonly cause?: AbortCause; readonly wake?: true } = {}
): EventDraft => ({
  type: "agent/inbox/spliced",
  data: { target, start, ...(removedCount > 0 ? { removedCount } : {}), inserted, ...extra }
})

/** `followup`: insert at `at` (default 0) of next-turn. */
export const followup = (m: UserMessage, at = 0): EventDraft => splice("next-turn", at, 0, [m])
/** `steer`: waking insert into next-step. */
export const steer = (m: UserMessage, at = 0): EventDraft => splice("next-step", at, 0, [m], { wake: true })
/** `inject`: non-waking insert into next-step. */
export const inject = (m: UserMessage, at = 0): EventDraft => splice("next-step", at, 0, [m])
/** A claim: pure deletion without outcome. */
export const claim = (target: InboxTarget, count: number, start = 0): EventDraft => splice(target, start, count, [])
/** A canceled removal (plugin removal without cause; cancel/dispose with one). */
export const cancel = (target: InboxTarget, start: number, count: number, cause?: AbortCause): EventDraft =>
  splice(target, start, count, [], cause === undefined ? { outcome: "canceled" } : { outcome: "canceled", cause })

export const turnStart = (turn: number): EventDraft => ({ type: "turn/start", data: { turn } })
export const turnEnd = (turn: number, reason: TurnEndReason | TurnEndReason["kind"] = "completed"): EventDraft => ({
  type: "turn/end",
  data: {
    turn,
    reason: typeof reason !== "string"
      ? reason
      : reason === "error"
      ? { kind: "error", error: { message: "boom", code: "MODEL_ERROR" } }
      : reason === "aborted"
      ? { kind: "aborted", reason: { kind: "user" } }
      : ({ kind: reason } as TurnEndReason)
  }
})
export const stepStart = (turn: number, step: number): EventDraft => ({ type: "step/start", data: { turn, step } })
export const stepEnd = (turn: number, step: number): EventDraft => ({ type: "step/end", data: { turn, step } })
/** A `user/message` (an entered message). */
export const entered = (m: UserMessage): EventDraft => ({ type: "user/message", data: m })

export interface ToolCallSpec {
  readonly id: string
  readonly name: string
  readonly arguments?: string
}

/** An `assistant/message` with optional text and tool calls. */
export const assistant = (
  turn: number,
  step: number,
  text: string | undefined,
  options: { readonly toolCalls?: ReadonlyArray<ToolCallSpec>; readonly interrupted?: true; readonly id?: string } = {}
): EventDraft => ({
  type: "assistant/message",
  data: {
    turn,
    step,
    message: {
      id: options.id ?? `a${turn}.${step}`,
      role: "assistant",
      content: [
        ...(text === undefined ? [] : [{ type: "text" as const, text }]),
        ...(options.toolCalls ?? []).map((c) => ({
          type: "tool-call" as const,
          id: c.id,
          name: c.name,
          arguments: c.arguments ?? "{}"
        }))
      ],
      source: { kind: "model", provider: "test", model: "test" }
    },
    finish: options.interrupted ? "stop" : options.toolCalls?.length ? "tool-calls" : "stop",
    ...(options.interrupted ? { interrupted: true } : {})
  }
} as EventDraft)

export const toolCall = (turn: number, step: number, callId: string, name: string, args = "{}"): EventDraft => ({
  type: "tool/call",
  data: { turn, step, callId, name, arguments: args }
})

/** The tool result message of `callId` (id `r.<callId>`). */
export const toolResultMessage = (callId: string, text: string, isError?: boolean): UserMessage =>
  ({
    id: `r.${callId}` as MessageId,
    role: "user",
    content: [{
      type: "tool-result",
      toolCallId: callId,
      content: [{ type: "text", text }],
      ...(isError === undefined ? {} : { isError })
    }],
    source: { kind: "tool", callId }
  }) as UserMessage

export const toolResult = (
  turn: number,
  step: number,
  callId: string,
  text: string,
  error?: { readonly name: string; readonly code: string }
): EventDraft => ({
  type: "tool/result",
  data: {
    turn,
    step,
    message: toolResultMessage(callId, text, error !== undefined),
    ...(error === undefined ? {} : { error })
  }
})

export const foreign = (type: string, data: unknown = {}): EventDraft => ({ type, data })

// ---------------------------------------------------------------------------------------------
// DSH v0 fixtures (../shared/fixtures/dsh relative to the repo root), read with the real reader
// ---------------------------------------------------------------------------------------------

/** Absolute path of the DSH fixture directory. */
export const dshDir: string = fileURLToPath(new URL("../../../shared/fixtures/dsh/", import.meta.url))

/** Every `*.jsonl` fixture file name, sorted. */
export const dshFixtures: ReadonlyArray<string> = readdirSync(dshDir).filter((f) => f.endsWith(".jsonl")).sort()

/** Reads one DSH fixture with `SessionStore.readFile`. */
export const readDsh = (name: string): Promise<LogContents> =>
  Effect.runPromise(readFile(join(dshDir, name)).pipe(Effect.provide(NodeFileSystem.layer)))

// ---------------------------------------------------------------------------------------------
// Compaction brackets (§17)
// ---------------------------------------------------------------------------------------------

/** `compaction/start` of `id` (`turn: null` for a manual bracket between turns). */
export const compactionStart = (
  id: string,
  turn: number | null,
  reason: "pressure" | "overflow" | "manual" = turn === null ? "manual" : "pressure",
  tokens = 1000
): EventDraft => ({ type: "compaction/start", data: { compactionId: id, turn, reason, tokens } })

/** `compaction/summary` of `id` over the surface seqs `shadowedSeqs` (first to last). */
export const compactionSummary = (id: string, shadowedSeqs: ReadonlyArray<number>): EventDraft => ({
  type: "compaction/summary",
  data: {
    compactionId: id,
    summary: `summary of ${shadowedSeqs.join(",")}`,
    shadowedRange: { start: shadowedSeqs[0], end: shadowedSeqs[shadowedSeqs.length - 1] },
    shadowedSeqs,
    shadowedTokenCount: 100 * shadowedSeqs.length,
    provider: "test",
    model: "test",
    instructions: "Summarize."
  }
})

/**
 * A checkpoint `user/message` `messageId` replacing the surface seqs `start`…`end`; its source
 * names compaction `id` (or is `source` when given).
 */
export const checkpoint = (
  id: string,
  messageId: string,
  start: number,
  end: number,
  source: MessageSource = { kind: "plugin", plugin: "compact", compactionId: id }
): EventDraft =>
  ({
    type: "user/message",
    data: msg(messageId, `checkpoint of ${id}`, source),
    surfaceOp: { op: "replace", start, end }
  }) as EventDraft

/** `compaction/end` of `id`. */
export const compactionEnd = (
  id: string,
  turn: number | null,
  outcome: "compacted" | "skipped" | "aborted" | "failed" | "interrupted" = "compacted"
): EventDraft => ({ type: "compaction/end", data: { compactionId: id, turn, outcome } })
