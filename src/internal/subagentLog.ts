/**
 * The log shapes of sub-agents, as DeepSeek Harness (DSH) writes them, so that the readers
 * (`Transcript`, `agent-loop stats`) show them and a sub-agent tool can write the same shapes.
 * A child agent runs on its own session, in the same store as its parent:
 *
 * - the child's header line carries its lineage (`SessionHeader`): `parentSession` (the parent's
 *   session id), `origin: "subagent"`, `delegationDepth` (the parent's depth + 1; a top-level
 *   session has 0 or none) and, for a child seeded with the parent's history (DSH's fork),
 *   `seedLength` (the number of seqs inherited: seqs `0..seedLength-1` are the parent's log
 *   through its last completed turn, byte for byte);
 * - `subagent/descriptor` (`DescriptorData`) is appended once in the child's own log: inside its
 *   first turn before its first step (a one-shot child), or at seq 0 before a `session/end-seed`
 *   (a continuable child). Log-only: never model-visible;
 * - `subagent/start` and `subagent/end` (`StartData`, `EndData`) are DSH's in-process
 *   notifications of a child run (its bus events, never written to a DSH log: no DSH fixture
 *   holds one). Their payloads are typed here for a parent log that records its children; a
 *   DSH parent log names a child only in the text of a tool result (`started subagent <id>`)
 *   and in `subagent-settled` notices (`source.senderSessionId`).
 *
 * The full account, with fixture lines: `docs/dsh-subagent-logs.md`.
 */
import { Schema } from "effect"
import type { SessionEvent, SessionHeader } from "../SessionEvent.js"

const Open = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** The event types of sub-agents (kept as read: events of a type outside the core, §3.2). */
export const eventTypes: ReadonlySet<string> = new Set(["subagent/descriptor", "subagent/start", "subagent/end"])

/** The descriptor version DSH writes (and the only one its runtime classifies). */
export const DESCRIPTOR_VERSION = 2

/** The child tool scoping of a continuable descriptor: tool names kept (`allow`) or removed (`deny`). */
export const ToolFilter = Schema.Struct({
  allow: Schema.optional(Schema.Array(Schema.String)),
  deny: Schema.optional(Schema.Array(Schema.String))
})

/**
 * `subagent/descriptor` data of a one-shot child: `{version: 2, mode: "one-shot", provider,
 * label?}`. `provider` names the transport that made the child (`spawn`: a fresh session; `fork`:
 * seeded with the parent's completed turns); `label` is the delegation's `description` (absent
 * for children a workflow starts).
 */
export const OneShotDescriptor = Schema.Struct({
  version: Schema.Number,
  mode: Schema.Literal("one-shot"),
  provider: Schema.String,
  label: Schema.optional(Schema.String)
})

/**
 * `subagent/descriptor` data of a continuable child (one that takes later turns from its parent):
 * `{version: 2, mode: "continuable", provider, label, agentProvider?, agentModel?, persona?,
 * toolFilter?}`, the composition a cold resume rebuilds it from.
 */
export const ContinuableDescriptor = Schema.Struct({
  version: Schema.Number,
  mode: Schema.Literal("continuable"),
  provider: Schema.String,
  label: Schema.String,
  agentProvider: Schema.optional(Schema.String),
  agentModel: Schema.optional(Schema.String),
  persona: Schema.optional(Schema.String),
  toolFilter: Schema.optional(ToolFilter)
})

/** `subagent/descriptor` data: one-shot or continuable. */
export const DescriptorData = Schema.Union(OneShotDescriptor, ContinuableDescriptor)
/** See `DescriptorData`. */
export type DescriptorData = typeof DescriptorData.Type

/**
 * Why a child run ended (DSH's `SubagentStopReason`): `completed`, `aborted`, `error`,
 * `max-tokens`, `refusal`; open (a transport may add reasons), so any string.
 */
export const StopReason = Schema.String

/**
 * `subagent/start` data (DSH's `SubagentRunInfo`): `runId` (pairs the start with its end), the
 * `provider`, the child's session `id`, and whether the child runs in this process (`local`).
 * `callId` (not DSH's) names the parent's `tool/call` that started it. Extra fields are kept.
 */
export const StartData = Schema.Struct(
  {
    runId: Schema.String,
    provider: Schema.String,
    id: Schema.String,
    local: Schema.Boolean,
    callId: Schema.optional(Schema.String)
  },
  Open
)
/** See `StartData`. */
export type StartData = typeof StartData.Type

/**
 * `subagent/end` data (DSH's `SubagentRunEndInfo`): the start's fields, the `stopReason`, and the
 * child's final assistant content (`lastAssistantMessage`, content blocks; absent when it gave
 * none). Extra fields are kept.
 */
export const EndData = Schema.Struct(
  {
    runId: Schema.String,
    provider: Schema.String,
    id: Schema.String,
    local: Schema.Boolean,
    stopReason: StopReason,
    lastAssistantMessage: Schema.optional(Schema.Array(Schema.Struct({ type: Schema.String }, Open))),
    callId: Schema.optional(Schema.String)
  },
  Open
)
/** See `EndData`. */
export type EndData = typeof EndData.Type

/** A child session's lineage, from its header line. */
export interface Lineage {
  readonly parentSession?: string | undefined
  readonly origin?: string | undefined
  readonly delegationDepth?: number | undefined
  readonly seedLength?: number | undefined
}

/**
 * The lineage of a session from its header: undefined for a top-level session (no
 * `parentSession`, no `origin`, no `seedLength` above 0; `delegationDepth: 0` alone, which DSH
 * writes on every top-level header, is no lineage).
 */
export const lineageOf = (header: SessionHeader | undefined): Lineage | undefined => {
  if (header === undefined) return undefined
  const { delegationDepth, origin, parentSession, seedLength } = header
  const seed = typeof seedLength === "number" && seedLength > 0 ? seedLength : undefined
  if (parentSession === undefined && origin === undefined && seed === undefined) return undefined
  return {
    ...(parentSession !== undefined ? { parentSession } : {}),
    ...(origin !== undefined ? { origin } : {}),
    ...(delegationDepth !== undefined ? { delegationDepth } : {}),
    ...(seed !== undefined ? { seedLength: seed } : {})
  }
}

const isDescriptor = Schema.is(DescriptorData)

/**
 * The descriptor of a child log: the first `subagent/descriptor` at or after `seedLength` (one
 * the inherited prefix holds is the parent's own, DSH's rule), if it is `DescriptorData`;
 * undefined when there is none or it is not.
 */
export const descriptorOf = (events: ReadonlyArray<SessionEvent>, seedLength = 0): DescriptorData | undefined => {
  for (const event of events) {
    if (event.seq >= seedLength && event.type === "subagent/descriptor") {
      return isDescriptor(event.data) ? event.data : undefined
    }
  }
  return undefined
}
