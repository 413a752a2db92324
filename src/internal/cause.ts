/**
 * Readable messages of failures: what a turn's `error.message` and an error tool result say.
 */
import { Cause, Option } from "effect"

/** The message of a thrown or failed value: an `Error`'s, a tagged error's `message`, else its string. */
export const messageOf = (u: unknown): string => {
  if (u instanceof Error) return u.message
  if (typeof u === "object" && u !== null && "message" in u) return String((u as { message: unknown }).message)
  return String(u)
}

/** The message of a cause: its first failure's, else its first defect's, else the cause pretty-printed. */
export const causeMessage = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return messageOf(failure.value)
  const defect = Cause.dieOption(cause)
  if (Option.isSome(defect)) return messageOf(defect.value)
  return Cause.pretty(cause)
}
