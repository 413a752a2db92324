/**
 * MCP servers that fail (§28): each fault is an `McpError` with its reason (in the server's
 * status) and, for a call, an error tool result; never a failed agent, never a hang. The servers
 * are the test's own (test/utils/mcp/): `sdkServer.mjs` (the SDK's server, logging its starts,
 * calls and cancellations) and `rawServer.mjs` (raw JSON-RPC lines, misbehaving as asked).
 * Our own timeouts run on the TestClock (`TestClock.adjust` once the server has the request);
 * the processes run in real time, every wait for them bounded (test/utils/mcp.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as Mcp from "../src/Mcp.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import { bareToolContext, layer as agentLayer } from "./utils/agent.js"
import { EVERYTHING, gone, kill, lines, own, pids, raw, results, text, until, within } from "./utils/mcp.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const scratch = scratchDirs("effect-agent-loop-mcp-faults-")

/** Runs the agent's turn to its end (bounded: its calls go to real servers). */
const turn = (agent: Agent.Agent, input: string) =>
  Effect.zipRight(agent.followup(input), within(`the turn "${input}" ended`)(agent.awaitIdle))

/** The number of lines of `log` that are `line`. */
const count = (log: string, line: string) => lines(log).filter((l) => l === line).length

/** The JSON-RPC messages a raw server read, by method. */
const received = (log: string, method: string) =>
  lines(log).filter((line) => line.startsWith("{")).map((line) => JSON.parse(line)).filter((m) => m.method === method)

/** A server's status without its tools: `[name, state, reason, message]`. */
const statusOf = (mcp: Mcp.McpConnection) => mcp.servers().map((s) => [s.name, s.state, s.error?.reason, s.error?.message])

/** The tool names of each `request/header` of a log. */
const headerTools = (agent: Agent.Agent) =>
  agent.log.events().filter((e) => e.type === "request/header").map((e) => (e.data as any).tools.map((t: any) => t.name))

describe("MCP faults: starting and initializing", () => {
  it.scoped("a Node server that crashes: its error line is quoted, not only the stack's end; a URL's query values are secrets", () =>
    Effect.gen(function*() {
      const mcp = yield* within("both failed")(Mcp.connect([
        { type: "stdio", name: "crash", command: process.execPath, args: ["-e", "require('no-such-module-here')"] },
        { type: "http", name: "down", url: "http://127.0.0.1:9/mcp?token=qs-secret-123", connectTimeoutMs: 5_000 }
      ]))
      const [crash, down] = mcp.servers()
      expect(crash!.error!.message).toMatch(
        /^MCP server "crash" exited before it initialized \(stderr: Error: Cannot find module 'no-such-module-here' \| .+ \| Node\.js v\d+\.\d+\.\d+\)$/
      )
      expect(down!.state).toBe("failed")
      expect(down!.error!.message).not.toContain("qs-secret-123")
    }))

  it.effect("a bad configuration fails connect (config) before anything starts", () =>
    Effect.gen(function*() {
      const connect = (servers: ReadonlyArray<Mcp.ServerConfig>) => Effect.flip(Effect.scoped(Mcp.connect(servers)))
      const same = { type: "stdio", name: "a", command: "true" } as const
      expect(yield* connect([same, same])).toEqual(
        new Mcp.McpError({ server: "a", reason: "config", message: "MCP server \"a\": two servers have this name" })
      )
      expect(yield* connect([{ type: "stdio", name: " ", command: "x" }])).toMatchObject({
        reason: "config",
        message: "MCP server \" \": the name is empty"
      })
      expect(yield* connect([{ type: "http", name: "w", url: "ftp://127.0.0.1/mcp" }])).toMatchObject({
        reason: "config",
        message: "MCP server \"w\": the url is not http or https"
      })
      expect(yield* connect([{ type: "http", name: "u", url: "http://me:pw-secret@127.0.0.1:9/mcp" }])).toMatchObject({
        reason: "config",
        message: "MCP server \"u\": the url has a user name or password (fetch refuses them): give credentials in headers"
      })
      expect(yield* connect([{ type: "stdio", name: "a.b", command: "x" }, { type: "stdio", name: "a_b", command: "x" }]))
        .toMatchObject({
          reason: "config",
          message: "MCP server \"a_b\": its tools would have the names of server \"a.b\"'s (both are a_b__TOOL)"
        })
    }))

  it.scoped("a missing command (start), an exit before initializing (start, with its stderr), an initialize answered with an error (initialize) or with a message that is not JSON-RPC (malformed): failed, the others serve", () => {
    const dir = scratch()
    const model = ScriptedModel.make([
      {
        toolCalls: [
          { id: "ghost", name: "ghost__echo", arguments: {} },
          { id: "ok", name: "own__echo", arguments: { text: "still served" } }
        ]
      },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("five servers connected or failed")(Mcp.connect([
        { type: "stdio", name: "ghost", command: "/nonexistent/mcp-server", approval: "never" },
        raw("exit-before-init", Path.join(dir, "exit.log"), { name: "quitter" }),
        raw("init-error", Path.join(dir, "refuse.log"), { name: "refuser" }),
        raw("malformed-init", Path.join(dir, "garbled.log"), { name: "garbled" }),
        own(Path.join(dir, "own.log"), { approval: "never" })
      ]))
      expect(statusOf(mcp)).toEqual([
        ["ghost", "failed", "start", "MCP server \"ghost\" could not start: spawn /nonexistent/mcp-server ENOENT"],
        [
          "quitter",
          "failed",
          "start",
          "MCP server \"quitter\" exited before it initialized (stderr: fatal: no configuration found)"
        ],
        ["refuser", "failed", "initialize", "MCP server \"refuser\" refused initialization: this server speaks to nobody"],
        ["garbled", "failed", "malformed", "MCP server \"garbled\" sent a message that is not JSON-RPC (Invalid input)"],
        ["own", "connected", undefined, undefined]
      ])
      expect(mcp.servers().map((s) => s.tools.length)).toEqual([0, 0, 0, 0, 3])
      expect(mcp.servers()[4]!.server).toEqual({ name: "own", version: "1.2.3" })
      // The failed servers' processes are gone.
      for (const log of ["exit.log", "refuse.log", "garbled.log"]) {
        const [pid] = pids(Path.join(dir, log))
        yield* until(`${log}'s server gone`, () => gone(pid!))
      }
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* turn(agent, "go")
      expect(results(agent.log.events())).toEqual([
        ["ghost", "UNKNOWN_TOOL", [text("Unknown tool \"ghost__echo\". Available tools: own__echo, own__wait, own__add-tool.")]],
        ["ok", null, [text("echo: still served")]]
      ])
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("a server that never answers initialize: timeout after connectTimeoutMs (TestClock); its process is ended", () => {
    const log = Path.join(scratch(), "raw.log")
    return Effect.gen(function*() {
      const connecting = yield* Effect.fork(Mcp.connect([raw("never-init", log, { connectTimeoutMs: 5_000 })]))
      yield* until("initialize sent", () => received(log, "initialize").length === 1)
      yield* TestClock.adjust(5_000)
      const mcp = yield* within("connect ended")(Fiber.join(connecting))
      expect(statusOf(mcp)).toEqual([["raw", "failed", "timeout", "MCP server \"raw\" did not initialize within 5000 ms"]])
      expect(mcp.tools()).toEqual([])
      yield* until("the server's process ended", () => gone(pids(log)[0]!))
    })
  })
})

/** The pids of the processes whose environment has `MCP_TEST_MARKER=marker` (from `/proc`). */
const marked = (marker: string): Array<number> =>
  Fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).filter((entry) => {
    try {
      return Fs.readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(`MCP_TEST_MARKER=${marker}`)
    } catch {
      return false
    }
  }).map(Number)

describe("MCP faults: calls", () => {
  it.live("a busy server behind a launcher (sh -c) ends when its scope closes, not when its work is done", () =>
    Effect.gen(function*() {
      const marker = `${process.pid}-${Date.now()}`
      yield* Effect.scoped(Effect.gen(function*() {
        const mcp = yield* within("the launched server connected")(Mcp.connect([{
          type: "stdio",
          name: "launched",
          command: "sh",
          // `; exit` keeps sh as the server's parent (a lone command would be exec'd).
          args: ["-c", `"${process.execPath}" "${EVERYTHING}" stdio; exit $?`],
          env: { MCP_TEST_MARKER: marker },
          approval: "never"
        }]))
        expect(marked(marker)).toHaveLength(2)
        const tool = mcp.tools().find((t) => t.name === "launched__trigger-long-running-operation")!
        // Busy for 60 s; the scope closes while it works (the call's fiber interrupted first).
        yield* Effect.forkScoped(tool.execute({ duration: 60, steps: 1 }, bareToolContext))
        yield* Effect.sleep("300 millis")
      }))
      yield* until("the launcher and the server ended", () => marked(marker).length === 0)
    }))

  it.scoped("a server killed mid-call: the call fails exited, the next call restarts it; after maxRestarts restarts in a row that fail, gave-up and its tools are withdrawn", () => {
    const log = Path.join(scratch(), "own.log")
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "w1", name: "own__wait", arguments: {} }] },
      { toolCalls: [{ id: "e1", name: "own__echo", arguments: { text: "back" } }] },
      { text: "one" },
      { toolCalls: [{ id: "w2", name: "own__wait", arguments: {} }] },
      { toolCalls: [{ id: "w3", name: "own__wait", arguments: {} }] },
      { toolCalls: [{ id: "e2", name: "own__echo", arguments: { text: "anyone?" } }] },
      { text: "two" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("own server connected")(Mcp.connect([own(log, { approval: "never", maxRestarts: 1 })]))
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* agent.followup("one")
      yield* until("w1 running", () => count(log, "call wait") === 1)
      yield* kill(pids(log)[0]!)
      yield* within("turn one ended")(agent.awaitIdle)
      expect(results(agent.log.events())).toEqual([
        ["w1", "TOOL_FAILED", [text("Tool own__wait failed: MCP server \"own\" exited")]],
        ["e1", null, [text("echo: back")]]
      ])
      // Restarted once, and the call that succeeded reset the count.
      expect(pids(log)).toHaveLength(2)
      expect(mcp.servers().map((s) => [s.state, s.restarts, s.error])).toEqual([["connected", 0, undefined]])

      yield* agent.followup("two")
      yield* until("w2 running", () => count(log, "call wait") === 2)
      yield* kill(pids(log)[1]!)
      yield* until("w3 running on a restarted server", () => count(log, "call wait") === 3)
      expect(pids(log)).toHaveLength(3)
      yield* kill(pids(log)[2]!)
      yield* within("turn two ended")(agent.awaitIdle)
      const gaveUp = "MCP server \"own\" failed 2 times in a row and is not started again (maxRestarts: 1)"
      expect(results(agent.log.events()).slice(2)).toEqual([
        ["w2", "TOOL_FAILED", [text("Tool own__wait failed: MCP server \"own\" exited")]],
        ["w3", "TOOL_FAILED", [text("Tool own__wait failed: MCP server \"own\" exited")]],
        ["e2", "TOOL_FAILED", [text(`Tool own__echo failed: ${gaveUp}`)]]
      ])
      expect(pids(log)).toHaveLength(3)
      expect(statusOf(mcp)).toEqual([["own", "failed", "gave-up", gaveUp]])
      expect(mcp.servers()[0]!.tools).toEqual([])
      // The step after the one that gave up offers none of its tools.
      const headers = headerTools(agent)
      expect(headers[0]).toEqual(["own__echo", "own__wait", "own__add-tool"])
      expect(headers.at(-1)).toEqual([])
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("a server that never answers a call: timeout after timeoutMs (TestClock), and the request is cancelled", () => {
    const log = Path.join(scratch(), "raw.log")
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "w", name: "raw__wait", arguments: {} }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("raw server connected")(
        Mcp.connect([raw("never-answer", log, { approval: "never", timeoutMs: 5_000 })])
      )
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* agent.followup("go")
      yield* until("the call sent", () => received(log, "tools/call").length === 1)
      yield* TestClock.adjust(5_000)
      yield* within("the turn ended")(agent.awaitIdle)
      const message = "MCP server \"raw\" did not answer wait within 5000 ms; the call was cancelled"
      expect(results(agent.log.events())).toEqual([["w", "TOOL_FAILED", [text(`Tool raw__wait failed: ${message}`)]]])
      expect(statusOf(mcp)).toEqual([["raw", "connected", "timeout", message]])
      const [call] = received(log, "tools/call")
      yield* until("notifications/cancelled sent", () => received(log, "notifications/cancelled").length === 1)
      expect(received(log, "notifications/cancelled")[0].params.requestId).toBe(call.id)
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("a late answer to a call that timed out is not a fault: the connection stays", () => {
    const log = Path.join(scratch(), "raw.log")
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "slow", name: "raw__wait", arguments: {} }] },
      { toolCalls: [{ id: "again", name: "raw__wait", arguments: {} }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      // `late` answers each call 300 ms after it came.
      const mcp = yield* within("raw server connected")(Mcp.connect([raw("late", log, { approval: "never", timeoutMs: 100 })]))
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* agent.followup("go")
      yield* until("the first call sent", () => received(log, "tools/call").length === 1)
      yield* TestClock.adjust(100)
      // The second call's answer comes after the first one's late answer, on the same connection.
      yield* within("the turn ended")(agent.awaitIdle)
      expect(results(agent.log.events())).toEqual([
        ["slow", "TOOL_FAILED", [
          text("Tool raw__wait failed: MCP server \"raw\" did not answer wait within 100 ms; the call was cancelled")
        ]],
        ["again", null, [text("late")]]
      ])
      expect(pids(log)).toHaveLength(1)
      expect(mcp.servers().map((s) => [s.state, s.restarts])).toEqual([["connected", 0]])
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("an answer that is not JSON-RPC: malformed at once (the TestClock never moves), and the next call restarts the server", () => {
    const log = Path.join(scratch(), "raw.log")
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "m1", name: "raw__wait", arguments: {} }] },
      { toolCalls: [{ id: "m2", name: "raw__wait", arguments: {} }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("raw server connected")(Mcp.connect([raw("malformed", log, { approval: "never" })]))
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* turn(agent, "go")
      const message = "MCP server \"raw\" sent a message that is not JSON-RPC (Invalid input)"
      expect(results(agent.log.events())).toEqual([
        ["m1", "TOOL_FAILED", [text(`Tool raw__wait failed: ${message}`)]],
        ["m2", "TOOL_FAILED", [text(`Tool raw__wait failed: ${message}`)]]
      ])
      expect(pids(log)).toHaveLength(2)
      expect(mcp.servers().map((s) => [s.state, s.restarts, s.error?.reason])).toEqual([["exited", 1, "malformed"]])
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("a result of the wrong shape: malformed, told in one line; the connection stays", () => {
    const log = Path.join(scratch(), "raw.log")
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "b1", name: "raw__wait", arguments: {} }] },
      { toolCalls: [{ id: "b2", name: "raw__wait", arguments: {} }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("raw server connected")(Mcp.connect([raw("bad-result", log, { approval: "never" })]))
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* turn(agent, "go")
      const message = "MCP server \"raw\" sent a malformed result: Invalid result for tools/call: content: " +
        "Invalid input: expected array, received string"
      expect(results(agent.log.events())).toEqual([
        ["b1", "TOOL_FAILED", [text(`Tool raw__wait failed: ${message}`)]],
        ["b2", "TOOL_FAILED", [text(`Tool raw__wait failed: ${message}`)]]
      ])
      expect(pids(log)).toHaveLength(1)
      expect(statusOf(mcp)).toEqual([["raw", "connected", "malformed", message]])
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("a server whose tools change mid-session: the next step's request/header has the new tools; closing the scope ends the server", () => {
    const log = Path.join(scratch(), "own.log")
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "add", name: "own__add-tool", arguments: { name: "fresh" } }] },
      { toolCalls: [{ id: "new", name: "own__fresh", arguments: {} }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      yield* Effect.scoped(Effect.gen(function*() {
        const mcp = yield* within("own server connected")(Mcp.connect([own(log, { approval: "never" })]))
        const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
        yield* turn(agent, "go")
        expect(results(agent.log.events())).toEqual([
          ["add", null, [text("added fresh")]],
          ["new", null, [text("fresh ran")]]
        ])
        expect(headerTools(agent)).toEqual([
          ["own__echo", "own__wait", "own__add-tool"],
          ["own__echo", "own__wait", "own__add-tool", "own__fresh"]
        ])
        expect(model.requests[1]!.tools.at(-1)).toEqual({
          name: "own__fresh",
          description: "added fresh",
          parameters: { type: "object", properties: {} }
        })
      }))
      yield* until("the server's process ended with its scope", () => gone(pids(log)[0]!))
    }).pipe(Effect.provide(agentLayer(model)))
  })
})
