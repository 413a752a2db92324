/**
 * Tolerant reading of foreign JSON for the provider adapters: a field of an unexpected type is
 * ignored rather than failing the response; the normalized usage, the response id/model part and
 * the default finish reason of a response; and what every adapter sends the same way (a tool call's arguments as an object,
 * a tool's parameters schema, each tools array encoded once, and the per-object memo behind
 * such caches). Shared by `OpenAICompat`, `Anthropic` and `AiBridge`.
 */
import type { ModelPart, ToolDefinition } from "../../Model.js"
import type { FinishReason, Usage } from "../../SessionEvent.js"

/** A plain JSON object (not an array, not `null`). */
export const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A non-empty string, else `undefined`. */
export const nonEmpty = (u: unknown): string | undefined => typeof u === "string" && u !== "" ? u : undefined

/** A finite number, else `undefined`. */
export const num = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined

/** What `parseJson` returns for a text that is not JSON. */
export const NOT_JSON: unique symbol = Symbol("NOT_JSON")

/** The parsed JSON, or `NOT_JSON`. */
export const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return NOT_JSON
  }
}

/** The parsed JSON, or the text itself when it is not JSON. */
export const parseJsonOr = (text: string): unknown => {
  const parsed = parseJson(text)
  return parsed === NOT_JSON ? text : parsed
}

/**
 * A tool call's raw arguments as the object a provider wants back (`tool_use.input`, tool-call
 * `params`): parsed when they are a JSON object, else `{}` (the loop's `INVALID_ARGUMENTS` result
 * for the call tells the model what was wrong).
 */
export const objectArguments = (raw: string): unknown => {
  const parsed = parseJsonOr(raw)
  return isRecord(parsed) ? parsed : {}
}

/** `s` cut to `n` code units, with "…" when cut. */
export const truncate = (s: string, n: number): string => s.length > n ? s.slice(0, n) + "…" : s

/** A numeric setting of `ModelRequest.settings` (`maxTokens`, `temperature`, `topP`). */
export const numberSetting = (
  settings: { readonly [key: string]: unknown } | undefined,
  key: string
): number | undefined => {
  const value = settings?.[key]
  return typeof value === "number" ? value : undefined
}

/**
 * The finish reason of a response whose own reason says no more (`stop`, or one this adapter
 * does not know): `tool-calls` when the response has tool calls, else `stop` (some servers say
 * `stop` after tool calls).
 */
export const stopOrToolCalls = (hasToolCalls: boolean): FinishReason => hasToolCalls ? "tool-calls" : "stop"

/**
 * A response's usage in the normalized shape (§18, `Usage` in SessionEvent.ts): the five
 * counts, each 0 when the provider did not report that kind, and `totalTokens` only when the
 * provider sent a total; `undefined` when none of the five is known (the provider reported no
 * usage). Each adapter reads its wire counts into `counts` (cached and cache-written tokens
 * already inside `inputTokens`), once per response.
 */
export const normalizedUsage = (counts: Usage): Usage | undefined => {
  const { cacheReadTokens, cacheWriteTokens, inputTokens, outputTokens, reasoningTokens, totalTokens } = counts
  if (
    inputTokens === undefined && outputTokens === undefined && cacheReadTokens === undefined &&
    cacheWriteTokens === undefined && reasoningTokens === undefined
  ) return undefined
  const usage = {
    inputTokens: inputTokens ?? 0,
    outputTokens: outputTokens ?? 0,
    cacheReadTokens: cacheReadTokens ?? 0,
    cacheWriteTokens: cacheWriteTokens ?? 0,
    reasoningTokens: reasoningTokens ?? 0
  }
  return totalTokens === undefined ? usage : { ...usage, totalTokens }
}

/**
 * The `response` part (the provider's response id and the model that answered, §18) of a
 * wire response whose `id` / `model` fields are these values; `undefined` when neither is a
 * non-empty string.
 */
export const responsePart = (id: unknown, model: unknown): ModelPart | undefined => {
  const responseId = nonEmpty(id)
  const responseModel = nonEmpty(model)
  if (responseId === undefined && responseModel === undefined) return undefined
  return {
    type: "response",
    ...(responseId === undefined ? {} : { id: responseId }),
    ...(responseModel === undefined ? {} : { model: responseModel })
  }
}

const NO_PARAMETERS = { type: "object", properties: {} }

/** A tool's parameters JSON Schema as sent: `{type:"object", properties:{}}` when it has none. */
export const parametersOf = (tool: ToolDefinition): unknown => tool.parameters ?? NO_PARAMETERS

/**
 * A tools array's wire JSON, `encode` applied to each tool, computed once per array (a session
 * sends the same array with every request).
 */
export const toolsOnce = (
  encode: (tool: ToolDefinition) => unknown
): (tools: ReadonlyArray<ToolDefinition>) => string =>
  perObject((tools: ReadonlyArray<ToolDefinition>) => JSON.stringify(tools.map(encode)))

/** `compute`, remembered per key object in a `WeakMap` (one lookup when the key was seen). */
export const perObject = <K extends object, V>(compute: (key: K) => V): (key: K) => V => {
  const cache = new WeakMap<K, V>()
  return (key) => {
    let value = cache.get(key)
    if (value === undefined) {
      value = compute(key)
      cache.set(key, value)
    }
    return value
  }
}
