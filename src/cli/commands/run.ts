/**
 * `agent-loop run --prompt TEXT`: one followup on a new session of the JSONL store, its
 * transcript printed as the log grows; exits with the code of the turn's end reason (§14).
 */
import { Command, Options } from "@effect/cli"
import { Console, Effect, Layer, Queue } from "effect"
import * as Agent from "../../Agent.js"
import * as IdGenerator from "../../IdGenerator.js"
import { escapeLine } from "../../internal/terminalText.js"
import * as OfflineTools from "../../providers/OfflineTools.js"
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
  instructionsOptions,
  lastTurnEnd,
  leaveAsked,
  livePrinter,
  questionLine,
  readInstructions,
  storeDirectory,
  storeOption,
  waitingMessage
} from "./shared.js"
import { subagentNames, subagentOptions, withSubagents } from "./subagentFlag.js"

/**
 * `run --prompt TEXT`: one followup on a new session of the JSONL store. Prints the transcript
 * as the log grows (model retries on stderr), then the log's path, also when interrupted
 * (Ctrl-C cancels the turn first); exits with the code of the turn's end reason. With `--ask
 * TOOL`, a call of that tool asks for approval (§26), which nobody can give here: once a question
 * is open the agent is released (the question stays open in the log, the turn with it), each
 * open question is printed on stderr (`questionLine`), and it exits 5. `--subagent` and
 * `--subagent-fork` add the sub-agent tools (§27; `subagentFlag.ts`): the transcript shows each
 * child's start and end (`agent-loop transcript --follow-children` shows its own transcript).
 * `--mcp-config FILE` connects the file's MCP servers for the run (§28; `mcpFlag.ts`): their
 * tools are the agent's, and a call that asks for approval (their default) ends the run as
 * `--ask` does (exit 5).
 */
export const run = Command.make(
  "run",
  {
    prompt: Options.text("prompt").pipe(Options.withDescription("the prompt to send")),
    ...instructionsOptions,
    ...runOptions,
    ask: askOption,
    ...subagentOptions,
    mcpConfig: mcpConfigOption,
    ...otlpOptions,
    store: storeOption
  },
  (options) =>
    Effect.gen(function*() {
      if (options.prompt.trim() === "") return yield* exit(2, "--prompt: the prompt is empty")
      const instructions = yield* readInstructions(options)
      const servers = yield* readMcpServers(options.mcpConfig)
      const toolNames = [...(yield* OfflineTools.all()).map((tool) => tool.name), ...subagentNames(options)]
      yield* checkAsk(options.ask, toolNames, askLater(servers))
      const model = yield* modelLayer(options)
      const compaction = yield* compactionLayer(options)
      const directory = yield* storeDirectory(options.store)
      const store = watchAppends(SessionStore.layerJsonl({ directory }))
      let logPath: string | undefined
      const ran = yield* Effect.scoped(Effect.gen(function*() {
        // Before the agent: its scope closes first (the agent disposed, then the servers closed).
        const mcp = yield* connectMcp("run", servers, options.ask, toolNames)
        const toolsets = mcp === undefined ? undefined : [mcp.toolset]
        const tools = withSubagents(yield* OfflineTools.all(), options, options.ask, toolsets)
        const agent = yield* Agent.make({
          tools,
          toolsets,
          cwd: process.cwd(),
          maxSteps: options.maxSteps,
          instructions
        })
        logPath = agent.log.path
        const print = livePrinter(() => agent.log.events())
        // Runs on success and on Ctrl-C alike, before the agent is disposed.
        yield* Effect.addFinalizer(() =>
          Effect.zipRight(print, Console.log(`\nsession log: ${escapeLine(agent.log.path ?? agent.id)}`))
        )
        const queue = yield* agent.subscribe
        yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(queue), (event) =>
          event.type === "assistant/retry"
            ? Console.error(`retrying the model request (attempt ${(event as { attempt: number }).attempt})`)
            : "seq" in event
            ? print
            : Effect.void)))
        yield* agent.followup(options.prompt)
        const end = yield* idleOrAsked(agent).pipe(Effect.onInterrupt(() => Effect.orDie(agent.cancel({ kind: "user" }))))
        if (end === "idle") return { events: agent.log.events(), waiting: [], cancelled: false }
        // Nobody here can answer: the question stays open in the log (§26 rule 8), a sub-agent's
        // cancels the turn.
        const left = yield* leaveAsked(agent)
        return { events: agent.log.events(), ...left }
      })).pipe(
        Effect.provide(Layer.mergeAll(model, compaction ?? Layer.empty, store.layer, IdGenerator.layer, oneLineLogger)),
        Effect.catchTags({
          SessionStoreError: (e) => exit(2, `cannot write the session log: ${e.message}`),
          InvalidMessage: (e) => exit(2, `invalid prompt: ${e.message}`),
          DuplicateMessageId: (e) => exit(2, e.message),
          AgentDisposed: (e) => exit(2, e.message)
        })
      )
      // A turn that ended because its log could not be written is a store failure (exit 2).
      const failed = store.failure()
      if (failed !== undefined) return yield* exit(2, `cannot write the session log ${logPath ?? ""}: ${failed.message}`)
      if (ran.waiting.length > 0) {
        for (const question of ran.waiting) yield* Console.error(questionLine(question))
        return yield* exit(5, ran.cancelled ? CHILD_ASKED : waitingMessage(logPath))
      }
      const reason = lastTurnEnd(ran.events)
      const code = exitCodeOf(reason)
      if (reason?.kind === "error") yield* Console.error(escapeLine(`error: ${reason.error.code}: ${reason.error.message}`))
      if (code !== 0) return yield* exit(code)
    }).pipe(withOtlp("run", options.otlpEndpoint))
).pipe(Command.withDescription("Send one prompt and print the transcript (§14)."))
