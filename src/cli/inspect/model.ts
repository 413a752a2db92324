/**
 * What `agent-loop inspect` shows of one session log (§29), computed once per version of the log
 * and then served in pages: the summary line of the sessions list, the timeline rows (one per
 * event shown, in log order), the inbox lane's bars (each message from its insertion to its
 * fate, from `Delivery.storiesOf`), a step's model request (`History.derive` of the log as it
 * stood when the step called the model) and a message's story. Pure: no I/O.
 */
import * as Approval from "../../Approval.js"
import * as Delivery from "../../Delivery.js"
import * as History from "../../History.js"
import type { ContentBlock, Message, MessageSource, UserMessage } from "../../Message.js"
import * as Prices from "../../Prices.js"
import type { RequestHeaderData, SessionEvent, SplicedData, TurnEndReason } from "../../SessionEvent.js"
import type { LogContents } from "../../SessionLog.js"
import * as Usage from "../../Usage.js"
import type * as Api from "./api.js"

/** What the model needs besides the log: whether a live writer holds the session, the prices. */
export interface Context {
  readonly writerLive: boolean
  readonly prices?: Prices.Prices | undefined
  readonly version: number
}

/** A session's projection, as the server keeps it between requests. */
export interface SessionModel {
  readonly id: string
  readonly contents: LogContents
  readonly summary: Api.SessionSummary
  readonly view: Api.SessionView
  readonly rows: ReadonlyArray<Api.Row>
  /** The row of each event index (the first row at or after it). */
  readonly rowOfIndex: Int32Array
  readonly stories: ReadonlyMap<string, ReadonlyArray<Delivery.StoryStep>>
  readonly messages: ReadonlyMap<string, Inserted>
  /** The index of each step's `step/start`, by `turn.step`. */
  readonly stepStarts: ReadonlyMap<string, number>
}

/** A message as it was inserted into the inbox. */
interface Inserted {
  readonly message: UserMessage
  readonly kind: Api.DeliveryKind
  readonly source: string
}

const TEXT_MAX = 400
const BAR_TEXT_MAX = 200
const TITLE_MAX = 200

const cut = (text: string, max: number): string => text.length <= max ? text : text.slice(0, max - 1) + "…"

/** A block's text in a request or a story is cut here, with a note of how much was left out. */
const BLOCK_TEXT_MAX = 64 * 1024

/** A raw event over this many characters of JSON is sent as a stub that says so. */
export const EVENT_JSON_MAX = 256 * 1024

const bounded = (text: string): string =>
  text.length <= BLOCK_TEXT_MAX
    ? text
    : `${text.slice(0, BLOCK_TEXT_MAX)}… (${text.length - BLOCK_TEXT_MAX} more characters not shown)`

/**
 * An event as the API sends it: as stored, or, when its JSON is over `EVENT_JSON_MAX`
 * characters (a prompt of megabytes), a stub with its type, seq and time and what was left out
 * (`agent-loop transcript --json` prints it whole).
 */
export const eventOut = (event: SessionEvent | undefined): unknown => {
  if (event === undefined) return undefined
  const json = JSON.stringify(event)
  return json.length <= EVENT_JSON_MAX
    ? event
    : { type: event.type, seq: event.seq, time: event.time, omitted: `${json.length} characters of JSON, not shown` }
}

/** A source as a short label: `user`, `plugin:NAME`, `tool:CALL`, `hook:NAME`, … */
export const sourceLabel = (source: MessageSource | undefined): string => {
  if (source === undefined || typeof source !== "object") return "unknown"
  const s = source as Record<string, unknown>
  const kind = typeof s.kind === "string" ? s.kind : "unknown"
  const detail = kind === "plugin" ? s.plugin : kind === "tool" ? s.callId : kind === "hook" ? s.hook : kind ===
      "session-reference"
    ? s.sessionId
    : kind === "model"
    ? s.model
    : undefined
  return typeof detail === "string" ? `${kind}:${detail}` : kind
}

/** A content block as text (an image by its type and size, never its data). */
const blockText = (block: ContentBlock): Api.ViewBlock => {
  switch (block.type) {
    case "text":
    case "reasoning":
      return { type: block.type, text: bounded(String(block.text)) }
    case "image": {
      const image = block as { readonly mediaType?: unknown; readonly data?: unknown }
      const bytes = typeof image.data === "string" ? `, ${Math.floor(image.data.length * 3 / 4)} bytes` : ""
      return { type: "image", text: `[image ${String(image.mediaType ?? "")}${bytes}]` }
    }
    case "tool-call":
      return { type: "tool-call", text: bounded(`${String(block.name)}(${String(block.arguments)})`) }
    case "tool-result":
      return { type: "tool-result", text: bounded(contentText(block.content)) }
    default:
      return { type: String((block as { type?: unknown }).type), text: JSON.stringify(block) }
  }
}

function contentText(content: ReadonlyArray<ContentBlock> | undefined): string {
  return Array.isArray(content) ? content.map((b: ContentBlock) => blockText(b).text).join("\n") : ""
}

/** A message as the page shows it. */
export const viewMessage = (message: Message): Api.ViewMessage => ({
  id: message.id,
  role: message.role,
  source: sourceLabel(message.source),
  blocks: Array.isArray(message.content) ? message.content.map(blockText) : []
})

const deliveryKind = (target: string, source: MessageSource): Api.DeliveryKind =>
  target === "next-turn" ? "followup" : (source as { kind?: unknown }).kind === "user" ? "steer" : "inject"

const tokensOf = (totals: Usage.Totals): Api.Tokens => ({
  input: totals.inputTokens,
  output: totals.outputTokens,
  cacheRead: totals.cacheReadTokens,
  reasoning: totals.reasoningTokens,
  total: Usage.total(totals)
})

/** A turn's end reason as one line. */
export const reasonText = (reason: TurnEndReason | undefined): string => {
  if (reason === undefined || typeof reason !== "object") return "unknown"
  switch (reason.kind) {
    case "blocked":
      return reason.reason === undefined ? "blocked" : `blocked: ${reason.reason}`
    case "error":
      return `error ${reason.error?.code}: ${reason.error?.message}`
    case "aborted":
      return `aborted (${reason.reason?.kind})`
    default:
      return String(reason.kind)
  }
}

const fateText = (fate: Delivery.Fate): string =>
  fate._tag === "Entered"
    ? `entered at turn ${fate.turn} step ${fate.step}`
    : fate._tag === "Dropped"
    ? `dropped: ${fate.reason}`
    : "pending"

const record = (data: unknown): Record<string, unknown> =>
  data !== null && typeof data === "object" ? data as Record<string, unknown> : {}

const str = (value: unknown): string | undefined => typeof value === "string" ? value : undefined

/** The row of a foreign event: compaction, approvals, sub-agents, retries, and the rest as `event`. */
const foreignRow = (
  event: SessionEvent
): Pick<Api.Row, "kind" | "label" | "text" | "level" | "child" | "callId" | "name"> | undefined => {
  const type = event.type
  const data = record(event.data)
  if (type === "request/context") return undefined
  if (type.startsWith("compaction/")) {
    // Ours (§17) and DSH's shapes: what it replaced is the summary's `shadowedRange`.
    const what = type.slice(11)
    const tokens = typeof data.tokens === "number" ? `${data.tokens} tokens` : undefined
    const range = record(data.shadowedRange)
    const error = record(data.error)
    // A DSH end has no outcome: failed when it carries an error, else compacted (as §17 reads it).
    const outcome = str(data.outcome) ?? (data.error !== undefined ? "failed" : "compacted")
    const text = what === "start"
      ? [str(data.reason), tokens].filter((s) => s).join(", ")
      : what === "summary"
      ? `${typeof range.start === "number" ? `replaces seq ${range.start}–${String(range.end)}` : "replaces"}${
        typeof data.shadowedTokenCount === "number" ? ` (${data.shadowedTokenCount} tokens)` : ""
      }: ${typeof data.summary === "string" ? data.summary : contentText(data.summary as ReadonlyArray<ContentBlock>)}`
      : [outcome, tokens, str(error.code), str(error.message) ?? str(data.error)].filter((s) => s).join(", ")
    const failed = what === "end" && outcome === "failed"
    return {
      kind: "compaction",
      label: `compaction ${what}`,
      text: cut(text, TEXT_MAX),
      ...(failed ? { level: "error" as const } : {})
    }
  }
  if (type.startsWith("approval/")) {
    const text = [str(data.toolName), str(data.outcome), str(data.reason), str(data.policy)].filter((s) => s)
      .join(" · ")
    return { kind: "approval", label: type.slice(9), text: cut(text, TEXT_MAX), callId: str(data.callId) }
  }
  if (type.startsWith("subagent/")) {
    const child = str(data.id)
    return {
      kind: "subagent",
      label: `sub-agent ${type.slice(9)}`,
      text: cut([child, str(data.label), str(data.stopReason)].filter((s) => s).join(" · "), TEXT_MAX),
      child
    }
  }
  if (type.includes("retry")) {
    return { kind: "retry", label: type, text: cut(JSON.stringify(event.data) ?? "", TEXT_MAX), level: "warn" }
  }
  if (/(^|\/)[a-z-]*(error|failed)$/.test(type)) {
    return { kind: "error", label: type, text: cut(JSON.stringify(event.data) ?? "", TEXT_MAX), level: "error" }
  }
  return { kind: "event", label: type, text: cut(JSON.stringify(event.data) ?? "", TEXT_MAX) }
}

/**
 * Builds a session's projection (§29): rows, bars, turns and summary, in two passes over the log
 * (`Delivery.storiesOf`, then the rows).
 */
export const build = (id: string, contents: LogContents, context: Context): SessionModel => {
  const { events, header } = contents
  const options = { header }
  const dsh = header.version === 0
  const rows: Array<Api.Row> = []
  const rowOfIndex = new Int32Array(events.length + 1)
  const messages = new Map<string, Inserted>()
  const stepStarts = new Map<string, number>()
  const turns: Array<{ -readonly [K in keyof Api.TurnSpan]: Api.TurnSpan[K] }> = []
  const callRows = new Map<string, number>()
  // One pass of the fate engine gives the bars, the stories, and the ids each splice removed.
  const stories = Delivery.storiesOf(events, options)
  const removedAt = new Map<number, Array<string>>()
  for (const [id, steps] of stories) {
    for (const step of steps) {
      if (step.what !== "claimed" && step.what !== "dropped") continue
      const ids = removedAt.get(step.seq)
      if (ids === undefined) removedAt.set(step.seq, [id])
      else ids.push(id)
    }
  }
  const children: Array<string> = []
  let title = ""
  let firstPrompt = ""
  let turn = 0
  let step = 0
  let claimed: Array<string> = []
  let chunks = 0
  const push = (event: SessionEvent, row: Omit<Api.Row, "row" | "seq" | "time" | "turn" | "step">) => {
    rows.push({ row: rows.length, seq: event.seq, time: event.time, turn, step, ...row })
  }
  for (let i = 0; i < events.length; i++) {
    const event = events[i]!
    rowOfIndex[i] = rows.length
    const data = record(event.data)
    switch (event.type) {
      case "agent/inbox/spliced": {
        const splice = event.data as SplicedData
        // The ids it removed are the stories' (the seed's splices have none: counted only).
        const removed = splice.removedCount ?? 0
        if (removed > 0) {
          const ids = removedAt.get(event.seq) ?? []
          if (splice.outcome !== undefined) {
            push(event, {
              kind: "canceled",
              label: `${splice.outcome}: ${removed} removed`,
              text: `${splice.target}${splice.cause ? ` (${String(splice.cause.kind)})` : ""}`,
              ids,
              level: "warn"
            })
          } else {
            for (const id of ids) claimed.push(id)
            push(event, { kind: "claimed", label: `claim ${removed} from ${splice.target}`, ids })
          }
        }
        for (const message of splice.inserted) {
          const kind = deliveryKind(splice.target, message.source)
          const source = sourceLabel(message.source)
          const text = contentText(message.content)
          messages.set(message.id, { message, kind, source })
          if (firstPrompt === "" && kind === "followup") firstPrompt = text
          push(event, { kind: "inserted", label: kind, text: cut(text, TEXT_MAX), ids: [message.id], deliveryKind: kind, source })
        }
        break
      }
      case "turn/start": {
        turn = typeof data.turn === "number" ? data.turn : turn + 1
        step = 0
        claimed = []
        turns.push({ turn, startRow: rows.length, endRow: rows.length, startTime: event.time, endTime: event.time, steps: 0 })
        push(event, { kind: "turn-start", label: `turn ${turn}` })
        break
      }
      case "step/start": {
        step = typeof data.step === "number" ? data.step : step + 1
        stepStarts.set(`${turn}.${step}`, i)
        chunks = 0
        const open = turns[turns.length - 1]
        if (open !== undefined && open.turn === turn) open.steps++
        push(event, { kind: "step-start", label: `step ${step}`, request: true })
        if (claimed.length > 0) {
          push(event, {
            kind: "pre-step",
            label: "pre-step: enter",
            text: `${claimed.length} claimed`,
            ids: claimed,
            decision: "enter"
          })
          claimed = []
        }
        break
      }
      case "step/end":
        push(event, { kind: "step-end", label: `step ${step} end` })
        break
      case "user/message": {
        const message = event.data as UserMessage
        const source = sourceLabel(message.source)
        push(event, {
          kind: "message",
          label: source === "user" ? "user" : source === "plugin:compact" ? "compaction checkpoint" : "context",
          text: cut(contentText(message.content), TEXT_MAX),
          ids: [message.id],
          source
        })
        break
      }
      case "assistant/message": {
        const message = record(data.message)
        const content = (Array.isArray(message.content) ? message.content : []) as ReadonlyArray<ContentBlock>
        const calls = content.filter((b) => b.type === "tool-call").length
        const text = content.filter((b) => b.type === "text").map((b) => (b as { text: string }).text).join("\n")
        const streamed = chunks > 0 ? ` · ${chunks} chunk${chunks === 1 ? "" : "s"} streamed` : ""
        chunks = 0
        push(event, {
          kind: "assistant",
          label: `${data.interrupted === true ? "assistant (interrupted)" : "assistant"}${streamed}`,
          text: cut(text === "" && calls > 0 ? `(${calls} tool call${calls === 1 ? "" : "s"})` : text, TEXT_MAX),
          ...(data.usage !== undefined ? { usage: tokensOf(Usage.of(data.usage as Usage.Usage, { dsh })) } : {}),
          finish: str(data.finish),
          ids: typeof message.id === "string" ? [message.id] : undefined
        })
        break
      }
      case "tool/call": {
        const callId = str(data.callId) ?? ""
        callRows.set(callId, rows.length)
        push(event, {
          kind: "tool-call",
          label: str(data.name) ?? "tool",
          text: cut(str(data.arguments) ?? "", TEXT_MAX),
          callId,
          name: str(data.name)
        })
        break
      }
      case "tool/result": {
        const message = record(data.message)
        const content = message.content as ReadonlyArray<ContentBlock> | undefined
        const result = Array.isArray(content) ? content.find((b) => b.type === "tool-result") : undefined
        const callId = result !== undefined && result.type === "tool-result" ? result.toolCallId : undefined
        const callRow = callId === undefined ? undefined : callRows.get(callId)
        const call = callRow === undefined ? undefined : rows[callRow]
        if (call !== undefined && call.time > 0 && event.time >= call.time) {
          rows[callRow!] = { ...call, durationMs: event.time - call.time }
        }
        const isError = data.error !== undefined || (result !== undefined && "isError" in result && result.isError === true)
        const error = record(data.error)
        push(event, {
          kind: "tool-result",
          label: `${call?.name ?? "tool"} result${isError ? ` (${str(error.code) ?? "error"})` : ""}`,
          text: cut(contentText(content), TEXT_MAX),
          callId,
          name: call?.name,
          ...(isError ? { level: "error" as const } : {})
        })
        break
      }
      case "turn/end": {
        const reason = data.reason as TurnEndReason | undefined
        if (reason?.kind === "blocked" || (reason?.kind === "error" && reason.error?.code === "PRE_STEP_FAILED")) {
          push(event, {
            kind: "pre-step",
            label: "pre-step: reject",
            text: reasonText(reason),
            ids: claimed.length > 0 ? claimed : undefined,
            decision: "reject",
            level: "warn"
          })
        }
        claimed = []
        const open = turns[turns.length - 1]
        if (open !== undefined && open.turn === turn) {
          open.endRow = rows.length
          open.endTime = event.time
          open.reason = reasonText(reason)
        }
        push(event, {
          kind: "turn-end",
          label: `turn ${turn} end`,
          text: reasonText(reason),
          ...(reason?.kind === "error" ? { level: "error" as const } : {})
        })
        break
      }
      case "request/header": {
        const header = requestHeader(event.data)
        push(event, {
          kind: "event",
          label: "request/header",
          text: `${header.provider ?? "?"}/${header.model ?? "?"} · ${header.tools.length} tools`
        })
        break
      }
      case "session/title":
        if (typeof data.title === "string") title = data.title
        push(event, { kind: "event", label: "session/title", text: cut(String(data.title), TEXT_MAX) })
        break
      case "assistant/chunk":
        // A DSH log's streamed deltas: counted on the step's assistant row, no row of their own.
        chunks++
        break
      default: {
        const row = foreignRow(event)
        if (row !== undefined) push(event, row)
        if (event.type === "subagent/start" && row?.child !== undefined && !children.includes(row.child)) {
          children.push(row.child)
        }
      }
    }
  }
  rowOfIndex[events.length] = rows.length
  const open = turns[turns.length - 1]
  if (open !== undefined && open.reason === undefined) {
    open.endRow = Math.max(open.startRow, rows.length - 1)
    open.endTime = events.length > 0 ? events[events.length - 1]!.time : open.startTime
  }

  const indexOfSeq = seqIndex(events)
  const rowOfSeq = (seq: number): number => {
    const index = indexOfSeq(seq)
    return Math.min(rowOfIndex[index] ?? rows.length, Math.max(0, rows.length - 1))
  }
  const deliveries = bars(stories, messages, rowOfSeq)

  const usage = Usage.fromEvents(events, options)
  const costs = context.prices === undefined ? undefined : Prices.costs(context.prices, usage.byModel)
  const turnOpen = open !== undefined && open.reason === undefined
  const status: Api.SessionStatus = Approval.openQuestions(events).length > 0
    ? "waiting"
    : turnOpen
    ? context.writerLive ? "running" : "open-turn"
    : "idle"
  const parent = str(record(header).parentSession)
  const summary: Api.SessionSummary = {
    id,
    title: cut(title !== "" ? title : firstPrompt, TITLE_MAX),
    createdAt: typeof header.createdAt === "number" ? header.createdAt : 0,
    lastActivity: events.length > 0 ? events[events.length - 1]!.time || header.createdAt : header.createdAt,
    status,
    turns: turns.length,
    events: events.length,
    tokens: tokensOf(usage.usage),
    ...(costs !== undefined && costs.unpriced.length === 0 ? { cost: costs.total } : {}),
    ...(parent !== undefined ? { parent } : {}),
    children,
    format: dsh ? "dsh" : "effect-agent-loop"
  }
  const view: Api.SessionView = {
    summary,
    header,
    warnings: contents.warnings,
    rows: rows.length,
    turns,
    deliveries: deliveries.bars,
    lanes: deliveries.lanes,
    version: context.version
  }
  return { id, contents, summary, view, rows, rowOfIndex, stories, messages, stepStarts }
}

/** The index of the event of a seq (events are in seq order; DSH seqs may start above 0). */
const seqIndex = (events: ReadonlyArray<SessionEvent>) => (seq: number): number => {
  let lo = 0
  let hi = events.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (events[mid]!.seq < seq) lo = mid + 1
    else hi = mid
  }
  return lo
}

/**
 * The inbox lane: one bar per insertion, from its row to the row of the step that decided it,
 * in lanes chosen greedily (a bar takes the first lane free at its start), in insertion order.
 */
const bars = (
  stories: ReadonlyMap<string, ReadonlyArray<Delivery.StoryStep>>,
  messages: ReadonlyMap<string, Inserted>,
  rowOfSeq: (seq: number) => number
): { readonly bars: Array<Api.DeliveryBar>; readonly lanes: number } => {
  type Open = { id: string; insertedSeq: number; fateSeq: number | null; fate: Delivery.Fate }
  const spans: Array<Open> = []
  for (const [id, steps] of stories) {
    let current: Open | undefined
    for (const s of steps) {
      if (s.what === "inserted") {
        current = { id, insertedSeq: s.seq, fateSeq: null, fate: s.fate }
        spans.push(current)
      } else if (current !== undefined) {
        current.fate = s.fate
        if (s.what !== "claimed") current.fateSeq = s.seq
      }
    }
  }
  spans.sort((a, b) => a.insertedSeq - b.insertedSeq)
  const laneEnds: Array<number> = []
  const out: Array<Api.DeliveryBar> = []
  for (const span of spans) {
    const insertedRow = rowOfSeq(span.insertedSeq)
    const fateRow = span.fateSeq === null ? null : rowOfSeq(span.fateSeq)
    const end = fateRow ?? Number.MAX_SAFE_INTEGER
    let lane = laneEnds.findIndex((e) => e < insertedRow)
    if (lane === -1) lane = laneEnds.push(end) - 1
    else laneEnds[lane] = end
    const inserted = messages.get(span.id)
    out.push({
      id: span.id,
      kind: inserted?.kind ?? "inject",
      source: inserted?.source ?? "unknown",
      text: cut(contentText(inserted?.message.content), BAR_TEXT_MAX),
      insertedRow,
      insertedSeq: span.insertedSeq,
      fateRow,
      fateSeq: span.fateSeq,
      fate: span.fate,
      lane
    })
  }
  return { bars: out, lanes: laneEnds.length }
}

/**
 * A `request/header`'s provider, model, instructions and tool names: ours (§3.2) or DSH's
 * (`{header: {config: {provider, model}, system, tools}}`, where the fixtures hold placeholders).
 */
const requestHeader = (data: unknown) => {
  const ours = record(data) as Partial<RequestHeaderData>
  const dsh = record(record(record(data).header).config)
  const dshHeader = record(record(data).header)
  const tools = Array.isArray(ours.tools)
    ? ours.tools.map((t) => String(record(t).name))
    : Array.isArray(dshHeader.tools)
    ? dshHeader.tools.map((t) => String(record(t).name ?? record(record(t).function).name))
    : []
  return {
    provider: str(ours.provider) ?? str(dsh.provider),
    model: str(ours.model) ?? str(dsh.model),
    instructions: str(ours.instructions) ?? str(dshHeader.system),
    tools
  }
}

/** Events that show the model has answered a step's request, or that the step is over. */
const answered: ReadonlySet<string> = new Set([
  "assistant/chunk",
  "assistant/message",
  "tool/call",
  "tool/result",
  "step/end",
  "step/start",
  "turn/end",
  "turn/start"
])

/**
 * The model request of step `turn.step` (§29): `History.derive` of the log up to the step's last
 * event before the model answered (its `step/start`, the entered `user/message`s, the
 * `request/header`, and what else was logged before the first output), with the request header
 * in force then. Undefined for a step the log does
 * not hold.
 */
export const requestOf = (model: SessionModel, turn: number, step: number): Api.RequestView | undefined => {
  const start = model.stepStarts.get(`${turn}.${step}`)
  if (start === undefined) return undefined
  const events = model.contents.events
  let end = start + 1
  while (end < events.length && !answered.has(events[end]!.type)) end++
  let header: ReturnType<typeof requestHeader> | undefined
  for (let i = end - 1; i >= 0; i--) {
    if (events[i]!.type === "request/header") {
      header = requestHeader(events[i]!.data)
      break
    }
  }
  const messages = History.derive(events.slice(0, end), { header: model.contents.header })
  return {
    turn,
    step,
    seq: events[start]!.seq,
    row: model.rowOfIndex[start] ?? 0,
    provider: header?.provider,
    model: header?.model,
    instructions: header?.instructions,
    tools: header?.tools ?? [],
    messages: messages.map(viewMessage)
  }
}

/** A message's story (§29): its fate and each step of its life with the event that proves it. */
export const storyOf = (model: SessionModel, id: string): Api.MessageStory | undefined => {
  const steps = model.stories.get(id)
  const inserted = model.messages.get(id)
  const events = model.contents.events
  const index = seqIndex(events)
  if (steps === undefined) {
    // A message that never went through the inbox: its own event, if the log holds one.
    const found = events.find((e) =>
      (e.type === "user/message" && record(e.data).id === id) ||
      ((e.type === "assistant/message" || e.type === "tool/result") && record(record(e.data).message).id === id)
    )
    if (found === undefined) return undefined
    const message = (found.type === "user/message" ? found.data : record(found.data).message) as Message
    return { id, source: sourceLabel(message.source), message: viewMessage(message), steps: [] }
  }
  const last = steps[steps.length - 1]!
  return {
    id,
    kind: inserted?.kind,
    source: inserted?.source,
    message: inserted === undefined ? undefined : viewMessage(inserted.message),
    fate: last.fate,
    steps: steps.map((s) => {
      const i = index(s.seq)
      const event = events[i]
      return {
        what: s.what,
        seq: s.seq,
        row: model.rowOfIndex[i] ?? model.rows.length,
        time: event?.time ?? 0,
        text: s.what === "inserted"
          ? `inserted into ${(event?.data as SplicedData | undefined)?.target ?? "the inbox"}`
          : s.what === "claimed"
          ? "claimed by a pre-step"
          : s.what === "dropped" && event?.type === "turn/end"
          ? `${fateText(s.fate)} (turn ${String(record(event.data).turn)} ended ${
            reasonText(record(event.data).reason as TurnEndReason)
          })`
          : fateText(s.fate),
        event: eventOut(event)
      }
    })
  }
}
