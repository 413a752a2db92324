/**
 * A session's open approval questions (§26) as ACP v1 `session/request_permission` requests
 * (§22), and the client's answers as decisions. Pure: no I/O; the SDK's types only.
 *
 * - **The request** (`request`): `{sessionId, toolCall, options, _meta}`. `toolCall` is the
 *   `tool_call` update the client was sent for the call (`replay.ts`'s `toolCall`: the same
 *   `toolCallId`, `title`, `name`, `kind`, `status: "pending"`, `rawInput`, `locations`), without
 *   its `sessionUpdate`; `options` are the four kinds of ACP's `PermissionOption`, each option id
 *   its kind (`OPTION_IDS`); `_meta["agent-loop"] = {approvalId, turn, step, askedAt, sessionId?}`
 *   (the question's id, its step, when it was asked, ms since the epoch, and for a sub-agent's
 *   question its session, §27).
 * - **The answer** (`decisionOf`): `{outcome: {outcome: "selected", optionId}}` with
 *   `allow_once` → allow, `allow_always` → allow always, `reject_once` → reject,
 *   `reject_always` → reject always; `{outcome: {outcome: "cancelled"}}` → the client cancelled
 *   the prompt turn (ACP's meaning of that outcome: a client that sends `session/cancel` answers
 *   its pending permission requests so), so the turn is cancelled. Fail closed (§26 rule 3): an
 *   option id we did not offer, or an outcome ACP v1 does not define, is a rejection whose reason
 *   names it, never an approval. A response that is not of that shape at all (no `outcome`
 *   object, an outcome that is not a string, `selected` without a string `optionId`) decides
 *   nothing: it is a `PermissionResponseInvalid`, and the question stays open.
 *
 * @since 0.1.0
 */
import type { PermissionOption, RequestPermissionRequest, SessionUpdate, ToolCallUpdate } from "@agentclientprotocol/sdk"
import { Either, Schema } from "effect"
import type * as Approval from "../../Approval.js"
import type { SessionEvent, ToolCallData } from "../../SessionEvent.js"
import { META_KEY, toolCall } from "./replay.js"

/**
 * The option ids of a permission request, one per ACP `PermissionOptionKind`, each the kind's
 * own name.
 *
 * @since 0.1.0
 * @category models
 */
export const OPTION_IDS = ["allow_once", "allow_always", "reject_once", "reject_always"] as const

/**
 * The options of a request about a call of `toolName`, in `OPTION_IDS` order: `Allow once`,
 * `Always allow TOOL`, `Reject`, `Always reject TOOL` ("always": every later call of that tool
 * in the session, §26 rule 6).
 *
 * @since 0.1.0
 * @category constructors
 */
export const options = (toolName: string): Array<PermissionOption> => [
  { optionId: "allow_once", name: "Allow once", kind: "allow_once" },
  { optionId: "allow_always", name: `Always allow ${toolName}`, kind: "allow_always" },
  { optionId: "reject_once", name: "Reject", kind: "reject_once" },
  { optionId: "reject_always", name: `Always reject ${toolName}`, kind: "reject_always" }
]

/**
 * The `session/request_permission` params of an open question (see the module comment):
 * `toolCall` is the call's `tool_call` update (`replay.ts`'s `toolCall`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const request = (
  sessionId: string,
  toolCall: SessionUpdate,
  question: Pick<Approval.Pending, "id" | "toolName" | "turn" | "step" | "askedAt" | "sessionId">
): RequestPermissionRequest => {
  const { sessionUpdate: _, ...call } = toolCall as SessionUpdate & { readonly sessionUpdate: string }
  return {
    sessionId,
    toolCall: call as ToolCallUpdate,
    options: options(question.toolName),
    _meta: {
      [META_KEY]: {
        approvalId: question.id,
        turn: question.turn,
        step: question.step,
        askedAt: question.askedAt,
        ...(question.sessionId === undefined ? {} : { sessionId: question.sessionId })
      }
    }
  }
}

/**
 * What the client's answer decides: allow (once or always), reject (once or always, with the
 * reason when the answer was one we do not know), or cancel the prompt turn.
 *
 * @since 0.1.0
 * @category models
 */
export type Decision =
  | { readonly _tag: "Allow"; readonly always: boolean }
  | { readonly _tag: "Reject"; readonly always: boolean; readonly reason?: string | undefined }
  | { readonly _tag: "Cancel" }

/**
 * The client's response to `session/request_permission` is not of ACP's shape (no `outcome`
 * object, an outcome that is not a string, `selected` without a string `optionId`): nothing is
 * decided, the question stays open. `response` is what the client sent.
 *
 * @since 0.1.0
 * @category errors
 */
export class PermissionResponseInvalid extends Schema.TaggedError<PermissionResponseInvalid>()(
  "PermissionResponseInvalid",
  { message: Schema.String, approvalId: Schema.String, response: Schema.Unknown }
) {}

/**
 * The client answered `session/request_permission` with an error (a JSON-RPC error response, a
 * response over the line limit): nothing is decided, the question stays open.
 *
 * @since 0.1.0
 * @category errors
 */
export class PermissionRequestFailed extends Schema.TaggedError<PermissionRequestFailed>()(
  "PermissionRequestFailed",
  { message: Schema.String, approvalId: Schema.String, cause: Schema.optional(Schema.Defect) }
) {}

/**
 * The errors of a permission request that decide nothing.
 *
 * @since 0.1.0
 * @category errors
 */
export type PermissionError = PermissionResponseInvalid | PermissionRequestFailed

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A value as a notice shows it: JSON, cut at 60 characters. */
const shown = (u: unknown): string => {
  const text = u === undefined ? "nothing" : JSON.stringify(u) ?? String(u)
  return text.length > 60 ? `${text.slice(0, 59)}…` : text
}

/**
 * The decision of a client's response (see the module comment), or `PermissionResponseInvalid`
 * naming what is wrong with it: `the response must be an object, got null`, `"outcome" must be
 * an object ({"outcome": "selected", "optionId": ID} or {"outcome": "cancelled"}), got
 * "allow_once"`, `"outcome.outcome" must be a string, got 1`, `a "selected" outcome needs a
 * string "optionId", got 7`. Fields ACP does not define (`_meta`) are ignored.
 *
 * @since 0.1.0
 * @category constructors
 */
export const decisionOf = (approvalId: string, response: unknown): Either.Either<Decision, PermissionResponseInvalid> => {
  const invalid = (why: string) =>
    Either.left(
      new PermissionResponseInvalid({
        message: `the client's answer to session/request_permission is malformed: ${why}`,
        approvalId,
        response
      })
    )
  if (!isRecord(response)) return invalid(`the response must be an object, got ${shown(response)}`)
  const answer = response.outcome
  if (!isRecord(answer)) {
    return invalid(
      `"outcome" must be an object ({"outcome": "selected", "optionId": ID} or {"outcome": "cancelled"}), got ${shown(answer)}`
    )
  }
  const { optionId, outcome } = answer
  if (typeof outcome !== "string") return invalid(`"outcome.outcome" must be a string, got ${shown(outcome)}`)
  if (outcome === "cancelled") return Either.right({ _tag: "Cancel" })
  if (outcome !== "selected") {
    return Either.right({
      _tag: "Reject",
      always: false,
      reason: `the client answered an outcome this agent does not know: ${JSON.stringify(outcome)}`
    })
  }
  if (typeof optionId !== "string") return invalid(`a "selected" outcome needs a string "optionId", got ${shown(optionId)}`)
  switch (optionId) {
    case "allow_once":
      return Either.right({ _tag: "Allow", always: false })
    case "allow_always":
      return Either.right({ _tag: "Allow", always: true })
    case "reject_once":
      return Either.right({ _tag: "Reject", always: false })
    case "reject_always":
      return Either.right({ _tag: "Reject", always: true })
    default:
      return Either.right({
        _tag: "Reject",
        always: false,
        reason: `the client selected an option this agent did not offer: ${JSON.stringify(optionId)}`
      })
  }
}

/** A client's error in a notice: its message, and its JSON-RPC code when it has one. */
export const describeError = (e: unknown): string => {
  const code = (e as { readonly code?: unknown } | null)?.code
  const message = e instanceof Error ? e.message : String(e)
  return typeof code === "number" ? `${message} (${code})` : message
}

/**
 * The `tool_call` update of a question's call, from its `tool/call` in `events` (the arguments as
 * the model gave them); `toolLabel` as the replay projection's (an MCP server's tool is titled
 * `SERVER: TOOL`).
 */
export const toolCallOf = (
  events: ReadonlyArray<SessionEvent>,
  cwd: string,
  question: Approval.Pending,
  toolLabel?: ((name: string) => string | undefined) | undefined
): SessionUpdate => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!
    if (e.type === "tool/call" && (e.data as ToolCallData).callId === question.callId) {
      return toolCall(e.data as ToolCallData, { cwd, toolLabel })
    }
  }
  return toolCall({
    callId: question.callId,
    name: question.toolName,
    arguments: JSON.stringify(question.arguments ?? {})
  }, { cwd, toolLabel })
}
