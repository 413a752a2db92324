/**
 * MCP tools (§28) against real servers: the published `server-everything` over stdio and over
 * streamable HTTP, `server-filesystem` confined to a temporary directory, and the test's own
 * servers written with the SDK (test/utils/mcp/). Agents run on the TestClock with a scripted
 * model; the servers are real processes, so every wait for them is bounded in real time
 * (test/utils/mcp.ts `within`, `until`). The faults are in McpFaults.test.ts.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Chunk, Effect, Layer, Queue } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import * as Agent from "../src/Agent.js"
import type { AgentEvent } from "../src/AgentEvent.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Mcp from "../src/Mcp.js"
import * as Model from "../src/Model.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as SessionStore from "../src/SessionStore.js"
import { layer as agentLayer, layerTracked } from "./utils/agent.js"
import {
  EVERYTHING,
  everything,
  EVERYTHING_TOOLS,
  everythingHttp,
  FILESYSTEM,
  lines,
  own,
  ownHttp,
  pids,
  results,
  text,
  until,
  within
} from "./utils/mcp.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const scratch = scratchDirs("effect-agent-loop-mcp-")

const ECHO_DEFINITION = {
  name: "everything__echo",
  description: "Echoes back the input string",
  parameters: {
    type: "object",
    properties: { message: { type: "string", description: "Message to echo" } },
    required: ["message"]
  }
}

const SUM_DEFINITION = {
  name: "everything__get-sum",
  description: "Returns the sum of two numbers",
  parameters: {
    type: "object",
    properties: { a: { type: "number", description: "First number" }, b: { type: "number", description: "Second number" } },
    required: ["a", "b"]
  }
}

/** Runs the agent's turn to its end (bounded: its calls go to real servers). */
const turn = (agent: Agent.Agent, input: string) =>
  Effect.zipRight(agent.followup(input), within(`the turn "${input}" ended`)(agent.awaitIdle))

/** The `tool/progress` events taken so far from a subscription. */
const progressOf = (queue: Queue.Dequeue<AgentEvent>) =>
  Effect.map(Queue.takeAll(queue), (events) => Chunk.toReadonlyArray(events).filter((e) => e.type === "tool/progress"))

/** The tools of each `request/header` of a log. */
const headerTools = (agent: Agent.Agent) =>
  agent.log.events().filter((e) => e.type === "request/header").map((e) => (e.data as any).tools as Array<any>)

describe("MCP over stdio: server-everything", () => {
  it.scoped("its tools are SERVER__TOOL with the server's JSON Schema (no $schema); its status names it", () =>
    Effect.gen(function*() {
      const mcp = yield* within("server-everything connected")(Mcp.connect([everything()]))
      expect(mcp.tools().map((tool) => tool.name)).toEqual(EVERYTHING_TOOLS)
      const status = mcp.servers()
      expect(status.map(({ tools: _, ...rest }) => rest)).toEqual([
        {
          name: "everything",
          type: "stdio",
          state: "connected",
          server: { name: "mcp-servers/everything", version: "2.0.0" },
          restarts: 0,
          error: undefined
        }
      ])
      expect(status[0]!.tools.slice(0, 2)).toEqual([
        { name: "everything__echo", remoteName: "echo", description: "Echoes back the input string" },
        {
          name: "everything__get-annotated-message",
          remoteName: "get-annotated-message",
          description: "Demonstrates how annotations can be used to provide metadata about content."
        }
      ])
      const byName = new Map(mcp.tools().map((tool) => [tool.name, tool] as const))
      expect(byName.get("everything__echo")!.definition).toEqual(ECHO_DEFINITION)
      expect(byName.get("everything__get-sum")!.definition).toEqual(SUM_DEFINITION)
      expect(JSON.stringify(mcp.tools().map((tool) => tool.definition))).not.toContain("$schema")
      // Every call of an untrusted server asks (§26).
      expect(new Set(mcp.tools().map((tool) => tool.approval))).toEqual(new Set(["always"]))
    }))

  it.scoped("an agent calls echo and get-sum: the results in the log; the request's tools are the server's", () => {
    const model = ScriptedModel.make([
      {
        toolCalls: [
          { id: "e", name: "everything__echo", arguments: { message: "hello over stdio" } },
          { id: "s", name: "everything__get-sum", arguments: { a: 2, b: 40 } }
        ]
      },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("server-everything connected")(Mcp.connect([everything({ approval: "never" })]))
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* turn(agent, "go")
      expect(results(agent.log.events())).toEqual([
        ["e", null, [text("Echo: hello over stdio")]],
        ["s", null, [text("The sum of 2 and 40 is 42.")]]
      ])
      const [tools] = headerTools(agent)
      expect(tools!.map((tool) => tool.name)).toEqual(EVERYTHING_TOOLS)
      expect(tools!.find((tool) => tool.name === "everything__echo")).toEqual(ECHO_DEFINITION)
      expect(tools!.find((tool) => tool.name === "everything__get-sum")).toEqual(SUM_DEFINITION)
      expect(JSON.stringify(tools)).not.toContain("$schema")
      expect(model.requests[0]!.tools).toEqual(tools)
      expect(model.requests[1]!.messages.at(-1)).toMatchObject({
        content: [{ type: "tool-result", toolCallId: "s", content: [text("The sum of 2 and 40 is 42.")], isError: false }]
      })
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("arguments that break the server's schema get INVALID_ARGUMENTS with the validator's message; the server never sees them", () => {
    const log = Path.join(scratch(), "own.log")
    const model = ScriptedModel.make([
      {
        toolCalls: [
          { id: "bad", name: "everything__get-sum", arguments: { a: "x" } },
          { id: "worse", name: "own__echo", arguments: { text: 5 } }
        ]
      },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("two servers connected")(
        Mcp.connect([everything({ approval: "never" }), own(log, { approval: "never" })])
      )
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* turn(agent, "go")
      // Our validator's words, not the server's ("Input validation error: …").
      expect(results(agent.log.events())).toEqual([
        ["bad", "INVALID_ARGUMENTS", [
          text("Invalid arguments for everything__get-sum: data must have required property 'b', data/a must be number")
        ]],
        ["worse", "INVALID_ARGUMENTS", [text("Invalid arguments for own__echo: data/text must be string")]]
      ])
      // The server that logs its calls got none.
      expect(lines(log)).toEqual([`pid ${pids(log)[0]}`])
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("results: an image block, structured content as JSON text, a resource and resource links as text", () => {
    const model = ScriptedModel.make([
      {
        toolCalls: [
          { id: "img", name: "everything__get-tiny-image", arguments: {} },
          { id: "json", name: "everything__get-structured-content", arguments: { location: "Chicago" } },
          { id: "ref", name: "everything__get-resource-reference", arguments: {} },
          { id: "links", name: "everything__get-resource-links", arguments: { count: 2 } }
        ]
      },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const { MCP_TINY_IMAGE } = yield* Effect.promise(() =>
        import(pathToFileURL(Path.join(Path.dirname(EVERYTHING), "tools/get-tiny-image.js")).href)
      )
      const mcp = yield* within("server-everything connected")(Mcp.connect([everything({ approval: "never" })]))
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* turn(agent, "go")
      const [img, json, ref, links] = results(agent.log.events())
      expect(img).toEqual(["img", null, [
        text("Here's the image you requested:"),
        { type: "image", mediaType: "image/png", data: MCP_TINY_IMAGE },
        text("The image above is the MCP logo.")
      ]])
      // The server writes the JSON in a text block too: it is there once.
      expect(json).toEqual(["json", null, [text("{\"temperature\":36,\"conditions\":\"Light rain / drizzle\",\"humidity\":82}")]])
      expect(ref).toEqual(["ref", null, [
        text("Returning resource reference for Resource 1:"),
        { type: "text", text: expect.stringMatching(/^\[resource demo:\/\/resource\/dynamic\/text\/1 \(text\/plain\)\]\n/) },
        text("You can access this resource using the URI: demo://resource/dynamic/text/1")
      ]])
      expect((ref![2][1] as any).text).toMatch(
        /^\[resource demo:\/\/resource\/dynamic\/text\/1 \(text\/plain\)\]\nResource 1: This is a plaintext resource created at .+$/
      )
      expect(links).toEqual(["links", null, [
        text("Here are 2 resource links to resources available in this server:"),
        text("[resource link: Blob Resource 1 <demo://resource/dynamic/blob/1> (text/plain): Resource 1: plaintext resource]"),
        text("[resource link: Text Resource 2 <demo://resource/dynamic/text/2> (text/plain): Resource 2: plaintext resource]")
      ]])
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("a long-running call's progress reports are live tool/progress events (agent.subscribe), the last one too", () => {
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "long", name: "everything__trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("server-everything connected")(Mcp.connect([everything({ approval: "never" })]))
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      const events = yield* agent.subscribe
      yield* turn(agent, "go")
      expect(yield* progressOf(events)).toEqual([1, 2, 3].map((progress) => ({
        type: "tool/progress",
        callId: "long",
        turn: 1,
        step: 1,
        progress,
        total: 3
      })))
      expect(results(agent.log.events())).toEqual([
        ["long", null, [text("Long running operation completed. Duration: 0.3 seconds, Steps: 3.")]]
      ])
      // Progress is live only: nothing of it is in the log.
      expect(agent.log.events().filter((e) => (e.type as string) === "tool/progress")).toEqual([])
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("approval: a call asks by default (naming SERVER__TOOL); approval \"never\" and autoApprove do not", () => {
    const model = ScriptedModel.make([
      {
        toolCalls: [
          { id: "asks", name: "everything__echo", arguments: { message: "one" } },
          { id: "trusted", name: "trusted__echo", arguments: { message: "two" } },
          { id: "auto", name: "auto__echo", arguments: { message: "three" } },
          { id: "auto-sum", name: "auto__get-sum", arguments: { a: 1, b: 2 } }
        ]
      },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("three servers connected")(Mcp.connect([
        everything(),
        everything({ name: "trusted", approval: "never" }),
        everything({ name: "auto", autoApprove: ["echo"] })
      ]))
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* agent.followup("go")
      let pending: ReadonlyArray<{ readonly toolName: string }> = []
      yield* within("two questions asked")(Effect.repeat(
        Effect.zipRight(
          Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10))),
          Effect.map(agent.pendingApprovals, (list) => (pending = list))
        ),
        { until: (list) => list.length === 2 }
      ))
      expect(pending.map((p: any) => [p.toolName, p.callId, p.arguments])).toEqual([
        ["everything__echo", "asks", { message: "one" }],
        ["auto__get-sum", "auto-sum", { a: 1, b: 2 }]
      ])
      for (const question of pending as ReadonlyArray<any>) yield* agent.approve(question.id)
      yield* within("the turn ended")(agent.awaitIdle)
      expect(results(agent.log.events())).toEqual([
        ["asks", null, [text("Echo: one")]],
        ["trusted", null, [text("Echo: two")]],
        ["auto", null, [text("Echo: three")]],
        ["auto-sum", null, [text("The sum of 1 and 2 is 3.")]]
      ])
      expect(agent.log.events().filter((e) => e.type === "approval/asked").map((e) => (e.data as any).toolName)).toEqual([
        "everything__echo",
        "auto__get-sum"
      ])
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("cancelling the turn mid-call: the calls end ABORTED, the servers are told and stay usable", () => {
    const log = Path.join(scratch(), "own.log")
    const model = ScriptedModel.make([
      {
        toolCalls: [
          { id: "long", name: "everything__trigger-long-running-operation", arguments: { duration: 30, steps: 300 } },
          { id: "wait", name: "own__wait", arguments: {} }
        ]
      },
      {
        toolCalls: [
          { id: "e", name: "everything__echo", arguments: { message: "still here" } },
          { id: "o", name: "own__echo", arguments: { text: "me too" } }
        ]
      },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("two servers connected")(
        Mcp.connect([everything({ approval: "never" }), own(log, { approval: "never" })])
      )
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      const events = yield* agent.subscribe
      yield* agent.followup("go")
      // Both calls are running: the long one reported progress, the server's log has the other.
      yield* within("the first progress report")(Effect.repeat(
        Queue.take(events),
        { until: (e) => e.type === "tool/progress" }
      ))
      yield* until("own__wait running", () => lines(log).includes("call wait"))
      yield* agent.cancel()
      expect(results(agent.log.events())).toEqual([
        ["long", "ABORTED", [text("The turn was canceled while this tool call was running.")]],
        ["wait", "ABORTED", [text("The turn was canceled while this tool call was running.")]]
      ])
      // The SDK sent notifications/cancelled: the server's handler saw its request aborted.
      yield* until("own__wait cancelled on the server", () => lines(log).includes("cancelled wait"))
      // Both servers answer the next calls, unrestarted, without a fault.
      yield* turn(agent, "again")
      expect(results(agent.log.events()).slice(2)).toEqual([
        ["e", null, [text("Echo: still here")]],
        ["o", null, [text("echo: me too")]]
      ])
      expect(mcp.servers().map((s) => [s.name, s.state, s.restarts, s.error])).toEqual([
        ["everything", "connected", 0, undefined],
        ["own", "connected", 0, undefined]
      ])
      expect(lines(log).filter((line) => line.startsWith("pid "))).toHaveLength(1)
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("env values are secrets: get-env shows *** for them, in the result, the session's file and the spans", () => {
    const directory = scratch()
    const exporter = new InMemorySpanExporter()
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "env", name: "everything__get-env", arguments: {} }] },
      { text: "done" }
    ])
    const layer = Layer.mergeAll(
      SessionStore.layerJsonl({ directory }).pipe(Layer.provide(NodeFileSystem.layer)),
      IdGenerator.layerSeeded(42),
      Model.layer(model),
      layerTracked,
      NodeSdk.layer(() => ({ resource: { serviceName: "mcp-test" }, spanProcessor: new SimpleSpanProcessor(exporter) }))
    )
    return Effect.gen(function*() {
      const mcp = yield* within("server-everything connected")(
        Mcp.connect([everything({ approval: "never", env: { API_TOKEN: "tok-12345-secret" } })])
      )
      // Tool results on the spans too (`recordContent`).
      const agent = yield* Agent.make({ toolsets: [mcp.toolset], tracing: { recordContent: true } })
      yield* turn(agent, "go")
      const [[callId, code, content]] = results(agent.log.events()) as [any]
      expect([callId, code, content.length]).toEqual(["env", null, 1])
      const env = JSON.parse(content[0].text)
      expect(env.API_TOKEN).toBe("***")
      expect(env.PATH).toBe(process.env["PATH"])
      const files = Fs.readdirSync(directory).filter((name) => name.endsWith(".jsonl"))
      expect(files).toHaveLength(1)
      const file = Fs.readFileSync(Path.join(directory, files[0]!), "utf8")
      expect(file).toContain("\\\"API_TOKEN\\\": \\\"***\\\"")
      expect(file).not.toContain("tok-12345-secret")
      const spans = JSON.stringify(
        exporter.getFinishedSpans().map((span) => ({ name: span.name, attributes: span.attributes, status: span.status }))
      )
      expect(spans).toContain("execute_tool everything__get-env")
      const toolSpan = exporter.getFinishedSpans().find((span) => span.name === "execute_tool everything__get-env")!
      const recorded = JSON.parse(String(toolSpan.attributes["gen_ai.tool.call.result"]))
      expect(JSON.parse(recorded[0].text).API_TOKEN).toBe("***")
      expect(spans).not.toContain("tok-12345-secret")
    }).pipe(Effect.provide(layer))
  })
})

describe("MCP over stdio: server-filesystem in a temporary directory", () => {
  it.scoped("the agent lists and reads a file; a path outside is refused by the server (TOOL_FAILED, its words)", () => {
    const root = Fs.realpathSync(scratch())
    Fs.writeFileSync(Path.join(root, "notes.txt"), "remember the milk\n")
    const outside = Path.join(Path.dirname(root), "elsewhere.txt")
    const model = ScriptedModel.make([
      {
        toolCalls: [
          { id: "ls", name: "files__list_directory", arguments: { path: root } },
          { id: "cat", name: "files__read_text_file", arguments: { path: Path.join(root, "notes.txt") } },
          { id: "out", name: "files__read_text_file", arguments: { path: outside } },
          { id: "up", name: "files__read_text_file", arguments: { path: Path.join(root, "..", "elsewhere.txt") } }
        ]
      },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const mcp = yield* within("server-filesystem connected")(Mcp.connect([
        { type: "stdio", name: "files", command: process.execPath, args: [FILESYSTEM, root], approval: "never" }
      ]))
      expect(mcp.servers()[0]!.server).toEqual({ name: "secure-filesystem-server", version: "0.2.0" })
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* turn(agent, "go")
      const refused = `Access denied - path outside allowed directories: ${outside} not in ${root}`
      expect(results(agent.log.events())).toEqual([
        ["ls", null, [text("[FILE] notes.txt")]],
        ["cat", null, [text("remember the milk\n")]],
        ["out", "TOOL_FAILED", [text(refused)]],
        ["up", "TOOL_FAILED", [text(refused)]]
      ])
    }).pipe(Effect.provide(agentLayer(model)))
  })
})

describe("MCP over streamable HTTP on loopback", () => {
  it.scoped("server-everything with a bearer header: echo; the server stopped, calls fail without the header in any error", () => {
    const model = ScriptedModel.make([
      { toolCalls: [{ id: "e1", name: "web__echo", arguments: { message: "over http" } }] },
      { text: "one" },
      { toolCalls: [{ id: "e2", name: "web__echo", arguments: { message: "anyone?" } }] },
      { toolCalls: [{ id: "e3", name: "web__echo", arguments: { message: "anyone at all?" } }] },
      { toolCalls: [{ id: "e4", name: "web__echo", arguments: { message: "hello?" } }] },
      { text: "two" }
    ])
    return Effect.gen(function*() {
      const server = yield* everythingHttp
      const mcp = yield* within("server-everything (HTTP) connected")(Mcp.connect([
        {
          type: "http",
          name: "web",
          url: server.url,
          headers: { Authorization: "Bearer sekret-abc" },
          approval: "never",
          maxRestarts: 1
        }
      ]))
      expect(mcp.servers().map((s) => [s.name, s.type, s.state, s.server])).toEqual([
        ["web", "http", "connected", { name: "mcp-servers/everything", version: "2.0.0" }]
      ])
      expect(mcp.tools()).toHaveLength(EVERYTHING_TOOLS.length)
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* turn(agent, "go")
      expect(results(agent.log.events())).toEqual([["e1", null, [text("Echo: over http")]]])
      yield* server.stop
      yield* turn(agent, "again")
      // The connection is gone (exited); connecting again fails (start); then it gives up, and
      // its tools are withdrawn from the next step's request.
      expect(results(agent.log.events()).slice(1)).toEqual([
        ["e2", "TOOL_FAILED", [
          text("Tool web__echo failed: MCP server \"web\" could not be reached: fetch failed (ECONNREFUSED)")
        ]],
        ["e3", "TOOL_FAILED", [text("Tool web__echo failed: MCP server \"web\" could not connect: fetch failed (ECONNREFUSED)")]],
        ["e4", "TOOL_FAILED", [
          text("Tool web__echo failed: MCP server \"web\" failed 2 times in a row and is not started again (maxRestarts: 1)")
        ]]
      ])
      expect(headerTools(agent).map((tools) => tools.length)).toEqual([EVERYTHING_TOOLS.length, 0])
      expect(mcp.servers().map((s) => [s.state, s.restarts, s.error?.reason, s.tools])).toEqual([["failed", 1, "gave-up", []]])
      expect(JSON.stringify(agent.log.events())).not.toContain("sekret-abc")
    }).pipe(Effect.provide(agentLayer(model)))
  })

  it.scoped("a server of our own: the header reaches it, *** in its answer; an HTTP error body repeating it, *** too", () => {
    const model = ScriptedModel.make([
      {
        toolCalls: [
          { id: "who", name: "mine__whoami", arguments: {} },
          { id: "leak", name: "mine__leak", arguments: {} }
        ]
      },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      const server = yield* ownHttp
      const mcp = yield* within("the own HTTP server connected")(Mcp.connect([
        { type: "http", name: "mine", url: server.url, headers: { Authorization: "Bearer sekret-abc" }, approval: "never" }
      ]))
      expect(mcp.tools().map((tool) => tool.name)).toEqual(["mine__whoami", "mine__leak"])
      const agent = yield* Agent.make({ toolsets: [mcp.toolset] })
      yield* turn(agent, "go")
      expect(results(agent.log.events())).toEqual([
        ["who", null, [text("you sent ***")]],
        ["leak", "TOOL_FAILED", [
          text(
            "Tool mine__leak failed: MCP server \"mine\" answered with an error: " +
              "Error POSTing to endpoint: upstream refused the credentials ***"
          )
        ]]
      ])
      expect(mcp.servers()[0]!.error).toMatchObject({ reason: "protocol" })
      expect(JSON.stringify([agent.log.events(), mcp.servers()])).not.toContain("sekret-abc")
    }).pipe(Effect.provide(agentLayer(model)))
  })
})
