/**
 * The JSON-RPC 2.0 envelope of what `agent-loop acp` reads (§22), checked
 * between the SDK's line parser and its connection. The SDK answers a line that is not JSON
 * (-32700), a batch and a value that is not an object (-32600, `id: null`); of the objects, it
 * answered every malformed request with `id: null` even when its id was there to read, and
 * never answered a message with an `id` but no `method`, `result` or `error` (it took it for a
 * response to a request it had not sent, and only wrote that to stderr). JSON-RPC 2.0 says
 * both are invalid requests, answered -32600 with their id, `id: null` only when the id cannot
 * be determined (absent, or not a string, a number or null). `invalidEnvelope` says which
 * objects are such, and with what id and message; `checkEnvelopes` answers them and passes the
 * rest on unchanged: requests, notifications, and responses (a `result` or an `error`, no
 * `method`: never answered, even malformed; the SDK fails the request of ours one answers).
 *
 * @since 0.1.0
 */

/**
 * An invalid request: the id to answer with (`null` when it cannot be determined) and the
 * message of the -32600 error.
 *
 * @since 0.1.0
 * @category models
 */
export interface InvalidEnvelope {
  readonly id: string | number | null
  readonly message: string
}

/** A JSON-RPC id: a string, a number (finite) or null. */
const isId = (u: unknown): u is string | number | null =>
  u === null || typeof u === "string" || (typeof u === "number" && Number.isFinite(u))

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Why `message` (a parsed line) is not a request, a notification or a response, with the id to
 * answer with; `undefined` when it is one of them, or not an object (the SDK answers those).
 * The first rule it breaks is named: `"jsonrpc" must be "2.0"`, `"id" must be a string, a
 * number or null` (answered with `id: null`), `"method" must be a string`, then a message with
 * an `id` and none of `method`, `result`, `error`, or with none of the four.
 *
 * @since 0.1.0
 * @category constructors
 */
export const invalidEnvelope = (message: unknown): InvalidEnvelope | undefined => {
  if (!isObject(message)) return undefined
  const hasMethod = "method" in message
  // A response, even malformed, is never answered (JSON-RPC 2.0 §5).
  if (!hasMethod && ("result" in message || "error" in message)) return undefined
  const hasId = "id" in message
  const id = hasId && isId(message.id) ? message.id : null
  const invalid = (why: string): InvalidEnvelope => ({ id, message: `Invalid request: ${why}` })
  if (message.jsonrpc !== "2.0") return invalid(`"jsonrpc" must be "2.0"`)
  if (hasId && !isId(message.id)) return invalid(`"id" must be a string, a number or null`)
  if (!hasMethod) {
    return invalid(
      hasId
        ? `a message with an "id" needs a "method" (a request), or a "result" or an "error" (a response)`
        : `a message needs a "method" (a request or a notification), or an "id" and a "result" or an "error" (a response)`
    )
  }
  if (typeof message.method !== "string") return invalid(`"method" must be a string`)
  return undefined
}

/**
 * A transform of parsed messages that calls `answer` for each invalid request
 * (`invalidEnvelope`) and drops it; every other message passes unchanged.
 *
 * @since 0.1.0
 * @category constructors
 */
export const checkEnvelopes = <A>(answer: (invalid: InvalidEnvelope) => void): TransformStream<A, A> =>
  new TransformStream<A, A>({
    transform(message, controller) {
      const invalid = invalidEnvelope(message)
      if (invalid === undefined) controller.enqueue(message)
      else answer(invalid)
    }
  })
