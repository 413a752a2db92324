/**
 * The loop side of compaction (§17, `Compaction.ts`): the running estimate of the request's
 * tokens, the pressure test at a pre-step boundary, and the bracket a compaction logs:
 * `compaction/start` (its own append, before the policy runs), then in one append
 * `compaction/summary`, the checkpoint `user/message`s (envelope `surfaceOp` replace) and
 * `compaction/end {outcome:"compacted"}`; or `compaction/end` with `skipped`/`failed`. A cancel
 * while the policy runs interrupts it like any step: the driver closes the bracket `aborted`
 * (`driver.ts` `closeAborted`) and nothing of it is kept.
 *
 * Nothing here touches the inbox: what the step claimed is entered after the bracket, what
 * arrives during it waits for the next boundary (§4).
 *
 * Cost on the per-step path: with no policy and no pending `compact`, one field read; with a
 * policy, the estimate of the messages that joined the history since the last boundary.
 */
import { Cause, Effect, Exit } from "effect"
import {
  CHECKPOINT_PLUGIN,
  CHECKPOINT_PREFIX,
  type CompactionEntry,
  CompactionError,
  type CompactionOutcome,
  type CompactionPlan,
  type CompactionPolicy,
  type CompactionReason,
  type CompactionReport,
  type CompactionSummaryData,
  estimateFixed,
  estimateTokens,
  summarize
} from "../../Compaction.js"
import * as History from "../../History.js"
import type { ContentBlock, Message, MessageId, UserMessage } from "../../Message.js"
import type { ModelService } from "../../Model.js"
import type { EventDraft, SessionEvent, Usage } from "../../SessionEvent.js"
import type { SessionWriteError } from "../../SessionLog.js"
import { causeMessage } from "../cause.js"
import { checkJson, deepFreeze } from "../json.js"
import { isUserMessageShape } from "../logCodec.js"
import { isToolResultMessage } from "../message.js"
import * as Trace from "../tracing.js"
import { resumeAll } from "../waiters.js"
import { commit } from "./section.js"
import { type AgentState, type CompactionState, history, seen, type TurnState } from "./state.js"
import { noteSummary } from "./usage.js"

/** The policy `agent.compact` uses when the agent has none: summarize, no pressure trigger. */
const manualPolicy = summarize({})

/** The agent's compaction state, allocated on first use. */
export const compactionState = (a: AgentState): CompactionState =>
  a.compactionCell ??
    (a.compactionCell = {
      tokens: estimateFixed(a.config.instructions, a.config.toolDefinitions),
      counted: 0,
      retryAbove: 0,
      surface: undefined,
      request: undefined
    })

/** The estimate of the request now (fixed part and history), counting the messages added since. */
const historyTokens = (c: CompactionState, list: ReadonlyArray<Message>): number => {
  // A history replaced by a compaction is shorter: the compaction reset the count.
  for (; c.counted < list.length; c.counted++) c.tokens += estimateTokens(list[c.counted]!)
  return c.tokens
}

const batchTokens = (batch: ReadonlyArray<Message>): number => {
  let n = 0
  for (const m of batch) n += estimateTokens(m)
  return n
}

/**
 * Whether the step about to enter `batch` compacts first: a pending `compact`, or the estimate of
 * the request (history, the messages of `prefix` appended with the decision, and batch) above `contextWindow − reserve` and above the level a previous
 * compaction at this boundary left (so that a compaction that could not get below the line is not
 * repeated at every step).
 */
export const needsCompaction = (
  a: AgentState,
  batch: ReadonlyArray<Message>,
  prefix?: ReadonlyArray<EventDraft>
): boolean => {
  const c = a.compactionCell
  if (c !== undefined && c.request !== undefined) return true
  const policy = a.config.compaction
  if (policy === undefined || policy.contextWindow === undefined) return false
  const state = c ?? compactionState(a)
  let tokens = historyTokens(state, history(a)) + batchTokens(batch)
  // Messages appended with this decision (the step's last results), not yet in the history.
  if (prefix !== undefined) {
    for (const d of prefix) {
      if (d.type === "tool/result" || d.type === "assistant/message") {
        tokens += estimateTokens((d.data as { readonly message: Message }).message)
      }
    }
  }
  return tokens > policy.contextWindow - policy.reserve && tokens > state.retryAbove
}

/**
 * After a response (§17): the provider's reported input tokens replace the estimate of the
 * request it answered (`history` as it was sent); only with a policy. A count of 0 is no report
 * (the adapters give 0 for a kind the provider did not send, §18): the estimate stays.
 */
export const noteUsage = (a: AgentState, usage: Usage | undefined): void => {
  const reported = usage?.inputTokens
  if (a.config.compaction === undefined || reported === undefined || reported === 0) return
  const c = compactionState(a)
  c.tokens = reported
  c.counted = history(a).length
}

/** Requests a compaction (`agent.compact`); returns the request's waiter list. */
export const requestCompaction = (
  a: AgentState,
  instructions: string | undefined
): NonNullable<CompactionState["request"]> => {
  const c = compactionState(a)
  return c.request ?? (c.request = { instructions, waiters: [] })
}

const GAP = 1_024

/**
 * The level below which pressure does not compact again after a compaction that left `tokens`:
 * none when it got below the line; else `tokens` plus max(1,024, reserve/2), capped at the window
 * while `tokens` is below it (so that a compaction that could not get below the line is not
 * repeated at every step, and no request passes the window without one having been tried).
 */
const guardAfter = (policy: CompactionPolicy, tokens: number): number => {
  const window = policy.contextWindow
  if (window === undefined) return 0
  if (tokens <= window - policy.reserve) return 0
  const grown = tokens + Math.max(GAP, Math.floor(policy.reserve / 2))
  // Still above the window itself: the next pressure compaction waits for that growth too (the
  // request may well overflow: the overflow path compacts once and retries).
  return tokens >= window ? grown : Math.min(grown, window)
}

/**
 * Runs one compaction in the open turn of `t` (or, with no turn open, a manual bracket between
 * turns): logs the bracket, runs the policy, applies its plan to the history. A pending manual
 * request is served by it (reason `manual`) and its waiters get the report. Fails only with a
 * store error or by interruption (the driver then closes the bracket `aborted`).
 */
export const compact = (
  a: AgentState,
  t: TurnState,
  reason: CompactionReason
): Effect.Effect<CompactionReport, SessionWriteError> =>
  Effect.suspend(() => {
    const c = compactionState(a)
    const request = c.request
    c.request = undefined
    const why: CompactionReason = request !== undefined ? "manual" : reason
    const policy = a.config.compaction ?? manualPolicy
    const turn = t.turnOpen ? t.turn : null
    const before = historyTokens(c, history(a))
    const extra = request?.instructions
    let started = ""
    // `model`: the agent's, or with tracing one whose requests are spans (`Trace.compaction`).
    const bracket = (model: ModelService) =>
      Effect.flatMap(a.config.ids.next, (compactionId) =>
        Effect.flatMap(
          commit(a, [{
            type: "compaction/start",
            data: { compactionId, turn, reason: why, tokens: before, ...(extra !== undefined ? { instructions: extra } : {}) }
          }], () => {
            started = compactionId
            t.compaction = { id: compactionId, turn }
          }),
          (): Effect.Effect<CompactionReport, SessionWriteError> => {
            const run: Run = { a, t, c, compactionId, turn, before, policy }
            const entries = surfaceOf(a, c)
            const planned: Effect.Effect<CompactionPlan, CompactionError> = entries === undefined
              ? Effect.fail(
                new CompactionError({ code: "HISTORY_MISMATCH", message: "the history does not match the log's surface" })
              )
              : Effect.catchAllDefect(
                Effect.suspend(() =>
                  policy.compact({
                    sessionId: a.id,
                    compactionId,
                    turn,
                    reason: why,
                    instructions: request?.instructions,
                    entries,
                    protectedFrom: protectedFrom(t, entries),
                    tokens: before,
                    model
                  })
                ),
                (defect) => Effect.fail(new CompactionError({ code: "POLICY_FAILED", message: causeMessage(Cause.die(defect)) }))
              )
            return Effect.flatMap(Effect.either(planned), (result): Effect.Effect<CompactionReport, SessionWriteError> => {
              if (result._tag === "Left") {
                return finish(run, "failed", errorOf(result.left))
              }
              const plan = result.right
              const shape = shapeProblem(plan)
              if (shape !== undefined) return finish(run, "failed", { code: "INVALID_PLAN", message: shape })
              const empty = plan.summary === undefined && (plan.replace === undefined || plan.replace.length === 0)
              if (empty) {
                return finish(run, "skipped")
              }
              return apply(run, entries!, plan)
            })
          }
        ))
    // Traced (§19): the bracket in its `compaction` span.
    const traced = Trace.compaction(a, t.trace, turn, why, bracket)
    if (request === undefined) return traced
    return Effect.onExit(traced, (exit) =>
      Effect.sync(() => {
        resumeAll(
          request.waiters,
          Exit.isSuccess(exit) ? Effect.succeed(exit.value) : Effect.succeed(abortedReport(started, before, exit.cause))
        )
      }))
  })

/**
 * The report of a compaction that did not end by itself (`compactionId` "" when it had not
 * logged its start yet): `aborted` when a cancel cut it, else `failed` with the run's error.
 */
const abortedReport = (compactionId: string, before: number, cause?: Cause.Cause<unknown>): CompactionReport =>
  cause === undefined || Cause.isInterruptedOnly(cause)
    ? { compactionId, outcome: "aborted", tokensBefore: before, tokensAfter: before }
    : {
      compactionId,
      outcome: "failed",
      tokensBefore: before,
      tokensAfter: before,
      error: { code: "RUN_FAILED", message: causeMessage(cause) }
    }

/**
 * Pending `compact` waiters of a run that stopped before serving them get `aborted`, with the
 * estimate of the history as it is (the count brought up to date: how far it had been counted
 * depends on which paths ran, §24).
 */
export const abortRequest = (a: AgentState): void => {
  const c = a.compactionCell
  const request = c?.request
  if (c === undefined || request === undefined) return
  c.request = undefined
  resumeAll(request.waiters, Effect.succeed(abortedReport("", historyTokens(c, history(a)))))
}

/** A policy's failure as `{code, message}`: a `CompactionError`'s own, else `POLICY_FAILED` with the value shown. */
const errorOf = (e: unknown): { readonly code: string; readonly message: string } => {
  if (e instanceof CompactionError) return { code: e.code, message: e.message }
  let shown: string
  try {
    shown = e instanceof Error ? e.message : typeof e === "string" ? e : JSON.stringify(e) ?? String(e)
  } catch {
    shown = String(e)
  }
  return { code: "POLICY_FAILED", message: `the compaction policy failed with ${shown}` }
}

/**
 * Where the open step's own input begins in the history (§17: what a step entered is never
 * summarized away before its own request): the messages entered at this step's start, in an
 * overflow compaction; `length` at a boundary (the claimed batch is not in the history yet).
 */
const protectedFrom = (t: TurnState, entries: ReadonlyArray<CompactionEntry>): number => {
  let from = t.stepOpen && t.enteredFrom >= 0 ? Math.min(t.enteredFrom, entries.length) : entries.length
  // A later step of the turn (a tool continuation): the results it continues from, and the call
  // they answer, stay too. Not at a turn's first step: the last turn's calls are done with.
  if (t.step < 2) return from
  let i = from
  while (i > 0 && isToolResultMessage(entries[i - 1]!.message)) i--
  if (i > 0 && i < from) {
    const m = entries[i - 1]!.message
    if (m.role === "assistant" && m.content.some((b) => b.type === "tool-call")) from = i - 1
  }
  return from
}

/** Why a plan is not the shape of a `CompactionPlan` (an object; `summary` an object; `replace` an array of objects), or undefined. */
const shapeProblem = (plan: unknown): string | undefined => {
  if (typeof plan !== "object" || plan === null) return `the plan is ${plan === null ? "null" : typeof plan}, not an object`
  const p = plan as { readonly summary?: unknown; readonly replace?: unknown }
  if (p.summary !== undefined && (typeof p.summary !== "object" || p.summary === null)) return "summary is not an object"
  if (p.replace !== undefined) {
    if (!Array.isArray(p.replace)) return "replace is not an array"
    if (p.replace.some((r) => typeof r !== "object" || r === null)) return "replace holds something that is not an object"
  }
  return undefined
}

/** The index, among `events`, of the `n`-th checkpoint (an event with a `surfaceOp`). */
const checkpointAt = (events: ReadonlyArray<SessionEvent>, n: number): number => {
  let found = -1
  for (let i = 0; i < events.length; i++) {
    if ((events[i] as { readonly surfaceOp?: unknown }).surfaceOp !== undefined && ++found === n) return i
  }
  return -1
}

/** The seq of a model-visible message event appended by the loop (no `surfaceOp`), else -1. */
const appendedSeq = (e: SessionEvent): number =>
  (e.type === "user/message" || e.type === "assistant/message" || e.type === "tool/result") &&
    (e as { readonly surfaceOp?: unknown }).surfaceOp === undefined
    ? e.seq
    : -1

const messageIdOf = (e: SessionEvent | undefined): string | undefined => {
  if (e === undefined) return undefined
  const d = e.data as { readonly id?: string; readonly message?: { readonly id?: string } }
  return e.type === "user/message" ? d.id : d.message?.id
}

/**
 * The surface of the log with token estimates, if it matches the live history (it always
 * should). After a compaction of this agent: the seqs it left plus the message events appended
 * since (O(events since that compaction)); else one pass over the log (`History.surface`).
 */
const surfaceOf = (a: AgentState, c: CompactionState): Array<CompactionEntry> | undefined => {
  const list = history(a)
  const events = a.sessionLog.events()
  let seqs: Array<number> | undefined = undefined
  const known = c.surface
  if (known !== undefined && known.seqs.length <= list.length) {
    seqs = known.seqs.slice()
    for (let i = known.next; i < events.length; i++) {
      const seq = appendedSeq(events[i]!)
      if (seq >= 0) seqs.push(seq)
    }
    if (seqs.length !== list.length) seqs = undefined
  }
  if (seqs === undefined) seqs = History.surface(events, { header: a.sessionLog.header }).map((e) => e.seq)
  if (seqs.length !== list.length) return undefined
  const out: Array<CompactionEntry> = new Array(seqs.length)
  for (let i = 0; i < seqs.length; i++) {
    const m = list[i]!
    if (messageIdOf(events[seqs[i]!]) !== m.id) return undefined
    out[i] = { seq: seqs[i]!, message: m, tokens: estimateTokens(m) }
  }
  return out
}

/** One compaction being run: the agent, its turn, its state, the bracket's id and turn, the estimate before, the policy. */
interface Run {
  readonly a: AgentState
  readonly t: TurnState
  readonly c: CompactionState
  readonly compactionId: string
  readonly turn: number | null
  readonly before: number
  readonly policy: CompactionPolicy
}

/** Ends a bracket without replacements (`skipped`, `failed`). */
const finish = (
  { a, before, c, compactionId, policy, t, turn }: Run,
  outcome: CompactionOutcome,
  error?: { readonly code: string; readonly message: string }
): Effect.Effect<CompactionReport, SessionWriteError> =>
  commit(
    a,
    [{ type: "compaction/end", data: { compactionId, turn, outcome, ...(error !== undefined ? { error } : {}) } }],
    () => {
      t.compaction = undefined
      // Nothing replaced: not again until the estimate grows (never past the window).
      // (`before` is the history's estimate; the batch that passed the line is not in it.)
      c.retryAbove = guardAfter(policy, Math.max(before, (policy.contextWindow ?? 0) - policy.reserve + 1))
      return { compactionId, outcome, tokensBefore: before, tokensAfter: before, ...(error !== undefined ? { error } : {}) }
    }
  )

/** Checks a plan against the surface: the error message, or undefined. */
const invalidPlan = (entries: ReadonlyArray<CompactionEntry>, plan: CompactionPlan, keep: number): string | undefined => {
  const n = entries.length
  const upTo = plan.summary?.upTo ?? 0
  if (plan.summary !== undefined) {
    if (!Number.isInteger(upTo) || upTo < 1 || upTo > n) return `summary.upTo ${upTo} is not in 1..${n}`
    if (upTo > keep) return `summary.upTo ${upTo} would summarize the open step's own input (from ${keep} on)`
    if (typeof plan.summary.text !== "string" || plan.summary.text.trim().length === 0) {
      return "summary.text is not a non-empty string"
    }
    // A cut before a tool result would part it from its call; before a prompt or a response is fine.
    if (upTo < n && isToolResultMessage(entries[upTo]!.message)) {
      return `summary.upTo ${upTo} cuts before a tool result, parting it from its call`
    }
  }
  const seenIndex = new Set<number>()
  for (const r of plan.replace ?? []) {
    if (!Number.isInteger(r.index) || r.index < upTo || r.index >= n) {
      return `replace index ${r.index} is not in ${upTo}..${n - 1}`
    }
    if (seenIndex.has(r.index)) return `replace index ${r.index} appears twice`
    seenIndex.add(r.index)
    const old = entries[r.index]!.message
    if (old.role !== "user") return `replace index ${r.index} is an assistant message`
    if (!Array.isArray(r.content) || r.content.length === 0) return `replace index ${r.index} has no content blocks`
    if (!isUserMessageShape({ id: "x", role: "user", content: r.content, source: { kind: "plugin" } })) {
      return `replace index ${r.index}: its content is not well-formed content blocks`
    }
    // A tool result stays the result of the same calls, so that no call loses its result.
    const was = resultIds(old.content)
    const now = resultIds(r.content)
    if (was !== now) return `replace index ${r.index} changes the tool results it holds (${was || "none"} → ${now || "none"})`
  }
  return undefined
}

/** A summary's usage as logged: its finite numeric fields, or none. */
const usageOf = (u: unknown): Usage | undefined => {
  if (typeof u !== "object" || u === null) return undefined
  const out: Record<string, number> = {}
  for (const [k, v] of Object.entries(u)) if (typeof v === "number" && Number.isFinite(v)) out[k] = v
  return Object.keys(out).length > 0 ? out as Usage : undefined
}

/** The tool-call ids of a message's `tool-result` blocks, in order, as one key. */
const resultIds = (content: ReadonlyArray<ContentBlock>): string =>
  content.flatMap((b) => (b.type === "tool-result" ? [b.toolCallId] : [])).join(",")

/** Logs the summary, the checkpoints and `compaction/end {compacted}` in one append, then applies them. */
const apply = (
  run: Run,
  entries: ReadonlyArray<CompactionEntry>,
  plan: CompactionPlan
): Effect.Effect<CompactionReport, SessionWriteError> => {
  const { a, before, c, compactionId, policy, t, turn } = run
  const problem = invalidPlan(entries, plan, protectedFrom(t, entries))
  if (problem !== undefined) {
    return finish(run, "failed", { code: "INVALID_PLAN", message: problem })
  }
  const replaced = new Map<number, ReadonlyArray<ContentBlock>>()
  for (const r of plan.replace ?? []) replaced.set(r.index, r.content)
  const count = (plan.summary !== undefined ? 1 : 0) + replaced.size
  return Effect.flatMap(Effect.replicateEffect(a.config.ids.next, count), (ids) => {
    const drafts: Array<EventDraft> = []
    const next: Array<Message> = []
    const source = { kind: "plugin", plugin: CHECKPOINT_PLUGIN, compactionId }
    let id = 0
    const upTo = plan.summary?.upTo ?? 0
    try {
      if (plan.summary !== undefined) {
        const s = plan.summary
        const shadowed = entries.slice(0, upTo)
        let shadowedTokenCount = 0
        for (const e of shadowed) shadowedTokenCount += e.tokens
        const message = deepFreeze(checkJson({
          id: ids[id++]! as MessageId,
          role: "user" as const,
          content: [{ type: "text" as const, text: CHECKPOINT_PREFIX + s.text }],
          source
        }, "checkpoint")) as UserMessage
        drafts.push({
          type: "compaction/summary",
          data: checkJson({
            compactionId,
            summary: s.text,
            shadowedRange: { start: shadowed[0]!.seq, end: shadowed[upTo - 1]!.seq },
            shadowedSeqs: shadowed.map((e) => e.seq),
            shadowedTokenCount,
            provider: typeof s.provider === "string" ? s.provider : a.config.model.provider,
            model: typeof s.model === "string" ? s.model : a.config.model.model,
            ...(usageOf(s.usage) !== undefined ? { usage: usageOf(s.usage) } : {}),
            instructions: typeof s.instructions === "string" ? s.instructions : ""
          }, "summary")
        })
        drafts.push({
          type: "user/message",
          data: message,
          surfaceOp: { op: "replace", start: shadowed[0]!.seq, end: shadowed[upTo - 1]!.seq }
        })
        next.push(message)
      }
      for (let i = upTo; i < entries.length; i++) {
        const e = entries[i]!
        const content = replaced.get(i)
        if (content === undefined) {
          next.push(e.message)
          continue
        }
        const message = deepFreeze(
          checkJson({ id: ids[id++]! as MessageId, role: "user" as const, content, source }, "checkpoint")
        ) as UserMessage
        drafts.push({ type: "user/message", data: message, surfaceOp: { op: "replace", start: e.seq, end: e.seq } })
        next.push(message)
      }
    } catch (e) {
      return finish(run, "failed", {
        code: "INVALID_PLAN",
        message: causeMessage(Cause.die(e))
      })
    }
    let after = estimateFixed(a.config.instructions, a.config.toolDefinitions)
    for (const m of next) after += estimateTokens(m)
    drafts.push({ type: "compaction/end", data: { compactionId, turn, outcome: "compacted", tokens: after } })
    const kept = entries.slice(upTo).map((e) => e.seq)
    return commit(a, drafts, (events): CompactionReport => {
      t.compaction = undefined
      a.historyCell = next
      c.tokens = after
      c.counted = next.length
      c.retryAbove = guardAfter(policy, after)
      // The new surface's seqs (the checkpoints' from this append), for the next compaction.
      const seqs: Array<number> = []
      let e = 0
      if (plan.summary !== undefined) seqs.push(events[checkpointAt(events, e++)]!.seq)
      for (let i = upTo, k = 0; i < entries.length; i++, k++) {
        seqs.push(replaced.has(i) ? events[checkpointAt(events, e++)]!.seq : kept[k]!)
      }
      c.surface = { seqs, next: events[events.length - 1]!.seq + 1 }
      if (plan.summary !== undefined) {
        const summary = events[0]!.data as CompactionSummaryData
        noteSummary(a, turn, summary.model, summary.usage)
        Trace.summaryUsage(t.trace, summary.usage)
      }
      const used = seen(a)
      for (const i of ids) used.add(i)
      return { compactionId, outcome: "compacted", tokensBefore: before, tokensAfter: after }
    })
  })
}
