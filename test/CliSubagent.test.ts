/**
 * Sub-agents from the CLI (§27): `run --subagent --subagent-fork` end to end through the built
 * binary on the offline model (its lines, the child sessions in the store, the parent's
 * `subagent/start` and `subagent/end`), `transcript --follow-children` of what it wrote (the
 * children nested, a missing child as one line), of a DSH parent (which names no child) and of a
 * parent of ours whose child is a DSH child log; `--ask subagent`; a sub-agent's question in
 * `run`, where nobody can answer it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { SessionEvent, SessionHeader } from "../src/SessionEvent.js"
import { CLI_RUN_MS } from "./utils/bounds.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const DSH = Path.resolve(process.cwd(), "../shared/fixtures/dsh")
const bin = Path.resolve("dist/cli/bin.js")
const tmpDir = scratchDirs("agent-loop-cli-subagent-")

/** Runs the built CLI in `cwd`: exit code, stdout and stderr (bounded by `CLI_RUN_MS`). */
const spawn = (args: ReadonlyArray<string>, cwd: string) =>
  Effect.async<{ code: number; stdout: string; stderr: string }>((resume) => {
    execFile(process.execPath, [bin, ...args], { cwd, timeout: CLI_RUN_MS, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
      resume(Effect.succeed({ code: error ? (error as any).code ?? 1 : 0, stdout, stderr }))
    })
  })

/** A log of the store: its header and events. */
const readLog = (file: string): { readonly header: SessionHeader; readonly events: ReadonlyArray<SessionEvent> } => {
  const [first, ...rest] = Fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "")
  return { header: JSON.parse(first!), events: rest.map((l) => JSON.parse(l)) }
}

/** The sessions of a store by their depth: [parent, child, grandchild, …] (one a depth). */
const byDepth = (store: string) => {
  const logs = Fs.readdirSync(store).filter((f) => f.endsWith(".jsonl")).map((f) => readLog(Path.join(store, f)))
  return logs.sort((a, b) => ((a.header as any).delegationDepth ?? 0) - ((b.header as any).delegationDepth ?? 0))
}

/** The data of the events of `type`. */
const dataOf = (events: ReadonlyArray<SessionEvent>, type: string) =>
  events.filter((e) => e.type === type).map((e) => e.data as Record<string, unknown>)

describe("agent-loop run --subagent on the offline model", () => {
  it.live(
    "delegates to a child that delegates to a forked grandchild: the lines, the three sessions in the store, transcript --follow-children nests them",
    () =>
      Effect.gen(function*() {
        const cwd = tmpDir()
        const store = Path.join(cwd, "s")
        Fs.writeFileSync(Path.join(cwd, "notes.txt"), "hello notes")
        const prompt = "ask a sub-agent to ask a forked sub-agent to read file notes.txt"
        const r = yield* spawn(["run", "--subagent", "--subagent-fork", "--prompt", prompt, "--store", store], cwd)
        const [parent, child, grandchild] = byDepth(store)
        expect(byDepth(store).length).toBe(3)
        const P = parent!.header.id
        const C = child!.header.id
        const G = grandchild!.header.id
        // The child's answer, as the offline model quotes it (80 code points, then …).
        const childAnswer = `Tool result (call_1_1_1): "Tool result (call_1_1_1): "hello notes" [sub-agent session ${
          G.slice(0, 20)
        }…"`
        expect(r).toEqual({
          code: 0,
          stdout: [
            "── turn 1 ──",
            `> ${prompt}`,
            "I received 1 message in this step: 1 from you (\"ask a sub-agent to ask a forked sub-agent to read file note…\").",
            "→ subagent({\"prompt\":\"ask a forked sub-agent to read file notes.txt\"})",
            `⇒ subagent ${C} started via spawn`,
            `⇐ subagent ${C} ended: completed: ${childAnswer}`,
            `← ${childAnswer}`,
            `  [sub-agent session ${C}]`,
            "Tool result (call_1_1_1): \"Tool result (call_1_1_1): \"Tool result (call_1_1_1): \"hello notes\" [sub-agent s…\"",
            "turn 1 ended: completed",
            "",
            `session log: ${Path.join(store, `${P}.jsonl`)}`,
            ""
          ].join("\n"),
          stderr: ""
        })
        // The lineage in the headers (§27 rule 2), the descriptors, the parent's start and end (rule 3).
        expect([parent!.header, child!.header, grandchild!.header].map((h: any) => [
          h.parentSession,
          h.parentCallId,
          h.origin,
          h.delegationDepth
        ])).toEqual([
          [undefined, undefined, undefined, undefined],
          [P, "call_1_1_1", "subagent", 1],
          [C, "call_1_1_1", "subagent", 2]
        ])
        expect(dataOf(child!.events, "subagent/descriptor")).toEqual([
          { version: 2, mode: "one-shot", provider: "spawn", label: "ask a forked sub-agent to read file notes.txt" }
        ])
        expect(dataOf(grandchild!.events, "subagent/descriptor")).toEqual([
          { version: 2, mode: "one-shot", provider: "fork", label: "read file notes.txt" }
        ])
        expect(dataOf(parent!.events, "subagent/start").map((d) => [d.id, d.callId, d.provider, d.depth])).toEqual([
          [C, "call_1_1_1", "spawn", 1]
        ])
        expect(dataOf(child!.events, "subagent/end").map((d) => [d.id, d.callId, d.provider, d.stopReason])).toEqual([
          [G, "call_1_1_1", "fork", "completed"]
        ])
        // The grandchild did the reading: its task came from its parent, not from a person.
        expect(dataOf(grandchild!.events, "user/message").map((m: any) => [m.source.kind, m.content[0].text])).toEqual([
          ["subagent", "read file notes.txt"]
        ])

        const file = Path.join(store, `${P}.jsonl`)
        const followed = yield* spawn(["transcript", "--follow-children", file], cwd)
        const grandAnswer = `Tool result (call_1_1_1): "hello notes"`
        const childLines = [
          `[subagent session ${C} of ${P}, depth 1]`,
          "[subagent: one-shot via spawn, \"ask a forked sub-agent to read file notes.txt\"]",
          "── turn 1 ──",
          "[context from subagent:call_1_1_1] ask a forked sub-agent to read file notes.txt",
          "I received 1 message in this step: a task from the parent session (\"ask a forked sub-agent to read file notes.txt\").",
          "→ subagent_fork({\"prompt\":\"read file notes.txt\"})",
          `⇒ subagent ${G} started via fork`,
          ...[
            `[subagent session ${G} of ${C}, depth 2]`,
            "[subagent: one-shot via fork, \"read file notes.txt\"]",
            "── turn 1 ──",
            "[context from subagent:call_1_1_1] read file notes.txt",
            "I received 1 message in this step: a task from the parent session (\"read file notes.txt\").",
            "→ read_file({\"path\":\"notes.txt\"})",
            "← hello notes",
            grandAnswer,
            "turn 1 ended: completed"
          ].map((l) => `  │ ${l}`),
          `⇐ subagent ${G} ended: completed: ${grandAnswer}`,
          `← ${grandAnswer}`,
          `  [sub-agent session ${G}]`,
          childAnswer,
          "turn 1 ended: completed"
        ]
        const plain = r.stdout.split("\n").slice(0, -3)
        expect(followed).toEqual({
          code: 0,
          stdout: [...plain.slice(0, 5), ...childLines.map((l) => `  │ ${l}`), ...plain.slice(5), ""].join("\n"),
          stderr: ""
        })
        // Without the flag, the parent's transcript alone (as run printed it).
        expect(yield* spawn(["transcript", file], cwd)).toEqual({ code: 0, stdout: [...plain, ""].join("\n"), stderr: "" })

        // A child that is not in the store is one line where its transcript would be.
        Fs.rmSync(Path.join(store, `${G}.jsonl`))
        const missing = yield* spawn(["transcript", "--follow-children", file], cwd)
        expect(missing).toEqual({
          code: 0,
          stdout: followed.stdout.replace(
            /( {2}│ {3}│ [^\n]*\n)+/,
            `  │   │ [subagent session ${G}: not in the store (no ${G}.jsonl in ${store})]\n`
          ),
          stderr: ""
        })
        expect(missing.stdout).not.toBe(followed.stdout)
        expect(yield* spawn(["transcript", "--follow-children", "--json", file], cwd)).toEqual({
          code: 2,
          stdout: "",
          stderr: "transcript: --follow-children goes with the text transcript, not --json\n"
        })
      }),
    // Five runs of the CLI one after another.
    5 * CLI_RUN_MS
  )

  it.live(
    "--ask subagent: the delegation itself asks (exit 5, the question left open); without --subagent the name is refused",
    () =>
      Effect.gen(function*() {
        const cwd = tmpDir()
        const store = Path.join(cwd, "s")
        expect(yield* spawn(["run", "--ask", "subagent", "--prompt", "x", "--store", store], cwd)).toEqual({
          code: 2,
          stdout: "",
          stderr: "--ask subagent: no tool of that name (the tools are wait, clock, read_file)\n"
        })
        const r = yield* spawn(
          ["run", "--subagent", "--ask", "subagent", "--prompt", "ask a sub-agent to wait 1 second", "--store", store],
          cwd
        )
        const [parent] = byDepth(store)
        expect(byDepth(store).length).toBe(1)
        const [asked] = dataOf(parent!.events, "approval/asked")
        const at = parent!.events.find((e) => e.type === "approval/asked")!.time
        expect([r.code, r.stderr.split("\n")[0]]).toEqual([
          5,
          `question ${asked!.id}: subagent {"prompt":"wait 1 second"} (call call_1_1_1, turn 1.1, asked ${
            new Date(at).toISOString()
          })`
        ])
      }),
    2 * CLI_RUN_MS
  )

  it.live(
    "a sub-agent's question in run: nobody can answer and the child cannot be left waiting, so the turn is cancelled (exit 5)",
    () =>
      Effect.gen(function*() {
        const cwd = tmpDir()
        const store = Path.join(cwd, "s")
        const r = yield* spawn(
          ["run", "--subagent", "--ask", "wait", "--prompt", "ask a sub-agent to wait 1 second", "--store", store],
          cwd
        )
        const [parent, child] = byDepth(store)
        const C = child!.header.id
        const [asked] = dataOf(child!.events, "approval/asked")
        const at = child!.events.find((e) => e.type === "approval/asked")!.time
        expect(r).toEqual({
          code: 5,
          stdout: [
            "── turn 1 ──",
            "> ask a sub-agent to wait 1 second",
            "I received 1 message in this step: 1 from you (\"ask a sub-agent to wait 1 second\").",
            "→ subagent({\"prompt\":\"wait 1 second\"})",
            `⇒ subagent ${C} started via spawn`,
            `⇐ subagent ${C} ended: aborted`,
            "← error: The turn was canceled while this tool call was running.",
            "turn 1 ended: aborted (no-approver)",
            "",
            `session log: ${Path.join(store, `${parent!.header.id}.jsonl`)}`,
            ""
          ].join("\n"),
          stderr: [
            `question ${asked!.id}: wait {"seconds":1} (call call_1_1_1, turn 1.1, session ${C}, asked ${
              new Date(at).toISOString()
            })`,
            "a sub-agent's call needs approval, which nobody can give here; a sub-agent cannot be left waiting (it runs inside its parent's call), so the turn was cancelled (agent-loop chat and acp answer a sub-agent's questions)",
            ""
          ].join("\n")
        })
        expect(dataOf(child!.events, "approval/decided").map((d) => [d.id, d.outcome])).toEqual([[asked!.id, "cancelled"]])
        expect(dataOf(child!.events, "turn/end").map((d) => d.reason)).toEqual([{
          kind: "aborted",
          reason: { kind: "parent", parentSession: parent!.header.id, callId: "call_1_1_1" }
        }])
      }),
    CLI_RUN_MS
  )
})

describe("agent-loop transcript --follow-children on DSH logs", () => {
  it.live(
    "a DSH parent names no child: the same transcript; a DSH child under a parent of ours is nested",
    () =>
      Effect.gen(function*() {
        const dir = tmpDir()
        const parent = Path.join(DSH, "acp__subagent-spawn-in-process__session.jsonl")
        const plain = yield* spawn(["transcript", parent], dir)
        expect(plain.code).toBe(0)
        expect(yield* spawn(["transcript", "--follow-children", parent], dir)).toEqual(plain)

        // A parent of ours naming the DSH child's session; the child's log (read in place) beside it.
        const childFixture = Path.join(DSH, "acp__subagent-spawn-in-process__session.1.jsonl")
        const childId = readLog(childFixture).header.id
        Fs.symlinkSync(childFixture, Path.join(dir, `${childId}.jsonl`))
        const ours = Path.join(dir, "p.jsonl")
        const start = { runId: "r1", provider: "spawn", id: childId, local: true, callId: "c1", depth: 1 }
        Fs.writeFileSync(
          ours,
          [
            { type: "session", format: "effect-agent-loop", version: 1, id: "p", createdAt: 0 },
            { type: "turn/start", seq: 0, time: 0, data: { turn: 1 } },
            { type: "step/start", seq: 1, time: 0, data: { turn: 1, step: 1 } },
            { type: "tool/call", seq: 2, time: 0, data: { turn: 1, step: 1, callId: "c1", name: "subagent", arguments: "{}" } },
            { type: "subagent/start", seq: 3, time: 0, data: start }
          ].map((l) => JSON.stringify(l)).join("\n") + "\n"
        )
        const followed = yield* spawn(["transcript", "--follow-children", ours], dir)
        const child = yield* spawn(["transcript", childFixture], dir)
        expect(followed).toEqual({
          code: 0,
          stdout: [
            "── turn 1 ──",
            "→ subagent({})",
            `⇒ subagent ${childId} started via spawn`,
            ...child.stdout.trimEnd().split("\n").map((l) => `  │ ${l}`),
            ""
          ].join("\n"),
          stderr: ""
        })
        expect(followed.stdout).toContain(`  │ [subagent session ${childId} of 5138ed0d-e86e-4a7d-b75b-803307e92b17, depth 1]\n`)
        expect(followed.stdout).toContain("  │ CHILD_OK\n")
      }),
    4 * CLI_RUN_MS
  )
})
