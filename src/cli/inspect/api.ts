/**
 * The JSON shapes of `agent-loop inspect`'s HTTP API (§29): what the server (`server.ts`) sends
 * and the page (`ui/inspect/`) reads. Types only: the page's bundle imports nothing from here at
 * run time. Times are epoch milliseconds (`0` where a DSH fixture log left them out), `seq` is the
 * event's position in its session log (§3), and `row` is an index into the session's timeline
 * rows (`GET /api/sessions/ID/rows`).
 *
 * Endpoints (all `GET`, all JSON but the stream; a bad id, an unknown session or a path outside
 * these is `404 {"error": "..."}`):
 * - `/api/store` → `StoreInfo`
 * - `/api/sessions` → `SessionList`
 * - `/api/sessions/ID` → `SessionView`
 * - `/api/sessions/ID/rows?from=N&count=M` → `RowPage` (`count` at most 2,000)
 * - `/api/sessions/ID/events?from=SEQ&count=M` → `EventPage` (the raw log events, at most 500;
 *   an event whose JSON is over 256 KiB is sent as `{type, seq, time, omitted}`)
 * - `/api/sessions/ID/request?turn=T&step=S` → `RequestView`
 * - `/api/sessions/ID/messages/MID` → `MessageStory`
 * - `/api/sessions/ID/live` → `text/event-stream`: a first event `changed` with data
 *   `LiveChange` for the log as it is when the stream opens (a page that read that `version`
 *   already ignores it), then one each time the log changes (seen within 250 ms for a JSONL
 *   store, 500 ms for SQL); an event `unreadable` with data `ApiError` when the log cannot be
 *   read any more (cut, garbled, removed); and `:` comment lines to keep it open.
 * - `/api/live` → `text/event-stream`: a first event `sessions` with data `{version}`, then one
 *   each time the list of sessions or a session's summary may have changed.
 */

/** The store being inspected. */
export interface StoreInfo {
  readonly kind: "jsonl" | "sqlite" | "pg"
  /** The directory, the database file, or `host:port/database` (never a password). */
  readonly where: string
  /** True while no action can change a session (the only mode today). */
  readonly readOnly: true
  /** Whether `--prices` was given (`SessionSummary.cost` is then filled where the model is priced). */
  readonly prices: boolean
  /** The version of `agent-loop`. */
  readonly version: string
}

/**
 * A session's state: `idle`; `running` (a turn is open and a live writer holds the session);
 * `open-turn` (a turn is open and no writer holds it: a crash left it, `resume` repairs it);
 * `waiting` (an approval question is open, §26).
 */
export type SessionStatus = "idle" | "running" | "open-turn" | "waiting"

/** Token totals (§18). */
export interface Tokens {
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly reasoning: number
  readonly total: number
}

/** One line of the sessions list. */
export interface SessionSummary {
  readonly id: string
  /** A DSH `session/title`, else the first user prompt's text (cut at 200 characters), else `""`. */
  readonly title: string
  readonly createdAt: number
  /** The time of the last event (`createdAt` when there is none). */
  readonly lastActivity: number
  readonly status: SessionStatus
  readonly turns: number
  readonly events: number
  readonly tokens: Tokens
  /** USD, with `--prices` and when every model used is priced; absent otherwise. */
  readonly cost?: number | undefined
  /** The header's `parentSession` (a sub-agent's session, §27), as an id of this store when it is one. */
  readonly parent?: string | undefined
  /** True when `parent` is no session of this store (shown as text, not as a link). */
  readonly parentOutside?: true | undefined
  /** Child sessions named by the log (`subagent/start`) or by their headers, in this store. */
  readonly children: ReadonlyArray<string>
  /** `effect-agent-loop` (ours) or `dsh` (a DSH v0 log). */
  readonly format: "effect-agent-loop" | "dsh"
}

/** `GET /api/sessions`. `problems`: sessions that could not be read, with why. */
export interface SessionList {
  readonly sessions: ReadonlyArray<SessionSummary>
  readonly problems: ReadonlyArray<{ readonly id: string; readonly message: string }>
  /** Changes each time the list may have changed (`/api/live`). */
  readonly version: number
}

/** The kind of a supplementary input (§5): by its queue and source. */
export type DeliveryKind = "followup" | "steer" | "inject"

/** A message's fate (§12): `Delivery.Fate` as JSON. */
export type Fate =
  | { readonly _tag: "Pending" }
  | { readonly _tag: "Entered"; readonly turn: number; readonly step: number }
  | { readonly _tag: "Dropped"; readonly reason: string }

/**
 * One bar of the inbox lane: a message from its insertion to its fate. `fateRow` is the row of
 * the event that decided it (`null` while it is pending: the bar runs to the last row). `lane`
 * is the bar's column (0-based), chosen so that bars that overlap never share one.
 */
export interface DeliveryBar {
  readonly id: string
  readonly kind: DeliveryKind
  /** The source as a short label: `user`, `plugin:NAME`, `tool:CALL`, `hook:NAME`, … */
  readonly source: string
  /** The message's text, cut at 200 characters. */
  readonly text: string
  readonly insertedRow: number
  readonly insertedSeq: number
  readonly fateRow: number | null
  readonly fateSeq: number | null
  readonly fate: Fate
  readonly lane: number
}

/** A turn's span of rows. `reason` as `turn/end` logged it (absent while the turn is open). */
export interface TurnSpan {
  readonly turn: number
  readonly startRow: number
  readonly endRow: number
  readonly startTime: number
  readonly endTime: number
  readonly steps: number
  readonly reason?: string | undefined
}

/** `GET /api/sessions/ID`: everything but the rows themselves. */
export interface SessionView {
  readonly summary: SessionSummary
  /** The log's header line as stored. */
  readonly header: unknown
  /** The reader's warnings (a torn last line, …). */
  readonly warnings: ReadonlyArray<string>
  /** The number of timeline rows. */
  readonly rows: number
  readonly turns: ReadonlyArray<TurnSpan>
  readonly deliveries: ReadonlyArray<DeliveryBar>
  /** The number of lanes the bars use. */
  readonly lanes: number
  /** Changes each time the log grows. */
  readonly version: number
}

/**
 * The kind of a timeline row; one row per event shown, in log order:
 * - `inserted`: a message put into the inbox (`ids` = [its id], `deliveryKind`, `source`);
 * - `claimed`: a pre-step's claim of the batch (`ids` = the claimed ids);
 * - `canceled`: messages removed by a cancel or dispose (`ids`, `text` = why);
 * - `turn-start`, `turn-end` (`text` = the reason; `level: "error"` for errors);
 * - `step-start` (`request: true`: the step's model request can be opened), `step-end`;
 * - `pre-step`: the pre-step's decision: `enter` with the entered ids, or `reject` with its
 *   reason (`decision`);
 * - `message`: a user-role message that entered the step (`ids` = [its id]);
 * - `assistant`: the model's output (`text`, `usage`, `finish`);
 * - `tool-call` (`callId`, `name`, `text` = the arguments; `durationMs` until its result);
 * - `tool-result` (`callId`, `text`, `level: "error"` for an error result);
 * - `compaction` (`text` = what was replaced), `approval`, `subagent` (`child` = the child's
 *   session id), `retry`, `error`, `event` (any other event: `text` = its type).
 */
export type RowKind =
  | "inserted"
  | "claimed"
  | "canceled"
  | "turn-start"
  | "turn-end"
  | "step-start"
  | "step-end"
  | "pre-step"
  | "message"
  | "assistant"
  | "tool-call"
  | "tool-result"
  | "compaction"
  | "approval"
  | "subagent"
  | "retry"
  | "error"
  | "event"

/** One timeline row. Text fields are the log's content as text, never markup. */
export interface Row {
  readonly row: number
  readonly seq: number
  readonly time: number
  readonly turn: number
  readonly step: number
  readonly kind: RowKind
  /** A short label: `turn 2`, `step 1`, `followup`, `read_file`, … */
  readonly label: string
  /** The content, cut at 400 characters. */
  readonly text?: string | undefined
  readonly level?: "error" | "warn" | undefined
  readonly ids?: ReadonlyArray<string> | undefined
  readonly deliveryKind?: DeliveryKind | undefined
  readonly source?: string | undefined
  readonly decision?: "enter" | "reject" | undefined
  readonly callId?: string | undefined
  readonly name?: string | undefined
  readonly durationMs?: number | undefined
  readonly usage?: Tokens | undefined
  readonly finish?: string | undefined
  readonly request?: true | undefined
  readonly child?: string | undefined
}

/** `GET /api/sessions/ID/rows`. */
export interface RowPage {
  readonly from: number
  readonly rows: ReadonlyArray<Row>
  /** The total number of rows now. */
  readonly total: number
}

/** `GET /api/sessions/ID/events`: raw events as stored. */
export interface EventPage {
  readonly from: number
  readonly events: ReadonlyArray<unknown>
  readonly total: number
}

/** A content block as text for the page (cut at 64 Ki characters, with a note of the rest). */
export interface ViewBlock {
  readonly type: string
  /** Text, reasoning, a tool call's `name(arguments)`, a tool result's text, `[image/png, 1234 bytes]`. */
  readonly text: string
}

/** A message as the page shows it. */
export interface ViewMessage {
  readonly id?: string | undefined
  readonly role: string
  readonly source?: string | undefined
  readonly blocks: ReadonlyArray<ViewBlock>
}

/**
 * `GET /api/sessions/ID/request?turn=T&step=S`: the model request of a step, exactly the
 * messages `History.derive` gives for the log as it stood when the step called the model
 * (§12), with the request header in force (provider, model, instructions, tool names).
 */
export interface RequestView {
  readonly turn: number
  readonly step: number
  /** The step's `step/start`: its seq and its row. */
  readonly seq: number
  readonly row: number
  readonly provider?: string | undefined
  readonly model?: string | undefined
  readonly instructions?: string | undefined
  readonly tools: ReadonlyArray<string>
  readonly messages: ReadonlyArray<ViewMessage>
}

/** One step of a message's life, with the event that proves it. */
export interface StoryStep {
  readonly what: "inserted" | "claimed" | "entered" | "dropped"
  readonly seq: number
  readonly row: number
  readonly time: number
  /** `entered at turn 2 step 1`, `dropped: rejected (blocked: no tools today)`, … */
  readonly text: string
  /** The raw log event. */
  readonly event: unknown
}

/** `GET /api/sessions/ID/messages/MID`: a message's whole life (§12). */
export interface MessageStory {
  readonly id: string
  readonly kind?: DeliveryKind | undefined
  readonly source?: string | undefined
  readonly message?: ViewMessage | undefined
  /** Absent for a message that never went through the inbox. */
  readonly fate?: Fate | undefined
  readonly steps: ReadonlyArray<StoryStep>
}

/** The data of a `changed` event of `/api/sessions/ID/live`. */
export interface LiveChange {
  readonly version: number
  readonly rows: number
  readonly events: number
}

/** The body of every error answer. */
export interface ApiError {
  readonly error: string
}
