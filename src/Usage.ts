/**
 * Token usage from the session log (§18; §12 projections). Pure projections over a log's events,
 * ours or DSH v0: every model request the log records (`assistant/message`, and a compaction's
 * `compaction/summary`), summed per step, per turn, per session and per model. Counts are whole
 * tokens in the normalized shape of `SessionEvent.Usage`: `inputTokens` is the whole prompt,
 * cache reads and writes included (counted once), `reasoningTokens` a part of `outputTokens`,
 * `total = input + output`. A DSH v0 log counts its cache reads and writes beside its input
 * (DeepSeek's miss/hit split): its input here is `inputTokens + cacheReadTokens +
 * cacheWriteTokens`. What the counts cost is `Prices`; a limit on them is `Budget`.
 *
 * Decisions:
 * - The model of a request is the model that answered (`response.model`) when the provider said,
 *   else the model the request was sent to (the message's `source.model`); a summary's `model`.
 * - Events before the header's `seedLength` (a child session's inherited prefix, §3.1)
 *   are the parent's spending and are not counted.
 * - A compaction's summarization request counts in the session, in its model and in the turn it
 *   ran in (none between turns), not in a step. Only a compaction that ended `compacted` logs its
 *   summary's usage; the request of one that failed or was aborted is not in the log.
 * - A response that reported no usage counts 0 (a scripted model, a provider that sends none, a
 *   log written before the adapters reported usage) and is counted in `unreported`; a missing
 *   or malformed count is 0.
 * - A sub-agent's usage (§27) is read from the parent's own log, never from the child's: each
 *   `subagent/end` records what the child's run spent (its own requests and, recursively, its
 *   children's), and counts in `subagents` (of the session, and of the turn it ended in), apart
 *   from the session's own requests (`usage`, `byModel`, `unreported`, `requests`); `withSubagents`
 *   adds the two. A child's own log counts only its own requests and its children: a parent and a
 *   child never count the same request twice.
 *
 * @since 0.1.0
 */
import { isDsh, seedLengthOf } from "./internal/logOptions.js"
import type { SessionEvent, TurnEndReason, Usage as LoggedUsage } from "./SessionEvent.js"
import type { LogOptions } from "./SessionLog.js"

// ---------------------------------------------------------------------------------------------
// Counts
// ---------------------------------------------------------------------------------------------

/**
 * Usage as the log records it (`SessionEvent.Usage`): every count optional.
 *
 * @since 0.1.0
 * @category models
 */
export type Usage = LoggedUsage

/**
 * Complete token counts (whole tokens, each ≥ 0): what every projection of this module sums.
 * `inputTokens` includes `cacheReadTokens` and `cacheWriteTokens`; `outputTokens` includes
 * `reasoningTokens` (§18).
 *
 * @since 0.1.0
 * @category models
 */
export interface Totals {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cacheReadTokens: number
  readonly cacheWriteTokens: number
  readonly reasoningTokens: number
}

/**
 * Totals per model name (see the module's decisions for which name a request counts under).
 *
 * @since 0.1.0
 * @category models
 */
export interface ByModel {
  readonly [model: string]: Totals
}

/**
 * No tokens.
 *
 * @since 0.1.0
 * @category constructors
 */
export const zero: Totals = Object.freeze({
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  reasoningTokens: 0
})

const count = (u: unknown): number => (typeof u === "number" && Number.isFinite(u) && u > 0 ? u : 0)

/**
 * The complete counts of a logged usage (missing, negative or non-numeric counts are 0). With
 * `dsh: true` the usage is a DSH v0 log's, whose `inputTokens` excludes the cache counts: they are
 * added to it.
 *
 * @example
 * ```ts
 * import { Usage } from "effect-agent-loop"
 *
 * Usage.of({ inputTokens: 90, outputTokens: 28, cacheReadTokens: 1280 }, { dsh: true }).inputTokens // 1370
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const of = (usage: Usage | Totals | undefined, options?: { readonly dsh?: boolean | undefined }): Totals => {
  if (usage === undefined || typeof usage !== "object" || usage === null) return zero
  const cacheReadTokens = count(usage.cacheReadTokens)
  const cacheWriteTokens = count(usage.cacheWriteTokens)
  const input = count(usage.inputTokens)
  return {
    inputTokens: options?.dsh === true ? input + cacheReadTokens + cacheWriteTokens : input,
    outputTokens: count(usage.outputTokens),
    cacheReadTokens,
    cacheWriteTokens,
    reasoningTokens: count(usage.reasoningTokens)
  }
}

/**
 * The sum of two usages (each read as `of` reads it, normalized shape).
 *
 * @since 0.1.0
 * @category combinators
 */
export const add = (a: Usage | Totals | undefined, b: Usage | Totals | undefined): Totals => {
  const x = of(a)
  const y = of(b)
  return {
    inputTokens: x.inputTokens + y.inputTokens,
    outputTokens: x.outputTokens + y.outputTokens,
    cacheReadTokens: x.cacheReadTokens + y.cacheReadTokens,
    cacheWriteTokens: x.cacheWriteTokens + y.cacheWriteTokens,
    reasoningTokens: x.reasoningTokens + y.reasoningTokens
  }
}

/** `add` of two complete counts (no normalization: the projections' inner loop). */
const plus = (x: Totals, y: Totals): Totals => ({
  inputTokens: x.inputTokens + y.inputTokens,
  outputTokens: x.outputTokens + y.outputTokens,
  cacheReadTokens: x.cacheReadTokens + y.cacheReadTokens,
  cacheWriteTokens: x.cacheWriteTokens + y.cacheWriteTokens,
  reasoningTokens: x.reasoningTokens + y.reasoningTokens
})

/**
 * The total tokens of a usage: `inputTokens + outputTokens` (cached and reasoning tokens are
 * parts of those, so they are not added again).
 *
 * @since 0.1.0
 * @category combinators
 */
export const total = (usage: Usage | Totals | undefined): number => {
  const u = of(usage)
  return u.inputTokens + u.outputTokens
}

/**
 * `byModel` with `usage` added under `model` (a new record; the input is unchanged).
 *
 * @since 0.1.0
 * @category combinators
 */
export const addByModel = (byModel: ByModel, model: string, usage: Totals): ByModel => ({
  ...byModel,
  [model]: plus(byModel[model] ?? zero, usage)
})

// ---------------------------------------------------------------------------------------------
// Projections
// ---------------------------------------------------------------------------------------------

/**
 * One model request the log records: a step's response (`kind: "step"`, its `assistant/message`)
 * or a compaction's summarization (`kind: "compaction"`, its `compaction/summary`). `seq` and
 * `time` (epoch ms) are the logged event's; `startTime` is the time of the step's `step/start`
 * (or the `compaction/start`), so `time - startTime` is the wall time of the request, retries
 * (and a compaction inside the step) included. `turn` is `null` for a compaction between turns.
 * `reported` is false when the response carried no usage.
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestUsage {
  readonly kind: "step" | "compaction"
  readonly seq: number
  readonly time: number
  readonly startTime: number | undefined
  readonly turn: number | null
  readonly step: number | undefined
  readonly provider: string | undefined
  readonly model: string
  readonly usage: Totals
  readonly reported: boolean
  readonly interrupted: boolean
}

/**
 * One step (`step/start` … `step/end`) and the usage of its response.
 *
 * @since 0.1.0
 * @category models
 */
export interface StepUsage {
  readonly turn: number
  readonly step: number
  readonly usage: Totals
  /** The model of its response (undefined: none was logged). */
  readonly model: string | undefined
  readonly startTime: number
  /** The `step/end` time (undefined while the step is open). */
  readonly endTime: number | undefined
}

/**
 * One sub-agent run as its parent's `subagent/end` records it (§27): the child's session id and
 * the call (undefined when the event lacks them), the parent's turn it ended in (`null`: none
 * open), its stop reason, and what the child's run spent: `usage` and `byModel` (its own requests
 * and its children's; a `usage` without `byModel` counts under `"unknown"`), `unreported` (its
 * responses that reported no usage). `reported` is false for an end that records no usage (a
 * child that never ran: counted 0).
 *
 * @since 0.1.0
 * @category models
 */
export interface SubagentRun {
  readonly seq: number
  readonly id: string | undefined
  readonly callId: string | undefined
  readonly turn: number | null
  readonly stopReason: string | undefined
  readonly usage: Totals
  readonly byModel: ByModel
  readonly unreported: number
  readonly reported: boolean
}

/**
 * The usage of the sub-agents a session (or a turn) ran: the sums of their runs (`SubagentRun`),
 * in log order.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubagentUsage {
  readonly usage: Totals
  readonly byModel: ByModel
  /** Responses of the children that reported no usage (their 0 is unknown). */
  readonly unreported: number
  readonly runs: ReadonlyArray<SubagentRun>
}

/**
 * No sub-agents.
 *
 * @since 0.1.0
 * @category constructors
 */
export const noSubagents: SubagentUsage = Object.freeze({
  usage: zero,
  byModel: Object.freeze({}),
  unreported: 0,
  runs: Object.freeze([])
})

/**
 * One turn: its steps' and compactions' usage, by model too, its times and end reason.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnUsage {
  readonly turn: number
  /** Its own requests' usage (its sub-agents' is `subagents`; both: `withSubagents`). */
  readonly usage: Totals
  readonly byModel: ByModel
  readonly steps: number
  readonly requests: number
  /** Its requests whose response reported no usage (counted 0: the turn's true usage is unknown). */
  readonly unreported: number
  /** The sub-agents whose run ended in this turn (§27). */
  readonly subagents: SubagentUsage
  readonly startTime: number
  /** The `turn/end` time and reason (undefined while the turn is open). */
  readonly endTime: number | undefined
  readonly end: TurnEndReason | undefined
}

/**
 * A session's usage: the session's own requests, by model, and per turn, step and request (in log
 * order); and its sub-agents' (`subagents`, from its `subagent/end` events). `withSubagents`
 * gives everything the session spent.
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionUsage {
  readonly usage: Totals
  readonly byModel: ByModel
  /** Requests whose response reported no usage (counted 0: the session's true usage is unknown). */
  readonly unreported: number
  readonly turns: ReadonlyArray<TurnUsage>
  readonly steps: ReadonlyArray<StepUsage>
  readonly requests: ReadonlyArray<RequestUsage>
  readonly subagents: SubagentUsage
}

/**
 * Everything a session (or a turn) spent: its own requests plus its sub-agents' runs (§27), by
 * model too, and the responses of both that reported no usage.
 *
 * @example
 * ```ts
 * import { Usage } from "effect-agent-loop"
 * import type { SessionEvent } from "effect-agent-loop"
 *
 * declare const events: ReadonlyArray<SessionEvent.SessionEvent>
 * const u = Usage.fromEvents(events)
 * console.log(Usage.total(Usage.withSubagents(u).usage), "of which sub-agents", Usage.total(u.subagents.usage))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const withSubagents = (
  u: { readonly usage: Totals; readonly byModel: ByModel; readonly unreported: number; readonly subagents: SubagentUsage }
): { readonly usage: Totals; readonly byModel: ByModel; readonly unreported: number } => {
  const sub = u.subagents
  if (sub.runs.length === 0) return { usage: u.usage, byModel: u.byModel, unreported: u.unreported }
  return {
    usage: plus(u.usage, sub.usage),
    byModel: mergeByModel(u.byModel, sub.byModel),
    unreported: u.unreported + sub.unreported
  }
}

/**
 * The sum of two `ByModel`s (a new record).
 *
 * @since 0.1.0
 * @category combinators
 */
export const mergeByModel = (a: ByModel, b: ByModel): ByModel => {
  let out = a
  for (const model in b) out = addByModel(out, model, b[model]!)
  return out
}

/**
 * The usage a `subagent/end` records (§27), read as the projections read it: its `usage` (complete
 * counts, normalized), its `byModel` (a `usage` without one counts under `"unknown"`), its
 * `unreported` (a count ≥ 0), and whether it records a usage at all.
 *
 * @since 0.1.0
 */
export const ofSubagentEnd = (data: unknown): {
  readonly usage: Totals
  readonly byModel: ByModel
  readonly unreported: number
  readonly reported: boolean
} => {
  const d = data as { usage?: unknown; byModel?: unknown; unreported?: unknown } | null | undefined
  const raw = d?.usage
  if (typeof raw !== "object" || raw === null) return { usage: zero, byModel: {}, unreported: 0, reported: false }
  const usage = of(raw as Usage)
  let byModel: ByModel = {}
  if (typeof d!.byModel === "object" && d!.byModel !== null) {
    for (const [model, u] of Object.entries(d!.byModel as Record<string, unknown>)) {
      byModel = addByModel(byModel, model, of(u as Usage))
    }
  } else if (total(usage) > 0) byModel = { unknown: usage }
  return { usage, byModel, unreported: count(d!.unreported), reported: true }
}

/**
 * An incremental projection: `push` events in log order, `result` at any point (cheap: the
 * arrays are shared, not copied). What `chat` uses for its status line.
 *
 * @since 0.1.0
 * @category models
 */
export interface Projector {
  readonly push: (event: SessionEvent) => void
  readonly result: () => SessionUsage
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/**
 * The model a logged response counts under: `response.model`, else `message.source.model`, else
 * `"unknown"` (the module's decisions).
 *
 * @since 0.1.0
 */
export const modelOf = (data: unknown): string => {
  const d = data as { response?: { model?: unknown }; message?: { source?: { model?: unknown } } } | undefined
  const answered = d?.response?.model
  if (typeof answered === "string" && answered !== "") return answered
  const asked = d?.message?.source?.model
  return typeof asked === "string" && asked !== "" ? asked : "unknown"
}

/** `u` with one more run (new records: a projector's results stay as they were). */
const addRun = (u: SubagentUsage, run: SubagentRun): SubagentUsage => ({
  usage: plus(u.usage, run.usage),
  byModel: mergeByModel(u.byModel, run.byModel),
  unreported: u.unreported + run.unreported,
  runs: [...u.runs, run]
})

/**
 * The incremental form of `fromEvents` (same options).
 *
 * @since 0.1.0
 * @category constructors
 */
export const projector = (options?: LogOptions): Projector => {
  const dsh = isDsh(options)
  const seed = seedLengthOf(options)
  let session: Totals = zero
  let byModel: ByModel = {}
  let unreported = 0
  let subagents: SubagentUsage = noSubagents
  const turns: Array<Mutable<TurnUsage>> = []
  const steps: Array<Mutable<StepUsage>> = []
  const requests: Array<RequestUsage> = []
  let turn: Mutable<TurnUsage> | undefined
  let step: Mutable<StepUsage> | undefined
  const compactions = new Map<string, { readonly turn: number | null; readonly time: number }>()
  const note = (usage: Totals, model: string, inStep: boolean, reported: boolean) => {
    session = plus(session, usage)
    byModel = addByModel(byModel, model, usage)
    if (!reported) unreported++
    if (turn !== undefined && turn.endTime === undefined) {
      turn.usage = plus(turn.usage, usage)
      turn.byModel = addByModel(turn.byModel, model, usage)
      turn.requests++
      if (!reported) turn.unreported++
    }
    if (inStep && step !== undefined) {
      step.usage = plus(step.usage, usage)
      step.model = model
    }
  }
  const push = (e: SessionEvent): void => {
    if (e.seq < seed) return
    const d = e.data as any
    switch (e.type) {
      case "turn/start":
        turn = {
          turn: d.turn,
          usage: zero,
          byModel: {},
          steps: 0,
          requests: 0,
          unreported: 0,
          subagents: noSubagents,
          startTime: e.time,
          endTime: undefined,
          end: undefined
        }
        turns.push(turn)
        return
      case "turn/end":
        if (turn !== undefined && turn.turn === d.turn) {
          turn.endTime = e.time
          turn.end = d.reason
        }
        return
      case "step/start":
        step = { turn: d.turn, step: d.step, usage: zero, model: undefined, startTime: e.time, endTime: undefined }
        steps.push(step)
        if (turn !== undefined && turn.turn === d.turn) turn.steps++
        return
      case "step/end":
        if (step !== undefined && step.turn === d.turn && step.step === d.step) step.endTime = e.time
        return
      case "assistant/message": {
        const usage = of(d.usage, { dsh })
        const model = modelOf(d)
        const open = step !== undefined && step.turn === d.turn && step.step === d.step
        const reported = typeof d.usage === "object" && d.usage !== null
        requests.push({
          kind: "step",
          seq: e.seq,
          time: e.time,
          startTime: open ? step!.startTime : undefined,
          turn: d.turn,
          step: d.step,
          provider: typeof d.message?.source?.provider === "string" ? d.message.source.provider : undefined,
          model,
          usage,
          reported,
          interrupted: d.interrupted === true
        })
        note(usage, model, open, reported)
        return
      }
      case "compaction/start":
        if (typeof d?.compactionId === "string") {
          compactions.set(d.compactionId, { turn: typeof d.turn === "number" ? d.turn : null, time: e.time })
        }
        return
      case "compaction/end":
        compactions.delete(d?.compactionId)
        return
      case "compaction/summary": {
        const started = compactions.get(d?.compactionId)
        compactions.delete(d?.compactionId)
        const usage = of(d?.usage, { dsh })
        const model = typeof d?.model === "string" && d.model !== "" ? d.model : "unknown"
        const reported = typeof d?.usage === "object" && d.usage !== null
        requests.push({
          kind: "compaction",
          seq: e.seq,
          time: e.time,
          startTime: started?.time,
          turn: started?.turn ?? (turn !== undefined && turn.endTime === undefined ? turn.turn : null),
          step: undefined,
          provider: typeof d?.provider === "string" ? d.provider : undefined,
          model,
          usage,
          reported,
          interrupted: false
        })
        note(usage, model, false, reported)
        return
      }
      case "subagent/end": {
        const ended = ofSubagentEnd(d)
        const open = turn !== undefined && turn.endTime === undefined ? turn : undefined
        const run: SubagentRun = {
          seq: e.seq,
          id: typeof d?.id === "string" ? d.id : undefined,
          callId: typeof d?.callId === "string" ? d.callId : undefined,
          turn: open?.turn ?? null,
          stopReason: typeof d?.stopReason === "string" ? d.stopReason : undefined,
          ...ended
        }
        subagents = addRun(subagents, run)
        if (open !== undefined) open.subagents = addRun(open.subagents, run)
        return
      }
      default:
        return
    }
  }
  return {
    push,
    result: () => ({ usage: session, byModel, unreported, turns, steps, requests, subagents })
  }
}

/**
 * The usage of a session log (ours or DSH v0: `options.header` with `version: 0`, or `dsh`):
 * every model request, and their sums per step, per turn, per session and per model; and the
 * sub-agent runs its `subagent/end` events record (`subagents`). Pure; O(events).
 *
 * @example
 * ```ts
 * import { Usage } from "effect-agent-loop"
 * import type { SessionEvent } from "effect-agent-loop"
 *
 * declare const events: ReadonlyArray<SessionEvent.SessionEvent>
 * const usage = Usage.fromEvents(events)
 * console.log(Usage.total(usage.usage), usage.turns.map((t) => Usage.total(t.usage)))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEvents = (events: ReadonlyArray<SessionEvent>, options?: LogOptions): SessionUsage => {
  const p = projector(options)
  for (const e of events) p.push(e)
  return p.result()
}
