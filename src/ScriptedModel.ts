/**
 * The scripted model (§15): a `Model` that answers each request with the next response
 * of a script, through the same port a provider uses, on the Effect `Clock` (TestClock in tests).
 * What tests and scenarios drive the loop with; it records what it was asked.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { sequence, splitWords } from "./internal/scripted.js"
import { ModelError, type ModelErrorCode, type ModelRequest, type ModelService, type ModelSink } from "./Model.js"
import type { FinishReason, Usage } from "./SessionEvent.js"

/**
 * One scripted response (§15): `text` (split on whitespace into n deltas emitted at
 * ⌊i·latencyMs/n⌋ ms, whole milliseconds so virtual times stay integers), `reasoning` (one delta before the text), `toolCalls` (arguments: an object,
 * serialized with `JSON.stringify`, or a raw string sent as is), `finish` (default `"stop"`,
 * or `"tool-calls"` when there are tool calls), `usage`, `error` (the request fails with a
 * `ModelError`), `latencyMs` (tool calls, usage and finish come at `latencyMs`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedResponse {
  readonly text?: string | undefined
  readonly reasoning?: string | undefined
  readonly toolCalls?: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments?: unknown }> | undefined
  readonly finish?: FinishReason | undefined
  readonly usage?: Usage | undefined
  readonly error?: {
    readonly code: ModelErrorCode
    readonly message: string
    readonly retryable?: boolean | undefined
    readonly status?: number | undefined
    readonly retryAfterMs?: number | undefined
  } | undefined
  readonly latencyMs?: number | undefined
}

/**
 * A script entry: a response, or a function of the request that returns one.
 *
 * @since 0.1.0
 * @category models
 */
export type ScriptEntry = ScriptedResponse | ((request: ModelRequest) => ScriptedResponse)

/**
 * A request as the scripted model recorded it: the history copied at request time.
 *
 * @since 0.1.0
 * @category models
 */
export type RecordedRequest = Pick<ModelRequest, "turn" | "step" | "purpose" | "instructions" | "tools" | "messages">

/**
 * A scripted model: `requests` lists what it was asked (when `record` is on).
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedModel extends ModelService {
  readonly requests: ReadonlyArray<RecordedRequest>
  /** How many responses were consumed (with `loop`, across rounds). */
  readonly consumed: () => number
}

/**
 * A model that answers each request with the next scripted response, through the same port a
 * provider uses (§11, §15). A request past the end of the script fails with code
 * `SCRIPT_EXHAUSTED` (it is still recorded); `loop: true` starts over instead. A request
 * consumes its response when it starts (a cancelled request has used it). Timing uses the
 * Effect `Clock` (TestClock in tests); `latencyMs` 0 or absent emits everything at once.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  script: ReadonlyArray<ScriptEntry>,
  options?: {
    readonly provider?: string | undefined
    readonly model?: string | undefined
    readonly record?: boolean | undefined
    readonly loop?: boolean | undefined
  }
): ScriptedModel => {
  const requests: Array<RecordedRequest> = []
  const record = options?.record ?? true
  let index = 0
  let consumed = 0
  const respond = (request: ModelRequest, sink: ModelSink): Effect.Effect<void, ModelError> =>
    Effect.suspend(() => {
      if (record) {
        requests.push({
          turn: request.turn,
          step: request.step,
          ...(request.purpose !== undefined ? { purpose: request.purpose } : {}),
          instructions: request.instructions,
          tools: request.tools,
          messages: request.messages.slice()
        })
      }
      if (index >= script.length) {
        if (options?.loop === true && script.length > 0) index = 0
        else {
          return Effect.fail(
            new ModelError({
              code: "SCRIPT_EXHAUSTED",
              message: `the model script has ${script.length} responses; request ${index + 1} has none`,
              retryable: false
            })
          )
        }
      }
      const entry = script[index++]!
      consumed++
      const response = typeof entry === "function" ? entry(request) : entry
      return play(response, sink)
    })
  return {
    provider: options?.provider ?? "scripted",
    model: options?.model ?? "script",
    respond,
    requests,
    consumed: () => consumed
  }
}

/**
 * Plays one scripted response into a sink, on the Effect `Clock`: what `make` does with each
 * request's response, and the offline model with its plan (text deltas spread over `latencyMs`,
 * then tool calls, usage and finish, or the error, at `latencyMs`).
 *
 * @since 0.1.0
 * @category combinators
 */
export const play = (response: ScriptedResponse, sink: ModelSink): Effect.Effect<void, ModelError> => {
  const latency = Math.max(0, response.latencyMs ?? 0)
  const steps: Array<Effect.Effect<void, ModelError>> = []
  let elapsed = 0
  const at = (ms: number, effect: Effect.Effect<void, ModelError>) => {
    if (ms > elapsed) {
      steps.push(Effect.sleep(ms - elapsed))
      elapsed = ms
    }
    steps.push(effect)
  }
  if (response.reasoning !== undefined && response.reasoning.length > 0) {
    at(0, sink.part({ type: "reasoning-delta", text: response.reasoning }))
  }
  if (response.text !== undefined && response.text.length > 0) {
    const words = splitWords(response.text)
    const n = words.length
    for (let i = 0; i < n; i++) {
      at(latency === 0 ? 0 : Math.floor(((i + 1) * latency) / n), sink.part({ type: "text-delta", text: words[i]! }))
    }
  }
  if (response.error !== undefined) {
    const e = response.error
    at(
      latency,
      Effect.fail(
        new ModelError({
          code: e.code,
          message: e.message,
          retryable: e.retryable ?? false,
          ...(e.status !== undefined ? { status: e.status } : {}),
          ...(e.retryAfterMs !== undefined ? { retryAfterMs: e.retryAfterMs } : {})
        })
      )
    )
    return sequence(steps)
  }
  const calls = response.toolCalls ?? []
  for (const c of calls) {
    const raw = typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {})
    at(latency, sink.part({ type: "tool-call", id: c.id, name: c.name, rawArguments: raw }))
  }
  if (response.usage !== undefined) at(latency, sink.part({ type: "usage", usage: response.usage }))
  at(latency, sink.part({ type: "finish", reason: response.finish ?? (calls.length > 0 ? "tool-calls" : "stop") }))
  return sequence(steps)
}
