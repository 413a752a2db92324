/**
 * Approvals (§26): the log shapes of a tool call that waits for a person, and the projection of
 * the questions a log leaves open. The shapes are DeepSeek Harness's, so each system reads the
 * other's logs:
 *
 * - `approval/asked {id, toolName, callId, reason?}`: a question about one call, appended with the
 *   call's `tool/call`, before the call would start (rule 2 of §26);
 * - `approval/decided {id, outcome, by?, reason?}`: its one decision. `outcome` is DSH's
 *   `allowed-once | rejected | cancelled | unavailable`, or ours, `allowed-always |
 *   rejected-always`; `by` says who decided (a person, a policy, a timeout, a cancel).
 *
 * `Invariant.check` holds a log to the rules of §26 (one question per call, one decision per
 * question, the decision before the call's result). The approval policy, the waiting, and the
 * decisions of a live agent are being built on these shapes (§26).
 *
 * @example
 * ```ts
 * import { Approval, SessionStore } from "effect-agent-loop"
 * import { NodeFileSystem } from "@effect/platform-node"
 * import { Effect } from "effect"
 *
 * // The questions a session log leaves open, e.g. for an operator's list of waiting sessions.
 * const open = SessionStore.readFile(".agent-loop/sessions/s1.jsonl").pipe(
 *   Effect.map((log) => Approval.openQuestions(log.events)),
 *   Effect.provide(NodeFileSystem.layer)
 * )
 * ```
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import type { SessionEvent } from "./SessionEvent.js"

/**
 * How a question was decided. `allowed-once` and `allowed-always` start the call; every other
 * outcome refuses it (an outcome not in this list is never an approval). `allowed-always` and
 * `rejected-always` also apply to the later calls of the same tool in the session (rule 6 of §26).
 *
 * @since 0.1.0
 * @category models
 */
export const Outcome = Schema.Literal(
  "allowed-once",
  "rejected",
  "cancelled",
  "unavailable",
  "allowed-always",
  "rejected-always"
)
/**
 * @since 0.1.0
 * @category models
 */
export type Outcome = typeof Outcome.Type

/**
 * Who decided (`approval/decided` `by`): a person (optionally named), a policy (by name; the
 * remembered answers are the policy `"remembered"`), the approval timeout, or a cancel.
 *
 * @since 0.1.0
 * @category models
 */
export const DecidedBy = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("person"), name: Schema.optional(Schema.String) }),
  Schema.Struct({ kind: Schema.Literal("policy"), policy: Schema.String }),
  Schema.Struct({ kind: Schema.Literal("timeout") }),
  Schema.Struct({ kind: Schema.Literal("cancel") })
)
/**
 * @since 0.1.0
 * @category models
 */
export type DecidedBy = typeof DecidedBy.Type

/**
 * `approval/asked` data. DSH writes `callId` when the question is about a tool call (always, in
 * our logs).
 *
 * @since 0.1.0
 * @category models
 */
export const AskedData = Schema.Struct({
  id: Schema.String,
  toolName: Schema.String,
  callId: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type AskedData = typeof AskedData.Type

/**
 * `approval/decided` data. DSH writes `{id, outcome}`; `by` and `reason` are ours.
 *
 * @since 0.1.0
 * @category models
 */
export const DecidedData = Schema.Struct({
  id: Schema.String,
  outcome: Outcome,
  by: Schema.optional(DecidedBy),
  reason: Schema.optional(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type DecidedData = typeof DecidedData.Type

/**
 * The approval event types (events of a type outside the core, §3.2: kept as read).
 *
 * @since 0.1.0
 * @category models
 */
export const eventTypes: ReadonlySet<string> = new Set(["approval/asked", "approval/decided"])

/**
 * The outcomes that start the call.
 *
 * @since 0.1.0
 * @category models
 */
export const isAllowed = (outcome: Outcome): boolean => outcome === "allowed-once" || outcome === "allowed-always"

/**
 * A question a log leaves open: its data, and the seq and time of its `approval/asked`.
 *
 * @since 0.1.0
 * @category models
 */
export interface OpenQuestion extends AskedData {
  readonly seq: number
  readonly time: number
}

/**
 * The questions of a log that have no decision, in the order they were asked. An `approval/asked`
 * whose data is not `AskedData` is not a question (`Invariant.check` reports it).
 *
 * @since 0.1.0
 * @category projections
 */
export const openQuestions = (events: ReadonlyArray<SessionEvent>): Array<OpenQuestion> => {
  const open = new Map<string, OpenQuestion>()
  for (const event of events) {
    if (event.type === "approval/asked" && Schema.is(AskedData)(event.data)) {
      if (!open.has(event.data.id)) open.set(event.data.id, { ...event.data, seq: event.seq, time: event.time })
    } else if (event.type === "approval/decided") {
      const id = (event.data as { readonly id?: unknown } | null)?.id
      if (typeof id === "string") open.delete(id)
    }
  }
  return [...open.values()]
}
