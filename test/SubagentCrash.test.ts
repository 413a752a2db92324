/**
 * A real crash while a sub-agent's tool call runs (§27 rule 16, §10): a child process
 * (`test/utils/subagentChild.mjs`) runs a parent on a JSONL store whose call hands a task to a
 * sub-agent; the sub-agent's tool starts (it appends a line to a file) and never returns, and the
 * test kills the process with SIGKILL. The parent is then resumed in this process (the library;
 * and the CLI's `check` and `resume`): the child, mid-turn, is repaired first, the parent's call
 * ends `unfinished_at_resume` with `TOOL_OUTCOME_UNKNOWN`, both logs are exact and valid, and
 * nothing runs again.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Layer, Schema } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import { main } from "../src/cli/main.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import type { SessionEvent } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Subagent from "../src/Subagent.js"
import * as Tool from "../src/Tool.js"
import { brief } from "./utils/agent.js"
import { CHILD_RUN_MS, KILLED_EXIT_MS, note } from "./utils/bounds.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const tmp = scratchDirs("agent-loop-subagent-crash-")

const linesOf = (file: string): Array<string> =>
  Fs.existsSync(file) ? Fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0) : []

/** The sub-agent tool as the child process has it (never run here: nothing is run again). */
const subagent = Subagent.tool({
  model: ScriptedModel.make([]),
  tools: [Tool.make({ name: "step", description: "", parameters: Schema.Struct({}), execute: () => Effect.die("ran again") })]
})

/**
 * Runs `subagentChild.mjs` in `directory` until the sub-agent's tool runs and its `tool/call` is
 * in the child's log, then kills it with SIGKILL. Returns the sub-agent's session id.
 */
const killedRun = (directory: string, runs: string) =>
  Effect.gen(function*() {
    const child = spawn(process.execPath, [Path.resolve("test/utils/subagentChild.mjs"), directory, runs], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
    let out = ""
    let err = ""
    child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()))
    child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString()))
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.on("exit", (code, signal) => resolve(signal ?? code))
    )
    /** The sub-agent's log file, once the parent's log names it. */
    const childFile = (): string | undefined => {
      const files = Fs.readdirSync(directory).filter((f) => f.endsWith(".jsonl") && f !== "p.jsonl")
      return files.length === 1 ? Path.join(directory, files[0]!) : undefined
    }
    const running = () => {
      const file = childFile()
      return linesOf(runs).length > 0 && file !== undefined && Fs.readFileSync(file, "utf8").includes("\"tool/call\"")
    }
    const started = Date.now()
    while (!running()) {
      if (Date.now() - started >= CHILD_RUN_MS) {
        return yield* Effect.die(new Error(`timed out waiting for the sub-agent's tool; stdout: ${out} stderr: ${err}`))
      }
      yield* Effect.sleep("20 millis")
    }
    note("SubagentCrash: the sub-agent's tool running (the process's start included)", Date.now() - started)
    child.kill("SIGKILL")
    const ended = yield* Effect.promise(() =>
      Promise.race([exited, new Promise<string>((resolve) => setTimeout(() => resolve("timeout"), KILLED_EXIT_MS))])
    )
    expect(ended).toBe("SIGKILL")
    expect(out).toMatch(/^returned \S+\n$/)
    expect(linesOf(runs)).toEqual(["step"])
    return Path.basename(childFile()!, ".jsonl")
  })

const ZERO = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 }

const dataOf = (events: ReadonlyArray<SessionEvent>, type: string): Array<any> =>
  events.filter((e) => e.type === type).map((e) => e.data)

/** What the crash left: the parent in its call, the sub-agent in its tool call. */
const expectCrashed = (parent: ReadonlyArray<SessionEvent>, child: ReadonlyArray<SessionEvent>) => {
  expect(brief(parent).slice(-3)).toEqual([
    "assistant subagent({\"prompt\":\"Count the files.\",\"description\":\"count files\"})",
    "tool/call c1 subagent",
    "subagent/start"
  ])
  expect(brief(child).slice(-2)).toEqual(["assistant step({})", "tool/call k1 step"])
}

/** What repair appended: the sub-agent's closers, then the parent's, the call unfinished. */
const expectRepaired = (
  parent: ReadonlyArray<SessionEvent>,
  child: ReadonlyArray<SessionEvent>,
  before: { readonly parent: number; readonly child: number },
  childId: string
) => {
  expect(brief(child.slice(before.child))).toEqual([
    "tool/result k1 TOOL_OUTCOME_UNKNOWN",
    "step/end 1.1",
    "turn/end 1 interrupted",
    "session/end-seed"
  ])
  const appended = parent.slice(before.parent)
  expect(brief(appended)).toEqual([
    "subagent/end",
    "tool/result c1 TOOL_OUTCOME_UNKNOWN",
    "step/end 1.1",
    "turn/end 1 interrupted",
    "session/end-seed"
  ])
  const start = dataOf(parent, "subagent/start")[0]
  expect(start).toEqual({
    runId: start.runId,
    provider: "spawn",
    id: childId,
    local: true,
    callId: "c1",
    depth: 1,
    label: "count files"
  })
  expect(dataOf(appended, "subagent/end")).toEqual([{
    runId: start.runId,
    provider: "spawn",
    id: childId,
    local: true,
    callId: "c1",
    stopReason: "unfinished_at_resume",
    reason: { kind: "interrupted" },
    // What the sub-agent spent (§27 rule 9): one scripted response, which reports no usage.
    usage: ZERO,
    byModel: { script: ZERO },
    unreported: 1
  }])
  const result = dataOf(appended, "tool/result")[0]
  expect(result.error).toEqual({ name: "OutcomeUnknown", code: "TOOL_OUTCOME_UNKNOWN" })
  expect(result.message.content[0].content).toEqual([{
    type: "text",
    text: `The session stopped while this call's sub-agent (session ${childId}) was working: it was interrupted by a ` +
      "crash before it finished, and its work must not be assumed complete. Check what it did before calling it again."
  }])
  // Repair events take the time of the event before them.
  expect(appended.every((e) => e.time === parent[before.parent - 1]!.time)).toBe(true)
}

/** Runs the CLI in this process; its exit code and output. */
const cli = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const base = yield* Console.consoleWith(Effect.succeed)
    const capture: Console.Console = {
      ...base,
      log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(args.map(String).join(" "))),
      error: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(args.map(String).join(" ")))
    }
    const code = yield* main(argv).pipe(Effect.withConsole(capture), Effect.provide(NodeContext.layer))
    return { code, out: out.join("\n") }
  })

describe("a process killed while its sub-agent's tool call runs (§27 rule 16)", () => {
  it.live("SIGKILL, then Agent.resume here: the sub-agent repaired first, the parent's call unfinished_at_resume; nothing runs again", () =>
    Effect.gen(function*() {
      const directory = tmp()
      const runs = Path.join(directory, "runs.txt")
      const childId = yield* killedRun(directory, runs)
      const parentFile = Path.join(directory, "p.jsonl")
      const childFile = Path.join(directory, `${childId}.jsonl`)
      const crashed = {
        parent: (yield* SessionStore.readFile(parentFile)).events,
        child: yield* SessionStore.readFile(childFile)
      }
      expectCrashed(crashed.parent, crashed.child.events)
      expect(crashed.child.header).toMatchObject({
        parentSession: "p",
        parentCallId: "c1",
        origin: "subagent",
        delegationDepth: 1
      })
      const layers = Layer.mergeAll(
        SessionStore.layerJsonl({ directory }),
        IdGenerator.layer,
        Model.layer(ScriptedModel.make([]))
      ).pipe(Layer.provideMerge(NodeFileSystem.layer))
      yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("p", { tools: [subagent] })
        expect(yield* agent.status).toBe("idle")
      })).pipe(Effect.provide(layers))
      const parent = yield* SessionStore.readFile(parentFile)
      const child = yield* SessionStore.readFile(childFile)
      expectRepaired(parent.events, child.events, {
        parent: crashed.parent.length,
        child: crashed.child.events.length
      }, childId)
      expect(Invariant.check(parent.events, { header: parent.header })).toEqual([])
      expect(Invariant.check(child.events, { header: child.header })).toEqual([])
      // A second resume appends nothing, here or in the sub-agent's log; nothing ran again.
      yield* Effect.scoped(Agent.resume("p", { tools: [subagent] })).pipe(Effect.provide(layers))
      expect((yield* SessionStore.readFile(parentFile)).events).toEqual(parent.events)
      expect((yield* SessionStore.readFile(childFile)).events).toEqual(child.events)
      expect(linesOf(runs)).toEqual(["step"])
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))

  it.live("SIGKILL, then agent-loop check and resume FILE: the same repair, from the CLI", () =>
    Effect.gen(function*() {
      const directory = tmp()
      const runs = Path.join(directory, "runs.txt")
      const childId = yield* killedRun(directory, runs)
      const parentFile = Path.join(directory, "p.jsonl")
      const childFile = Path.join(directory, `${childId}.jsonl`)
      const crashed = {
        parent: (yield* SessionStore.readFile(parentFile)).events,
        child: (yield* SessionStore.readFile(childFile)).events
      }
      expectCrashed(crashed.parent, crashed.child)
      expect(yield* cli(["check", parentFile])).toEqual({
        code: 0,
        out: `${parentFile}: ok (${crashed.parent.length} events; turn 1 is open: the agent stopped in it (a crash) or is ` +
          `still running it; resuming the session closes it (§10), closing its sub-agent call c1 (session ${childId}) ` +
          "from the child's log (§27))"
      })
      expect(yield* cli(["resume", parentFile])).toEqual({
        code: 0,
        out: `${parentFile}: appended subagent/end, tool/result, step/end, turn/end, session/end-seed`
      })
      const parent = yield* SessionStore.readFile(parentFile)
      const child = yield* SessionStore.readFile(childFile)
      expectRepaired(parent.events, child.events, { parent: crashed.parent.length, child: crashed.child.length }, childId)
      expect((yield* cli(["check", parentFile])).code).toBe(0)
      expect((yield* cli(["check", childFile])).code).toBe(0)
      expect(yield* cli(["resume", parentFile])).toEqual({ code: 0, out: `${parentFile}: nothing to repair` })
      expect(linesOf(runs)).toEqual(["step"])
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))
})
