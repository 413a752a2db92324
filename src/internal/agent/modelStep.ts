/**
 * The model call of a step (§6.2, §11): the request from the incrementally kept
 * history, the push-based `Model` port (a sink per attempt, no `Stream`: §24),
 * retries of retryable errors on an Effect `Schedule` (the failed attempt's deltas withdrawn with
 * `assistant/retry`), and the `assistant/message` the response becomes.
 */
import { Cause, Duration, Effect, Either, Option, Schedule } from "effect"
import type { AssistantMessage, MessageId } from "../../Message.js"
import { ModelError, type ModelPart, type ModelRequest, type ModelSink } from "../../Model.js"
import type { EventDraft } from "../../SessionEvent.js"
import type { SessionWriteError } from "../../SessionLog.js"
import { causeMessage } from "../cause.js"
import { checkJson, deepFreeze } from "../json.js"
import * as Trace from "../tracing.js"
import { publish } from "./observers.js"
import { commit } from "./section.js"
import { type Accumulator, type AgentState, type CallState, history, newCall, seen, type TurnState } from "./state.js"
import { noteResponse } from "./usage.js"

/** The default retry schedule (§11): exponential from 500 ms, 3 attempts in all, never shorter than `retryAfterMs`. */
const defaultRetry: Schedule.Schedule<unknown, ModelError> = Schedule.exponential("500 millis").pipe(
  Schedule.zipRight(Schedule.identity<ModelError>()),
  Schedule.modifyDelay((error, delay) =>
    error.retryAfterMs !== undefined ? Duration.max(delay, Duration.millis(error.retryAfterMs)) : delay
  ),
  Schedule.intersect(Schedule.recurs(2))
) as any

/**
 * Calls the model for the open step of `t`: the response, or the final `ModelError` (a defect
 * in the adapter is `MODEL_FAILED`). Fails only by interruption.
 */
export const callModel = (a: AgentState, t: TurnState): Effect.Effect<Either.Either<Accumulator, ModelError>> => {
  const trace = t.trace
  if (trace === undefined) return respond(a, t, undefined)
  // Traced (§19): the request in its `chat` span, the adapter's spans (every attempt's) its children.
  return Effect.suspend(() => {
    const chat = Trace.startChat(a, trace, t.turn, t.step)
    return Trace.inSpan(respond(a, t, chat), chat.span, (exit) => Trace.endChat(chat, trace, exit))
  })
}

/** The request and its attempts (§11); with `chat`, each attempt is timed for its span (`callModel` sets the parent span). */
const respond = (
  a: AgentState,
  t: TurnState,
  chat: Trace.ChatTrace | undefined
): Effect.Effect<Either.Either<Accumulator, ModelError>> => {
  const request: ModelRequest = {
    sessionId: a.id,
    turn: t.turn,
    step: t.step,
    instructions: a.config.instructions,
    tools: a.config.toolDefinitions,
    messages: history(a),
    settings: a.config.settings
  }
  let attempt = 0
  const once = Effect.suspend(() => {
    attempt++
    if (attempt > 1) publish(a, { type: "assistant/retry", turn: t.turn, step: t.step, attempt })
    const acc: Accumulator = {
      content: [],
      toolCalls: [],
      usage: undefined,
      rawUsage: undefined,
      response: undefined,
      finish: undefined,
      streamed: false,
      joined: 0
    }
    t.acc = acc
    if (chat !== undefined) Trace.chatAttempt(chat)
    return Effect.as(a.config.model.respond(request, sinkFor(a, t, acc, chat)), acc)
  })
  // The first attempt runs bare (no schedule driver on the success path); a retryable failure
  // is fed to the retry schedule, whose driver sleeps before each further attempt (§11).
  const outcome = (cause: Cause.Cause<ModelError>): Effect.Effect<Either.Either<Accumulator, ModelError>> => {
    if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
    // The failed attempt's deltas are withdrawn: a cancel during the retry wait logs no prefix.
    t.acc = undefined
    const failure = Cause.failureOption(cause)
    if (Option.isNone(failure)) {
      return Effect.succeed(Either.left(new ModelError({ code: "MODEL_FAILED", message: causeMessage(cause), retryable: false })))
    }
    return Effect.succeed(Either.left(failure.value))
  }
  const schedule = a.config.retry ?? defaultRetry
  const retryFrom = (first: ModelError) =>
    Effect.flatMap(Schedule.driver(schedule), (driver) => {
      const loop = (error: ModelError): Effect.Effect<Either.Either<Accumulator, ModelError>> =>
        !error.retryable
          ? Effect.succeed(Either.left(error))
          : Effect.matchEffect(driver.next(error), {
            onFailure: () => Effect.succeed(Either.left(error)),
            onSuccess: () => {
              if (chat !== undefined) Trace.chatRetry(chat, attempt + 1, error)
              return Effect.matchCauseEffect(once, {
                onSuccess: (acc) => Effect.succeed(Either.right(acc)),
                onFailure: (cause) => Effect.flatMap(outcome(cause), (e) => (Either.isLeft(e) ? loop(e.left) : Effect.succeed(e)))
              })
            }
          })
      return loop(first)
    })
  return Effect.matchCauseEffect(once, {
    onSuccess: (acc) => Effect.succeed(Either.right(acc)),
    onFailure: (cause) =>
      Effect.flatMap(
        outcome(cause),
        (e) => Either.isLeft(e) && e.left.retryable && e.left.code !== "MODEL_FAILED" ? retryFrom(e.left) : Effect.succeed(e)
      )
  })
}

/**
 * Every how many deltas of an attempt its streaming text is flattened. `+` makes a rope node per
 * delta (32 bytes, and it keeps the delta's own string alive): a block of 2,000 deltas held ~100
 * KB instead of its characters. Reading a character flattens a rope in place (V8), in O(length):
 * once per 16 deltas is a copy of ~1/16 of the text per delta (a 10,000-character block: ~600
 * bytes copied per delta, well under a microsecond), and a streaming block holds at most 15 nodes
 * and their deltas (once per 64: ~1.5 KB per session at the peak of concurrent-sessions, with
 * 1,000 sessions streaming at once; §24).
 */
const FLATTEN_EVERY = 16

/** `text + piece`, flattened every `FLATTEN_EVERY`th join of the attempt. */
const join = (acc: Accumulator, text: string, piece: string): string => {
  const joined = text + piece
  if (++acc.joined % FLATTEN_EVERY === 0) joined.charCodeAt(0)
  return joined
}

/** The sink of one attempt: accumulates the response and publishes its deltas (§5.3). */
const sinkFor = (a: AgentState, t: TurnState, acc: Accumulator, chat: Trace.ChatTrace | undefined): ModelSink => ({
  part: (part: ModelPart) =>
    Effect.sync(() => {
      // The time to first chunk (§19): one clock read per attempt, no span per part.
      if (chat !== undefined && chat.firstPart === undefined) chat.firstPart = chat.clock.unsafeCurrentTimeMillis()
      const content = acc.content
      switch (part.type) {
        case "text-delta": {
          if (part.text.length === 0) return
          const last = content[content.length - 1]
          if (last !== undefined && last.type === "text") {
            content[content.length - 1] = { type: "text", text: join(acc, last.text, part.text) }
          } else content.push({ type: "text", text: part.text })
          acc.streamed = true
          if (a.hub !== undefined || a.family?.parentLink !== undefined) {
            publish(a, { type: "assistant/delta", turn: t.turn, step: t.step, text: part.text })
          }
          return
        }
        case "reasoning-delta": {
          const last = content[content.length - 1]
          if (last !== undefined && last.type === "reasoning") {
            const providerState = part.providerState ?? last.providerState
            content[content.length - 1] = providerState === undefined
              ? { type: "reasoning", text: join(acc, last.text, part.text) }
              : { type: "reasoning", text: join(acc, last.text, part.text), providerState }
          } else {
            content.push(
              part.providerState === undefined
                ? { type: "reasoning", text: part.text }
                : { type: "reasoning", text: part.text, providerState: part.providerState }
            )
          }
          acc.streamed = true
          if (a.hub !== undefined || a.family?.parentLink !== undefined) {
            publish(a, { type: "assistant/delta", turn: t.turn, step: t.step, reasoning: part.text })
          }
          return
        }
        case "tool-call": {
          // A call id repeated within one response would pair results ambiguously (§12 rule 3):
          // later duplicates get a suffix, in the logged message and in their tool events alike.
          let id = part.id
          if (
            acc.toolCalls.some((c) => c.id === id)
          ) {
            let n = 2
            while (
              acc.toolCalls.some((c) => c.id === `${part.id}#${n}`)
            ) n++
            id = `${part.id}#${n}`
          }
          content.push({ type: "tool-call", id, name: part.name, arguments: part.rawArguments })
          acc.toolCalls.push(id === part.id ? part : { ...part, id })
          acc.streamed = true
          if (a.hub !== undefined || a.family?.parentLink !== undefined) {
            publish(a, {
              type: "assistant/delta",
              turn: t.turn,
              step: t.step,
              toolCall: { id: part.id, name: part.name, arguments: part.rawArguments }
            })
          }
          return
        }
        case "usage":
          acc.usage = part.usage
          if (part.raw !== undefined) acc.rawUsage = part.raw
          return
        case "response":
          acc.response = {
            ...(typeof part.id === "string" ? { id: part.id } : {}),
            ...(typeof part.model === "string" ? { model: part.model } : {})
          }
          return
        case "finish":
          acc.finish = part.reason
          return
      }
    })
})

/** The `assistant/message` draft of a response, its calls, and the state update once it is durable. */
export const assistantDraft = (
  a: AgentState,
  t: TurnState,
  acc: Accumulator,
  interrupted: boolean,
  id: string
): { readonly draft: EventDraft; readonly apply: () => void; readonly calls: Array<CallState> | undefined } => {
  const calls = acc.toolCalls.length > 0 ? acc.toolCalls.map(newCall) : undefined
  // The message is our own literals over strings from the adapter; only a reasoning block's
  // `providerState` is the adapter's own value, checked to be plain JSON.
  for (const block of acc.content) {
    if (block.type === "reasoning" && block.providerState !== undefined) checkJson(block.providerState, "providerState")
  }
  const message: AssistantMessage = deepFreeze({
    id: id as MessageId,
    role: "assistant",
    content: acc.content,
    source: { kind: "model", provider: a.config.model.provider, model: a.config.model.model }
  }) as AssistantMessage
  const data = {
    turn: t.turn,
    step: t.step,
    message,
    ...(acc.usage !== undefined ? { usage: acc.usage } : {}),
    ...(acc.rawUsage !== undefined ? { rawUsage: checkJson(acc.rawUsage, "rawUsage") } : {}),
    ...(acc.response !== undefined ? { response: acc.response } : {}),
    ...(interrupted ? { interrupted: true as const } : { finish: acc.finish ?? "stop" })
  }
  return {
    draft: { type: "assistant/message", data },
    calls,
    apply: () => {
      t.assistantLogged = true
      seen(a).add(message.id)
      history(a).push(message)
      noteResponse(a, t.turn, data)
      // The calls exist from the moment their message is durable: an abort from here on
      // closes each of them (§9).
      if (calls !== undefined) {
        t.calls = calls
        t.nextCommit = 0
        t.contextsInserted = 0
      }
    }
  }
}

/** Logs a response (or, `interrupted`, the prefix a cancel cut, §9) in its own append. */
export const logAssistant = (
  a: AgentState,
  t: TurnState,
  acc: Accumulator,
  interrupted: boolean
): Effect.Effect<void, SessionWriteError> =>
  Effect.flatMap(a.config.ids.next, (id) => {
    const { apply, draft } = assistantDraft(a, t, acc, interrupted, id)
    return commit(a, [draft], apply)
  })
