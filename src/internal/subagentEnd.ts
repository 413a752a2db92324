/**
 * How a sub-agent call ends (§27), shared by `Subagent.ts` (a call that ran its child to the
 * end) and crash repair (`repair.ts`, `agent/resume.ts`: a call a crash cut short): what the
 * child's log says of its task, the `subagent/end` fields the parent's log records, and the
 * call's result those fields give. One code path, so that a call repair closes from its child's
 * log gets exactly the end and the result the tool would have given.
 */
import type { ContentBlock } from "../Message.js"
import type { SessionEvent, SessionHeader, ToolErrorCode, TurnEndReason } from "../SessionEvent.js"
import * as Usage from "../Usage.js"
import { seedLengthOf } from "./logOptions.js"
import { toolFailedText } from "./toolError.js"

/**
 * The `stopReason` of a call repair closes while its child had not finished (§27 rule 16; the
 * Claude Agent SDK's name for that state).
 */
export const UNFINISHED = "unfinished_at_resume"

/**
 * The fields of `subagent/end` after the run info of `subagent/start` (§27 rule 3): DSH's
 * `stopReason` and `lastAssistantMessage`, the child's last `turn/end` reason and what its run
 * spent (`spentOf`); `error` when the child could not be made.
 */
export interface EndFields {
  readonly stopReason: string
  readonly lastAssistantMessage?: ReadonlyArray<ContentBlock> | undefined
  readonly reason?: TurnEndReason | undefined
  readonly usage?: Usage.Totals | undefined
  readonly byModel?: Usage.ByModel | undefined
  readonly unreported?: number | undefined
  readonly error?: string | undefined
}

/**
 * What a child's run spent, as `subagent/end` records it (§27 rules 9, 10, §18): its own requests
 * and its children's (`Usage.withSubagents` of its log), by model, and its responses that
 * reported no usage. The parent counts it from its own log and never reads the child's.
 */
export const spentOf = (
  events: ReadonlyArray<SessionEvent>,
  header: SessionHeader
): { readonly usage: Usage.Totals; readonly byModel: Usage.ByModel; readonly unreported: number } => {
  const all = Usage.withSubagents(Usage.fromEvents(events, { header }))
  return { usage: all.usage, byModel: all.byModel, unreported: all.unreported }
}

/**
 * What a call's end gives: the child's answer (the result's content), a failure (the message of
 * the tool's `ToolError`), or, for a call repair closed unfinished, an unknown outcome (the
 * result's text).
 */
export type Outcome =
  | { readonly _tag: "Answer"; readonly content: ReadonlyArray<ContentBlock> }
  | { readonly _tag: "Failed"; readonly message: string }
  | { readonly _tag: "Unknown"; readonly text: string }

/** DSH's `stopReason` of a turn's end: its kind (an interrupted turn is `aborted`). */
const stopReasonOf = (reason: TurnEndReason): string => reason.kind === "interrupted" ? "aborted" : reason.kind

/**
 * The child's own events: those after the copy of its parent's a fork starts with (`seedLength`,
 * §27 rule 6).
 */
const ownEvents = (events: ReadonlyArray<SessionEvent>, header: SessionHeader): ReadonlyArray<SessionEvent> => {
  const seed = seedLengthOf({ header })
  return seed === 0 ? events : events.filter((e) => e.seq >= seed)
}

/** The end of the log's last turn and the content of its last assistant message. */
const lastTurn = (
  events: ReadonlyArray<SessionEvent>
): { readonly reason: TurnEndReason | undefined; readonly answer: ReadonlyArray<ContentBlock> | undefined } => {
  let reason: TurnEndReason | undefined
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!
    if (e.type === "turn/end" && reason === undefined) reason = (e.data as { readonly reason: TurnEndReason }).reason
    if (e.type === "assistant/message") {
      return {
        reason,
        answer: (e.data as { readonly message: { readonly content: ReadonlyArray<ContentBlock> } }).message.content
      }
    }
    if (e.type === "turn/start" && reason !== undefined) break
  }
  return { reason, answer: undefined }
}

/**
 * The `subagent/end` fields of a child whose task is over (the tool's, once the child is idle):
 * the reason of its last turn's end (`interrupted` when it ended none), the content of its last
 * assistant message (omitted when it has none), what its run spent (`spentOf`).
 */
export const endedFields = (events: ReadonlyArray<SessionEvent>, header: SessionHeader): EndFields => {
  const own = ownEvents(events, header)
  const last = lastTurn(own)
  const reason: TurnEndReason = last.reason ?? { kind: "interrupted" }
  return {
    stopReason: stopReasonOf(reason),
    ...(last.answer === undefined ? {} : { lastAssistantMessage: last.answer }),
    reason,
    ...spentOf(events, header)
  }
}

/**
 * Whether a child's log shows its task unfinished (§27 rule 16): it never started a turn of its
 * own, its last turn is open (it was running, or waiting for a person, at the crash), or its last
 * turn ended `interrupted` (repair closed it after a crash; only repair writes that reason).
 */
export const unfinished = (events: ReadonlyArray<SessionEvent>, header: SessionHeader): boolean => {
  const own = ownEvents(events, header)
  for (let i = own.length - 1; i >= 0; i--) {
    const e = own[i]!
    if (e.type === "turn/start") return true
    if (e.type === "turn/end") return (e.data as { readonly reason: TurnEndReason }).reason.kind === "interrupted"
  }
  return true
}

/**
 * The `subagent/end` fields repair gives a call whose `subagent/start` has no end (§27 rule 16), from
 * its child's log alone: `endedFields` when the child's task is over (a); `unfinished_at_resume`,
 * reason `interrupted` and what the child spent when it is not (b); `unfinished_at_resume` alone
 * when there is no child session (c, which `Usage` counts as a run that spent nothing).
 */
export const repairFields = (
  child: { readonly events: ReadonlyArray<SessionEvent>; readonly header: SessionHeader } | undefined
): EndFields => {
  if (child === undefined) return { stopReason: UNFINISHED }
  if (!unfinished(child.events, child.header)) return endedFields(child.events, child.header)
  return { stopReason: UNFINISHED, reason: { kind: "interrupted" }, ...spentOf(child.events, child.header) }
}

/** The text blocks of content, joined. */
const textOf = (content: ReadonlyArray<ContentBlock> | undefined): string =>
  content === undefined ? "" : content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("")

const reasonText = (reason: TurnEndReason): string => {
  switch (reason.kind) {
    case "error":
      return `error ${reason.error.code ?? ""}: ${reason.error.message}`.replace("error : ", "error: ")
    case "aborted":
      return `aborted (${JSON.stringify(reason.reason)})`
    case "blocked":
      return `blocked${reason.reason === undefined ? "" : ` (${reason.reason})`}`
    default:
      return reason.kind
  }
}

/**
 * What a call whose child is session `sessionId` gives, from its `subagent/end` fields (§27 rules
 * 1, 5, 16): a completed child's answer (the text of its last assistant message, or `(the
 * sub-agent gave no answer)`, and `[sub-agent session ID]`); a child that did not complete, or
 * could not be made, a failure naming it; an unfinished one an unknown outcome.
 */
export const outcomeOf = (sessionId: string, end: EndFields): Outcome => {
  if (end.stopReason === UNFINISHED) {
    return {
      _tag: "Unknown",
      text: end.reason === undefined
        ? `The session stopped after this call began and before its sub-agent (session ${sessionId}) was created: ` +
          "the sub-agent never started, and nothing of its task was done."
        : `The session stopped while this call's sub-agent (session ${sessionId}) was working: it was interrupted ` +
          "by a crash before it finished, and its work must not be assumed complete. Check what it did before " +
          "calling it again."
    }
  }
  if (end.reason === undefined) return { _tag: "Failed", message: end.error ?? `the sub-agent (session ${sessionId}) failed` }
  if (end.reason.kind !== "completed") {
    return {
      _tag: "Failed",
      message: `the sub-agent (session ${sessionId}) did not complete its task: ${reasonText(end.reason)}`
    }
  }
  const answer = textOf(end.lastAssistantMessage)
  return {
    _tag: "Answer",
    content: [
      { type: "text", text: answer === "" ? "(the sub-agent gave no answer)" : answer },
      { type: "text", text: `[sub-agent session ${sessionId}]` }
    ]
  }
}

/**
 * The `tool/result` of a call of tool `toolName` with that outcome, as the loop logs it (§8):
 * the answer's content; a failure's `TOOL_FAILED` text (`toolFailedText`); an unknown outcome's
 * `TOOL_OUTCOME_UNKNOWN` text.
 */
export const resultOf = (
  toolName: string,
  outcome: Outcome
):
  | { readonly error: undefined; readonly content: ReadonlyArray<ContentBlock> }
  | { readonly error: ToolErrorCode; readonly text: string } =>
  outcome._tag === "Answer"
    ? { error: undefined, content: outcome.content }
    : outcome._tag === "Failed"
    ? { error: "TOOL_FAILED", text: toolFailedText(toolName, outcome.message) }
    : { error: "TOOL_OUTCOME_UNKNOWN", text: outcome.text }
