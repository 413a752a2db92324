/**
 * Deterministic scenarios (§15): the format of a scenario file, a JSON file with a model script,
 * tools, pre-step listeners and timed actions, and its decoding (`decode`, `parse`; unknown
 * fields are errors, a problem is named by its JSON path). `Simulator.run` runs one on a virtual
 * clock, so that the same file gives a byte-identical session log on every run.
 *
 * Compaction (§17): a `compaction` block gives the scenario's agent a `Compaction` policy
 * (`Compaction.summarize`, or `Compaction.prune` with `policy: "prune"`); a model entry's
 * `usage` is reported after its response (the loop resets its token estimate to `inputTokens`);
 * an `error`'s `code` is a `Model.ModelErrorCode` (another is refused at its path), and it may
 * carry the HTTP `status` (e.g. `CONTEXT_OVERFLOW` with 400); a `compact` action calls
 * `agent.compact`. A summarization request consumes the next model entry like any request: the
 * script holds the summaries where the requests for them come.
 *
 * Approvals (§26): a tool with `approval: "always"` asks about each call; `approve` and `reject`
 * actions decide, naming the question by the script's call id (`callId`: question ids are
 * generated), its `index` among the open ones or its `id`; `approvalTimeoutMs` is the agent's;
 * a `resume` action releases the agent and resumes the session from the store.
 *
 * Sub-agents (§27): a tool with a `subagent` block is `Subagent.tool` with a scripted child
 * (its own model script and tools); the child's questions are named like the parent's.
 *
 * @since 0.1.0
 */
import { Either, ParseResult, Schema } from "effect"
import * as Budget from "./Budget.js"
import { jsonPath } from "./internal/json.js"
import * as Model from "./Model.js"
import * as Prices from "./Prices.js"

const NonNegative = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())
/** A token count: a non-negative integer. */
const TokenCount = Schema.Number.pipe(Schema.int(), Schema.nonNegative())
// Each composite schema has an identifier, which is what a wrong kind of value is told it should
// be ("Expected a tool object, actual 5"): without one the message spells out the whole type.
const Source = Schema.Struct({ kind: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
  .annotations({ identifier: "a message source object {kind, …}" })
const Text = Schema.Union(Schema.String, Schema.Struct({ text: Schema.String, source: Schema.optional(Source) }))

/** A decoded value as a message names it (`"x"`, `3`, `null`). */
const actual = (u: unknown): string => {
  try {
    return JSON.stringify(u) ?? String(u)
  } catch {
    return String(u)
  }
}

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

/**
 * A sub-agent tool's child (§15, §27): its model script (shared by every call of the tool, each
 * request taking the next response), its tools (which may be sub-agent tools themselves), and
 * `Subagent.tool`'s options.
 */
interface SubagentSpec {
  readonly model: typeof ModelScript.Type
  readonly tools?: Tools | undefined
  readonly fork?: boolean | undefined
  readonly maxDepth?: number | undefined
  readonly maxSteps?: number | undefined
  readonly instructions?: string | undefined
  readonly description?: string | undefined
  readonly approvalTimeoutMs?: number | undefined
}

/** A tool of a scenario: scripted (`result`, `error`, …), or a sub-agent (`subagent`). */
interface ToolSpec {
  readonly result?: string | undefined
  readonly error?: string | undefined
  readonly durationMs?: number | undefined
  readonly additionalContexts?: ReadonlyArray<string> | undefined
  readonly exclusive?: boolean | undefined
  readonly approval?: "never" | "always" | undefined
  readonly subagent?: SubagentSpec | undefined
}

interface Tools {
  readonly [name: string]: ToolSpec
}

const ToolSpec: Schema.Schema<ToolSpec> = Schema.Struct({
  result: Schema.optional(Schema.String),
  error: Schema.optional(Schema.String),
  durationMs: Schema.optional(NonNegative),
  additionalContexts: Schema.optional(Schema.Array(Schema.String).annotations({ identifier: "an array of strings" })),
  exclusive: Schema.optional(Schema.Boolean),
  approval: Schema.optional(
    Schema.Literal("never", "always").annotations({
      message: (issue) => ({ message: `Expected "never" or "always", actual ${actual(issue.actual)}`, override: true })
    })
  ),
  subagent: Schema.optional(Schema.suspend((): Schema.Schema<SubagentSpec> => SubagentSchema))
}).annotations({ identifier: "a tool object" })
const Tools: Schema.Schema<Tools> = Schema.Record({ key: Schema.String, value: ToolSpec }).annotations({
  identifier: "an object of tools by name"
})

const SubagentSchema: Schema.Schema<SubagentSpec> = Schema.Struct({
  model: ModelScript,
  tools: Schema.optional(Tools),
  fork: Schema.optional(Schema.Boolean),
  maxDepth: Schema.optional(TokenCount),
  maxSteps: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  instructions: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  approvalTimeoutMs: Schema.optional(NonNegative)
}).annotations({
  identifier: "a sub-agent object {model, tools?, fork?, maxDepth?, maxSteps?, instructions?, description?, approvalTimeoutMs?}"
})

// A union reports its first member's error ("errors: first"), so each member has the union's name.
const preStep = { identifier: "a pre-step listener ({rejectIfTextIncludes}, {failIfTextIncludes} or {appendText})" }
const PreStepSpec = Schema.Union(
  Schema.Struct({ rejectIfTextIncludes: Schema.String }).annotations(preStep),
  Schema.Struct({ failIfTextIncludes: Schema.String }).annotations(preStep),
  Schema.Struct({ appendText: Schema.String }).annotations(preStep)
).annotations(preStep)
const PreSteps = Schema.Array(PreStepSpec).annotations({ identifier: "an array of pre-step listeners" })

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

const ACTION_KINDS = [
  "followup",
  "steer",
  "inject",
  "cancel",
  "dispose",
  "compact",
  "approve",
  "reject",
  "resume"
] as const

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

/**
 * How an `approve` or `reject` action names its question (§15, §26), exactly one of: `callId`,
 * the id of the tool call in the model script (what a scenario's author knows); `id`, the
 * question's own id (generated, so only known from an earlier run's log); `index`, the place of
 * the question among those open when the action is applied (0: the one asked first).
 */
const QuestionFields = {
  callId: Schema.optional(Schema.String),
  id: Schema.optional(Schema.String),
  index: Schema.optional(TokenCount)
}

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
  }),
  approve: Schema.Struct({
    at: NonNegative,
    approve: Schema.Struct({
      ...QuestionFields,
      always: Schema.optional(Schema.Boolean),
      name: Schema.optional(Schema.String)
    }).annotations({ identifier: "an approve object {callId | id | index, always?, name?}" })
  }),
  reject: Schema.Struct({
    at: NonNegative,
    reject: Schema.Struct({
      ...QuestionFields,
      reason: Schema.optional(Schema.String),
      always: Schema.optional(Schema.Boolean),
      name: Schema.optional(Schema.String)
    }).annotations({ identifier: "a reject object {callId | id | index, reason?, always?, name?}" })
  }),
  resume: Schema.Struct({ at: NonNegative, resume: Schema.Struct({}) })
}

const Action = Schema.Union(
  Schema.Struct({ at: NonNegative, followup: Text }),
  Schema.Struct({ at: NonNegative, steer: Text }),
  Schema.Struct({ at: NonNegative, inject: Text }),
  ActionSchemas.cancel,
  ActionSchemas.dispose,
  ActionSchemas.compact,
  ActionSchemas.approve,
  ActionSchemas.reject,
  ActionSchemas.resume
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
 * For approvals (§26, §15): a tool's `approval` (`"never"`, the default, or `"always"`); the
 * top-level `approvalTimeoutMs` (ms ≥ 0, the agent's option); the actions `{at, approve:
 * {callId | id | index, always?, name?}}` and `{at, reject: {callId | id | index, reason?,
 * always?, name?}}`, which name their question by exactly one of the call id of the model script,
 * the question's id, or its index among the questions open when the action is applied (0: the
 * first asked); a `callId` must be a call of the script to a tool with `approval: "always"`; and
 * `{at, resume: {}}`: `agent.release`, then `Agent.resume` of the session with `continuePending`.
 *
 * For sub-agents (§27, §15): a tool with `subagent {model, tools?, fork?, maxDepth?, maxSteps?,
 * instructions?, description?, approvalTimeoutMs?}` is `Subagent.tool` named after its key, with
 * a scripted child model (`model`, the same entries as the top-level script, shared by every
 * call of the tool in request order) and the child's `tools` (scenario tools, sub-agent tools
 * among them); the tool's own `approval` is the call's (§26). Such a tool takes none of the
 * scripted fields (`result`, `error`, `durationMs`, `additionalContexts`, `exclusive`). An
 * `approve`/`reject` `callId` may be a call of a child's script (a child's question is decided
 * through the parent, §27 rule 7); a call id found in two scripts is refused.
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
  approvalTimeoutMs: Schema.optional(NonNegative),
  actions: Schema.Array(Action).annotations({ identifier: "an array of actions" })
}).annotations({ identifier: "a scenario object {model, actions, …}" })

const ScenarioTop = Schema.Struct({
  name: Schema.optional(Schema.String),
  model: ModelScript,
  tools: Schema.optional(Tools),
  preStep: Schema.optional(PreSteps),
  compaction: Schema.optional(CompactionSpec),
  budget: Schema.optional(BudgetSpec),
  approvalTimeoutMs: Schema.optional(NonNegative),
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
  const toolProblem = scriptedFieldOfSubagent(top.right.tools, ["tools"])
  if (toolProblem !== undefined) return Either.left(toolProblem)
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
            ? `an action needs one of ${ACTION_KINDS.join(", ")}`
            : `an action has one kind, this one has ${kinds.join(" and ")}`,
          path
        })
      )
    }
    const kind = kinds[0]!
    const value = (a as Record<string, unknown>)[kind]
    if (kind === "dispose" || kind === "resume") {
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        return Either.left(new InvalidScenario({ message: "Expected an object ({})", path: `${path}.${kind}` }))
      }
      const extra = Object.keys(value)[0]
      if (extra !== undefined) {
        return Either.left(
          new InvalidScenario({
            message: `is unexpected, ${kind} takes no fields`,
            path: jsonPath(["actions", i, kind, extra])
          })
        )
      }
    }
    const schema = kind === "followup" || kind === "steer" || kind === "inject"
      ? typeof value === "string" ? TextActions[kind].plain : TextActions[kind].object
      : ActionSchemas[kind]
    const decoded = Schema.decodeUnknownEither(schema as Schema.Schema<Scenario["actions"][number], unknown>, options)(a)
    if (Either.isLeft(decoded)) return fail(decoded.left, ["actions", i])
    const action = decoded.right
    if ("approve" in action || "reject" in action) {
      const problem = questionProblem(top.right, "approve" in action ? action.approve : action.reject)
      if (problem !== undefined) {
        return Either.left(
          new InvalidScenario({ message: problem.message, path: jsonPath(["actions", i, kind, ...problem.field]) })
        )
      }
    }
    actions.push(action)
  }
  return Either.right({ ...top.right, actions })
}

/** The fields of a scripted tool, which a sub-agent tool (its answer is its child's) does not take. */
const SCRIPTED_FIELDS = ["result", "error", "durationMs", "additionalContexts", "exclusive"] as const

/**
 * The first tool, depth first, that has both `subagent` and a field of a scripted tool: refused
 * at that field's path (`$.tools.research.result`).
 */
const scriptedFieldOfSubagent = (
  tools: Tools | undefined,
  path: ReadonlyArray<string>
): InvalidScenario | undefined => {
  for (const [name, spec] of Object.entries(tools ?? {})) {
    if (spec.subagent === undefined) continue
    const field = SCRIPTED_FIELDS.find((f) => spec[f] !== undefined)
    if (field !== undefined) {
      return new InvalidScenario({
        message: `is for a scripted tool: a sub-agent tool answers with its child's answer (§27)`,
        path: jsonPath([...path, name, field])
      })
    }
    const inner = scriptedFieldOfSubagent(spec.subagent.tools, [...path, name, "subagent", "tools"])
    if (inner !== undefined) return inner
  }
  return undefined
}

/**
 * The model scripts of a scenario with the tools each one's agent has: the scenario's own
 * (`$.model`), then each sub-agent tool's child's (`$.tools.NAME.subagent.model`), depth first.
 */
const scriptsOf = (
  scenario: { readonly model: Scenario["model"]; readonly tools?: Scenario["tools"] }
): ReadonlyArray<{ readonly path: string; readonly model: Scenario["model"]; readonly tools: Tools | undefined }> => {
  const out: Array<{ readonly path: string; readonly model: Scenario["model"]; readonly tools: Tools | undefined }> = []
  const walk = (model: Scenario["model"], tools: Tools | undefined, path: ReadonlyArray<string>) => {
    out.push({ path: jsonPath([...path, "model"]), model, tools })
    for (const [name, spec] of Object.entries(tools ?? {})) {
      if (spec.subagent !== undefined) walk(spec.subagent.model, spec.subagent.tools, [...path, "tools", name, "subagent"])
    }
  }
  walk(scenario.model, scenario.tools, [])
  return out
}

/**
 * What is wrong with how an `approve` or `reject` action names its question, if anything: it
 * names it by exactly one of `callId`, `id`, `index`; a `callId` must be a call of one model
 * script (the scenario's or a sub-agent's: a child's question is the parent's to decide, §27
 * rule 7) to a tool of that script's agent with `approval: "always"` (another call never asks).
 * What can only be known when the action is applied (the question not asked yet, decided
 * already) is the run's: `Simulator.run` records it as the action's `ApprovalNotOpen`.
 */
const questionProblem = (
  scenario: { readonly model: Scenario["model"]; readonly tools?: Scenario["tools"] },
  question: { readonly callId?: string | undefined; readonly id?: string | undefined; readonly index?: number | undefined }
): { readonly message: string; readonly field: ReadonlyArray<string> } | undefined => {
  const named = (["callId", "id", "index"] as const).filter((k) => question[k] !== undefined)
  if (named.length !== 1) {
    return {
      message: named.length === 0
        ? "names its question by one of callId, id, index"
        : `names its question by one of callId, id, index, this one by ${named.join(" and ")}`,
      field: []
    }
  }
  const callId = question.callId
  if (callId === undefined) return undefined
  const scripts = scriptsOf(scenario)
  const holders = scripts.flatMap((script) => {
    const calls = script.model.flatMap((entry) => (entry.toolCalls ?? []).filter((call) => call.id === callId))
    return calls.length === 0 ? [] : [{ ...script, calls }]
  })
  if (holders.length === 0) {
    return {
      message: scripts.length === 1
        ? `no tool call of the model script has the id ${JSON.stringify(callId)}`
        : `no tool call of the model scripts (${scripts.map((s) => s.path).join(", ")}) has the id ${JSON.stringify(callId)}`,
      field: ["callId"]
    }
  }
  if (holders.length > 1) {
    return {
      message: `the call id ${JSON.stringify(callId)} is in more than one model script (${
        holders.map((s) => s.path).join(", ")
      }): give the calls their own ids, or name the question by index or id`,
      field: ["callId"]
    }
  }
  const { calls, path, tools } = holders[0]!
  if (!calls.some((call) => tools?.[call.name]?.approval === "always")) {
    const name = calls[0]!.name
    return {
      message: tools?.[name] === undefined
        ? `the call ${JSON.stringify(callId)} is to ${JSON.stringify(name)}, which is not a tool of ${
          path === "$.model" ? "the scenario" : `the sub-agent of ${path}`
        }`
        : `the call ${JSON.stringify(callId)} is to ${
          JSON.stringify(name)
        }, which needs no approval (its tool has no approval: "always")`,
      field: ["callId"]
    }
  }
  return undefined
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
