/**
 * A real crash while a call waits for a person (§26 rule 8, §10): a child process
 * (`test/utils/approvalChild.mjs`) runs a session on a JSONL store whose model calls a tool that
 * needs approval; once the question is in the log the test kills the child with SIGKILL. The
 * session resumed in this process has the question open (status `awaiting-approval`,
 * `pendingApprovals` with the time it was asked), nothing appended; an approval continues the
 * same turn and step, and the tool runs exactly once (it appends a line to a file per run).
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as Approval from "../src/Approval.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Tool from "../src/Tool.js"
import { brief } from "./utils/agent.js"
import { CHILD_WAIT_MS, KILLED_EXIT_MS, note } from "./utils/bounds.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const tmp = scratchDirs("agent-loop-approval-crash-")

/** The child's tool, as it is there: each run appends its path to `runs`. */
const writeFile = (runs: string) =>
  Tool.make({
    name: "write_file",
    description: "writes a file",
    parameters: Schema.Struct({ path: Schema.String }),
    approval: "always",
    execute: ({ path }) => Effect.sync(() => Fs.appendFileSync(runs, `${path}\n`)).pipe(Effect.as({ content: `wrote ${path}` }))
  })

const linesOf = (file: string): Array<string> =>
  Fs.existsSync(file) ? Fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0) : []

describe("a process killed while a call waits for approval (§26 rule 8)", () => {
  it.live("SIGKILL after the question is logged: the resumed session has it open; approved, the tool runs once and the turn completes", () =>
    Effect.gen(function*() {
      const directory = tmp()
      const runs = Path.join(directory, "runs.txt")
      const file = Path.join(directory, "s.jsonl")
      const child = spawn(process.execPath, [Path.resolve("test/utils/approvalChild.mjs"), directory, runs], {
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
      /** Polls `ready` every 20 ms, for at most `ms`; how long it took. */
      const until = (ready: () => boolean, ms: number, what: string) =>
        Effect.gen(function*() {
          const started = Date.now()
          while (!ready()) {
            if (Date.now() - started >= ms) {
              return yield* Effect.die(new Error(`timed out waiting for ${what}; stdout: ${out} stderr: ${err}`))
            }
            yield* Effect.sleep("20 millis")
          }
          return Date.now() - started
        })
      const asked = () => Fs.existsSync(file) && Fs.readFileSync(file, "utf8").includes("\"approval/asked\"")
      note(
        "ApprovalCrash: the child's question in its log (its start included)",
        yield* until(asked, CHILD_WAIT_MS, "approval/asked")
      )
      child.kill("SIGKILL")
      const ended = yield* Effect.promise(() =>
        Promise.race([exited, new Promise<string>((resolve) => setTimeout(() => resolve("timeout"), KILLED_EXIT_MS))])
      )
      expect(ended).toBe("SIGKILL")
      expect(out).toMatch(/^returned \S+\n$/)
      expect(linesOf(runs)).toEqual([])

      const before = (yield* SessionStore.readFile(file)).events
      expect(brief(before).slice(-3)).toEqual([
        "assistant write_file({\"path\":\"NOTES.md\"})",
        "tool/call w write_file",
        `asked ${(before.at(-1)!.data as { id: string }).id} write_file w`
      ])
      const [question] = Approval.openQuestions(before)
      const layers = Layer.mergeAll(
        SessionStore.layerJsonl({ directory }),
        IdGenerator.layer,
        Model.layer(ScriptedModel.make([{ text: "done" }]))
      ).pipe(Layer.provideMerge(NodeFileSystem.layer))
      const resumed = yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("s", { tools: [writeFile(runs)] })
        // Repair appended nothing: the step stays open with its question.
        expect(agent.log.events().length).toBe(before.length)
        expect(yield* agent.status).toBe("awaiting-approval")
        expect(yield* agent.pendingApprovals).toEqual([
          {
            id: question!.id,
            toolName: "write_file",
            callId: "w",
            arguments: { path: "NOTES.md" },
            turn: 1,
            step: 1,
            askedAt: question!.time
          }
        ])
        yield* agent.approve(question!.id, { name: "ana" })
        yield* agent.awaitIdle
        expect(yield* agent.status).toBe("idle")
        return agent.log.events()
      })).pipe(Effect.provide(layers))
      expect(linesOf(runs)).toEqual(["NOTES.md"])
      expect(brief(resumed.slice(before.length))).toEqual([
        `decided ${question!.id} allowed-once by person:ana`,
        "tool/result w",
        "step/end 1.1",
        "step/start 1.2",
        "assistant done",
        "step/end 1.2",
        "turn/end 1 completed"
      ])
      // The file holds what the agent logged; it is valid, and a second resume runs nothing again.
      const after = (yield* SessionStore.readFile(file)).events
      expect(after).toEqual(resumed)
      expect(Invariant.check(after)).toEqual([])
      yield* Effect.scoped(Effect.gen(function*() {
        const agent = yield* Agent.resume("s", { tools: [writeFile(runs)] })
        expect(yield* agent.status).toBe("idle")
        expect(yield* agent.pendingApprovals).toEqual([])
      })).pipe(Effect.provide(layers))
      expect(linesOf(runs)).toEqual(["NOTES.md"])
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))
})
