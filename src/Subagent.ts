/**
 * Sub-agents (§27): a tool whose call hands a task to a child agent with its own instructions,
 * tools and context window, on a new session of the parent's store, and returns the child's
 * final answer as the call's result.
 *
 * - The child's log is an ordinary session whose header names its parent (`parentSession`,
 *   `parentCallId`, `origin:"subagent"`, `delegationDepth`; a fork's `seedLength`), with a
 *   `subagent/descriptor` first; the parent's log records `subagent/start` and `subagent/end`
 *   between the call's `tool/call` and its `tool/result` (§27 has the shapes).
 * - The task is the child's first followup (source `{kind:"subagent", parentSession, callId}`);
 *   the call waits until the child is idle and answers with the text of the child's last
 *   assistant message and the child's session id.
 * - The child runs inside the call's fiber, in a scope the call owns: cancelling the parent's
 *   turn interrupts the call, which cancels the child's turn (cause
 *   `{kind:"parent", parentSession, callId}`) and disposes it; disposing the parent does the same;
 *   releasing the parent (passivation) releases the child, its turn left open.
 * - A child whose turn does not complete, or a delegation deeper than `maxDepth`, fails the
 *   call with a `ToolError` (an error result `TOOL_FAILED` naming the child's session), never the
 *   parent's run.
 * - After a crash, repair closes a call cut short from its child's log (§27 rule 16): a child
 *   whose task ended gives the end and result this tool would have given (the same code,
 *   `internal/subagentEnd.ts`); an unfinished child is repaired first and the call ends
 *   `unfinished_at_resume` with `TOOL_OUTCOME_UNKNOWN`; nothing runs again.
 * - `subagent/end` records what the child's run spent (`usage`, `byModel`, `unreported`: its own
 *   requests and its children's), which the parent's usage counts (§27 rules 9, 10): the child
 *   runs the parent's pre-step waterfall with its usage starting from the parent's, so that a
 *   budget covers the delegation; its turn spans are children of the call's span (rule 11).
 *
 * @since 0.1.0
 */
import { Effect, Option, Schema } from "effect"
import * as Agent from "./Agent.js"
import * as Approval from "./Approval.js"
import { IdGenerator } from "./IdGenerator.js"
import { type ParentAccess, parentOf } from "./internal/agent/access.js"
import { ChildSessionId } from "./internal/subagent.js"
import { endedFields, type EndFields, outcomeOf, spentOf } from "./internal/subagentEnd.js"
import type { MessageId } from "./Message.js"
import { Model, type ModelService } from "./Model.js"
import { PreStep } from "./PreStep.js"
import type { SessionEvent } from "./SessionEvent.js"
import { SessionStore } from "./SessionStore.js"
import * as Tool from "./Tool.js"

/**
 * The arguments the model gives a sub-agent tool (DSH's `subagent` tool's): the task (`prompt`,
 * everything the child needs to know: it sees nothing of the parent's conversation unless the
 * tool forks) and a short `description`, the child's label.
 *
 * @since 0.1.0
 * @category models
 */
export const Arguments = Schema.Struct({
  description: Schema.optional(Schema.String.annotations({ description: "A short label for the task (3 to 8 words)." })),
  prompt: Schema.String.annotations({
    description: "The task for the sub-agent, with everything it needs to know to do it on its own."
  })
})

/**
 * @since 0.1.0
 * @category models
 */
export type Arguments = typeof Arguments.Type

/**
 * Options of `Subagent.tool`.
 *
 * - `name` (default `"subagent"`, `"subagent_fork"` with `fork`) and `description`: the tool's.
 * - `instructions`, `tools`, `toolsets`, `maxSteps`, `toolConcurrency`, `approvalTimeoutMs`: the
 *   child agent's (`AgentOptions`; `approvalTimeoutMs` defaults to the parent's; `toolsets`, such
 *   as MCP servers', §28). A child's tools may include sub-agent tools of their own.
 * - `model`: the child's model; default the parent's.
 * - `fork`: seed the child with the parent's completed turns (§27; DSH's `subagent_fork`).
 * - `maxDepth` (default 2, DSH's): the deepest `delegationDepth` a child may have; a call that
 *   would go deeper fails `subagent depth D exceeds maxDepth M` and starts nothing. A fraction
 *   is rounded down, a negative number is 0 (no delegation), NaN is the default.
 * - `approval`: whether a call of this tool needs approval (§26 rule 1; default `"never"`).
 *
 * The child's store, id generator, approval policy and pre-step waterfall are the parent's: a
 * child's call that needs a person asks the parent's person, and the parent's budget covers the
 * child (§27 rule 10). The child's agent name (`gen_ai.agent.name` of its spans) is the tool's
 * name; its spans record content when the parent's do.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly name?: string | undefined
  readonly description?: string | undefined
  readonly instructions?: string | undefined
  readonly tools?: ReadonlyArray<Tool.Tool<any>> | undefined
  readonly toolsets?: ReadonlyArray<Tool.Toolset> | undefined
  readonly model?: ModelService | undefined
  readonly fork?: boolean | undefined
  readonly maxDepth?: number | undefined
  readonly maxSteps?: number | undefined
  readonly toolConcurrency?: number | undefined
  readonly approvalTimeoutMs?: number | undefined
  readonly approval?: Tool.ToolApproval<Arguments> | undefined
}

/** DSH's default depth limit: a child of a child may delegate no further. */
const DEFAULT_MAX_DEPTH = 2

/** `maxDepth` as a whole number ≥ 0: absent or NaN gives the default, a fraction is rounded down, below 0 is 0. */
const depthBound = (value: number | undefined): number =>
  value === undefined || Number.isNaN(value) ? DEFAULT_MAX_DEPTH : value === Infinity ? Infinity : Math.max(0, Math.floor(value))

/**
 * A tool that delegates a task to a child agent (§27). See the module comment for what a call
 * does; `Options` for the knobs.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, Model, Offline, SessionStore, Subagent } from "effect-agent-loop"
 *
 * const research = Subagent.tool({ name: "research", instructions: "Answer in one sentence." })
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const agent = yield* Agent.make({ tools: [research] })
 *   yield* agent.followup("Ask the research sub-agent what a turn is.")
 *   yield* agent.awaitIdle
 * }))
 * Effect.runPromise(program.pipe(Effect.provide(Layer.merge(SessionStore.layerMemory, Model.layer(Offline.make())))))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const tool = (options: Options = {}): Tool.Tool<Arguments> => {
  const fork = options.fork === true
  const name = options.name ?? (fork ? "subagent_fork" : "subagent")
  return Tool.make({
    name,
    description: options.description ??
      (fork
        ? "Hand a task to a sub-agent that starts with this conversation's completed turns, and get its answer."
        : "Hand a self-contained task to a sub-agent with its own context, and get its answer."),
    parameters: Arguments,
    approval: options.approval ?? "never",
    execute: (args, ctx) => {
      const parent = parentOf(ctx.agent)
      if (parent === undefined) {
        return Effect.fail(
          new Tool.ToolError({ message: "a sub-agent tool runs only in an agent made by Agent.make or Agent.resume" })
        )
      }
      const depth = parent.depth + 1
      const maxDepth = depthBound(options.maxDepth)
      if (depth > maxDepth) {
        return Effect.fail(new Tool.ToolError({ message: `subagent depth ${depth} exceeds maxDepth ${maxDepth}` }))
      }
      return delegate(parent, options, name, fork, depth, args, ctx.callId)
    }
  })
}

const delegate = (
  parent: ParentAccess,
  options: Options,
  name: string,
  fork: boolean,
  depth: number,
  args: Arguments,
  callId: string
): Effect.Effect<Tool.ToolOutput, Tool.ToolError> =>
  Effect.scoped(
    Effect.gen(function*() {
      const sessionId = yield* parent.ids.next
      const runId = yield* parent.ids.next
      const provider = fork ? "fork" : "spawn"
      const label = args.description ?? firstLine(args.prompt)
      // DSH's run info (`subagent/start`), with the call and the depth.
      const info = { runId, provider, id: sessionId, local: true, callId }
      yield* recordOrFail(parent, "subagent/start", { ...info, depth, label })
      const ended = (fields: EndFields) => Effect.ignore(parent.record("subagent/end", { ...info, ...fields }))
      // The call's span (its `execute_tool`, §19): the child's turns are its children.
      const span = Option.getOrUndefined(yield* Effect.option(Effect.currentSpan))
      const child = yield* Agent.make({
        sessionId,
        cwd: parent.cwd,
        name,
        tracing: { recordContent: parent.recordContent },
        instructions: options.instructions,
        tools: options.tools,
        toolsets: options.toolsets,
        maxSteps: options.maxSteps,
        toolConcurrency: options.toolConcurrency,
        approvalTimeoutMs: options.approvalTimeoutMs ?? parent.approvalTimeoutMs,
        [ChildSessionId]: {
          parentSession: parent.sessionId,
          parentCallId: callId,
          origin: "subagent",
          delegationDepth: depth,
          seed: fork ? completedTurns(parent.events()) : undefined,
          descriptor: { version: 2, mode: "one-shot", provider, label },
          usage: parent.usage(),
          parentSpan: span
        }
      } as Agent.AgentOptions).pipe(
        Effect.provideService(SessionStore, parent.store),
        Effect.provideService(Model, options.model ?? parent.model),
        Effect.provideService(PreStep, parent.preStep),
        Effect.provideService(IdGenerator, parent.ids),
        Effect.provideService(Approval.Approval, Approval.make(parent.approvalListeners)),
        Effect.catchAll((e) => Effect.zipRight(ended({ stopReason: "error", error: e.message }), Effect.fail(e)))
      )
      // Its questions are the parent's to list and decide while the call runs (§27).
      const unlink = parent.adopt(callId, child)
      yield* Effect.addFinalizer(() => Effect.sync(unlink))
      const cause = { kind: "parent", parentSession: parent.sessionId, callId }
      const end = yield* Effect.onInterrupt(
        runChild(child, parent, args.prompt, callId),
        () =>
          // A released parent (passivation) writes nothing more: the child is released too, its
          // turn left open for the parent's next resume; else it is cancelled.
          parent.released()
            ? Effect.ignore(child.release)
            : Effect.zipRight(
              Effect.ignore(child.cancel(cause)),
              Effect.suspend(() =>
                ended({
                  stopReason: "aborted",
                  reason: { kind: "aborted", reason: cause },
                  ...spentOf(child.log.events(), child.log.header)
                })
              )
            )
      )
      yield* ended(end)
      // The result the end gives: crash repair gives a call closed from its child's log the same.
      const outcome = outcomeOf(sessionId, end)
      if (outcome._tag !== "Answer") {
        return yield* Effect.fail(new Tool.ToolError({ message: outcome._tag === "Failed" ? outcome.message : outcome.text }))
      }
      return { content: outcome.content }
    }).pipe(
      Effect.catchAll((e) => Effect.fail(e instanceof Tool.ToolError ? e : new Tool.ToolError({ message: e.message, cause: e })))
    )
  )

/**
 * Delivers the task and waits until the child is idle: the `subagent/end` fields of its log
 * (`internal/subagentEnd.ts`).
 */
const runChild = (
  child: Agent.Agent,
  parent: ParentAccess,
  prompt: string,
  callId: string
): Effect.Effect<EndFields, Tool.ToolError> =>
  Effect.gen(function*() {
    const task = yield* Effect.orDie(parent.ids.next)
    const delivery = yield* child.followup({
      id: task as MessageId,
      role: "user",
      content: [{ type: "text", text: prompt }],
      source: { kind: "subagent", parentSession: parent.sessionId, callId }
    }).pipe(Effect.mapError((e) => new Tool.ToolError({ message: `the task could not be delivered: ${e.message}`, cause: e })))
    yield* delivery.outcome
    yield* child.awaitIdle
    return endedFields(child.log.events(), child.log.header)
  })

/**
 * A fork's seed (§27): the parent's events up to its last `turn/end` (its completed turns), or
 * none when it has none yet.
 */
const completedTurns = (events: ReadonlyArray<SessionEvent>): ReadonlyArray<SessionEvent> => {
  for (let i = events.length - 1; i >= 0; i--) if (events[i]!.type === "turn/end") return events.slice(0, i + 1)
  return []
}

const firstLine = (text: string): string => {
  const line = text.split("\n", 1)[0]!.trim()
  return line.length > 80 ? `${line.slice(0, 79)}…` : line
}

const recordOrFail = (parent: ParentAccess, type: string, data: unknown): Effect.Effect<void, Tool.ToolError> =>
  Effect.mapError(
    parent.record(type, data),
    (e) => new Tool.ToolError({ message: `the parent's log refused ${type}: ${e.message}`, cause: e })
  )
