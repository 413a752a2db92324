/**
 * The live events of an agent (DESIGN.md §5.3) as ACP v1 `session/update` payloads (issue 17;
 * README "Editors (ACP)"): a projector, pushed each event in the order `agent.subscribe` gives
 * them, returning the updates to send for it (most events give none). Pure: no I/O, no SDK
 * values at run time (its types only), so that it is tested without a process.
 *
 * - `assistant/delta` text → `agent_message_chunk`, reasoning → `agent_thought_chunk`. When the
 *   model streamed less than its logged response (a provider that does not stream), the rest is
 *   sent at `assistant/message`. A retried request's withdrawn deltas (`assistant/retry`) cannot
 *   be withdrawn from the client: the new attempt's text follows them.
 * - `assistant/message`: one `tool_call` per tool call of the response (`toolCallId` = our call
 *   id, `status: "pending"`, `title`, `kind`, `name`, `rawInput` = the parsed arguments, or the raw
 *   text when they are not JSON; `locations` for `read_file`); then `usage_update` when the
 *   response reported usage: `used` = its input + output tokens (what the context holds after
 *   it), `size` = the context window given (`--context-window`), else 0 (unknown), and
 *   `_meta["effect-agent-loop"].usage` = the response's usage as logged.
 * - `tool/call` (the call starts, §8) → `tool_call_update {status: "in_progress"}` (a `tool_call`
 *   first for a call no response announced); `tool/result` → `tool_call_update {status:
 *   "completed" | "failed", content, rawOutput}`: `content` the result's text and images, and
 *   `rawOutput` `{content, error?}` (our blocks and the §8 error code).
 * - `user/message` of a message that is not a `session/prompt` prompt (the client shows those
 *   itself): steering, injected context, tool contexts → one `user_message_chunk` per text or
 *   image block, `messageId` = our message id, `_meta["effect-agent-loop"] = {source, delivery}`
 *   (`delivery` `"followup" | "steer" | "inject"` as its splice reads, §4).
 *
 * @since 0.1.0
 */
import type {
  ContentBlock as AcpContentBlock,
  SessionUpdate,
  ToolCallContent,
  ToolCallLocation,
  ToolKind
} from "@agentclientprotocol/sdk"
import * as NodePath from "node:path"
import type { AgentEvent, AgentNotification } from "../../AgentEvent.js"
import type { ContentBlock, UserMessage } from "../../Message.js"
import type { AssistantMessageData, SplicedData, ToolCallData, ToolResultData, Usage as LoggedUsage } from "../../SessionEvent.js"

/**
 * The key of our `_meta` entries (ACP reserves `_meta` for extensions; keys are namespaced).
 *
 * @since 0.1.0
 */
export const META_KEY = "effect-agent-loop"

/**
 * Options of `projector`.
 *
 * @since 0.1.0
 * @category models
 */
export interface UpdateOptions {
  /** The session's working directory: `read_file` paths are resolved against it for `locations`. */
  readonly cwd: string
  /** Whether a message id is a prompt the client sent with `session/prompt` (not echoed back). */
  readonly isPrompt: (messageId: string) => boolean
  /** The model's context window in tokens (`usage_update.size`); undefined: 0, unknown. */
  readonly contextWindow?: number | undefined
}

/**
 * The projector: `push(event)` returns the updates of that event, in order.
 *
 * @since 0.1.0
 * @category models
 */
export interface UpdateProjector {
  readonly push: (event: AgentEvent) => ReadonlyArray<SessionUpdate>
}

const NONE: ReadonlyArray<SessionUpdate> = Object.freeze([])

/** `[title, kind, locations]` of a tool call, from its name and parsed arguments. */
const describeCall = (
  cwd: string,
  name: string,
  args: unknown
): { readonly title: string; readonly kind: ToolKind; readonly locations?: Array<ToolCallLocation> } => {
  const field = (key: string): unknown =>
    typeof args === "object" && args !== null ? (args as Record<string, unknown>)[key] : undefined
  switch (name) {
    case "read_file": {
      const path = field("path")
      return typeof path === "string"
        ? { title: `Read ${path}`, kind: "read", locations: [{ path: NodePath.resolve(cwd, path) }] }
        : { title: "Read a file", kind: "read" }
    }
    case "wait": {
      const seconds = field("seconds")
      return { title: typeof seconds === "number" ? `Wait ${seconds} s` : "Wait", kind: "other" }
    }
    case "clock":
      return { title: "Tell the time", kind: "other" }
    default:
      return { title: name, kind: "other" }
  }
}

/** The parsed JSON arguments of a call, or its raw text when they are not JSON. */
const parseArguments = (raw: string): unknown => {
  if (raw.trim() === "") return {}
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

/** Our text and image blocks as ACP content blocks (other kinds have no ACP form here). */
const acpBlocks = (content: ReadonlyArray<ContentBlock>): Array<AcpContentBlock> => {
  const out: Array<AcpContentBlock> = []
  for (const b of content) {
    if (b.type === "text") out.push({ type: "text", text: b.text })
    else if (b.type === "image") out.push({ type: "image", data: b.data, mimeType: b.mediaType })
  }
  return out
}

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
  // What the current step streamed (text and reasoning deltas), to send only the rest at
  // `assistant/message` when the model streamed less than it logged.
  let streamKey = ""
  let streamedText = ""
  let streamedReasoning = ""
  // Calls announced with `tool_call` in the running turn (cleared at `turn/end`).
  const announced = new Set<string>()
  // How each pending inserted message was delivered (its splice), until it enters or is dropped.
  const deliveries = new Map<string, "followup" | "steer" | "inject">()

  const toolCall = (callId: string, name: string, rawArguments: string): SessionUpdate => {
    announced.add(callId)
    const rawInput = parseArguments(rawArguments)
    return {
      sessionUpdate: "tool_call",
      toolCallId: callId,
      name,
      status: "pending",
      rawInput,
      ...describeCall(options.cwd, name, rawInput)
    }
  }

  const usageUpdate = (data: AssistantMessageData): ReadonlyArray<SessionUpdate> => {
    const usage: LoggedUsage | undefined = data.usage
    if (usage === undefined) return NONE
    return [{
      sessionUpdate: "usage_update",
      used: (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0),
      size: options.contextWindow ?? 0,
      _meta: { [META_KEY]: { usage, turn: data.turn, step: data.step } }
    }]
  }

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
          out.push({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: event.reasoning } })
        }
        if (event.text !== undefined && event.text !== "") {
          streamedText += event.text
          out.push({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: event.text } })
        }
        return out
      }
      case "assistant/retry":
        // The new attempt streams from its start again.
        streamKey = `${event.turn}/${event.step}`
        streamedText = ""
        streamedReasoning = ""
        return NONE
      case "agent/inbox/discarded":
        deliveries.delete(event.message.id)
        return NONE
      default:
        return NONE
    }
  }

  const push = (event: AgentEvent): ReadonlyArray<SessionUpdate> => {
    // Live notifications have no seq; durable events do (§5.3).
    if (!("seq" in event)) return notification(event as AgentNotification)
    switch (event.type) {
      case "assistant/message": {
        const data = event.data as AssistantMessageData
        const key = `${data.turn}/${data.step}`
        const text = key === streamKey ? streamedText : ""
        const reasoning = key === streamKey ? streamedReasoning : ""
        streamKey = ""
        const out: Array<SessionUpdate> = []
        const content = data.message.content
        const fullReasoning = textOfBlocks(content, "reasoning")
        if (fullReasoning.length > reasoning.length && fullReasoning.startsWith(reasoning)) {
          out.push({
            sessionUpdate: "agent_thought_chunk",
            content: { type: "text", text: fullReasoning.slice(reasoning.length) }
          })
        }
        const fullText = textOfBlocks(content, "text")
        if (fullText.length > text.length && fullText.startsWith(text)) {
          out.push({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: fullText.slice(text.length) } })
        }
        for (const b of content) if (b.type === "tool-call") out.push(toolCall(b.id, b.name, b.arguments))
        for (const u of usageUpdate(data)) out.push(u)
        return out
      }
      case "tool/call": {
        const data = event.data as ToolCallData
        const out: Array<SessionUpdate> = []
        if (!announced.has(data.callId)) out.push(toolCall(data.callId, data.name, data.arguments))
        out.push({ sessionUpdate: "tool_call_update", toolCallId: data.callId, status: "in_progress" })
        return out
      }
      case "tool/result": {
        const data = event.data as ToolResultData
        const out: Array<SessionUpdate> = []
        for (const b of data.message.content) {
          if (b.type !== "tool-result") continue
          const content: Array<ToolCallContent> = acpBlocks(b.content).map((c) => ({ type: "content", content: c }))
          out.push({
            sessionUpdate: "tool_call_update",
            toolCallId: b.toolCallId,
            status: b.isError === true ? "failed" : "completed",
            content,
            rawOutput: data.error === undefined ? { content: b.content } : { content: b.content, error: data.error }
          })
        }
        return out
      }
      case "agent/inbox/spliced": {
        const data = event.data as SplicedData
        const delivery = data.target === "next-turn" ? "followup" : data.wake === true ? "steer" : "inject"
        for (const m of data.inserted) deliveries.set(m.id, delivery)
        return NONE
      }
      case "user/message": {
        const message = event.data as UserMessage
        const delivery = deliveries.get(message.id)
        deliveries.delete(message.id)
        if (options.isPrompt(message.id)) return NONE
        const meta = { [META_KEY]: delivery === undefined ? { source: message.source } : { source: message.source, delivery } }
        return acpBlocks(message.content).map((content): SessionUpdate => ({
          sessionUpdate: "user_message_chunk",
          content,
          messageId: message.id,
          _meta: meta
        }))
      }
      case "turn/end":
        announced.clear()
        return NONE
      default:
        return NONE
    }
  }
  return { push }
}
