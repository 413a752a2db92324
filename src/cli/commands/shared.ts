/**
 * What several commands of the CLI share: the `--store` option, the exit code of a turn's end
 * reason, the transcript printers (whole and live), the readers of a session log and of a
 * price table that exit 2 with one line naming the problem, and the wait of `run` and `resume`
 * that ends when a question opens (§26), with the lines that say so.
 */
import { Options } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import { Console, Effect, Either, Option, Stream } from "effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import type * as Agent from "../../Agent.js"
import * as Approval from "../../Approval.js"
import { codeOf, fileErrorText } from "../../internal/fsErrors.js"
import { fileKind } from "../../internal/store/common.js"
import { makeDirectorySync } from "../../internal/store/directory.js"
import { escapeLine } from "../../internal/terminalText.js"
import * as Prices from "../../Prices.js"
import type { SessionEvent, TurnEndReason } from "../../SessionEvent.js"
import * as SessionStore from "../../SessionStore.js"
import * as Transcript from "../../Transcript.js"
import * as TranscriptText from "../../TranscriptText.js"
import { exit } from "../exit.js"

/**
 * `--store DIR`: the JSONL store of `run`, `chat`, `demo` and `acp`. A text option, checked by
 * `storeDirectory` (@effect/cli's own check of a path option dies on a path under a file).
 */
export const storeOption = Options.text("store").pipe(
  Options.withPseudoName("directory"),
  Options.withDefault(".agent-loop/sessions"),
  Options.withDescription("directory of the session logs (one <id>.jsonl per session)")
)

/**
 * The absolute path of `--store DIR`, made with its missing parents; when it cannot be (a file
 * on the way, a file system that refuses it, such as /proc), exit 2 with one line naming the
 * path at fault: `--store /proc/x: cannot create the directory: /proc does not take new
 * directories (ENOENT)`; so does one no file can be created in (`--store /proc: cannot create a
 * file in it: it does not take new files (ENOENT)`, `… read-only file system`).
 */
export const storeDirectory = (store: string) =>
  Effect.gen(function*() {
    if (store === "") return yield* exit(2, "--store: no directory given")
    const problem = makeDirectorySync(store)
    if (problem !== undefined) {
      return yield* exit(2, escapeLine(`--store ${store}: cannot create the directory: ${problem.reason}`))
    }
    const path = yield* Path.Path
    const directory = path.resolve(store)
    const refused = newFileProblem(path.join(directory, `.agent-loop-probe-${process.pid}`))
    if (refused !== undefined) return yield* exit(2, escapeLine(`--store ${store}: cannot create a file in it: ${refused}`))
    return directory
  })

/**
 * Why a new file cannot be made at `probe` (created, then removed), or `undefined` when it can:
 * a store a session log cannot be created in (/proc, a read-only mount) is refused before the
 * run, not when the session's lock file is opened.
 */
const newFileProblem = (probe: string): string | undefined => {
  try {
    NodeFs.closeSync(NodeFs.openSync(probe, "w"))
    NodeFs.unlinkSync(probe)
    return undefined
  } catch (e) {
    return codeOf(e) === "ENOENT" ? "it does not take new files (ENOENT)" : fileErrorText(e, "write")
  }
}

/** Exit code of a turn end reason (§14). */
export const exitCodeOf = (reason: TurnEndReason | undefined): number => {
  switch (reason?.kind) {
    case "blocked":
      return 3
    case "error":
      return 4
    case "aborted":
    case "interrupted":
      return 130
    default:
      return 0
  }
}

/** The end reason of the last `turn/end` of `events`, if any. */
export const lastTurnEnd = (events: ReadonlyArray<SessionEvent>): TurnEndReason | undefined => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!
    if (e.type === "turn/end") return (e.data as { reason: TurnEndReason }).reason
  }
  return undefined
}

/** Prints the transcript of `events` (rendered and escaped by `TranscriptText.render`). */
export const printTranscript = (events: ReadonlyArray<SessionEvent>) =>
  Console.log(TranscriptText.render(Transcript.fromEvents(events)).trimEnd())

/**
 * Prints the transcript of a live log as it grows: each call prints the lines that are new
 * since the last call (rendering is prefix-stable: appending events only appends lines). The
 * events go through one `Transcript.projector`, without its `end()`: a compaction still running
 * is printed once it ends, never as "no end in the log".
 */
export const livePrinter = (events: () => ReadonlyArray<SessionEvent>) => {
  let printed = 0
  let projected = 0
  const projector = Transcript.projector()
  const entries: Array<Transcript.Entry> = []
  return Effect.suspend(() => {
    const all = events()
    for (; projected < all.length; projected++) for (const entry of projector.push(all[projected]!)) entries.push(entry)
    const text = TranscriptText.render(entries).trimEnd()
    const lines = text === "" ? [] : text.split("\n")
    const fresh = lines.slice(printed)
    printed = lines.length
    return fresh.length === 0 ? Effect.void : Console.log(fresh.join("\n"))
  })
}

/**
 * Reads a log or exits 2 with the reader's message (naming the line). A file it cannot read is
 * named once, as given (`label`, default `file`), in the form of the other file errors:
 * `missing.jsonl: cannot read: no such file` (the reader's own message names the path it opened:
 * `cannot read /abs/missing.jsonl: no such file`).
 */
export const readLog = (file: string, label: string = file) =>
  SessionStore.readFile(file).pipe(
    Effect.catchTags({
      SessionStoreError: (e) => {
        const opened = `cannot read ${file}: `
        const why = e.message.startsWith(opened) ? `cannot read: ${e.message.slice(opened.length)}` : e.message
        return exit(2, `${label}: ${why}`)
      },
      SessionLogError: (e) => exit(2, e.message)
    })
  )

/** Reads and decodes a price table (`--prices`), or exits 2 naming the file and the problem. */
export const readPrices = (file: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(file).pipe(
      Effect.catchAll((e) => exit(2, `--prices ${file}: cannot read: ${fileErrorText(e, "read")}`))
    )
    if (info.type !== "File") return yield* exit(2, `--prices ${file}: cannot read: not a regular file (${fileKind(info.type)})`)
    const text = yield* fs.readFileString(file).pipe(
      Effect.catchAll((e) => exit(2, `--prices ${file}: cannot read: ${fileErrorText(e, "read")}`))
    )
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (e) {
      return yield* exit(2, escapeLine(`--prices ${file}: not JSON: ${e instanceof Error ? e.message : String(e)}`))
    }
    const decoded = Prices.decode(json)
    if (Either.isLeft(decoded)) {
      return yield* exit(2, `--prices ${file}: not a price table at ${decoded.left.path}: ${decoded.left.message}`)
    }
    return decoded.right
  })

/** `--instructions TEXT` and `--instructions-file PATH` of `run` and `chat`: the agent's system instructions. */
export const instructionsOptions = {
  instructions: Options.text("instructions").pipe(
    Options.optional,
    Options.withDescription("the agent's system instructions (sent to the model as the system prompt)")
  ),
  instructionsFile: Options.text("instructions-file").pipe(
    Options.optional,
    Options.withDescription("read the agent's system instructions from this UTF-8 file (instead of --instructions)")
  )
}

/**
 * The instructions that `--instructions` or `--instructions-file` give, `undefined` for neither.
 * Both, an unreadable file, something not a regular file, or empty instructions: exit 2 with
 * one line naming the flag.
 */
export const readInstructions = (options: {
  readonly instructions: Option.Option<string>
  readonly instructionsFile: Option.Option<string>
}) =>
  Effect.gen(function*() {
    if (Option.isSome(options.instructions) && Option.isSome(options.instructionsFile)) {
      return yield* exit(2, "--instructions and --instructions-file: give one of them, not both")
    }
    if (Option.isSome(options.instructions)) {
      if (options.instructions.value.trim() === "") return yield* exit(2, "--instructions: the instructions are empty")
      return options.instructions.value
    }
    if (Option.isNone(options.instructionsFile)) return undefined
    const file = options.instructionsFile.value
    const fs = yield* FileSystem.FileSystem
    // Stat first: opening a fifo blocks, and a device such as /dev/zero never ends.
    const info = yield* fs.stat(file).pipe(
      Effect.catchAll((e) => exit(2, escapeLine(`--instructions-file ${file}: cannot read: ${fileErrorText(e, "read")}`)))
    )
    if (info.type !== "File") {
      return yield* exit(2, escapeLine(`--instructions-file ${file}: cannot read: not a regular file (${fileKind(info.type)})`))
    }
    const text = yield* fs.readFileString(file).pipe(
      Effect.catchAll((e) => exit(2, escapeLine(`--instructions-file ${file}: cannot read: ${fileErrorText(e, "read")}`)))
    )
    if (text.trim() === "") return yield* exit(2, escapeLine(`--instructions-file ${file}: the file is empty`))
    return text
  })

/**
 * Waits until `agent` is idle (`"idle"`), or until a question is open (`"asked"`: its status is
 * `awaiting-approval`, §26 rule 5), which `run` and `resume` cannot answer: they release the
 * agent then, its question left open in the log for whoever answers it.
 */
export const idleOrAsked = (agent: Agent.Agent): Effect.Effect<"idle" | "asked"> =>
  Effect.raceFirst(
    Effect.as(agent.awaitIdle, "idle" as const),
    agent.statusChanges.pipe(
      Stream.filter((status) => status === "awaiting-approval"),
      Stream.runHead,
      Effect.flatMap((asked) => Option.isSome(asked) ? Effect.succeed("asked" as const) : Effect.never)
    )
  )

/**
 * What `run` and `resume` do once a question is open (`idleOrAsked` gave `"asked"`), where
 * nobody can answer it: the agent is released, its questions left open in the log (§26 rule 8).
 * A sub-agent's question cannot be left so: the child lives only inside its parent's call
 * (§27), so the turn is cancelled instead (cause `{kind:"no-approver"}`: the questions are
 * decided `cancelled`, the child's turn and the call end aborted), and `cancelled` is true.
 * `waiting`: the questions that were open.
 */
export const leaveAsked = (
  agent: Agent.Agent
): Effect.Effect<{ readonly waiting: ReadonlyArray<Approval.Pending>; readonly cancelled: boolean }> =>
  Effect.gen(function*() {
    const waiting = yield* agent.pendingApprovals
    if (waiting.some((q) => q.sessionId !== undefined)) {
      yield* Effect.ignore(agent.cancel({ kind: "no-approver" }))
      yield* agent.awaitIdle
      return { waiting, cancelled: true }
    }
    yield* Effect.ignore(agent.release)
    return { waiting, cancelled: false }
  })

/**
 * The exit line of `run` and `resume` when a sub-agent's call needed approval (exit 5, the turn
 * cancelled: `leaveAsked`).
 */
export const CHILD_ASKED =
  "a sub-agent's call needs approval, which nobody can give here; a sub-agent cannot be left waiting (it runs inside its parent's call), so the turn was cancelled (agent-loop chat and acp answer a sub-agent's questions)"

/**
 * The line of an open question, for `run`, `resume` and `pending`: `question ID: TOOL ARGS (call
 * CALL, turn T.S, asked ISO)`, with `, session ID` before `asked` for a sub-agent's question
 * (§27), the arguments as JSON cut to `ARGUMENTS_SHOWN` characters (with `…`), escaped.
 */
export const questionLine = (q: Approval.Pending): string =>
  escapeLine(
    `question ${q.id}: ${q.toolName} ${boundedJson(q.arguments)} (call ${q.callId}, turn ${q.turn}.${q.step}${
      q.sessionId === undefined ? "" : `, session ${q.sessionId}`
    }, asked ${new Date(q.askedAt).toISOString()})`
  )

/** How many characters of a question's arguments `questionLine` shows. */
const ARGUMENTS_SHOWN = 120

/** `value` as JSON on one line, cut to `ARGUMENTS_SHOWN` code points with `…`. */
const boundedJson = (value: unknown): string => {
  const text = Array.from(JSON.stringify(value) ?? "null")
  return text.length > ARGUMENTS_SHOWN ? `${text.slice(0, ARGUMENTS_SHOWN - 1).join("")}…` : text.join("")
}

/**
 * The exit line of `run` and `resume` when the turn waits for approval (exit 5): the session is
 * left waiting, its questions open in the log at `logPath` (`DIR/ID.jsonl`), and where they are
 * listed and answered.
 */
export const waitingMessage = (logPath: string | undefined): string => {
  const file = logPath ?? ""
  const directory = NodePath.dirname(file)
  const id = NodePath.basename(file, ".jsonl")
  return escapeLine(
    `the turn waits for approval: session ${id} is left waiting (agent-loop pending --store ${directory} lists its questions; agent-loop chat --store ${directory} --session ${id} answers them)`
  )
}

/**
 * The questions `events` leave open (`Approval.openQuestions`, §26), as `Approval.Pending`: the
 * arguments, turn and step from the call's `tool/call` (its arguments decoded from JSON, else
 * the raw text); a question whose call is not in the log gets `null` arguments and the turn and
 * step of the last `step/start` before it. `askedAt` is the time of its `approval/asked`.
 */
export const openPending = (events: ReadonlyArray<SessionEvent>): Array<Approval.Pending> => {
  const open = Approval.openQuestions(events)
  if (open.length === 0) return []
  const calls = new Map<string, { readonly turn: number; readonly step: number; readonly arguments: unknown }>()
  const stepAt = new Map<number, { readonly turn: number; readonly step: number }>()
  let step = { turn: 0, step: 0 }
  for (const event of events) {
    const data = event.data as { turn?: unknown; step?: unknown; callId?: unknown; arguments?: unknown } | null
    if (event.type === "step/start" && typeof data?.turn === "number" && typeof data.step === "number") {
      step = { turn: data.turn, step: data.step }
    } else if (event.type === "tool/call" && typeof data?.callId === "string") {
      calls.set(data.callId, {
        turn: Number(data.turn ?? step.turn),
        step: Number(data.step ?? step.step),
        arguments: decoded(data.arguments)
      })
    } else if (event.type === "approval/asked") stepAt.set(event.seq, step)
  }
  return open.map((q) => {
    const call = q.callId === undefined ? undefined : calls.get(q.callId)
    const at = call ?? stepAt.get(q.seq) ?? step
    return {
      id: q.id,
      toolName: q.toolName,
      callId: q.callId ?? "",
      arguments: call?.arguments ?? null,
      turn: at.turn,
      step: at.step,
      askedAt: q.time
    }
  })
}

/** A `tool/call`'s arguments: the JSON they encode, else the text as logged. */
const decoded = (text: unknown): unknown => {
  if (typeof text !== "string") return text ?? null
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}
