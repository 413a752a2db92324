/**
 * `agent-loop resume FILE [--continue-pending]`: repairs a session log after a crash and,
 * optionally, runs the work it left pending (§10).
 */
import { Args, Command, Options } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import { Console, Effect, Layer, Queue } from "effect"
import * as Agent from "../../Agent.js"
import * as IdGenerator from "../../IdGenerator.js"
import * as Inbox from "../../Inbox.js"
import { pendingSubagents, repairDrafts, subagentEnds, unrepairable, unrepairableMessage } from "../../internal/repair.js"
import { ownHeader } from "../../internal/store/common.js"
import { escapeLine } from "../../internal/terminalText.js"
import * as OfflineTools from "../../providers/OfflineTools.js"
import type { SessionEvent } from "../../SessionEvent.js"
import type * as SessionLog from "../../SessionLog.js"
import * as SessionStore from "../../SessionStore.js"
import { exit } from "../exit.js"
import { otlpOptions, withOtlp } from "../otlp.js"
import { compactionLayer, modelLayer, runOptions } from "../providerFlags.js"
import { oneLineLogger, watchAppends } from "../storeFailures.js"
import { askOption, checkAsk } from "./askFlag.js"
import { askLater, connectMcp, mcpConfigOption, readMcpServers } from "./mcpFlag.js"
import {
  CHILD_ASKED,
  exitCodeOf,
  idleOrAsked,
  lastTurnEnd,
  leaveAsked,
  livePrinter,
  openPending,
  questionLine,
  readLog,
  waitingMessage
} from "./shared.js"
import { subagentNames, subagentOptions, withSubagents } from "./subagentFlag.js"

/**
 * `resume FILE [--continue-pending]`: reopens a session log of ours after a crash (docs/design.md
 * §10): a torn tail is cut, an open last turn gets its synthetic closers (printed), and state is
 * rebuilt. With `--continue-pending` the work the log left pending (queued followups, steering)
 * runs, its transcript printed as it grows; exits with the code of the last turn's end reason.
 * Without it nothing runs (exit 0). With `--continue-pending`, a turn that waits for approval
 * (§26: a question the log left open, reopened, or one a call of a `--ask TOOL` asks) cannot be
 * answered here: the agent is released with its questions open, each printed on stderr, exit 5.
 * DSH v0 logs are refused (exit 2): we read them, we do not append to them; so is a log that breaks an invariant of §12 its closers cannot fix (one line
 * naming the first violation: its rule, seq and line; `check` lists them all). A log that needs no repair, with nothing pending to continue, is only read
 * (no writer lock), so that resume succeeds on a read-only file system. A sub-agent call the
 * crash cut short is closed from its child's log in the same directory (§27 rule 16; the child
 * repaired first when it had not finished). `--mcp-config FILE` connects the file's MCP servers
 * for the work that runs (§28; `mcpFlag.ts`); only with `--continue-pending` (repair runs none).
 */
export const resume = Command.make(
  "resume",
  {
    file: Args.text({ name: "FILE" }).pipe(Args.withDescription("a session log of ours: DIR/<id>.jsonl")),
    continuePending: Options.boolean("continue-pending").pipe(
      Options.withDescription("run the work the log left pending (queued followups, steering)")
    ),
    ...runOptions,
    ask: askOption,
    ...subagentOptions,
    mcpConfig: mcpConfigOption,
    ...otlpOptions
  },
  (options) =>
    Effect.gen(function*() {
      const model = yield* modelLayer(options)
      const compaction = yield* compactionLayer(options)
      const servers = yield* readMcpServers(options.mcpConfig)
      const toolNames = [...(yield* OfflineTools.all()).map((tool) => tool.name), ...subagentNames(options)]
      yield* checkAsk(options.ask, toolNames, askLater(servers))
      const path = yield* Path.Path
      const file = path.resolve(options.file)
      if (!file.endsWith(".jsonl")) return yield* exit(2, `${options.file}: not a session log (<id>.jsonl)`)
      const contents = yield* readLog(file, options.file)
      if (contents.header.version === 0) {
        return yield* exit(2, `${options.file}: a DSH v0 log is read here (transcript, check), never appended to`)
      }
      const directory = path.dirname(file)
      const id = path.basename(file, ".jsonl")
      const before = contents.events.length
      // Opening the log for writing cuts a torn last line (§3.1): said before what was appended.
      const size = contents.tornTail ? (yield* Effect.orDie((yield* FileSystem.FileSystem).stat(file))).size : 0
      const cut = contents.tornTail ? `cut a torn last line (${Number(size) - (contents.validBytes ?? 0)} bytes)` : ""
      const repairReport = (appended: ReadonlyArray<SessionEvent>) =>
        escapeLine(
          appended.length > 0
            ? `${options.file}: ${cut === "" ? "" : `${cut}, `}appended ${appended.map((e) => e.type).join(", ")}`
            : cut === ""
            ? `${options.file}: nothing to repair`
            : `${options.file}: ${cut}, nothing to append`
        )
      const store = watchAppends(SessionStore.layerJsonl({ directory }))
      const layers = Layer.mergeAll(model, compaction ?? Layer.empty, store.layer, IdGenerator.layer, oneLineLogger)
      const failures = {
        SessionStoreError: (e: SessionLog.SessionStoreError) => exit(2, `${options.file}: ${e.message}`),
        SessionLogError: (e: SessionLog.SessionLogError) => exit(2, e.message),
        SessionNotFound: (e: SessionLog.SessionNotFound) => exit(2, `${options.file}: ${e.message}`)
      }
      // A log that its closers cannot make valid (§12; edited by hand, say) is refused before it
      // is opened, so not even a torn tail is cut: `Agent.resume` and `Agent.repair` refuse it too.
      // Its sub-agent calls cut short are closed from their children's logs (§27 rule 16), read
      // here from the same directory without their writers, as repair will read them.
      const ends = yield* Effect.flatMap(
        SessionStore.SessionStore,
        (sessions) => subagentEnds(pendingSubagents(contents.events), sessions.read)
      ).pipe(
        Effect.provide(SessionStore.layerJsonl({ directory })),
        Effect.catchTags({ SessionStoreError: failures.SessionStoreError, SessionLogError: failures.SessionLogError })
      )
      const drafts = repairDrafts(contents.events, () => "", ends)
      const violation = unrepairable(contents.events, drafts, { header: contents.header })
      if (violation !== undefined) return yield* exit(2, unrepairableMessage(id, violation, contents.events.length))
      // A log that needs no repair (no torn tail, nothing to close, already ends with its
      // session/end-seed) and has nothing pending to continue is answered from the read above,
      // without opening it for writing: no lock is taken, so this works on a read-only file system.
      if (
        !contents.tornTail && drafts.length === 0 &&
        !(options.continuePending && Inbox.hasWakingWork(Inbox.replay(contents.events)))
      ) {
        yield* ownHeader(id, file, contents).pipe(Effect.catchTag("SessionLogError", failures.SessionLogError))
        yield* Console.log(`${options.file}: nothing to repair`)
        if (!options.continuePending) return
        // A turn waiting for a person (§26 rule 8): nothing here can answer it.
        const waiting = openPending(contents.events)
        if (waiting.length > 0) {
          for (const question of waiting) yield* Console.error(questionLine(question))
          return yield* exit(5, waitingMessage(file))
        }
        yield* Console.log("no queued followup or steering to run")
        return
      }
      if (!options.continuePending) {
        // Repair only: no agent, so nothing is disposed and pending work stays pending.
        const appended = yield* Agent.repair(id).pipe(Effect.provide(layers), Effect.catchTags(failures))
        yield* Console.log(repairReport(appended))
        return
      }
      const ran = yield* Effect.scoped(Effect.gen(function*() {
        // Before the agent: its scope closes first (the agent released, then the servers closed).
        const mcp = yield* connectMcp("resume", servers, options.ask, toolNames)
        const toolsets = mcp === undefined ? undefined : [mcp.toolset]
        const tools = withSubagents(yield* OfflineTools.all(), options, options.ask, toolsets)
        const agent = yield* Agent.resume(id, {
          tools,
          toolsets,
          maxSteps: options.maxSteps,
          continuePending: options.continuePending
        })
        // The repair, if any, is what was appended up to its `session/end-seed`.
        const tail = agent.log.events().slice(before)
        const seed = tail.findIndex((e) => e.type === "session/end-seed")
        const repaired = seed < 0 ? [] : tail.slice(0, seed + 1)
        yield* Console.log(repairReport(repaired))
        const print = livePrinter(() => agent.log.events().slice(before + repaired.length))
        yield* Effect.addFinalizer(() => print)
        const queue = yield* agent.subscribe
        yield* Effect.forkScoped(
          Effect.forever(Effect.flatMap(Queue.take(queue), (event) => ("seq" in event ? print : Effect.void)))
        )
        const end = yield* idleOrAsked(agent).pipe(Effect.onInterrupt(() => Effect.orDie(agent.cancel({ kind: "user" }))))
        if (end === "asked") {
          // Nobody here can answer: the question stays open in the log (§26 rule 8), a
          // sub-agent's cancels the turn.
          const left = yield* leaveAsked(agent)
          return { events: agent.log.events().slice(before + repaired.length), ...left }
        }
        if (agent.log.events().length === before + repaired.length) yield* Console.log("no queued followup or steering to run")
        return { events: agent.log.events().slice(before + repaired.length), waiting: [], cancelled: false }
      })).pipe(Effect.provide(layers), Effect.catchTags(failures))
      const failed = store.failure()
      if (failed !== undefined) return yield* exit(2, `${options.file}: cannot write the session log: ${failed.message}`)
      if (ran.waiting.length > 0) {
        for (const question of ran.waiting) yield* Console.error(questionLine(question))
        return yield* exit(5, ran.cancelled ? CHILD_ASKED : waitingMessage(file))
      }
      if (ran.events.length === 0) return
      const reason = lastTurnEnd(ran.events)
      const code = exitCodeOf(reason)
      if (reason?.kind === "error") yield* Console.error(escapeLine(`error: ${reason.error.code}: ${reason.error.message}`))
      if (code !== 0) return yield* exit(code)
    }).pipe(withOtlp("resume", options.otlpEndpoint))
).pipe(
  Command.withDescription("Resume a session log after a crash: repair, then optionally run what was pending (§10).")
)
