/**
 * What every session store shares (§3): the session id rule, the header and first events
 * of a new session, and the store errors built the same way by the memory, JSONL and SQL stores.
 */
import { Clock, Context, Effect, Either } from "effect"
import * as IdGenerator from "../../IdGenerator.js"
import * as Invariant from "../../Invariant.js"
import type { SessionEvent, SessionHeader } from "../../SessionEvent.js"
import { type CreateOptions, type LogContents, SessionLogError, SessionNotFound, SessionStoreError } from "../../SessionLog.js"
import { decodeLog, encodeHeader, InvalidDraft, makeHeader } from "../logCodec.js"

/** The default services `appendAt` last looked its `Clock` up in, and that `Clock`. */
let servicesSeen: unknown = undefined
let clockSeen: Clock.Clock | undefined = undefined

/**
 * An append of a synchronous store as an effect: `f` called with the time of the appending
 * fiber's `Clock` (the one `Effect.clockWith` gives it), its result succeeded, or failed when it is
 * a `SessionStoreError`. One `withFiberRuntime`, the clock looked up once per set of default
 * services (an immutable `Context`: the same one gives the same `Clock`), instead of
 * `clockWith`'s two closures and lookup per call: ~400 of the ~22,800 instructions of an append
 * of `sessions-append` (JSONL, `fsync: "none"`, counted under callgrind).
 */
export const appendAt = <A>(f: (time: number) => A | SessionStoreError): Effect.Effect<A, SessionStoreError> =>
  Effect.withFiberRuntime((fiber) => {
    const services = fiber.currentDefaultServices
    if (services !== servicesSeen) {
      clockSeen = Context.get(services, Clock.Clock)
      servicesSeen = services
    }
    const result = f(clockSeen!.unsafeCurrentTimeMillis())
    return result instanceof SessionStoreError ? Effect.fail(result) : Effect.succeed(result)
  })

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
 * What a new session starts with (§3.1): its header and, for a fork child (`seed`), its first
 * events, all written by the create's one durable write.
 */
export interface NewSession {
  readonly header: SessionHeader
  /**
   * The seed's events renumbered from seq 0 (times and other envelope fields kept), then a
   * `session/end-seed` unless the seed is empty or already ends with one; as the log reader reads
   * them back (deep-frozen). Empty without a seed.
   */
  readonly events: Array<SessionEvent>
  /** `JSON.stringify` of each of `events`, without a newline: the JSONL lines and the SQL rows. */
  readonly lines: ReadonlyArray<string>
}

const NO_EVENTS: ReadonlyArray<string> = Object.freeze([])

/**
 * The header and first events of a new session (`SessionStore.create`, §3.1): `id` from the
 * options, else the `IdGenerator` in context (random UUIDs without one); `createdAt` from the
 * options, else the `Clock`; `cwd`, `parentSession`, `parentCallId`, `origin`, `delegationDepth`
 * as given; with a `seed`, `seedLength` = the seed's length and the events of `NewSession`. Validates everything
 * before anything is written: an option of the wrong shape, a seed event the reader would refuse,
 * or a seed that breaks §12 as the child's prefix or ends inside a turn or a compaction is a
 * `SessionStoreError` naming it (an invalid id is checked by the stores, as before).
 */
export const newSession = (options: CreateOptions | undefined): Effect.Effect<NewSession, SessionStoreError> =>
  Effect.flatMap(
    options?.id !== undefined ? Effect.succeed(options.id) : Effect.flatMap(IdGenerator.current, (ids) => ids.next),
    (id) =>
      Effect.flatMap(
        options?.createdAt !== undefined ? Effect.succeed(options.createdAt) : Effect.clockWith((c) => c.currentTimeMillis),
        (createdAt) => {
          const result = buildSession(id, createdAt, options)
          return result instanceof SessionStoreError ? Effect.fail(result) : Effect.succeed(result)
        }
      )
  )

const buildSession = (id: string, createdAt: number, options: CreateOptions | undefined): NewSession | SessionStoreError => {
  const refuse = (what: string) => storeError(`cannot create session ${JSON.stringify(id)}: ${what}`, id)
  const parentSession: unknown = options?.parentSession
  if (parentSession !== undefined) {
    if (typeof parentSession !== "string" || !isSessionId(parentSession)) {
      return refuse(
        `parentSession must be a session id ([A-Za-z0-9_-][A-Za-z0-9._-]*), not ${describeValue(parentSession)}`
      )
    }
    if (parentSession === id) return refuse("parentSession names the session itself")
  }
  const parentCallId: unknown = options?.parentCallId
  if (parentCallId !== undefined && (typeof parentCallId !== "string" || parentCallId.length === 0)) {
    return refuse(`parentCallId must be a non-empty string, not ${describeValue(parentCallId)}`)
  }
  const origin: unknown = options?.origin
  if (origin !== undefined && origin !== "subagent") {
    return refuse(`origin must be "subagent", not ${describeValue(origin)}`)
  }
  const depth: unknown = options?.delegationDepth
  if (depth !== undefined && !(typeof depth === "number" && Number.isSafeInteger(depth) && depth >= 1)) {
    return refuse(`delegationDepth must be a whole number ≥ 1, not ${describeValue(depth)}`)
  }
  const seed: unknown = options?.seed
  if (seed !== undefined && !Array.isArray(seed)) return refuse(`seed must be an array of events, not ${describeValue(seed)}`)
  const header = makeHeader({
    id,
    createdAt,
    cwd: options?.cwd,
    parentSession: parentSession as string | undefined,
    parentCallId: parentCallId as string | undefined,
    origin: origin as "subagent" | undefined,
    delegationDepth: depth as number | undefined,
    seedLength: seed === undefined ? undefined : seed.length
  })
  if (seed === undefined || seed.length === 0) return { header, events: [], lines: NO_EVENTS }
  return seedEvents(header, seed as ReadonlyArray<unknown>, refuse)
}

/** `JSON.stringify` of a value for a message, or its kind when it has none (a function, a BigInt). */
const describeValue = (u: unknown): string => {
  try {
    return JSON.stringify(u) ?? typeof u
  } catch {
    return typeof u
  }
}

const ENVELOPE: ReadonlySet<string> = new Set(["type", "seq", "time", "data"])

/**
 * The first events of a fork child (§3.1): each seed event renumbered (`seq` = its index; `type`,
 * `seq`, `time`, `data` first, its other envelope fields after, in their order), then
 * `session/end-seed` (time: the last seed event's) unless the seed already ends with one. The
 * lines are read back by the log reader itself (the events are what any reader of the child will
 * read), then checked against §12 as the child's log (rules 4–6 start after `seedLength`) and
 * for a last turn or compaction left open.
 */
const seedEvents = (
  header: SessionHeader,
  seed: ReadonlyArray<unknown>,
  refuse: (what: string) => SessionStoreError
): NewSession | SessionStoreError => {
  const lines: Array<string> = []
  for (let i = 0; i < seed.length; i++) {
    const event = seed[i]
    if (typeof event !== "object" || event === null || Array.isArray(event)) {
      return refuse(`seed event ${i} is ${describeValue(event)}, not an event object`)
    }
    const source = event as Record<string, unknown>
    const copy: Record<string, unknown> = { type: source.type, seq: i, time: source.time, data: source.data }
    for (const key in source) if (!ENVELOPE.has(key)) copy[key] = source[key]
    let line: string
    try {
      line = JSON.stringify(copy)
    } catch (cause) {
      return storeError(`cannot create session ${JSON.stringify(header.id)}: seed event ${i} is not JSON`, header.id, cause)
    }
    lines.push(line)
  }
  const last = seed[seed.length - 1] as { readonly type?: unknown }
  if (last.type !== "session/end-seed") {
    const time = (last as { readonly time?: unknown }).time
    lines.push(JSON.stringify({ type: "session/end-seed", seq: seed.length, time, data: {} }))
  }
  const decoded = decodeLog(encodeHeader(header) + lines.join("\n") + "\n")
  if (Either.isLeft(decoded)) {
    const { line, message } = decoded.left
    return refuse(line >= 2 ? `seed event ${line - 2}: ${message}` : message)
  }
  const events = decoded.right.events as Array<SessionEvent>
  const violation = Invariant.check(events, { header })[0]
  if (violation !== undefined) {
    return refuse(`the seed breaks rule ${violation.rule} of §12 at seq ${violation.seq}: ${violation.message}`)
  }
  const open = openAtEnd(events)
  if (open !== undefined) return refuse(`the seed ends inside ${open} (a fork child inherits whole turns)`)
  return { header, events, lines }
}

/** The turn or compaction bracket left open at the end of `events`, in words, if any. */
const openAtEnd = (events: ReadonlyArray<SessionEvent>): string | undefined => {
  let turn: unknown = undefined
  let compaction: unknown = undefined
  for (const e of events) {
    const data = e.data as { readonly turn?: unknown; readonly compactionId?: unknown }
    if (e.type === "turn/start") turn = data.turn
    else if (e.type === "turn/end") turn = undefined
    else if (e.type === "compaction/start") compaction = data.compactionId
    else if (e.type === "compaction/end") compaction = undefined
  }
  return compaction !== undefined
    ? `compaction ${JSON.stringify(compaction)}`
    : turn !== undefined
    ? `turn ${JSON.stringify(turn)}`
    : undefined
}

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

/**
 * The key of a store's header-only read (an internal member of the SQL store's service, under a
 * symbol no public type names): `(id) => Effect<header JSON text | undefined, SessionStoreError>`,
 * undefined for a session that does not exist. A reader that only needs a header field (the cluster
 * entity's check for a child session, §21 rule 9) uses it where the store has one, `read` otherwise.
 */
export const HeaderTextId: unique symbol = Symbol.for("effect-agent-loop/SessionStore/headerText")

/** A store service that may carry a header-only read. */
export interface WithHeaderText {
  readonly [HeaderTextId]?: ((id: string) => Effect.Effect<string | undefined, SessionStoreError>) | undefined
}

/**
 * The key of a store's change probe (an internal member of the SQL store's service, like
 * `HeaderTextId`): for every session, the last seq and the writers row's text (undefined when no
 * writer row holds it). `agent-loop inspect` (§29) asks it twice a second to tell a session that
 * grew, and a running one, without reading any log.
 */
export const ProbeId: unique symbol = Symbol.for("effect-agent-loop/SessionStore/probe")

/** What the change probe reports of one session. */
export interface Probe {
  readonly lastSeq: number
  readonly writer: string | undefined
}

/** A store service that may carry a change probe. */
export interface WithProbe {
  readonly [ProbeId]?: Effect.Effect<ReadonlyMap<string, Probe>, SessionStoreError> | undefined
}
