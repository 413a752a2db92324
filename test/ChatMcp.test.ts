/**
 * The chat and MCP servers (§28; `chat --mcp-config`): a running call's `tool/progress` reports
 * shown under it (`ChatModel`, the Ink frame), what `/mcp` says of each server, then `agent-loop
 * chat --mcp-config` in a real terminal (tmux) against the published server-everything over
 * stdio and a server that cannot start: the warning above the view, `/mcp`, a call with its
 * progress and result.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { ChatModel, progressLine } from "../src/cli/chat/ChatModel.js"
import { mcpReport, mcpSummary } from "../src/cli/chat/runChat.js"
import type * as Mcp from "../src/Mcp.js"
import { CHAT_READY_MS } from "./utils/bounds.js"
import { frameOf } from "./utils/chatFrame.js"
import * as E from "./utils/events.js"
import { EVERYTHING_TOOLS } from "./utils/mcp.js"
import { scratchDirs } from "./utils/scratchDirs.js"
import * as Tmux from "./utils/tmux.js"

const bin = Path.resolve("dist/cli/bin.js")
const everything = Path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const hasTmux = Tmux.available()
const tmpDir = scratchDirs("agent-loop-chat-mcp-")

/** The view's first whole frame for `model` (Ink in debug mode on fake streams of 100 × 30), colours removed. */

describe("ChatModel: a running call's progress (tool/progress)", () => {
  it("progressLine: progress of total, or alone; the message escaped and bounded", () => {
    expect(progressLine({ progress: 3, total: 10 })).toBe("3/10")
    expect(progressLine({ progress: 2048 })).toBe("2048")
    expect(progressLine({ progress: 1, total: 4, message: " copying b.txt " })).toBe("1/4 · copying b.txt")
    expect(progressLine({ progress: 1, message: "a\u001b[2Jb\nc" })).toBe("1 · a\\x1b[2Jb\\nc")
    expect(progressLine({ progress: 0, total: 1, message: "x".repeat(100) })).toBe(`0/1 · ${"x".repeat(80)}…`)
    expect(progressLine({ progress: 0, total: 1, message: "  " })).toBe("0/1")
  })

  it.scoped("the last report of a running call shows under it; one for a call with its result (late) or no call changes nothing", () =>
    Effect.gen(function*() {
      const model = new ChatModel("s", [], { nextStep: [], nextTurn: [] }, "idle", () => 1000)
      const turn = E.events(
        E.followup(E.msg("m1", "go")),
        E.turnStart(1),
        E.claim("next-turn", 1),
        E.stepStart(1, 1),
        E.entered(E.msg("m1", "go")),
        E.assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "files__copy", arguments: "{}" }] }),
        E.toolCall(1, 1, "c1", "files__copy", "{}"),
        E.toolResult(1, 1, "c1", "copied")
      )
      model.apply([{ type: "agent/status", status: "running" }, ...turn.slice(0, -1)])
      const progress = (n: number, message?: string) =>
        ({
          type: "tool/progress",
          callId: "c1",
          turn: 1,
          step: 1,
          progress: n,
          total: 4,
          ...(message ? { message } : {})
        }) as const
      model.apply([progress(1, "copying a.txt")])
      model.apply([progress(2, "copying b.txt")])
      expect(model.getSnapshot().tools).toEqual([
        { callId: "c1", name: "files__copy", args: "{}", since: 1000, progress: "2/4 · copying b.txt" }
      ])
      const frame = (yield* frameOf(model)).split("\n")
      expect(frame.slice(frame.indexOf("> go") + 1, frame.indexOf("> go") + 2)).toEqual([
        expect.stringMatching(/^. → files__copy\(\{\}\) running \d+\.\ds · 2\/4 · copying b\.txt$/)
      ])
      const before = model.getSnapshot()
      model.apply([{ ...progress(3), callId: "c9" }])
      expect(model.getSnapshot().tools).toEqual(before.tools)
      model.apply(turn.slice(-1))
      model.apply([progress(4, "late")])
      expect(model.getSnapshot().tools).toEqual([])
      expect(model.getSnapshot().items.at(-1)).toMatchObject({ kind: "tool", name: "files__copy", result: "copied" })
    }))
})

describe("/mcp (what the chat says of its MCP servers)", () => {
  const connected: Mcp.ServerStatus = {
    name: "everything",
    type: "stdio",
    state: "connected",
    tools: [
      { name: "everything__echo", remoteName: "echo", description: "Echoes back the input string" },
      { name: "everything__long", remoteName: "long", description: `${"A long description. ".repeat(6)}\nSecond line.` },
      { name: "everything__bare", remoteName: "bare", description: "" }
    ],
    server: { name: "mcp-servers/everything", version: "2.0.0" },
    restarts: 0
  }
  const failed = {
    name: "broken",
    type: "stdio",
    state: "failed",
    tools: [],
    restarts: 0,
    error: { message: "MCP server \"broken\" could not start: spawn /nope ENOENT" }
  } as unknown as Mcp.ServerStatus
  const faulty = {
    name: "web",
    type: "http",
    state: "connected",
    tools: [],
    restarts: 2,
    error: { message: "MCP server \"web\" did not answer search within 120000 ms; the call was cancelled" }
  } as unknown as Mcp.ServerStatus

  it("each server's state, transport, name and version, tools with the first line of their description; a failure's reason", () => {
    expect(mcpReport([connected, failed, faulty]).split("\n")).toEqual([
      "MCP servers (3):",
      "everything: connected (stdio, mcp-servers/everything 2.0.0), 3 tools",
      "  everything__echo: Echoes back the input string",
      `  everything__long: ${"A long description. ".repeat(4)}…`,
      "  everything__bare",
      "broken: failed (stdio): could not start: spawn /nope ENOENT",
      "web: connected (http), 0 tools, restarted 2 times in a row",
      "  last fault: did not answer search within 120000 ms; the call was cancelled"
    ])
    expect(mcpReport(undefined)).toBe("/mcp: no MCP servers (start the chat with --mcp-config FILE)")
    expect(mcpReport([])).toBe("/mcp: the --mcp-config file names no server (or only disabled ones)")
    expect(mcpSummary([connected, failed])).toBe("MCP: 1 of 2 servers connected, 3 tools (/mcp lists them)")
    expect(mcpSummary([faulty])).toBe("MCP: 1 of 1 server connected, 0 tools (/mcp lists them)")
  })
})

describe.skipIf(!hasTmux && process.env.CI === undefined)("agent-loop chat --mcp-config in a terminal (tmux)", () => {
  it.scopedLive(
    "a failed server's warning above the view; /mcp lists everything and its tools and broken's error; a call's progress, then its result",
    () =>
      Effect.gen(function*() {
        const dir = tmpDir()
        Fs.writeFileSync(
          Path.join(dir, "mcp.json"),
          JSON.stringify({
            mcpServers: {
              everything: { command: process.execPath, args: [everything, "stdio"], approval: "never" },
              broken: { command: "/nonexistent/agent-loop-mcp-server" }
            }
          })
        )
        const pane = yield* Tmux.start({
          command: [process.execPath, bin, "chat", "--store", Path.join(dir, "sessions"), "--mcp-config", "mcp.json"],
          cwd: dir,
          unsetEnv: ["NODE_ENV"],
          height: 60
        })
        const ready = yield* pane.waitFor(/● idle · session \S+/, CHAT_READY_MS)
        expect(ready).toContain("mcp: server \"broken\" failed: could not start: spawn /nonexistent/agent-loop-mcp-server ENOENT")
        expect(ready).toContain("  MCP: 1 of 2 servers connected, 12 tools (/mcp lists them)")
        yield* pane.type("/mcp")
        yield* pane.keys("Enter")
        const listed = yield* pane.waitFor("broken: failed")
        const lines = listed.split("\n")
        const start = lines.indexOf("· MCP servers (2):")
        expect(lines.slice(start, start + 4)).toEqual([
          "· MCP servers (2):",
          "  everything: connected (stdio, mcp-servers/everything 2.0.0), 12 tools",
          "    everything__echo: Echoes back the input string",
          "    everything__get-annotated-message: Demonstrates how annotations can be used to provide metadata about content."
        ])
        // (Ink wraps the longest lines at the pane's 120 columns.)
        expect(lines.slice(start).filter((line) => /^ {2}\S/.test(line))).toEqual([
          "  everything: connected (stdio, mcp-servers/everything 2.0.0), 12 tools",
          "  broken: failed (stdio): could not start: spawn /nonexistent/agent-loop-mcp-server ENOENT"
        ])
        expect(lines.slice(start).filter((line) => line.startsWith("    everything__")).map((line) => line.split(":")[0]!.trim()))
          .toEqual(EVERYTHING_TOOLS)
        // A call whose server reports its progress: shown under the running call, then its result.
        yield* pane.type("call everything__trigger-long-running-operation with {\"duration\": 3, \"steps\": 3}")
        yield* pane.keys("Enter")
        yield* pane.waitFor(
          /→ everything__trigger-long-running-operation\(\{"duration":3,"steps":3\}\) running \d+\.\ds · [12]\/3$/m
        )
        const done = yield* pane.waitFor("turn 1 ended: completed")
        expect(done).toContain("  ← Long running operation completed. Duration: 3 seconds, Steps: 3.")
        yield* pane.waitFor(/● idle/)
        yield* pane.type("/quit")
        yield* pane.keys("Enter")
        expect(yield* pane.waitForExit()).toBe(0)
      }),
    4 * CHAT_READY_MS
  )
})
