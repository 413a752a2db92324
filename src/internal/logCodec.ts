/**
 * The JSONL codec of session logs (§3.1): pure functions that turn a log file's text
 * into its header and events (our format v1 and DSH format v0), and events into lines.
 *
 * Reading validates every line at this I/O edge: the envelope (`type`, `seq` = index, `time`)
 * and the `data` of every core event against `coreDataSchemas` (DSH v0: a lenient variant that
 * checks only what the projections need). Validation has two layers with the same meaning: a
 * hand-written fast check per core type that accepts exactly the values the schema accepts
 * (`test/SessionEvent.test.ts` pins each to its schema with arbitrary values and mutations), and,
 * when it says no, the schema's compiled `decodeUnknownEither`, which supplies the error message.
 * Values are kept exactly as parsed (key order and unknown fields) and deep-frozen.
 *
 * Rules of the reader:
 * - Line numbers are 1-based physical lines; line 1 is the header: `type: "session"`, `version`
 *   1 with `format: "effect-agent-loop"`, or `version` 0 (DSH). Other versions are refused.
 * - Every event must be an object with a string `type`. Our format also needs `seq` equal to
 *   the event's index and a finite numeric `time`. Events of unknown types (plugins, DSH
 *   `assistant/chunk`, `session/title`, …) are kept opaque: only their envelope is checked.
 * - The empty string after the final newline is not a line. Other blank (whitespace-only) lines
 *   are skipped wherever they are, with one warning (DSH's own reader skips empty lines too; our
 *   writer never writes them).
 * - The last line is torn when the file does not end with a newline and that line is not JSON:
 *   it is ignored with a warning, `tornTail: true`, and `validBytes` is the byte length up to the
 *   end of the previous line. A last line without a newline that parses is complete (whatever it
 *   contains is validated like any other line).
 * - A line nested deeper than `MAX_LINE_DEPTH` (256) levels of arrays and objects is a failure
 *   naming it; the stores refuse to append one (`checkDraft`).
 * - Anything else that cannot be read is a `LogDecodeFailure` naming the line.
 *
 * DSH v0 (`"version":0` header, `../shared/fixtures/dsh/SOURCES.md`):
 * - a missing `seq` is the index in the expanded event list; a present one must equal it;
 * - a missing `time` is the previous event's time (0 for the first);
 * - packed rows `text-chunks` / `reasoning-chunks` / `tool-call-chunks`
 *   (`{type, seq0?, time0?, data:{turn, step, index, dt, texts | id, name?, args}}`) expand to one
 *   `assistant/chunk` per element of `texts`/`args`, with DSH's own expanded shape (its storage
 *   decoder's): `data = {turn, step, chunk}` where `chunk` is
 *   `{type:"text-delta", index, text}`, `{type:"reasoning-delta", index, text}` or
 *   `{type:"tool-call-delta", index, id, argumentsDelta, name?}`. `dt` holds the n-1 gaps (ms)
 *   between consecutive elements: element k's time is `time0 + dt[0] + … + dt[k-1]`; without
 *   `time0` every element takes the previous event's time;
 * - a packed row needs integer `turn`/`step`/`index`, a non-empty string array and a `dt` of
 *   numbers one shorter (as DSH's own decoder does); other fields of its envelope are dropped
 *   with a warning;
 * - core `data` is checked only for what the projections need (messages: string `id`, `role`,
 *   `content` an array of objects with a string `type` (a `text` block with a string `text`, a
 *   `tool-result` block with a string `toolCallId`, an array `content` of such blocks and an
 *   optional boolean `isError`), `source` with a string `kind`; `turn`/`step` non-negative
 *   integers; …): `request/header` is `{header, reason}` there,
 *   `assistant/message` has no `finish`, blocks may be `image {attachment}`;
 * - envelope fields other than `type`/`seq`/`time`/`data` (`surfaceOp`, `sourceEventSeqs`,
 *   `ignorable`, …) are kept; header fields are kept, and a child session's lineage is checked
 *   against `SessionHeaderSchema` (`parentSession` a string, `origin` `"subagent"`,
 *   `delegationDepth` a non-negative integer, as DSH's own header check requires).
 */
import { Either, ParseResult, Schema } from "effect"
import {
  coreDataSchemas,
  coreEventTypes,
  type EventDraft,
  type SessionEvent,
  type SessionHeader,
  SessionHeaderSchema
} from "../SessionEvent.js"
import type { LogContents } from "../SessionLog.js"
import { deeperThan, deepFreeze, freezeWithin, MAX_LINE_DEPTH } from "./json.js"

/** Why a log cannot be read: a 1-based line number and a readable message. */
export interface LogDecodeFailure {
  readonly line: number
  readonly message: string
}

/** The format marker of our header line. */
export const FORMAT = "effect-agent-loop"
/** The version of our format. */
export const VERSION = 1

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/**
 * The frozen header of a new log of our format: `type`, `format`, `version`, `id`, `createdAt`,
 * then, each only when given and in this order, `cwd`, `parentSession`, `parentCallId`, `origin`,
 * `delegationDepth`, `seedLength` (§3.1). Without the optional fields the header is what it
 * always was, byte for byte.
 */
export const makeHeader = (options: {
  readonly id: string
  readonly createdAt: number
  readonly cwd?: string | undefined
  readonly parentSession?: string | undefined
  readonly parentCallId?: string | undefined
  readonly origin?: "subagent" | undefined
  readonly delegationDepth?: number | undefined
  readonly seedLength?: number | undefined
}): SessionHeader => {
  const header: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = {
    type: "session",
    format: FORMAT,
    version: VERSION,
    id: options.id,
    createdAt: options.createdAt
  }
  if (options.cwd !== undefined) header.cwd = options.cwd
  if (options.parentSession !== undefined) header.parentSession = options.parentSession
  if (options.parentCallId !== undefined) header.parentCallId = options.parentCallId
  if (options.origin !== undefined) header.origin = options.origin
  if (options.delegationDepth !== undefined) header.delegationDepth = options.delegationDepth
  if (options.seedLength !== undefined) header.seedLength = options.seedLength
  return Object.freeze(header)
}

/** Serializes a header as one line (with its newline). */
export const encodeHeader = (header: SessionHeader): string => JSON.stringify(header) + "\n"

/**
 * Turns drafts into committed events: `seq` from `firstSeq` on, `time` for all, `data`
 * deep-frozen in place, envelope frozen. Pure apart from freezing the drafts' data.
 */
export const commitDrafts = (
  drafts: ReadonlyArray<EventDraft>,
  firstSeq: number,
  time: number
): Array<SessionEvent> => {
  const out = new Array<SessionEvent>(drafts.length)
  for (let i = 0; i < drafts.length; i++) {
    const draft = drafts[i]!
    const problem = checkDraft(draft)
    if (problem !== undefined) throw new InvalidDraft(problem)
    const surfaceOp = draft.surfaceOp
    out[i] = Object.freeze(
      surfaceOp === undefined
        ? { type: draft.type, seq: firstSeq + i, time, data: deepFreeze(draft.data) }
        : { type: draft.type, seq: firstSeq + i, time, data: deepFreeze(draft.data), surfaceOp: deepFreeze({ ...surfaceOp }) }
    ) as SessionEvent
  }
  return out
}

/**
 * Thrown by `commitDrafts` for a draft the reader would refuse (so that no store accepts an event
 * that makes its log unreadable): a `type` that is not a non-empty string, or core event data
 * that fails the reader's own check, or data nested so deep that its line would nest deeper than
 * `MAX_LINE_DEPTH` (§3.2).
 */
export class InvalidDraft extends Error {}

/** Why the reader would refuse `draft`, or undefined. */
export const checkDraft = (draft: EventDraft): string | undefined => {
  const type = (draft as { readonly type: unknown }).type
  if (typeof type !== "string" || type.length === 0) {
    return `an event type must be a non-empty string, not ${JSON.stringify(type)}`
  }
  // First: the checks below recurse through nested tool results. The envelope is 1 level. A walk
  // of the whole data, frozen parts included: ~0.1 µs for an assistant message event here.
  if (deeperThan(draft.data, MAX_LINE_DEPTH - 1)) {
    return `"${type}" data is nested deeper than ${
      MAX_LINE_DEPTH - 1
    } levels of arrays and objects (a log line may nest ${MAX_LINE_DEPTH})`
  }
  const problem = checkData(currentValidators, type, draft.data)
  return problem === undefined ? undefined : `invalid "${type}" data: ${problem}`
}

/**
 * Serializes events as lines, each ending with a newline. Throws what `JSON.stringify` throws
 * (a cycle, a BigInt).
 */
export const encodeEvents = (events: ReadonlyArray<SessionEvent>): string => {
  let text = ""
  for (let i = 0; i < events.length; i++) text += JSON.stringify(events[i]) + "\n"
  return text
}

/**
 * `encodeEvents` for the events `commitDrafts` just made (the stores' appends): the same bytes,
 * `JSON.stringify(event)` and a newline per event, with the envelope written around
 * `JSON.stringify(data)` instead of walked by the serializer (0.60 µs instead of 0.79 µs of CPU
 * for a 230-byte line here), the type's JSON made once per type (`typeJson`). Only for
 * `commitDrafts`' events, which have exactly `type` (a string), `seq` (an integer), `time`,
 * `data` and maybe `surfaceOp`, in that order (an event read from a log may have other fields
 * and another order: `encodeEvents`). Falls back to `JSON.stringify(event)` where the bytes could
 * differ: a `surfaceOp`, a `time` that is not finite, `data` with a `toJSON` (it would be called
 * with the key `""` instead of `"data"`) or that serializes to nothing (`undefined`: the key is
 * left out). Throws what `JSON.stringify` throws (a BigInt).
 */
export const encodeCommitted = (events: ReadonlyArray<SessionEvent>): string => {
  let text = ""
  for (let i = 0; i < events.length; i++) text += encodeCommittedEvent(events[i]!)
  return text
}

const encodeCommittedEvent = (event: SessionEvent): string => {
  const data = event.data as unknown
  if (
    event.surfaceOp === undefined && Number.isFinite(event.time) &&
    (typeof data !== "object" || data === null || typeof (data as { toJSON?: unknown }).toJSON !== "function")
  ) {
    const json = JSON.stringify(data) as string | undefined
    if (json !== undefined) {
      return "{\"type\":" + typeJson(event.type) + ",\"seq\":" + event.seq + ",\"time\":" + event.time + ",\"data\":" +
        json + "}\n"
    }
  }
  return JSON.stringify(event) + "\n"
}

/** `JSON.stringify` of the types seen (at most `TYPE_JSON_MAX`: a log has a few dozen), the last one apart. */
const typeJsons = new Map<string, string>()
const TYPE_JSON_MAX = 256
let lastType = ""
let lastTypeJson = "\"\""

/**
 * `JSON.stringify(type)`, made once per type: a call of the serializer costs ~1,000 instructions
 * however short the string (4-5% of an append of `sessions-append`, counted under callgrind);
 * the comparison with the last type costs a few, the lookup of another a few hundred.
 */
const typeJson = (type: string): string => {
  if (type === lastType) return lastTypeJson
  let json = typeJsons.get(type)
  if (json === undefined) {
    json = JSON.stringify(type)
    if (typeJsons.size < TYPE_JSON_MAX) typeJsons.set(type, json)
  }
  lastType = type
  lastTypeJson = json
  return json
}

// ---------------------------------------------------------------------------------------------
// Fast checks (each accepts exactly the values its schema accepts)
// ---------------------------------------------------------------------------------------------

type Check = (u: unknown) => boolean

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const isInt = (u: unknown): boolean => typeof u === "number" && Number.isSafeInteger(u) && u >= 0
const isOptInt = (u: unknown): boolean => u === undefined || isInt(u)
const isString = (u: unknown): u is string => typeof u === "string"
const isOptBoolean = (u: unknown): boolean => u === undefined || typeof u === "boolean"
const hasKind = (u: unknown): boolean => isObject(u) && typeof u.kind === "string"

const isBlock = (u: unknown): boolean => {
  if (!isObject(u)) return false
  switch (u.type) {
    case "text":
      return typeof u.text === "string"
    case "tool-call":
      return typeof u.id === "string" && typeof u.name === "string" && typeof u.arguments === "string"
    case "reasoning":
      return typeof u.text === "string"
    case "image":
      return typeof u.mediaType === "string" && typeof u.data === "string"
    case "tool-result":
      return typeof u.toolCallId === "string" && isBlocks(u.content, isBlock) && isOptBoolean(u.isError)
    default:
      return false
  }
}

/**
 * What a DSH v0 content block lacks of the fields the projections read (`Transcript` joins text
 * blocks and reads a tool result's `toolCallId`, `content` and `isError`), or undefined. Blocks
 * of other types are kept as they are (DSH has e.g. `image {attachment}`).
 */
const legacyBlockProblem = (u: Record<string, unknown>): string | undefined => {
  switch (u.type) {
    case "text":
      return typeof u.text === "string" ? undefined : "a \"text\" block needs a string \"text\""
    case "tool-result":
      return typeof u.toolCallId !== "string"
        ? "a \"tool-result\" block needs a string \"toolCallId\""
        : !isBlocks(u.content, isLegacyBlock)
        ? "a \"tool-result\" block needs \"content\": an array of readable blocks"
        : !isOptBoolean(u.isError)
        ? "a \"tool-result\" block's \"isError\" must be a boolean"
        : undefined
    default:
      return undefined
  }
}

/** DSH v0 blocks: an object with a string `type`; known types need what the projections read. */
const isLegacyBlock = (u: unknown): boolean => isObject(u) && typeof u.type === "string" && legacyBlockProblem(u) === undefined

const isBlocks = (u: unknown, block: Check): boolean => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (!block(u[i])) return false
  return true
}

const isMessage = (u: unknown, role: string, block: Check): boolean =>
  isObject(u) && typeof u.id === "string" && u.role === role && isBlocks(u.content, block) && hasKind(u.source)

/**
 * The shape our reader accepts for a `UserMessage` (string `id`, role `"user"`, content blocks
 * of known types, `source` with a string `kind`): what the agent checks before it logs one, so
 * that everything it logs reads back.
 */
export const isUserMessageShape = (u: unknown): boolean => isMessage(u, "user", isBlock)

/** The content blocks our reader accepts (a tool result's content, §2). */
export const isContentShape = (u: unknown): boolean => isBlocks(u, isBlock)

const isTurnStep = (u: Record<string, unknown>): boolean => isInt(u.turn) && isInt(u.step)

const isMessages = (u: unknown, block: Check): boolean => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (!isMessage(u[i], "user", block)) return false
  return true
}

const isOptString = (u: unknown): boolean => u === undefined || typeof u === "string"
const isNumber = (u: unknown): boolean => typeof u === "number"
const isOptFinite = (u: unknown): boolean => u === undefined || (typeof u === "number" && Number.isFinite(u))

/** `TurnEndReason` (§6.4). */
const isTurnEndReason = (u: unknown): boolean => {
  if (!isObject(u)) return false
  switch (u.kind) {
    case "completed":
    case "max-tokens":
    case "interrupted":
      return true
    case "blocked":
      return isOptString(u.reason)
    case "error": {
      const e = u.error
      return isObject(e) && isString(e.message) && isString(e.code) && (e.status === undefined || isNumber(e.status))
    }
    case "aborted":
      return hasKind(u.reason)
    default:
      return false
  }
}

/** `Usage`: every count absent or a finite number. */
const isUsage = (u: unknown): boolean =>
  isObject(u) && isOptFinite(u.inputTokens) && isOptFinite(u.outputTokens) && isOptFinite(u.cacheReadTokens) &&
  isOptFinite(u.cacheWriteTokens) && isOptFinite(u.reasoningTokens) && isOptFinite(u.totalTokens)

const isFinish = (u: unknown): boolean => u === "stop" || u === "tool-calls" || u === "length" || u === "content-filter"

/** `{name, description, parameters}` tool definitions of a `request/header`. */
const isToolDefinitions = (u: unknown): boolean => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) {
    const t: unknown = u[i]
    if (!isObject(t) || !isString(t.name) || !isString(t.description)) return false
  }
  return true
}

/** Our format's checks: exactly what `coreDataSchemas` accepts (pinned by `test/SessionEvent.test.ts`). */
export const currentChecks: { readonly [type: string]: Check } = {
  "agent/inbox/spliced": (u) =>
    isObject(u) && (u.target === "next-turn" || u.target === "next-step") && isInt(u.start) &&
    isOptInt(u.removedCount) && isMessages(u.inserted, isBlock) &&
    (u.outcome === undefined || u.outcome === "canceled") && (u.cause === undefined || hasKind(u.cause)) &&
    (u.wake === undefined || u.wake === true),
  "turn/start": (u) => isObject(u) && isInt(u.turn),
  "turn/end": (u) => isObject(u) && isInt(u.turn) && isTurnEndReason(u.reason),
  "step/start": (u) => isObject(u) && isTurnStep(u),
  "step/end": (u) => isObject(u) && isTurnStep(u),
  "user/message": (u) => isMessage(u, "user", isBlock),
  "assistant/message": (u) =>
    isObject(u) && isTurnStep(u) && isMessage(u.message, "assistant", isBlock) &&
    (u.usage === undefined || isUsage(u.usage)) &&
    (u.response === undefined || (isObject(u.response) && isOptString(u.response.id) && isOptString(u.response.model))) &&
    (u.finish === undefined || isFinish(u.finish)) && (u.interrupted === undefined || u.interrupted === true),
  "tool/call": (u) => isObject(u) && isTurnStep(u) && isString(u.callId) && isString(u.name) && isString(u.arguments),
  "tool/result": (u) =>
    isObject(u) && isTurnStep(u) && isMessage(u.message, "user", isBlock) &&
    (u.error === undefined || (isObject(u.error) && isString(u.error.name) && isString(u.error.code))),
  "request/header": (u) =>
    isObject(u) && isTurnStep(u) && isString(u.provider) && isString(u.model) && isOptString(u.instructions) &&
    isToolDefinitions(u.tools) && isObject(u.settings),
  "session/end-seed": isObject
}

/** DSH v0's checks: exactly what `legacyDataSchemas` accepts (pinned by `test/SessionEvent.test.ts`). */
export const legacyChecks: { readonly [type: string]: Check } = {
  "agent/inbox/spliced": (u) =>
    isObject(u) && (u.target === "next-turn" || u.target === "next-step") && isInt(u.start) &&
    isOptInt(u.removedCount) && isMessages(u.inserted, isLegacyBlock) &&
    isOptString(u.outcome) && (u.cause === undefined || hasKind(u.cause)),
  "turn/start": (u) => isObject(u) && isInt(u.turn),
  "turn/end": (u) => isObject(u) && isInt(u.turn) && hasKind(u.reason),
  "step/start": (u) => isObject(u) && isTurnStep(u),
  "step/end": (u) => isObject(u) && isTurnStep(u),
  "user/message": (u) => isMessage(u, "user", isLegacyBlock),
  "assistant/message": (u) =>
    isObject(u) && isTurnStep(u) && isMessage(u.message, "assistant", isLegacyBlock) && isOptBoolean(u.interrupted),
  "tool/call": (u) => isObject(u) && isTurnStep(u) && isString(u.callId) && isString(u.name),
  "tool/result": (u) =>
    isObject(u) && isTurnStep(u) && isMessage(u.message, "user", isLegacyBlock) &&
    (u.error === undefined ||
      (isObject(u.error) && isString(u.error.code) && isOptString(u.error.name))),
  "request/header": isObject,
  "session/end-seed": isObject
}

// ---------------------------------------------------------------------------------------------
// Schemas of DSH v0 core data: the structure the projections need, nothing more
// ---------------------------------------------------------------------------------------------

const Int = Schema.Number.pipe(Schema.int(), Schema.nonNegative())
const Open = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const LegacyBlock = Schema.Struct({ type: Schema.String }, Open).pipe(
  Schema.filter((block) => legacyBlockProblem(block), { identifier: "ContentBlock" })
)
const Source = Schema.Struct({ kind: Schema.String }, Open)
const legacyMessage = (role: "user" | "assistant") =>
  Schema.Struct({ id: Schema.String, role: Schema.Literal(role), content: Schema.Array(LegacyBlock), source: Source }, Open)
const LegacyUser = legacyMessage("user")
const TurnStep = { turn: Int, step: Int }

/**
 * Schemas of DSH v0 core data (the structure the projections need, nothing more), the reader's
 * counterpart of `coreDataSchemas` for `"version":0` logs.
 */
export const legacyDataSchemas: { readonly [type: string]: Schema.Schema<any, any, never> } = {
  "agent/inbox/spliced": Schema.Struct(
    {
      target: Schema.Literal("next-turn", "next-step"),
      start: Int,
      removedCount: Schema.optional(Int),
      inserted: Schema.Array(LegacyUser),
      outcome: Schema.optional(Schema.String),
      cause: Schema.optional(Source)
    },
    Open
  ),
  "turn/start": Schema.Struct({ turn: Int }, Open),
  "turn/end": Schema.Struct({ turn: Int, reason: Source }, Open),
  "step/start": Schema.Struct(TurnStep, Open),
  "step/end": Schema.Struct(TurnStep, Open),
  "user/message": LegacyUser,
  "assistant/message": Schema.Struct(
    { ...TurnStep, message: legacyMessage("assistant"), interrupted: Schema.optional(Schema.Boolean) },
    Open
  ),
  "tool/call": Schema.Struct(
    { ...TurnStep, callId: Schema.String, name: Schema.String, arguments: Schema.Unknown },
    Open
  ),
  "tool/result": Schema.Struct(
    {
      ...TurnStep,
      message: LegacyUser,
      error: Schema.optional(Schema.Struct({ name: Schema.optional(Schema.String), code: Schema.String }, Open))
    },
    Open
  ),
  "request/header": Open,
  "session/end-seed": Open
}

interface Validator {
  readonly fast: Check
  readonly decode: (u: unknown) => Either.Either<unknown, ParseResult.ParseError>
}

const makeValidators = (
  schemas: { readonly [type: string]: Schema.Schema<any, any, never> },
  fast: { readonly [type: string]: Check }
): ReadonlyMap<string, Validator> => {
  const out = new Map<string, Validator>()
  for (const type of coreEventTypes) {
    out.set(type, { fast: fast[type]!, decode: Schema.decodeUnknownEither(schemas[type]!) })
  }
  return out
}

const currentValidators = makeValidators(coreDataSchemas, currentChecks)
const legacyValidators = makeValidators(legacyDataSchemas, legacyChecks)
const decodeHeader = Schema.decodeUnknownEither(SessionHeaderSchema)

/** Returns undefined when `data` is valid for `type`, else the message of the first issue. */
const checkData = (validators: ReadonlyMap<string, Validator>, type: string, data: unknown): string | undefined => {
  const validator = validators.get(type)
  if (validator === undefined || validator.fast(data)) return undefined
  const result = validator.decode(data)
  return Either.isRight(result) ? undefined : describe(result.left)
}

const describe = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const first = issues[0]
  if (first === undefined) return "invalid"
  const at = first.path.length === 0
    ? ""
    : ` at ${first.path.map((p) => typeof p === "number" ? `[${p}]` : `.${String(p)}`).join("")}`
  return `${first.message}${at}`
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

class Failure {
  constructor(readonly line: number, readonly message: string) {}
}

const PACKED: { readonly [type: string]: "text-delta" | "reasoning-delta" | "tool-call-delta" } = {
  "text-chunks": "text-delta",
  "reasoning-chunks": "reasoning-delta",
  "tool-call-chunks": "tool-call-delta"
}

const ENVELOPE_KEYS = new Set(["type", "seq", "time", "data"])

const isBlank = (line: string): boolean => {
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i)
    if (c !== 32 && c !== 9 && c !== 13 && c !== 10) return false
  }
  return true
}

const utf8Length = (text: string): number => {
  let n = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) n += 1
    else if (c < 0x800) n += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4
        i++
      } else n += 3
    } else n += 3
  }
  return n
}

const jsonKind = (u: unknown): string => u === null ? "null" : Array.isArray(u) ? "an array" : typeof u

/**
 * The size of the pieces a log's bytes are decoded in (`decodeLog`): each piece is cut after a
 * newline, decoded, read line by line and dropped, so that the bytes and the whole text are never
 * held at once (a 200 MiB log took 230 MB more peak RSS decoded whole: the bench's `replay`).
 */
const PIECE_BYTES = 1 << 20

/**
 * Logs of more bytes than this are decoded whole, as one string, as they always were: their text
 * may exceed the longest string V8 can make (2^29 - 24 UTF-16 units on 64-bit builds, 2^28 - 16 on
 * 32-bit ones), which `decodeLog` reports as a log too large to read. A log of at most this many
 * bytes decodes to at most as many UTF-16 units (no UTF-8 sequence decodes to more units than it
 * has bytes), so its text always fits and reading it in pieces refuses nothing whole decoding
 * would not.
 */
const PIECEWISE_MAX_BYTES = 2 ** 28 - 16

/**
 * Decodes a whole log (bytes as read from disk, or text). `validBytes` and `tornTail` are always
 * set. Fails with the first line that cannot be read.
 *
 * Bytes are decoded a piece at a time (`PIECE_BYTES`, each cut after a newline byte), which gives
 * the very text of decoding them whole: a newline byte never occurs inside a multi-byte UTF-8
 * sequence and ends any malformed one, so every piece's replacement characters are those of the
 * whole; a byte order mark is skipped at the start of the log only (the pieces after the first are
 * decoded with `ignoreBOM`), as whole decoding skips it.
 */
export const decodeLog = (input: string | Uint8Array): Either.Either<LogContents, LogDecodeFailure> => {
  let pieces: Pieces
  let validBytesOf: (charEnd: number | undefined) => number
  if (typeof input === "string") {
    pieces = onePiece(input)
    validBytesOf = (end) => utf8Length(end === undefined ? input : input.slice(0, end))
  } else {
    const bytes = input
    if (bytes.length <= PIECEWISE_MAX_BYTES) {
      pieces = bytePieces(bytes)
    } else {
      let text: string
      try {
        text = new TextDecoder().decode(bytes)
      } catch (e) {
        // V8 strings hold at most ~2^29 characters (about 512 MiB of text).
        if ((e as { code?: unknown }).code !== "ERR_STRING_TOO_LONG") throw e
        return Either.left({
          line: 1,
          message: `the log is too large to read (${bytes.length} bytes; the reader's limit is about 512 MiB)`
        })
      }
      pieces = onePiece(text)
    }
    // Only a torn last line is cut (`charEnd`: where it starts); a newline byte never occurs
    // inside a multi-byte UTF-8 sequence, so the last "\n" of the text is the last 0x0A of the
    // bytes.
    validBytesOf = (end) => end === undefined ? bytes.length : bytes.lastIndexOf(10) + 1
  }
  try {
    return Either.right(decodeText(pieces, validBytesOf))
  } catch (e) {
    if (e instanceof Failure) return Either.left({ line: e.line, message: e.message })
    throw e
  }
}

/**
 * The text of a log, a piece at a time: `next` returns the next piece, or undefined after the
 * last. Every piece but the last ends with a newline (no line spans two pieces).
 */
interface Pieces {
  readonly next: () => string | undefined
}

const onePiece = (text: string): Pieces => {
  let done = false
  return {
    next: () => {
      if (done) return undefined
      done = true
      return text
    }
  }
}

/** The pieces of `bytes` (`PIECE_BYTES` or more each, cut after a newline byte), decoded. */
const bytePieces = (bytes: Uint8Array): Pieces => {
  let start = 0
  let decoder: InstanceType<typeof TextDecoder> | undefined
  return {
    next: () => {
      const n = bytes.length
      if (start >= n) return undefined
      let end = n
      if (n - start > PIECE_BYTES) {
        const cut = bytes.lastIndexOf(10, start + PIECE_BYTES - 1)
        if (cut >= start) end = cut + 1
        else {
          const after = bytes.indexOf(10, start + PIECE_BYTES)
          if (after !== -1) end = after + 1
        }
      }
      // The first piece skips a byte order mark, as decoding the whole would; later ones keep it.
      const piece = start === 0
        ? new TextDecoder().decode(bytes.subarray(0, end))
        : (decoder ??= new TextDecoder("utf-8", { ignoreBOM: true })).decode(bytes.subarray(start, end))
      start = end
      return piece
    }
  }
}

const decodeText = (
  pieces: Pieces,
  validBytesOf: (charEnd: number | undefined) => number
): LogContents => {
  const warnings: Array<string> = []
  const events: Array<SessionEvent> = []
  let lineNo = 0
  let header: SessionHeader | undefined
  let legacy = false
  let prevTime = 0
  let blankCount = 0
  let firstBlank = 0
  let tornTail = false
  let validChars = 0
  let charsBefore = 0
  let text: string | undefined
  pieces: while ((text = pieces.next()) !== undefined) {
    const n = text.length
    let pos = 0
    while (pos < n) {
      let end = text.indexOf("\n", pos)
      const complete = end !== -1
      if (!complete) end = n
      lineNo++
      const lineStart = pos
      const line = text.slice(pos, end)
      pos = end + 1
      if (line.length === 0 || (line.charCodeAt(0) <= 32 && isBlank(line))) {
        if (blankCount++ === 0) firstBlank = lineNo
        continue
      }
      let row: unknown
      try {
        row = JSON.parse(line)
      } catch (e) {
        if (!complete) {
          if (header === undefined) throw new Failure(lineNo, "incomplete header line (torn write)")
          tornTail = true
          validChars = charsBefore + lineStart
          warnings.push(`line ${lineNo}: torn last line ignored (${line.length} characters, not JSON)`)
          break pieces
        }
        throw new Failure(lineNo, `not JSON: ${e instanceof Error ? e.message : String(e)}`)
      }
      // Before anything walks it (the checks below recurse): freezes the whole line, or refuses it.
      if (!freezeWithin(row, MAX_LINE_DEPTH)) {
        throw new Failure(lineNo, `nested deeper than ${MAX_LINE_DEPTH} levels of arrays and objects (the reader's limit)`)
      }
      if (header === undefined) {
        header = readHeader(row, lineNo)
        legacy = header.version === 0
        continue
      }
      if (!isObject(row)) throw new Failure(lineNo, `event is ${jsonKind(row)}, not an object`)
      const type = row.type
      if (typeof type !== "string") throw new Failure(lineNo, "event has no string \"type\"")
      if (legacy) {
        const packed = PACKED[type]
        if (packed !== undefined) {
          prevTime = expandPacked(row, type, packed, lineNo, events, prevTime, warnings)
          continue
        }
        const event = readLegacyEvent(row, type, lineNo, events.length, prevTime)
        prevTime = event.time
        events.push(event)
        continue
      }
      const seq = row.seq
      if (seq !== events.length) {
        throw new Failure(lineNo, `"${type}" has seq ${JSON.stringify(seq)} where ${events.length} was expected`)
      }
      const time = row.time
      if (typeof time !== "number" || !Number.isFinite(time)) {
        throw new Failure(lineNo, `"${type}" has no numeric "time"`)
      }
      // Core types only: checkData passes any other (one lookup).
      const problem = checkData(currentValidators, type, row.data)
      if (problem !== undefined) throw new Failure(lineNo, `invalid "${type}" data: ${problem}`)
      // Frozen whole by freezeWithin above.
      events.push(row as unknown as SessionEvent)
    }
    charsBefore += n
  }
  if (header === undefined) throw new Failure(1, "empty log: no header line")
  if (blankCount > 0) {
    warnings.push(`${blankCount} blank line${blankCount === 1 ? "" : "s"} skipped (first: line ${firstBlank})`)
  }
  const validBytes = validBytesOf(tornTail ? validChars : undefined)
  return { header, events, warnings, validBytes, tornTail }
}

const readHeader = (row: unknown, lineNo: number): SessionHeader => {
  const decoded = decodeHeader(row)
  if (Either.isLeft(decoded)) throw new Failure(lineNo, `not a session header: ${describe(decoded.left)}`)
  const header = row as SessionHeader
  if (header.version === VERSION) {
    if (header.format !== FORMAT) {
      throw new Failure(lineNo, `version 1 header without "format":"${FORMAT}"`)
    }
  } else if (header.version !== 0) {
    throw new Failure(lineNo, `unsupported log version ${header.version}`)
  }
  return deepFreeze(header)
}

const readLegacyEvent = (
  row: Record<string, unknown>,
  type: string,
  lineNo: number,
  expectedSeq: number,
  prevTime: number
): SessionEvent => {
  const seq = row.seq
  if (seq !== undefined && seq !== expectedSeq) {
    throw new Failure(lineNo, `"${type}" has seq ${JSON.stringify(seq)} where ${expectedSeq} was expected`)
  }
  const time = row.time
  if (time !== undefined && (typeof time !== "number" || !Number.isFinite(time))) {
    throw new Failure(lineNo, `"${type}" has a non-numeric "time"`)
  }
  if (coreEventTypes.has(type)) {
    const problem = checkData(legacyValidators, type, row.data)
    if (problem !== undefined) throw new Failure(lineNo, `unreadable DSH v0 "${type}" data: ${problem}`)
  }
  if (seq !== undefined && time !== undefined) return deepFreeze(row) as unknown as SessionEvent
  const event: Record<string, unknown> = { type, seq: expectedSeq, time: time ?? prevTime, data: row.data }
  for (const key in row) if (!ENVELOPE_KEYS.has(key)) event[key] = row[key]
  return deepFreeze(event) as unknown as SessionEvent
}

/** Expands a DSH packed chunk row into `events`; returns the time of the last element. */
const expandPacked = (
  row: Record<string, unknown>,
  type: string,
  chunkType: "text-delta" | "reasoning-delta" | "tool-call-delta",
  lineNo: number,
  events: Array<SessionEvent>,
  prevTime: number,
  warnings: Array<string>
): number => {
  const fail = (what: string): never => {
    throw new Failure(lineNo, `unreadable DSH v0 "${type}" row: ${what}`)
  }
  const seq0 = row.seq0
  if (seq0 !== undefined && seq0 !== events.length) {
    fail(`seq0 ${JSON.stringify(seq0)} where ${events.length} was expected`)
  }
  const time0 = row.time0
  if (time0 !== undefined && (typeof time0 !== "number" || !Number.isFinite(time0))) fail("non-numeric time0")
  const data = row.data
  if (!isObject(data)) fail("no data object")
  const d = data as Record<string, unknown>
  if (!isInt(d.turn) || !isInt(d.step)) fail("turn and step must be non-negative integers")
  if (!isInt(d.index)) fail("index must be a non-negative integer")
  const tool = chunkType === "tool-call-delta"
  const members = tool ? d.args : d.texts
  if (!Array.isArray(members) || members.length === 0) fail(`${tool ? "args" : "texts"} must be a non-empty array`)
  const items = members as Array<unknown>
  for (let k = 0; k < items.length; k++) if (typeof items[k] !== "string") fail(`element ${k} is not a string`)
  const dt = d.dt
  if (!Array.isArray(dt) || dt.length !== items.length - 1) {
    fail(`dt must hold ${items.length - 1} gaps (one fewer than the elements)`)
  }
  const gaps = dt as Array<unknown>
  for (let k = 0; k < gaps.length; k++) {
    if (typeof gaps[k] !== "number" || !Number.isFinite(gaps[k])) fail(`dt[${k}] is not a number`)
  }
  if (tool && (!isString(d.id) || (d.name !== undefined && !isString(d.name)))) {
    fail("id (and name, when present) must be strings")
  }
  for (const key in row) {
    if (key !== "type" && key !== "seq0" && key !== "time0" && key !== "data") {
      warnings.push(`line ${lineNo}: field "${key}" of a packed "${type}" row dropped`)
    }
  }
  const turn = d.turn as number
  const step = d.step as number
  const index = d.index as number
  let time = typeof time0 === "number" ? time0 : prevTime
  for (let k = 0; k < items.length; k++) {
    if (k > 0 && time0 !== undefined) time += gaps[k - 1] as number
    const text = items[k] as string
    const chunk = chunkType === "tool-call-delta"
      ? d.name === undefined
        ? { type: chunkType, index, id: d.id as string, argumentsDelta: text }
        : { type: chunkType, index, id: d.id as string, argumentsDelta: text, name: d.name as string }
      : { type: chunkType, index, text }
    events.push(
      Object.freeze({
        type: "assistant/chunk",
        seq: events.length,
        time,
        data: Object.freeze({ turn, step, chunk: Object.freeze(chunk) })
      })
    )
  }
  return time
}
