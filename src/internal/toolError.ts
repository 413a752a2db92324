/**
 * `tool/result.error.name` (§3.2, §8, §10): the short name logged with each error code.
 */
import type { ToolErrorCode } from "../SessionEvent.js"

const toolErrorName: { readonly [C in ToolErrorCode]: string } = {
  UNKNOWN_TOOL: "UnknownTool",
  INVALID_ARGUMENTS: "InvalidArguments",
  DENIED: "Denied",
  TOOL_FAILED: "ToolFailed",
  TRUNCATED: "Truncated",
  ABORTED: "Aborted",
  TOOL_ABORTED_BEFORE_DISPATCH: "AbortedBeforeDispatch",
  TOOL_OUTCOME_UNKNOWN: "OutcomeUnknown",
  TOOL_NOT_STARTED: "NotStarted"
}

/** The `error` of a `tool/result` with this code. */
export const toolError = (code: ToolErrorCode): { readonly name: string; readonly code: ToolErrorCode } => ({
  name: toolErrorName[code],
  code
})

/** The text of a `TOOL_FAILED` result whose tool failed with `message` (§8). */
export const toolFailedText = (toolName: string, message: string): string => `Tool ${toolName} failed: ${message}`
