/**
 * The durable events of a session log (§3): the envelope `{type, seq, time, data}`,
 * the header line, and the `data` shapes of every core event of §3.2. Events are plain,
 * deep-frozen JSON objects. Unknown (plugin or foreign DSH) event types are kept as opaque
 * events and written back unchanged.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { type AssistantMessage, AssistantMessageSchema, type UserMessage, UserMessageSchema } from "./Message.js"

/**
 * A session id (file name stem of a JSONL log).
 *
 * @since 0.1.0
 * @category models
 */
export type SessionId = string

/**
 * Header line of a JSONL log: `{"type":"session","format":"effect-agent-loop","version":1,
 * "id","createdAt","cwd"?}`; DSH v0 logs have `version: 0`, no `format`, and may carry
 * `seedLength` (the inherited prefix, §3.1) and other fields (kept).
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionHeader {
  readonly type: "session"
  readonly format?: "effect-agent-loop" | undefined
  readonly version: number
  readonly id: string
  readonly createdAt: number
  readonly cwd?: string | undefined
  readonly seedLength?: number | undefined
  readonly [key: string]: unknown
}

/**
 * Schema of a header line (extra fields preserved).
 *
 * @since 0.1.0
 * @category models
 */
export const SessionHeaderSchema = Schema.Struct(
  {
    type: Schema.Literal("session"),
    format: Schema.optional(Schema.Literal("effect-agent-loop")),
    version: Schema.Number,
    id: Schema.String,
    createdAt: Schema.Number,
    cwd: Schema.optional(Schema.String),
    seedLength: Schema.optional(Schema.Number)
  },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)

/**
 * Inbox queue targeted by a splice (§4).
 *
 * @since 0.1.0
 * @category models
 */
export type InboxTarget = "next-turn" | "next-step"

/**
 * Why a cancel or dispose cleared the inbox or aborted a turn: `{kind:"user"|"parent"|
 * "disposed"|…, …}` (§6.4, §9). Open: extra fields are kept.
 *
 * @since 0.1.0
 * @category models
 */
export interface AbortCause {
  readonly kind: string
  readonly [key: string]: unknown
}

/**
 * `agent/inbox/spliced` data (§3.2, §4).
 *
 * @since 0.1.0
 * @category models
 */
export interface SplicedData {
  readonly target: InboxTarget
  readonly start: number
  readonly removedCount?: number | undefined
  readonly inserted: ReadonlyArray<UserMessage>
  readonly outcome?: "canceled" | undefined
  readonly cause?: AbortCause | undefined
  readonly wake?: true | undefined
}

/**
 * A turn's end reason (§6.4).
 *
 * @since 0.1.0
 * @category models
 */
export type TurnEndReason =
  | { readonly kind: "completed" }
  | { readonly kind: "max-tokens" }
  | { readonly kind: "blocked"; readonly reason?: string | undefined }
  | {
    readonly kind: "error"
    readonly error: { readonly message: string; readonly code: string; readonly status?: number | undefined }
  }
  | { readonly kind: "aborted"; readonly reason: AbortCause }
  | { readonly kind: "interrupted" }

/**
 * Token usage of one model response, normalized from what the provider reported (integers; §18).
 * Cached tokens are counted once: `inputTokens` is the whole prompt, and `cacheReadTokens` and
 * `cacheWriteTokens` are parts of it; `reasoningTokens` is a part of `outputTokens`. The adapters
 * give all five whenever the provider reported usage (0 for a kind it does not report); a log
 * written before the adapters reported usage, or by a scripted model, may lack some, which the
 * `Usage` projections read as 0.
 *
 * @since 0.1.0
 * @category models
 */
export interface Usage {
  /** The whole prompt, cached and cache-written tokens included. */
  readonly inputTokens?: number | undefined
  /** The whole output, reasoning tokens included. */
  readonly outputTokens?: number | undefined
  /** Prompt tokens read from the provider's prompt cache (part of `inputTokens`). */
  readonly cacheReadTokens?: number | undefined
  /** Prompt tokens written to the provider's prompt cache (part of `inputTokens`). */
  readonly cacheWriteTokens?: number | undefined
  /** Output tokens spent on reasoning (part of `outputTokens`). */
  readonly reasoningTokens?: number | undefined
  /** The provider's own total, when it sends one. */
  readonly totalTokens?: number | undefined
}

/**
 * Finish reason of a model response (§11).
 *
 * @since 0.1.0
 * @category models
 */
export type FinishReason = "stop" | "tool-calls" | "length" | "content-filter"

/**
 * `assistant/message` data (§3.2).
 *
 * @since 0.1.0
 * @category models
 */
export interface AssistantMessageData {
  readonly turn: number
  readonly step: number
  readonly message: AssistantMessage
  readonly usage?: Usage | undefined
  /** The provider's usage object as it was sent (JSON), beside the normalized `usage` (§18). */
  readonly rawUsage?: unknown
  /** The provider's id of the response and the model that answered, when it says (§18). */
  readonly response?: { readonly id?: string | undefined; readonly model?: string | undefined } | undefined
  readonly finish?: FinishReason | undefined
  readonly interrupted?: true | undefined
}

/**
 * `tool/call` data; `arguments` is the provider's raw JSON string (§3.2).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCallData {
  readonly turn: number
  readonly step: number
  readonly callId: string
  readonly name: string
  readonly arguments: string
}

/**
 * Codes of error tool results (§6.4, §8, §9, §10).
 *
 * @since 0.1.0
 * @category models
 */
export type ToolErrorCode =
  | "UNKNOWN_TOOL"
  | "INVALID_ARGUMENTS"
  | "DENIED"
  | "TOOL_FAILED"
  | "TRUNCATED"
  | "ABORTED"
  | "TOOL_ABORTED_BEFORE_DISPATCH"
  | "TOOL_OUTCOME_UNKNOWN"
  | "TOOL_NOT_STARTED"

/**
 * `tool/result` data (§3.2).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolResultData {
  readonly turn: number
  readonly step: number
  readonly message: UserMessage
  readonly error?: { readonly name: string; readonly code: ToolErrorCode | string } | undefined
}

/**
 * `request/header` data: written when the request configuration first appears or changes.
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestHeaderData {
  readonly turn: number
  readonly step: number
  readonly provider: string
  readonly model: string
  readonly instructions?: string | undefined
  readonly tools: ReadonlyArray<{ readonly name: string; readonly description: string; readonly parameters: unknown }>
  readonly settings: { readonly [key: string]: unknown }
}

/**
 * The `data` of each core event type (§3.2).
 *
 * @since 0.1.0
 * @category models
 */
export interface CoreEventData {
  readonly "agent/inbox/spliced": SplicedData
  readonly "turn/start": { readonly turn: number }
  readonly "turn/end": { readonly turn: number; readonly reason: TurnEndReason }
  readonly "step/start": { readonly turn: number; readonly step: number }
  readonly "step/end": { readonly turn: number; readonly step: number }
  readonly "user/message": UserMessage
  readonly "assistant/message": AssistantMessageData
  readonly "tool/call": ToolCallData
  readonly "tool/result": ToolResultData
  readonly "request/header": RequestHeaderData
  readonly "session/end-seed": { readonly [key: string]: never }
}

/**
 * @since 0.1.0
 * @category models
 */
export type CoreEventType = keyof CoreEventData

/**
 * The core event types, in the order of §3.2.
 *
 * @since 0.1.0
 * @category models
 */
export const coreEventTypes: ReadonlySet<string> = new Set<CoreEventType>([
  "agent/inbox/spliced",
  "turn/start",
  "turn/end",
  "step/start",
  "step/end",
  "user/message",
  "assistant/message",
  "tool/call",
  "tool/result",
  "request/header",
  "session/end-seed"
])

/**
 * A core event: `{type, seq, time, data}`. DSH v0 envelopes may also carry `surfaceOp`,
 * `sourceEventSeqs` and `ignorable` (kept as read).
 *
 * @since 0.1.0
 * @category models
 */
export type CoreEvent = {
  readonly [K in CoreEventType]: {
    readonly type: K
    readonly seq: number
    readonly time: number
    readonly data: CoreEventData[K]
    readonly surfaceOp?: unknown
    readonly sourceEventSeqs?: unknown
    readonly ignorable?: unknown
  }
}[CoreEventType]

/**
 * An event of a type the core does not own (a plugin's `<plugin>/<name>` event, a DSH
 * `assistant/chunk`, …): kept opaque and written back unchanged (§3.2).
 *
 * @since 0.1.0
 * @category models
 */
export interface ForeignEvent {
  readonly type: string
  readonly seq: number
  readonly time: number
  readonly data: unknown
  readonly [key: string]: unknown
}

/**
 * Any event of a session log.
 *
 * @since 0.1.0
 * @category models
 */
export type SessionEvent = CoreEvent | ForeignEvent

/**
 * An event before the store accepted it: the store assigns `seq` and `time` (§3.1).
 *
 * @since 0.1.0
 * @category models
 */
export type EventDraft =
  | {
    readonly [K in CoreEventType]: {
      readonly type: K
      readonly data: CoreEventData[K]
      readonly surfaceOp?: SurfaceOp | undefined
    }
  }[CoreEventType]
  | { readonly type: string; readonly data: unknown; readonly surfaceOp?: SurfaceOp | undefined }

/**
 * The envelope's surface operation (§3.1): our logs write it only on compaction
 * checkpoints (§17), `{op:"replace", start, end}` with the seqs of the first and last
 * surface events replaced; `History` honours it (and the DSH v0 forms).
 *
 * @since 0.1.0
 * @category models
 */
export interface SurfaceOp {
  readonly op: "replace"
  readonly start: number
  readonly end: number
}

/**
 * Narrows an event to a core event type.
 *
 * @since 0.1.0
 */
export const is = <K extends CoreEventType>(
  event: SessionEvent,
  type: K
): event is Extract<CoreEvent, { readonly type: K }> => event.type === type

// ---------------------------------------------------------------------------------------------
// Schemas for decoding core `data` at the I/O edge (a log file). The runtime never re-validates
// events it built itself (STYLE.md "Data").
// ---------------------------------------------------------------------------------------------

const Int = Schema.Number.pipe(Schema.int(), Schema.nonNegative())
const Open = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/**
 * Schemas of the `data` of every core event type (§3.2), for decoding logs.
 *
 * @since 0.1.0
 * @category models
 */
export const coreDataSchemas = {
  "agent/inbox/spliced": Schema.Struct(
    {
      target: Schema.Literal("next-turn", "next-step"),
      start: Int,
      removedCount: Schema.optional(Int),
      inserted: Schema.Array(UserMessageSchema),
      outcome: Schema.optional(Schema.Literal("canceled")),
      cause: Schema.optional(Schema.Struct({ kind: Schema.String }, Open)),
      wake: Schema.optional(Schema.Literal(true))
    },
    Open
  ),
  "turn/start": Schema.Struct({ turn: Int }, Open),
  "turn/end": Schema.Struct({ turn: Int, reason: Schema.Struct({ kind: Schema.String }, Open) }, Open),
  "step/start": Schema.Struct({ turn: Int, step: Int }, Open),
  "step/end": Schema.Struct({ turn: Int, step: Int }, Open),
  "user/message": UserMessageSchema,
  "assistant/message": Schema.Struct(
    {
      turn: Int,
      step: Int,
      message: AssistantMessageSchema,
      usage: Schema.optional(Schema.Unknown),
      finish: Schema.optional(Schema.Unknown),
      interrupted: Schema.optional(Schema.Boolean)
    },
    Open
  ),
  "tool/call": Schema.Struct(
    { turn: Int, step: Int, callId: Schema.String, name: Schema.String, arguments: Schema.Unknown },
    Open
  ),
  "tool/result": Schema.Struct(
    {
      turn: Int,
      step: Int,
      message: UserMessageSchema,
      error: Schema.optional(Schema.Struct({ name: Schema.optional(Schema.String), code: Schema.String }, Open))
    },
    Open
  ),
  "request/header": Open,
  "session/end-seed": Open
} as const satisfies { readonly [K in CoreEventType]: Schema.Schema<any, any, never> }
