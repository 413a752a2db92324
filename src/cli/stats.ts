/**
 * `agent-loop stats FILE [--json] [--prices FILE]` (§18): what a session did and used, from
 * its log (ours or DSH v0) through `Usage.fromEvents`. Counts: turns (by end reason), steps,
 * model requests (a compaction's summarization among them), tool calls by name, questions about
 * tool calls (§26: asked, decided by outcome, open), sub-agents (the lineage of a child session
 * from its header and `subagent/descriptor`; the children a parent's `subagent/start` and
 * `subagent/end` name, with their stop reasons and usage); tokens by kind and by model, the
 * children's included (read from the parent's own `subagent/end` events, never from the
 * children's logs: a child's stats is its own session's, so nothing is counted twice); the cost
 * by model when a price table is given ("unknown" for a model without a price, and then for the
 * total), and how much of it was the children's; the time of each turn (`turn/start` to `turn/end`) and of each
 * model request (`step/start`, or `compaction/start`, to the logged response), from the events'
 * times, in ms, with min/median/max (the median of an even count is the mean of the middle two).
 * A DSH v0 log whose events carry no time (the upstream snapshot fixtures: every event reads as
 * time 0) has no times to show.
 *
 * @since 0.1.0
 */
import * as Approval from "../Approval.js"
import { isDsh, seedLengthOf } from "../internal/logOptions.js"
import { descriptorOf, lineageOf } from "../internal/subagentLog.js"
import { escapeLine } from "../internal/terminalText.js"
import * as Prices from "../Prices.js"
import type { LogContents } from "../SessionLog.js"
import * as Usage from "../Usage.js"

/**
 * Minimum, median and maximum of some durations (ms).
 *
 * @since 0.1.0
 * @category models
 */
export interface Spread {
  readonly count: number
  readonly min: number
  readonly median: number
  readonly max: number
}

/**
 * Token counts as `stats --json` prints them.
 *
 * @since 0.1.0
 * @category models
 */
export interface TokenCounts {
  readonly inputTokens: number
  readonly cacheReadTokens: number
  readonly cacheWriteTokens: number
  readonly outputTokens: number
  readonly reasoningTokens: number
  readonly totalTokens: number
}

/**
 * What `stats --json` prints (one JSON object).
 *
 * @since 0.1.0
 * @category models
 */
export interface Stats {
  readonly sessionId: string
  readonly format: "effect-agent-loop" | "dsh-v0"
  readonly events: number
  readonly turns: number
  readonly turnEnds: { readonly [kind: string]: number }
  readonly steps: number
  readonly modelRequests: number
  /** Model responses that reported no usage (counted 0: their tokens are unknown). */
  readonly unreportedRequests: number
  readonly compactionRequests: number
  readonly toolCalls: number
  readonly toolCallsByName: { readonly [name: string]: number }
  /** Questions about tool calls (§26): how many were asked, their decisions by outcome, how many are open. */
  readonly approvals: {
    readonly asked: number
    readonly outcomes: { readonly [outcome: string]: number }
    readonly open: number
  }
  /**
   * This session as a child (a sub-agent's session, its header's lineage), `null` for a top-level
   * one: the parent's session id, `origin`, `delegationDepth` (0 when the header has none), the
   * seqs inherited from the parent (`seedLength`, 0 when none), and its `subagent/descriptor`
   * (`null` when it has none that reads).
   */
  readonly subagent: {
    readonly parentSession: string | null
    readonly origin: string | null
    readonly delegationDepth: number
    readonly seedLength: number
    readonly descriptor: { readonly mode: string; readonly provider: string; readonly label: string | null } | null
  } | null
  /**
   * The children this session started, from its `subagent/start` and `subagent/end` events (a DSH
   * log has none: DSH does not log them): how many started and ended, the ends by stop reason,
   * the child session ids in the order they started; what they spent as the ends record it
   * (`tokens`, `tokensByModel`, their responses without usage), included in the session's
   * `tokens`, `tokensByModel` and `cost`; and each run that ended (`runs`, in log order).
   */
  readonly subagents: {
    readonly started: number
    readonly ended: number
    readonly stopReasons: { readonly [stopReason: string]: number }
    readonly children: ReadonlyArray<string>
    readonly tokens: TokenCounts
    readonly tokensByModel: { readonly [model: string]: TokenCounts }
    readonly unreportedRequests: number
    readonly runs: ReadonlyArray<{
      readonly id: string | null
      readonly callId: string | null
      readonly stopReason: string | null
      readonly tokens: TokenCounts
    }>
  }
  /** Everything the session spent: its own requests and its children's runs (`subagents.tokens`). */
  readonly tokens: TokenCounts
  readonly tokensByModel: { readonly [model: string]: TokenCounts }
  /**
   * With `--prices`: USD, the children's included (`subagents`: their part); `null` is unknown (a
   * model without a price).
   */
  readonly cost:
    | {
      readonly total: number | null
      readonly byModel: { readonly [model: string]: number | null }
      readonly unpriced: ReadonlyArray<string>
      readonly subagents: number | null
    }
    | null
  /** `null` when the log records no event times. */
  readonly time:
    | {
      readonly turns: ReadonlyArray<{ readonly turn: number; readonly ms: number | null; readonly end: string | null }>
      readonly perTurn: Spread | null
      readonly perModelRequest: Spread | null
    }
    | null
}

const counts = (u: Usage.Totals): TokenCounts => ({
  inputTokens: u.inputTokens,
  cacheReadTokens: u.cacheReadTokens,
  cacheWriteTokens: u.cacheWriteTokens,
  outputTokens: u.outputTokens,
  reasoningTokens: u.reasoningTokens,
  totalTokens: Usage.total(u)
})

const spread = (xs: ReadonlyArray<number>): Spread | null => {
  if (xs.length === 0) return null
  const sorted = xs.slice().sort((a, b) => a - b)
  const mid = sorted.length >> 1
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  return { count: sorted.length, min: sorted[0]!, median, max: sorted[sorted.length - 1]! }
}

/**
 * The stats of a log as read by `SessionStore.readFile`.
 *
 * @since 0.1.0
 */
export const statsOf = (contents: LogContents, prices: Prices.Prices | undefined): Stats => {
  const { events, header } = contents
  const dsh = isDsh({ header })
  const seed = seedLengthOf({ header })
  const usage = Usage.fromEvents(events, { header })
  const all = Usage.withSubagents(usage)
  const toolCallsByName: Record<string, number> = {}
  let toolCalls = 0
  for (const e of events) {
    if (e.seq < seed || e.type !== "tool/call") continue
    const name = String((e.data as { name?: unknown }).name)
    toolCallsByName[name] = (toolCallsByName[name] ?? 0) + 1
    toolCalls++
  }
  const outcomes: Record<string, number> = {}
  let asked = 0
  for (const e of events) {
    if (e.seq < seed) continue
    if (e.type === "approval/asked") asked++
    else if (e.type === "approval/decided") {
      const outcome = String((e.data as { outcome?: unknown } | null)?.outcome)
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
    }
  }
  const stopReasons: Record<string, number> = {}
  const children: Array<string> = []
  let started = 0
  let ended = 0
  for (const e of events) {
    if (e.seq < seed) continue
    if (e.type === "subagent/start") {
      started++
      const id = (e.data as { id?: unknown } | null)?.id
      if (typeof id === "string") children.push(id)
    } else if (e.type === "subagent/end") {
      ended++
      const stopReason = String((e.data as { stopReason?: unknown } | null)?.stopReason)
      stopReasons[stopReason] = (stopReasons[stopReason] ?? 0) + 1
    }
  }
  const lineage = lineageOf(header)
  const descriptor = lineage === undefined ? undefined : descriptorOf(events, seed)
  const subagent: Stats["subagent"] = lineage === undefined ? null : {
    parentSession: lineage.parentSession ?? null,
    origin: lineage.origin ?? null,
    delegationDepth: lineage.delegationDepth ?? 0,
    seedLength: lineage.seedLength ?? 0,
    descriptor: descriptor === undefined
      ? null
      : { mode: descriptor.mode, provider: descriptor.provider, label: descriptor.label ?? null }
  }
  const turnEnds: Record<string, number> = {}
  for (const t of usage.turns) {
    const kind = t.end?.kind ?? "open"
    turnEnds[kind] = (turnEnds[kind] ?? 0) + 1
  }
  const byModelCounts = (byModel: Usage.ByModel) => {
    const out: Record<string, TokenCounts> = {}
    for (const [model, u] of Object.entries(byModel)) out[model] = counts(u)
    return out
  }
  const tokensByModel = byModelCounts(all.byModel)
  let cost: Stats["cost"] = null
  if (prices !== undefined) {
    const c = Prices.costs(prices, all.byModel)
    const byModel: Record<string, number | null> = {}
    // USD to 12 decimals (a millionth of a micro-dollar): no binary float noise in the JSON.
    const round = (usd: number | undefined) => (usd === undefined ? null : Math.round(usd * 1e12) / 1e12)
    for (const [model, usd] of Object.entries(c.byModel)) byModel[model] = round(usd)
    cost = {
      total: round(c.total),
      byModel,
      unpriced: c.unpriced,
      subagents: round(Prices.costs(prices, usage.subagents.byModel).total)
    }
  }
  const own = events.filter((e) => e.seq >= seed)
  const timed = !(dsh && own.every((e) => e.time === own[0]?.time))
  const turnTimes = usage.turns.map((t) => ({
    turn: t.turn,
    ms: t.endTime === undefined ? null : t.endTime - t.startTime,
    end: t.end?.kind ?? null
  }))
  const time: Stats["time"] = !timed || own.length === 0 ? null : {
    turns: turnTimes,
    perTurn: spread(turnTimes.flatMap((t) => (t.ms === null ? [] : [t.ms]))),
    perModelRequest: spread(usage.requests.flatMap((r) => (r.startTime === undefined ? [] : [r.time - r.startTime])))
  }
  return {
    sessionId: header.id,
    format: dsh ? "dsh-v0" : "effect-agent-loop",
    events: events.length,
    turns: usage.turns.length,
    turnEnds,
    steps: usage.steps.length,
    modelRequests: usage.requests.length,
    unreportedRequests: usage.unreported,
    compactionRequests: usage.requests.filter((r) => r.kind === "compaction").length,
    toolCalls,
    toolCallsByName,
    approvals: { asked, outcomes, open: Approval.openQuestions(own).length },
    subagent,
    subagents: {
      started,
      ended,
      stopReasons,
      children,
      tokens: counts(usage.subagents.usage),
      tokensByModel: byModelCounts(usage.subagents.byModel),
      unreportedRequests: usage.subagents.unreported,
      runs: usage.subagents.runs.map((r) => ({
        id: r.id ?? null,
        callId: r.callId ?? null,
        stopReason: r.stopReason ?? null,
        tokens: counts(r.usage)
      }))
    },
    tokens: counts(all.usage),
    tokensByModel,
    cost,
    time
  }
}

const n = (x: number): string => x.toLocaleString("en-US", { maximumFractionDigits: 1 })

/** Rows of cells as columns: the first left-aligned, the others right-aligned, two spaces apart. */
const table = (rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths: Array<number> = []
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)))
  return rows.map((row) =>
    row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ").trimEnd()
  )
}

const byCount = (record: { readonly [k: string]: number }): string =>
  Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${escapeLine(k)} ${n(v)}`).join(
    ", "
  )

const spreadLine = (s: Spread | null): string =>
  s === null ? "none" : `min ${n(s.min)}, median ${n(s.median)}, max ${n(s.max)} (${n(s.count)})`

/**
 * `PARENT (depth 1, one-shot via spawn "label", seq 0..41 inherited)`, each part when known;
 * a session without a parent is `no parent session (…)`.
 */
const subagentLine = (s: NonNullable<Stats["subagent"]>): string => {
  const parts = [`depth ${n(s.delegationDepth)}`]
  const d = s.descriptor
  if (d !== null) {
    parts.push(
      `${escapeLine(d.mode)} via ${escapeLine(d.provider)}${d.label === null ? "" : ` ${escapeLine(JSON.stringify(d.label))}`}`
    )
  }
  if (s.seedLength > 0) parts.push(`seq ${s.seedLength === 1 ? "0" : `0..${s.seedLength - 1}`} inherited`)
  return `${s.parentSession === null ? "no parent session" : escapeLine(s.parentSession)} (${parts.join(", ")})`
}

/**
 * The text form of `stats` (lines, no trailing newline). Strings from the log (session id, model
 * and tool names, end reasons) are escaped as one line each (`escapeLine`: a newline in a model's
 * name cannot break a table or forge a line); the caller escapes the whole for the terminal.
 *
 * @since 0.1.0
 */
export const renderStats = (s: Stats, file: string): string => {
  const lines: Array<string> = []
  const push = (more: ReadonlyArray<string>) => {
    for (const line of more) lines.push(line)
  }
  lines.push(
    `${escapeLine(file)}: session ${escapeLine(s.sessionId)} (${s.format === "dsh-v0" ? "DSH v0 log" : "log"}, ${
      n(s.events)
    } events)`
  )
  lines.push(`turns           ${n(s.turns)}${s.turns > 0 ? ` (${byCount(s.turnEnds)})` : ""}`)
  lines.push(`steps           ${n(s.steps)}`)
  lines.push(
    `model requests  ${n(s.modelRequests)}${s.compactionRequests > 0 ? ` (${n(s.compactionRequests)} compaction)` : ""}`
  )
  lines.push(`tool calls      ${n(s.toolCalls)}${s.toolCalls > 0 ? ` (${byCount(s.toolCallsByName)})` : ""}`)
  if (s.approvals.asked > 0) {
    const decided = Object.keys(s.approvals.outcomes).length > 0 ? ` (${byCount(s.approvals.outcomes)})` : ""
    lines.push(`approvals       ${n(s.approvals.asked)} asked${decided}, ${n(s.approvals.open)} open`)
  }
  if (s.subagent !== null) lines.push(`subagent of     ${subagentLine(s.subagent)}`)
  if (s.subagents.started > 0 || s.subagents.ended > 0) {
    const ends = Object.keys(s.subagents.stopReasons).length > 0 ? ` (${byCount(s.subagents.stopReasons)})` : ""
    lines.push(`subagents       ${n(s.subagents.started)} started, ${n(s.subagents.ended)} ended${ends}`)
    for (const r of s.subagents.runs) {
      lines.push(
        `  child ${r.id === null ? "?" : escapeLine(r.id)}: ${r.stopReason === null ? "?" : escapeLine(r.stopReason)}, ${
          n(r.tokens.totalTokens)
        } tokens`
      )
    }
  }
  lines.push("")
  const row = (label: string, t: TokenCounts) => [
    label,
    n(t.inputTokens),
    n(t.cacheReadTokens),
    n(t.cacheWriteTokens),
    n(t.outputTokens),
    n(t.reasoningTokens),
    n(t.totalTokens)
  ]
  const models = Object.keys(s.tokensByModel).sort()
  const children = s.subagents.runs.length > 0
  push(
    table([
      ["tokens", "input", "cache read", "cache write", "output", "reasoning", "total"],
      ...models.map((m) => row(escapeLine(m), s.tokensByModel[m]!)),
      row("session", s.tokens),
      ...(children ? [row("of which children", s.subagents.tokens)] : [])
    ])
  )
  lines.push("(cache read and cache write are parts of input, reasoning a part of output; total = input + output)")
  if (children) {
    lines.push("(children: what the sub-agents' runs spent, as this log's subagent/end events record it)")
  }
  const unreported = s.unreportedRequests + s.subagents.unreportedRequests
  if (unreported > 0) {
    lines.push(
      `(${n(unreported)} model ${unreported === 1 ? "response" : "responses"}${
        s.subagents.unreportedRequests > 0 ? ` (${n(s.subagents.unreportedRequests)} of the children's)` : ""
      } reported no usage: counted 0, so these totals are a lower bound)`
    )
  }
  lines.push("")
  if (s.cost === null) lines.push("cost            give --prices FILE (USD per 1e6 tokens by model)")
  else {
    const usd = (x: number | null) => (x === null ? "unknown (no price)" : Prices.formatUsd(x))
    push(
      table([
        ["cost (USD)", ""],
        ...models.map((m) => [escapeLine(m), usd(s.cost!.byModel[m] ?? null)]),
        ["session", s.cost.total === null ? "unknown" : Prices.formatUsd(s.cost.total)],
        ...(children ? [["of which children", s.cost.subagents === null ? "unknown" : Prices.formatUsd(s.cost.subagents)]] : [])
      ])
    )
  }
  lines.push("")
  if (s.time === null) lines.push("time            the log records no event times")
  else {
    push(
      table([
        ["time (ms)", "", ""],
        ...s.time.turns.map((t) => [`turn ${t.turn}`, t.ms === null ? "-" : n(t.ms), t.end ?? "open"])
      ])
    )
    lines.push(`per turn           ${spreadLine(s.time.perTurn)}`)
    lines.push(`per model request  ${spreadLine(s.time.perModelRequest)}`)
  }
  return lines.join("\n")
}
