/**
 * The durable events of a session log (§3): the envelope `{type, seq, time, data}`,
 * the header line, and the `data` shapes of every core event of §3.2. Events are plain,
 * deep-frozen JSON objects. Unknown (plugin or foreign DSH) event types are kept as opaque
 * events and written back unchanged.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { AssistantMessageSchema, UserMessageSchema } from "./Message.js"

/**
 * A session id (file name stem of a JSONL log).
 *
 * @since 0.1.0
 * @category models
 */
export type SessionId = string

const Int = Schema.Number.pipe(Schema.int(), Schema.nonNegative())
const Open = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/**
 * Header line of a JSONL log: `{"type":"session","format":"effect-agent-loop","version":1,
 * "id","createdAt","cwd"?}`; DSH v0 logs have `version: 0`, no `format`, and may carry
 * `seedLength` (the inherited prefix, §3.1) and other fields (kept). A child session (a
 * sub-agent's, DSH's shape) names its lineage: `parentSession` (the parent's session id),
 * `origin: "subagent"`, `delegationDepth` (0 or absent for a top-level session, the parent's
 * depth + 1 for a child) and, when it was seeded with the parent's history, `seedLength`; DSH
 * also writes `agentPreset` (the preset the session's agent was composed from).
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
    seedLength: Schema.optional(Schema.Number),
    parentSession: Schema.optional(Schema.String),
    origin: Schema.optional(Schema.Literal("subagent")),
    delegationDepth: Schema.optional(Int),
    agentPreset: Schema.optional(Schema.String)
  },
  Open
)
/**
 * @since 0.1.0
 * @category models
 */
export type SessionHeader = typeof SessionHeaderSchema.Type

/**
 * Inbox queue targeted by a splice (§4).
 *
 * @since 0.1.0
 * @category models
 */
export const InboxTarget = Schema.Literal("next-turn", "next-step")
/**
 * @since 0.1.0
 * @category models
 */
export type InboxTarget = typeof InboxTarget.Type

/**
 * Why a cancel or dispose cleared the inbox or aborted a turn: `{kind:"user"|"parent"|
 * "disposed"|…, …}` (§6.4, §9). Open: extra fields are kept.
 *
 * @since 0.1.0
 * @category models
 */
export const AbortCause = Schema.Struct({ kind: Schema.String }, Open)
/**
 * @since 0.1.0
 * @category models
 */
export type AbortCause = typeof AbortCause.Type

/**
 * `agent/inbox/spliced` data (§3.2, §4): the splice of `target` at `start` that
 * removed `removedCount` (default 0) pending messages and inserted `inserted`; `outcome:
 * "canceled"` with its `cause` when a cancel cleared the queue; `wake: true` when the splice
 * starts a turn of an idle agent.
 *
 * @since 0.1.0
 * @category models
 */
export const SplicedData = Schema.Struct({
  target: InboxTarget,
  start: Int,
  removedCount: Schema.optional(Int),
  inserted: Schema.Array(UserMessageSchema),
  outcome: Schema.optional(Schema.Literal("canceled")),
  cause: Schema.optional(AbortCause),
  wake: Schema.optional(Schema.Literal(true))
})
/**
 * @since 0.1.0
 * @category models
 */
export type SplicedData = typeof SplicedData.Type

/**
 * A turn's end reason (§6.4): `completed`, `max-tokens`, `blocked` (by a pre-step
 * listener, with its `reason`), `error` (the model's or the loop's: `code` is a `ModelError`
 * code or one of the loop's, `PRE_STEP_FAILED`, `MAX_STEPS`, `RUN_FAILED`, kept as a string in
 * the log so that a log stays readable when codes are added), `aborted` (by a cancel or
 * dispose, with its cause) or `interrupted`.
 *
 * @since 0.1.0
 * @category models
 */
export const TurnEndReason = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("completed") }),
  Schema.Struct({ kind: Schema.Literal("max-tokens") }),
  Schema.Struct({ kind: Schema.Literal("blocked"), reason: Schema.optional(Schema.String) }),
  Schema.Struct({
    kind: Schema.Literal("error"),
    error: Schema.Struct({ message: Schema.String, code: Schema.String, status: Schema.optional(Schema.Number) })
  }),
  Schema.Struct({ kind: Schema.Literal("aborted"), reason: AbortCause }),
  Schema.Struct({ kind: Schema.Literal("interrupted") })
)
/**
 * @since 0.1.0
 * @category models
 */
export type TurnEndReason = typeof TurnEndReason.Type

const TokenCount = Schema.optional(Schema.Finite)

/**
 * Token usage of one model response, normalized from what the provider reported (§18).
 * Cached tokens are counted once: `inputTokens` is the whole prompt, and `cacheReadTokens` and
 * `cacheWriteTokens` are parts of it; `reasoningTokens` is a part of `outputTokens`. The adapters
 * give all five whenever the provider reported usage (0 for a kind it does not report); a log
 * written before the adapters reported usage, or by a scripted model, may lack some, which the
 * `Usage` projections read as 0.
 * Counts are finite numbers (integers from every provider seen; the adapters pass on what the
 * provider sent).
 *
 * @since 0.1.0
 * @category models
 */
export const Usage = Schema.Struct({
  /** The whole prompt, cached and cache-written tokens included. */
  inputTokens: TokenCount,
  /** The whole output, reasoning tokens included. */
  outputTokens: TokenCount,
  /** Prompt tokens read from the provider's prompt cache (part of `inputTokens`). */
  cacheReadTokens: TokenCount,
  /** Prompt tokens written to the provider's prompt cache (part of `inputTokens`). */
  cacheWriteTokens: TokenCount,
  /** Output tokens spent on reasoning (part of `outputTokens`). */
  reasoningTokens: TokenCount,
  /** The provider's own total, when it sends one. */
  totalTokens: TokenCount
})
/**
 * @since 0.1.0
 * @category models
 */
export type Usage = typeof Usage.Type

/**
 * Finish reason of a model response (§11).
 *
 * @since 0.1.0
 * @category models
 */
export const FinishReason = Schema.Literal("stop", "tool-calls", "length", "content-filter")
/**
 * @since 0.1.0
 * @category models
 */
export type FinishReason = typeof FinishReason.Type

/**
 * `assistant/message` data (§3.2): the response of step `step` of turn `turn`, its
 * usage, and how it ended (`finish`), or `interrupted: true` (and no `finish`) for the prefix
 * of a response cut off by a cancel or dispose.
 *
 * @since 0.1.0
 * @category models
 */
export const AssistantMessageData = Schema.Struct({
  turn: Int,
  step: Int,
  message: AssistantMessageSchema,
  usage: Schema.optional(Usage),
  /** The provider's usage object as it was sent (JSON), beside the normalized `usage` (§18). */
  rawUsage: Schema.optional(Schema.Unknown),
  /** The provider's id of the response and the model that answered, when it says (§18). */
  response: Schema.optional(Schema.Struct({ id: Schema.optional(Schema.String), model: Schema.optional(Schema.String) })),
  finish: Schema.optional(FinishReason),
  interrupted: Schema.optional(Schema.Literal(true))
})
/**
 * @since 0.1.0
 * @category models
 */
export type AssistantMessageData = typeof AssistantMessageData.Type

/**
 * `tool/call` data (§3.2): `arguments` is the provider's raw JSON string, logged as
 * it came, valid JSON or not (DSH logs it the same way: a string).
 *
 * @since 0.1.0
 * @category models
 */
export const ToolCallData = Schema.Struct({
  turn: Int,
  step: Int,
  callId: Schema.String,
  name: Schema.String,
  arguments: Schema.String
})
/**
 * @since 0.1.0
 * @category models
 */
export type ToolCallData = typeof ToolCallData.Type

/**
 * Codes of error tool results (§6.4, §8, §9, §10).
 *
 * @since 0.1.0
 * @category models
 */
export const ToolErrorCode = Schema.Literal(
  "UNKNOWN_TOOL",
  "INVALID_ARGUMENTS",
  "DENIED",
  "TOOL_FAILED",
  "TRUNCATED",
  "ABORTED",
  "TOOL_ABORTED_BEFORE_DISPATCH",
  "TOOL_OUTCOME_UNKNOWN",
  "TOOL_NOT_STARTED"
)
/**
 * @since 0.1.0
 * @category models
 */
export type ToolErrorCode = typeof ToolErrorCode.Type

/**
 * `tool/result` data (§3.2): the result message of a call, and for an error result
 * its `error {name, code}` (`code` a `ToolErrorCode` when the loop wrote it; the log keeps any
 * string, so that a log stays readable when codes are added).
 *
 * @since 0.1.0
 * @category models
 */
export const ToolResultData = Schema.Struct({
  turn: Int,
  step: Int,
  message: UserMessageSchema,
  error: Schema.optional(Schema.Struct({ name: Schema.String, code: Schema.String }))
})
/**
 * @since 0.1.0
 * @category models
 */
export type ToolResultData = typeof ToolResultData.Type

/**
 * `request/header` data: written when the request configuration first appears or changes
 * (§3.2, §6.2): the model port's `provider` and `model`, the `instructions`, the tool
 * definitions and the provider settings of the requests that follow.
 *
 * @since 0.1.0
 * @category models
 */
export const RequestHeaderData = Schema.Struct({
  turn: Int,
  step: Int,
  provider: Schema.String,
  model: Schema.String,
  instructions: Schema.optional(Schema.String),
  tools: Schema.Array(
    Schema.Struct({ name: Schema.String, description: Schema.String, parameters: Schema.Unknown })
  ),
  settings: Open
})
/**
 * @since 0.1.0
 * @category models
 */
export type RequestHeaderData = typeof RequestHeaderData.Type

const TurnData = Schema.Struct({ turn: Int })
const TurnEndData = Schema.Struct({ turn: Int, reason: TurnEndReason })
const StepData = Schema.Struct({ turn: Int, step: Int })

/**
 * Schemas of the `data` of every core event type (§3.2): the one definition of their
 * shapes (`CoreEventData` is their types), which the log reader decodes with. Fields a struct
 * does not name are accepted and kept as read (the reader keeps values exactly as parsed);
 * `session/end-seed` data is any object.
 *
 * @since 0.1.0
 * @category models
 */
export const coreDataSchemas = {
  "agent/inbox/spliced": SplicedData,
  "turn/start": TurnData,
  "turn/end": TurnEndData,
  "step/start": StepData,
  "step/end": StepData,
  "user/message": UserMessageSchema,
  "assistant/message": AssistantMessageData,
  "tool/call": ToolCallData,
  "tool/result": ToolResultData,
  "request/header": RequestHeaderData,
  "session/end-seed": Open
} as const

/**
 * The `data` of each core event type (§3.2): the types of `coreDataSchemas`.
 *
 * @since 0.1.0
 * @category models
 */
export type CoreEventData = {
  readonly [K in keyof typeof coreDataSchemas]: Schema.Schema.Type<(typeof coreDataSchemas)[K]>
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
