/**
 * `--mcp-config FILE` end to end (§28; src/cli/commands/mcpFlag.ts): the built CLI runs the
 * offline model, which calls any tool of its request named in "call TOOL with {JSON}", against
 * the published `@modelcontextprotocol/server-everything` over stdio (started with this Node, not
 * npx). Each run is a child process bounded by `CLI_RUN_MS`.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile, spawn as spawnChild } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import { UserMessage } from "../src/Message.js"
import * as SessionStore from "../src/SessionStore.js"
import { CHILD_WAIT_MS, CLI_RUN_MS } from "./utils/bounds.js"
import { pollUntil } from "./utils/poll.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const bin = Path.resolve("dist/cli/bin.js")
const hooks = Path.resolve("test/utils/moduleHooks.mjs")
const everything = Path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const tmpDir = scratchDirs("agent-loop-cli-mcp-")
const until = pollUntil("CliMcp")

/** Runs the built CLI in `cwd` to its end (`hide`: packages made missing by the module hooks). */
const spawn = (args: ReadonlyArray<string>, cwd: string, hide?: string) =>
  Effect.async<{ code: number; stdout: string; stderr: string }>((resume) => {
    const argv = hide === undefined ? [bin, ...args] : ["--disable-warning=DEP0205", "--import", hooks, bin, ...args]
    const env = { ...process.env, ...(hide === undefined ? {} : { HIDE_PACKAGES: hide }) }
    execFile(process.execPath, argv, { cwd, env, timeout: CLI_RUN_MS, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
      resume(Effect.succeed({ code: error ? (error as any).code ?? 1 : 0, stdout, stderr }))
    })
  })

/** A directory with `cfg.json` holding `mcpServers`; returns the directory. */
const withConfig = (mcpServers: unknown) => {
  const dir = tmpDir()
  Fs.writeFileSync(Path.join(dir, "cfg.json"), JSON.stringify({ mcpServers }, null, 2))
  return dir
}

/** server-everything over stdio, with `settings` (`approval`, …). */
const everythingEntry = (settings: Record<string, unknown> = {}) => ({
  command: process.execPath,
  args: [everything, "stdio"],
  ...settings
})

const PROMPT = "call everything__echo with {\"message\":\"hi\"}"

/** The transcript `run` prints up to the call, and the session log's path. */
const head = [
  "── turn 1 ──",
  `> ${PROMPT}`,
  `I received 1 message in this step: 1 from you ("${PROMPT}").`,
  "→ everything__echo({\"message\":\"hi\"})"
]

/** `stdout` without its last line, `session log: PATH`; and that path. */
const split = (stdout: string) => {
  const lines = stdout.trimEnd().split("\n")
  const last = /^session log: (\S+)$/.exec(lines.at(-1) ?? "")
  expect(last, stdout).not.toBeNull()
  return { lines: lines.slice(0, -1), log: last![1]! }
}

/** The events of a log, read with the real reader; its invariants hold. */
const readLog = (path: string) =>
  Effect.gen(function*() {
    const contents = yield* SessionStore.readFile(path)
    expect(Invariant.check(contents.events, { header: contents.header })).toEqual([])
    return contents.events
  }).pipe(Effect.provide(NodeContext.layer), Effect.orDie)

describe("agent-loop run --mcp-config", () => {
  it.live(
    "a server with approval \"never\": the offline model calls everything__echo and the transcript shows its result",
    () =>
      Effect.gen(function*() {
        const dir = withConfig({ everything: everythingEntry({ approval: "never" }) })
        const ran = yield* spawn(["run", "--mcp-config", "cfg.json", "--prompt", PROMPT, "--store", "s"], dir)
        expect([ran.code, ran.stderr]).toEqual([0, ""])
        const { lines, log } = split(ran.stdout)
        expect(lines).toEqual([
          ...head,
          "← Echo: hi",
          "Tool result (call_1_1_1): \"Echo: hi\"",
          "turn 1 ended: completed",
          ""
        ])
        const events = yield* readLog(log)
        // The request offered the server's tools: the header lists them after the offline ones.
        const header = events.find((e) => e.type === "request/header")!.data as { tools: ReadonlyArray<{ name: string }> }
        expect(header.tools.map((t) => t.name).slice(0, 4)).toEqual(["wait", "clock", "read_file", "everything__echo"])
        expect(events.filter((e) => e.type === "tool/result").map((e) => (e.data as any).message.content[0])).toEqual([
          { type: "tool-result", toolCallId: "call_1_1_1", content: [{ type: "text", text: "Echo: hi" }], isError: false }
        ])
      }),
    2 * CLI_RUN_MS
  )

  it.live(
    "by default a server's call asks for approval: run exits 5 with the open question naming everything__echo",
    () =>
      Effect.gen(function*() {
        const dir = withConfig({ everything: everythingEntry() })
        const ran = yield* spawn(["run", "--mcp-config", "cfg.json", "--prompt", PROMPT, "--store", "s"], dir)
        expect(ran.code).toBe(5)
        const { lines, log } = split(ran.stdout)
        expect(lines).toEqual([...head, "? everything__echo needs approval", ""])
        const id = Path.basename(log, ".jsonl")
        const [question, waiting, ...rest] = ran.stderr.split("\n")
        expect(question).toMatch(
          /^question [0-9a-f-]{36}: everything__echo \{"message":"hi"\} \(call call_1_1_1, turn 1\.1, asked \d{4}-\d\d-\d\dT[\d:.]+Z\)$/
        )
        expect([waiting, ...rest]).toEqual([
          `the turn waits for approval: session ${id} is left waiting (agent-loop pending --store ${
            Path.join(dir, "s")
          } lists its questions; agent-loop chat --store ${Path.join(dir, "s")} --session ${id} answers them)`,
          ""
        ])
      }),
    2 * CLI_RUN_MS
  )

  it.live(
    "--ask SERVER__TOOL asks for a trusted server's tool; a name no server lists exits 2 naming the tools",
    () =>
      Effect.gen(function*() {
        const dir = withConfig({ everything: everythingEntry({ approval: "never" }) })
        const asked = yield* spawn(
          ["run", "--mcp-config", "cfg.json", "--ask", "everything__echo", "--prompt", PROMPT, "--store", "s"],
          dir
        )
        expect(asked.code).toBe(5)
        expect(split(asked.stdout).lines).toEqual([...head, "? everything__echo needs approval", ""])
        const typo = yield* spawn(["run", "--mcp-config", "cfg.json", "--ask", "everything__ech", "--prompt", PROMPT], dir)
        expect(typo.code).toBe(2)
        expect(typo.stdout).toBe("")
        expect(typo.stderr).toMatch(
          /^--ask everything__ech: no tool of that name \(the tools are wait, clock, read_file, everything__echo, everything__get-annotated-message, .*\)\n$/
        )
        // A name of no server's form is refused before anything starts.
        expect(yield* spawn(["run", "--mcp-config", "cfg.json", "--ask", "nope", "--prompt", PROMPT], dir)).toEqual({
          code: 2,
          stdout: "",
          stderr:
            "--ask nope: no tool of that name (the tools are wait, clock, read_file, and the MCP servers' tools (everything__TOOL))\n"
        })
      }),
    4 * CLI_RUN_MS
  )

  it.live(
    "a server that fails to start is one warning line on stderr, and the run goes on with the others",
    () =>
      Effect.gen(function*() {
        const dir = withConfig({
          broken: { command: "/nonexistent/agent-loop-mcp-server", env: { TOKEN: "s3cret-value" } },
          everything: everythingEntry({ approval: "never" })
        })
        const ran = yield* spawn(["run", "--mcp-config", "cfg.json", "--prompt", PROMPT, "--store", "s"], dir)
        expect(ran.code).toBe(0)
        expect(ran.stderr).toBe(
          "mcp: server \"broken\" failed: could not start: spawn /nonexistent/agent-loop-mcp-server ENOENT\n"
        )
        expect(split(ran.stdout).lines.slice(-4)).toEqual([
          "← Echo: hi",
          "Tool result (call_1_1_1): \"Echo: hi\"",
          "turn 1 ended: completed",
          ""
        ])
      }),
    2 * CLI_RUN_MS
  )

  it.live("--subagent: a child has the servers' tools too (the same connection)", () =>
    Effect.gen(function*() {
      const dir = withConfig({ everything: everythingEntry({ approval: "never" }) })
      const args = ["run", "--subagent", "--mcp-config", "cfg.json", "--prompt", `ask a sub-agent to ${PROMPT}`, "--store", "s"]
      const ran = yield* spawn(args, dir)
      expect([ran.code, ran.stderr]).toEqual([0, ""])
      const { lines } = split(ran.stdout)
      const child = /^⇒ subagent (\S+) started via spawn$/.exec(lines[4] ?? "")?.[1]
      expect(lines.slice(3, 7)).toEqual([
        `→ subagent(${JSON.stringify({ prompt: PROMPT })})`,
        `⇒ subagent ${child} started via spawn`,
        `⇐ subagent ${child} ended: completed: Tool result (call_1_1_1): "Echo: hi"`,
        "← Tool result (call_1_1_1): \"Echo: hi\""
      ])
      const events = yield* readLog(Path.join(dir, "s", `${child}.jsonl`))
      expect(events.filter((e) => e.type === "tool/call").map((e) => (e.data as any).name)).toEqual(["everything__echo"])
    }), 2 * CLI_RUN_MS)

  it.live(
    "a bad configuration exits 2 before anything starts, one line per problem with its key path, no secret",
    () =>
      Effect.gen(function*() {
        const dir = withConfig({
          files: { command: "npx", args: "-y @modelcontextprotocol/server-filesystem ." },
          github: { url: "https://api.example.com/mcp", headers: { Authorization: 42, "X-Key": "s3cret-value" } }
        })
        expect(yield* spawn(["run", "--mcp-config", "cfg.json", "--prompt", PROMPT, "--store", "s"], dir)).toEqual({
          code: 2,
          stdout: "",
          stderr: [
            "--mcp-config cfg.json: mcpServers.files.args: expected an array of strings, got a string",
            "--mcp-config cfg.json: mcpServers.github.headers.Authorization: expected a string, got a number",
            ""
          ].join("\n")
        })
        expect(Fs.existsSync(Path.join(dir, "s"))).toBe(false)
        expect(yield* spawn(["run", "--mcp-config", "nope.json", "--prompt", PROMPT], dir)).toEqual({
          code: 2,
          stdout: "",
          stderr: "--mcp-config nope.json: cannot read: no such file\n"
        })
      }),
    3 * CLI_RUN_MS
  )

  it.live(
    "without the MCP SDK installed: exit 2 with the npm install line (nothing else needs it)",
    () =>
      Effect.gen(function*() {
        const dir = withConfig({ everything: everythingEntry() })
        expect(
          yield* spawn(
            ["run", "--mcp-config", "cfg.json", "--prompt", PROMPT, "--store", "s"],
            dir,
            "@modelcontextprotocol/client"
          )
        )
          .toEqual({
            code: 2,
            stdout: "",
            stderr:
              "agent-loop run --mcp-config needs @modelcontextprotocol/client (an optional peer dependency of effect-agent-loop), which is not installed: npm install @modelcontextprotocol/client@2.4.0\n"
          })
        const plain = yield* spawn(["run", "--prompt", "what time is it", "--store", "s"], dir, "@modelcontextprotocol/client")
        expect([plain.code, plain.stderr]).toEqual([0, ""])
      }),
    3 * CLI_RUN_MS
  )
})

describe("agent-loop resume --continue-pending --mcp-config", () => {
  it.live(
    "a queued followup that calls an MCP tool runs with the file's servers; without them there is no such tool",
    () =>
      Effect.gen(function*() {
        const dir = withConfig({ everything: everythingEntry({ approval: "never" }) })
        const queued = (id: string) =>
          Effect.gen(function*() {
            const log = yield* (yield* SessionStore.SessionStore).create({ id })
            const m = yield* UserMessage.make({ text: PROMPT, source: { kind: "user" } })
            yield* log.append([{ type: "agent/inbox/spliced", data: { target: "next-turn", start: 0, inserted: [m] } }])
            return log.path!
          }).pipe(
            Effect.scoped,
            Effect.provide(SessionStore.layerJsonl({ directory: Path.join(dir, "s") })),
            Effect.provide(NodeContext.layer),
            Effect.provide(IdGenerator.layer),
            Effect.orDie
          )
        const resultsOf = (path: string) =>
          Effect.map(readLog(path), (events) =>
            events.filter((e) => e.type === "tool/result").map((e) => {
              const d = e.data as any
              return [d.message.content[0].content[0].text, d.error?.code ?? null]
            }))
        const withServers = yield* queued("with-servers")
        const ran = yield* spawn(["resume", withServers, "--continue-pending", "--mcp-config", "cfg.json"], dir)
        expect([ran.code, ran.stderr]).toEqual([0, ""])
        expect(ran.stdout).toContain("← Echo: hi")
        expect(yield* resultsOf(withServers)).toEqual([["Echo: hi", null]])
        const without = yield* queued("without-servers")
        const bare = yield* spawn(["resume", without, "--continue-pending"], dir)
        expect(bare.code).toBe(0)
        // Without the servers the request has no such tool: the offline model does not call it.
        expect(bare.stdout).not.toContain("→ everything__echo")
        expect(yield* resultsOf(without)).toEqual([])
      }),
    3 * CLI_RUN_MS
  )
})

describe("agent-loop acp --mcp-config", () => {
  it.live(
    "every session's agent has the file's servers' tools: a prompt's call of everything__echo completes with its result",
    () =>
      Effect.promise(async () => {
        const dir = withConfig({
          everything: everythingEntry({ approval: "never" }),
          broken: { command: "/nonexistent/agent-loop-mcp-server" }
        })
        const child = spawnChild(process.execPath, [bin, "acp", "--store", "s", "--mcp-config", "cfg.json"], {
          cwd: dir,
          stdio: "pipe"
        })
        let stderr = ""
        let stdout = ""
        child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
        const exited = new Promise<number | null>((resolve) => child.on("exit", resolve))
        const messages = () => stdout.split("\n").filter((line) => line !== "").map((line) => JSON.parse(line))
        const answer = async (id: number) => {
          await until(`the answer to request ${id}`, () => messages().some((m) => m.id === id), CHILD_WAIT_MS)
          return messages().find((m) => m.id === id)
        }
        const send = (id: number, method: string, params: unknown) =>
          child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n")
        try {
          send(1, "initialize", { protocolVersion: 1, clientCapabilities: {} })
          expect((await answer(1)).result.protocolVersion).toBe(1)
          for (const id of [2, 3]) send(id, "session/new", { cwd: dir, mcpServers: [] })
          const sessions = [(await answer(2)).result.sessionId, (await answer(3)).result.sessionId]
          for (const [i, sessionId] of sessions.entries()) {
            send(4 + i, "session/prompt", { sessionId, prompt: [{ type: "text", text: PROMPT }] })
            expect((await answer(4 + i)).result.stopReason).toBe("end_turn")
            const calls = messages().filter((m) =>
              m.method === "session/update" && m.params.sessionId === sessionId &&
              m.params.update.sessionUpdate.startsWith("tool_call")
            ).map((m) => m.params.update)
            expect(calls).toEqual([
              {
                sessionUpdate: "tool_call",
                toolCallId: "call_1_1_1",
                title: "everything__echo",
                name: "everything__echo",
                kind: "other",
                status: "pending",
                rawInput: { message: "hi" }
              },
              { sessionUpdate: "tool_call_update", toolCallId: "call_1_1_1", status: "in_progress" },
              {
                sessionUpdate: "tool_call_update",
                toolCallId: "call_1_1_1",
                status: "completed",
                content: [{ type: "content", content: { type: "text", text: "Echo: hi" } }],
                rawOutput: { isError: false, text: "Echo: hi" }
              }
            ])
          }
        } catch (e) {
          child.kill("SIGKILL")
          throw e
        } finally {
          child.stdin.end()
        }
        await until("the exit once stdin ended", () => child.exitCode !== null, CHILD_WAIT_MS).catch((e) => {
          child.kill("SIGKILL")
          throw e
        })
        expect(await exited).toBe(0)
        expect(stderr).toBe("mcp: server \"broken\" failed: could not start: spawn /nonexistent/agent-loop-mcp-server ENOENT\n")
      }),
    2 * CLI_RUN_MS
  )
})
