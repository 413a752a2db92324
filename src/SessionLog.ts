/**
 * The session log (§1, §3): the append-only, totally ordered list of durable events
 * of one session, as a store hands it out. This module is the leaf the stores, the codec and the
 * agent share: the log's interfaces (`SessionLog` for its one writer, `SessionLogView` for
 * readers), what reading a log gives (`LogContents`), and the store errors.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import { Schema } from "effect"
import type { EventDraft, SessionEvent, SessionHeader, SessionId } from "./SessionEvent.js"

/**
 * An I/O failure of the store (create, open, write, fsync, read, list), an id that cannot name
 * a session, an event the reader would refuse, or an append to a closed or broken log. `cause`
 * is the lower error when there is one (a platform or SQL error). A failed append changes
 * nothing in memory (§3.3).
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
 * An append refused because another writer took the session over (§3.3): ownership of
 * a session is a fencing token, its writer epoch, which every take of the session increments;
 * each append checks, inside its own transaction, that its log's epoch is still the current one,
 * and otherwise writes nothing and fails with this error. `epoch` is this log's, `current` the
 * session's now (when it could be read). The log is fenced for good: every later append fails
 * the same way; the new owner repairs what this writer left open (§10). An agent that gets it
 * stops writing, as one whose log broke does.
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionFenced extends Schema.TaggedError<SessionFenced>()("SessionFenced", {
  message: Schema.String,
  sessionId: Schema.String,
  epoch: Schema.Number,
  current: Schema.optional(Schema.Number)
}) {}

/**
 * What an append can fail with: an I/O failure (`SessionStoreError`) or a writer fenced by a
 * newer owner of the session (`SessionFenced`).
 *
 * @since 0.1.0
 * @category errors
 */
export type SessionWriteError = SessionStoreError | SessionFenced

/**
 * A log that cannot be read: corruption before the tail (a line that is not JSON, a bad
 * envelope, a `seq` out of order, core `data` that fails its schema), a header that is not a
 * session header, a legacy shape the reader cannot import. `line` is 1-based (line 1 is the
 * header); `message` names the line and the file or the SQL row (§3.1). `Agent.resume`
 * and `Agent.repair` also fail with it for a log repair cannot make valid (§10, §12):
 * `line` is then the line of the first violation.
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
 * No session has this id (`open`, `read`). Creating a session whose id exists is a
 * `SessionStoreError`.
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  message: Schema.String,
  sessionId: Schema.String
}) {}

/**
 * Every error a store operation can fail with.
 *
 * @since 0.1.0
 * @category errors
 */
export type SessionLogFailure = SessionStoreError | SessionFenced | SessionLogError | SessionNotFound

/**
 * What reading a log gives: the header, every event, deep-frozen (DSH v0 logs normalized:
 * `seq`/`time` assigned, packed chunk rows expanded into `assistant/chunk` events), and warnings
 * (a torn last line ignored, blank lines skipped). `validBytes` and `tornTail` are set for
 * logs read from bytes (§3.1).
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
 * What `SessionStore.create` takes. Every field is optional; a field left out writes nothing
 * into the header, so a session created without the child fields has the header it always had.
 * A value of the wrong shape is a `SessionStoreError` (`cannot create session "ID": …`) and
 * nothing is created.
 *
 * @since 0.1.0
 * @category models
 */
export interface CreateOptions {
  /**
   * The session id (default: the `IdGenerator` in context, else a random UUID); it must name a
   * file: `[A-Za-z0-9_-][A-Za-z0-9._-]*`.
   */
  readonly id?: SessionId | undefined
  /** The working directory, recorded in the header (`cwd`). */
  readonly cwd?: string | undefined
  /** Epoch ms, recorded in the header (`createdAt`; default: the `Clock`). */
  readonly createdAt?: number | undefined
  /**
   * The id of the session that started this one as a child (a sub-agent): the header's
   * `parentSession` (§3.1). A session id (same rule as `id`), not this session's own.
   * The store does not check that the parent exists.
   */
  readonly parentSession?: SessionId | undefined
  /**
   * The id of the parent's tool call that started this session: the header's `parentCallId`
   * (§3.1), a non-empty string.
   */
  readonly parentCallId?: string | undefined
  /**
   * Why the session exists, as the header's `origin` (§3.1): `"subagent"`, the only value the
   * log reader accepts (as DSH's own header check).
   */
  readonly origin?: "subagent" | undefined
  /**
   * How many delegations deep the session is: the header's `delegationDepth` (§3.1), a whole
   * number ≥ 1 (a parent's direct child is 1).
   */
  readonly delegationDepth?: number | undefined
  /**
   * The events a fork child inherits from its parent (typically a prefix of the parent's log,
   * ending after a `turn/end`), written by the create's one durable write (one `write(2)` of
   * the JSONL file, one SQL transaction) as DSH writes a fork child (§3.1): the header gets
   * `seedLength` = the seed's length; the log's first events are the seed's, renumbered `seq`
   * 0, 1, … (times, `data` and other envelope fields kept), followed by a `session/end-seed`
   * (`seq` = `seedLength`, the last seed event's time), unless the seed is empty or already ends
   * with one. So the seed is exactly the events before `seedLength` (history includes them; the
   * inbox, usage and rules 4–6 of §12 start after them), and `Agent.resume` of the fresh child
   * appends nothing: its turn numbering continues after the seed's last turn. A seed event that
   * the log reader would refuse (not an object, no string `type`, no numeric `time`, core `data`
   * of the wrong shape, not JSON), a seed that breaks a rule of §12 as the child's log, or one
   * that ends inside a turn or a compaction bracket is a `SessionStoreError` naming the event.
   */
  readonly seed?: ReadonlyArray<SessionEvent> | undefined
}

/**
 * How to read a log (projections: `History.derive`, `Inbox.replay`, `Delivery.fateOf`,
 * `Invariant.check`): pass the `header` (what the store read), or say it directly. `dsh`
 * defaults to `header.version === 0` (a DSH v0 log: `next-step` items are non-waking, DSH's own
 * rules apply); `seedLength` defaults to `header.seedLength` (events with `seq < seedLength` are
 * the prefix inherited from a parent session, §3.1).
 *
 * @since 0.1.0
 * @category models
 */
export interface LogOptions {
  readonly header?: SessionHeader | undefined
  readonly dsh?: boolean | undefined
  readonly seedLength?: number | undefined
}

/**
 * A session log as its readers see it: its id, header, file (JSONL) and committed events. What
 * `agent.log` is: it cannot append (only the agent writes its session, past every invariant of
 * §12).
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionLogView {
  readonly id: SessionId
  readonly header: SessionHeader
  /** The file of a JSONL log. */
  readonly path?: string | undefined
  /**
   * Every committed event so far (including the events read when the log was opened), in `seq`
   * order. A live read-only view that grows with later appends: `slice()` it for a snapshot.
   */
  readonly events: () => ReadonlyArray<SessionEvent>
}

/**
 * An open session log, the only writer of its session (§3.3). A store hands out one
 * `SessionLog` per session: `open` of a session that is already open returns the same log.
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionLog extends SessionLogView {
  /**
   * Assigns `seq` (continuing the log) and `time` (`Clock.currentTimeMillis` when the append is
   * accepted, one value for the whole call) and appends the drafts in order, all or nothing:
   * one `write` for the whole call in the JSONL store, one transaction in SQL. Deep-freezes the
   * drafts' data in place. Returns the committed, frozen events once durable. Concurrent calls
   * are serialized and each call's events are adjacent. Fails with `SessionStoreError` when the
   * write (or, with `fsync: "batch"`, the fsync) fails, or when an event is one the reader would
   * refuse; after a failed write the file is cut back to its last committed event and nothing
   * changed (SQL: a failed statement is settled first, so a statement committed despite its
   * failed connection succeeds; one whose outcome cannot be found out breaks the log). A failed fsync breaks the log (later appends fail): its events were written and
   * stay in `events()`, but their durability is unknown. Fails with `SessionFenced` (nothing
   * written, for good) when another writer took the session over (SQL stores).
   */
  readonly append: (drafts: ReadonlyArray<EventDraft>) => Effect.Effect<ReadonlyArray<SessionEvent>, SessionWriteError>
  /**
   * Offered by a store whose appends are durable when a synchronous call returns (memory; JSONL
   * with `fsync: "none"`, where durable means `write(2)` returned, §3.3): the same as
   * `append`, with `time` (epoch ms) given by the caller, as one synchronous step that returns
   * the committed events or the `SessionStoreError` (never throws). The agent then runs each
   * critical section (validate → append → state) as one `Ref.modify`, with no lock: nothing can
   * interleave with a synchronous call. Absent when an append must wait (`fsync: "batch"`, SQL).
   */
  readonly appendSync?:
    | ((drafts: ReadonlyArray<EventDraft>, time: number) => ReadonlyArray<SessionEvent> | SessionStoreError)
    | undefined
  /**
   * Offered by the file and SQL stores: closes this log to appends and frees its writer (the
   * JSONL lock file, the SQL writers row) without closing the store, so that another store or
   * process can take the session at once. Later appends fail with `SessionStoreError`; a later
   * `open` of the session reads it again. Never fails (a writer row that cannot be deleted is
   * stale, and taken over by the next writer).
   */
  readonly close?: Effect.Effect<void> | undefined
}
