/**
 * The page's reads of `agent-loop inspect`'s HTTP API (`src/cli/inspect/api.ts` has the shapes).
 * An error answer (`{error}` with a 4xx or 5xx status) or a failed request becomes an `ApiFailure`
 * whose message the views show as a line of text.
 */

/** A request that failed: the message says which path and why. */
export class ApiFailure extends Error {}

/** `GET path` as JSON of type `A` (as the server promises: nothing is checked). */
export const getJson = async <A>(path: string, signal?: AbortSignal): Promise<A> => {
  let response: Response
  try {
    response = await fetch(path, { headers: { accept: "application/json" }, ...(signal ? { signal } : {}) })
  } catch (error) {
    if (signal?.aborted === true) throw error
    throw new ApiFailure(`${path}: ${error instanceof Error ? error.message : String(error)}`)
  }
  const body = await response.text()
  if (!response.ok) {
    let message = body
    try {
      const parsed: unknown = JSON.parse(body)
      if (typeof parsed === "object" && parsed !== null && "error" in parsed) message = String(parsed.error)
    } catch {
      // Not JSON: the body as it came.
    }
    throw new ApiFailure(`${path}: ${response.status} ${message}`)
  }
  try {
    return JSON.parse(body) as A
  } catch {
    throw new ApiFailure(`${path}: not JSON`)
  }
}

/** The message of an error, for the page. */
export const errorText = (error: unknown): string => error instanceof Error ? error.message : String(error)

/** Whether an error is the abort of a request the page no longer wants (nothing to show). */
export const isAbort = (error: unknown): boolean => error instanceof DOMException && error.name === "AbortError"

/** `/api/sessions/ID` with the id encoded, and `tail` appended. */
export const sessionPath = (id: string, tail = ""): string => `/api/sessions/${encodeURIComponent(id)}${tail}`
