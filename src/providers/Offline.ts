/**
 * The offline model (§14): the default provider, deterministic, rule-based, no network.
 * It calls the built-in tools of `OfflineTools` when a prompt asks for them and otherwise says
 * what it received; its answers are played like a scripted response.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { splitWords } from "../internal/scripted.js"
import type { Message } from "../Message.js"
import type { ModelRequest, ModelService } from "../Model.js"
import { play, type ScriptedResponse } from "../ScriptedModel.js"

const describeSource = (source: { readonly kind: string; readonly [k: string]: unknown }): string => {
  switch (source.kind) {
    case "user":
      return "you"
    case "plugin":
      return `plugin:${String(source.plugin ?? "?")}`
    case "tool":
      return `tool:${String(source.callId ?? "?")}`
    case "hook":
      return `hook:${String(source.hook ?? "?")}`
    case "session-reference":
      return `session:${String(source.sessionId ?? "?")}`
    default:
      return source.kind
  }
}

const textOfBlocks = (content: ReadonlyArray<Message["content"][number]>): string =>
  content.map((b) => (b.type === "text" ? b.text : "")).filter((s) => s.length > 0).join("\n")

/** Quotes `s` on one line, cut to `max` code points (never inside a surrogate pair). */
const quote = (s: string, max = 60): string => {
  const chars = Array.from(s.replace(/\s+/g, " ").trim())
  return `"${chars.length > max ? chars.slice(0, max - 1).join("") + "…" : chars.join("")}"`
}

/**
 * What the offline model plans for one request: the tool calls it makes, or the text it says.
 *
 * @since 0.1.0
 * @category models
 */
export const plan = (request: ModelRequest): ScriptedResponse => {
  const messages = request.messages
  let start = messages.length
  while (start > 0 && messages[start - 1]!.role === "user") start--
  const fresh = messages.slice(start)
  const results = fresh.filter((m) => m.content.some((b) => b.type === "tool-result"))
  const others = fresh.filter((m) => !m.content.some((b) => b.type === "tool-result"))
  const lines: Array<string> = []
  for (const r of results) {
    for (const b of r.content) {
      if (b.type === "tool-result") {
        lines.push(`${b.isError ? "Tool error" : "Tool result"} (${b.toolCallId}): ${quote(textOfBlocks(b.content), 80)}`)
      }
    }
  }
  const direct = others.filter((m) => m.source.kind === "user")
  const tasks = others.filter((m) => m.source.kind === "subagent")
  const context = others.filter((m) => m.source.kind !== "user" && m.source.kind !== "subagent")
  if (others.length > 0) {
    const parts: Array<string> = []
    if (direct.length > 0) {
      parts.push(`${direct.length} from you (${direct.map((m) => quote(textOfBlocks(m.content))).join(", ")})`)
    }
    for (const m of tasks) parts.push(`a task from the parent session (${quote(textOfBlocks(m.content))})`)
    for (const m of context) parts.push(`context from ${describeSource(m.source)} (${quote(textOfBlocks(m.content))})`)
    lines.push(`I received ${others.length} message${others.length === 1 ? "" : "s"} in this step: ${parts.join("; ")}.`)
  }
  const call = nextOfflineCall(request)
  if (lines.length === 0 && call === undefined) lines.push("Nothing new to answer.")
  return call !== undefined
    ? { ...(lines.length > 0 ? { text: lines.join("\n") } : {}), toolCalls: [call] }
    : { text: lines.join("\n") }
}

/**
 * A request to delegate: "ask a sub-agent to TASK" (`subagent {prompt: TASK}`) or "ask a forked
 * sub-agent to TASK" (`subagent_fork`); "a", "the" or "your" before it, "have" or "let" for
 * "ask". The task is the rest of the message.
 */
const DELEGATE = /\b(?:ask|have|let)\s+(?:a|the|your)\s+(forked\s+)?sub-?agent\s+(?:to\s+)?(\S[\s\S]*)$/i

/**
 * A request for a tool by name: "call TOOL", "call TOOL with {JSON}" or "use the tool TOOL with
 * {JSON}" (backquotes around the name allowed). The JSON object is the shortest one that parses
 * from the `{` after "with", so that one message may ask for several calls.
 */
const CALL = /\b(?:call|use)\s+(?:the\s+)?(?:tool\s+)?\x60?([A-Za-z0-9_-]+)\x60?(\s+with\s*)?/gi

/**
 * The tool calls a text asks for by name (`CALL`), of the tools in `known`, each with its
 * position in the text: `{}` without JSON; a request whose JSON is not an object is none.
 */
const namedCalls = (
  text: string,
  known: ReadonlySet<string>
): Array<{ readonly at: number; readonly end: number; readonly name: string; readonly arguments: unknown }> => {
  const out: Array<{ at: number; end: number; name: string; arguments: unknown }> = []
  const pattern = new RegExp(CALL.source, CALL.flags)
  for (let m = pattern.exec(text); m !== null; m = pattern.exec(text)) {
    const name = m[1]!
    if (m[2] === undefined) {
      if (known.has(name)) out.push({ at: m.index, end: pattern.lastIndex, name, arguments: {} })
      continue
    }
    const start = pattern.lastIndex
    let parsed: unknown = undefined
    // "with" and then no object: a call it cannot make.
    if (text[start] !== "{") continue
    for (let end = text.indexOf("}", start); end >= 0; end = text.indexOf("}", end + 1)) {
      try {
        parsed = JSON.parse(text.slice(start, end + 1))
        pattern.lastIndex = end + 1
        break
      } catch {
        // Not yet a whole object: try the next closing brace.
      }
    }
    if (known.has(name) && typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
      out.push({ at: m.index, end: pattern.lastIndex, name, arguments: parsed })
    }
  }
  return out
}

/**
 * The tools the last direct message asks for (the user's, or a sub-agent's task from its parent,
 * §27), in the order of the text ("wait 2 seconds and tell me the time" → wait, then clock),
 * minus those already called since that message: the offline model runs them one step at a
 * time, so `clock` tells the time after the wait. A delegation ("ask a sub-agent to …") takes
 * the rest of the text as its task: what it asks for is the sub-agent's to do.
 */
const nextOfflineCall = (request: ModelRequest): { id: string; name: string; arguments: unknown } | undefined => {
  const messages = request.messages
  let last = -1
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (
      m.role === "user" && (m.source.kind === "user" || m.source.kind === "subagent") &&
      !m.content.some((b) => b.type === "tool-result")
    ) {
      last = i
      break
    }
  }
  if (last < 0) return undefined
  const known = new Set(request.tools.map((t) => t.name))
  let asked = textOfBlocks(messages[last]!.content)
  const wanted: Array<{ at: number; name: string; arguments: unknown }> = []
  const delegate = DELEGATE.exec(asked)
  const delegateTo = delegate === null ? undefined : delegate[1] === undefined ? "subagent" : "subagent_fork"
  if (delegate !== null && delegateTo !== undefined && known.has(delegateTo)) {
    wanted.push({ at: delegate.index, name: delegateTo, arguments: { prompt: delegate[2]!.trim() } })
    asked = asked.slice(0, delegate.index)
  }
  // Calls by name first; their text (a JSON argument may say "wait 2 seconds") is blanked out
  // for the rules below, its positions kept.
  for (const call of namedCalls(asked, known)) {
    wanted.push(call)
    asked = asked.slice(0, call.at) + " ".repeat(call.end - call.at) + asked.slice(call.end)
  }
  const wait = /\bwait\s+(\d+(?:\.\d+)?)\s*(?:s\b|secs?\b|seconds?\b)/i.exec(asked)
  if (wait && known.has("wait")) wanted.push({ at: wait.index, name: "wait", arguments: { seconds: Number(wait[1]) } })
  const time = /\b(what time|the time|time is it|clock)\b/i.exec(asked)
  if (time && known.has("clock")) wanted.push({ at: time.index, name: "clock", arguments: {} })
  const read = /\bread(?:\s+the)?\s+file\s+["'`]?([^\s"'`]+?)["'`]?(?=[\s,;!?]|\.?$)/i.exec(asked)
  if (read && known.has("read_file")) wanted.push({ at: read.index, name: "read_file", arguments: { path: read[1] } })
  wanted.sort((a, b) => a.at - b.at)
  let called = 0
  for (let i = last + 1; i < messages.length; i++) {
    const m = messages[i]!
    if (m.role === "assistant") { for (const b of m.content) if (b.type === "tool-call") called++ }
  }
  const next = wanted[called]
  return next === undefined
    ? undefined
    : { id: `call_${request.turn}_${request.step}_1`, name: next.name, arguments: next.arguments }
}

/**
 * The offline model's summary for a compaction (§17): an earlier summary it folds in, then
 * the direct prompts of the rendered conversation, quoted in order, and how many tool results and
 * context messages it held.
 */
const offlineSummary = (request: ModelRequest): string => {
  const text = request.messages.map((m) => textOfBlocks(m.content)).join("\n")
    .replace(/^<conversation>\n/, "").replace(/\n<\/conversation>[\s\S]*$/, "")
  const prompts: Array<string> = []
  const earlier: Array<string> = []
  let tools = 0
  let context = 0
  for (const p of text.split(/\n\n(?=\[)/)) {
    const body = p.replace(/^\[[^\]\n]*\]\n/, "")
    if (p.startsWith("[user]")) prompts.push(quote(body))
    else if (p.startsWith("[tool]")) tools++
    else if (p.startsWith("[context from plugin compact]")) earlier.push(body.replace(/^[^\n]*\n\n/, ""))
    else if (p.startsWith("[context from ")) context++
  }
  return (earlier.length > 0 ? `${earlier.join(" ")} Then: ` : "Earlier: ") +
    `${prompts.length} prompt${prompts.length === 1 ? "" : "s"} from you` +
    (prompts.length > 0 ? ` (${prompts.join(", ")})` : "") +
    `, ${tools} tool result${tools === 1 ? "" : "s"}, ${context} context message${context === 1 ? "" : "s"}.`
}

/**
 * The offline model (§14): deterministic, rule-based, no network. Asked to "wait N
 * seconds" it calls the `wait` tool; asked for the time it calls `clock`; asked to "read file
 * PATH" it calls `read_file`; asked to "call TOOL with {JSON}" (or "call TOOL") it calls any tool of the
 * request by that name, such as an MCP server's (§28); asked to "ask a sub-agent to TASK" it calls `subagent {prompt:
 * TASK}` ("a forked sub-agent": `subagent_fork`, §27), and a sub-agent's task (a message from
 * its parent session) it does as a prompt of its own; several requests in one message run one
 * step after another, in the order of the text. Its text reports each tool result it received (quoted, cut to 80
 * characters) and summarizes the other messages of this step (direct and context, by source). A compaction's summarization
 * request (`purpose: "compaction"`) gets a one-line summary quoting the earlier prompts. Tools it calls must be among the
 * request's tools (see `OfflineTools`). `wordDelayMs` spaces the text deltas (Effect `Clock`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options?: { readonly wordDelayMs?: number | undefined }): ModelService => ({
  provider: "offline",
  model: "offline-rules-1",
  respond: (request, sink) =>
    Effect.suspend(() => {
      const response = request.purpose === "compaction" ? { text: offlineSummary(request) } : plan(request)
      const words = response.text === undefined ? 0 : splitWords(response.text).length
      return play({ ...response, latencyMs: (options?.wordDelayMs ?? 0) * words }, sink)
    })
})
