/**
 * The CLI's approvals (§26), in-process through `main`: `--ask TOOL` (a `run` whose turn waits
 * for approval leaves its session waiting, exit 5; so does `resume --continue-pending` of it),
 * `pending` on a JSONL store (ours and the DSH fixtures), on a SQLite store beside the agent that
 * holds the session, and the argument checks of `send --approve/--reject`. The cluster's side
 * (`pending --pg`, `send --approve` after a failover) is in `CliCluster.test.ts`.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Layer, Schedule, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as Approval from "../src/Approval.js"
import { main } from "../src/cli/main.js"
import * as Model from "../src/Model.js"
import * as Offline from "../src/providers/Offline.js"
import * as SessionStore from "../src/SessionStore.js"
import * as SqlSessionStore from "../src/SqlSessionStore.js"
import * as Tool from "../src/Tool.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const DSH = Path.resolve(process.cwd(), "../shared/fixtures/dsh")

/** Runs the CLI in-process; returns exit code, stdout and stderr (lines joined). */
const cli = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const err: Array<string> = []
    const base = yield* Console.consoleWith(Effect.succeed)
    const capture: Console.Console = {
      ...base,
      log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(args.map(String).join(" "))),
      error: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void err.push(args.map(String).join(" ")))
    }
    const code = yield* main(argv).pipe(Effect.withConsole(capture), Effect.provide(NodeContext.layer))
    return { code, out: out.join("\n"), err: err.join("\n") }
  })

const tmpDir = scratchDirs("agent-loop-approval-")

/** The open questions of a log file. */
const openIn = (file: string) =>
  Effect.map(SessionStore.readFile(file), (c) => Approval.openQuestions(c.events)).pipe(Effect.provide(NodeContext.layer))

const iso = (ms: number) => new Date(ms).toISOString()

describe("agent-loop run --ask, resume and pending on a JSONL store", () => {
  it.effect(
    "a run whose turn asks leaves its session waiting (exit 5); pending lists it and not the idle one (text, --json, --session), also while a writer holds it; resume --continue-pending exits 5",
    () =>
      Effect.gen(function*() {
        const store = tmpDir()
        const asked = yield* cli(["run", "--ask", "read_file", "--prompt", "read file notes.txt", "--store", store])
        const [file] = Fs.readdirSync(store)
        const id = file!.slice(0, -".jsonl".length)
        const path = Path.join(store, file!)
        const [question] = yield* openIn(path)
        const line = `question ${question!.id}: read_file {"path":"notes.txt"} (call call_1_1_1, turn 1.1, asked ${
          iso(question!.time)
        })`
        const waiting =
          `the turn waits for approval: session ${id} is left waiting (agent-loop pending --store ${store} lists its questions; agent-loop chat --store ${store} --session ${id} answers them)`
        expect(asked).toEqual({
          code: 5,
          out: [
            "── turn 1 ──",
            "> read file notes.txt",
            "I received 1 message in this step: 1 from you (\"read file notes.txt\").",
            "→ read_file({\"path\":\"notes.txt\"})",
            "? read_file needs approval",
            `\nsession log: ${path}`
          ].join("\n"),
          err: `${line}\n${waiting}`
        })
        const idle = yield* cli(["run", "--prompt", "hello", "--store", store])
        expect(idle.code).toBe(0)
        const idleId = Fs.readdirSync(store).find((f) => f !== file && f.endsWith(".jsonl"))!.slice(0, -".jsonl".length)

        expect(yield* cli(["pending", "--store", store])).toEqual({ code: 0, out: `session ${id}: ${line}`, err: "" })
        const json = yield* cli(["pending", "--store", store, "--json"])
        expect([json.code, JSON.parse(json.out)]).toEqual([0, {
          sessionId: id,
          id: question!.id,
          toolName: "read_file",
          callId: "call_1_1_1",
          arguments: { path: "notes.txt" },
          turn: 1,
          step: 1,
          askedAt: question!.time
        }])
        expect(yield* cli(["pending", "--store", store, "--session", idleId])).toEqual({
          code: 0,
          out: `session ${idleId} does not wait for approval`,
          err: ""
        })
        expect(yield* cli(["pending", "--store", store, "--session", "nope"])).toEqual({
          code: 2,
          out: "",
          err: `pending: no session nope in ${store}`
        })

        // Beside a writer that holds the session (its lock): read only, the same answer.
        yield* Effect.scoped(Effect.gen(function*() {
          const jsonl = yield* SessionStore.makeJsonl({ directory: store })
          yield* jsonl.open(id)
          expect(Fs.existsSync(`${path}.lock`)).toBe(true)
          expect(yield* cli(["pending", "--store", store])).toEqual({ code: 0, out: `session ${id}: ${line}`, err: "" })
        }))

        // Nobody here can answer: the resume leaves it waiting too.
        expect(yield* cli(["resume", path, "--continue-pending"])).toEqual({
          code: 5,
          out: `${path}: nothing to repair`,
          err: `${line}\n${waiting}`
        })
        expect(yield* openIn(path)).toEqual([question])
        // check: valid, and the open turn is said to wait rather than to need closing.
        const events = (yield* Effect.provide(SessionStore.readFile(path), NodeContext.layer)).events.length
        expect(yield* cli(["check", path])).toEqual({
          code: 0,
          out:
            `${path}: ok (${events} events; turn 1 is open, waiting for approval (1 open question): resuming the session asks again and goes on (§26))`,
          err: ""
        })
      })
  )

  it.effect("pending on the DSH fixtures (their two questions are decided) and on an empty store: none; a store that is not one: exit 2", () =>
    Effect.gen(function*() {
      expect(yield* cli(["pending", "--store", DSH])).toEqual({ code: 0, out: "no session waits for approval", err: "" })
      expect(yield* cli(["pending", "--store", tmpDir(), "--json"])).toEqual({ code: 0, out: "", err: "" })
      const missing = Path.join(tmpDir(), "nope")
      expect(yield* cli(["pending", "--store", missing])).toEqual({
        code: 2,
        out: "",
        err: `--store ${missing}: cannot read: no such directory`
      })
      expect(yield* cli(["pending", "--store", DSH, "--sqlite", "x.db"])).toEqual({
        code: 2,
        out: "",
        err: "pending: give one of --store DIR, --sqlite FILE, --pg URL"
      })
    }))
})

describe("agent-loop pending --sqlite", () => {
  it.scopedLive("lists the question of a session whose agent is waiting and holds the session", () =>
    Effect.gen(function*() {
      const filename = Path.join(tmpDir(), "sessions.db")
      const clock = Tool.make({
        name: "clock",
        description: "Tell the time.",
        parameters: Schema.Struct({}),
        approval: "always",
        execute: () => Effect.succeed({ content: "noon" })
      })
      const context = yield* Layer.build(Layer.merge(SqlSessionStore.layerSqlite({ filename }), Model.layer(Offline.make())))
      const agent = yield* Agent.make({ sessionId: "s1", tools: [clock] }).pipe(Effect.provide(context))
      yield* agent.followup("what time is it")
      const [pending] = yield* agent.pendingApprovals.pipe(
        Effect.filterOrFail((open) => open.length === 1, () => "not asked yet"),
        Effect.retry({ schedule: Schedule.spaced("10 millis"), times: 1000 })
      )
      expect(yield* cli(["pending", "--sqlite", filename])).toEqual({
        code: 0,
        out: `session s1: question ${pending!.id}: clock {} (call call_1_1_1, turn 1.1, asked ${iso(pending!.askedAt)})`,
        err: ""
      })
      expect(yield* agent.status).toBe("awaiting-approval")
      expect(yield* cli(["pending", "--sqlite", Path.join(tmpDir(), "missing.db")])).toMatchObject({
        code: 2,
        err: expect.stringMatching(/^--sqlite .*missing\.db: cannot read: no such file$/)
      })
    }))
})

describe("agent-loop send --approve / --reject and --ask: bad arguments", () => {
  it.effect("exit 2 with one line, before anything connects", () =>
    Effect.gen(function*() {
      // A port nothing listens on: never reached, the arguments are refused first.
      const send = ["send", "--pg", "postgres://u:p@127.0.0.1:1/x", "--session", "s1"]
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
        [
          [...send, "--approve", "q1", "--followup", "hi"],
          "send: give exactly one of --followup TEXT, --steer TEXT, --inject TEXT, --approve QID, --reject QID"
        ],
        [
          [...send, "--approve", "q1", "--reject", "q1"],
          "send: give exactly one of --followup TEXT, --steer TEXT, --inject TEXT, --approve QID, --reject QID"
        ],
        [[...send, "--approve", " "], "send: --approve: the question id is empty"],
        [[...send, "--approve", "q1", "--wait"], "send: --wait goes with --followup, --steer or --inject, not --approve"],
        [
          [...send, "--reject", "q1", "--message-id", "m1"],
          "send: --message-id goes with --followup, --steer or --inject, not --reject"
        ],
        [[...send, "--approve", "q1", "--reason", "no"], "send: --reason goes with --reject"],
        [[...send, "--followup", "hi", "--always"], "send: --always goes with --approve or --reject"],
        [[...send, "--steer", "hi", "--name", "ana"], "send: --name goes with --approve or --reject"],
        [[...send, "--reject", "q1", "--name", ""], "send: --name: the name is empty"],
        [[...send, "--reject", "q1", "--reason", "  "], "send: --reason: the reason is empty"],
        [["run", "--prompt", "x", "--ask", "bash"], "--ask bash: no tool of that name (the tools are wait, clock, read_file)"],
        [
          ["runner", "--pg", "postgres://u:p@127.0.0.1:1/x", "--ask", "bash"],
          "--ask bash: no tool of that name (the tools are wait, clock, read_file)"
        ]
      ]
      for (const [argv, line] of cases) expect({ argv, ...(yield* cli(argv)) }).toEqual({ argv, code: 2, out: "", err: line })
    }))
})
