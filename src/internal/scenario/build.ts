/**
 * What a scenario's run is built from (§15): its pre-step listeners, its tools, the `Compaction`
 * layer of its `compaction` block, and the messages of its delivery actions. `Simulator.run`
 * puts them around one agent (and the sub-agent tools of its tools around their children).
 */
import { Effect, type Layer, Schema } from "effect"
import * as Compaction from "../../Compaction.js"
import * as IdGenerator from "../../IdGenerator.js"
import { type MessageSource, textOf, UserMessage } from "../../Message.js"
import type * as Model from "../../Model.js"
import * as PreStep from "../../PreStep.js"
import type { Scenario } from "../../Scenario.js"
import * as Subagent from "../../Subagent.js"
import * as Tool from "../../Tool.js"
import { textMessage } from "../message.js"

const batchText = (messages: ReadonlyArray<UserMessage>): string => messages.map((m) => textOf(m.content)).join("\n")

/** The pre-step listeners of a scenario, outermost first (§15). */
export const listeners = (
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

/**
 * The tools of a scenario (§15): arguments are any JSON object; `approval` as §26 rule 1 says. A
 * tool with a `subagent` block is `Subagent.tool` (§27) named after its key, its child's model
 * `childModel(script, path)` (`path`: the tool names from the scenario's agent down, e.g.
 * `["research"]`), its child's tools built the same way.
 */
export const tools = (
  specs: Scenario["tools"],
  childModel: (script: Scenario["model"], path: ReadonlyArray<string>) => Model.ModelService,
  path: ReadonlyArray<string> = []
): ReadonlyArray<Tool.Tool<any>> =>
  Object.entries(specs ?? {}).map(([name, spec]): Tool.Tool<any> => {
    const child = spec.subagent
    if (child !== undefined) {
      return Subagent.tool({
        name,
        description: child.description,
        instructions: child.instructions,
        tools: tools(child.tools, childModel, [...path, name]),
        model: childModel(child.model, [...path, name]),
        fork: child.fork,
        maxDepth: child.maxDepth,
        maxSteps: child.maxSteps,
        approvalTimeoutMs: child.approvalTimeoutMs,
        approval: spec.approval ?? "never"
      })
    }
    return Tool.make({
      name,
      description: `scenario tool ${name}`,
      parameters: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
      exclusive: spec.exclusive,
      // §26: `"always"` makes each call wait for an `approve` or `reject` action (or the timeout).
      approval: spec.approval ?? "never",
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
  })

/** The `Compaction` layer of a scenario's `compaction` block (§17); none without one. */
export const compactionLayer = (spec: Scenario["compaction"]): Layer.Layer<Compaction.Compaction> | undefined => {
  if (spec === undefined) return undefined
  const { contextWindow, keepRecentTokens, reserve } = spec
  return Compaction.layerPolicy(
    spec.policy === "prune"
      ? Compaction.prune({ contextWindow, reserve, keepRecentTokens })
      : Compaction.summarize({ contextWindow, reserve, keepRecentTokens, instructions: spec.instructions })
  )
}

/** A delivery action's text as a message (a plain string gets `source`). */
export const messageOf = (
  text: string | { readonly text: string; readonly source?: MessageSource | undefined },
  source: MessageSource
) => UserMessage.make(typeof text === "string" ? { text, source } : { text: text.text, source: text.source ?? source })
