/**
 * Deterministic scenarios (§15): a JSON file with a model script, tools, pre-step
 * listeners and timed actions, run on a virtual clock so that the same file gives a
 * byte-identical session log on every run, times included, whatever the machine's load.
 *
 * The virtual clock is the simulator's own Effect `Clock` (`internal/virtualClock.ts`), not
 * `TestClock`: `TestClock.adjust` waits for the calling fiber's descendants with real 0 ms
 * timers (≥ 1 ms each on Node), which made one scenario take ~75 ms and a 1,000-run property
 * test take minutes; the simulator does its own settling across all fibers of the run (a
 * `Supervisor`), so it needs a clock that only moves when told. Each advance wakes one sleep.
 *
 * Determinism: the memory store, written out once at the end; ids from an `IdGenerator` seeded
 * with a hash of the scenario file; a header with `createdAt: 0` and no `cwd`; before applying an
 * action and before each clock advance the simulator waits until every fiber of the run is
 * suspended or done (the runtime has no runnable work), then advances the clock to the earlier
 * of the next action and the next sleep (an action due at the same instant as a sleep goes
 * first; sleeps due at the same instant wake one at a time, in the order they began). Actions with the same `at` are applied in file order,
 * each after the runtime has settled. The model script goes through the real model port:
 * `ScriptedModel.make` streams each response as parts into the loop.
 *
 * Compaction (§17): a `compaction` block gives the scenario's agent a `Compaction` policy
 * (`Compaction.summarize`, or `Compaction.prune` with `policy: "prune"`); a model entry's
 * `usage` is reported after its response (the loop resets its token estimate to `inputTokens`);
 * an `error`'s `code` is a `Model.ModelErrorCode` (another is refused at its path), and it may
 * carry the HTTP `status` (e.g. `CONTEXT_OVERFLOW` with 400); a `compact` action
 * calls `agent.compact` in its own fiber (it waits for a boundary on a running agent, and the
 * simulator settles it like the rest). A summarization request consumes the next model entry
 * like any request: the script holds the summaries where the requests for them come.
 *
 * @since 0.1.0
 */
import { Effect, Either, Layer, ParseResult, Schema } from "effect"
import * as Agent from "./Agent.js"
import type { DeliveryError } from "./AgentError.js"
import * as Budget from "./Budget.js"
import * as Compaction from "./Compaction.js"
import type { CompactionReport } from "./Compaction.js"
import type * as Delivery from "./Delivery.js"
import * as IdGenerator from "./IdGenerator.js"
import { accessOf } from "./internal/agent/access.js"
import { jsonPath } from "./internal/json.js"
import { encodeEvents, encodeHeader } from "./internal/logCodec.js"
import { textMessage } from "./internal/message.js"
import { FiberTracker, settle } from "./internal/settle.js"
import { VirtualClock } from "./internal/virtualClock.js"
import { type InvalidMessage, type Message, type MessageSource, textOf, UserMessage } from "./Message.js"
import * as Model from "./Model.js"
import * as PreStep from "./PreStep.js"
import * as Prices from "./Prices.js"
import * as ScriptedModel from "./ScriptedModel.js"
import type { SessionEvent, SessionHeader } from "./SessionEvent.js"
import * as SessionStore from "./SessionStore.js"
import * as Tool from "./Tool.js"

// ---------------------------------------------------------------------------------------------
// Format
// ---------------------------------------------------------------------------------------------

const NonNegative = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())
/** A token count: a non-negative integer. */
const TokenCount = Schema.Number.pipe(Schema.int(), Schema.nonNegative())
// Each composite schema has an identifier, which is what a wrong kind of value is told it should
// be ("Expected a tool object, actual 5"): without one the message spells out the whole type.
const Source = Schema.Struct({ kind: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
  .annotations({ identifier: "a message source object {kind, …}" })
const Text = Schema.Union(Schema.String, Schema.Struct({ text: Schema.String, source: Schema.optional(Source) }))

const ModelEntry = Schema.Struct({
  text: Schema.optional(Schema.String),
  reasoning: Schema.optional(Schema.String),
  toolCalls: Schema.optional(
    Schema.Array(
      Schema.Struct({
        id: Schema.String,
        name: Schema.String,
        arguments: Schema.optional(Schema.Unknown)
      }).annotations({ identifier: "a tool call object {id, name, arguments?}" })
    ).annotations({ identifier: "an array of tool calls" })
  ),
  finish: Schema.optional(Schema.Literal("stop", "length")),
  error: Schema.optional(
    Schema.Struct({
      code: Model.ModelErrorCode,
      message: Schema.String,
      retryable: Schema.optional(Schema.Boolean),
      status: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(100, 599)))
    }).annotations({ identifier: "a model error object {code, message, retryable?, status?}" })
  ),
  usage: Schema.optional(
    Schema.Struct({
      inputTokens: Schema.optional(TokenCount),
      outputTokens: Schema.optional(TokenCount),
      cacheReadTokens: Schema.optional(TokenCount),
      cacheWriteTokens: Schema.optional(TokenCount),
      reasoningTokens: Schema.optional(TokenCount)
    }).annotations({
      identifier: "a usage object {inputTokens?, outputTokens?, cacheReadTokens?, cacheWriteTokens?, reasoningTokens?}"
    })
  ),
  latencyMs: Schema.optional(NonNegative)
}).annotations({ identifier: "a model response object" })
const ModelScript = Schema.Array(ModelEntry).annotations({ identifier: "an array of model responses" })

const ToolSpec = Schema.Struct({
  result: Schema.optional(Schema.String),
  error: Schema.optional(Schema.String),
  durationMs: Schema.optional(NonNegative),
  additionalContexts: Schema.optional(Schema.Array(Schema.String).annotations({ identifier: "an array of strings" })),
  exclusive: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "a tool object" })
const Tools = Schema.Record({ key: Schema.String, value: ToolSpec }).annotations({ identifier: "an object of tools by name" })

// A union reports its first member's error ("errors: first"), so each member has the union's name.
const preStep = { identifier: "a pre-step listener ({rejectIfTextIncludes}, {failIfTextIncludes} or {appendText})" }
const PreStepSpec = Schema.Union(
  Schema.Struct({ rejectIfTextIncludes: Schema.String }).annotations(preStep),
  Schema.Struct({ failIfTextIncludes: Schema.String }).annotations(preStep),
  Schema.Struct({ appendText: Schema.String }).annotations(preStep)
).annotations(preStep)
const PreSteps = Schema.Array(PreStepSpec).annotations({ identifier: "an array of pre-step listeners" })

/** A decoded value as a message names it (`"x"`, `3`, `null`). */
const actual = (u: unknown): string => {
  try {
    return JSON.stringify(u) ?? String(u)
  } catch {
    return String(u)
  }
}

const CompactionSpec = Schema.Struct({
  contextWindow: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  reserve: Schema.optional(TokenCount),
  keepRecentTokens: Schema.optional(TokenCount),
  instructions: Schema.optional(Schema.String),
  policy: Schema.optional(
    Schema.Literal("summarize", "prune").annotations({
      message: (issue) => ({ message: `Expected "summarize" or "prune", actual ${actual(issue.actual)}`, override: true })
    })
  )
}).annotations({ identifier: "a compaction object {contextWindow?, reserve?, keepRecentTokens?, instructions?, policy?}" })

const Positive = Schema.Number.pipe(Schema.finite(), Schema.positive())
const BudgetSpec = Schema.Struct({
  maxTokens: Schema.optional(Positive),
  maxCost: Schema.optional(Positive),
  prices: Schema.optional(Prices.PricesInputSchema),
  scope: Schema.optional(
    Schema.Literal("session", "turn").annotations({
      message: (issue) => ({ message: `Expected "session" or "turn", actual ${actual(issue.actual)}`, override: true })
    })
  )
}).annotations({ identifier: "a budget object {maxTokens?, maxCost?, prices?, scope?}" })

const Cause = Schema.Struct({ kind: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
  .annotations({ identifier: "a cause object {kind, …}" })

const ACTION_KINDS = ["followup", "steer", "inject", "cancel", "dispose", "compact"] as const

const TextObject = Schema.Struct({ text: Schema.String, source: Schema.optional(Source) }).annotations({
  identifier: "a text object {text, source?}"
})

const textAction = <K extends "followup" | "steer" | "inject">(kind: K) => ({
  plain: Schema.Struct(
    { at: NonNegative, [kind]: Schema.String } as { at: typeof NonNegative } & { [P in K]: typeof Schema.String }
  ),
  object: Schema.Struct({ at: NonNegative, [kind]: TextObject } as { at: typeof NonNegative } & { [P in K]: typeof TextObject })
})

const TextActions = { followup: textAction("followup"), steer: textAction("steer"), inject: textAction("inject") }

const ActionSchemas = {
  cancel: Schema.Struct({
    at: NonNegative,
    cancel: Schema.Struct({ keepInbox: Schema.optional(Schema.Boolean), cause: Schema.optional(Cause) }).annotations({
      identifier: "a cancel object {keepInbox?, cause?}"
    })
  }),
  dispose: Schema.Struct({ at: NonNegative, dispose: Schema.Struct({}) }),
  compact: Schema.Struct({
    at: NonNegative,
    compact: Schema.Struct({ instructions: Schema.optional(Schema.String) }).annotations({
      identifier: "a compact object {instructions?}"
    })
  })
}

const Action = Schema.Union(
  Schema.Struct({ at: NonNegative, followup: Text }),
  Schema.Struct({ at: NonNegative, steer: Text }),
  Schema.Struct({ at: NonNegative, inject: Text }),
  ActionSchemas.cancel,
  ActionSchemas.dispose,
  ActionSchemas.compact
)

/**
 * The scenario format (§15). Unknown fields are errors. Besides §15, for compaction (§17):
 * - `compaction {contextWindow?, reserve?, keepRecentTokens?, instructions?, policy?}`: the
 *   `Compaction` layer of the agent (`policy` `"summarize"`, the default, or `"prune"`; token
 *   counts are integers, `contextWindow` positive and above `reserve`; `instructions`, the
 *   summarization system prompt, only with `summarize`). Absent: no compaction on pressure or
 *   overflow; a `compact` action then uses `Compaction.summarize({})`.
 * - a model entry's `usage {inputTokens?, outputTokens?, cacheReadTokens?, cacheWriteTokens?,
 *   reasoningTokens?}` (token counts, integers ≥ 0, in the normalized `Usage` shape of §18:
 *   the cache counts are parts of `inputTokens`, reasoning a part of `outputTokens`) and its
 *   `error.status` (100–599).
 * - the action `{at, compact: {instructions?}}`: `agent.compact({instructions})`.
 *
 * Besides §15, for budgets (§18): `budget {maxTokens?, maxCost?, prices?, scope?}` gives the agent
 * `Budget.layer(...)` as its outermost pre-step listener (at least one limit, each positive;
 * `maxCost` needs `prices`, USD per 1e6 tokens keyed by model name; the scripted model's name is
 * the scenario's `name`, or `"script"`, and a price key may be a prefix of it).
 *
 * @since 0.1.0
 * @category models
 */
export const ScenarioSchema = Schema.Struct({
  name: Schema.optional(Schema.String),
  model: ModelScript,
  tools: Schema.optional(Tools),
  preStep: Schema.optional(PreSteps),
  compaction: Schema.optional(CompactionSpec),
  budget: Schema.optional(BudgetSpec),
  actions: Schema.Array(Action).annotations({ identifier: "an array of actions" })
}).annotations({ identifier: "a scenario object {model, actions, …}" })

const ScenarioTop = Schema.Struct({
  name: Schema.optional(Schema.String),
  model: ModelScript,
  tools: Schema.optional(Tools),
  preStep: Schema.optional(PreSteps),
  compaction: Schema.optional(CompactionSpec),
  budget: Schema.optional(BudgetSpec),
  actions: Schema.Array(Schema.Unknown).annotations({ identifier: "an array of actions" })
}).annotations({ identifier: "a scenario object {model, actions, …}" })

/**
 * The most actions a scenario may hold (`decode` refuses more, at `$.actions`). The agent's inbox
 * is an immutable value whose queue each splice copies (§4), so a scenario that queues
 * n messages costs O(n²): 10,000 queued injects take about 5 s here, 10^6 would take days.
 *
 * @since 0.1.0
 * @category models
 */
export const MAX_ACTIONS = 10_000

/**
 * A decoded scenario.
 *
 * @since 0.1.0
 * @category models
 */
export type Scenario = typeof ScenarioSchema.Type

/**
 * An invalid scenario: `path` is the JSON path of the problem (`$.actions[2].at`). Nothing runs.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidScenario extends Schema.TaggedError<InvalidScenario>()("InvalidScenario", {
  message: Schema.String,
  path: Schema.String
}) {}

/**
 * Decodes a scenario from parsed JSON. Fails with `InvalidScenario` naming the JSON path of the
 * first problem (unknown field, wrong type, negative time, an action with no or two kinds).
 *
 * @since 0.1.0
 * @category constructors
 */
export const decode = (input: unknown): Either.Either<Scenario, InvalidScenario> => {
  const options = { onExcessProperty: "error", errors: "first" } as const
  const fail = (error: ParseResult.ParseError, prefix: ReadonlyArray<PropertyKey>) => {
    const first = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
    return Either.left(
      new InvalidScenario({ message: first?.message ?? "invalid scenario", path: jsonPath([...prefix, ...(first?.path ?? [])]) })
    )
  }
  // The top level first, with the actions as they are; then each action by its kind, so that
  // an error names the field of that kind (a union would report its first member's errors).
  const top = Schema.decodeUnknownEither(ScenarioTop, options)(input)
  if (Either.isLeft(top)) return fail(top.left, [])
  const compaction = top.right.compaction
  if (compaction?.policy === "prune" && compaction.instructions !== undefined) {
    return Either.left(
      new InvalidScenario({
        message: "instructions are for the summarization request, and the prune policy makes none",
        path: "$.compaction.instructions"
      })
    )
  }
  if (
    compaction?.contextWindow !== undefined && compaction.reserve !== undefined &&
    compaction.reserve >= compaction.contextWindow
  ) {
    return Either.left(
      new InvalidScenario({
        message: `must be less than contextWindow (${compaction.contextWindow}), actual ${compaction.reserve}`,
        path: "$.compaction.reserve"
      })
    )
  }
  if (top.right.budget !== undefined) {
    const made = Budget.make(top.right.budget)
    if (Either.isLeft(made)) {
      return Either.left(
        new InvalidScenario({
          message: made.left.message.replace(/^budget: /, ""),
          path: made.left.field === "maxTokens" && top.right.budget.maxCost === undefined &&
              top.right.budget.maxTokens === undefined
            ? "$.budget"
            : `$.budget.${made.left.field}`
        })
      )
    }
  }
  if (top.right.actions.length > MAX_ACTIONS) {
    return Either.left(
      new InvalidScenario({
        message: `a scenario holds at most ${MAX_ACTIONS.toLocaleString("en-US")} actions (this one has ${
          top.right.actions.length.toLocaleString("en-US")
        }): the simulator's limit, §15`,
        path: "$.actions"
      })
    )
  }
  const actions: Array<Scenario["actions"][number]> = []
  for (let i = 0; i < top.right.actions.length; i++) {
    const a = top.right.actions[i]
    const path = `$.actions[${i}]`
    if (typeof a !== "object" || a === null || Array.isArray(a)) {
      return Either.left(new InvalidScenario({ message: "an action is an object", path }))
    }
    const kinds = ACTION_KINDS.filter((k) => k in a)
    if (kinds.length !== 1) {
      return Either.left(
        new InvalidScenario({
          message: kinds.length === 0
            ? "an action needs one of followup, steer, inject, cancel, dispose, compact"
            : `an action has one kind, this one has ${kinds.join(" and ")}`,
          path
        })
      )
    }
    const kind = kinds[0]!
    const value = (a as Record<string, unknown>)[kind]
    if (kind === "dispose") {
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        return Either.left(new InvalidScenario({ message: "Expected an object ({})", path: `${path}.dispose` }))
      }
      const extra = Object.keys(value)[0]
      if (extra !== undefined) {
        return Either.left(
          new InvalidScenario({
            message: "is unexpected, dispose takes no fields",
            path: jsonPath(["actions", i, "dispose", extra])
          })
        )
      }
    }
    const schema = kind === "cancel" || kind === "dispose" || kind === "compact"
      ? ActionSchemas[kind]
      : typeof value === "string"
      ? TextActions[kind].plain
      : TextActions[kind].object
    const decoded = Schema.decodeUnknownEither(schema as Schema.Schema<Scenario["actions"][number], unknown>, options)(a)
    if (Either.isLeft(decoded)) return fail(decoded.left, ["actions", i])
    actions.push(decoded.right)
  }
  return Either.right({ ...top.right, actions })
}

/**
 * Parses and decodes a scenario file's text; the seed for its ids is a hash of the text.
 *
 * @since 0.1.0
 * @category constructors
 */
export const parse = (text: string): Either.Either<Scenario, InvalidScenario> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left(new InvalidScenario({ message: `not JSON: ${e instanceof Error ? e.message : String(e)}`, path: "$" }))
  }
  return decode(json)
}

/**
 * FNV-1a hash of a text (32 bits): the id seed of a scenario file (§15).
 *
 * @since 0.1.0
 */
export const seedOf = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

// ---------------------------------------------------------------------------------------------
// Building the run
// ---------------------------------------------------------------------------------------------

const batchText = (messages: ReadonlyArray<UserMessage>): string => messages.map((m) => textOf(m.content)).join("\n")

/** The pre-step listeners of a scenario, outermost first (§15). */
const listeners = (
  specs: Scenario["preStep"]
): ReadonlyArray<PreStep.Listener<PreStep.PreStepFailed, IdGenerator.IdGenerator>> =>
  (specs ?? []).map((spec): PreStep.Listener<PreStep.PreStepFailed, IdGenerator.IdGenerator> => {
    if ("rejectIfTextIncludes" in spec) {
      return (p, next) =>
        batchText(p.messages).includes(spec.rejectIfTextIncludes)
          ? Effect.succeed(PreStep.Decision.reject(`text includes "${spec.rejectIfTextIncludes}"`))
          : next()
    }
    if ("failIfTextIncludes" in spec) {
      return (p, next) =>
        batchText(p.messages).includes(spec.failIfTextIncludes)
          ? Effect.fail(new PreStep.PreStepFailed({ message: `text includes "${spec.failIfTextIncludes}"` }))
          : next()
    }
    return (_p, next) =>
      Effect.flatMap(next(), (d) =>
        d._tag === "Reject"
          ? Effect.succeed(d)
          : Effect.map(
            IdGenerator.IdGenerator.next,
            (id) =>
              PreStep.Decision.enter([
                ...d.messages,
                textMessage(id, spec.appendText, { kind: "plugin", plugin: "scenario-pre-step" })
              ])
          ))
  })

/** The tools of a scenario (§15): arguments are any JSON object. */
const tools = (specs: Scenario["tools"]): ReadonlyArray<Tool.Tool<any>> =>
  Object.entries(specs ?? {}).map(([name, spec]) =>
    Tool.make({
      name,
      description: `scenario tool ${name}`,
      parameters: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
      exclusive: spec.exclusive,
      execute: (args, ctx) =>
        Effect.gen(function*() {
          const ms = spec.durationMs ?? (typeof args.ms === "number" && args.ms >= 0 ? args.ms : 0)
          if (ms > 0) yield* Effect.sleep(ms)
          if (spec.error !== undefined) return yield* new Tool.ToolError({ message: spec.error })
          const additionalContexts: Array<UserMessage> = []
          for (const text of spec.additionalContexts ?? []) {
            additionalContexts.push(yield* Effect.orDie(ctx.makeMessage(text)))
          }
          return { content: spec.result ?? "", additionalContexts }
        })
    })
  )

/**
 * A request as `--requests` writes it (§15): each message
 * `{role: "user"|"assistant"|"tool", content, reasoning?, toolCalls?, toolCallId?}`; a
 * compaction's summarization request has `purpose: "compaction"` (§17).
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestLine {
  readonly turn: number
  readonly step: number
  /** `"compaction"` on a summarization request (§17: `step` 0, `turn` 0 between turns). */
  readonly purpose?: "compaction"
  readonly messages: ReadonlyArray<{
    readonly role: "user" | "assistant" | "tool"
    readonly content: string
    readonly reasoning?: string
    readonly toolCalls?: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
    readonly toolCallId?: string
  }>
}

/**
 * A model-visible message in the `--requests` line shape (§15).
 *
 * @since 0.1.0
 */
export const requestMessage = (m: Message): RequestLine["messages"][number] => {
  if (m.role === "assistant") {
    const reasoning = m.content.filter((b) => b.type === "reasoning").map((b) => (b as { text: string }).text).join("\n")
    const calls = m.content.flatMap((b) => (b.type === "tool-call" ? [{ id: b.id, name: b.name, arguments: b.arguments }] : []))
    return {
      role: "assistant",
      content: textOf(m.content),
      ...(reasoning.length > 0 ? { reasoning } : {}),
      ...(calls.length > 0 ? { toolCalls: calls } : {})
    }
  }
  const result = m.content.find((b) => b.type === "tool-result")
  if (result !== undefined && result.type === "tool-result") {
    return { role: "tool", content: textOf(result.content), toolCallId: result.toolCallId }
  }
  return { role: "user", content: textOf(m.content) }
}

/**
 * What a run produced: the header and events of the session log, the model requests, and the
 * serialized forms `log` (JSONL with the header) and `requests` (one JSON line a request).
 *
 * @since 0.1.0
 * @category models
 */
export interface RunResult {
  readonly header: SessionHeader
  readonly events: ReadonlyArray<SessionEvent>
  readonly requests: ReadonlyArray<RequestLine>
  readonly log: string
  readonly requestLines: string
  /**
   * One record per delivery action (in the order applied): the message id and the outcome its
   * `Delivery.outcome` resolved with during the run (`undefined` while the message is pending),
   * or the tag of the typed error the delivery failed with (e.g. `AgentDisposed`).
   */
  readonly deliveries: ReadonlyArray<DeliveryRecord>
  /**
   * One record per `compact` action (in the order applied): the report `agent.compact` returned
   * (`undefined` while it waits for a boundary the run never reached), or the tag of its error.
   */
  readonly compactions: ReadonlyArray<CompactRecord>
}

/**
 * What became of one delivery action of a run.
 *
 * @since 0.1.0
 * @category models
 */
export interface DeliveryRecord {
  readonly action: number
  readonly kind: "followup" | "steer" | "inject"
  readonly at: number
  readonly messageId?: string | undefined
  readonly outcome?: Delivery.DeliveryOutcome | undefined
  readonly error?: string | undefined
}

/**
 * What became of one `compact` action of a run (§17).
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactRecord {
  readonly action: number
  readonly at: number
  readonly report?: CompactionReport | undefined
  readonly error?: string | undefined
}

/** The `Compaction` layer of a scenario's `compaction` block (§17); none without one. */
const compactionLayer = (spec: Scenario["compaction"]): Layer.Layer<Compaction.Compaction> | undefined => {
  if (spec === undefined) return undefined
  const { contextWindow, keepRecentTokens, reserve } = spec
  return Compaction.layerPolicy(
    spec.policy === "prune"
      ? Compaction.prune({ contextWindow, reserve, keepRecentTokens })
      : Compaction.summarize({ contextWindow, reserve, keepRecentTokens, instructions: spec.instructions })
  )
}

// ---------------------------------------------------------------------------------------------
// The simulator
// ---------------------------------------------------------------------------------------------

const messageOf = (
  text: string | { readonly text: string; readonly source?: MessageSource | undefined },
  source: MessageSource
) => UserMessage.make(typeof text === "string" ? { text, source } : { text: text.text, source: text.source ?? source })

/**
 * The most messages the recorded model requests of one run may hold in all (each request repeats
 * the history, so they grow with the square of a session's length: 1,000 one-turn followups
 * already make 10^6). Past it, `run` with `requests` on fails with `RequestsTooLarge`.
 *
 * @since 0.1.0
 * @category models
 */
export const MAX_REQUEST_MESSAGES = 2_000_000

/**
 * The model requests of a run hold more than `MAX_REQUEST_MESSAGES` messages in all (they were
 * dropped as soon as they did, so memory stays bounded; the run itself went to its end).
 *
 * @since 0.1.0
 * @category errors
 */
export class RequestsTooLarge extends Schema.TaggedError<RequestsTooLarge>()("RequestsTooLarge", {
  message: Schema.String
}) {}

/**
 * Runs a scenario to its end under a virtual clock. `seed` seeds the ids (use `seedOf` of the
 * file's text). The run ends when no action is left and nothing sleeps (a model request past the
 * end of the script fails its turn with `SCRIPT_EXHAUSTED`). `requests` (default true) records
 * the model requests; with `false`, `requests` and `requestLines` are empty (what
 * `agent-loop simulate` does without `--requests`). Recorded requests holding more than
 * `MAX_REQUEST_MESSAGES` messages in all fail the run with `RequestsTooLarge`. With a
 * `compaction` block the agent gets its `Compaction` layer; summarization requests are recorded
 * with `purpose: "compaction"`, and each `compact` action's report is in `compactions`.
 *
 * @example
 * ```ts
 * import { Scenario } from "effect-agent-loop"
 * import { Effect, Either } from "effect"
 *
 * // Two turns, then a manual compaction: the third response is the summary of the first turn.
 * const scenario = Either.getOrThrow(Scenario.decode({
 *   compaction: { keepRecentTokens: 20 },
 *   model: [{ text: "ok" }, { text: "ok again" }, { text: "the user said hi" }],
 *   actions: [{ at: 0, followup: "hi" }, { at: 10, followup: "again" }, { at: 20, compact: {} }]
 * }))
 * Effect.runPromise(Scenario.run(scenario, { seed: 1 })).then((result) => {
 *   console.log(result.compactions[0]?.report?.outcome) // "compacted"
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = (
  scenario: Scenario,
  options: { readonly seed: number; readonly requests?: boolean | undefined }
): Effect.Effect<RunResult, RequestsTooLarge> => {
  const scripted = ScriptedModel.make(scenario.model, {
    provider: "scenario",
    model: scenario.name ?? "script",
    record: false
  })
  // Requests are recorded here, in their `--requests` form, and counted as they come.
  const recording = options.requests ?? true
  const requests: Array<RequestLine> = []
  let requestMessages = 0
  const model: Model.ModelService = {
    provider: scripted.provider,
    model: scripted.model,
    respond: (request, sink) => {
      if (recording && requestMessages <= MAX_REQUEST_MESSAGES) {
        requestMessages += request.messages.length
        if (requestMessages > MAX_REQUEST_MESSAGES) requests.length = 0
        else {
          requests.push({
            turn: request.turn,
            step: request.step,
            ...(request.purpose !== undefined ? { purpose: request.purpose } : {}),
            messages: request.messages.map(requestMessage)
          })
        }
      }
      return scripted.respond(request, sink)
    }
  }
  const ids = IdGenerator.seeded(options.seed)
  const clock = new VirtualClock()
  const records: Array<DeliveryRecord> = []
  const compacts: Array<CompactRecord> = []
  const program = Effect.gen(function*() {
    const supervisor = new FiberTracker()
    const store = yield* SessionStore.SessionStore
    return yield* Effect.scoped(
      Effect.gen(function*() {
        const agent = yield* Effect.orDie(Agent.make({ tools: tools(scenario.tools) }))
        // By time, then file order (a stable sort).
        const actions = scenario.actions.map((a, i) => [a, i] as const).sort(([a, i], [b, j]) => a.at - b.at || i - j)
        let next = 0
        while (true) {
          // A scenario runs to its end however long that takes: no bound on the rounds.
          yield* Effect.orDie(settle(supervisor, { maxRounds: Infinity }))
          const now = clock.unsafeCurrentTimeMillis()
          const nextAction = next < actions.length ? actions[next]![0].at : undefined
          const nextSleep = clock.nextSleep()
          if (nextAction !== undefined && nextAction <= now) {
            yield* apply(agent, actions[next]![0], actions[next]![1], records, compacts)
            next++
            continue
          }
          // An action due at the same instant as a sleep goes first.
          if (nextSleep !== undefined && (nextAction === undefined || nextSleep < nextAction)) {
            clock.wakeNext()
            continue
          }
          if (nextAction === undefined) break
          clock.setTime(nextAction)
        }
        // Read the log and the outcomes before the scope closes: closing it disposes the agent,
        // which is the simulator's housekeeping, not part of the scenario.
        const contents = yield* Effect.orDie(store.read(agent.id))
        return { contents, deliveries: records.slice(), compactions: compacts.slice() }
      }).pipe(Effect.supervised(supervisor))
    )
  })
  const compaction = compactionLayer(scenario.compaction)
  const layers = Layer.mergeAll(
    SessionStore.layerMemory,
    Layer.succeed(IdGenerator.IdGenerator, ids),
    Model.layer(model),
    PreStep.layer(
      scenario.budget === undefined
        ? listeners(scenario.preStep)
        : [Either.getOrThrow(Budget.make(scenario.budget)), ...listeners(scenario.preStep)]
    ).pipe(Layer.provide(Layer.succeed(IdGenerator.IdGenerator, ids)))
  )
  return program.pipe(
    Effect.provide(compaction === undefined ? layers : Layer.merge(layers, compaction)),
    Effect.withClock(clock),
    Effect.flatMap(({ compactions, contents, deliveries }) =>
      requestMessages > MAX_REQUEST_MESSAGES
        ? Effect.fail(
          new RequestsTooLarge({
            message: `the model requests hold more than ${
              MAX_REQUEST_MESSAGES.toLocaleString("en-US")
            } messages in all (each request repeats the history), the simulator's limit for recording them`
          })
        )
        : Effect.sync((): RunResult => {
          let lines: string | undefined
          return {
            header: contents.header,
            events: contents.events,
            requests,
            log: encodeHeader(contents.header) + encodeEvents(contents.events),
            // Built on first use: it can be large, and `agent-loop simulate` writes the lines itself.
            get requestLines() {
              return lines ??= requests.map((r) => JSON.stringify(r) + "\n").join("")
            },
            deliveries,
            compactions
          }
        })
    )
  )
}

const apply = (
  agent: Agent.Agent,
  action: Scenario["actions"][number],
  index: number,
  records: Array<DeliveryRecord>,
  compacts: Array<CompactRecord>
): Effect.Effect<void, never, IdGenerator.IdGenerator> => {
  const ignore = <A, E, R>(e: Effect.Effect<A, E, R>) => Effect.asVoid(Effect.either(e))
  const deliver = (
    kind: DeliveryRecord["kind"],
    effect: Effect.Effect<Delivery.Delivery, DeliveryError | InvalidMessage, IdGenerator.IdGenerator>
  ) =>
    Effect.flatMap(Effect.either(effect), (result) => {
      if (Either.isLeft(result)) {
        records.push({ action: index, kind, at: action.at, error: result.left._tag })
        return Effect.void
      }
      const at = records.length
      records.push({ action: index, kind, at: action.at, messageId: result.right.messageId })
      // Record the outcome when the agent decides it (a callback: a fiber per pending delivery
      // would make every settle O(deliveries)).
      const record = (outcome: Delivery.DeliveryOutcome) => {
        records[at] = { ...records[at]!, outcome }
      }
      if (accessOf(agent)?.observeOutcome(result.right.messageId, record) !== true) {
        return Effect.map(result.right.outcome, record)
      }
      return Effect.void
    })
  if ("followup" in action) {
    return deliver("followup", Effect.flatMap(messageOf(action.followup, { kind: "user" }), agent.followup))
  }
  if ("steer" in action) return deliver("steer", Effect.flatMap(messageOf(action.steer, { kind: "user" }), agent.steer))
  if ("inject" in action) {
    return deliver("inject", Effect.flatMap(messageOf(action.inject, { kind: "plugin", plugin: "scenario" }), agent.inject))
  }
  if ("cancel" in action) {
    // A cancel returns when the turn is closed: run it in its own fiber; the simulator settles.
    return Effect.asVoid(Effect.fork(ignore(agent.cancel(action.cancel.cause, { keepInbox: action.cancel.keepInbox }))))
  }
  if ("compact" in action) {
    // A compaction on a running agent waits for its next boundary: its own fiber, like a cancel.
    const at = compacts.length
    compacts.push({ action: index, at: action.at })
    return Effect.asVoid(Effect.fork(Effect.flatMap(
      Effect.either(agent.compact({ instructions: action.compact.instructions })),
      (result) =>
        Effect.sync(() => {
          compacts[at] = {
            ...compacts[at]!,
            ...(Either.isRight(result) ? { report: result.right } : { error: result.left._tag })
          }
        })
    )))
  }
  return Effect.asVoid(Effect.fork(ignore(agent.dispose)))
}
