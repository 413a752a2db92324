/**
 * Bounded waits on a condition for tests that drive real processes (no fixed sleeps): poll every
 * 10 ms, fail with what was awaited after the bound, and note the wait (`bounds.ts` `note`).
 */
import { CHILD_WAIT_MS, note } from "./bounds.js"

/** Polls `check` every 10 ms until it holds, or fails after `ms` (default `CHILD_WAIT_MS`); `label` names the suite in the note. */
export const pollUntil = (label: string) => async (what: string, check: () => boolean, ms = CHILD_WAIT_MS): Promise<void> => {
  const start = Date.now()
  while (!check()) {
    if (Date.now() - start > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  note(`${label}: ${what}`, Date.now() - start)
}
