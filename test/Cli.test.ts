import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Either, Layer, Logger } from "effect"
import { execFile, spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { exitCodeOf, main } from "../src/cli/main.js"
import * as IdGenerator from "../src/IdGenerator.js"
import { terminalConsole } from "../src/internal/terminalText.js"
import * as Invariant from "../src/Invariant.js"
import { UserMessage } from "../src/Message.js"
import * as Scenario from "../src/Scenario.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Simulator from "../src/Simulator.js"
import { CLI_RUN_MS } from "./utils/bounds.js"
import { textResponse } from "./utils/openaiResponses.js"
import { closedPort, replayServer } from "./utils/replayServer.js"
import { scratchDirs } from "./utils/scratchDirs.js"
import { mountRefused, remount, tmpfs } from "./utils/tmpfs.js"

const DSH = Path.resolve(process.cwd(), "../shared/fixtures/dsh")
const dshFiles = Fs.readdirSync(DSH).filter((f) => f.endsWith(".jsonl")).sort()

/** Runs the CLI in-process; returns exit code, stdout and stderr lines. */
const cli = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const err: Array<string> = []
    const base = yield* Console.consoleWith(Effect.succeed)
    const capture: Console.Console = {
      ...base,
      log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(args.map(String).join(" "))),
      info: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(args.map(String).join(" "))),
      error: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void err.push(args.map(String).join(" "))),
      warn: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void err.push(args.map(String).join(" ")))
    }
    const code = yield* main(argv).pipe(Effect.withConsole(capture), Effect.provide(NodeContext.layer))
    return { code, out: out.join("\n"), err: err.join("\n") }
  })

const tmpDir = scratchDirs("agent-loop-cli-")

describe("agent-loop transcript / check on DSH logs", () => {
  it.effect("transcript (text and --json) and check read every DSH fixture without crashing", () =>
    Effect.gen(function*() {
      for (const file of dshFiles) {
        const path = Path.join(DSH, file)
        const text = yield* cli(["transcript", path])
        expect([file, text.code]).toEqual([file, 0])
        const json = yield* cli(["transcript", path, "--json"])
        expect([file, json.code]).toEqual([file, 0])
        for (const line of json.out.split("\n").filter((l) => l.length > 0)) {
          expect([
            "user",
            "context",
            "assistant",
            "tool-call",
            "tool-result",
            "turn-end",
            "compaction",
            "checkpoint",
            "approval",
            "session",
            "subagent"
          ])
            .toContain(
              JSON.parse(line).kind
            )
        }
        const checked = yield* cli(["check", path])
        expect([file, checked.code, checked.out]).toEqual([file, 0, expect.stringContaining(": ok (")])
      }
    }), 120_000)

  it.effect("transcript --json of a DSH tool turn gives the §14 line shapes", () =>
    Effect.gen(function*() {
      const { code, out } = yield* cli(["transcript", Path.join(DSH, "acp__tool-call-turn__session.jsonl"), "--json"])
      expect(code).toBe(0)
      const lines = out.split("\n").map((l) => JSON.parse(l))
      expect(lines.map((l) => l.kind)).toEqual(["user", "context", "tool-call", "tool-result", "assistant", "turn-end"])
      expect(lines[2]).toEqual({
        kind: "tool-call",
        turn: 1,
        step: 1,
        callId: "call_00_Rn2Mz1y8uZN62ukEXiNO2077",
        name: "bash",
        arguments: "{\"command\": \"echo SNAPSHOT_OK\", \"description\": \"Run echo SNAPSHOT_OK\"}"
      })
      expect(lines[3]).toEqual({
        kind: "tool-result",
        turn: 1,
        step: 1,
        callId: "call_00_Rn2Mz1y8uZN62ukEXiNO2077",
        text: "SNAPSHOT_OK\n",
        isError: false
      })
      expect(lines[5]).toEqual({ kind: "turn-end", turn: 1, reason: { kind: "completed" } })
    }))

  it.effect("a malformed log line is a clear error naming the line (exit 2); a violation exits 1", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const bad = Path.join(dir, "bad.jsonl")
      Fs.writeFileSync(
        bad,
        "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"s\",\"createdAt\":0}\n" +
          "{\"type\":\"turn/start\",\"seq\":0,\"time\":0,\"data\":{\"turn\":1}}\n" +
          "not json at all\n" +
          "{\"type\":\"turn/end\",\"seq\":2,\"time\":0,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n"
      )
      const t = yield* cli(["transcript", bad])
      expect(t.code).toBe(2)
      expect(t.err).toContain(`${bad}, line 3: `)
      const c = yield* cli(["check", bad])
      expect(c.code).toBe(2)
      const violating = Path.join(dir, "violating.jsonl")
      Fs.writeFileSync(
        violating,
        "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"s\",\"createdAt\":0}\n" +
          "{\"type\":\"turn/start\",\"seq\":0,\"time\":0,\"data\":{\"turn\":1}}\n" +
          "{\"type\":\"turn/start\",\"seq\":1,\"time\":0,\"data\":{\"turn\":2}}\n"
      )
      const v = yield* cli(["check", violating])
      expect(v.code).toBe(1)
      expect(v.out).toMatch(/seq 1: rule 1: /)
      const missing = yield* cli(["check", Path.join(dir, "nope.jsonl")])
      expect(missing.code).toBe(2)
      expect(missing.err).toContain("nope.jsonl")
    }))
})

describe("agent-loop check / transcript on DSH v0 logs it cannot read", () => {
  const header = "{\"type\":\"session\",\"version\":0,\"id\":\"legacy\",\"createdAt\":1,\"delegationDepth\":0}"
  const opening = [
    header,
    "{\"type\":\"agent/inbox/spliced\",\"data\":{\"target\":\"next-turn\",\"start\":0,\"inserted\":[{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"source\":{\"kind\":\"user\"}}]}}",
    "{\"type\":\"turn/start\",\"data\":{\"turn\":1}}",
    "{\"type\":\"agent/inbox/spliced\",\"data\":{\"target\":\"next-turn\",\"start\":0,\"removedCount\":1,\"inserted\":[]}}",
    "{\"type\":\"step/start\",\"data\":{\"turn\":1,\"step\":1}}"
  ]
  const call =
    "{\"type\":\"tool/call\",\"data\":{\"turn\":1,\"step\":1,\"callId\":\"c1\",\"name\":\"bash\",\"arguments\":\"{}\"}}"
  const result = (block: string) =>
    `{"type":"tool/result","surfaceOp":"append","data":{"turn":1,"step":1,"message":{"id":"r1","role":"user","content":[${block}],"source":{"kind":"tool","callId":"c1"}}}}`
  type Case = readonly [label: string, lines: ReadonlyArray<string>, message: string]
  /** Each case's lines as a file: check, transcript and transcript --json exit 2 with one line naming it. */
  const refused = (cases: ReadonlyArray<Case>) =>
    Effect.gen(function*() {
      const dir = tmpDir()
      for (const [label, lines, message] of cases) {
        const file = Path.join(dir, "legacy.jsonl")
        Fs.writeFileSync(file, lines.join("\n") + "\n")
        for (const argv of [["check", file], ["transcript", file], ["transcript", file, "--json"]]) {
          expect([label, argv[0], yield* cli(argv)]).toEqual([label, argv[0], { code: 2, out: "", err: `${file}, ${message}` }])
        }
      }
    })

  it.effect("a missing log is named once, as given: FILE: cannot read: no such file (exit 2)", () =>
    Effect.gen(function*() {
      // Before, `missing.jsonl: cannot read missing.jsonl: no such file` (resume: the absolute path, twice).
      const missing = Path.relative(process.cwd(), Path.join(tmpDir(), "missing.jsonl"))
      for (const command of ["transcript", "check", "stats", "resume"]) {
        expect([command, yield* cli([command, missing])]).toEqual([command, {
          code: 2,
          out: "",
          err: `${missing}: cannot read: no such file`
        }])
      }
    }))

  it.effect("a legacy line the reader cannot read: exit 2 with one line naming it, no stack trace", () =>
    refused([
      [
        "user/message content a string",
        [
          ...opening,
          "{\"type\":\"user/message\",\"surfaceOp\":\"append\",\"data\":{\"id\":\"u1\",\"role\":\"user\",\"content\":\"hi\",\"source\":{\"kind\":\"user\"}}}"
        ],
        "line 6: unreadable DSH v0 \"user/message\" data: Expected ReadonlyArray<ContentBlock>, actual \"hi\" at .content"
      ],
      [
        "a packed row whose dt does not fit its texts",
        [...opening, "{\"type\":\"text-chunks\",\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[],\"texts\":[\"a\",\"b\"]}}"],
        "line 6: unreadable DSH v0 \"text-chunks\" row: dt must hold 1 gaps (one fewer than the elements)"
      ],
      [
        "a seq that is not the expanded index",
        [...opening, "{\"type\":\"step/end\",\"seq\":5,\"data\":{\"turn\":1,\"step\":1}}"],
        "line 6: \"step/end\" has seq 5 where 4 was expected"
      ]
    ]))

  it.effect("blocks without the fields the transcript reads are refused (the transcript crashed on them: TypeError, exit 1)", () =>
    Effect.gen(function*() {
      yield* refused([
        [
          "a text block without its text",
          [
            ...opening,
            "{\"type\":\"user/message\",\"surfaceOp\":\"append\",\"data\":{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\"}],\"source\":{\"kind\":\"user\"}}}"
          ],
          "line 6: unreadable DSH v0 \"user/message\" data: a \"text\" block needs a string \"text\" at .content[0]"
        ],
        [
          "a tool-result block without content",
          [...opening, call, result("{\"type\":\"tool-result\",\"toolCallId\":\"c1\"}")],
          "line 7: unreadable DSH v0 \"tool/result\" data: a \"tool-result\" block needs \"content\": an array of readable blocks at .message.content[0]"
        ],
        [
          "an assistant text block whose text is a number",
          [
            ...opening,
            "{\"type\":\"assistant/message\",\"surfaceOp\":\"append\",\"data\":{\"turn\":1,\"step\":1,\"message\":{\"id\":\"a1\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":5}],\"source\":{\"kind\":\"model\"}}}}"
          ],
          "line 6: unreadable DSH v0 \"assistant/message\" data: a \"text\" block needs a string \"text\" at .message.content[0]"
        ]
      ])
      // the same log with readable blocks (an image of DSH's shape kept as it is) passes
      const file = Path.join(tmpDir(), "fine.jsonl")
      Fs.writeFileSync(
        file,
        [
          ...opening,
          "{\"type\":\"user/message\",\"surfaceOp\":\"append\",\"data\":{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"},{\"type\":\"image\",\"attachment\":{\"id\":\"a\"}}],\"source\":{\"kind\":\"user\"}}}",
          call,
          result("{\"type\":\"tool-result\",\"toolCallId\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}")
        ].join("\n") + "\n"
      )
      expect(yield* cli(["check", file])).toEqual({
        code: 0,
        out:
          `${file}: ok (7 events; turn 1 is open: the agent stopped in it (a crash) or is still running it; resuming the session closes it (§10))`,
        err: ""
      })
      expect(yield* cli(["transcript", file])).toEqual({ code: 0, out: "── turn 1 ──\n> hi\n→ bash({})\n← ok", err: "" })
    }))
  it.effect("check on a log that stops inside a turn (a crash): ok, and it names the open turn", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const scenario = Path.join(dir, "s.json")
      Fs.writeFileSync(scenario, JSON.stringify({ model: [{ text: "ok" }], actions: [{ at: 0, followup: "hello" }] }))
      const log = Path.join(dir, "log.jsonl")
      expect((yield* cli(["simulate", scenario, "--out", log])).code).toBe(0)
      expect(yield* cli(["check", log])).toEqual({ code: 0, out: `${log}: ok (9 events)`, err: "" })
      // The log cut after its step/start, as a crash leaves it.
      const lines = Fs.readFileSync(log, "utf8").split("\n")
      const cut = lines.findIndex((l) => l.includes("\"type\":\"step/start\""))
      const crashed = Path.join(dir, "crashed.jsonl")
      Fs.writeFileSync(crashed, lines.slice(0, cut + 1).join("\n") + "\n")
      expect(yield* cli(["check", crashed])).toEqual({
        code: 0,
        out:
          `${crashed}: ok (${cut} events; turn 1 is open: the agent stopped in it (a crash) or is still running it; resuming the session closes it (§10))`,
        err: ""
      })
    }))
})

/** The pid of a process that has exited. */
const deadPid = () => spawnSync(process.execPath, ["-e", ""]).pid!

describe("agent-loop run", () => {
  it.effect("bad arguments exit 2", () =>
    Effect.gen(function*() {
      expect((yield* cli(["run"])).code).toBe(2)
      expect((yield* cli(["run", "--prompt", "x", "--frobnicate"])).code).toBe(2)
      expect((yield* cli(["run", "--prompt", "x", "--provider", "nope"])).code).toBe(2)
      const noUrl = yield* cli(["run", "--prompt", "x", "--provider", "openai-compat", "--model", "m"])
      expect(noUrl).toMatchObject({ code: 2, err: "--provider openai-compat needs --base-url URL" })
      const noKey = yield* cli([
        "run",
        "--prompt",
        "x",
        "--provider",
        "openai-compat",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:1/v1",
        "--api-key-env",
        "AGENT_LOOP_TEST_UNSET_KEY"
      ])
      expect(noKey).toMatchObject({
        code: 2,
        err: "--api-key-env: the environment variable AGENT_LOOP_TEST_UNSET_KEY is not set"
      })
      const keyItself = yield* cli([
        "run",
        "--prompt",
        "x",
        "--provider",
        "openai-compat",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:1/v1",
        "--api-key-env",
        "sk-proj-REALKEY123"
      ])
      expect(keyItself).toEqual({
        code: 2,
        out: "",
        err: "--api-key-env takes the NAME of an environment variable (letters, digits, _), not the key itself"
      })
      expect((yield* cli(["frobnicate"])).code).toBe(2)
      expect(yield* cli(["run", "--prompt", "  "])).toMatchObject({ code: 2, err: "--prompt: the prompt is empty" })
      expect(yield* cli(["run", "--prompt", "x", "--model", "m"])).toMatchObject({
        code: 2,
        err: "--base-url, --model and --api-key-env need --provider openai-compat, anthropic or openai"
      })
      expect(yield* cli(["run", "--prompt", "x", "--provider", "anthropic"])).toMatchObject({
        code: 2,
        err: "--provider anthropic needs --model NAME"
      })
      const saved = { key: process.env.ANTHROPIC_API_KEY, url: process.env.ANTHROPIC_BASE_URL }
      delete process.env.ANTHROPIC_API_KEY
      delete process.env.ANTHROPIC_BASE_URL
      try {
        expect(yield* cli(["run", "--prompt", "x", "--provider", "anthropic", "--model", "claude-sonnet-4-5"])).toMatchObject({
          code: 2,
          err: "--provider anthropic needs an API key: set ANTHROPIC_API_KEY or pass --api-key-env VAR"
        })
        expect(yield* cli(["run", "--prompt", "x", "--provider", "anthropic", "--model", "m", "--base-url", "nope"]))
          .toMatchObject({
            code: 2,
            err: "--base-url: not a URL: nope"
          })
      } finally {
        if (saved.key !== undefined) process.env.ANTHROPIC_API_KEY = saved.key
        if (saved.url !== undefined) process.env.ANTHROPIC_BASE_URL = saved.url
      }
      expect(
        yield* cli(["run", "--prompt", "x", "--provider", "openai-compat", "--model", "m", "--base-url", "ftp://127.0.0.1/v1"])
      )
        .toMatchObject({ code: 2, err: "--base-url: only http and https URLs are supported, not ftp:" })
      expect(yield* cli(["run", "--prompt", "x", "--max-steps", "0"])).toMatchObject({
        code: 2,
        err: "--max-steps: must be at least 1"
      })
    }))

  it.effect("compaction flags: a value that is not a positive integer, a reserve not below the window, a flag without --context-window: exit 2 naming it", () =>
    Effect.gen(function*() {
      const store = tmpDir()
      const run = (...flags: ReadonlyArray<string>) => cli(["run", "--prompt", "x", "--store", store, ...flags])
      for (const value of ["0", "-5", "1.5", "12k", "", "99999999999999999999"]) {
        expect(yield* run("--context-window", value)).toEqual({
          code: 2,
          out: "",
          err: `--context-window: not a positive integer (tokens): ${JSON.stringify(value)}`
        })
      }
      expect(yield* run("--context-window", "1000", "--keep-recent-tokens", "none")).toEqual({
        code: 2,
        out: "",
        err: "--keep-recent-tokens: not a positive integer (tokens): \"none\""
      })
      expect(yield* run("--context-window", "1000", "--compaction-reserve", "0")).toEqual({
        code: 2,
        out: "",
        err: "--compaction-reserve: not a positive integer (tokens): \"0\""
      })
      expect(yield* run("--context-window", "1000", "--compaction-reserve", "1000")).toEqual({
        code: 2,
        out: "",
        err: "--compaction-reserve: 1000 must be less than --context-window 1000 (it is the part of the window kept free)"
      })
      expect(yield* run("--compaction-reserve", "100")).toEqual({
        code: 2,
        out: "",
        err: "--compaction-reserve needs --context-window N"
      })
      expect(yield* run("--keep-recent-tokens", "100")).toEqual({
        code: 2,
        out: "",
        err: "--keep-recent-tokens needs --context-window N"
      })
      // Nothing was run or written.
      expect(Fs.readdirSync(store)).toEqual([])
      // resume checks them before it reads the log.
      expect(yield* cli(["resume", Path.join(store, "nope.jsonl"), "--context-window", "x"])).toEqual({
        code: 2,
        out: "",
        err: "--context-window: not a positive integer (tokens): \"x\""
      })
    }))

  it.live("run --context-window: the turn compacts by pressure before a step; the transcript shows the marker", () =>
    Effect.gen(function*() {
      const store = tmpDir()
      const { code, out } = yield* cli([
        "run",
        "--prompt",
        "wait 1 seconds and tell me the time",
        "--store",
        store,
        "--context-window",
        "320",
        "--compaction-reserve",
        "80",
        "--keep-recent-tokens",
        "30"
      ])
      expect(code).toBe(0)
      const lines = out.split("\n")
      expect(lines.slice(0, 10)).toEqual([
        "── turn 1 ──",
        "> wait 1 seconds and tell me the time",
        "I received 1 message in this step: 1 from you (\"wait 1 seconds and tell me the time\").",
        "→ wait({\"seconds\":1})",
        "← waited 1 second",
        // A tool continuation: the call and its result stay (the step continues from them); only
        // the prompt before them is summarized (on this tiny window the summary is the longer).
        "[compaction: pressure, turn 1] compacted 269 → 301 tokens: seq 4 (13 tokens) summarized",
        "  Earlier: 1 prompt from you (\"wait 1 seconds and tell me the time\"), 0 tool results, 0 context messages.",
        "Tool result (call_1_1_1): \"waited 1 second\"",
        "turn 1 ended: completed",
        ""
      ])
      const file = Path.join(store, Fs.readdirSync(store)[0]!)
      const contents = yield* SessionStore.readFile(file).pipe(Effect.provide(NodeContext.layer))
      expect(contents.events.filter((e) => e.type.startsWith("compaction/")).map((e) => e.type)).toEqual([
        "compaction/start",
        "compaction/summary",
        "compaction/end"
      ])
      // transcript prints the same marker from the log.
      const shown = yield* cli(["transcript", file])
      expect(shown.out.split("\n").slice(5, 7)).toEqual(lines.slice(5, 7))
    }))

  it.effect("offline: runs one turn, prints the transcript and writes a valid JSONL log", () =>
    Effect.gen(function*() {
      const store = tmpDir()
      const { code, out } = yield* cli(["run", "--prompt", "hello, agent", "--store", store])
      expect(code).toBe(0)
      expect(out).toContain("> hello, agent")
      expect(out).toContain("I received 1 message in this step: 1 from you (\"hello, agent\").")
      expect(out).toContain("turn 1 ended: completed")
      const files = Fs.readdirSync(store)
      expect(files).toHaveLength(1)
      expect(out).toContain(`session log: ${Path.join(store, files[0]!)}`)
      const contents = yield* SessionStore.readFile(Path.join(store, files[0]!)).pipe(Effect.provide(NodeContext.layer))
      expect(Invariant.check(contents.events)).toEqual([])
      expect(contents.header).toMatchObject({ type: "session", format: "effect-agent-loop", version: 1 })
    }))

  it.effect("--instructions and --instructions-file set the agent's system instructions (run and chat); both, a missing file, none: exit 2", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const instructionsOf = (store: string) =>
        Effect.map(
          SessionStore.readFile(Path.join(store, Fs.readdirSync(store)[0]!)).pipe(Effect.provide(NodeContext.layer)),
          (contents) =>
            contents.events.filter((e) => e.type === "request/header").map((e) =>
              (e.data as { instructions?: string }).instructions
            )
        )
      const inline = Path.join(dir, "inline")
      const given = yield* cli(["run", "--prompt", "hi", "--instructions", "Answer in French.", "--store", inline])
      expect(given.code).toBe(0)
      expect(yield* instructionsOf(inline)).toEqual(["Answer in French."])
      const file = Path.join(dir, "system.md")
      Fs.writeFileSync(file, "You are terse.\nNever apologize.\n")
      const fromFile = Path.join(dir, "from-file")
      expect((yield* cli(["run", "--prompt", "hi", "--instructions-file", file, "--store", fromFile])).code).toBe(0)
      expect(yield* instructionsOf(fromFile)).toEqual(["You are terse.\nNever apologize.\n"])
      const missing = Path.join(dir, "nope.md")
      for (const command of ["run", "chat"]) {
        const prompt = command === "run" ? ["--prompt", "hi"] : []
        const store = ["--store", Path.join(dir, `refused-${command}`)]
        expect(yield* cli([command, ...prompt, "--instructions", "a", "--instructions-file", file, ...store])).toEqual({
          code: 2,
          out: "",
          err: "--instructions and --instructions-file: give one of them, not both"
        })
        expect(yield* cli([command, ...prompt, "--instructions-file", missing, ...store])).toEqual({
          code: 2,
          out: "",
          err: `--instructions-file ${missing}: cannot read: no such file`
        })
        expect(yield* cli([command, ...prompt, "--instructions-file", dir, ...store])).toEqual({
          code: 2,
          out: "",
          err: `--instructions-file ${dir}: cannot read: not a regular file (a directory)`
        })
        const under = Path.join(file, "system.md")
        expect(yield* cli([command, ...prompt, "--instructions-file", under, ...store])).toEqual({
          code: 2,
          out: "",
          err: `--instructions-file ${under}: cannot read: a part of the path is not a directory`
        })
        expect(yield* cli([command, ...prompt, "--instructions", " ", ...store])).toEqual({
          code: 2,
          out: "",
          err: "--instructions: the instructions are empty"
        })
      }
      // Nothing was created for a refused command.
      expect(Fs.readdirSync(dir).sort()).toEqual(["from-file", "inline", "system.md"])
    }))

  it.effect("--pg that is not a postgres:// URL: exit 2 before anything connects, the URL not repeated", () =>
    Effect.gen(function*() {
      const message = "--pg: not a PostgreSQL URL (postgres://user[:password]@host[:port]/database)"
      for (
        const argv of [
          ["transcript", "--pg", "notaurl", "--session", "s1"],
          ["check", "--pg", "http://u:hunter2@host/db", "--session", "s1"],
          ["send", "--pg", "postgres://u:hunter2@[bad/db", "--session", "s1", "--followup", "hi"],
          ["runner", "--pg", "u:hunter2@host/db"]
        ]
      ) {
        const r = yield* cli(argv)
        expect([argv[0], r.code, r.out, r.err.trim()]).toEqual([argv[0], 2, "", message])
      }
    }))

  it.effect("a --store that cannot be a directory: exit 2 with one line naming the path at fault, nothing written", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const file = Path.join(dir, "afile")
      Fs.writeFileSync(file, "")
      const dangling = Path.join(dir, "dangling")
      Fs.symlinkSync(Path.join(dir, "nowhere"), dangling)
      const cases = [
        // Before, @effect/cli's own check of the option died on ENOTDIR and printed the platform's text.
        [Path.join(file, "sub"), `${file} is not a directory (a regular file)`],
        [Path.join(file, "sub", "deeper"), `${file} is not a directory (a regular file)`],
        [file, `${file} is not a directory (a regular file)`],
        [Path.join(dangling, "sub"), `${dangling} is a symbolic link to nothing`]
      ] as const
      for (const [store, reason] of cases) {
        for (const argv of [["run", "--prompt", "hi"], ["demo"], ["acp"]]) {
          expect([argv[0], yield* cli([...argv, "--store", store])]).toEqual([argv[0], {
            code: 2,
            out: "",
            err: `--store ${store}: cannot create the directory: ${reason}`
          }])
        }
      }
      expect(yield* cli(["run", "--prompt", "hi", "--store", ""])).toEqual({
        code: 2,
        out: "",
        err: "--store: no directory given"
      })
      expect(Fs.readFileSync(file, "utf8")).toBe("")
      expect(Fs.readdirSync(dir).sort()).toEqual(["afile", "dangling"])
    }))

  it.effect("control characters in prompts and model output are shown escaped, never sent to the terminal", () =>
    Effect.gen(function*() {
      const { code, out } = yield* cli(["run", "--prompt", "\u001b[31mRED\u001b[0m", "--store", tmpDir()])
      expect(code).toBe(0)
      expect(out).toContain("> \\x1b[31mRED\\x1b[0m")
      expect(out).not.toContain("\u001b")
    }))

  it.effect("a command's --help is @effect/cli's own text: its styling reaches the terminal as it is, not escaped", () =>
    Effect.gen(function*() {
      const { code, out } = yield* cli(["run", "--help"])
      expect(code).toBe(0)
      expect(out).toContain("USAGE")
      expect(out).not.toContain("\\x1b")
    }))

  it.effect("a command's --help is wrapped to 80 columns; a completion script is never wrapped", () =>
    Effect.gen(function*() {
      const help = yield* cli(["simulate", "--help"])
      expect(help.code).toBe(0)
      expect(help.out.split("\n").filter((line) => [...line].length > 80)).toEqual([])
      // Its long lines are shell code: wrapped, they would break it.
      const script = yield* cli(["--completions", "bash"])
      expect(script.code).toBe(0)
      expect(script.out.split("\n").some((line) => line.length > 80)).toBe(true)
    }))

  it.effect("the top-level help (no arguments, --help, -h) lists the commands one line each, on one 80-column screen", () =>
    Effect.gen(function*() {
      // Before, @effect/cli's own: 78 lines, the built-in flags' boilerplate first, then each
      // command's whole usage and description on one line of 400 to 570 columns.
      const help = [
        "agent-loop 0.1.0: an Effect-TS runtime for LLM agent loops.",
        "",
        "USAGE agent-loop <command> [options]",
        "",
        "COMMANDS",
        "  demo        run a short offline demo session and print its transcript",
        "  run         send one prompt and print the transcript as it happens",
        "  chat        chat with an agent in the terminal",
        "  resume      repair a crashed session log; optionally run what was pending",
        "  transcript  print the transcript of a session log (a file or PostgreSQL)",
        "  check       check a session log against the invariants of §12",
        "  stats       turns, steps, tools, tokens, cost and times of a session log",
        "  pending     list the sessions of a store that wait for approval",
        "  inspect     a web page of a store's sessions: timelines, inbox, fates",
        "  simulate    run a scenario on a virtual clock and write its session log",
        "  acp         serve the Agent Client Protocol on stdin/stdout, for editors",
        "  runner      run a runner of an agent cluster on PostgreSQL",
        "  send        deliver a message or a decision to a session of an agent cluster",
        "",
        "agent-loop <command> --help shows a command's options.",
        "Built-in flags: --version, --log-level LEVEL, --completions SHELL, --wizard."
      ].join("\n")
      for (const argv of [[], ["--help"], ["-h"]]) {
        expect(yield* cli(argv)).toEqual({ code: 0, out: help, err: "" })
      }
      expect(Math.max(...help.split("\n").map((line) => line.length))).toBeLessThanOrEqual(80)
    }))

  it.effect("the CLI's Console escapes every string it prints, the logger's lines too; escaped text passes unchanged", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const base = yield* Console.consoleWith(Effect.succeed)
      const capture: Console.Console = {
        ...base,
        log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void lines.push(args.join(" "))),
        unsafe: { ...base.unsafe, log: (...args: ReadonlyArray<unknown>) => void lines.push(args.join(" ")) }
      }
      const safe = terminalConsole(capture)
      yield* Effect.logError("the provider said \u001b[2J\u202e").pipe(
        Effect.withConsole(safe),
        Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleLog(Logger.stringLogger)))
      )
      yield* Console.log("a\u202e\n\tb \\x1b", 7).pipe(Effect.withConsole(safe))
      expect(lines).toEqual([
        expect.stringMatching(/level=ERROR .*message="the provider said \\x1b\[2J\\u202e"/),
        "a\\u202e\n\tb \\x1b 7"
      ])
    }))

  it.live(
    "text from a provider, a log or a file name reaches the terminal escaped: run's error line, check's violations, exit messages",
    () =>
      Effect.scoped(Effect.gen(function*() {
        // A provider whose error text clears the screen, moves the cursor and reverses the line.
        const hostile = "\u001b[2J\u001b[Hbad key\u202e\u2066 \u200b\u2028\u009b"
        const server = yield* replayServer({
          body: JSON.stringify({ error: { message: hostile, type: "invalid_request_error" } }),
          status: 400,
          contentType: "application/json"
        })
        const run = yield* cli([
          "run",
          "--prompt",
          "hi",
          "--provider",
          "openai-compat",
          "--base-url",
          server.baseUrl,
          "--model",
          "m",
          "--store",
          tmpDir()
        ])
        expect(run.code).toBe(4)
        // eslint-disable-next-line no-control-regex -- the characters that must not reach a terminal
        const unsafe = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u2028\u2029]/
        expect(run.err).not.toMatch(unsafe)
        expect(run.out).not.toMatch(unsafe)
        expect(run.err.split("\n").at(-1)).toMatch(/^error: \w+: .*\\x1b\[2J\\x1b\[Hbad key\\u202e\\u2066 \\u200b\\u2028\\x9b/)
        // check: an id with escape sequences in a violation.
        const dir = tmpDir()
        const file = Path.join(dir, "ids.jsonl")
        const id = "\u001b]0;pwned\u0007\u202eu1"
        Fs.writeFileSync(
          file,
          "{\"type\":\"session\",\"format\":\"effect-agent-loop\",\"version\":1,\"id\":\"ids\",\"createdAt\":0}\n" +
            JSON.stringify({
              type: "user/message",
              seq: 0,
              time: 0,
              data: { id, role: "user", content: [{ type: "text", text: "hi" }], source: { kind: "user" } }
            }) + "\n"
        )
        const checked = yield* cli(["check", file])
        expect(checked).toEqual({
          code: 1,
          out: `${file}: seq 0: rule 2: user/message \\x1b]0;pwned\\x07\\u202eu1 outside an open step`,
          err: ""
        })
        // An exit message naming a file whose name holds an escape sequence.
        const missing = Path.join(dir, "nope\u001b[2J\u202e.jsonl")
        const gone = yield* cli(["check", missing])
        expect(gone.code).toBe(2)
        expect(gone.err).not.toMatch(unsafe)
        expect(gone.err).toContain(`${dir}/nope\\x1b[2J\\u202e.jsonl`)
      })),
    30_000
  )

  it.live(
    "openai-compat against a loopback replay: two parallel tool calls, then a text answer",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const server = yield* replayServer([
          { file: "openai-stream-tool-calls-parallel.sse", splitEvery: 13 },
          { file: "vllm-stream-text-usage-chunk.sse" }
        ])
        const store = tmpDir()
        process.env.AGENT_LOOP_TEST_KEY = "sk-test-123"
        const { code, out } = yield* cli([
          "run",
          "--prompt",
          "What's the weather like in Edinburgh?",
          "--provider",
          "openai-compat",
          "--base-url",
          server.baseUrl,
          "--model",
          "gpt-4o-2024-08-06",
          "--api-key-env",
          "AGENT_LOOP_TEST_KEY",
          "--store",
          store
        ])
        expect(code).toBe(0)
        // Raw argument strings are kept as the provider streamed them.
        expect(out).toContain("→ GetWeatherArgs({\"city\": \"Edinburgh\", \"country\": \"GB\", \"units\": \"c\"})")
        expect(out).toContain("→ get_stock_price({\"ticker\": \"AAPL\", \"exchange\": \"NASDAQ\"})")
        expect(out).toContain("← error: Unknown tool \"GetWeatherArgs\". Available tools: wait, clock, read_file.")
        expect(out).toContain("1, 2, 3, 4, 5")
        const file = Path.join(store, Fs.readdirSync(store)[0]!)
        const contents = yield* SessionStore.readFile(file).pipe(Effect.provide(NodeContext.layer))
        expect(Invariant.check(contents.events)).toEqual([])
        const calls = contents.events.filter((e) => e.type === "tool/call").map((e) => (e.data as any).name)
        const results = contents.events.filter((e) => e.type === "tool/result").map((e) => (e.data as any).error?.code)
        expect(calls).toEqual(["GetWeatherArgs", "get_stock_price"])
        expect(results).toEqual(["UNKNOWN_TOOL", "UNKNOWN_TOOL"])
        // The second request is a valid Chat Completions body: each tool message follows the
        // assistant message that called it.
        expect(server.requests).toHaveLength(2)
        expect(server.requests[0]!.headers.authorization).toBe("Bearer sk-test-123")
        const body = JSON.parse(server.requests[1]!.body)
        expect(body.model).toBe("gpt-4o-2024-08-06")
        expect(body.stream).toBe(true)
        const roles = body.messages.map((m: any) => m.role)
        expect(roles).toEqual(["user", "assistant", "tool", "tool"])
        const assistant = body.messages[1]
        expect(assistant.tool_calls.map((c: any) => c.id)).toEqual(body.messages.slice(2).map((m: any) => m.tool_call_id))
        expect(assistant.tool_calls.map((c: any) => c.function.name)).toEqual(["GetWeatherArgs", "get_stock_price"])
        expect(body.tools.map((t: any) => t.function.name).sort()).toEqual(["clock", "read_file", "wait"])
        expect(contents.events.filter((e) => e.type === "assistant/message")).toHaveLength(2)
      })),
    30_000
  )

  it.live(
    "anthropic against a loopback replay: a tool call, then thinking and an answer; the key only in x-api-key",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const server = yield* replayServer([
          { file: "anthropic-stream-tool-use.sse", splitEvery: 11 },
          { file: "anthropic-stream-thinking.sse" }
        ])
        const store = tmpDir()
        process.env.AGENT_LOOP_TEST_ANTHROPIC_KEY = "sk-ant-test-456"
        const { code, out, err } = yield* cli([
          "run",
          "--prompt",
          "What's the weather in Paris?",
          "--provider",
          "anthropic",
          "--base-url",
          server.baseUrl.replace(/\/v1$/, ""),
          "--model",
          "claude-sonnet-4-5",
          "--api-key-env",
          "AGENT_LOOP_TEST_ANTHROPIC_KEY",
          "--store",
          store
        ])
        expect([code, err]).toEqual([0, ""])
        expect(out).toContain("I'll check the current weather in Paris for you.")
        expect(out).toContain("→ get_weather({\"location\": \"Paris\"})")
        expect(out).toContain("← error: Unknown tool \"get_weather\". Available tools: wait, clock, read_file.")
        expect(out).toContain("turn 1 ended: completed")
        expect(out).not.toContain("sk-ant-test-456")
        const file = Path.join(store, Fs.readdirSync(store)[0]!)
        const contents = yield* SessionStore.readFile(file).pipe(Effect.provide(NodeContext.layer))
        expect(Invariant.check(contents.events)).toEqual([])
        expect(Fs.readFileSync(file, "utf8")).not.toContain("sk-ant-test-456")
        expect(server.requests.map((r) => [r.url, r.headers["x-api-key"], r.headers["anthropic-version"]])).toEqual([
          ["/v1/messages", "sk-ant-test-456", "2023-06-01"],
          ["/v1/messages", "sk-ant-test-456", "2023-06-01"]
        ])
        // The second request: the tool_result right after the assistant turn that called it.
        const body = JSON.parse(server.requests[1]!.body)
        expect([body.model, body.stream, typeof body.system]).toEqual(["claude-sonnet-4-5", true, "undefined"])
        expect(body.messages.map((m: any) => [m.role, m.content.map((b: any) => b.type)])).toEqual([
          ["user", ["text"]],
          ["assistant", ["text", "tool_use"]],
          ["user", ["tool_result"]]
        ])
        expect(body.messages[2].content[0]).toMatchObject({ tool_use_id: body.messages[1].content[1].id, is_error: true })
        expect(body.tools.map((t: any) => t.name).sort()).toEqual(["clock", "read_file", "wait"])
      })),
    30_000
  )

  it.live(
    "openai (Responses API via @effect/ai-openai and the bridge) against a loopback server",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const server = yield* replayServer({ body: textResponse("Hello from the Responses API."), splitEvery: 29 })
        const store = tmpDir()
        process.env.AGENT_LOOP_TEST_OPENAI_KEY = "sk-openai-test-789"
        const { code, out, err } = yield* cli([
          "run",
          "--prompt",
          "say hello",
          "--provider",
          "openai",
          "--base-url",
          server.baseUrl,
          "--model",
          "gpt-5-mini",
          "--api-key-env",
          "AGENT_LOOP_TEST_OPENAI_KEY",
          "--store",
          store
        ])
        expect([code, err]).toEqual([0, ""])
        expect(out).toContain("Hello from the Responses API.")
        expect(out).toContain("turn 1 ended: completed")
        expect(server.requests.map((r) => [r.url, r.headers.authorization])).toEqual([[
          "/v1/responses",
          "Bearer sk-openai-test-789"
        ]])
        const body = JSON.parse(server.requests[0]!.body)
        expect([body.model, body.stream, body.input]).toEqual([
          "gpt-5-mini",
          true,
          [{ role: "user", content: [{ type: "input_text", text: "say hello" }] }]
        ])
        expect(body.tools.map((t: any) => [t.name, t.strict])).toEqual([["wait", false], ["clock", false], ["read_file", false]])
        const file = Path.join(store, Fs.readdirSync(store)[0]!)
        const contents = yield* SessionStore.readFile(file).pipe(Effect.provide(NodeContext.layer))
        expect(Invariant.check(contents.events)).toEqual([])
        const header = contents.events.find((e) => e.type === "request/header")!.data as any
        expect([header.provider, header.model]).toEqual(["openai", "gpt-5-mini"])
        expect(Fs.readFileSync(file, "utf8")).not.toContain("sk-openai-test-789")
      })),
    30_000
  )

  it.live("an unreachable base URL ends the turn error NETWORK: exit 4 with a clear message", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const store = tmpDir()
      const { code, err, out } = yield* cli([
        "run",
        "--prompt",
        "hi",
        "--provider",
        "openai-compat",
        "--base-url",
        `http://127.0.0.1:${port}/v1`,
        "--model",
        "m",
        "--store",
        store
      ])
      expect(code).toBe(4)
      // The model request is retried (3 attempts in all), then the turn ends error.
      expect(err.split("\n")).toEqual([
        "retrying the model request (attempt 2)",
        "retrying the model request (attempt 3)",
        expect.stringMatching(/^error: NETWORK: openai-compat: cannot reach http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions/)
      ])
      expect(out).toContain("turn 1 ended: error: NETWORK")
    }), 30_000)

  it("exit codes follow the turn's end reason (§14)", () => {
    expect(exitCodeOf({ kind: "completed" })).toBe(0)
    expect(exitCodeOf({ kind: "max-tokens" })).toBe(0)
    expect(exitCodeOf({ kind: "blocked" })).toBe(3)
    expect(exitCodeOf({ kind: "error", error: { message: "m", code: "X" } })).toBe(4)
    expect(exitCodeOf({ kind: "aborted", reason: { kind: "user" } })).toBe(130)
  })
})

describe("agent-loop resume", () => {
  /** A JSONL log that stops mid-turn: a `clock` call logged, no result (the process died). */
  const crashedLog = (dir: string, pending: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const store = yield* SessionStore.SessionStore
      const log = yield* store.create({ id: "crashed" })
      const go = yield* UserMessage.make({ text: "what time is it?", source: { kind: "user" } })
      yield* log.append([
        { type: "agent/inbox/spliced", data: { target: "next-turn", start: 0, inserted: [go] } },
        { type: "turn/start", data: { turn: 1 } },
        { type: "agent/inbox/spliced", data: { target: "next-turn", start: 0, removedCount: 1, inserted: [] } },
        { type: "step/start", data: { turn: 1, step: 1 } },
        { type: "user/message", data: go },
        {
          type: "assistant/message",
          data: {
            turn: 1,
            step: 1,
            message: {
              id: "a1",
              role: "assistant",
              content: [{ type: "tool-call", id: "c1", name: "clock", arguments: "{}" }],
              source: { kind: "model", provider: "offline", model: "offline" }
            },
            finish: "tool-calls"
          }
        },
        { type: "tool/call", data: { turn: 1, step: 1, callId: "c1", name: "clock", arguments: "{}" } }
      ])
      let start = 0
      for (const text of pending) {
        const m = yield* UserMessage.make({ text, source: { kind: "user" } })
        yield* log.append([{ type: "agent/inbox/spliced", data: { target: "next-turn", start: start++, inserted: [m] } }])
      }
      return Path.join(dir, "crashed.jsonl")
    }).pipe(
      Effect.provide(Layer.mergeAll(SessionStore.layerJsonl({ directory: dir }), IdGenerator.layerSeeded(3))),
      Effect.scoped
    )

  it.effect("resume FILE repairs an open turn once; check is clean; pending work waits", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const file = yield* crashedLog(dir, ["and the date?"])
      Fs.appendFileSync(file, "{\"type\":\"tool/res") // a torn last line
      const first = yield* cli(["resume", file])
      expect(first).toEqual({
        code: 0,
        out: `${file}: cut a torn last line (17 bytes), appended tool/result, step/end, turn/end, session/end-seed`,
        err: ""
      })
      expect((yield* cli(["check", file])).code).toBe(0)
      expect((yield* cli(["resume", file])).out).toBe(`${file}: nothing to repair`)
      const size = Fs.statSync(file).size
      Fs.appendFileSync(file, "{\"type\":\"user") // torn again, nothing else to repair
      expect(yield* cli(["resume", file])).toEqual({
        code: 0,
        out: `${file}: cut a torn last line (13 bytes), nothing to append`,
        err: ""
      })
      expect(Fs.statSync(file).size).toBe(size)
      expect((yield* cli(["resume", file])).out).toBe(`${file}: nothing to repair`)
      const contents = yield* SessionStore.readFile(file)
      const result = contents.events.find((e) => e.type === "tool/result")!.data as any
      expect(result.error).toEqual({ name: "OutcomeUnknown", code: "TOOL_OUTCOME_UNKNOWN" })
      // The queued followup is still queued.
      expect(contents.events.filter((e) => e.type === "turn/start")).toHaveLength(1)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("resume FILE --continue-pending runs the queued followup as turn 2 and prints it", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const file = yield* crashedLog(dir, ["hello again"])
      const { code, out } = yield* cli(["resume", file, "--continue-pending"])
      expect(code).toBe(0)
      expect(out.split("\n")[0]).toBe(`${file}: appended tool/result, step/end, turn/end, session/end-seed`)
      expect(out).toContain("hello again")
      const contents = yield* SessionStore.readFile(file)
      expect(contents.events.filter((e) => e.type === "turn/end").map((e) => (e.data as any).turn)).toEqual([1, 2])
      expect(Invariant.check(contents.events)).toEqual([])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("resume --continue-pending --context-window: the resumed agent compacts by pressure before the pending turn", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const file = yield* crashedLog(dir, ["hello again"])
      const flags = ["--context-window", "240", "--compaction-reserve", "20", "--keep-recent-tokens", "10"]
      const { code, out } = yield* cli(["resume", file, "--continue-pending", ...flags])
      expect(code).toBe(0)
      expect(out.split("\n")).toEqual([
        `${file}: appended tool/result, step/end, turn/end, session/end-seed`,
        "── turn 2 ──",
        "[compaction: pressure, turn 2] compacted 266 → 256 tokens: seq 4..8 (50 tokens) summarized",
        "  Earlier: 1 prompt from you (\"what time is it?\"), 1 tool result, 0 context messages.",
        "> hello again",
        "I received 2 messages in this step: 1 from you (\"hello again\"); context from plugin:compact (\"The conversation before this point was compacted. Summary: …\").",
        "turn 2 ended: completed"
      ])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.live(
    "a compaction still running is printed once it ends, never as one without its end (a slow summarization request)",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const dir = tmpDir()
        const file = yield* crashedLog(dir, ["hello again"])
        // The summarization request streams for about a second; then the turn's own request.
        const server = yield* replayServer([
          { file: "vllm-stream-text-usage-chunk.sse", splitEvery: 400, delayMs: 100 },
          { file: "vllm-stream-text-usage-chunk.sse" }
        ])
        const { code, out } = yield* cli([
          "resume",
          file,
          "--continue-pending",
          "--provider",
          "openai-compat",
          "--base-url",
          server.baseUrl,
          "--model",
          "m",
          "--context-window",
          "240",
          "--compaction-reserve",
          "20",
          "--keep-recent-tokens",
          "10"
        ]).pipe(Effect.provide(NodeContext.layer))
        expect(code).toBe(0)
        expect(out.split("\n").slice(1, 5)).toEqual([
          "── turn 2 ──",
          "[compaction: pressure, turn 2] compacted 266 → 239 tokens: seq 4..8 (50 tokens) summarized",
          "  1, 2, 3, 4, 5",
          "> hello again"
        ])
        expect(out).not.toContain("no end in the log")
        expect(server.requests.length).toBe(2)
      })),
    30_000
  )

  it.effect("resume FILE of a log whose turn number was edited: exit 2, one line naming the violation; nothing is written", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const file = yield* crashedLog(dir, ["and the date?"])
      /** Turn 1 renumbered 2 on its turn/start (seq 1, line 3). */
      const tamper = () => {
        const lines = Fs.readFileSync(file, "utf8").split("\n")
        expect(lines[2]).toContain("\"type\":\"turn/start\"")
        lines[2] = lines[2]!.replace("{\"turn\":1}", "{\"turn\":2}")
        Fs.writeFileSync(file, lines.join("\n"))
      }
      const refusal = {
        code: 2,
        out: "",
        err: "session \"crashed\": seq 1 (line 3) breaks invariant 1 (§12): turn/start of turn 2 where turn 1 " +
          "was expected; repair cannot fix that by appending, so the session is not resumed (agent-loop check lists every violation)"
      }
      // An open turn to close (the repair path), and with a torn last line: not even that is cut.
      tamper()
      Fs.appendFileSync(file, "{\"type\":\"tool/res")
      const crashed = Fs.readFileSync(file, "utf8")
      for (const args of [["resume", file], ["resume", file, "--continue-pending"]]) expect(yield* cli(args)).toEqual(refusal)
      expect(Fs.readFileSync(file, "utf8")).toBe(crashed)
      expect((yield* cli(["check", file])).code).toBe(1)
      // A repaired log, edited afterwards (nothing to repair: answered without opening it).
      const clean = yield* crashedLog(tmpDir(), ["and the date?"])
      expect((yield* cli(["resume", clean])).code).toBe(0)
      Fs.copyFileSync(clean, file)
      tamper()
      const repaired = Fs.readFileSync(file, "utf8")
      for (const args of [["resume", file], ["resume", file, "--continue-pending"]]) expect(yield* cli(args)).toEqual(refusal)
      expect(Fs.readFileSync(file, "utf8")).toBe(repaired)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("resume FILE whose header id is not its name is refused (exit 2): nothing is written or created", () =>
    Effect.gen(function*() {
      // The store keys sessions by <id>.jsonl; here other.jsonl holds session "crashed" and the
      // real crashed.jsonl sits next to it. Opening other.jsonl as "crashed" would make a log
      // that cannot be found again by its id.
      const dir = tmpDir()
      const original = yield* crashedLog(dir, ["and the date?"])
      const file = Path.join(dir, "other.jsonl")
      Fs.copyFileSync(original, file)
      const untouched = Fs.readFileSync(original, "utf8")
      for (const args of [["resume", file], ["resume", file, "--continue-pending"]]) {
        expect(yield* cli(args)).toEqual({
          code: 2,
          out: "",
          err: `${file}, line 1: the header names session "crashed", not "other"`
        })
      }
      expect(Fs.readdirSync(dir).sort()).toEqual(["crashed.jsonl", "other.jsonl"])
      expect(Fs.readFileSync(original, "utf8")).toBe(untouched)
      expect(Fs.readFileSync(file, "utf8")).toBe(untouched)
      // Reading it at its path still works.
      expect((yield* cli(["check", file])).code).toBe(0)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("resume refuses a session another live process writes (its lock), and takes over a dead writer's lock", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const file = yield* crashedLog(dir, [])
      const before = Fs.readFileSync(file, "utf8")
      // The test runner's parent process is alive: it stands for a `run` still writing.
      Fs.writeFileSync(`${file}.lock`, JSON.stringify({ pid: process.ppid, host: Os.hostname() }))
      expect(yield* cli(["resume", file])).toEqual({
        code: 2,
        out: "",
        err:
          `${file}: session "crashed" is open for writing by process ${process.ppid} (one writer per session; if that process is gone, remove ${file}.lock)`
      })
      expect(Fs.readFileSync(file, "utf8")).toBe(before)
      // A writer that died (SIGKILL) leaves its lock behind: resume takes it over and repairs.
      Fs.writeFileSync(`${file}.lock`, JSON.stringify({ pid: deadPid(), host: Os.hostname() }))
      const { code, out } = yield* cli(["resume", file])
      expect([code, out]).toEqual([0, `${file}: appended tool/result, step/end, turn/end, session/end-seed`])
      expect(Fs.existsSync(`${file}.lock`)).toBe(false)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.live.skipIf(mountRefused !== undefined)(
    "resume --continue-pending whose log write fails mid-turn (disk full): exit 2 with one line naming the session and ENOSPC",
    () =>
      Effect.scoped(
        Effect.gen(function*() {
          const dir = yield* tmpfs("64k")
          const file = yield* crashedLog(dir, ["read file package-lock.json"])
          // One free page (for the lock file); the log keeps what is left of its last page, less
          // than the tool result (64 KiB of package-lock.json) needs.
          const free = Fs.statfsSync(dir)
          Fs.writeFileSync(Path.join(dir, "filler"), Buffer.alloc(free.bavail * free.bsize - 4096))
          const { code, err, out } = yield* cli(["resume", file, "--continue-pending"])
          expect({ code, err }).toEqual({
            code: 2,
            err:
              `${file}: cannot write the session log: cannot append to session "crashed": ENOSPC: no space left on device, write`
          })
          expect(out).not.toMatch(/ERROR|SessionStoreError|\n\s+at /)
          const contents = yield* SessionStore.readFile(file)
          expect(contents.warnings).toEqual([])
        }).pipe(Effect.provide(NodeContext.layer))
      ),
    30_000
  )

  it.effect("resume on a read-only file system: a log that needs nothing succeeds without the lock; one that needs repair is one clear error", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const file = yield* crashedLog(dir, [])
      expect((yield* cli(["resume", file])).code).toBe(0) // repaired: it ends with session/end-seed
      const repaired = Fs.readFileSync(file, "utf8")
      const open = Fs.readFileSync(yield* crashedLog(tmpDir(), []), "utf8")
      // A read-only mount (chmod does not stop root).
      const ro = tmpDir()
      const mount = spawnSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", ro], { encoding: "utf8" })
      if (mount.status !== 0) {
        console.warn(`skipped: cannot mount a tmpfs here (${(mount.stderr || mount.error?.message || "").trim()})`)
        return
      }
      try {
        Fs.writeFileSync(Path.join(ro, "crashed.jsonl"), repaired)
        Fs.mkdirSync(Path.join(ro, "open"))
        Fs.writeFileSync(Path.join(ro, "open", "crashed.jsonl"), open)
        expect(spawnSync("mount", ["-o", "remount,ro", ro]).status).toBe(0)
        const clean = Path.join(ro, "crashed.jsonl")
        expect(yield* cli(["resume", clean])).toEqual({ code: 0, out: `${clean}: nothing to repair`, err: "" })
        expect(yield* cli(["resume", clean, "--continue-pending"])).toEqual({
          code: 0,
          out: `${clean}: nothing to repair\nno queued followup or steering to run`,
          err: ""
        })
        // A log whose last turn is open needs its closers written: that cannot be done here.
        const crashed = Path.join(ro, "open", "crashed.jsonl")
        const refused = yield* cli(["resume", crashed])
        expect(refused.code).toBe(2)
        expect(refused.out).toBe("")
        expect(refused.err.split("\n")).toHaveLength(1)
        expect(refused.err).toContain("read-only file system")
        expect(Fs.readdirSync(ro).sort()).toEqual(["crashed.jsonl", "open"])
        expect(Fs.readFileSync(clean, "utf8")).toBe(repaired)
      } finally {
        spawnSync("umount", [ro])
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("resume refuses a DSH v0 log, a missing file and a file that is not a log (exit 2)", () =>
    Effect.gen(function*() {
      const dsh = yield* cli(["resume", Path.join(DSH, "acp__tool-call-turn__session.jsonl")])
      expect(dsh.code).toBe(2)
      expect(dsh.err).toContain("DSH v0 log")
      expect((yield* cli(["resume", Path.join(tmpDir(), "missing.jsonl")])).code).toBe(2)
      expect((yield* cli(["resume", Path.join(tmpDir(), "notes.txt")])).code).toBe(2)
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("agent-loop simulate", () => {
  const scenarioFile = (scenario: unknown) => {
    const file = Path.join(tmpDir(), "scenario.json")
    Fs.writeFileSync(file, JSON.stringify(scenario))
    return file
  }

  it.effect("a scenario that is not an object ([] or null) is one line naming the problem at $ (exit 2)", () =>
    Effect.gen(function*() {
      for (const value of [[], null]) {
        const file = scenarioFile(value)
        expect(yield* cli(["simulate", file])).toEqual({
          code: 2,
          out: "",
          err: `${file}: invalid scenario at $: Expected a scenario object {model, actions, …}, actual ${JSON.stringify(value)}`
        })
      }
    }))

  it.effect("a scenario or an output it cannot use: one line saying which and why in a few words, exit 2, nothing written", () =>
    Effect.gen(function*() {
      // Before, these printed the platform's text: `NotFound: FileSystem.stat (nope.json): ENOENT: …`.
      const dir = tmpDir()
      const file = Path.join(dir, "afile")
      Fs.writeFileSync(file, "")
      const missing = Path.join(dir, "nope.json")
      expect(yield* cli(["simulate", missing])).toEqual({ code: 2, out: "", err: `${missing}: cannot read: no such file` })
      const under = Path.join(file, "scenario.json")
      expect(yield* cli(["simulate", under])).toEqual({
        code: 2,
        out: "",
        err: `${under}: cannot read: a part of the path is not a directory`
      })
      const scenario = scenarioFile({ model: [{ text: "ok" }], actions: [{ at: 0, followup: "hello" }] })
      const outputs = [
        [dir, "it is a directory"],
        [Path.join(dir, "missing", "log.jsonl"), "no such directory"],
        [Path.join(file, "log.jsonl"), "a part of the path is not a directory"]
      ] as const
      for (const [out, why] of outputs) {
        for (const flag of ["--out", "--requests"]) {
          expect([flag, yield* cli(["simulate", scenario, flag, out])]).toEqual([flag, {
            code: 2,
            out: "",
            err: `${flag} ${out}: cannot write: ${why}`
          }])
        }
      }
      expect(Fs.readdirSync(dir).sort()).toEqual(["afile"])
    }))

  it.effect("--out and --requests are checked before the run: a bad --requests leaves --out unwritten (exit 2)", () =>
    Effect.gen(function*() {
      // Before, the scenario ran and --out was written, then `--requests DIR: cannot write`.
      const dir = tmpDir()
      const scenario = scenarioFile({ model: [{ text: "ok" }], actions: [{ at: 0, followup: "hello" }] })
      const out = Path.join(dir, "log.jsonl")
      expect(yield* cli(["simulate", scenario, "--out", out, "--requests", dir])).toEqual({
        code: 2,
        out: "",
        err: `--requests ${dir}: cannot write: it is a directory`
      })
      expect(Fs.readdirSync(dir)).toEqual([])
      const requests = Path.join(dir, "missing", "requests.jsonl")
      expect(yield* cli(["simulate", scenario, "--requests", requests, "--out", out])).toEqual({
        code: 2,
        out: "",
        err: `--requests ${requests}: cannot write: no such directory`
      })
      expect(Fs.readdirSync(dir)).toEqual([])
    }))

  it.effect(
    "2,500 followups: every message id is distinct, no delivery fails, exit 0 (seeded ids repeated after 4,095)",
    () =>
      Effect.gen(function*() {
        // Two ids a turn (the followup and the reply): 5,000 ids.
        const n = 2500
        const file = scenarioFile({
          model: Array.from({ length: n }, () => ({ text: "ok" })),
          actions: Array.from({ length: n }, (_, i) => ({ at: i, followup: `f${i}` }))
        })
        const out = Path.join(tmpDir(), "log.jsonl")
        expect(yield* cli(["simulate", file, "--out", out])).toEqual({ code: 0, out: "", err: "" })
        const contents = yield* SessionStore.readFile(out)
        const ids = contents.events.filter((e) => e.type === "user/message").map((e) => (e.data as { id: string }).id)
        expect(ids).toHaveLength(n)
        expect(new Set(ids).size).toBe(n)
        expect(contents.events.filter((e) => e.type === "turn/end")).toHaveLength(n)
        expect(Invariant.check(contents.events)).toEqual([])
      }).pipe(Effect.provide(NodeContext.layer)),
    60_000
  )

  it.effect("more than 10,000 actions are refused before anything runs (exit 2, one line)", () =>
    Effect.gen(function*() {
      const file = scenarioFile({ model: [], actions: Array.from({ length: 100_000 }, (_, i) => ({ at: 0, inject: `c${i}` })) })
      expect(yield* cli(["simulate", file])).toEqual({
        code: 2,
        out: "",
        err:
          `${file}: invalid scenario at $.actions: a scenario holds at most 10,000 actions (this one has 100,000): the simulator's limit, §15`
      })
    }))

  it.effect(
    "--requests past 2,000,000 recorded messages in all is refused (exit 2) and nothing is written",
    () =>
      Effect.gen(function*() {
        // Request k repeats the history of 2k - 1 messages: 1,500 turns make about 2.25 million.
        const n = 1500
        const file = scenarioFile({
          model: Array.from({ length: n }, () => ({ text: "ok" })),
          actions: Array.from({ length: n }, (_, i) => ({ at: i, followup: `f${i}` }))
        })
        const dir = tmpDir()
        const result = yield* cli([
          "simulate",
          file,
          "--out",
          Path.join(dir, "log.jsonl"),
          "--requests",
          Path.join(dir, "r.jsonl")
        ])
        expect(result).toEqual({
          code: 2,
          out: "",
          err:
            `${file}: --requests: the model requests hold more than 2,000,000 messages in all (each request repeats the history), the simulator's limit for recording them`
        })
        expect(Fs.readdirSync(dir)).toEqual([])
      }),
    60_000
  )

  it.effect("a compaction scenario (§17): the log Simulator.run gives, a summarization request line with its purpose", () =>
    Effect.gen(function*() {
      const file = Path.resolve("test/scenarios/compaction/pressure.json")
      const dir = tmpDir()
      const [out, requests] = [Path.join(dir, "log.jsonl"), Path.join(dir, "r.jsonl")]
      expect(yield* cli(["simulate", file, "--out", out, "--requests", requests])).toEqual({ code: 0, out: "", err: "" })
      const text = Fs.readFileSync(file, "utf8")
      const expected = yield* Simulator.run(Either.getOrThrow(Scenario.parse(text)), { seed: Scenario.seedOf(text) })
      expect(Fs.readFileSync(out, "utf8")).toBe(expected.log)
      expect(Fs.readFileSync(requests, "utf8")).toBe(expected.requestLines)
      expect(expected.requests.map((q) => `${q.turn}.${q.step}${q.purpose ? ` ${q.purpose}` : ""}`)).toEqual([
        "1.1",
        "2.1",
        "3.0 compaction",
        "3.1"
      ])
      const bad = scenarioFile({ model: [], compaction: { contextWindow: 100, reserve: 120 }, actions: [] })
      expect(yield* cli(["simulate", bad])).toEqual({
        code: 2,
        out: "",
        err: `${bad}: invalid scenario at $.compaction.reserve: must be less than contextWindow (100), actual 120`
      })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("an approval scenario (§26): the log Simulator.run gives; a decision with no open question exits 2 after the log is written", () =>
    Effect.gen(function*() {
      const file = Path.resolve("test/scenarios/approval/batch-one-waiting.json")
      const dir = tmpDir()
      const out = Path.join(dir, "log.jsonl")
      expect(yield* cli(["simulate", file, "--out", out])).toEqual({ code: 0, out: "", err: "" })
      const text = Fs.readFileSync(file, "utf8")
      const expected = yield* Simulator.run(Either.getOrThrow(Scenario.parse(text)), { seed: Scenario.seedOf(text) })
      expect(Fs.readFileSync(out, "utf8")).toBe(expected.log)
      // The question is asked at 5, decided at 10 and again at 20; at 0 nothing is open yet.
      const twice = scenarioFile({
        model: [{ latencyMs: 5, toolCalls: [{ id: "w", name: "write" }] }, { text: "ok" }],
        tools: { write: { approval: "always" } },
        actions: [
          { at: 0, followup: "go" },
          { at: 0, reject: { index: 0 } },
          { at: 10, approve: { callId: "w" } },
          { at: 20, approve: { callId: "w" } }
        ]
      })
      const log = Path.join(dir, "twice.jsonl")
      expect(yield* cli(["simulate", twice, "--out", log])).toEqual({
        code: 2,
        out: "",
        err: [
          `${twice}: action 1 (reject open question 0 at 0 ms) failed: ApprovalNotOpen`,
          `${twice}: action 3 (approve call w at 20 ms) failed: ApprovalNotOpen`,
          `${twice}: 2 decisions failed (see above)`
        ].join("\n")
      })
      const written = yield* SessionStore.readFile(log)
      expect(written.events.filter((e) => e.type === "approval/decided").map((e) => (e.data as { outcome: string }).outcome))
        .toEqual(["allowed-once"])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("a sub-agent scenario (§27) with --store: every session of the run, the child's too, as <id>.jsonl that the JSONL store and transcript read", () =>
    Effect.gen(function*() {
      const file = Path.resolve("test/scenarios/subagent/approval.json")
      const dir = tmpDir()
      const [out, store] = [Path.join(dir, "log.jsonl"), Path.join(dir, "sessions")]
      expect(yield* cli(["simulate", file, "--out", out, "--store", store])).toEqual({ code: 0, out: "", err: "" })
      const text = Fs.readFileSync(file, "utf8")
      const expected = yield* Simulator.run(Either.getOrThrow(Scenario.parse(text)), { seed: Scenario.seedOf(text) })
      const [parent, child] = [expected.header.id, expected.children[0]!.header.id]
      expect(Fs.readFileSync(out, "utf8")).toBe(expected.log)
      expect(Fs.readdirSync(store).sort()).toEqual([`${child}.jsonl`, `${parent}.jsonl`].sort())
      expect(Fs.readFileSync(Path.join(store, `${parent}.jsonl`), "utf8")).toBe(expected.log)
      expect(Fs.readFileSync(Path.join(store, `${child}.jsonl`), "utf8")).toBe(expected.children[0]!.log)
      // The JSONL store reads them as its own sessions, lineage and all.
      const read = yield* Effect.scoped(Effect.gen(function*() {
        const sessions = yield* SessionStore.SessionStore
        return { ids: yield* sessions.list, child: yield* sessions.read(child as never) }
      })).pipe(Effect.provide(SessionStore.layerJsonl({ directory: store })))
      expect(read.ids).toEqual([child, parent].sort())
      expect(read.child.header).toMatchObject({ parentSession: parent, parentCallId: "c1", delegationDepth: 1 })
      expect(Invariant.check(read.child.events, { header: read.child.header })).toEqual([])
      const transcript = yield* cli(["transcript", Path.join(store, `${parent}.jsonl`)])
      expect(transcript.code).toBe(0)
      expect(transcript.out).toContain(`⇒ subagent ${child} started via spawn`)
      // A second run replaces the files with the same bytes.
      expect(yield* cli(["simulate", file, "--out", out, "--store", store])).toEqual({ code: 0, out: "", err: "" })
      expect(Fs.readFileSync(Path.join(store, `${child}.jsonl`), "utf8")).toBe(expected.children[0]!.log)
      expect(Fs.readdirSync(store)).toHaveLength(2)
      // A --store that cannot be a directory exits 2 before the run.
      const under = Path.join(out, "sessions")
      expect(yield* cli(["simulate", file, "--store", under])).toEqual({
        code: 2,
        out: "",
        err: `--store ${under}: cannot create the directory: ${out} is not a directory (a regular file)`
      })
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("the agent-loop binary", () => {
  // The bundle of scripts/build-cli.js (§25): dist/cli/bin.js and its chunks.
  const bin = Path.resolve("dist/cli/bin.js")
  const hooks = Path.resolve("test/utils/moduleHooks.mjs")
  const spawn = (
    args: ReadonlyArray<string>,
    cwd: string,
    options: { readonly hide?: string; readonly env?: Record<string, string> } = {}
  ) =>
    Effect.async<{ code: number; stdout: string; stderr: string }>((resume) => {
      const argv = options.hide === undefined ? [bin, ...args] : ["--disable-warning=DEP0205", "--import", hooks, bin, ...args]
      const env = { ...process.env, ...options.env, ...(options.hide === undefined ? {} : { HIDE_PACKAGES: options.hide }) }
      // SIGKILL at the bound: a CLI stuck in a synchronous call (a recursive mkdir under /proc
      // was one) never handles SIGTERM.
      execFile(process.execPath, argv, { cwd, env, timeout: CLI_RUN_MS, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
        resume(Effect.succeed({ code: error ? (error as any).code ?? 1 : 0, stdout, stderr }))
      })
    })

  it.live(
    "a --store under /proc: exit 2 at once with one line naming it (it hung in Node's recursive mkdir, deaf to SIGTERM)",
    () =>
      Effect.gen(function*() {
        const dir = tmpDir()
        for (const argv of [["run", "--prompt", "hi"], ["demo"], ["acp"]]) {
          for (const store of ["/proc/agent-loop-nope", "/proc/agent-loop-nope/sessions"]) {
            expect([argv[0], yield* spawn([...argv, "--store", store], dir)]).toEqual([argv[0], {
              code: 2,
              stdout: "",
              stderr: `--store ${store}: cannot create the directory: /proc does not take new directories (ENOENT)\n`
            }])
          }
        }
        // /proc itself is a directory that takes no new file (before: `cannot write the session
        // log: cannot lock session "…" (/proc/….jsonl.lock): ENOENT: …`, after the run began).
        expect(yield* spawn(["run", "--prompt", "hi", "--store", "/proc"], dir)).toEqual({
          code: 2,
          stdout: "",
          stderr: "--store /proc: cannot create a file in it: it does not take new files (ENOENT)\n"
        })
      }),
    // Seven runs of the CLI one after another (each bounded by CLI_RUN_MS).
    7 * CLI_RUN_MS
  )

  /** Runs the CLI in a terminal of its own (util-linux `script`): its output as the terminal got it. */
  const inTerminal = (args: ReadonlyArray<string>, env: Record<string, string>) =>
    Effect.async<{ code: number; output: string }>((resume) => {
      const command = [process.execPath, bin, ...args].map((a) => `'${a}'`).join(" ")
      execFile(
        "script",
        ["-qec", command, "/dev/null"],
        { cwd: tmpDir(), env: { ...process.env, ...env }, timeout: CLI_RUN_MS, killSignal: "SIGKILL" },
        (error, stdout) => resume(Effect.succeed({ code: error ? (error as any).code ?? 1 : 0, output: stdout }))
      )
    })

  it.live(
    "--help: plain text in a pipe or with NO_COLOR, coloured on a terminal; its usage lines start with agent-loop; within 80 columns",
    () =>
      Effect.gen(function*() {
        // Wrapped to 80 columns between its flags (before, one line of 336).
        const usage = [
          "$ agent-loop run --prompt text [--instructions text] [--instructions-file text]",
          "    [--provider offline | openai-compat | anthropic | openai] [--base-url text]",
          "    [--model text] [--api-key-env text] [--context-window text]",
          "    [--compaction-reserve text] [--keep-recent-tokens text]",
          "    [--max-steps integer] [--ask tool...] [--subagent] [--subagent-fork]",
          "    [--mcp-config file] [--otlp-endpoint text] [--store directory]"
        ]
        // Before, the styling went into pipes and files, and the usage line read `$ run --prompt text …`.
        const piped = yield* spawn(["run", "--help"], tmpDir(), { env: { NO_COLOR: "" } })
        expect([piped.code, piped.stderr]).toEqual([0, ""])
        expect(piped.stdout.split("\n").slice(0, 15)).toEqual([
          "agent-loop",
          "",
          "agent-loop 0.1.0",
          "",
          "USAGE",
          "",
          ...usage,
          "",
          "DESCRIPTION",
          ""
        ])
        expect(piped.stdout).not.toContain("\u001b")
        expect(piped.stdout.split("\n").filter((line) => [...line].length > 80)).toEqual([])
        const root = yield* spawn(["--help"], tmpDir(), { env: { NO_COLOR: "" } })
        expect(root.stdout.split("\n").slice(0, 3)).toEqual([
          "agent-loop 0.1.0: an Effect-TS runtime for LLM agent loops.",
          "",
          "USAGE agent-loop <command> [options]"
        ])
        expect(root.stdout).not.toContain("\u001b")
        // A terminal gets the styling, unless NO_COLOR is set (not empty).
        const coloured = yield* inTerminal(["run", "--help"], { NO_COLOR: "" })
        expect(coloured.code).toBe(0)
        expect(coloured.output.split("\r\n").slice(0, 12)).toEqual([
          "\u001b[0;1m\u001b[0;37;1magent-loop\u001b[0;1m\u001b[0m",
          "",
          "agent-loop 0.1.0",
          "",
          "\u001b[0;1mUSAGE\u001b[0m",
          "",
          ...usage
        ])
        const plain = yield* inTerminal(["run", "--help"], { NO_COLOR: "1" })
        expect(plain.code).toBe(0)
        expect(plain.output.split("\r\n").slice(0, 12)).toEqual(piped.stdout.split("\n").slice(0, 12))
        expect(plain.output).not.toContain("\u001b")
      }),
    // Four runs of the CLI one after another.
    4 * CLI_RUN_MS
  )

  it.live(
    "@effect/cli's own errors: one line on stderr, exit 2; an integer option given abc says \"an integer\"",
    () =>
      Effect.gen(function*() {
        const dir = tmpDir()
        // Before: `'abc' is not a integer`, then an empty line.
        expect(yield* spawn(["run", "--prompt", "hi", "--max-steps", "abc"], dir)).toEqual({
          code: 2,
          stdout: "",
          stderr: "'abc' is not an integer\n"
        })
        expect(yield* spawn(["runner", "--port", "1.5"], dir)).toEqual({
          code: 2,
          stdout: "",
          stderr: "'1.5' is not an integer\n"
        })
        expect(yield* spawn(["nope"], dir)).toEqual({
          code: 2,
          stdout: "",
          stderr:
            "Invalid subcommand for agent-loop - use one of 'chat', 'run', 'resume', 'transcript', 'check', 'stats', 'pending', 'inspect', 'demo', 'simulate', 'runner', 'send', 'acp'\n"
        })
      }),
    3 * CLI_RUN_MS
  )

  it.live(
    "the built bin is executable by itself (npx agent-loop): its shebang runs it",
    () =>
      Effect.async<{ code: number; stdout: string }>((resume) => {
        // Executed directly, not through `node`: this needs the executable bit the build sets.
        execFile(bin, ["--version"], { timeout: CLI_RUN_MS }, (error, stdout) => {
          resume(Effect.succeed({ code: error ? (error as any).code ?? 1 : 0, stdout }))
        })
      }).pipe(Effect.map((r) => {
        expect((Fs.statSync(bin).mode & 0o111) !== 0).toBe(true)
        expect(r).toEqual({ code: 0, stdout: "0.1.0\n\n" })
      })),
    30_000
  )

  it.live(
    "demo (npm start): a followup calls a tool, a steer joins the turn, an inject waits for the next request; each fate shown",
    () =>
      Effect.gen(function*() {
        const cwd = tmpDir()
        const r = yield* spawn(["demo"], cwd)
        expect([r.code, r.stderr]).toEqual([0, ""])
        const log = /session log: (\S+)/.exec(r.stdout)![1]!
        const time = /← (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)\n/.exec(r.stdout)![1]!
        expect(r.stdout.split("\n")).toEqual([
          "effect-agent-loop demo: one agent on the offline model (rule-based, no network).",
          "1. followup \"Please wait 1 second.\" while idle: starts turn 1; the model calls the wait tool.",
          "2. steer \"Also tell me the time.\" while wait runs: joins turn 1 at its next step.",
          "3. inject \"The user is on branch main.\" (plugin:git) while idle: does not wake the agent;",
          "   it waits in the inbox and enters the next model request.",
          "4. followup \"What do you know so far?\": starts turn 2, the injected context beside it.",
          "",
          "── turn 1 ──",
          "> Please wait 1 second.",
          "I received 1 message in this step: 1 from you (\"Please wait 1 second.\").",
          "→ wait({\"seconds\":1})",
          "← waited 1 second",
          "> Also tell me the time.",
          "Tool result (call_1_1_1): \"waited 1 second\"",
          "I received 1 message in this step: 1 from you (\"Also tell me the time.\").",
          "→ clock({})",
          `← ${time}`,
          `Tool result (call_1_2_1): "${time}"`,
          "turn 1 ended: completed",
          "── turn 2 ──",
          "[context from plugin:git] The user is on branch main.",
          "> What do you know so far?",
          "I received 2 messages in this step: 1 from you (\"What do you know so far?\"); context from plugin:git (\"The user is on branch main.\").",
          "turn 2 ended: completed",
          "",
          "fates (status right after the inject: idle):",
          "  followup \"Please wait 1 second.\"        entered turn 1, step 1",
          "  steer    \"Also tell me the time.\"       entered turn 1, step 2",
          "  inject   \"The user is on branch main.\"  entered turn 2, step 1",
          "  followup \"What do you know so far?\"     entered turn 2, step 1",
          "",
          `session log: ${log}`,
          `replay it with: npx agent-loop transcript ${log}`,
          ""
        ])
        expect(log.startsWith(Path.join(cwd, ".agent-loop/sessions/"))).toBe(true)
        const check = yield* spawn(["check", log], cwd)
        expect(check.code).toBe(0)
      }),
    30_000
  )

  it.live(
    "a log line nested 10,000 levels deep: check, transcript and resume exit 2 naming the line, no stack trace",
    () =>
      Effect.gen(function*() {
        const dir = tmpDir()
        const file = Path.join(dir, "deep.jsonl")
        const header = JSON.stringify({ type: "session", format: "effect-agent-loop", version: 1, id: "deep", createdAt: 0 })
        const nest = "[".repeat(10_000) + "]".repeat(10_000)
        Fs.writeFileSync(file, `${header}\n{"type":"x/y","seq":0,"time":0,"data":${nest}}\n`)
        const before = Fs.readFileSync(file, "utf8")
        for (const command of ["check", "transcript", "resume"]) {
          const r = yield* spawn([command, file], dir)
          expect([command, r]).toEqual([command, {
            code: 2,
            stdout: "",
            stderr: `${file}, line 2: nested deeper than 256 levels of arrays and objects (the reader's limit)\n`
          }])
        }
        expect(Fs.readFileSync(file, "utf8")).toBe(before)
        expect(Fs.readdirSync(dir)).toEqual(["deep.jsonl"])
      }),
    30_000
  )

  it.live(
    "simulate: a delivery the scenario could not make (a source nested too deep) exits 2 after writing the log",
    () =>
      Effect.gen(function*() {
        const dir = tmpDir()
        let deep: unknown = []
        for (let i = 0; i < 300; i++) deep = [deep]
        const scenario = Path.join(dir, "s.json")
        Fs.writeFileSync(
          scenario,
          JSON.stringify({
            model: [{ text: "ok" }],
            actions: [{ at: 0, followup: "hello" }, { at: 1, inject: { text: "deep", source: { kind: "plugin", deep } } }]
          })
        )
        const r = yield* spawn(["simulate", scenario, "--out", Path.join(dir, "log.jsonl")], dir)
        expect(r).toEqual({
          code: 2,
          stdout: "",
          stderr: `${scenario}: action 1 (inject at 1 ms) failed: InvalidMessage\n${scenario}: 1 delivery failed (see above)\n`
        })
        const check = yield* spawn(["check", Path.join(dir, "log.jsonl")], dir)
        expect([check.code, check.stdout]).toEqual([0, `${Path.join(dir, "log.jsonl")}: ok (9 events)\n`])
      }),
    30_000
  )

  it.live(
    "what is not a regular file is refused at once: run's read_file of a fifo, check/transcript/resume/simulate of a fifo, check /dev/zero",
    () =>
      Effect.gen(function*() {
        // Before, each of these hung (opening a fifo blocks until a writer comes) and ignored
        // SIGTERM; /dev/zero was read until memory ran out.
        const dir = tmpDir()
        const fifo = Path.join(dir, "pipe.jsonl")
        expect(spawnSync("mkfifo", [fifo]).status).toBe(0)
        const run = yield* spawn(["run", "--prompt", "read file pipe.jsonl", "--store", Path.join(dir, "store")], dir)
        expect(run.code).toBe(0)
        expect(run.stdout).toContain("← error: Tool read_file failed: pipe.jsonl is not a regular file (a fifo)")
        for (const command of ["check", "transcript", "resume"]) {
          const r = yield* spawn([command, fifo], dir)
          expect([command, r]).toEqual([command, {
            code: 2,
            stdout: "",
            stderr: `${fifo}: cannot read: not a regular file (a fifo)\n`
          }])
        }
        expect(yield* spawn(["simulate", fifo], dir)).toEqual({
          code: 2,
          stdout: "",
          stderr: `${fifo}: cannot read: not a regular file (a fifo)\n`
        })
        expect(yield* spawn(["check", "/dev/zero"], dir)).toEqual({
          code: 2,
          stdout: "",
          stderr: "/dev/zero: cannot read: not a regular file (a character device)\n"
        })
      }),
    // Eight runs of the CLI one after another: 26.4 s measured under load, close to the 30 s it had.
    90_000
  )

  it.live("an unknown flag exits 2", () =>
    Effect.gen(function*() {
      const r = yield* spawn(["transcript", "--nope"], tmpDir())
      expect(r.code).toBe(2)
    }), 30_000)

  it.live(
    "chat without ink or react installed: exit 2 naming the packages and the versions to install, no stack trace",
    () =>
      Effect.gen(function*() {
        // The hook resolves these packages from a directory without node_modules: Node's own
        // ERR_MODULE_NOT_FOUND, as in a project that did not install the optional peers.
        expect(Fs.existsSync("/node_modules/ink") || Fs.existsSync("/node_modules/react")).toBe(false)
        const both = yield* spawn(["chat", "--store", tmpDir()], tmpDir(), { hide: "ink,react" })
        expect(both).toEqual({
          code: 2,
          stdout: "",
          stderr:
            "agent-loop chat needs ink and react (optional peer dependencies of effect-agent-loop), which are not installed: npm install ink@6.8.0 react@19.3.1\n"
        })
        const react = yield* spawn(["chat"], tmpDir(), { hide: "react" })
        expect(react).toEqual({
          code: 2,
          stdout: "",
          stderr:
            "agent-loop chat needs react (an optional peer dependency of effect-agent-loop), which is not installed: npm install react@19.3.1\n"
        })
        // The other commands do not need them.
        const help = yield* spawn(["--help"], tmpDir(), { hide: "ink,react" })
        expect([help.code, help.stderr]).toEqual([0, ""])
      }),
    30_000
  )

  it.live(
    "--help and run (offline) load none of the cluster's code (@effect/cluster, @effect/rpc, @effect/sql, @effect/sql-pg, pg); send does",
    () =>
      Effect.gen(function*() {
        // Bundled: each package is recognised in the files a command loads by a string of its own.
        const markers = ["@effect/cluster/", "@effect/rpc/", "@effect/sql/", "@effect/sql-pg/", "SCRAM-SHA-256"]
        const loads = (args: ReadonlyArray<string>) =>
          Effect.gen(function*() {
            const cwd = tmpDir()
            const record = Path.join(cwd, "imports.txt")
            const r = yield* spawn(args, cwd, { hide: "", env: { RECORD_IMPORTS_FILE: record } })
            const files = Fs.readFileSync(record, "utf8").split("\n").filter((u) => u.startsWith("file://"))
            const text = [...new Set(files)].map((u) => Fs.readFileSync(new URL(u), "utf8")).join("\n")
            return { code: r.code, found: markers.filter((m) => text.includes(m)) }
          })
        expect(yield* loads(["--help"])).toEqual({ code: 0, found: [] })
        const dir = tmpDir()
        expect(yield* loads(["run", "--prompt", "hello", "--store", dir])).toEqual({ code: 0, found: [] })
        const port = yield* closedPort
        expect(yield* loads(["send", "--pg", `postgres://127.0.0.1:${port}/x`, "--session", "s", "--followup", "hi"])).toEqual({
          code: 2,
          found: markers
        })
      }),
    30_000
  )

  it.live(
    "the bundle loads its provider chunks on first use: openai-compat and openai (@effect/ai-openai, bundled) against a loopback replay",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const compat = yield* replayServer([{ file: "vllm-stream-text-usage-chunk.sse" }])
        const cwd = tmpDir()
        const a = yield* spawn([
          "run",
          "--prompt",
          "count",
          "--provider",
          "openai-compat",
          "--base-url",
          compat.baseUrl,
          "--model",
          "m",
          "--store",
          cwd
        ], cwd)
        expect([a.code, a.stderr]).toEqual([0, ""])
        expect(a.stdout).toContain("1, 2, 3, 4, 5")
        const responses = yield* replayServer({ body: textResponse("Hello from the bundle."), splitEvery: 29 })
        const b = yield* spawn(
          [
            "run",
            "--prompt",
            "say hello",
            "--provider",
            "openai",
            "--base-url",
            responses.baseUrl,
            "--model",
            "gpt-5-mini",
            "--store",
            cwd
          ],
          cwd,
          { env: { OPENAI_API_KEY: "sk-bundle-test" } }
        )
        expect([b.code, b.stderr]).toEqual([0, ""])
        expect(b.stdout).toContain("Hello from the bundle.")
        expect(responses.requests.map((r) => [r.url, r.headers.authorization])).toEqual([[
          "/v1/responses",
          "Bearer sk-bundle-test"
        ]])
      })),
    30_000
  )

  describe.skipIf(mountRefused !== undefined)("on a store that cannot be written (a small tmpfs)", () => {
    it.live(
      "run whose log write fails mid-turn (disk full): exit 2 with one line naming the session and ENOSPC, no stack trace; the log stays valid",
      () =>
        Effect.scoped(Effect.gen(function*() {
          const store = yield* tmpfs("64k")
          // Two free pages: one for the lock file, one for the log. The tool result (about 12 KB)
          // does not fit, so the append of the turn's tool result fails.
          Fs.writeFileSync(Path.join(store, "filler"), Buffer.alloc(14 * 4096))
          const cwd = tmpDir()
          Fs.writeFileSync(Path.join(cwd, "big.txt"), "0123456789abcdef".repeat(750) + "\n")
          const r = yield* spawn(["run", "--prompt", "read file big.txt", "--store", store], cwd)
          const line =
            /^cannot write the session log (\S+\.jsonl): cannot append to session "([0-9a-f-]+)": ENOSPC: no space left on device, write\n$/
              .exec(r.stderr)
          expect([r.code, line !== null]).toEqual([2, true])
          expect(r.stdout).toContain("→ read_file({\"path\":\"big.txt\"})")
          expect(r.stdout).toContain(`session log: ${line![1]}`)
          expect(r.stdout).not.toMatch(/ERROR|SessionStoreError|\n\s+at /)
          expect(Path.basename(line![1]!, ".jsonl")).toBe(line![2])
          const contents = yield* SessionStore.readFile(line![1]!).pipe(Effect.provide(NodeContext.layer))
          expect(contents.warnings).toEqual([])
          expect(contents.events.at(-1)?.type).toBe("tool/call")
        })),
      30_000
    )

    it.live(
      "a read-only store: run is refused before it starts (--store), resume exits 2 naming the session and EROFS; check still reads the log",
      () =>
        Effect.scoped(Effect.gen(function*() {
          const store = yield* tmpfs("256k")
          const cwd = tmpDir()
          const first = yield* spawn(["run", "--prompt", "hello", "--store", store], cwd)
          expect(first.code).toBe(0)
          const file = /session log: (\S+)/.exec(first.stdout)![1]!
          const id = Path.basename(file, ".jsonl")
          remount(store, "ro")
          const run = yield* spawn(["run", "--prompt", "hello", "--store", store], cwd)
          // Refused before the run (before, `cannot write the session log: cannot lock session …: EROFS: …`).
          expect(run).toEqual({
            code: 2,
            stdout: "",
            stderr: `--store ${store}: cannot create a file in it: read-only file system\n`
          })
          const resume = yield* spawn(["resume", file, "--continue-pending"], cwd)
          expect(resume).toEqual({
            code: 2,
            stdout: "",
            stderr: `${file}: cannot lock session "${id}" (${file}.lock): EROFS: read-only file system, open '${file}.lock'\n`
          })
          expect((yield* spawn(["check", file], cwd)).code).toBe(0)
        })),
      30_000
    )
  })
})
