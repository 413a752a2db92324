/**
 * A session's sub-agents (§27) for an ACP client (§22), from the parent's live events: its own
 * `subagent/start` and `subagent/end`, and each child's events wrapped as `{type:
 * "subagent/event", sessionId, callId, event}` (a grandchild's twice). Two ways, by what the
 * client takes. Pure: no I/O, the SDK's types only.
 *
 * - **Sub-agent sessions** (the client advertises `clientCapabilities.subagents`, an unstable
 *   part of ACP v1 that the SDK pinned here, 2.4.0, has in its `schema.unstable.json`): each
 *   child is announced on its parent's session, at the parent's `subagent/start` (before any of
 *   the child's traffic, as ACP requires), with `subagent_update {sessionId: CHILD, title:
 *   label, cwd, state: {state: "running"}, _meta["agent-loop"] {callId, depth, provider}}`; its
 *   own events are sent on its own session as any session's (`updates.ts`: chunks, tool calls,
 *   results); `state` becomes `requires_action` while it waits for a person (its question is a
 *   `session/request_permission` on its session, `asking.ts`) and `running` after; at the
 *   parent's `subagent/end` it is `idle`, with the end's `stopReason` as ACP's (`completed` →
 *   `end_turn`, `max-tokens` → `max_tokens`, `blocked` → `refusal`, `aborted` → `cancelled`;
 *   `error`: none).
 * - **Otherwise** (the stable protocol): the child's progress is the content of the sub-agent's
 *   call in the parent's session, `tool_call_update {toolCallId, content: [one text block]}`,
 *   one line per running sub-agent under that call (`subagentProgress.ts`: `↳ sub-agent ID: what
 *   it does now`, a grandchild indented), sent when a line changes (streamed text is not sent
 *   word by word: its line changes with the child's next step, call or result), with
 *   `_meta["agent-loop"].subagents` `[{sessionId, depth, text}]`. The call's result replaces that
 *   content (`updates.ts`), as ACP's `content` is the whole collection.
 *
 * @since 0.1.0
 */
import type { SessionUpdate } from "@agentclientprotocol/sdk"
import type { SessionUpdate as UnstableSessionUpdate } from "@agentclientprotocol/sdk/unstable"
import type { AgentEvent } from "../../AgentEvent.js"
import type { SessionEvent } from "../../SessionEvent.js"
import { Children } from "../subagentProgress.js"
import { META_KEY } from "./replay.js"
import { projector as updatesProjector, type UpdateProjector } from "./updates.js"

/**
 * Options of `projector`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChildrenOptions {
  /** The parent session's working directory (the children's, §27). */
  readonly cwd: string
  /** The client takes sub-agent sessions (`offersSubagents`). */
  readonly sessions: boolean
  /** As `updates.ts`'s: a child's `usage_update.size`, and whether the client takes `compaction_update`. */
  readonly contextWindow?: number | undefined
  readonly compaction?: boolean | undefined
}

/**
 * One update to send, on the session it names.
 *
 * @since 0.1.0
 * @category models
 */
export interface Outgoing {
  readonly sessionId: string
  readonly update: SessionUpdate
}

/**
 * The projector: `push(event, following)` of each live event of the parent, in order, returns the
 * updates of its sub-agents (see the module comment); the parent's own updates are `updates.ts`'s.
 * `following` is the event after it when already at hand (the same batch of the subscription):
 * a child's `tool/call` whose question follows it in the child's log (committed with it, so
 * published with it, §26) gets no `in_progress` until a decision allows it, as a session's own.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChildrenProjector {
  readonly push: (event: AgentEvent, following?: AgentEvent | undefined) => ReadonlyArray<Outgoing>
}

/** The longest progress line sent, in code points. */
const LINE_MAX = 200

const NONE: ReadonlyArray<Outgoing> = Object.freeze([])

type Wrapped = Extract<AgentEvent, { readonly type: "subagent/event" }>

const isWrapped = (event: AgentEvent): event is Wrapped => event.type === "subagent/event" && !("seq" in event)

/** ACP's stop reason of a `subagent/end`'s `stopReason` (undefined: none to report). */
const stopReasonOf = (stopReason: unknown): string | undefined => {
  switch (stopReason) {
    case "completed":
      return "end_turn"
    case "max-tokens":
      return "max_tokens"
    case "blocked":
      return "refusal"
    case "aborted":
      return "cancelled"
    default:
      return undefined
  }
}

const cut = (text: string): string => {
  const chars = Array.from(text.replace(/\s+/g, " "))
  return chars.length > LINE_MAX ? `${chars.slice(0, LINE_MAX - 1).join("")}…` : chars.join("")
}

/**
 * Whether a client's `initialize` params offer sub-agent sessions: `clientCapabilities.subagents`
 * is an object (`{}` advertises support; absent or `null`, none). Read from the raw message: the
 * SDK's stable schema drops the field.
 *
 * @since 0.1.0
 * @category constructors
 */
export const offersSubagents = (params: unknown): boolean => {
  const capabilities = (params as { readonly clientCapabilities?: unknown } | null)?.clientCapabilities
  const subagents = (capabilities as { readonly subagents?: unknown } | null | undefined)?.subagents
  return typeof subagents === "object" && subagents !== null && !Array.isArray(subagents)
}

/**
 * A projector of the sub-agents of session `parentSession` (see the module comment).
 *
 * @since 0.1.0
 * @category constructors
 */
export const projector = (parentSession: string, options: ChildrenOptions): ChildrenProjector =>
  options.sessions ? sessionsProjector(parentSession, options) : contentProjector(parentSession)

/** With sub-agent sessions: announcements, states, and each child's own updates on its session. */
const sessionsProjector = (parentSession: string, options: ChildrenOptions): ChildrenProjector => {
  const children = new Map<string, { readonly updates: UpdateProjector; waiting: number }>()
  /** The child's event that follows the one being pushed, when it is at hand (`next` of its projector). */
  let peek: { readonly sessionId: string; readonly event: AgentEvent } | undefined
  const subagentUpdate = (
    on: string,
    update: Omit<Extract<UnstableSessionUpdate, { sessionUpdate: "subagent_update" }>, "sessionUpdate">
  ): Outgoing => ({
    sessionId: on,
    update: { sessionUpdate: "subagent_update", ...update } as unknown as SessionUpdate
  })
  /** An event of session `owner`'s own (the parent's, or a child's). */
  const own = (owner: string, event: AgentEvent): ReadonlyArray<Outgoing> => {
    const out: Array<Outgoing> = []
    if ("seq" in event && (event.type === "subagent/start" || event.type === "subagent/end")) {
      const data = (event as SessionEvent).data as Record<string, unknown>
      const id = typeof data.id === "string" ? data.id : undefined
      if (id === undefined) return NONE
      if (event.type === "subagent/start") {
        children.set(id, {
          updates: updatesProjector({
            cwd: options.cwd,
            isPrompt: () => false,
            contextWindow: options.contextWindow,
            compaction: options.compaction,
            next: (seq) =>
              peek !== undefined && peek.sessionId === id && "seq" in peek.event && peek.event.seq === seq + 1
                ? peek.event as SessionEvent
                : undefined
          }),
          waiting: 0
        })
        out.push(subagentUpdate(owner, {
          sessionId: id,
          ...(typeof data.label === "string" ? { title: data.label } : {}),
          cwd: options.cwd,
          state: { state: "running" },
          _meta: { [META_KEY]: { callId: data.callId, depth: data.depth, provider: data.provider } }
        }))
      } else {
        const stopReason = stopReasonOf(data.stopReason)
        out.push(subagentUpdate(owner, {
          sessionId: id,
          state: { state: "idle", ...(stopReason === undefined ? {} : { stopReason }) } as never
        }))
      }
    }
    if (owner === parentSession) return out
    const child = children.get(owner)
    if (child === undefined) return out
    for (const update of child.updates.push(event)) out.push({ sessionId: owner, update })
    if ("seq" in event && (event.type === "approval/asked" || event.type === "approval/decided")) {
      const before = child.waiting
      child.waiting = Math.max(0, child.waiting + (event.type === "approval/asked" ? 1 : -1))
      if ((before === 0) !== (child.waiting === 0)) {
        const parent = parentOf.get(owner) ?? parentSession
        out.push(
          subagentUpdate(parent, { sessionId: owner, state: { state: child.waiting > 0 ? "requires_action" : "running" } })
        )
      }
    }
    return out
  }
  /** Each child's parent session, from the wrapping. */
  const parentOf = new Map<string, string>()
  const push = (event: AgentEvent, owner: string = parentSession): ReadonlyArray<Outgoing> => {
    if (!isWrapped(event)) return own(owner, event)
    parentOf.set(event.sessionId, owner)
    return push(event.event, event.sessionId)
  }
  /** The innermost event of a wrapped one, with the session it is of. */
  const unwrap = (event: AgentEvent, owner: string): { readonly sessionId: string; readonly event: AgentEvent } =>
    isWrapped(event) ? unwrap(event.event, event.sessionId) : { sessionId: owner, event }
  return {
    push: (event, following) => {
      peek = following === undefined ? undefined : unwrap(following, parentSession)
      return push(event)
    }
  }
}

/** Without them: the progress of the sub-agents as the content of the parent's call that runs them. */
const contentProjector = (parentSession: string): ChildrenProjector => {
  const children = new Children()
  /** The last text sent for each call of the parent's. */
  const sent = new Map<string, string>()
  const innermost = (event: AgentEvent): AgentEvent => (isWrapped(event) ? innermost(event.event) : event)
  const push = (event: AgentEvent): ReadonlyArray<Outgoing> => {
    if (!isWrapped(event)) {
      if ("seq" in event && event.type === "tool/result") {
        // The call's result replaces its content: its sub-agents are done.
        const callId = (event.data as { readonly message?: { readonly source?: { readonly callId?: unknown } } }).message
          ?.source?.callId
        if (typeof callId === "string") {
          children.ended(callId)
          sent.delete(callId)
        }
      }
      return NONE
    }
    children.apply(event)
    if (innermost(event).type === "assistant/delta") return NONE
    const lines = children.lines().filter((line) => line.callId === event.callId)
    const text = lines.map((line) => `${"  ".repeat(line.depth - 1)}↳ sub-agent ${line.sessionId}: ${cut(line.text)}`).join(
      "\n"
    )
    if (text === "" || sent.get(event.callId) === text) return NONE
    sent.set(event.callId, text)
    return [{
      sessionId: parentSession,
      update: {
        sessionUpdate: "tool_call_update",
        toolCallId: event.callId,
        content: [{ type: "content", content: { type: "text", text } }],
        _meta: {
          [META_KEY]: {
            subagents: lines.map((line) => ({ sessionId: line.sessionId, depth: line.depth, text: cut(line.text) }))
          }
        }
      }
    }]
  }
  return { push }
}
