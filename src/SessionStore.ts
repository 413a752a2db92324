/**
 * The session store (DESIGN.md §3): where session logs live. `layerMemory` keeps them in
 * memory; `layerJsonl` writes one `<id>.jsonl` file per session (header line, one event a line)
 * through @effect/platform's `FileSystem`. The store assigns `seq` (contiguous from 0) and
 * `time` (epoch ms from the Effect `Clock`) when it accepts an append, and serializes appends
 * per session. An append is durable when it returns: in memory for `layerMemory`, `write(2)`
 * returned for `layerJsonl`, and also fsynced (group commit through a queue) for
 * `layerJsonl({ fsync: "batch" })` (DESIGN.md §3.3).
 *
 * @since 0.1.0
 */
import { Context, Effect, Schema } from "effect"
import type { EventDraft, SessionEvent, SessionHeader, SessionId } from "./SessionEvent.js"

/**
 * An I/O failure of the store (open, write, fsync, read). A failed append changes nothing in
 * memory (DESIGN.md §3.3).
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionStoreError extends Schema.TaggedError<SessionStoreError>()("SessionStoreError", {
  message: Schema.String,
  sessionId: Schema.optional(Schema.String),
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * A log that cannot be read: corruption before the tail, a header that is not a session header,
 * a legacy shape the reader cannot import. `line` is 1-based (line 1 is the header)
 * (DESIGN.md §3.1).
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionLogError extends Schema.TaggedError<SessionLogError>()("SessionLogError", {
  message: Schema.String,
  path: Schema.optional(Schema.String),
  line: Schema.Number
}) {}

/**
 * A session with this id already exists, or no session has this id.
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  message: Schema.String,
  sessionId: Schema.String
}) {}

/**
 * What reading a log gives: the header, every event (DSH v0 logs normalized: `seq`/`time`
 * assigned, packed chunk rows expanded), and warnings (e.g. a torn last line ignored).
 *
 * @since 0.1.0
 * @category models
 */
export interface LogContents {
  readonly header: SessionHeader
  readonly events: ReadonlyArray<SessionEvent>
  readonly warnings: ReadonlyArray<string>
  /** Byte length of the complete lines; a torn tail starts here (JSONL only). */
  readonly validBytes?: number | undefined
  /** True when a torn last line was ignored. */
  readonly tornTail?: boolean | undefined
}

/**
 * An open session log, the only writer of its session (DESIGN.md §3.3).
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionLog {
  readonly id: SessionId
  readonly header: SessionHeader
  /** The file of a JSONL log. */
  readonly path?: string | undefined
  /**
   * Assigns `seq` and `time` and appends the drafts in order, all or nothing. Returns the
   * committed, frozen events once durable. Concurrent calls are serialized.
   */
  readonly append: (drafts: ReadonlyArray<EventDraft>) => Effect.Effect<ReadonlyArray<SessionEvent>, SessionStoreError>
  /** Every committed event so far (including the events read when the log was opened). */
  readonly events: () => ReadonlyArray<SessionEvent>
}

/**
 * @since 0.1.0
 * @category services
 */
export interface SessionStoreService {
  /** Creates a new empty session (header written durably). */
  readonly create: (options?: {
    readonly id?: SessionId | undefined
    readonly cwd?: string | undefined
    readonly createdAt?: number | undefined
  }) => Effect.Effect<SessionLog, SessionStoreError>
  /**
   * Opens an existing session for appending. A torn last line is cut back to the end of the
   * last complete line before anything can be appended (DESIGN.md §3.1).
   */
  readonly open: (id: SessionId) => Effect.Effect<SessionLog, SessionStoreError | SessionLogError | SessionNotFound>
  /** Reads a session without opening it for writing. */
  readonly read: (id: SessionId) => Effect.Effect<LogContents, SessionStoreError | SessionLogError | SessionNotFound>
  /** Ids of the stored sessions, sorted. */
  readonly list: Effect.Effect<ReadonlyArray<SessionId>, SessionStoreError>
}

/**
 * @since 0.1.0
 * @category services
 */
export class SessionStore extends Context.Tag("effect-agent-loop/SessionStore")<SessionStore, SessionStoreService>() {}
