/**
 * Context compaction (§17): when a session's history outgrows the model's context window,
 * the older part of it is replaced by a summary (or pruned), durably, at a pre-step boundary,
 * without touching the inbox. This module is the policy port: the `Compaction` service (a Layer,
 * like `PreStep`), the default summarizing policy, a pruning policy, and the token estimate the
 * loop keeps. The loop side (where and how a compaction runs, what it logs) is §17 of docs/design.md;
 * in short:
 *
 * - **When.** At every pre-step boundary, after the claim and the pre-step waterfall (docs/design.md
 *   §4, §7), the loop compares its running estimate of the request's tokens (instructions, tool
 *   definitions, history and the entering batch) with `contextWindow − reserve`; above it, it
 *   compacts before the step enters. The estimate is incremental (each message is estimated once,
 *   when it joins the history) and is reset to the provider's reported `inputTokens` after each
 *   response that reports them. A policy without `contextWindow` never compacts on pressure.
 *   On a `CONTEXT_OVERFLOW` model error the loop compacts once inside the step and retries the
 *   request once; a second overflow ends the turn `{kind:"error", error:{code:"CONTEXT_OVERFLOW"}}`.
 *   `agent.compact()` compacts on demand.
 * - **What.** The policy's `compact` gets the surface (each model-visible message with its event's
 *   `seq` and token estimate) and returns a `CompactionPlan`: a summary of a prefix of the surface
 *   and/or replacements of single tool results (pruning). The loop logs them as DSH does:
 *   `compaction/start`, `compaction/summary`, checkpoint `user/message`s with
 *   `surfaceOp: {op:"replace", start, end}`, `compaction/end`.
 * - **The inbox is untouched.** A compaction reads and replaces only the history; what the step
 *   claimed enters after it; what arrives during it waits for the next boundary.
 *
 * Unlike `PreStep`, `Approval` and `IdGenerator`, `Compaction` is a plain tag, not a
 * `Context.Reference` with a default: its absence is not a policy but compaction turned off (no
 * running estimate, no compaction on pressure or on `CONTEXT_OVERFLOW`), which no policy value
 * expresses, so the agent reads it with `Effect.serviceOption`.
 *
 * @example
 * ```ts
 * import { Agent, Compaction, Model } from "effect-agent-loop"
 * import { Effect, Layer } from "effect"
 *
 * // Compact when a request would pass 128k − 16k tokens; keep the last ~20k tokens verbatim.
 * const layer = Compaction.layer({ contextWindow: 128_000, reserve: 16_000, keepRecentTokens: 20_000 })
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const agent = yield* Agent.make()
 *   yield* agent.followup("hello")
 *   yield* agent.awaitIdle
 *   const report = yield* agent.compact({ instructions: "keep the file names" })
 *   console.log(report.outcome, report.tokensBefore, report.tokensAfter)
 * }))
 * ```
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { SurfaceEntry } from "./History.js"
import { isToolResultMessage } from "./internal/message.js"
import type { ContentBlock, Message } from "./Message.js"
import type { ModelRequest, ModelService } from "./Model.js"
import type { Usage } from "./SessionEvent.js"

/**
 * Why a compaction runs: `pressure` (the estimate passed `contextWindow − reserve` at a pre-step
 * boundary), `overflow` (the provider answered `CONTEXT_OVERFLOW`), `manual` (`agent.compact`).
 *
 * @since 0.1.0
 * @category models
 */
export type CompactionReason = "pressure" | "overflow" | "manual"

/**
 * How a compaction ended (`compaction/end` `outcome`): `compacted` (its replacements apply),
 * `skipped` (the policy had nothing to replace), `aborted` (a cancel interrupted it: nothing
 * kept), `failed` (the policy or its summarization request failed: nothing kept),
 * `interrupted` (written only by crash repair, §10: nothing kept).
 *
 * @since 0.1.0
 * @category models
 */
export type CompactionOutcome = "compacted" | "skipped" | "aborted" | "failed" | "interrupted"

/**
 * `compaction/start` data: `turn` is the open turn, `null` for a manual compaction between
 * turns; `tokens` the loop's estimate of the history (instructions, tools, messages) when it
 * decided to compact; `instructions` the extra instructions of a manual compaction
 * (`agent.compact({instructions})`), when given.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionStartData {
  readonly compactionId: string
  readonly turn: number | null
  readonly reason: CompactionReason
  readonly tokens: number
  readonly instructions?: string | undefined
}

/**
 * `compaction/summary` data (DSH's shape): the summary text, the surface range it replaces
 * (`shadowedRange` seqs of its first and last event, `shadowedSeqs` every seq in it), the
 * estimated tokens of that range, the model that wrote it, its usage, and the summarization
 * instructions sent.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionSummaryData {
  readonly compactionId: string
  readonly summary: string
  readonly shadowedRange: { readonly start: number; readonly end: number }
  readonly shadowedSeqs: ReadonlyArray<number>
  readonly shadowedTokenCount: number
  readonly provider: string
  readonly model: string
  readonly usage?: Usage | undefined
  readonly instructions: string
}

/**
 * `compaction/end` data: the outcome, the estimate after a `compacted` one, the error of a
 * `failed` one.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionEndData {
  readonly compactionId: string
  readonly turn: number | null
  readonly outcome: CompactionOutcome
  readonly tokens?: number | undefined
  readonly error?: { readonly code: string; readonly message: string } | undefined
}

/**
 * The event types of a compaction bracket (appended by the loop only; `appendEvent` refuses them).
 *
 * @since 0.1.0
 * @category models
 */
export const eventTypes: ReadonlySet<string> = new Set(["compaction/start", "compaction/summary", "compaction/end"])

/**
 * The `source.plugin` of a checkpoint message: `{kind:"plugin", plugin:"compact", compactionId}`.
 *
 * @since 0.1.0
 * @category models
 */
export const CHECKPOINT_PLUGIN = "compact"

/**
 * A failed compaction policy (its summarization request failed, or its plan is invalid):
 * `code` (`SUMMARY_FAILED`, `EMPTY_SUMMARY`, `INVALID_PLAN`, or the `ModelError` code of the
 * summarization request), `message`. The loop logs it in `compaction/end` (`outcome: "failed"`)
 * and goes on without compacting; `agent.compact` returns the report with that outcome.
 *
 * @since 0.1.0
 * @category errors
 */
export class CompactionError extends Schema.TaggedError<CompactionError>()("CompactionError", {
  code: Schema.String,
  message: Schema.String
}) {}

/**
 * One surface entry as a policy sees it: the message, its event's `seq`, and its estimated tokens.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionEntry extends SurfaceEntry {
  readonly tokens: number
}

/**
 * What a policy's `compact` is given.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionInput {
  readonly sessionId: string
  readonly compactionId: string
  /** The open turn, or `null` for a manual compaction between turns. */
  readonly turn: number | null
  readonly reason: CompactionReason
  /** Extra instructions of a manual compaction (`agent.compact({instructions})`, `/compact …`). */
  readonly instructions?: string | undefined
  /** The model-visible history now, oldest first (never the inbox: §4). */
  readonly entries: ReadonlyArray<CompactionEntry>
  /**
   * Entries from this index on are what the request it makes room for continues from: the open
   * step's own input (an overflow compaction runs after the step entered its messages) and, at a
   * tool continuation, the last response's tool calls and their results. A summary must end at or
   * before it (`upTo ≤ protectedFrom`); `entries.length` when nothing is protected.
   */
  readonly protectedFrom: number
  /** The loop's estimate of the whole request in tokens (instructions and tools included). */
  readonly tokens: number
  /**
   * The agent's own model port: a summarizing policy sends its request here. In a traced run
   * each `respond` is a `chat {model}` span under the `compaction` span (§19); a policy that uses another model gets no such span.
   */
  readonly model: ModelService
}

/**
 * What a policy decided:
 * - `summary`: entries `[0, upTo)` are replaced by one checkpoint message whose text is
 *   `CHECKPOINT_PREFIX` + `text`; `upTo` must leave no tool call without its result on either
 *   side (never cut before a tool result; the default cuts before a user message that is not a
 *   tool result, `cutPoints`, or at `protectedFrom`) and not pass `protectedFrom`.
 * - `replace`: single entries (at indexes ≥ `upTo`, user-role messages only, e.g. tool results)
 *   replaced by a message with the same role and new `content` (pruning).
 * An empty plan (neither) ends the compaction `skipped`.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionPlan {
  readonly summary?: {
    readonly text: string
    readonly upTo: number
    readonly instructions: string
    readonly provider: string
    readonly model: string
    readonly usage?: Usage | undefined
  } | undefined
  readonly replace?: ReadonlyArray<{ readonly index: number; readonly content: ReadonlyArray<ContentBlock> }> | undefined
}

/**
 * A compaction policy: the window and reserve of the pressure trigger (`contextWindow`
 * undefined: no pressure compaction; overflow and manual compactions still run) and the plan.
 *
 * @since 0.1.0
 * @category services
 */
export interface CompactionPolicy {
  /** The model's context window in tokens; undefined turns pressure compaction off. */
  readonly contextWindow?: number | undefined
  /** Tokens kept free for the response: compaction runs above `contextWindow − reserve`. */
  readonly reserve: number
  readonly compact: (input: CompactionInput) => Effect.Effect<CompactionPlan, CompactionError>
}

/**
 * The compaction policy of the agents made in its scope (`Agent.make`/`resume` read it once);
 * absent: no pressure or overflow compaction, and `agent.compact` uses `summarize({})`. A tag,
 * not a reference with a default: absent means off (see the module comment).
 *
 * @since 0.1.0
 * @category services
 */
export class Compaction extends Context.Tag("effect-agent-loop/Compaction")<Compaction, CompactionPolicy>() {}

/**
 * What `agent.compact` returns: the compaction's id and outcome, the estimate before and after.
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionReport {
  readonly compactionId: string
  readonly outcome: CompactionOutcome
  readonly tokensBefore: number
  readonly tokensAfter: number
  readonly error?: { readonly code: string; readonly message: string } | undefined
}

// ---------------------------------------------------------------------------------------------
// Token estimate
// ---------------------------------------------------------------------------------------------

/** Tokens an image is counted as (a typical 1 MP image on current providers). */
const IMAGE_TOKENS = 1_000
/** Tokens of a message's own framing (role, separators). */
const MESSAGE_TOKENS = 4

const charsOf = (blocks: ReadonlyArray<ContentBlock>): number => {
  let n = 0
  for (const b of blocks) {
    switch (b.type) {
      case "text":
      case "reasoning":
        n += b.text.length
        break
      case "tool-call":
        n += b.name.length + b.arguments.length
        break
      case "tool-result":
        n += charsOf(b.content) + 8
        break
      case "image":
        n += IMAGE_TOKENS * 4
        break
    }
  }
  return n
}

/**
 * The estimated tokens of one message: ⌈characters / 4⌉ of its text, reasoning, tool calls and
 * results, 1,000 per image, plus 4 for its framing. A heuristic (within ~20% of BPE tokenizers on
 * English prose and code); the loop corrects its running sum with the provider's `inputTokens`.
 *
 * @since 0.1.0
 * @category estimate
 */
export const estimateTokens = (message: Message): number => Math.ceil(charsOf(message.content) / 4) + MESSAGE_TOKENS

/**
 * The estimated tokens of a request's fixed part: instructions and tool definitions (as JSON).
 *
 * @since 0.1.0
 * @category estimate
 */
export const estimateFixed = (instructions: string | undefined, tools: ReadonlyArray<unknown>): number =>
  Math.ceil(((instructions?.length ?? 0) + (tools.length === 0 ? 0 : JSON.stringify(tools).length)) / 4)

// ---------------------------------------------------------------------------------------------
// Policies
// ---------------------------------------------------------------------------------------------

/** Whether a message is a compaction's checkpoint (its source names the `compact` plugin). */
const isCheckpoint = (m: Message): boolean =>
  m.source.kind === "plugin" && (m.source as { readonly plugin?: unknown }).plugin === CHECKPOINT_PLUGIN

/**
 * The indexes where a history may be cut (§17: "only at a user-message boundary so that no
 * tool call loses its result"): every index whose entry is a user message that is not a tool
 * result (a prompt, a steer, injected context, an earlier checkpoint), ascending.
 *
 * @since 0.1.0
 * @category policies
 */
export const cutPoints = (entries: ReadonlyArray<{ readonly message: Message }>): Array<number> => {
  const out: Array<number> = []
  for (let i = 0; i < entries.length; i++) {
    const m = entries[i]!.message
    if (m.role === "user" && !isToolResultMessage(m)) out.push(i)
  }
  return out
}

/**
 * Where a summary should end: the earliest cut point whose suffix fits in `keepRecentTokens`
 * (the most recent part kept verbatim), or `entries.length` (summarize everything) when no
 * cut point fits. 0 means nothing to summarize.
 *
 * @since 0.1.0
 * @category policies
 */
export const keepFrom = (entries: ReadonlyArray<CompactionEntry>, keepRecentTokens: number): number => {
  const cuts = cutPoints(entries)
  let suffix = 0
  let best = entries.length
  let c = cuts.length - 1
  for (let i = entries.length - 1; i >= 0; i--) {
    suffix += entries[i]!.tokens
    if (suffix > keepRecentTokens) break
    while (c >= 0 && cuts[c]! > i) c--
    if (c >= 0 && cuts[c] === i) best = i
  }
  return best
}

/**
 * The default summarization instructions (the system prompt of the summarization request).
 *
 * @since 0.1.0
 * @category policies
 */
export const DEFAULT_INSTRUCTIONS = [
  "You compact the conversation of a coding agent so that it can go on with less context.",
  "Write a summary of the conversation below that the agent can continue from: the user's goals and",
  "requests (quote exact wording of constraints), decisions made, files, commands and identifiers that",
  "matter, what tools returned that is still relevant, what is done and what is left to do. If the",
  "conversation begins with an earlier summary, fold it in. Answer with the summary only, no tool calls."
].join("\n")

/**
 * The text a summary checkpoint message starts with, before the summary.
 *
 * @since 0.1.0
 * @category policies
 */
export const CHECKPOINT_PREFIX = "The conversation before this point was compacted. Summary:\n\n"

/** Characters of one tool result (or call arguments) kept in the summarization request. */
const RESULT_CHARS = 2_000

const cut = (s: string, max: number): string => (s.length <= max ? s : `${s.slice(0, max)}… [${s.length - max} characters cut]`)

const renderBlocks = (blocks: ReadonlyArray<ContentBlock>): Array<string> => {
  const out: Array<string> = []
  for (const b of blocks) {
    switch (b.type) {
      case "text":
        out.push(b.text)
        break
      case "reasoning":
        break
      case "image":
        out.push(`[image ${b.mediaType}]`)
        break
      case "tool-call":
        out.push(`[tool call ${b.name} ${cut(b.arguments, RESULT_CHARS)}]`)
        break
      case "tool-result":
        out.push(`[tool result${b.isError === true ? " (error)" : ""}: ${cut(renderBlocks(b.content).join("\n"), RESULT_CHARS)}]`)
        break
    }
  }
  return out
}

/**
 * The conversation as plain text for the summarization request: one paragraph per message,
 * `[user]`, `[assistant]`, `[tool]` or `[context from <source kind>]`, tool results and call
 * arguments cut to 2,000 characters, reasoning left out, images named. Plain text, so that the
 * request carries no tool-call pairing a provider could refuse.
 *
 * @since 0.1.0
 * @category policies
 */
export const renderConversation = (messages: ReadonlyArray<Message>): string =>
  messages.map((m) => {
    const who = m.role === "assistant"
      ? "assistant"
      : isToolResultMessage(m)
      ? "tool"
      : m.source.kind === "user"
      ? "user"
      : `context from ${m.source.kind === "plugin" ? `plugin ${String(m.source.plugin)}` : m.source.kind}`
    return `[${who}]\n${renderBlocks(m.content).join("\n")}`
  }).join("\n\n")

/**
 * Sends one summarization request through `model` and collects its text (tool calls and
 * reasoning are ignored): the summary, or `CompactionError` (the request's `ModelError` code, or
 * `EMPTY_SUMMARY`). The request has `purpose: "compaction"`, no tools, the `instructions` as its
 * system prompt and the conversation as one user message.
 *
 * @since 0.1.0
 * @category policies
 */
export const requestSummary = (
  input: Pick<CompactionInput, "sessionId" | "turn" | "model">,
  messages: ReadonlyArray<Message>,
  instructions: string,
  extra?: string | undefined
): Effect.Effect<{ readonly text: string; readonly usage: Usage | undefined }, CompactionError> => {
  const text = `<conversation>\n${renderConversation(messages)}\n</conversation>` +
    (extra !== undefined && extra.trim().length > 0 ? `\n\nAlso: ${extra.trim()}` : "")
  const request: ModelRequest = {
    sessionId: input.sessionId,
    turn: input.turn ?? 0,
    step: 0,
    purpose: "compaction",
    instructions,
    tools: [],
    messages: [{
      id: `${input.sessionId}:compaction-request` as Message["id"],
      role: "user",
      content: [{ type: "text", text }],
      source: { kind: "plugin", plugin: CHECKPOINT_PLUGIN }
    }]
  }
  let out = ""
  let usage: Usage | undefined = undefined
  return input.model.respond(request, {
    part: (p) =>
      Effect.sync(() => {
        if (p.type === "text-delta") out += p.text
        else if (p.type === "usage") usage = p.usage
      })
  }).pipe(
    Effect.mapError((e) => new CompactionError({ code: e.code, message: `the summarization request failed: ${e.message}` })),
    Effect.flatMap(() =>
      out.trim().length === 0
        ? Effect.fail(new CompactionError({ code: "EMPTY_SUMMARY", message: "the summarization request returned no text" }))
        : Effect.succeed({ text: out.trim(), usage })
    )
  )
}

/**
 * Options of the default policy (`summarize`, `layer`): `contextWindow` (tokens; undefined: no
 * pressure compaction), `reserve` (tokens kept free, default the smaller of 16,384 and a quarter of
 * the window), `keepRecentTokens` (the most recent part kept verbatim, default the smaller of
 * 20,000 and a quarter of the window, 20,000 without one), `instructions` (the summarization
 * system prompt, default `DEFAULT_INSTRUCTIONS`).
 *
 * @since 0.1.0
 * @category policies
 */
export interface SummarizeOptions {
  readonly contextWindow?: number | undefined
  readonly reserve?: number | undefined
  readonly keepRecentTokens?: number | undefined
  readonly instructions?: string | undefined
}

/** Throws `CompactionError` `INVALID_OPTIONS` for token options that make no sense. */
const checkOptions = (options: {
  readonly contextWindow?: number | undefined
  readonly reserve?: number | undefined
  readonly keepRecentTokens?: number | undefined
}): void => {
  const bad = (message: string) => {
    throw new CompactionError({ code: "INVALID_OPTIONS", message: `Compaction options: ${message}` })
  }
  const whole = (name: string, v: number | undefined, min: number) => {
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= min)) {
      bad(`${name} must be a whole number ≥ ${min} of tokens, not ${v}`)
    }
  }
  whole("contextWindow", options.contextWindow, 1)
  whole("reserve", options.reserve, 0)
  whole("keepRecentTokens", options.keepRecentTokens, 0)
  if (options.contextWindow !== undefined && options.reserve !== undefined && options.reserve >= options.contextWindow) {
    bad(`reserve ${options.reserve} must be below contextWindow ${options.contextWindow}`)
  }
}

const quarter = (window: number | undefined, cap: number): number =>
  window === undefined ? cap : Math.min(cap, Math.floor(window / 4))

/**
 * The default policy: summarize the older part of the history with the agent's own model,
 * keeping the most recent `keepRecentTokens` verbatim (cut at a user-message boundary,
 * `keepFrom`), and never the open step's own input (`protectedFrom`). Nothing older than the
 * kept part: `skipped`, except for a manual compaction (`agent.compact`), which then summarizes
 * everything before the last user-message boundary (the last exchange stays; a history of one
 * exchange is `skipped`). Nothing to summarize but earlier summaries: `skipped`.
 * Throws `CompactionError` (`INVALID_OPTIONS`) for options that are not whole numbers of tokens
 * (`contextWindow` ≥ 1, `reserve` and `keepRecentTokens` ≥ 0, `reserve` below the window).
 *
 * @since 0.1.0
 * @category policies
 */
export const summarize = (options: SummarizeOptions = {}): CompactionPolicy => {
  checkOptions(options)
  const window = options.contextWindow
  const keep = options.keepRecentTokens ?? quarter(window, 20_000)
  const instructions = options.instructions ?? DEFAULT_INSTRUCTIONS
  return {
    contextWindow: window,
    reserve: options.reserve ?? quarter(window, 16_384),
    compact: (input) => {
      // The kept budget counts the open step's input too; the cut is never after it begins.
      const entries = input.entries.slice(0, input.protectedFrom)
      let upTo = Math.min(keepFrom(input.entries, keep), input.protectedFrom)
      if (upTo === 0 && input.reason === "manual") {
        // Asked for: even a history that fits the kept budget is summarized, up to its last exchange.
        const cuts = cutPoints(entries)
        upTo = cuts.length > 0 ? cuts[cuts.length - 1]! : 0
      }
      // Nothing new to summarize: only earlier summaries (their checkpoints) before the cut.
      if (input.entries.slice(0, upTo).every((e) => isCheckpoint(e.message))) upTo = 0
      if (upTo === 0) return Effect.succeed({})
      const older = input.entries.slice(0, upTo).map((e) => e.message)
      return Effect.map(requestSummary(input, older, instructions, input.instructions), (s) => ({
        summary: {
          text: s.text,
          upTo,
          instructions,
          provider: input.model.provider,
          model: input.model.model,
          usage: s.usage
        }
      }))
    }
  }
}

/**
 * Options of `prune`: as `summarize` for the trigger, `keepRecentTokens` (tool results in the
 * most recent part are kept whole), `placeholder` (the text a pruned result gets; `{tokens}` is
 * replaced by the estimate of what was cut).
 *
 * @since 0.1.0
 * @category policies
 */
export interface PruneOptions {
  readonly contextWindow?: number | undefined
  readonly reserve?: number | undefined
  readonly keepRecentTokens?: number | undefined
  readonly placeholder?: string | undefined
}

/**
 * The pruning plan: every tool result older than the most recent `keepRecentTokens` (counted from
 * the end, whole entries) whose body is longer than its placeholder gets its body replaced by the
 * placeholder (the `tool-result` block and its `toolCallId` stay, so every call keeps its result).
 *
 * @since 0.1.0
 * @category policies
 */
export const prunePlan = (
  entries: ReadonlyArray<CompactionEntry>,
  keepRecentTokens: number,
  placeholder = "[tool result removed by compaction: about {tokens} tokens]"
): CompactionPlan => {
  let suffix = 0
  let boundary = entries.length
  for (let i = entries.length - 1; i >= 0; i--) {
    suffix += entries[i]!.tokens
    if (suffix > keepRecentTokens) break
    boundary = i
  }
  const replace: Array<{ index: number; content: ReadonlyArray<ContentBlock> }> = []
  for (let i = 0; i < boundary; i++) {
    const { message, tokens } = entries[i]!
    if (message.role !== "user" || !isToolResultMessage(message)) continue
    const text = placeholder.replace("{tokens}", String(tokens))
    if (tokens <= Math.ceil(text.length / 4) + MESSAGE_TOKENS) continue
    replace.push({
      index: i,
      content: message.content.map((b): ContentBlock =>
        b.type === "tool-result"
          ? {
            type: "tool-result",
            toolCallId: b.toolCallId,
            content: [{ type: "text", text }],
            ...(b.isError === true ? { isError: true } : {})
          }
          : b
      )
    })
  }
  return replace.length === 0 ? {} : { replace }
}

/**
 * A policy that prunes instead of summarizing: old tool-result bodies are replaced by a
 * placeholder (`prunePlan`); no model request. Options are checked as `summarize` checks them.
 *
 * @since 0.1.0
 * @category policies
 */
export const prune = (options: PruneOptions = {}): CompactionPolicy => {
  checkOptions(options)
  const window = options.contextWindow
  const keep = options.keepRecentTokens ?? quarter(window, 20_000)
  return {
    contextWindow: window,
    reserve: options.reserve ?? quarter(window, 16_384),
    compact: (input) => Effect.succeed(prunePlan(input.entries, keep, options.placeholder))
  }
}

/**
 * The default summarizing policy as a layer (see `summarize`); invalid options fail the layer
 * with `CompactionError` `INVALID_OPTIONS`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: SummarizeOptions = {}): Layer.Layer<Compaction, CompactionError> =>
  Layer.effect(
    Compaction,
    Effect.try({ try: () => summarize(options), catch: (e) => e as CompactionError })
  )

/**
 * Any policy as a layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPolicy = (policy: CompactionPolicy): Layer.Layer<Compaction> => Layer.succeed(Compaction, policy)
