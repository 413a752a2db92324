/**
 * The live events of an agent (§5.3) as ACP v1 `session/update` payloads (§22;
 * §22): a projector, pushed each event in the order `agent.subscribe` gives
 * them, returning the updates to send for it (most events give none). The durable events go
 * through the replay's projection with `live: true` (`replay.ts`), so that a live session and a
 * replayed one (`session/load`) look the same to the editor: user-role messages, tool calls and
 * their results, compactions. What only a live session has is here. Pure: no I/O, no SDK values
 * at run time (its types only).
 *
 * - `assistant/delta` text → `agent_message_chunk`, reasoning → `agent_thought_chunk`
 *   (`assistantChunk`). When the model streamed less than its logged response (a provider that
 *   does not stream), the rest is sent at `assistant/message`. A retried request's withdrawn
 *   deltas (`assistant/retry`) cannot be withdrawn from the client: the new attempt's text
 *   follows them.
 * - `assistant/message` that reported usage → `usage_update`: `used` = its input + output tokens
 *   (what the context holds after it), `size` = the context window given (`--context-window`),
 *   else 0 (unknown), `_meta["agent-loop"] = {usage, turn, step}` (the usage as logged).
 * - `tool/call` → `tool_call {status: "pending", …}` then `tool_call_update {status:
 *   "in_progress"}` (the call starts, §8); `tool/result` → `tool_call_update {status:
 *   "completed" | "failed", content, rawOutput}` (`replay.ts`). A call that waits for approval
 *   (§26: its `approval/asked` follows its `tool/call`) stays `pending` until a decision allows
 *   it, which sends its `in_progress`; a refused one gets only its `failed` result.
 * - `user/message` → `user_message_chunk`s with `_meta["agent-loop"] {messageId, source, via}`
 *   (`replay.ts`), except for a prompt the client sent with `session/prompt` (it shows those
 *   itself): so steering, injected context and tool contexts are shown as they enter a step.
 *
 * @since 0.1.0
 */
import type { SessionUpdate } from "@agentclientprotocol/sdk"
import type { AgentEvent, AgentNotification } from "../../AgentEvent.js"
import type { ContentBlock, UserMessage } from "../../Message.js"
import type { AssistantMessageData, SessionEvent } from "../../SessionEvent.js"
import { assistantChunk, META_KEY, projector as replayProjector } from "./replay.js"

/**
 * Options of `projector`.
 *
 * @since 0.1.0
 * @category models
 */
export interface UpdateOptions {
  /** The session's working directory: file tools' paths are resolved against it for `locations`. */
  readonly cwd: string
  /** Whether a message id is a prompt the client sent with `session/prompt` (not echoed back). */
  readonly isPrompt: (messageId: string) => boolean
  /** The model's context window in tokens (`usage_update.size`); undefined: 0, unknown. */
  readonly contextWindow?: number | undefined
  /** The client takes `compaction_update` (`clientCapabilities.session.compaction`). */
  readonly compaction?: boolean | undefined
  /**
   * The event that follows `seq` in the session's log, when it is written (the replay
   * projection's `next`): a call whose question follows its `tool/call` (§26) gets no
   * `in_progress` until a decision allows it.
   */
  readonly next?: ((seq: number) => SessionEvent | undefined) | undefined
  /** A call's title label of a tool (the replay projection's `toolLabel`: an MCP server's tools). */
  readonly toolLabel?: ((name: string) => string | undefined) | undefined
}

/**
 * The projector: `push(event)` returns the updates of that event, in order; `prime(event)` takes
 * a durable event shown otherwise (a loaded log, which `session/load` replays) for what later
 * events need of it, building no update (the replay projection's `prime`: the `via` of what is
 * still pending).
 *
 * @since 0.1.0
 * @category models
 */
export interface UpdateProjector {
  readonly push: (event: AgentEvent) => ReadonlyArray<SessionUpdate>
  readonly prime: (event: SessionEvent) => void
}

const NONE: ReadonlyArray<SessionUpdate> = Object.freeze([])

const textOfBlocks = (content: ReadonlyArray<ContentBlock>, kind: "text" | "reasoning"): string => {
  let out = ""
  for (const b of content) if (b.type === kind) out += b.text
  return out
}

/**
 * A projector of one session's live events to `session/update` payloads (see the module comment).
 *
 * @since 0.1.0
 * @category constructors
 */
export const projector = (options: UpdateOptions): UpdateProjector => {
  const durable = replayProjector({
    cwd: options.cwd,
    compaction: options.compaction,
    live: true,
    next: options.next,
    toolLabel: options.toolLabel
  })
  // What the current step streamed (text and reasoning deltas), to send only the rest at
  // `assistant/message` when the model streamed less than it logged.
  let streamKey = ""
  let streamedText = ""
  let streamedReasoning = ""

  const notification = (event: AgentNotification): ReadonlyArray<SessionUpdate> => {
    switch (event.type) {
      case "assistant/delta": {
        const key = `${event.turn}/${event.step}`
        if (key !== streamKey) {
          streamKey = key
          streamedText = ""
          streamedReasoning = ""
        }
        const out: Array<SessionUpdate> = []
        if (event.reasoning !== undefined && event.reasoning !== "") {
          streamedReasoning += event.reasoning
          out.push(assistantChunk("agent_thought_chunk", event.reasoning))
        }
        if (event.text !== undefined && event.text !== "") {
          streamedText += event.text
          out.push(assistantChunk("agent_message_chunk", event.text))
        }
        return out
      }
      case "assistant/retry":
        // The new attempt streams from its start again.
        streamKey = `${event.turn}/${event.step}`
        streamedText = ""
        streamedReasoning = ""
        return NONE
      default:
        return NONE
    }
  }

  /** The rest of a response its deltas did not stream, and its usage. */
  const response = (data: AssistantMessageData): ReadonlyArray<SessionUpdate> => {
    const key = `${data.turn}/${data.step}`
    const text = key === streamKey ? streamedText : ""
    const reasoning = key === streamKey ? streamedReasoning : ""
    streamKey = ""
    const out: Array<SessionUpdate> = []
    const content = data.message.content
    const fullReasoning = textOfBlocks(content, "reasoning")
    if (fullReasoning.length > reasoning.length && fullReasoning.startsWith(reasoning)) {
      out.push(assistantChunk("agent_thought_chunk", fullReasoning.slice(reasoning.length)))
    }
    const fullText = textOfBlocks(content, "text")
    if (fullText.length > text.length && fullText.startsWith(text)) {
      out.push(assistantChunk("agent_message_chunk", fullText.slice(text.length)))
    }
    const usage = data.usage
    if (usage !== undefined) {
      out.push({
        sessionUpdate: "usage_update",
        used: (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0),
        size: options.contextWindow ?? 0,
        _meta: { [META_KEY]: { usage, turn: data.turn, step: data.step } }
      })
    }
    return out
  }

  const push = (event: AgentEvent): ReadonlyArray<SessionUpdate> => {
    // Live notifications have no seq; durable events do (§5.3).
    if (!("seq" in event)) return notification(event as AgentNotification)
    const updates = durable.push(event as SessionEvent)
    if (event.type === "assistant/message") {
      const rest = response(event.data as AssistantMessageData)
      return updates.length === 0 ? rest : [...updates, ...rest]
    }
    // The chunks of a prompt the client sent itself are left out (they are the prompt's message).
    if (event.type === "user/message") {
      const id = (event.data as UserMessage).id
      if (options.isPrompt(id)) return updates.filter((u) => u.sessionUpdate !== "user_message_chunk" || u.messageId !== id)
    }
    return updates
  }
  return { push, prime: durable.prime }
}
