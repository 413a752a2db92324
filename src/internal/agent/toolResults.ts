/**
 * Committing tool results (§8, §9): `tool/result` events in model call order, whatever
 * order the calls finish; a batch's additional contexts spliced into `next-step` at the batch's
 * index (ahead of what arrived meanwhile), never between a call and its result; the results an
 * abort or a truncation owes every call.
 */
import { Effect } from "effect"
import * as Inbox from "../../Inbox.js"
import type { ContentBlock, UserMessage } from "../../Message.js"
import type { EventDraft, SplicedData, ToolErrorCode } from "../../SessionEvent.js"
import type { SessionWriteError } from "../../SessionLog.js"
import { flatten } from "../flat.js"
import { textBlock, toolResultMessage } from "../message.js"
import { toolError } from "../toolError.js"
import { markUndecided, publish } from "./observers.js"
import { commit, critical, type Section } from "./section.js"
import { type AgentState, type CallState, history, seen, type TurnState } from "./state.js"

/** Records an error result on a call (§8 codes); it carries no contexts. */
export const fail = (call: CallState, code: ToolErrorCode, text: string): void => {
  call.phase = "done"
  call.content = [textBlock(text)]
  call.isError = true
  call.error = toolError(code)
  call.contexts = []
}

/** Records a call's result: its (checked) content and contexts, an error result or not. */
export const succeed = (
  call: CallState,
  content: ReadonlyArray<ContentBlock>,
  contexts: ReadonlyArray<UserMessage>,
  isError: boolean
): void => {
  call.phase = "done"
  call.content = content
  call.isError = isError
  call.error = isError ? toolError("TOOL_FAILED") : undefined
  call.contexts = contexts
}

/** The `tool/result` drafts of `ready` (the calls from `nextCommit` on), and their state update. */
const resultDrafts = (
  a: AgentState,
  t: TurnState,
  ready: ReadonlyArray<CallState>,
  ids: ReadonlyArray<string>
): { readonly drafts: Array<EventDraft>; readonly apply: () => void } => {
  const results: Array<UserMessage> = []
  const drafts: Array<EventDraft> = []
  for (let k = 0; k < ready.length; k++) {
    const call = ready[k]!
    const message = toolResultMessage(ids[k]!, call.id, call.content, call.isError)
    results.push(message)
    drafts.push({
      type: "tool/result",
      data: call.error === undefined
        ? { turn: t.turn, step: t.step, message }
        : { turn: t.turn, step: t.step, message, error: call.error }
    })
  }
  const end = t.nextCommit + ready.length
  return {
    drafts,
    apply: () => {
      const used = seen(a)
      const list = history(a)
      for (let k = 0; k < ready.length; k++) {
        ready[k]!.phase = "committed"
        used.add(results[k]!.id)
        list.push(results[k]!)
      }
      t.nextCommit = end
    }
  }
}

/**
 * Commits every consecutive done result from `nextCommit`, in call order (§8), in one append:
 * each `tool/result`, followed by its contexts spliced into `next-step` at the batch's index
 * (a critical section, as it splices the inbox).
 */
export const commitReady = (a: AgentState, t: TurnState): Effect.Effect<void, SessionWriteError> =>
  Effect.suspend(() => {
    const calls = t.calls
    if (calls === undefined) return Effect.void
    const first = t.nextCommit
    let end = first
    let withContexts = false
    while (end < calls.length && calls[end]!.phase === "done") {
      if (calls[end]!.contexts.length > 0) withContexts = true
      end++
    }
    if (end === first) return Effect.void
    const ready = calls.slice(first, end)
    return Effect.flatMap(takeIds(a, ready.length), (ids) => {
      if (!withContexts) {
        const { apply, drafts } = resultDrafts(a, t, ready, ids)
        return commit(a, drafts, apply)
      }
      return critical(a, (inbox): Section<void> => {
        // A context id used since the call returned (by another call of the batch, or a
        // delivery meanwhile) fails that call's result: ids are unique per session (§2).
        const used = new Set<string>()
        for (const call of ready) {
          for (const m of call.contexts) {
            if (seen(a).has(m.id) || used.has(m.id)) {
              fail(
                call,
                "TOOL_FAILED",
                `Tool ${call.name} returned an invalid result: additional context id ${m.id} is already used`
              )
              break
            }
          }
          for (const m of call.contexts) used.add(m.id)
        }
        const { apply: committed, drafts } = resultDrafts(a, t, ready, ids)
        const all: Array<EventDraft> = []
        const splices: Array<SplicedData> = []
        let start = Math.min(t.contextsInserted, inbox.nextStep.length)
        for (let k = 0; k < ready.length; k++) {
          all.push(drafts[k]!)
          const contexts = ready[k]!.contexts
          if (contexts.length === 0) continue
          const data: SplicedData = { target: "next-step", start, inserted: contexts }
          all.push({ type: "agent/inbox/spliced", data })
          splices.push(data)
          start += contexts.length
        }
        return {
          drafts: all,
          inbox: Inbox.applyAll(inbox, splices),
          apply: () => {
            committed()
            t.contextsInserted = start
            for (const data of splices) {
              for (const m of data.inserted) {
                seen(a).add(m.id)
                publish(a, { type: "agent/inbox/inserted", message: m })
              }
              markUndecided(a, data.inserted)
            }
          }
        }
      })
    })
  })

/**
 * The results still to commit when the batch is over can go in the same append as the step's
 * end (events and order unchanged), unless one carries contexts (they must be in the inbox
 * before the claim) or ids need an effect: then they are committed now.
 */
export const commitBeforeStepEnd = (a: AgentState, t: TurnState): Effect.Effect<void, SessionWriteError> =>
  Effect.suspend(() => {
    const calls = t.calls
    if (calls === undefined || a.config.ids.nextSync === undefined) return commitReady(a, t)
    for (let i = t.nextCommit; i < calls.length; i++) {
      if (calls[i]!.contexts.length > 0) return commitReady(a, t)
    }
    return Effect.void
  })

/**
 * Inside `endStep`: the section of the done results not committed yet (none has contexts,
 * ids from `nextSync`; see `commitBeforeStepEnd`), or undefined.
 */
export const pendingResults = (
  a: AgentState,
  t: TurnState
): { readonly drafts: Array<EventDraft>; readonly apply: () => void } | undefined => {
  const calls = t.calls
  const nextSync = a.config.ids.nextSync
  if (calls === undefined || nextSync === undefined) return undefined
  let end = t.nextCommit
  while (end < calls.length && calls[end]!.phase === "done" && calls[end]!.contexts.length === 0) end++
  if (end === t.nextCommit) return undefined
  const ready = calls.slice(t.nextCommit, end)
  const ids = ready.map(() => flatten(nextSync()))
  return resultDrafts(a, t, ready, ids)
}

/** `n` fresh ids (flat strings), in one step when the generator has `nextSync`. */
const takeIds = (a: AgentState, n: number): Effect.Effect<ReadonlyArray<string>> => {
  const nextSync = a.config.ids.nextSync
  if (nextSync !== undefined) {
    return Effect.sync(() => {
      const ids = new Array<string>(n)
      for (let i = 0; i < n; i++) ids[i] = flatten(nextSync())
      return ids
    })
  }
  const next = a.config.ids.next
  return Effect.all(Array.from({ length: n }, () => next))
}

/**
 * Commits every uncommitted call in order as it stands (§6.4 truncation, §9 abort): with
 * `aborting`, a call not started gets `TOOL_ABORTED_BEFORE_DISPATCH` and a running one
 * `ABORTED`; a call never logged gets its `tool/call` first. No contexts are spliced (the calls
 * have none: an aborted or failed call's result drops them).
 */
export const commitAbortedCalls = (
  a: AgentState,
  t: TurnState,
  calls: ReadonlyArray<CallState>,
  aborting: boolean,
  why: "was canceled" | "failed" = "was canceled"
): Effect.Effect<void, SessionWriteError> =>
  Effect.gen(function*() {
    for (let i = t.nextCommit; i < calls.length; i++) {
      const call = calls[i]!
      if (call.phase === "committed") continue
      if (call.phase === "pending") {
        if (aborting) fail(call, "TOOL_ABORTED_BEFORE_DISPATCH", `The turn ${why} before this tool call started.`)
      } else if (call.phase === "running") {
        fail(call, "ABORTED", `The turn ${why} while this tool call was running.`)
      }
      if (!call.callLogged) {
        yield* commit(a, [{
          type: "tool/call",
          data: { turn: t.turn, step: t.step, callId: call.id, name: call.name, arguments: call.rawArguments }
        }], () => {
          call.callLogged = true
        })
      }
      const ids = yield* takeIds(a, 1)
      const { apply, drafts } = resultDrafts(a, t, [call], ids)
      yield* commit(a, drafts, apply)
    }
  })
