/**
 * What an agent shows while it runs (§5.2, §5.3): its status, and `agent.events`,
 * every durable event as it commits plus the live notifications that are not durable (inbox
 * insertions, claims and discards, status changes, model stream deltas, retries).
 *
 * @since 0.1.0
 */
import type { Message } from "./Message.js"
import type { SessionEvent } from "./SessionEvent.js"

/**
 * `"idle" | "running" | "awaiting-approval" | "stopped"` (§5.2). Status stays `running` across
 * the turns of one run; it is `awaiting-approval` while the run waits for a person: at least one
 * question about a tool call is open (§26 rule 5; the run is still going, the inbox keeps
 * working). `stopped` is final for this agent: its session log refused to close a turn (the store
 * failed every try of its closers, the log broke, or another writer fenced it; `agent.stopped`
 * gives the error). The agent writes nothing more; the session goes on in a new agent
 * (`Agent.resume`, which repairs the open turn, §10). A released agent is `idle`.
 *
 * @since 0.1.0
 * @category models
 */
export type AgentStatus = "idle" | "running" | "awaiting-approval" | "stopped"

/**
 * A live notification that is not a durable event (§4, §5.3): `agent/inbox/inserted`,
 * `agent/inbox/claimed` (with the turn), `agent/inbox/discarded` (ordinary removal, cancel,
 * dispose; never on a claim), `agent/status`, `assistant/delta` (one of `text`, `reasoning`,
 * `toolCall`), `assistant/retry` (a failed attempt's deltas are withdrawn; `attempt` ≥ 2),
 * `agent/disposed` (the last one: the agent is disposed and idle; `agent.events` ends after it),
 * `subagent/event` (an event of a sub-agent that a running call of this agent started, §27: its
 * session id, the call, and the child's event as its own `agent.events` has it; a child's own
 * sub-agents' events come wrapped twice), `tool/progress` (a running call's progress report,
 * `ToolContext.progress`, §8: the call, its turn and step, `progress` of `total` when known, and a
 * message).
 *
 * @since 0.1.0
 * @category models
 */
export type AgentNotification =
  | { readonly type: "agent/inbox/inserted"; readonly message: Message }
  | { readonly type: "agent/inbox/claimed"; readonly message: Message; readonly turn: number }
  | { readonly type: "agent/inbox/discarded"; readonly message: Message }
  | { readonly type: "agent/status"; readonly status: AgentStatus }
  | {
    readonly type: "assistant/delta"
    readonly turn: number
    readonly step: number
    readonly text?: string | undefined
    readonly reasoning?: string | undefined
    readonly toolCall?: { readonly id: string; readonly name: string; readonly arguments: string } | undefined
  }
  | { readonly type: "assistant/retry"; readonly turn: number; readonly step: number; readonly attempt: number }
  | { readonly type: "agent/disposed" }
  | { readonly type: "subagent/event"; readonly sessionId: string; readonly callId: string; readonly event: AgentEvent }
  | {
    readonly type: "tool/progress"
    readonly callId: string
    readonly turn: number
    readonly step: number
    readonly progress: number
    readonly total?: number
    readonly message?: string
  }

/**
 * What `agent.events` carries: every durable event as it commits (it has a `seq`), and the live
 * notifications (§5.3), in the order they happen.
 *
 * @since 0.1.0
 * @category models
 */
export type AgentEvent = SessionEvent | AgentNotification
