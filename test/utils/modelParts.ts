/**
 * Collecting what a `ModelService` pushes into its sink, for the provider adapter tests: the
 * parts in order, a summary (concatenated text and reasoning, tool calls, usage with its raw
 * object, the response id/model, finish, and the part types as a run-length "shape"), a `ModelError`'s fields as a plain object, and frozen
 * messages to build requests from.
 */
import { Effect } from "effect"
import type { ContentBlock, Message, MessageId } from "../../src/Message.js"
import type { ModelError, ModelPart, ModelRequest, ModelService } from "../../src/Model.js"
import type { FinishReason, Usage } from "../../src/SessionEvent.js"

/** A response's parts, summarized. */
export interface Collected {
  readonly text: string
  readonly reasoning: string
  /** Part types, runs compressed: `text-delta*10`. */
  readonly shape: string
  readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly rawArguments: string }>
  readonly usage: Usage | undefined
  /** The `raw` of the last `usage` part (the provider's usage object as sent). */
  readonly rawUsage: unknown
  /** The last `response` part, without its `type`. */
  readonly response: { readonly id?: string | undefined; readonly model?: string | undefined } | undefined
  readonly finish: FinishReason | undefined
}

/** Summarizes parts in push order. */
export const summarize = (parts: ReadonlyArray<ModelPart>): Collected => {
  let text = ""
  let reasoning = ""
  const toolCalls: Array<{ id: string; name: string; rawArguments: string }> = []
  let usage: Usage | undefined
  let rawUsage: unknown
  let response: Collected["response"]
  let finish: FinishReason | undefined
  const runs: Array<[string, number]> = []
  for (const part of parts) {
    const last = runs[runs.length - 1]
    if (last !== undefined && last[0] === part.type) last[1]++
    else runs.push([part.type, 1])
    switch (part.type) {
      case "text-delta":
        text += part.text
        break
      case "reasoning-delta":
        reasoning += part.text
        break
      case "tool-call":
        toolCalls.push({ id: part.id, name: part.name, rawArguments: part.rawArguments })
        break
      case "usage":
        usage = part.usage
        rawUsage = part.raw
        break
      case "response": {
        const { type: _, ...rest } = part
        response = rest
        break
      }
      case "finish":
        finish = part.reason
        break
    }
  }
  const shape = runs.map(([type, n]) => n === 1 ? type : `${type}*${n}`).join(",")
  return { text, reasoning, shape, toolCalls, usage, rawUsage, response, finish }
}

/** Runs `respond` and returns the parts pushed; a failure carries the parts pushed before it. */
export const collect = (model: ModelService, request: ModelRequest) =>
  Effect.suspend(() => {
    const parts: Array<ModelPart> = []
    return model.respond(request, { part: (p) => Effect.sync(() => void parts.push(p)) }).pipe(
      Effect.as(parts),
      Effect.mapError((error) => ({ error, parts }))
    )
  })

/** A `ModelError`'s fields, for `toEqual` with exact values. */
export const errorFields = (e: ModelError) => ({
  _tag: e._tag,
  code: e.code,
  message: e.message,
  status: e.status,
  retryable: e.retryable,
  retryAfterMs: e.retryAfterMs
})

// ---------------------------------------------------------------------------------------------
// Frozen messages for request-side tests
// ---------------------------------------------------------------------------------------------

export const freeze = <M extends Message>(m: M): M => Object.freeze(m)

/** A frozen user-role text message (`source` defaults to the user). */
export const user = (id: string, text: string, source: Record<string, unknown> = { kind: "user" }) =>
  freeze({
    id: id as MessageId,
    role: "user" as const,
    content: [{ type: "text" as const, text }],
    source: { kind: "user", ...source }
  })

/** A frozen tool result message for `callId` with one text block. */
export const toolResult = (id: string, callId: string, text: string, isError?: boolean) =>
  freeze({
    id: id as MessageId,
    role: "user" as const,
    content: [{
      type: "tool-result" as const,
      toolCallId: callId,
      content: [{ type: "text" as const, text }],
      ...(isError === undefined ? {} : { isError })
    }],
    source: { kind: "tool", callId }
  })

/** A frozen assistant message of `provider`/`model`. */
export const assistantOf = (provider: string, model: string) => (id: string, content: ReadonlyArray<ContentBlock>) =>
  freeze({
    id: id as MessageId,
    role: "assistant" as const,
    content,
    source: { kind: "model", provider, model }
  })
