/**
 * Tools (§8): a name, a description, parameters as an Effect `Schema` (exported as
 * JSON Schema for providers) and `execute(args, ctx)`. The loop, not the model port, validates
 * names and arguments. A pre-execute guard waterfall may deny a call; a post-processing hook
 * waterfall may replace content and add `additionalContexts`. Every failure becomes an error
 * `tool/result` with a §8 code; the loop goes on.
 *
 * @since 0.1.0
 */
import { Cause, Effect, JSONSchema, Schema } from "effect"
import type { DeliveryError } from "./AgentError.js"
import type { Delivery, DeliveryInput } from "./Delivery.js"
import { messageOf } from "./internal/cause.js"
import type { ContentBlock, InvalidMessage, UserMessage, UserMessageInput } from "./Message.js"
import type { ToolDefinition } from "./Model.js"

/**
 * The delivery methods a running tool may use: the agent's own `followup`, `steer` and `inject`
 * (§5.1, §8), with their exact results and errors. A delivery from a tool lands in the
 * inbox like any other: a steer joins the turn at the step after this batch's results.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolAgent {
  readonly followup: (message: DeliveryInput) => Effect.Effect<Delivery, DeliveryError>
  readonly steer: (message: DeliveryInput) => Effect.Effect<Delivery, DeliveryError>
  readonly inject: (message: UserMessage) => Effect.Effect<Delivery, DeliveryError>
}

/**
 * `ctx` of `execute`: `{ callId, turn, step, agent }` (§8).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolContext {
  readonly callId: string
  readonly turn: number
  readonly step: number
  readonly agent: ToolAgent
  /**
   * Builds a frozen `UserMessage` with an id from the agent's `IdGenerator`, e.g. for
   * `additionalContexts`; the source defaults to `{kind:"tool", callId}`.
   */
  readonly makeMessage: (input: string | UserMessageInput) => Effect.Effect<UserMessage, InvalidMessage>
  /**
   * Reports how far the call has come: a live `tool/progress` notification on `agent.events`
   * (never durable, §8). `progress` and `total` are in the tool's own units (steps, bytes…);
   * `total` is absent when unknown.
   */
  readonly progress: (report: ToolProgress) => Effect.Effect<void>
}

/**
 * A progress report of a running call (`ToolContext.progress`): `progress` so far, of `total`
 * when known, with an optional human-readable `message`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolProgress {
  readonly progress: number
  readonly total?: number | undefined
  readonly message?: string | undefined
}

/**
 * What a tool returns: `content` (a string is one text block) and optional
 * `additionalContexts`, inserted into `next-step` after the batch's results (§8).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolOutput {
  readonly content: string | ReadonlyArray<ContentBlock>
  readonly additionalContexts?: ReadonlyArray<UserMessage> | undefined
  /**
   * The content is an error report (a tool that reports its own failure with content, as an
   * MCP server's `isError` result): an error `tool/result` with code `TOOL_FAILED` whose
   * content is kept as given (§8). Default false.
   */
  readonly isError?: boolean | undefined
}

/**
 * A tool's own typed failure: an error `tool/result` with code `TOOL_FAILED`.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolError extends Schema.TaggedError<ToolError>()("ToolError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * A tool (§8). `A` is the decoded argument type.
 *
 * @since 0.1.0
 * @category models
 */
export interface Tool<A = any> {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Schema<A, any, never>
  /** An exclusive call is a barrier: earlier calls finish before it starts, later calls start after it ends. */
  readonly exclusive: boolean
  readonly execute: (args: A, ctx: ToolContext) => Effect.Effect<ToolOutput, ToolError>
  /** The provider-facing definition (JSON Schema parameters), computed once. */
  readonly definition: ToolDefinition
  /**
   * Whether a call needs approval (rule 1 of §26); absent means `"never"`. `Tool.make` always
   * sets it. Read it with `Tool.needsApproval`.
   */
  readonly approval?: ToolApproval<A> | undefined
}

/**
 * Tools whose list can change while the agent runs (§8), such as an MCP server's (`Mcp`):
 * `tools()` is the current list, and `version()` a number that changes whenever that list does.
 * The agent reads the list when it makes the agent and again at each step's start when the
 * version moved: a changed list is in the next request (and its `request/header`), never in
 * the middle of a step. A name already taken (by `tools`, or an earlier toolset) is left out.
 * Both functions must be cheap and must not throw.
 *
 * @since 0.1.0
 * @category models
 */
export interface Toolset {
  /** Names the toolset in errors and docs (an MCP connection: `"mcp"`). */
  readonly name: string
  readonly tools: () => ReadonlyArray<Tool<any>>
  readonly version: () => number
}

/**
 * Whether a tool's calls need approval (rule 1 of §26): `"never"` (the default), `"always"`, or a
 * function of the decoded arguments and the call that answers `true` when this call needs one.
 * A failure (typed error or defect) of the function decides the question `unavailable`: the
 * call is refused, never run (rule 3 of §26). The loop evaluates it before each call starts.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolApproval<A = any> =
  | "never"
  | "always"
  | ((args: A, call: ToolCall) => Effect.Effect<boolean, unknown>)

/**
 * Builds a tool. `parameters` must be a Schema of an object whose encoded side is JSON.
 *
 * `execute` gets the decoded arguments and `ctx` (`callId`, `turn`, `step`, `agent` for
 * deliveries, `makeMessage` for `additionalContexts`); a failure or a defect becomes an error
 * `tool/result` (`TOOL_FAILED`). Throws when `parameters` is not an object schema (§8).
 *
 * `approval` (rule 1 of §26) says whether a call needs approval: `"never"` (the default),
 * `"always"`, or `(args, call) => Effect<boolean>` of the decoded arguments (see
 * `Tool.needsApproval`); the loop asks before such a call starts (docs/approvals.md).
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Tool } from "effect-agent-loop"
 *
 * const weather = Tool.make({
 *   name: "weather",
 *   description: "Current weather for a city",
 *   parameters: Schema.Struct({ city: Schema.String }),
 *   execute: ({ city }, ctx) =>
 *     Effect.map(ctx.makeMessage(`weather looked up for ${city}`), (note) => ({
 *       content: `${city}: 18°C, cloudy`,
 *       additionalContexts: [note]
 *     })).pipe(Effect.orDie)
 * })
 *
 * // Its calls wait for a person when they would delete (§26).
 * const files = Tool.make({
 *   name: "files",
 *   description: "Lists or deletes files",
 *   parameters: Schema.Struct({ op: Schema.Literal("list", "delete"), path: Schema.String }),
 *   approval: ({ op }) => Effect.succeed(op === "delete"),
 *   execute: ({ op, path }) => Effect.succeed({ content: `${op} ${path}: done` })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <A, I>(options: {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Schema<A, I, never>
  readonly exclusive?: boolean | undefined
  readonly execute: (args: A, ctx: ToolContext) => Effect.Effect<ToolOutput, ToolError>
  readonly approval?: ToolApproval<NoInfer<A>> | undefined
}): Tool<A> => ({
  name: options.name,
  description: options.description,
  parameters: options.parameters,
  exclusive: options.exclusive ?? false,
  execute: options.execute,
  approval: options.approval ?? "never",
  definition: {
    name: options.name,
    description: options.description,
    parameters: objectSchema(options.name, options.parameters)
  }
})

/**
 * The JSON Schema of a tool's parameters as providers require it: `type: "object"` at the top
 * (OpenAI and Anthropic reject anything else with a 400). `Schema.Struct({})` (no parameters),
 * which `JSONSchema.make` renders as "an object or an array", becomes
 * `{type:"object", properties:{}}`; a top-level `$ref` (a schema with an identifier) is inlined.
 * Throws at `make` when the parameters are not an object schema (a programming error).
 */
const objectSchema = (name: string, parameters: Schema.Schema<any, any, never>): ToolDefinition["parameters"] => {
  const json = JSONSchema.make(parameters) as Record<string, any>
  if (json.type === "object") return json
  const ref = typeof json.$ref === "string" ? /^#\/\$defs\/(.+)$/.exec(json.$ref) : null
  if (ref !== null && json.$defs?.[ref[1]!]?.type === "object") {
    const { [ref[1]!]: target, ...rest } = json.$defs
    const { $ref: _, $defs: __, ...top } = json
    return Object.keys(rest).length > 0 ? { ...top, ...target, $defs: rest } : { ...top, ...target }
  }
  const anyOf = json.anyOf
  if (
    Array.isArray(anyOf) && anyOf.length === 2 && anyOf.some((s: any) => s.type === "object" && Object.keys(s).length === 1) &&
    anyOf.some((s: any) => s.type === "array" && Object.keys(s).length === 1)
  ) {
    const { anyOf: _, $id: __, ...top } = json
    return { ...top, type: "object", properties: {} }
  }
  throw new Error(
    `Tool.make: the parameters of tool "${name}" must be an object schema (providers require "type": "object" at the top); got ${
      JSON.stringify(json)
    }`
  )
}

/**
 * A tool call as the guard and hooks see it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCall {
  readonly callId: string
  readonly name: string
  /** The decoded arguments. */
  readonly arguments: unknown
  /** The provider's raw JSON string. */
  readonly rawArguments: string
  readonly turn: number
  readonly step: number
}

/**
 * A tool's `approval` function failed (a typed error or a defect): the question is decided
 * `unavailable` and the call is refused, never run (rule 3 of §26).
 *
 * @since 0.1.0
 * @category errors
 */
export class ApprovalCheckFailed extends Schema.TaggedError<ApprovalCheckFailed>()("ApprovalCheckFailed", {
  message: Schema.String,
  toolName: Schema.String,
  callId: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

const needsNone: Effect.Effect<boolean> = Effect.succeed(false)
const needsOne: Effect.Effect<boolean> = Effect.succeed(true)

const checkFailed = (tool: Tool, call: ToolCall, cause: Cause.Cause<unknown>): ApprovalCheckFailed => {
  const error = Cause.squash(cause)
  return new ApprovalCheckFailed({
    message: `the approval check of tool "${tool.name}" failed: ${messageOf(error)}`,
    toolName: tool.name,
    callId: call.callId,
    cause: error
  })
}

/**
 * Whether this call of `tool` needs approval (rule 1 of §26), from the tool's `approval`:
 * `"never"` (or none) and `"always"` answer with a shared effect (no allocation per call); a
 * function is run with the decoded arguments and the call. Its failure, typed or a defect (also
 * a throw), fails `ApprovalCheckFailed`, which the caller decides `unavailable` (rule 3 of
 * §26); an interruption stays an interruption. The loop evaluates it before each call starts.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Tool } from "effect-agent-loop"
 *
 * const bash = Tool.make({
 *   name: "bash",
 *   description: "Runs a shell command",
 *   parameters: Schema.Struct({ command: Schema.String }),
 *   approval: ({ command }) => Effect.succeed(!command.startsWith("ls")),
 *   execute: ({ command }) => Effect.succeed({ content: `ran ${command}` })
 * })
 * const call = { callId: "c1", name: "bash", arguments: { command: "rm -r build" }, rawArguments: "", turn: 1, step: 1 }
 * // Effect<boolean, ApprovalCheckFailed>: true here
 * const needed = Tool.needsApproval(bash, { command: "rm -r build" }, call)
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const needsApproval = <A>(
  tool: Tool<A>,
  args: A,
  call: ToolCall
): Effect.Effect<boolean, ApprovalCheckFailed> => {
  const approval = tool.approval
  if (approval === undefined || approval === "never") return needsNone
  if (approval === "always") return needsOne
  return Effect.suspend(() => approval(args, call)).pipe(
    Effect.catchAllCause((cause) =>
      // An interruption-only cause holds no failure: it passes through as it is.
      Cause.isInterruptedOnly(cause)
        ? Effect.failCause(cause as Cause.Cause<never>)
        : Effect.fail(checkFailed(tool, call, cause))
    )
  )
}

/**
 * A guard's decision.
 *
 * @since 0.1.0
 * @category models
 */
export type GuardDecision = { readonly _tag: "Allow" } | { readonly _tag: "Deny"; readonly reason: string }

/**
 * Guard decision constructors.
 *
 * @since 0.1.0
 * @category constructors
 */
export const Guard = {
  allow: { _tag: "Allow" } as GuardDecision,
  deny: (reason: string): GuardDecision => ({ _tag: "Deny", reason })
} as const

/**
 * A pre-execute guard, as waterfall middleware: call `next()` to ask inner guards (the
 * innermost default allows). A denied call gets `tool/call` + an error `tool/result` with code
 * `DENIED`; a guard failure is `TOOL_FAILED` (§8).
 *
 * @since 0.1.0
 * @category models
 */
export type ToolGuard = (
  call: ToolCall,
  next: () => Effect.Effect<GuardDecision, unknown>
) => Effect.Effect<GuardDecision, unknown>

/**
 * What a post-processing hook sees and returns: the tool's output and whether it is an error.
 *
 * @since 0.1.0
 * @category models
 */
export interface HookResult {
  readonly output: ToolOutput
  readonly isError: boolean
}

/**
 * A post-processing hook, as waterfall middleware: `next()` gives the result processed by inner
 * hooks (the innermost is the tool's own result); the hook may replace content and add
 * `additionalContexts`. A hook failure turns the result into `TOOL_FAILED` (§8).
 *
 * @since 0.1.0
 * @category models
 */
export type ToolHook = (
  call: ToolCall,
  next: () => Effect.Effect<HookResult, unknown>
) => Effect.Effect<HookResult, unknown>

/**
 * Content blocks of a tool output (`string` = one text block).
 *
 * @since 0.1.0
 */
export const contentOf = (content: ToolOutput["content"]): ReadonlyArray<ContentBlock> =>
  typeof content === "string" ? [{ type: "text", text: content }] : content
