/**
 * What the sub-agents an agent's calls run are doing (§27), for the live views: the chat
 * (`chat/ChatModel.ts`, kept outside React) and `acp` without the client's sub-agent sessions
 * (`acp/children.ts`). The parent's live events carry each child's events as
 * `{type: "subagent/event", sessionId, callId, event}` (a grandchild's wrapped twice), and this
 * keeps, for each child, one line of what it does now (`ChildLine`): `starting`, its step, the
 * last line of the text it streams, its running tool call, its result, a question it waits on, its
 * turn's end. A child's questions (§26) are returned as changes for the view's question list: the
 * parent lists them and answers them (`agent.approve`/`reject` decide a child's question). A
 * child's lines go when the call that runs it gets its result (its parent's `tool/result`, or for
 * a child of the watched agent `ended`). Nothing here is escaped: the view shows `text`
 * through `oneLine` (one line, bounded, escaped).
 */
import type { AgentEvent } from "../AgentEvent.js"
import type { TurnEndReason } from "../SessionEvent.js"
import * as TranscriptText from "../TranscriptText.js"

/**
 * What a sub-agent does now, under the call of the watched agent that runs it (`callId`) or runs
 * its ancestor: `depth` 1 for a child of the watched agent, 2 for a grandchild, …
 */
export interface ChildLine {
  readonly sessionId: string
  readonly callId: string
  readonly depth: number
  /** Raw: the view escapes and bounds it. */
  readonly text: string
}

/** A question a sub-agent asked (`asked`), or one decided in it (`decided`). */
export type ChildChange =
  | {
    readonly _tag: "asked"
    readonly id: string
    readonly sessionId: string
    readonly callId: string
    readonly toolName: string
    /** The call's arguments as logged (JSON text), or "" when the call was not seen. */
    readonly args: string
  }
  | { readonly _tag: "decided"; readonly id: string }

interface Child {
  readonly sessionId: string
  /** The session of the agent whose call runs it; undefined: the watched agent. */
  readonly parent: string | undefined
  /** Its call in `parent`'s log. */
  readonly callId: string
  /** The call of the watched agent under which it is shown. */
  readonly top: string
  readonly depth: number
  text: string
  /** The text streamed in its current step (a tail). */
  streamed: string
  /** Its calls without a result: name and arguments. */
  readonly calls: Map<string, { readonly name: string; readonly args: string }>
  /** Its open questions: the tool and call each asks about. */
  readonly questions: Map<string, { readonly toolName: string; readonly callId: string }>
}

/** How much streamed text a child keeps (its last line is shown). */
const STREAM_KEPT = 1024

type Wrapped = Extract<AgentEvent, { readonly type: "subagent/event" }>

const str = (value: unknown): string => (typeof value === "string" ? value : "")

/** The last line of `text` that has something on it (trimmed), or "". */
const lastLine = (text: string): string => {
  const lines = text.split("\n")
  for (let i = lines.length - 1; i >= 0; i--) if (lines[i]!.trim() !== "") return lines[i]!.trim()
  return ""
}

/** The first line of `text` that has something on it (trimmed), or "". */
const firstLine = (text: string): string => {
  for (const line of text.slice(0, 1024).split("\n")) if (line.trim() !== "") return line.trim()
  return ""
}

/** The text blocks of content (`{type: "text", text}`), joined. */
const textOf = (content: unknown): string =>
  Array.isArray(content)
    ? content.map((b) => (b?.type === "text" && typeof b.text === "string" ? b.text : "")).join("")
    : ""

/** The sub-agents of an agent and what each does now (see the module comment). */
export class Children {
  private readonly children = new Map<string, Child>()

  /** Applies one `subagent/event` of the watched agent; returns the question changes it makes. */
  apply(event: Wrapped): ReadonlyArray<ChildChange> {
    return this.applyAt(event, 1, undefined, event.callId)
  }

  /** The call `callId` of the watched agent got its result: its sub-agents are gone. */
  ended(callId: string): void {
    for (const child of [...this.children.values()]) {
      if (child.parent === undefined && child.callId === callId) this.remove(child.sessionId)
    }
  }

  /** Forgets every sub-agent (the watched agent's turn ended, or the agent stopped). */
  clear(): void {
    this.children.clear()
  }

  /** The lines to show, in the order the sub-agents started (a child before its own children). */
  lines(): ReadonlyArray<ChildLine> {
    const out: Array<ChildLine> = []
    for (const c of this.children.values()) {
      out.push({ sessionId: c.sessionId, callId: c.top, depth: c.depth, text: c.text })
    }
    return out
  }

  /** Whether any sub-agent is shown. */
  get size(): number {
    return this.children.size
  }

  private applyAt(event: Wrapped, depth: number, parent: string | undefined, top: string): ReadonlyArray<ChildChange> {
    let child = this.children.get(event.sessionId)
    if (child === undefined) {
      child = {
        sessionId: event.sessionId,
        parent,
        callId: event.callId,
        top,
        depth,
        text: "starting",
        streamed: "",
        calls: new Map(),
        questions: new Map()
      }
      this.children.set(child.sessionId, child)
    }
    const inner = event.event
    if (inner.type === "subagent/event" && !("seq" in inner)) {
      return this.applyAt(inner as Wrapped, depth + 1, child.sessionId, top)
    }
    return this.step(child, inner)
  }

  /** One event of `child`'s own. */
  private step(child: Child, event: AgentEvent): ReadonlyArray<ChildChange> {
    const data = ("data" in event ? event.data : undefined) as Record<string, unknown> | undefined
    switch (event.type) {
      case "step/start":
        child.streamed = ""
        child.text = `turn ${String(data?.turn)}, step ${String(data?.step)}`
        return []
      case "assistant/delta": {
        if (event.text === undefined || event.text === "") return []
        const all = child.streamed + event.text
        child.streamed = all.length > 2 * STREAM_KEPT ? all.slice(-STREAM_KEPT) : all
        const line = lastLine(child.streamed)
        if (line !== "") child.text = line
        return []
      }
      case "assistant/message": {
        child.streamed = ""
        const line = lastLine(textOf((data?.message as { readonly content?: unknown } | undefined)?.content))
        if (line !== "") child.text = line
        return []
      }
      case "tool/call": {
        const callId = str(data?.callId)
        const name = str(data?.name)
        const args = typeof data?.arguments === "string" ? data.arguments : JSON.stringify(data?.arguments ?? {})
        child.calls.set(callId, { name, args })
        child.text = `→ ${name}(${args})`
        return []
      }
      case "tool/result": {
        const message = data?.message as { readonly content?: ReadonlyArray<unknown> } | undefined
        const block = message?.content?.find((b) => (b as { readonly type?: unknown })?.type === "tool-result") as
          | { readonly toolCallId?: unknown; readonly content?: unknown; readonly isError?: unknown }
          | undefined
        const callId = str(block?.toolCallId)
        const name = child.calls.get(callId)?.name ?? "?"
        child.calls.delete(callId)
        const error = block?.isError === true || data?.error !== undefined
        child.text = `← ${name}${error ? " failed" : ""}: ${firstLine(textOf(block?.content ?? message?.content))}`
        // The sub-agents that call ran are done.
        for (const c of [...this.children.values()]) {
          if (c.parent === child.sessionId && c.callId === callId) this.remove(c.sessionId)
        }
        return []
      }
      case "approval/asked": {
        const id = str(data?.id)
        const callId = str(data?.callId)
        const toolName = str(data?.toolName)
        child.questions.set(id, { toolName, callId })
        child.text = `? ${toolName} awaiting approval`
        return [{ _tag: "asked", id, sessionId: child.sessionId, callId, toolName, args: child.calls.get(callId)?.args ?? "" }]
      }
      case "approval/decided": {
        const id = str(data?.id)
        const question = child.questions.get(id)
        child.questions.delete(id)
        const outcome = str(data?.outcome)
        // An allowed call runs now; a refused one gets its result next.
        const call = question === undefined ? undefined : child.calls.get(question.callId)
        child.text = call !== undefined && outcome.startsWith("allowed")
          ? `→ ${call.name}(${call.args})`
          : `? ${question?.toolName ?? "question"}: ${outcome}`
        return [{ _tag: "decided", id }]
      }
      case "turn/end":
        child.text = `turn ended: ${TranscriptText.reasonLabel((data?.reason ?? { kind: "unknown" }) as TurnEndReason)}`
        return []
      default:
        return []
    }
  }

  /** Forgets a sub-agent and its own sub-agents (whose questions were decided before their call ended). */
  private remove(sessionId: string): void {
    this.children.delete(sessionId)
    for (const c of [...this.children.values()]) if (c.parent === sessionId) this.remove(c.sessionId)
  }
}
