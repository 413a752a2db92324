/**
 * The state of the `chat` screen (§14), kept outside React: a plain object that the
 * Effect side feeds with the agent's live events (§5.3) and React reads with
 * `useSyncExternalStore` (`subscribe` / `getSnapshot`). Nothing here runs an effect.
 *
 * - `items` is the append-only transcript (rendered once by Ink's `<Static>`): turn headers,
 *   what the user typed, injected context labelled with its producer (`TranscriptText.sourceLabel`),
 *   assistant text, each tool call together with its result, turn ends with their reason, and
 *   a marker for each compaction (§17: what it did to the token estimate and the first line of
 *   its summary), and notices of the UI itself. History read from the log at start and live
 *   events go through one projection (`Transcript.projector`), so a resumed session looks as it
 *   did live.
 * - The live part: the assistant text streaming in the current step (`assistant/delta`), the
 *   tool calls that run (logged `tool/call`, no result yet), the open approval questions (§26:
 *   from `approval/asked` until its `approval/decided`; those the log leaves open at start,
 *   `Approval.openQuestions`, as after a resume), the pending queue (a mirror of the
 *   inbox rebuilt from `agent/inbox/spliced` events with `Inbox.MutableInbox`, the runtime's own
 *   splice algebra), the status and when the run started, and the compaction that runs (from its
 *   `compaction/start` until its `compaction/end`).
 *
 * Every string that comes from the log or the model is made safe for the terminal here
 * (`visible`: escaped as `TranscriptText.render` does), so the view never prints raw log text; and
 * bounded (`shown`: the first 8 KiB and 100 lines of each message, 12 of a tool result or an
 * injected context, then a line saying how many lines and bytes were left out; the streamed
 * text's tail; the start of a pending message), so that a message of megabytes costs the screen
 * no more than a small one (`chatText.ts`).
 */
import type { AgentEvent, AgentStatus } from "../../AgentEvent.js"
import * as Approval from "../../Approval.js"
import * as Inbox from "../../Inbox.js"
import { textOf, type UserMessage } from "../../Message.js"
import * as Prices from "../../Prices.js"
import type { SessionEvent, SplicedData, TurnEndReason } from "../../SessionEvent.js"
import * as Transcript from "../../Transcript.js"
import * as TranscriptText from "../../TranscriptText.js"
import * as Usage from "../../Usage.js"
import { type ChildLine, Children } from "../subagentProgress.js"
import { firstLine, historyStart, oneLine, shown, SHOWN_RESULT_LINES, stream, visible } from "./chatText.js"

export {
  ARGS_SHOWN,
  HISTORY_BYTES,
  HISTORY_ENTRIES,
  oneLine,
  shown,
  SHOWN_BYTES,
  SHOWN_LINES,
  SHOWN_RESULT_LINES,
  visible
} from "./chatText.js"

/** One line (or block) of the append-only transcript. `key` is unique and stable. */
export type Item =
  | { readonly kind: "turn"; readonly key: string; readonly turn: number }
  | { readonly kind: "user"; readonly key: string; readonly text: string }
  | { readonly kind: "context"; readonly key: string; readonly label: string; readonly text: string }
  | { readonly kind: "assistant"; readonly key: string; readonly text: string; readonly interrupted: boolean }
  | {
    readonly kind: "tool"
    readonly key: string
    readonly name: string
    readonly args: string
    readonly result: string | undefined
    readonly isError: boolean
  }
  | { readonly kind: "turn-end"; readonly key: string; readonly turn: number; readonly reason: string; readonly tone: Tone }
  | {
    readonly kind: "compaction"
    readonly key: string
    /** `TranscriptText.compactionLabel` (or `checkpointLabel`), escaped. */
    readonly headline: string
    /** The first line of the summary or checkpoint text, escaped; undefined when none. */
    readonly detail: string | undefined
    readonly tone: Tone
  }
  | { readonly kind: "notice"; readonly key: string; readonly text: string; readonly tone: Tone }

/** How an item is coloured: fine, worth a look, or wrong. */
export type Tone = "ok" | "warn" | "error"

/**
 * A message waiting in the inbox, in claim order (`next-step` first, then `next-turn`, §4):
 * `followup` (next-turn), `steer` (waking next-step) or `context` (non-waking next-step).
 */
export interface PendingItem {
  readonly id: string
  readonly queue: "followup" | "steer" | "context"
  /** `you` for what the user typed, else the producer (`TranscriptText.sourceLabel`). */
  readonly label: string
  readonly direct: boolean
  readonly text: string
}

/**
 * A tool call that is logged and has no result yet. `since`: epoch ms when it was seen.
 * `progress`: its last progress report (`tool/progress`, §8: an MCP server's progress
 * notifications, §28) as one escaped line, `3/10 · copying b.txt` (`progressLine`).
 */
export interface RunningTool {
  readonly callId: string
  readonly name: string
  readonly args: string
  readonly since: number
  readonly progress?: string | undefined
}

/** The most code points of a progress report's message the chat shows. */
const PROGRESS_MESSAGE_SHOWN = 80

/**
 * A progress report on one line: `progress/total` (`progress` alone when the total is not
 * known), then ` · message` when there is one (escaped, at most `PROGRESS_MESSAGE_SHOWN` code
 * points).
 */
export const progressLine = (report: {
  readonly progress: number
  readonly total?: number | undefined
  readonly message?: string | undefined
}): string => {
  const amount = report.total === undefined ? `${report.progress}` : `${report.progress}/${report.total}`
  const message = report.message === undefined || report.message.trim() === ""
    ? ""
    : ` · ${oneLine(report.message.trim(), PROGRESS_MESSAGE_SHOWN)}`
  return `${amount}${message}`
}

/**
 * An open approval question (§26): a call waits for a person's decision. `toolName` and `args`
 * are one line each, escaped and bounded (`oneLine`). `since`: epoch ms when it was seen.
 * `answering`: an answer was sent from this chat and has not landed yet (the next question is
 * then the one the keys answer).
 */
export interface Question {
  readonly id: string
  readonly callId: string
  readonly toolName: string
  readonly args: string
  readonly since: number
  readonly answering: boolean
  /** A sub-agent's question (§27): its session (`callId` is its call); absent for the agent's own. */
  readonly sessionId?: string | undefined
}

/** A compaction that runs (from its `compaction/start`): why, and the estimate when it started. */
export interface RunningCompaction {
  readonly compactionId: string
  readonly reason: string
  readonly tokens: number
  /** The turn it runs in; 0 between turns (a manual compaction of an idle agent). */
  readonly turn: number
}

/** What the screen shows now. A new object after every change (stable in between). */
export interface Snapshot {
  readonly sessionId: string
  readonly items: ReadonlyArray<Item>
  readonly status: AgentStatus
  /** Epoch ms when the current run started (undefined while idle; kept while awaiting approval). */
  readonly runningSince: number | undefined
  readonly turn: number
  readonly step: number
  /** The current step's streamed text and reasoning (escaped); undefined when none. */
  readonly streaming: { readonly text: string; readonly reasoning: string } | undefined
  /** Logged calls without a result and without an open question, in call order. */
  readonly tools: ReadonlyArray<RunningTool>
  /** The open approval questions, in the order they were asked (a sub-agent's too, §27). */
  readonly questions: ReadonlyArray<Question>
  /** What each running sub-agent does now (`children.ts`; raw text: shown through `oneLine`). */
  readonly children: ReadonlyArray<ChildLine>
  readonly pending: ReadonlyArray<PendingItem>
  /** The compaction that runs now, if any. */
  readonly compacting: RunningCompaction | undefined
  /** The session's tokens so far (`Usage.total` of every model request in the log, §18). */
  readonly tokens: number
  /** With a price table: the session's cost (`$0.0016`), or `cost unknown` (a model without a price). */
  readonly cost: string | undefined
}

/** Whether the agent works on a turn: running, or waiting for a decision inside it (§26 rule 5). */
export const busy = (status: AgentStatus): boolean => status === "running" || status === "awaiting-approval"

const compactionTone = (outcome: string | undefined): Tone =>
  outcome === "compacted" || outcome === "skipped" ? "ok" : outcome === "failed" ? "error" : "warn"

const toneOf = (reason: TurnEndReason): Tone => {
  switch (reason.kind) {
    case "completed":
    case "max-tokens":
      return "ok"
    case "aborted":
    case "blocked":
      return "warn"
    default:
      return "error"
  }
}

/**
 * The chat screen's state: fed with live events (`apply`) and the UI's own notices
 * (`notice`); read with `getSnapshot`, watched with `subscribe`.
 */
export class ChatModel {
  private items: Array<Item> = []
  private itemsView: ReadonlyArray<Item> = []
  private readonly inbox: Inbox.MutableInbox
  private readonly calls = new Map<string, RunningTool>()
  /** The logged arguments (JSON text) of the calls in `calls`, for their questions. */
  private readonly callArguments = new Map<string, string>()
  /** The open approval questions by id, in the order they were asked. */
  private readonly questions = new Map<string, Question>()
  /** The sub-agents the running calls run (§27), from the `subagent/event`s. */
  private readonly children = new Children()
  private readonly listeners = new Set<() => void>()
  private nextKey = 0
  private headerTurn = 0
  private turn = 0
  private step = 0
  private status: AgentStatus
  private runningSince: number | undefined
  private streaming: { turn: number; step: number; text: string; reasoning: string } | undefined
  private compacting: RunningCompaction | undefined
  /** Compaction ids whose `compaction/end` was applied (the last few), and who waits for one. */
  private readonly ended: Array<string> = []
  /** Input claimed by the running turn and not entered yet (`pendingItem`s by message id). */
  private readonly claimed = new Map<string, ReturnType<typeof pendingItem>>()
  private readonly endWaiters = new Map<string, Array<() => void>>()
  /** The transcript projection of the log: its history, then each live event. */
  private readonly projection = Transcript.projector()
  /** The usage projection of the log (§18): the status line's tokens and cost. */
  private readonly usage = Usage.projector()
  private snapshot: Snapshot
  /** Durable events with a smaller `seq` were applied from the log already. */
  private readonly seen: number

  /**
   * The state of a session whose log holds `events` (history shown through
   * `Transcript.fromEvents`), whose inbox is `inbox` and whose status is `status`.
   */
  constructor(
    readonly sessionId: string,
    events: ReadonlyArray<SessionEvent>,
    inbox: Inbox.InboxState,
    status: AgentStatus,
    private readonly now: () => number = Date.now,
    /** `chat --prices FILE`: the status line shows the session's cost too. */
    private readonly prices?: Prices.Prices | undefined
  ) {
    this.inbox = Inbox.MutableInbox.from(inbox)
    this.seen = events.length
    this.status = status
    this.runningSince = busy(status) ? now() : undefined
    // A compaction the log leaves open is still running (it ends live) or closed by repair.
    const entries: Array<Transcript.Entry> = []
    for (const e of events) {
      for (const entry of this.projection.push(e)) entries.push(entry)
      this.usage.push(e)
    }
    const first = historyStart(entries)
    if (first > 0) {
      const turns = entries[first]!.turn - 1
      this.push({
        kind: "notice",
        key: this.key(),
        text: `… ${first} earlier transcript entr${first === 1 ? "y" : "ies"}${
          turns > 0 ? ` (turn${turns === 1 ? " 1" : `s 1–${turns}`})` : ""
        } not shown, see agent-loop transcript`,
        tone: "ok"
      })
    }
    for (let i = first; i < entries.length; i++) this.entry(entries[i]!)
    for (const e of events) {
      if (e.type === "turn/start") {
        this.turn = (e.data as { readonly turn: number }).turn
        this.step = 0
      } else if (e.type === "step/start") this.step = (e.data as { readonly step: number }).step
    }
    // The questions the log leaves open (a resumed session that waits, §26 rule 8): their
    // calls stay live, as does the rest of their step (its results come with the decision).
    const open = Approval.openQuestions(events)
    for (const question of open) {
      // (A DSH question may name no call: it is shown with no arguments.)
      const callId = question.callId ?? ""
      if (callId !== "" && !this.calls.has(callId)) {
        const call = events.find((e) => e.type === "tool/call" && (e.data as { readonly callId?: unknown }).callId === callId)
          ?.data as { readonly name?: unknown; readonly arguments?: unknown } | undefined
        const args = typeof call?.arguments === "string" ? call.arguments : ""
        this.calls.set(callId, { callId, name: shown(question.toolName), args: shown(args), since: now() })
        this.callArguments.set(callId, args)
      }
      this.ask({ id: question.id, callId, toolName: question.toolName })
    }
    // Else a log read from disk has no running calls: show what a DSH log left open as results-less.
    if (open.length === 0) this.flushCalls()
    this.snapshot = this.build()
  }

  /** Registers a listener called after each change; returns the unsubscribe function. */
  readonly subscribe = (listener: () => void): () => void => {
    this.listeners.add(listener)
    return () => {
      this.listeners.delete(listener)
    }
  }

  /** The current snapshot (the same object until the next change). */
  readonly getSnapshot = (): Snapshot => this.snapshot

  /** The number of turns the log has opened so far. */
  get turns(): number {
    return this.turn
  }

  /** Applies a batch of live events (in order), then notifies once. */
  apply(events: ReadonlyArray<AgentEvent>): void {
    for (const event of events) this.event(event)
    this.changed()
  }

  /**
   * Runs `f` once the `compaction/end` of `compactionId` has been applied (at once if it was, or
   * if `compactionId` is empty), so that what reports a compaction comes after its marker.
   */
  afterCompaction(compactionId: string, f: () => void): void {
    if (compactionId === "" || this.ended.includes(compactionId)) return f()
    const waiting = this.endWaiters.get(compactionId)
    if (waiting === undefined) this.endWaiters.set(compactionId, [f])
    else waiting.push(f)
  }

  /**
   * The question the answer keys and commands answer now: the first open one no answer was sent
   * to from this chat (`answering`); undefined when none.
   */
  firstQuestion(): Question | undefined {
    for (const question of this.questions.values()) if (!question.answering) return question
    return undefined
  }

  /**
   * Marks question `id` as answered from this chat (`on`: the answer is on its way) or not (it
   * failed); nothing for a question that is no longer open.
   */
  answering(id: string, on: boolean): void {
    const question = this.questions.get(id)
    if (question === undefined || question.answering === on) return
    this.questions.set(id, { ...question, answering: on })
    this.changed()
  }

  /** The store's other sessions, as last read (for Tab completion after `@session:`). */
  sessionIds: ReadonlyArray<string> = []

  /** Records the session ids read from the store (no redraw: only the next Tab reads them). */
  setSessionIds(ids: ReadonlyArray<string>): void {
    this.sessionIds = ids
  }

  /** Appends a notice of the UI itself (escaped). */
  notice(text: string, tone: Tone = "ok"): void {
    this.push({ kind: "notice", key: this.key(), text: shown(text), tone })
    this.changed()
  }

  private key(): string {
    return String(this.nextKey++)
  }

  private push(item: Item): void {
    this.items.push(item)
  }

  private changed(): void {
    this.snapshot = this.build()
    for (const listener of this.listeners) listener()
  }

  private build(): Snapshot {
    if (this.itemsView.length !== this.items.length) this.itemsView = this.items.slice()
    const pending: Array<PendingItem> = []
    for (const p of this.inbox.nextStep) pending.push(pendingItem(p.message, p.waking ? "steer" : "context"))
    for (const m of this.inbox.nextTurn) pending.push(pendingItem(m, "followup"))
    return {
      sessionId: this.sessionId,
      items: this.itemsView,
      status: this.status,
      runningSince: this.runningSince,
      turn: this.turn,
      step: this.step,
      streaming: this.streaming === undefined || (this.streaming.text === "" && this.streaming.reasoning === "")
        ? undefined
        : { text: this.streaming.text, reasoning: this.streaming.reasoning },
      tools: this.questions.size === 0
        ? Array.from(this.calls.values())
        : Array.from(this.calls.values()).filter((call) => !this.asked(call.callId)),
      questions: Array.from(this.questions.values()),
      children: this.children.size === 0 ? [] : this.children.lines(),
      pending,
      compacting: this.compacting,
      ...this.spent()
    }
  }

  /** The status line's tokens and cost: the session's requests and its sub-agents' runs (§18, §27). */
  private spent(): { readonly tokens: number; readonly cost: string | undefined } {
    const u = Usage.withSubagents(this.usage.result())
    if (this.prices === undefined) return { tokens: Usage.total(u.usage), cost: undefined }
    const c = Prices.costs(this.prices, u.byModel).total
    return { tokens: Usage.total(u.usage), cost: c === undefined ? "cost unknown" : Prices.formatUsd(c) }
  }

  private event(event: AgentEvent): void {
    if ("seq" in event) {
      if (event.seq < this.seen) return
      this.usage.push(event)
      this.durable(event)
      return
    }
    switch (event.type) {
      case "agent/status": {
        this.status = event.status
        this.runningSince = busy(event.status) ? (this.runningSince ?? this.now()) : undefined
        if (event.status !== "running") this.compacting = undefined
        return
      }
      case "agent/disposed": {
        // The chat disposes its agent only as it ends (the view is gone by then): this agent
        // stopped because its log could not be written (a full disk, the file deleted).
        this.calls.clear()
        this.callArguments.clear()
        this.questions.clear()
        this.children.clear()
        this.streaming = undefined
        this.compacting = undefined
        this.status = "idle"
        this.runningSince = undefined
        this.notice(
          `the session stopped: its log cannot be written (see above), nothing more is sent; ` +
            `/quit, then agent-loop chat --session ${this.sessionId} repairs it and goes on`,
          "error"
        )
        return
      }
      case "assistant/delta": {
        if (event.text === undefined && event.reasoning === undefined) return
        if (this.streaming === undefined || this.streaming.turn !== event.turn || this.streaming.step !== event.step) {
          this.streaming = { turn: event.turn, step: event.step, text: "", reasoning: "" }
        }
        if (event.text !== undefined) this.streaming.text = stream(this.streaming.text, event.text)
        if (event.reasoning !== undefined) this.streaming.reasoning = stream(this.streaming.reasoning, event.reasoning)
        return
      }
      case "assistant/retry": {
        this.streaming = undefined
        this.push({
          kind: "notice",
          key: this.key(),
          text: `the model request failed; retrying (attempt ${event.attempt})`,
          tone: "warn"
        })
        return
      }
      case "tool/progress": {
        // A report of a call that has its result already (a late notification) changes nothing.
        const call = this.calls.get(event.callId)
        if (call !== undefined) this.calls.set(call.callId, { ...call, progress: progressLine(event) })
        return
      }
      case "subagent/event": {
        // A sub-agent's question is listed here and answered through this agent (§27).
        for (const change of this.children.apply(event)) {
          if (change._tag === "decided") this.questions.delete(change.id)
          else this.ask(change, change.args)
        }
        return
      }
      default:
        // Inbox notifications: the pending queue follows the durable splices instead.
        return
    }
  }

  private durable(event: SessionEvent): void {
    switch (event.type) {
      case "turn/start": {
        this.turn = (event.data as { readonly turn: number }).turn
        this.step = 0
        this.header(this.turn)
        break
      }
      case "step/start": {
        this.step = (event.data as { readonly step: number }).step
        break
      }
      case "agent/inbox/spliced": {
        const data = event.data as SplicedData
        const target = data.target
        const applied = this.inbox.apply(data)
        // Queued input that a cancel or the end of the chat removed is said, never just gone.
        if (data.outcome === "canceled" && applied.removed.length > 0) {
          const cause = data.cause?.kind === undefined ? "" : ` (${data.cause.kind})`
          const lines = applied.removed.map((p) => {
            const item = pendingItem(p.message, target === "next-turn" ? "followup" : p.waking ? "steer" : "context")
            return `  ${item.queue} > ${item.text}`
          })
          this.notice(`canceled${cause}, not sent to the model:\n${lines.join("\n")}`, "warn")
        }
        // Claimed input is watched until it enters: a turn can end before (a cancel during the
        // compaction before its step, a pre-step that drops it).
        if (data.outcome === undefined) {
          for (const p of applied.removed) {
            this.claimed.set(
              p.message.id,
              pendingItem(p.message, target === "next-turn" ? "followup" : p.waking ? "steer" : "context")
            )
          }
        }
        return
      }
      case "user/message": {
        this.claimed.delete((event.data as { readonly id: string }).id)
        break
      }
      case "approval/asked": {
        const data = event.data as Partial<Approval.AskedData>
        if (typeof data.id === "string") {
          this.ask({ id: data.id, callId: typeof data.callId === "string" ? data.callId : "", toolName: String(data.toolName) })
        }
        break
      }
      case "approval/decided": {
        const data = event.data as { readonly id?: unknown; readonly outcome?: unknown }
        const question = typeof data.id === "string" ? this.questions.get(data.id) : undefined
        if (question !== undefined) {
          this.questions.delete(question.id)
          // An allowed call starts now: its running time counts from here.
          const call = this.calls.get(question.callId)
          if (call !== undefined && (data.outcome === "allowed-once" || data.outcome === "allowed-always")) {
            this.calls.set(call.callId, { ...call, since: this.now() })
          }
        }
        break
      }
      case "turn/end": {
        this.streaming = undefined
        if (this.claimed.size > 0) {
          const reason = (event.data as { readonly reason?: { readonly kind?: unknown } }).reason?.kind
          const lines = [...this.claimed.values()].map((item) => `  ${item.queue} > ${item.text}`)
          this.claimed.clear()
          this.notice(
            `turn ${this.turn} ended${
              typeof reason === "string" ? ` ${reason}` : ""
            } before its input entered; not sent to the model:\n${lines.join("\n")}`,
            "warn"
          )
        }
        break
      }
      case "assistant/message": {
        this.streaming = undefined
        break
      }
      case "compaction/start": {
        const data = event.data as {
          readonly compactionId?: unknown
          readonly turn?: unknown
          readonly reason?: unknown
          readonly tokens?: unknown
        }
        this.compacting = {
          compactionId: String(data.compactionId),
          reason: typeof data.reason === "string" ? visible(data.reason.slice(0, 64)) : "compaction",
          tokens: typeof data.tokens === "number" ? data.tokens : 0,
          turn: typeof data.turn === "number" ? data.turn : 0
        }
        break
      }
      case "compaction/end": {
        const compactionId = String((event.data as { readonly compactionId?: unknown }).compactionId)
        if (this.compacting?.compactionId === compactionId) this.compacting = undefined
        for (const entry of this.projection.push(event)) this.entry(entry)
        if (this.ended.push(compactionId) > 16) this.ended.shift()
        const waiting = this.endWaiters.get(compactionId)
        if (waiting !== undefined) {
          this.endWaiters.delete(compactionId)
          for (const f of waiting) f()
        }
        return
      }
    }
    for (const entry of this.projection.push(event)) this.entry(entry)
  }

  private header(turn: number): void {
    if (turn === this.headerTurn || turn <= 0) return
    this.headerTurn = turn
    this.push({ kind: "turn", key: this.key(), turn })
  }

  private entry(entry: Transcript.Entry): void {
    this.header(entry.turn)
    switch (entry.kind) {
      case "user":
        this.push({ kind: "user", key: this.key(), text: shown(entry.text) })
        return
      case "context":
        this.push({
          kind: "context",
          key: this.key(),
          label: shown(TranscriptText.sourceLabel(entry.source)),
          text: shown(entry.text, SHOWN_RESULT_LINES)
        })
        return
      case "assistant":
        this.push({ kind: "assistant", key: this.key(), text: shown(entry.text), interrupted: entry.interrupted === true })
        return
      case "tool-call":
        this.calls.set(entry.callId, {
          callId: entry.callId,
          name: shown(entry.name),
          args: shown(entry.arguments),
          since: this.now()
        })
        this.callArguments.set(entry.callId, entry.arguments)
        return
      case "tool-result": {
        const call = this.calls.get(entry.callId)
        this.calls.delete(entry.callId)
        this.callArguments.delete(entry.callId)
        this.children.ended(entry.callId)
        this.push({
          kind: "tool",
          key: this.key(),
          name: call?.name ?? "?",
          args: call?.args ?? "",
          result: shown(entry.text, SHOWN_RESULT_LINES),
          isError: entry.isError
        })
        return
      }
      case "turn-end":
        this.flushCalls()
        // A turn never ends with a question open (§26 rule 4); a log that says otherwise shows none.
        this.questions.clear()
        this.children.clear()
        this.push({
          kind: "turn-end",
          key: this.key(),
          turn: entry.turn,
          reason: shown(TranscriptText.reasonLabel(entry.reason)),
          tone: toneOf(entry.reason)
        })
        return
      case "compaction":
        this.push({
          kind: "compaction",
          key: this.key(),
          headline: shown(TranscriptText.compactionLabel(entry)),
          detail: entry.summary === undefined ? undefined : firstLine(entry.summary),
          tone: compactionTone(entry.outcome)
        })
        return
      case "checkpoint":
        this.push({
          kind: "compaction",
          key: this.key(),
          headline: visible(TranscriptText.checkpointLabel(entry)),
          detail: firstLine(entry.text),
          tone: "ok"
        })
        return
      case "approval":
        this.push({
          kind: "notice",
          key: this.key(),
          text: shown(TranscriptText.approvalLabel(entry)),
          tone: entry.event === "asked" ? "warn" : entry.outcome === "allowed-once" || entry.outcome === "allowed-always"
            ? "ok"
            : "error"
        })
        return
      case "session":
      case "subagent": {
        const text = entry.kind === "session" ? TranscriptText.sessionLabel(entry) : TranscriptText.subagentLabel(entry)
        this.push({ kind: "notice", key: this.key(), text: shown(text), tone: "ok" })
        return
      }
    }
  }

  /** Shows calls left without a result (only a DSH log can have them at a turn's end). */
  private flushCalls(): void {
    for (const call of this.calls.values()) {
      this.push({ kind: "tool", key: this.key(), name: call.name, args: call.args, result: undefined, isError: false })
    }
    this.calls.clear()
    this.callArguments.clear()
  }

  /**
   * Opens question `id` about call `callId` (its arguments from the call's `tool/call`, or `args`
   * for a sub-agent's question, which names its session).
   */
  private ask(
    question: {
      readonly id: string
      readonly callId: string
      readonly toolName: string
      readonly sessionId?: string | undefined
    },
    args?: string
  ): void {
    if (this.questions.has(question.id)) return
    this.questions.set(question.id, {
      id: question.id,
      callId: question.callId,
      toolName: oneLine(question.toolName, 64),
      args: oneLine(args ?? this.callArguments.get(question.callId) ?? ""),
      since: this.now(),
      answering: false,
      ...(question.sessionId === undefined ? {} : { sessionId: question.sessionId })
    })
  }

  /** Whether an open question of this agent's own is about its call `callId`. */
  private asked(callId: string): boolean {
    for (const question of this.questions.values()) {
      if (question.callId === callId && question.sessionId === undefined) return true
    }
    return false
  }
}

const pendingItem = (message: UserMessage, queue: PendingItem["queue"]): PendingItem => {
  const direct = message.source?.kind === "user"
  return {
    id: message.id,
    queue,
    label: direct ? "you" : visible(TranscriptText.sourceLabel(message.source).slice(0, 256)),
    direct,
    // One line of the live area (cut at its width): the start of the text is enough.
    text: visible(textOf(message.content ?? []).slice(0, 1024))
  }
}
