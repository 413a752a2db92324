/**
 * Delivery (§4, §5.1): `followup`, `steer` and `inject`; the plugin inbox operations
 * `replace`, `remove` and `clear`; standalone plugin events (`appendEvent`, §3.2); what the log
 * holds for a delivered id (`deliveryOf`). Each inbox change is one critical section: validate →
 * durable splice → the inbox `Ref` → notifications.
 */
import { Effect, Option } from "effect"
import { AgentDisposed, type DeliveryError, DuplicateMessageId, InvalidEvent, MessageNotPending } from "../../AgentError.js"
import { eventTypes as compactionEventTypes } from "../../Compaction.js"
import type { Delivery, DeliveryInput } from "../../Delivery.js"
import * as Inbox from "../../Inbox.js"
import { InvalidMessage, type UserMessage } from "../../Message.js"
import { coreEventTypes, type SessionEvent, type SplicedData } from "../../SessionEvent.js"
import type { SessionWriteError } from "../../SessionLog.js"
import { messageOf } from "../cause.js"
import { flatten } from "../flat.js"
import { checkJson } from "../json.js"
import { seedLengthOf } from "../logOptions.js"
import { checkUserMessage, invalidMessage, textMessage, tooLarge } from "../message.js"
import { eventTypes as subagentEventTypes } from "../subagentLog.js"
import { noteCaller } from "../tracing.js"
import { startRun } from "./driver.js"
import { ownFibers } from "./fibers.js"
import { markUndecided, outcomeOf, publish } from "./observers.js"
import { commit, critical, type Section, spliceSection } from "./section.js"
import { type AgentState, seen } from "./state.js"

const USER_SOURCE = Object.freeze({ kind: "user" })

const disposedError = (a: AgentState): AgentDisposed =>
  new AgentDisposed({
    message: a.released
      ? `agent ${a.id} was released: resume the session to deliver to it`
      : `agent ${a.id} is disposed`,
    agentId: a.id
  })

/** Why a disposed agent refuses a delivery: the store's error of a stopped agent, else `AgentDisposed`. */
export const refusal = (a: AgentState): AgentDisposed | SessionWriteError =>
  a.released ? disposedError(a) : a.stopped ?? disposedError(a)

const duplicate = (a: AgentState, id: string): DuplicateMessageId =>
  new DuplicateMessageId({ message: `message id ${id} is pending or was already logged in session ${a.id}`, messageId: id })

/**
 * A caller's message after the checks of `checkUserMessage` (§2) and within `maxMessageBytes`
 * (§5.1), or `InvalidMessage`; nothing is logged.
 */
const checkMessage = (a: AgentState, message: UserMessage): Effect.Effect<UserMessage, InvalidMessage> =>
  Effect.suspend(() => {
    let checked: UserMessage
    try {
      checked = checkUserMessage(message, "message")
    } catch (e) {
      return Effect.fail(invalidMessage(e))
    }
    return withinLimit(a, checked)
  })

/** The message, or `InvalidMessage` when it is over the agent's `maxMessageBytes` (§5.1). */
const withinLimit = (a: AgentState, message: UserMessage): Effect.Effect<UserMessage, InvalidMessage> => {
  const error = tooLarge(message, a.config.maxMessageBytes)
  return error === undefined ? Effect.succeed(message) : Effect.fail(error)
}

/** The delivery input as a message: a string is one text block, source `{kind:"user"}`. */
const toMessage = (a: AgentState, input: DeliveryInput): Effect.Effect<UserMessage, InvalidMessage> =>
  typeof input === "string"
    ? Effect.flatMap(a.config.ids.next, (id) => withinLimit(a, textMessage(flatten(id), input, USER_SOURCE)))
    : checkMessage(a, input)

/**
 * `followup` (→ `next-turn`, waking), `steer` (→ `next-step`, waking) and `inject` (→ `next-step`,
 * non-waking) (§5.1). From a cancel until idle, a waking delivery goes to `next-turn` and sets
 * the latch (§9). Returns once the splice is durable.
 */
export const deliver = (
  a: AgentState,
  input: DeliveryInput,
  mode: "followup" | "steer" | "inject"
): Effect.Effect<Delivery, DeliveryError> => {
  if (a.disposed) return Effect.fail(refusal(a))
  if (mode === "inject" && typeof input === "string") {
    // Injected context must name its producer (§2): only a `UserMessage` (the types say so too).
    return Effect.fail(
      new InvalidMessage({ message: "inject takes a UserMessage whose source names its producer, not a string", path: "message" })
    )
  }
  // A waking delivery may start a run: the agent's fibers (`fibers.ts`) are made first.
  const message = mode === "inject" || a.fibers !== undefined
    ? toMessage(a, input)
    : Effect.zipRight(ownFibers(a), toMessage(a, input))
  return Effect.flatMap(
    message,
    (message) =>
      a.disposed ? Effect.fail(refusal(a)) : critical(a, (inbox): Section<Delivery> | Effect.Effect<never, DeliveryError> => {
        if (a.disposed) return Effect.fail(refusal(a))
        if (seen(a).has(message.id)) return Effect.fail(duplicate(a, message.id))
        const unwinding = a.cancelCause !== undefined
        const target = mode === "followup" || (mode === "steer" && unwinding) ? "next-turn" : "next-step"
        // A steer made during a cancel goes to `next-turn` (§9); `wake: true` (which changes
        // nothing there) keeps it a steer for `deliveryOf`.
        const data: SplicedData = target === "next-turn"
          ? mode === "steer"
            ? { target, start: inbox.nextTurn.length, inserted: [message], wake: true }
            : { target, start: inbox.nextTurn.length, inserted: [message] }
          : mode === "steer"
          ? { target, start: inbox.nextStep.length, inserted: [message], wake: true }
          : { target, start: inbox.nextStep.length, inserted: [message] }
        return {
          drafts: [{ type: "agent/inbox/spliced", data }],
          inbox: Inbox.apply(inbox, data).state,
          apply: () => {
            seen(a).add(message.id)
            markUndecided(a, data.inserted)
            // The caller's span, for a link from the turn the message enters (§19).
            noteCaller(a, message.id)
            publish(a, { type: "agent/inbox/inserted", message })
            if (mode !== "inject") {
              if (unwinding) a.latch = true
              else if (!a.running) startRun(a)
            }
            return { messageId: message.id, outcome: outcomeOf(a, message.id) }
          }
        }
      })
  )
}

/**
 * What the log holds for an inserted message id (`agent.deliveryOf`): the message as its splice
 * inserted it and the delivery that splice reads as: `wake: true` → `"steer"` (in `next-step`, or
 * in `next-turn` for a steer made during a cancel), other `next-turn` → `"followup"`, other
 * `next-step` → `"inject"`. None for an id the session never
 * used (O(1)), else one scan of the log from its end (ids are unique per session, §2); also
 * none for an id used but never inserted (assistant messages, tool results, pre-step additions)
 * and for the seed's messages (§3.1).
 */
export const deliveryOf = (
  a: AgentState,
  id: string
): Option.Option<{ readonly message: UserMessage; readonly delivery: "followup" | "steer" | "inject" }> => {
  if (a.seenCell?.has(id) !== true) return Option.none()
  const events = a.sessionLog.events()
  const seed = seedLengthOf({ header: a.sessionLog.header })
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!
    if (e.seq < seed) break
    if (e.type !== "agent/inbox/spliced") continue
    const data = e.data as SplicedData
    for (const message of data.inserted) {
      if (message.id === id) {
        return Option.some({
          message,
          delivery: data.wake === true ? "steer" : data.target === "next-turn" ? "followup" : "inject"
        })
      }
    }
  }
  return Option.none()
}

const notPending = (a: AgentState, id: string): MessageNotPending =>
  new MessageNotPending({ message: `message ${id} is not pending in session ${a.id}`, messageId: id })

/** Plugin operation (§4): replaces a pending message; one `outcome:"canceled"` splice, no cause. */
export const replace = (
  a: AgentState,
  id: string,
  message: UserMessage
): Effect.Effect<void, MessageNotPending | InvalidMessage | DuplicateMessageId | AgentDisposed | SessionWriteError> => {
  if (a.disposed) return Effect.fail(refusal(a))
  return Effect.flatMap(
    checkMessage(a, message),
    (msg) =>
      critical(a, (inbox): Section<void> | Effect.Effect<never, MessageNotPending | DuplicateMessageId> => {
        const at = Inbox.find(inbox, id)
        if (at === undefined) return Effect.fail(notPending(a, id))
        if (seen(a).has(msg.id)) {
          return Effect.fail(new DuplicateMessageId({ message: `message id ${msg.id} is already used`, messageId: msg.id }))
        }
        const data: SplicedData = { target: at[0], start: at[1], removedCount: 1, inserted: [msg], outcome: "canceled" }
        const splices = spliceSection(a, inbox, [data])
        return {
          drafts: splices.drafts,
          inbox: splices.inbox,
          apply: (events) => {
            splices.apply(events)
            seen(a).add(msg.id)
            markUndecided(a, data.inserted)
            publish(a, { type: "agent/inbox/inserted", message: msg })
          }
        }
      })
  )
}

/** Plugin operation (§4): removes a pending message; its fate is `discarded`. */
export const remove = (a: AgentState, id: string): Effect.Effect<void, MessageNotPending | SessionWriteError> =>
  critical(a, (inbox): Section<void> | Effect.Effect<never, MessageNotPending> => {
    const at = Inbox.find(inbox, id)
    if (at === undefined) return Effect.fail(notPending(a, id))
    return spliceSection(a, inbox, [{ target: at[0], start: at[1], removedCount: 1, inserted: [], outcome: "canceled" }])
  })

/** Plugin operation (§4): clears one queue or both (`next-step` first); fates `discarded`. */
export const clear = (a: AgentState, target: "next-turn" | "next-step" | undefined): Effect.Effect<void, SessionWriteError> =>
  critical(
    a,
    (inbox) =>
      spliceSection(a, inbox, Inbox.clearAll(inbox, undefined).filter((s) => target === undefined || s.target === target))
  )

/**
 * Appends a standalone log-only plugin event `<plugin>/<name>` (§3.2): it opens no turn. Core
 * types, the compaction bracket's types (`compaction/start`, `compaction/summary`,
 * `compaction/end`: the runtime's, §17) and the sub-agent types (`subagent/start`, `subagent/end`,
 * `subagent/descriptor`, §27) are refused with `InvalidEvent`.
 */
export const appendEvent = (
  a: AgentState,
  type: string,
  data: unknown
): Effect.Effect<SessionEvent, InvalidEvent | SessionWriteError> => {
  if (coreEventTypes.has(type) || !type.includes("/") || type === "session") {
    return Effect.fail(new InvalidEvent({ message: `"${type}" is not a plugin event type (<plugin>/<name>, not a core type)` }))
  }
  if (subagentEventTypes.has(type)) {
    return Effect.fail(
      new InvalidEvent({ message: `"${type}" is not a plugin event type (a sub-agent event, appended by the runtime only)` })
    )
  }
  if (compactionEventTypes.has(type)) {
    return Effect.fail(
      new InvalidEvent({ message: `"${type}" is not a plugin event type (a compaction event, appended by the runtime only)` })
    )
  }
  return Effect.try({
    try: () => checkJson(data, "data"),
    catch: (e) => new InvalidEvent({ message: `event data is not JSON: ${messageOf(e)}` })
  }).pipe(Effect.flatMap((d) => commit(a, [{ type, data: d }], (events) => events[0]!)))
}
