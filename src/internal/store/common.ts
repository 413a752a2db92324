/**
 * What every session store shares (§3): the session id rule, the header of a new
 * session, and the store errors built the same way by the memory, JSONL and SQL stores.
 */
import { Effect, Either } from "effect"
import * as IdGenerator from "../../IdGenerator.js"
import type { SessionEvent, SessionHeader } from "../../SessionEvent.js"
import { type CreateOptions, type LogContents, SessionLogError, SessionNotFound, SessionStoreError } from "../../SessionLog.js"
import { decodeLog, InvalidDraft, makeHeader } from "../logCodec.js"

/** No events: what an append of no drafts returns (nothing is written). */
export const EMPTY: Effect.Effect<ReadonlyArray<SessionEvent>> = Effect.succeed(Object.freeze([]))

/**
 * A session id every store accepts: it names a file (`<id>.jsonl`) without a path separator or
 * a leading dot, so a session of one store can be exported to another.
 */
const SESSION_ID = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/

/** Whether `id` follows the stores' session id rule (`[A-Za-z0-9_-][A-Za-z0-9._-]*`). */
export const isSessionId = (id: string): boolean => SESSION_ID.test(id)

/**
 * The header of a new session: `id` from the options, else the `IdGenerator` in context (random
 * UUIDs without one); `createdAt` from the options, else the `Clock`.
 */
export const newHeader = (options: CreateOptions | undefined): Effect.Effect<SessionHeader> =>
  Effect.flatMap(
    options?.id !== undefined ? Effect.succeed(options.id) : Effect.flatMap(IdGenerator.current, (ids) => ids.next),
    (id) =>
      Effect.map(
        options?.createdAt !== undefined ? Effect.succeed(options.createdAt) : Effect.clockWith((c) => c.currentTimeMillis),
        (createdAt) => makeHeader({ id, createdAt, cwd: options?.cwd })
      )
  )

/** The message of a cause; for an error that wraps another (an `SqlError`), both messages. */
export const causeMessage = (cause: unknown): string => {
  if (!(cause instanceof Error)) return String(cause)
  const inner = (cause as { readonly cause?: unknown }).cause
  return inner instanceof Error && inner.message !== "" && !cause.message.includes(inner.message)
    ? `${cause.message}: ${inner.message}`
    : cause.message
}

/** A `SessionStoreError` whose message ends with its cause's. */
export const storeError = (message: string, sessionId: string | undefined, cause?: unknown): SessionStoreError =>
  new SessionStoreError({
    message: cause === undefined ? message : `${message}: ${causeMessage(cause)}`,
    sessionId,
    cause
  })

/** The error of a session id that is not valid for `create`. */
export const invalidId = (id: string): SessionStoreError => storeError(`invalid session id ${JSON.stringify(id)}`, id)

/** The error of a session that is already there for `create`. */
export const alreadyExists = (id: string): SessionStoreError => storeError(`session "${id}" already exists`, id)

export const notFound = (id: string): SessionNotFound => new SessionNotFound({ message: `no session "${id}"`, sessionId: id })

/** A kind of file (a `FileSystem` `File.Type`) in words: "a fifo", "a character device", … */
export const fileKind = (type: string): string => {
  switch (type) {
    case "Directory":
      return "a directory"
    case "SymbolicLink":
      return "a symbolic link"
    case "BlockDevice":
      return "a block device"
    case "CharacterDevice":
      return "a character device"
    case "FIFO":
      return "a fifo"
    case "Socket":
      return "a socket"
    case "File":
      return "a regular file"
    default:
      return "of an unknown kind"
  }
}

/** A `SessionLogError` naming the file (or "session log") and the line. */
export const logError = (path: string | undefined, failure: { readonly line: number; readonly message: string }) =>
  new SessionLogError({
    message: `${path ?? "session log"}, line ${failure.line}: ${failure.message}`,
    path,
    line: failure.line
  })

/** Decodes a log's bytes (§3.1); a failure names `path` and the line. */
export const decodeBytes = (bytes: Uint8Array, path: string | undefined): Effect.Effect<LogContents, SessionLogError> => {
  const result = decodeLog(bytes)
  return Either.isRight(result) ? Effect.succeed(result.right) : Effect.fail(logError(path, result.left))
}

/** The error of an append whose events the reader would refuse or that are not JSON. */
export const invalidEvents = (id: string, cause: unknown): SessionStoreError => {
  const error = cause instanceof InvalidDraft
    ? new SessionStoreError({ message: `cannot append to session "${id}": ${cause.message}`, sessionId: id, cause })
    : storeError(`cannot append to session "${id}": an event is not JSON`, id, cause)
  refused.add(error)
  return error
}

/** Errors of appends whose events the reader would refuse (`invalidEvents`). */
const refused = new WeakSet<SessionStoreError>()

/** Whether `error` refused the events themselves (`invalidEvents`): the same append always fails so. */
export const refusesEvents = (error: unknown): boolean => error instanceof SessionStoreError && refused.has(error)

/**
 * A store reads session `id` from its own place: a log whose header names another session (a
 * copied or renamed file) is refused, as the log it would open could not be found again by its
 * id (`SessionStore.readFile` reads such a file at its path).
 */
export const ownHeader = (
  id: string,
  path: string | undefined,
  contents: LogContents
): Effect.Effect<LogContents, SessionLogError> =>
  contents.header.id === id
    ? Effect.succeed(contents)
    : Effect.fail(
      logError(path, {
        line: 1,
        message: `the header names session ${JSON.stringify(contents.header.id)}, not ${JSON.stringify(id)}`
      })
    )

/** Errors of logs that broke: no retry can append to them (`isTransient`). */
const brokenErrors = new WeakSet<SessionStoreError>()

/**
 * A `SessionStoreError` of a log that broke (a failed write that could not be cut back, a failed
 * fsync, a file changed under the session, an SQL append whose outcome could not be found out):
 * the log refuses every later append until the session is opened again.
 */
export const brokenError = (message: string, sessionId: string, cause?: unknown): SessionStoreError => {
  const error = storeError(message, sessionId, cause)
  brokenErrors.add(error)
  return error
}

/**
 * Whether a store error may go away by itself, so that the same append tried again later may
 * succeed (§3.3): a `SessionStoreError` caused by an I/O failure (an SQL error: a
 * connection reset, a statement timeout, a full disk; a system error: `ENOSPC`, `EIO`). Not a
 * fenced log (`SessionFenced`), a broken one (`brokenError`), a closed or released one, an event
 * the reader would refuse, an invalid id (none of these has an I/O cause).
 */
export const isTransient = (error: unknown): boolean =>
  error instanceof SessionStoreError && error.cause !== undefined && !refused.has(error) && !brokenErrors.has(error)
