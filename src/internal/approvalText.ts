/**
 * The text of a refused call's `DENIED` result (§26 rule 3), shared by the loop and crash repair.
 */
import type * as Approval from "../Approval.js"

/** Whom a decision names, in the words of a refusal's text. */
const byText = (by: Approval.DecidedBy | undefined): string => {
  if (by === undefined) return ""
  switch (by.kind) {
    case "person":
      return by.name === undefined ? " by a person" : ` by ${by.name}`
    case "policy":
      return ` by the policy ${by.policy}`
    case "timeout":
      return " by the approval timeout"
    case "cancel":
      return " by a cancel"
  }
}

/**
 * The text of a refused call's `DENIED` result (rule 3): the tool, the outcome, who decided and
 * the reason, so that the model can react.
 */
export const refusalText = (toolName: string, data: Approval.DecidedData): string => {
  const how = data.outcome === "unavailable"
    ? "refused: no approval was available"
    : data.outcome === "rejected-always"
    ? "rejected (for every call of this tool in this session)"
    : data.outcome
  return `The call to ${toolName} was ${how}${byText(data.by)}${data.reason === undefined ? "." : `: ${data.reason}`}`
}
