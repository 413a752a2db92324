/**
 * `read_file` through the ACP client (§22, `src/cli/acp/clientFs.ts`), with a fake reader in
 * place of the SDK connection (the agent's end-to-end test drives the real SDK client): the same
 * refusals as the disk tool, before any request; what the client returns, cut as the disk tool
 * cuts; a client error as a tool error naming it, in an agent's log too; interruption; and
 * `clientReader` over a fake request function.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer } from "effect"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Agent from "../src/Agent.js"
import * as ClientFs from "../src/cli/acp/clientFs.js"
import * as OfflineTools from "../src/providers/OfflineTools.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import * as Tool from "../src/Tool.js"
import { advance, bareToolContext, brief, layer, text, untilLogged } from "./utils/agent.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const scratch = scratchDirs("agent-loop-acp-fs-")

/** A fake client: answers from `buffers` (absolute path → text), records every request. */
const fakeClient = (buffers: Record<string, string> = {}) => {
  const calls: Array<ReadonlyArray<unknown>> = []
  const read: ClientFs.ReadTextFile = (path, line, limit) =>
    Effect.suspend(() => {
      calls.push([path, line, limit])
      const text = buffers[path]
      return text === undefined
        ? Effect.fail(Object.assign(new Error("Resource not found"), { code: -32002 }))
        : Effect.succeed(text)
    })
  return { calls, read }
}

/** A working directory with a file, a symlink out, a symlinked directory out, a subdirectory and a fifo. */
const workspace = () => {
  const dir = scratch()
  const elsewhere = scratch()
  Fs.writeFileSync(Path.join(dir, "notes.txt"), "hello notes")
  Fs.symlinkSync("/etc/hostname", Path.join(dir, "escape"))
  Fs.symlinkSync(elsewhere, Path.join(dir, "outdir"))
  Fs.mkdirSync(Path.join(dir, "sub"))
  expect(spawnSync("mkfifo", [Path.join(dir, "pipe")]).status).toBe(0)
  return { dir, elsewhere }
}

describe("read_file through the client", () => {
  it.scoped("the same tool as the disk one: name, description, parameters", () =>
    Effect.gen(function*() {
      const disk = yield* OfflineTools.readFile("/tmp")
      const via = yield* ClientFs.readFileVia(fakeClient().read, "/tmp")
      expect(via.definition).toEqual(disk.definition)
      expect(via.exclusive).toBe(disk.exclusive)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("reads the editor's buffer: the absolute path under cwd, no line or limit", () => {
    const { dir } = workspace()
    const client = fakeClient({ [Path.join(dir, "notes.txt")]: "hello notes (unsaved edit)" })
    return Effect.gen(function*() {
      const read = yield* ClientFs.readFileVia(client.read, dir)
      expect(yield* read.execute({ path: "notes.txt" }, bareToolContext)).toEqual({ content: "hello notes (unsaved edit)" })
      expect(yield* read.execute({ path: "sub/../notes.txt" }, bareToolContext)).toEqual({
        content: "hello notes (unsaved edit)"
      })
      expect(client.calls).toEqual([
        [Path.join(dir, "notes.txt"), undefined, undefined],
        [Path.join(dir, "notes.txt"), undefined, undefined]
      ])
    }).pipe(Effect.provide(NodeContext.layer))
  })

  it.scoped("refuses what the disk tool refuses, with its messages, and never asks the client", () => {
    const { dir } = workspace()
    const client = fakeClient()
    return Effect.gen(function*() {
      const disk = yield* OfflineTools.readFile(dir)
      const via = yield* ClientFs.readFileVia(client.read, dir)
      const refusals: Array<readonly [string, string]> = []
      for (
        const path of ["../../etc/passwd", "/etc/passwd", "..", `../${Path.basename(dir)}x/secret`, "escape", ".", "sub", "pipe"]
      ) {
        const fromDisk = yield* Effect.flip(disk.execute({ path }, bareToolContext))
        const fromClient = yield* Effect.flip(via.execute({ path }, bareToolContext))
        expect(fromClient).toBeInstanceOf(Tool.ToolError)
        expect(fromClient.message).toBe(fromDisk.message)
        refusals.push([path, fromClient.message])
      }
      expect(refusals).toEqual([
        ["../../etc/passwd", "../../etc/passwd is outside the working directory"],
        ["/etc/passwd", "/etc/passwd is outside the working directory"],
        ["..", ".. is outside the working directory"],
        [`../${Path.basename(dir)}x/secret`, `../${Path.basename(dir)}x/secret is outside the working directory`],
        ["escape", "escape resolves outside the working directory"],
        [".", ". is a directory"],
        ["sub", "sub is a directory"],
        ["pipe", "pipe is not a regular file (a fifo)"]
      ])
      expect(client.calls).toEqual([])
    }).pipe(Effect.provide(NodeContext.layer))
  })

  it.scoped("a path not on disk is asked for (an unsaved buffer), unless a linked directory on its way leads out", () => {
    const { dir } = workspace()
    const client = fakeClient({ [Path.join(dir, "sub", "draft.md")]: "# draft" })
    return Effect.gen(function*() {
      const read = yield* ClientFs.readFileVia(client.read, dir)
      expect(yield* read.execute({ path: "sub/draft.md" }, bareToolContext)).toEqual({ content: "# draft" })
      const out = yield* Effect.flip(read.execute({ path: "outdir/new/file.txt" }, bareToolContext))
      expect(out.message).toBe("outdir/new/file.txt resolves outside the working directory")
      expect(client.calls).toEqual([[Path.join(dir, "sub", "draft.md"), undefined, undefined]])
    }).pipe(Effect.provide(NodeContext.layer))
  })

  it.scoped("a client error is a tool error naming it (with its JSON-RPC code); a reader that dies or throws too", () => {
    const { dir } = workspace()
    const client = fakeClient()
    return Effect.gen(function*() {
      const read = yield* ClientFs.readFileVia(client.read, dir)
      const missing = yield* Effect.flip(read.execute({ path: "nope.txt" }, bareToolContext))
      expect(missing).toBeInstanceOf(Tool.ToolError)
      expect(missing.message).toBe("cannot read nope.txt: the client's fs/read_text_file failed: Resource not found (-32002)")
      expect(missing.cause).toMatchObject({ message: "Resource not found", code: -32002 })
      const dies = yield* ClientFs.readFileVia(() => Effect.die(new Error("connection closed")), dir)
      expect((yield* Effect.flip(dies.execute({ path: "notes.txt" }, bareToolContext))).message)
        .toBe("cannot read notes.txt: the client's fs/read_text_file failed: connection closed")
      const throws = yield* ClientFs.readFileVia(() => {
        throw new Error("not connected")
      }, dir)
      expect((yield* Effect.flip(throws.execute({ path: "notes.txt" }, bareToolContext))).message)
        .toBe("cannot read notes.txt: the client's fs/read_text_file failed: not connected")
    }).pipe(Effect.provide(NodeContext.layer))
  })

  it.scoped("what the client returns is cut at 64 KiB exactly as the disk tool cuts the same file", () => {
    const { dir } = workspace()
    // 65,535 ASCII bytes then "é" (2 bytes): the cut falls inside the character.
    const text = "a".repeat(65_535) + "é" + "b".repeat(10)
    Fs.writeFileSync(Path.join(dir, "big.txt"), text)
    Fs.writeFileSync(Path.join(dir, "exact.txt"), "c".repeat(65_536))
    const client = fakeClient({ [Path.join(dir, "big.txt")]: text, [Path.join(dir, "exact.txt")]: "c".repeat(65_536) })
    return Effect.gen(function*() {
      const disk = yield* OfflineTools.readFile(dir)
      const via = yield* ClientFs.readFileVia(client.read, dir)
      const cut = yield* via.execute({ path: "big.txt" }, bareToolContext)
      expect(cut).toEqual(yield* disk.execute({ path: "big.txt" }, bareToolContext))
      expect(cut).toEqual({
        content: `${"a".repeat(65_535)}\ufffd\n[… the rest of the last line not shown: truncated at 64 KiB of 65,547 bytes]`
      })
      expect(yield* via.execute({ path: "exact.txt" }, bareToolContext)).toEqual({ content: "c".repeat(65_536) })
    }).pipe(Effect.provide(NodeContext.layer))
  })

  it.scoped("interrupting the call interrupts the read (a cancel is not a tool error)", () => {
    const { dir } = workspace()
    let started = 0
    const reader: ClientFs.ReadTextFile = () => Effect.zipRight(Effect.sync(() => started++), Effect.never)
    return Effect.gen(function*() {
      const read = yield* ClientFs.readFileVia(reader, dir)
      const fiber = yield* Effect.fork(read.execute({ path: "notes.txt" }, bareToolContext))
      yield* Effect.yieldNow()
      while (started === 0) yield* Effect.yieldNow()
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
    }).pipe(Effect.provide(NodeContext.layer))
  })

  it.scoped("in an agent: a failing client gives an error tool/result (TOOL_FAILED) and the turn goes on", () => {
    const { dir } = workspace()
    const client = fakeClient()
    const model = ScriptedModel.make([
      { latencyMs: 10, toolCalls: [{ id: "c1", name: "read_file", arguments: { path: "nope.txt" } }] },
      { latencyMs: 10, text: "It is not there." }
    ])
    return Effect.gen(function*() {
      const tools = yield* ClientFs.tools({ root: dir, read: client.read })
      expect(tools.map((t) => t.name)).toEqual(["wait", "clock", "read_file"])
      const agent = yield* Agent.make({ tools })
      yield* agent.followup("read nope.txt")
      yield* advance(10)
      // The tool checks the path on disk before it asks the client (real I/O, which `advance`
      // does not wait for): its result is logged in real time, then the second response is due.
      yield* untilLogged(agent, "tool/result")
      yield* advance(100)
      const events = agent.log.events()
      expect(brief(events).filter((l) => l.startsWith("tool/") || l.startsWith("turn/end"))).toEqual([
        "tool/call c1 read_file",
        "tool/result c1 TOOL_FAILED",
        "turn/end 1 completed"
      ])
      const result = events.find((e) => e.type === "tool/result")!
      expect(text((result.data as any).message)).toContain(
        "cannot read nope.txt: the client's fs/read_text_file failed: Resource not found (-32002)"
      )
      expect(client.calls).toEqual([[Path.join(dir, "nope.txt"), undefined, undefined]])
    }).pipe(Effect.provide(Layer.merge(layer(model), NodeContext.layer)))
  })

  it.scoped("without a reader, read_file is the disk tool", () => {
    const { dir } = workspace()
    return Effect.gen(function*() {
      const read = yield* ClientFs.readFile({ root: dir })
      expect(yield* read.execute({ path: "notes.txt" }, bareToolContext)).toEqual({ content: "hello notes" })
      expect((yield* Effect.flip(read.execute({ path: "nope.txt" }, bareToolContext))).message).toBe(
        "cannot read nope.txt: no such file"
      )
    }).pipe(Effect.provide(NodeContext.layer))
  })
})

describe("clientReader and the capability", () => {
  it("offersReadTextFile reads clientCapabilities.fs.readTextFile", () => {
    expect(ClientFs.offersReadTextFile({ fs: { readTextFile: true } })).toBe(true)
    expect(ClientFs.offersReadTextFile({ fs: { readTextFile: false, writeTextFile: true } })).toBe(false)
    expect(ClientFs.offersReadTextFile({})).toBe(false)
    expect(ClientFs.offersReadTextFile(undefined)).toBe(false)
  })

  it.effect("sends {sessionId, path, line?, limit?}, takes the content, passes the client's error on", () =>
    Effect.gen(function*() {
      const requests: Array<unknown> = []
      const read = ClientFs.clientReader("s1", (params) => {
        requests.push(params)
        return params.path === "/w/missing"
          ? Promise.reject(Object.assign(new Error("Resource not found"), { code: -32002 }))
          : params.path === "/w/odd"
          ? Promise.resolve({} as { content: string })
          : Promise.resolve({ content: `text of ${params.path}` })
      })
      expect(yield* read("/w/a.txt")).toBe("text of /w/a.txt")
      expect(yield* read("/w/b.txt", 10, 5)).toBe("text of /w/b.txt")
      const error = yield* Effect.flip(read("/w/missing"))
      expect(error).toMatchObject({ message: "Resource not found", code: -32002 })
      expect((yield* Effect.flip(read("/w/odd"))).message).toBe("the response has no content string")
      expect(requests).toEqual([
        { sessionId: "s1", path: "/w/a.txt" },
        { sessionId: "s1", path: "/w/b.txt", line: 10, limit: 5 },
        { sessionId: "s1", path: "/w/missing" },
        { sessionId: "s1", path: "/w/odd" }
      ])
    }))

  it.effect("interrupting the read aborts the request's cancellation signal", () =>
    Effect.gen(function*() {
      let signal: AbortSignal | undefined
      let stop: boolean | undefined
      const read = ClientFs.clientReader("s1", (_params, options) => {
        signal = options.cancellationSignal
        stop = options.stopWaitingOnCancel
        return new Promise(() => {})
      })
      const fiber = yield* Effect.fork(read("/w/slow.txt"))
      while (signal === undefined) yield* Effect.yieldNow()
      expect(signal.aborted).toBe(false)
      yield* Fiber.interrupt(fiber)
      expect(signal.aborted).toBe(true)
      expect(stop).toBe(true)
    }))
})
