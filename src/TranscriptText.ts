/**
 * A transcript as terminal text (§14): `render` prints the entries of
 * `Transcript.fromEvents` as readable text (turn headers, `> ` for what the user typed,
 * `[context from plugin:x] ` for context, `→`/`←` for tool calls and results, a
 * `[compaction: …]` marker with its token figures and summary), with the labels it uses
 * (`sourceLabel`, `reasonLabel`, `compactionLabel`, `checkpointLabel`) and the escaping that
 * keeps untrusted log text from driving the terminal (`escapeControl`).
 *
 * @since 0.1.0
 */
import { escapeText } from "./internal/terminalText.js"
import type { MessageSource } from "./Message.js"
import type { TurnEndReason } from "./SessionEvent.js"
import type { ApprovalEntry, CheckpointEntry, CompactionMarkerEntry, Entry, SessionEntry, SubagentEntry } from "./Transcript.js"

/**
 * A short label naming the producer of a context message (§2, §14):
 * `plugin:<plugin>`, `tool:<callId>`, `hook:<hook>`, `session-reference:<sessionId>@<throughSeq>`,
 * `<kind>:<senderSessionId>` for a message another session sent (DSH's `coordinator` relay to a
 * sub-agent, a sub-agent's `subagent-settled` notice or `subagent-report` to its parent), or the
 * bare kind for other producers; a string `form` is added in parentheses.
 *
 * @since 0.1.0
 * @category rendering
 */
export const sourceLabel = (source: MessageSource): string => {
  const s = source as { readonly [key: string]: unknown }
  const kind = typeof s.kind === "string" ? s.kind : "unknown"
  let label = kind
  if (typeof s.plugin === "string") label = `${kind}:${s.plugin}`
  else if (typeof s.hook === "string") label = `${kind}:${s.hook}`
  else if (typeof s.callId === "string") label = `${kind}:${s.callId}`
  else if (typeof s.sessionId === "string") {
    label = `${kind}:${s.sessionId}` + (typeof s.throughSeq === "number" ? `@${s.throughSeq}` : "")
  } else if (typeof s.senderSessionId === "string") label = `${kind}:${s.senderSessionId}`
  if (typeof s.form === "string") label += ` (${s.form})`
  return label
}

/**
 * A turn end reason as words: `completed`, `max-tokens`, `blocked[: reason]`,
 * `error: CODE: message`, `aborted (kind)`, `interrupted`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const reasonLabel = (reason: TurnEndReason): string => {
  const r = reason as { readonly kind?: unknown; readonly [key: string]: unknown }
  switch (r.kind) {
    case "blocked":
      return typeof r.reason === "string" && r.reason !== "" ? `blocked: ${r.reason}` : "blocked"
    case "error": {
      const e = r.error as { readonly code?: unknown; readonly message?: unknown } | undefined
      const code = typeof e?.code === "string" ? e.code : "ERROR"
      return typeof e?.message === "string" ? `error: ${code}: ${e.message}` : `error: ${code}`
    }
    case "aborted": {
      const cause = r.reason as { readonly kind?: unknown } | undefined
      return typeof cause?.kind === "string" ? `aborted (${cause.kind})` : "aborted"
    }
    default:
      return typeof r.kind === "string" ? r.kind : "unknown"
  }
}

const plural = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`

/**
 * The first line of a compaction marker (§17): where and why, then what happened, e.g.
 * `[compaction: pressure, turn 3] compacted 118 → 80 tokens: seq 4..6 (59 tokens) summarized`,
 * `[compaction: manual, between turns] compacted 108 → 71 tokens: 1 tool result pruned`,
 * `[compaction: manual, between turns] skipped at 0 tokens: nothing to compact`,
 * `[compaction: pressure, turn 3] aborted at 118 tokens: nothing kept`,
 * `… failed at 59 tokens: nothing kept (error: CODE: message)`; a bracket without its end:
 * `… started at 118 tokens: no end in the log`. Tokens are the loop's estimate.
 *
 * @since 0.1.0
 * @category rendering
 */
export const compactionLabel = (entry: CompactionMarkerEntry): string => {
  const where = entry.turn > 0 ? `turn ${entry.turn}` : "between turns"
  const tag = entry.reason !== undefined ? `[compaction: ${entry.reason}, ${where}]` : `[compaction, ${where}]`
  const before = entry.tokensBefore
  const at = before !== undefined ? ` at ${before} tokens` : ""
  const error = entry.error !== undefined
    ? ` (error: ${entry.error.code}${entry.error.message !== "" ? `: ${entry.error.message}` : ""})`
    : ""
  switch (entry.outcome) {
    case "compacted": {
      const figures = before !== undefined && entry.tokensAfter !== undefined
        ? ` ${before} → ${entry.tokensAfter} tokens`
        : entry.tokensAfter !== undefined
        ? ` to ${entry.tokensAfter} tokens`
        : at
      const what: Array<string> = []
      if (entry.shadowedRange !== undefined) {
        const { end, start } = entry.shadowedRange
        const tokens = entry.shadowedTokenCount !== undefined ? ` (${entry.shadowedTokenCount} tokens)` : ""
        what.push(`seq ${start === end ? start : `${start}..${end}`}${tokens} summarized`)
      }
      if (entry.pruned !== undefined) what.push(`${plural(entry.pruned, "tool result", "tool results")} pruned`)
      if (entry.replaced !== undefined) what.push(`${plural(entry.replaced, "message", "messages")} replaced`)
      return `${tag} compacted${figures}${what.length > 0 ? `: ${what.join(", ")}` : ""}${error}`
    }
    case "skipped":
      return `${tag} skipped${at}: nothing to compact${error}`
    case undefined:
      return `${tag} started${at}: no end in the log${error}`
    default:
      return `${tag} ${entry.outcome}${at}: nothing kept${error}`
  }
}

const OUTCOME_LABELS: Readonly<Record<string, string>> = {
  "allowed-once": "allowed once",
  "allowed-always": "allowed always",
  "rejected": "rejected",
  "rejected-always": "rejected always",
  "cancelled": "cancelled",
  "unavailable": "unavailable (no one could answer; refused)"
}

const byLabel = (by: unknown): string | undefined => {
  if (typeof by !== "object" || by === null) return undefined
  const b = by as { readonly kind?: unknown; readonly name?: unknown; readonly policy?: unknown }
  switch (b.kind) {
    case "person":
      return typeof b.name === "string" ? `by ${b.name}` : "by a person"
    case "policy":
      return typeof b.policy === "string" ? `by the policy ${b.policy}` : "by a policy"
    case "timeout":
      return "by the timeout"
    case "cancel":
      return "by a cancel"
    default:
      return undefined
  }
}

/**
 * The line of an approval entry (§26): `? bash needs approval: <the asker's reason>` when asked;
 * `? bash: rejected by a person: <reason>` when decided (an outcome the runtime does not know is
 * shown as logged).
 *
 * @since 0.1.0
 * @category rendering
 */
export const approvalLabel = (entry: ApprovalEntry): string => {
  const tool = entry.toolName ?? `question ${entry.id}`
  if (entry.event === "asked") return `? ${tool} needs approval${entry.reason === undefined ? "" : `: ${entry.reason}`}`
  const outcome = entry.outcome === undefined ? "decided" : OUTCOME_LABELS[entry.outcome] ?? entry.outcome
  const by = byLabel(entry.by)
  return `? ${tool}: ${outcome}${by === undefined ? "" : ` ${by}`}${entry.reason === undefined ? "" : `: ${entry.reason}`}`
}

/**
 * The line of a child session's lineage (§14): `[subagent session S of P, depth 1]`, with `; seq
 * 0..41 inherited from the parent` for a child seeded with the parent's history; a session with
 * a `parentSession` but no `origin` is `[session S forked from P]`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const sessionLabel = (entry: SessionEntry): string => {
  const what = entry.origin === undefined ? "session" : `${entry.origin} session`
  const of = entry.parentSession === undefined
    ? ""
    : entry.origin === undefined
    ? ` forked from ${entry.parentSession}`
    : ` of ${entry.parentSession}`
  const depth = entry.delegationDepth === undefined ? "" : `, depth ${entry.delegationDepth}`
  const seed = entry.seedLength === undefined
    ? ""
    : `; seq ${entry.seedLength === 1 ? "0" : `0..${entry.seedLength - 1}`} inherited from the parent`
  return `[${what} ${entry.id}${of}${depth}${seed}]`
}

/**
 * The line of a sub-agent entry (§14): a descriptor as `[subagent: one-shot via spawn, "label"]`
 * (a continuable child's model appended: `, model deepseek-official/deepseek-v4-flash`); a start
 * as `⇒ subagent CHILD started via spawn`; an end as `⇐ subagent CHILD ended: completed`, with
 * the child's final answer after a colon (on the lines below when it has several).
 *
 * @since 0.1.0
 * @category rendering
 */
export const subagentLabel = (entry: SubagentEntry): string => {
  const via = entry.provider === undefined ? "" : ` via ${entry.provider}`
  switch (entry.event) {
    case "descriptor": {
      const label = entry.label === undefined ? "" : `, ${JSON.stringify(entry.label)}`
      const model = entry.agentModel === undefined
        ? ""
        : `, model ${entry.agentProvider === undefined ? "" : `${entry.agentProvider}/`}${entry.agentModel}`
      return `[subagent: ${entry.mode ?? "unknown mode"}${via}${label}${model}]`
    }
    case "start":
      return `⇒ subagent ${entry.id ?? "?"} started${via}`
    case "end": {
      const answer = entry.text === undefined || entry.text === "" ? "" : `: ${entry.text}`
      return `⇐ subagent ${entry.id ?? "?"} ended: ${entry.stopReason ?? "unknown"}${answer}`
    }
  }
}

/**
 * The label of a checkpoint outside any bracket: `[compaction checkpoint replacing seq 5]`,
 * `[compaction checkpoint replacing seq 4..9]`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const checkpointLabel = (entry: CheckpointEntry): string => {
  const { end, start } = entry.replaces
  return `[compaction checkpoint replacing seq ${start === end ? start : `${start}..${end}`}]`
}

/** Prefixes the first line with `first` and every other line with `rest`. */
const block = (text: string, first: string, rest: string): string =>
  first + (text.includes("\n") ? text.split("\n").join("\n" + rest) : text)

/**
 * What `render` nests under a sub-agent's start line (`RenderOptions.child`): the child session's
 * transcript entries, or why it cannot be shown (one line: `not in the store`, `cannot read: …`).
 *
 * @since 0.1.0
 * @category models
 */
export type ChildTranscript =
  | { readonly _tag: "Entries"; readonly entries: ReadonlyArray<Entry> }
  | { readonly _tag: "Unavailable"; readonly reason: string }

/**
 * Options of `render`.
 *
 * - `child`: the transcript of a child session that a sub-agent start entry names (its `id`),
 *   nested under that line, indented with `  │ ` a level (§27); `undefined` for a child not
 *   followed (nothing is nested). Pure: the caller reads the children (`agent-loop transcript
 *   --follow-children` reads them from the parent's store).
 * - `maxDepth` (default `FOLLOW_DEPTH`): the deepest level nested; a child below it is one line,
 *   `[subagent session ID: not shown, deeper than N levels]`. A child that is one of its own
 *   ancestors (a cycle, which only a hand-made log can hold) is one line too.
 *
 * @since 0.1.0
 * @category models
 */
export interface RenderOptions {
  readonly child?: ((sessionId: string) => ChildTranscript | undefined) | undefined
  readonly maxDepth?: number | undefined
  /** The id of the session the entries are of: a child that names it is a cycle. */
  readonly sessionId?: string | undefined
}

/**
 * How many levels of children `render` nests by default (and `agent-loop transcript
 * --follow-children` reads): DSH's and `Subagent.tool`'s depth limit is 2, so a real tree fits;
 * the bound stops a hand-made chain.
 *
 * @since 0.1.0
 * @category rendering
 */
export const FOLLOW_DEPTH = 8

/** The prefix of each line of a nested child transcript, a level. */
const NESTED = "  │ "

/**
 * Human-readable text of the entries (§14): a `── turn N ──` header whenever the turn
 * changes; `> text` for what the user typed; `[context from <producer>] text` for every other
 * user-role message, labelled by `sourceLabel`; assistant text as is (`[interrupted]` appended
 * for a kept prefix); `→ name(arguments)` for a tool call; `← text` (`← error: text`) for its
 * result; `turn N ended: <reason>` at a turn's end; a compaction's marker line (`compactionLabel`)
 * with its summary below, indented; `[compaction checkpoint replacing seq N] text` for a checkpoint
 * outside a bracket; a child session's lineage first (`sessionLabel`) and the sub-agent lines
 * (`subagentLabel`). Continuation lines are indented. With `options.child`, each child's
 * transcript is nested under its start line (`RenderOptions`). The text
 * is safe to print: what could drive or disguise a terminal is shown escaped (`\x1b`, `\u202e`;
 * see `escapeControl`), newline and tab kept. The entries of `fromEvents` stay raw: escaping
 * belongs to rendering, and a program that prints entries itself escapes them.
 * Ends with "\n" unless there are no entries.
 *
 * @since 0.1.0
 * @category rendering
 */
export const render = (entries: ReadonlyArray<Entry>, options?: RenderOptions): string => {
  const lines = renderLines(entries, options, 0, options?.sessionId === undefined ? [] : [options.sessionId])
  return lines.length === 0 ? "" : lines.join("\n") + "\n"
}

/** The escaped lines of `entries` at `depth` below the top, `ancestors` the sessions above them. */
const renderLines = (
  entries: ReadonlyArray<Entry>,
  options: RenderOptions | undefined,
  depth: number,
  ancestors: ReadonlyArray<string>
): Array<string> => {
  const lines: Array<string> = []
  const add = (text: string) => lines.push(escapeControl(text))
  let current = -1
  for (const entry of entries) {
    if (entry.turn !== current) {
      current = entry.turn
      if (entry.turn > 0) add(`── turn ${entry.turn} ──`)
    }
    switch (entry.kind) {
      case "user":
        add(block(entry.text, "> ", "> "))
        break
      case "context":
        add(block(entry.text, `[context from ${sourceLabel(entry.source)}] `, "  "))
        break
      case "assistant":
        add(entry.interrupted ? (entry.text === "" ? "[interrupted]" : `${entry.text} [interrupted]`) : entry.text)
        break
      case "tool-call":
        add(block(`${entry.name}(${entry.arguments})`, "→ ", "  "))
        break
      case "tool-result":
        add(block(entry.text, entry.isError ? "← error: " : "← ", "  "))
        break
      case "turn-end":
        add(`turn ${entry.turn} ended: ${reasonLabel(entry.reason)}`)
        break
      case "compaction":
        add(compactionLabel(entry))
        if (entry.summary !== undefined) add(block(entry.summary, "  ", "  "))
        break
      case "checkpoint":
        add(block(entry.text, `${checkpointLabel(entry)} `, "  "))
        break
      case "approval":
        add(block(approvalLabel(entry), "", "  "))
        break
      case "session":
        add(sessionLabel(entry))
        break
      case "subagent":
        add(block(subagentLabel(entry), "", "  "))
        if (entry.event === "start" && entry.id !== undefined && options?.child !== undefined) {
          for (const line of childLines(entry.id, options, depth + 1, ancestors)) lines.push(NESTED + line)
        }
        break
    }
  }
  return lines
}

/** The lines of child `id` nested at `depth` (each physical line, without its prefix). */
const childLines = (
  id: string,
  options: RenderOptions,
  depth: number,
  ancestors: ReadonlyArray<string>
): Array<string> => {
  const maxDepth = options.maxDepth ?? FOLLOW_DEPTH
  const note = (why: string) => [escapeControl(`[subagent session ${id}: ${why}]`)]
  if (ancestors.includes(id)) return note("not shown again, it is one of its own parents (a cycle in the logs)")
  if (depth > maxDepth) return note(`not shown, deeper than ${maxDepth} level${maxDepth === 1 ? "" : "s"}`)
  const child = options.child!(id)
  if (child === undefined) return []
  if (child._tag === "Unavailable") return note(child.reason)
  const nested = renderLines(child.entries, options, depth, [...ancestors, id])
  return nested.length === 0 ? note("its log holds nothing to show") : nested.flatMap((line) => line.split("\n"))
}

/**
 * Makes visible what would drive or disguise a terminal, keeping newlines and tabs: C0 and C1
 * control characters (`\x1b` for ESC), format characters such as bidi overrides and isolates
 * and zero-width characters (`\u202e`, `\u200b`, `\ufeff`), and the line and paragraph
 * separators (`\u2028`). Log content is untrusted (model output, provider errors, other
 * people's logs) and must not drive the terminal. The rule of `render`, `agent-loop run`,
 * `check` and the chat (§23).
 *
 * @since 0.1.0
 * @category utils
 */
export const escapeControl = (text: string): string => escapeText(text)
