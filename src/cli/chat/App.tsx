/**
 * The Ink view of `agent-loop chat` (§14). It only reads a `ChatModel` snapshot and
 * calls the plain callbacks of a `ChatController`; it never runs an effect.
 *
 * Layout, top to bottom: the transcript (Ink `<Static>`: printed once, then it scrolls into
 * the terminal's scrollback), then a live area redrawn on every change: the streaming text of
 * the current step, the running tool calls, the pending queue, the status line (a spinner and
 * the elapsed time while running; `compacting… (N tokens, reason)` while a compaction runs), the
 * input line and a line of key help. The live area is
 * kept shorter than the terminal (Ink repaints the whole screen when it is not).
 *
 * Keys: Tab after `@session:` completes a session id of the store (several matches: as far as
 * they agree, and they are listed); Enter sends (a followup when idle, a steer while running); Alt+Enter (ESC CR, what
 * terminals and tmux send for Meta+Return) queues a followup; Esc cancels the running turn
 * (while idle it clears the input line); Ctrl-C cancels the running turn too, and quits when idle or
 * pressed again before the turn has ended; ←/→, Home/End (Ctrl-A/Ctrl-E),
 * Backspace and Ctrl-U edit the line. Text that arrives in one chunk with line breaks (a paste,
 * or keys typed faster than the screen reads them) is sent line by line, as if Enter had been
 * pressed at each break.
 *
 * A running call shows its last progress report, when its tool sends them (an MCP server's, §28):
 * `⠋ → files__copy({…}) running 2.1s · 3/10 · copying b.txt`.
 *
 * A running sub-agent (§27) is shown under the call that runs it, one line each (a grandchild
 * indented under its parent): `↳ sub-agent 1a2b3c4d: → read_file({"path":"notes.txt"})`, what
 * it does now (its step, the last line of its text, its call, its result, its question), at
 * most `CHILD_TEXT` characters, escaped; at most a few such lines, then how many more.
 *
 * Approval questions (§26) are shown under their tool call, the first one with the answer keys;
 * a sub-agent's question names its session (`· sub-agent 1a2b3c4d`) and is answered the same way.
 * While one is open, a line that is only `y` (allow once), `a` (allow always), `n` (reject) or
 * `r` (reject always), sent with Enter, answers the first question that has no answer yet; `n`
 * and `r` then ask for a reason on the input line (`reason ›`: Enter sends it, an empty one
 * rejects without a reason; Esc goes back to the question). Any other line is sent as usual (a
 * steer: the turn is open), so typing never answers by accident: a message starts with a letter,
 * an answer is a letter alone.
 */
import { Box, type Key, Static, Text, useInput, useStdout } from "ink"
import { useEffect, useReducer, useRef, useState, useSyncExternalStore } from "react"
import type { ChildLine } from "../subagentProgress.js"
import {
  busy,
  type ChatModel,
  type Item,
  oneLine,
  type PendingItem,
  type Question,
  type RunningTool,
  type Snapshot
} from "./ChatModel.js"

/**
 * What the view may ask of the session: plain callbacks, each returning at once (the work is
 * queued on the Effect side, in order).
 */
export interface ChatController {
  /** A line typed by the user: a command (`/…`) or a message; `queue` for Alt+Enter. */
  readonly submit: (text: string, mode: "enter" | "queue") => void
  /** Esc: cancel the running turn. */
  readonly cancel: () => void
  /**
   * Answers approval question `id` (§26): allow (`always`: every later call of that tool in
   * the session) or reject (with an optional reason). A failure is shown as a notice.
   */
  readonly answer: (id: string, decision: Decision) => void
  /** Leave the chat with this exit code (Ctrl-C: 130). */
  readonly quit: (code: number) => void
  /**
   * The ids of the store's other sessions, for Tab completion after `@session:` (as last read;
   * each call also asks for a fresh read).
   */
  readonly sessionIds: () => ReadonlyArray<string>
}

/** A person's answer to an approval question (§26 rule 2: allowed-once, allowed-always, rejected, rejected-always). */
export type Decision =
  | { readonly kind: "allow"; readonly always: boolean }
  | { readonly kind: "reject"; readonly always: boolean; readonly reason?: string | undefined }

/** The answer keys, each a line of its own sent with Enter while a question is open. */
const ANSWER_KEYS = "y: once · a: always · n: reject · r: reject always (the letter + Enter)"

/** Props of `App`. */
export interface AppProps {
  readonly model: ChatModel
  readonly controller: ChatController
}

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

/** Re-renders every `ms` while `active` (spinner and elapsed time); returns the time now. */
const useNow = (active: boolean, ms: number): number => {
  const [now, setNow] = useState(Date.now)
  useEffect(() => {
    if (!active) return
    setNow(Date.now())
    const timer = setInterval(() => setNow(Date.now()), ms)
    return () => clearInterval(timer)
  }, [active, ms])
  return active ? now : Date.now()
}

const seconds = (ms: number): string => `${(Math.max(0, ms) / 1000).toFixed(1)}s`

/**
 * The end of `text` that fits in `max` rows of `columns` (a long line wraps onto several rows),
 * with a marker for what was cut.
 */
const lastRows = (text: string, max: number, columns: number): string => {
  const lines = text.split("\n")
  const height = (line: string) => Math.max(1, Math.ceil(line.length / columns))
  if (lines.reduce((rows, line) => rows + height(line), 0) <= max) return text
  // Cut: one row for the marker, the rest for the last lines that fit whole.
  let rows = 0
  let first = lines.length
  while (first > 0 && rows + height(lines[first - 1]!) <= max - 1) rows += height(lines[--first]!)
  const kept = first < lines.length ? lines.slice(first) : [lines[lines.length - 1]!.slice(-columns * (max - 1))]
  return ["… (cut)", ...kept].join("\n")
}

/** Prefixes the first line with `first` and the others with `rest`. */
const indent = (text: string, first: string, rest: string): string => first + text.split("\n").join("\n" + rest)

const TONE_COLOR = { ok: "green", warn: "yellow", error: "red" } as const

/** One transcript item (printed once). */
const ItemView = ({ item }: { readonly item: Item }) => {
  switch (item.kind) {
    case "turn":
      return <Text dimColor>{`── turn ${item.turn} ──`}</Text>
    case "user":
      return <Text color="cyan" bold>{indent(item.text, "> ", "> ")}</Text>
    case "context":
      return (
        <Text color="magenta">
          {indent(item.text, `[injected by ${item.label}, sent to the model as a user message] `, "  ")}
        </Text>
      )
    case "assistant":
      return (
        <Text>
          {item.text}
          {item.interrupted ? <Text color="yellow">{item.text === "" ? "[interrupted]" : " [interrupted]"}</Text> : null}
        </Text>
      )
    case "tool":
      return (
        <Box flexDirection="column">
          <Text color="blue">{indent(`${item.name}(${item.args})`, "→ ", "  ")}</Text>
          {item.result === undefined
            ? <Text dimColor>{"  ← (no result in the log)"}</Text>
            : (
              <Text color={item.isError ? "red" : "gray"}>
                {indent(item.result, item.isError ? "  ← error: " : "  ← ", "    ")}
              </Text>
            )}
        </Box>
      )
    case "turn-end":
      return <Text color={TONE_COLOR[item.tone]}>{`turn ${item.turn} ended: ${item.reason}`}</Text>
    case "compaction":
      return (
        <Box flexDirection="column">
          <Text color={TONE_COLOR[item.tone]}>{item.headline}</Text>
          {item.detail === undefined || item.detail === "" ? null : <Text dimColor>{`  ${item.detail}`}</Text>}
        </Box>
      )
    case "notice":
      return <Text color={item.tone === "ok" ? "gray" : TONE_COLOR[item.tone]}>{indent(item.text, "· ", "  ")}</Text>
  }
}

const QUEUE_COLOR = { followup: "cyan", steer: "yellow", context: "magenta" } as const

const PendingView = ({ pending, max }: { readonly pending: ReadonlyArray<PendingItem>; readonly max: number }) => {
  if (pending.length === 0) return null
  const shown = pending.slice(0, max)
  return (
    <Box flexDirection="column">
      <Text dimColor>{`pending (${pending.length}):`}</Text>
      {shown.map((p) => (
        <Text key={p.id} color={QUEUE_COLOR[p.queue]} wrap="truncate-end">
          {`  ${p.queue.padEnd(8)} ${p.direct ? "> " : `[${p.label}] `}${p.text.replace(/\n/g, " ⏎ ")}`}
        </Text>
      ))}
      {pending.length > max ? <Text dimColor>{`  … ${pending.length - max} more`}</Text> : null}
    </Box>
  )
}

/** The most characters of a sub-agent's line the chat shows (`oneLine`). */
const CHILD_TEXT = 120

/** A sub-agent's session id, shortened: its first 8 characters. */
const short = (sessionId: string): string => oneLine(sessionId, 8).replace(/…$/, "")

/** One sub-agent's line (see the module comment). */
const ChildView = ({ child }: { readonly child: ChildLine }) => (
  <Text color="gray" wrap="truncate-end">
    {`${"  ".repeat(child.depth)}↳ sub-agent ${short(child.sessionId)}: ${oneLine(child.text, CHILD_TEXT)}`}
  </Text>
)

/**
 * The running calls, each with the sub-agents it runs under it (at most `maxChildren` lines of
 * them in all; sub-agents of a call not shown come last).
 */
const ToolsView = (
  { frame, maxChildren, now, subagents, tools }: {
    readonly tools: ReadonlyArray<RunningTool>
    readonly subagents: ReadonlyArray<ChildLine>
    readonly maxChildren: number
    readonly now: number
    readonly frame: string
  }
) => {
  const shown = subagents.slice(0, maxChildren)
  const calls = new Set(tools.map((t) => t.callId))
  return (
    <>
      {tools.map((t) => (
        <Box key={t.callId} flexDirection="column">
          <Text color="blue" wrap="truncate-end">
            {`${frame} → ${t.name}(${t.args.replace(/\n/g, " ")}) running ${seconds(now - t.since)}${
              t.progress === undefined ? "" : ` · ${t.progress}`
            }`}
          </Text>
          {shown.filter((c) => c.callId === t.callId).map((c) => <ChildView key={c.sessionId} child={c} />)}
        </Box>
      ))}
      {shown.filter((c) => !calls.has(c.callId)).map((c) => <ChildView key={c.sessionId} child={c} />)}
      {subagents.length > maxChildren
        ? <Text dimColor>{`  … ${subagents.length - maxChildren} more sub-agents`}</Text>
        : null}
    </>
  )
}

/**
 * The open questions, each under its call: `? → clock({}) awaiting approval 2.1s`, then the
 * answer keys for the one they answer (the first without an answer sent), else what it waits for.
 */
const QuestionsView = (
  { max, now, questions }: { readonly questions: ReadonlyArray<Question>; readonly now: number; readonly max: number }
) => {
  const first = questions.find((q) => !q.answering)
  return (
    <>
      {questions.slice(0, max).map((q) => (
        <Box key={q.id} flexDirection="column">
          <Text color="yellow" wrap="truncate-end">
            {`? → ${q.toolName}(${q.args}) awaiting approval ${seconds(now - q.since)}${
              q.sessionId === undefined ? "" : ` · sub-agent ${short(q.sessionId)}`
            }`}
          </Text>
          <Text color={q === first ? "yellow" : "gray"} wrap="truncate-end">
            {q.answering
              ? "    answer sent"
              : q === first
              ? `    allow ${q.toolName}? ${ANSWER_KEYS}`
              : "    next, once the question above is answered"}
          </Text>
        </Box>
      ))}
      {questions.length > max ? <Text dimColor>{`  … ${questions.length - max} more questions`}</Text> : null}
    </>
  )
}

/** The session's tokens (and cost, with `--prices`) for the status line: ` · 3,375 tokens · $0.0005`. */
const spent = (snap: Snapshot): string =>
  ` · ${snap.tokens.toLocaleString("en-US")} tokens${snap.cost === undefined ? "" : ` · ${snap.cost}`}`

const StatusLine = ({ snap, now, frame }: { readonly snap: Snapshot; readonly now: number; readonly frame: string }) =>
  snap.status === "awaiting-approval"
    ? (
      <Text color="yellow">
        {`? awaiting approval (${snap.questions.length} question${snap.questions.length === 1 ? "" : "s"}) · turn ${snap.turn}${
          snap.step > 0 ? ` step ${snap.step}` : ""
        } · ${seconds(now - (snap.runningSince ?? now))}${spent(snap)}`}
      </Text>
    )
    : snap.compacting !== undefined
    ? (
      <Text color="yellow">
        {`${frame} compacting… (${snap.compacting.tokens} tokens, ${snap.compacting.reason})${
          snap.compacting.turn > 0 ? ` · turn ${snap.compacting.turn}` : ""
        } · ${seconds(now - (snap.runningSince ?? now))}`}
      </Text>
    )
    : snap.status === "running"
    ? (
      <Text color="yellow">
        {`${frame} running · turn ${snap.turn}${snap.step > 0 ? ` step ${snap.step}` : ""} · ${
          seconds(now - (snap.runningSince ?? now))
        }${spent(snap)}`}
      </Text>
    )
    : <Text color="green">{`● idle · session ${snap.sessionId}${spent(snap)}`}</Text>

/** The input line as code points (so that the cursor never splits a surrogate pair). */
interface Line {
  chars: Array<string>
  cursor: number
}

const emptyLine = (): Line => ({ chars: [], cursor: 0 })

/**
 * Applies one key to the input line; returns the lines it completed (to send, in order). `tab`
 * is called for each Tab inside a chunk of several keys.
 */
const edit = (line: Line, input: string, key: Key, tab: (line: Line) => void): ReadonlyArray<string> => {
  if (key.leftArrow) line.cursor = Math.max(0, line.cursor - 1)
  else if (key.rightArrow) line.cursor = Math.min(line.chars.length, line.cursor + 1)
  else if (key.home || (key.ctrl && input === "a")) line.cursor = 0
  else if (key.end || (key.ctrl && input === "e")) line.cursor = line.chars.length
  else if (key.ctrl && input === "u") {
    line.chars = []
    line.cursor = 0
  } else if (key.backspace || key.delete) {
    // Most terminals send DEL (0x7f) for Backspace, which Ink calls `delete`: both erase left.
    if (line.cursor > 0) {
      line.chars.splice(line.cursor - 1, 1)
      line.cursor--
    }
  } else if (
    !key.ctrl && !key.meta && !key.tab && !key.upArrow && !key.downArrow && !key.pageUp && !key.pageDown && input !== ""
  ) {
    // Several keys in one chunk (typed faster than the chat reads them, on a busy machine): each
    // line break is an Enter, each tab a Tab.
    const parts = input.split(/\r\n|\r|\n/)
    const sent: Array<string> = []
    parts.forEach((part, i) => {
      part.split("\t").forEach((text, j) => {
        if (j > 0) tab(line)
        // eslint-disable-next-line no-control-regex
        const clean = Array.from(text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ""))
        line.chars.splice(line.cursor, 0, ...clean)
        line.cursor += clean.length
      })
      if (i < parts.length - 1) {
        sent.push(line.chars.join(""))
        line.chars = []
        line.cursor = 0
      }
    })
    return sent
  }
  return []
}

/** The `@session:` prefix that ends right before the cursor, or undefined. */
const MENTION_BEFORE_CURSOR = /(?:^|[^A-Za-z0-9_])@session:([A-Za-z0-9._-]*)$/

const commonPrefix = (ids: ReadonlyArray<string>): string => {
  let prefix = ids[0] ?? ""
  for (const id of ids) while (!id.startsWith(prefix)) prefix = prefix.slice(0, -1)
  return prefix
}

/**
 * Tab after `@session:PREFIX`: completes the id when one session matches (and adds a space),
 * else as far as the matches agree; returns the hint to show (the matches, or that none does).
 */
const complete = (line: Line, ids: ReadonlyArray<string>): string | undefined => {
  const match = MENTION_BEFORE_CURSOR.exec(line.chars.slice(0, line.cursor).join(""))
  if (match === null) return undefined
  const prefix = match[1]!
  const matches = ids.filter((id) => id.startsWith(prefix))
  if (matches.length === 0) return `no session id starts with "${prefix}"`
  const insert = Array.from(commonPrefix(matches).slice(prefix.length) + (matches.length === 1 ? " " : ""))
  line.chars.splice(line.cursor, 0, ...insert)
  line.cursor += insert.length
  return matches.length === 1 ? undefined : `sessions: ${matches.slice(0, 12).join("  ")}${matches.length > 12 ? "  …" : ""}`
}

/** Clears the screen and its scrollback, the cursor to the top left. */
const CLEAR_ALL = "\u001b[2J\u001b[3J\u001b[H"

/**
 * Redraws everything when the terminal gets narrower; returns the key of the transcript's
 * `<Static>`, which changes then. A terminal that narrows splits every row longer than the new
 * width in two (tmux, VTE, iTerm all reflow), so Ink, which erases its last frame by counting
 * the rows it wrote, leaves the top rows of that frame on screen: fragments of the streaming text
 * and the status line, repeated at each resize. So the screen and its scrollback are cleared, and
 * a new `<Static>` prints the whole transcript again, then the live area: each line once.
 * (Wider is safe: the terminal joins no rows Ink ended with a line break.)
 */
const useRedrawOnNarrowing = (stdout: NodeJS.WriteStream): number => {
  const [key, setKey] = useState(0)
  useEffect(() => {
    let width = stdout.columns
    const resized = () => {
      const now = stdout.columns
      if (now > 0 && now < width) {
        stdout.write(CLEAR_ALL)
        setKey((k) => k + 1)
      }
      width = now
    }
    stdout.on("resize", resized)
    return () => {
      stdout.off("resize", resized)
    }
  }, [stdout])
  return key
}

/**
 * The chat screen. Reads the model with `useSyncExternalStore`; keeps the input line in a ref
 * (a key handler must see the text as the previous key left it, even within one batch).
 */
export const App = ({ controller, model }: AppProps) => {
  const snap = useSyncExternalStore(model.subscribe, model.getSnapshot)
  // Running, or waiting for a decision inside the turn: Enter steers, Esc and Ctrl-C cancel.
  const active = busy(snap.status)
  const now = useNow(active || snap.tools.length > 0 || snap.questions.length > 0, 100)
  const frame = SPINNER[Math.floor(now / 100) % SPINNER.length]!
  const line = useRef<Line>(emptyLine())
  const hint = useRef<string | undefined>(undefined)
  // Set by `n` or `r` on a question: the next line sent is the reason of that rejection.
  const reason = useRef<{ readonly id: string; readonly toolName: string; readonly always: boolean } | undefined>(undefined)
  const [, redraw] = useReducer((n: number) => n + 1, 0)
  const { stdout } = useStdout()
  const rows = stdout.rows > 0 ? stdout.rows : 24
  const columns = stdout.columns > 0 ? stdout.columns : 80
  const staticKey = useRedrawOnNarrowing(stdout)

  // Set by a Ctrl-C that canceled the running turn: another Ctrl-C before the agent is idle quits.
  const canceling = useRef(false)
  if (!active) canceling.current = false

  /** A line sent with Enter (`enter`) or Alt+Enter (`queue`): a reason, an answer, or input. */
  const send = (text: string, mode: "enter" | "queue") => {
    const rejecting = reason.current
    if (rejecting !== undefined) {
      reason.current = undefined
      const given = text.trim()
      controller.answer(rejecting.id, { kind: "reject", always: rejecting.always, reason: given === "" ? undefined : given })
      return
    }
    const letter = text.trim().toLowerCase()
    // Read now, not from the render: an answer sent earlier in this chunk has moved on the first question.
    const question = mode === "enter" && /^[yanr]$/.test(letter) ? model.firstQuestion() : undefined
    if (question === undefined) return controller.submit(text, mode)
    if (letter === "y" || letter === "a") return controller.answer(question.id, { kind: "allow", always: letter === "a" })
    reason.current = { id: question.id, toolName: question.toolName, always: letter === "r" }
  }

  useInput((input, key) => {
    // Two Ctrl-C in one read arrive as one input of two ETX characters.
    // eslint-disable-next-line no-control-regex
    const presses = key.ctrl && input === "c" ? 1 : /^\u0003+$/.test(input) ? input.length : 0
    if (presses > 0) {
      // As in other terminal agents: Ctrl-C cancels the running turn; a second one, or one while idle, quits.
      if (presses === 1 && busy(model.getSnapshot().status) && !canceling.current) {
        canceling.current = true
        hint.current = "canceling the turn · Ctrl-C again quits"
        controller.cancel()
        redraw()
      } else controller.quit(130)
      return
    }
    hint.current = undefined
    if (key.tab) {
      hint.current = complete(line.current, controller.sessionIds())
    } else if (key.return) {
      const text = line.current.chars.join("")
      line.current = emptyLine()
      send(text, key.meta ? "queue" : "enter")
    } else if (key.escape) {
      // Esc while a reason is asked goes back to the question (nothing is decided).
      if (reason.current !== undefined) {
        reason.current = undefined
        line.current = emptyLine()
      } else if (busy(model.getSnapshot().status)) controller.cancel()
      else line.current = emptyLine()
    } else {
      const tab = (l: Line) => (hint.current = complete(l, controller.sessionIds()))
      for (const text of edit(line.current, input, key, tab)) send(text, "enter")
    }
    redraw()
  })

  // The live area stays below the terminal's height: streaming text and the queue are cut.
  const pendingMax = Math.max(1, Math.min(6, rows - 14))
  const questionsMax = Math.max(1, Math.min(4, Math.floor((rows - 14) / 2)))
  const childrenMax = Math.max(1, Math.min(6, rows - 16))
  const streamMax = Math.max(
    2,
    rows - 12 - Math.min(snap.pending.length, pendingMax) - snap.tools.length -
      2 * Math.min(snap.questions.length, questionsMax) - Math.min(snap.children.length, childrenMax + 1)
  )
  const { chars, cursor } = line.current
  return (
    <>
      <Static key={staticKey} items={snap.items as Array<Item>}>
        {(item) => <ItemView key={item.key} item={item} />}
      </Static>
      <Box flexDirection="column">
        {snap.streaming !== undefined && snap.streaming.reasoning !== ""
          ? <Text dimColor italic>{lastRows(snap.streaming.reasoning, 3, columns)}</Text>
          : null}
        {snap.streaming !== undefined && snap.streaming.text !== ""
          ? <Text>{lastRows(snap.streaming.text, streamMax, columns)}</Text>
          : null}
        <ToolsView tools={snap.tools} subagents={snap.children} maxChildren={childrenMax} now={now} frame={frame} />
        <QuestionsView questions={snap.questions} now={now} max={questionsMax} />
        <PendingView pending={snap.pending} max={pendingMax} />
        <StatusLine snap={snap} now={now} frame={frame} />
        <Text>
          {reason.current !== undefined
            ? <Text color="red">{"reason › "}</Text>
            : <Text color={active ? "yellow" : "cyan"}>{active ? "steer › " : "› "}</Text>}
          {chars.slice(0, cursor).join("")}
          <Text inverse>{chars[cursor] ?? " "}</Text>
          {chars.slice(cursor + 1).join("")}
        </Text>
        <Text dimColor wrap="truncate-end">
          {hint.current !== undefined
            ? hint.current
            : reason.current !== undefined
            ? `Enter: reject ${reason.current.toolName}${
              reason.current.always ? " always" : ""
            } with this reason (empty: none) · Esc: back to the question`
            : snap.questions.length > 0
            ? "y, a, n or r + Enter: answer · other text: steer · Alt+Enter: queue a followup · Esc: cancel"
            : active
            ? "Enter: steer · Alt+Enter: queue a followup · Esc or Ctrl-C: cancel · /inject TEXT · /quit"
            : "Enter: send · /inject TEXT · /compact · /sessions · /quit · Ctrl-C: quit"}
        </Text>
      </Box>
    </>
  )
}
