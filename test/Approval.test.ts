/**
 * The log shapes of approvals (§26): DSH's `approval/asked` / `approval/decided`, the questions a
 * log leaves open, and the rules `Invariant.check` holds them to (under rule 3 of §12).
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Schema } from "effect"
import * as Agent from "../src/Agent.js"
import * as Approval from "../src/Approval.js"
import * as IdGenerator from "../src/IdGenerator.js"
import * as Invariant from "../src/Invariant.js"
import type { EventDraft } from "../src/SessionEvent.js"
import * as SessionStore from "../src/SessionStore.js"
import * as Tool from "../src/Tool.js"
import * as Transcript from "../src/Transcript.js"
import * as TranscriptText from "../src/TranscriptText.js"
import {
  assistant,
  claim,
  entered,
  events,
  followup,
  foreign,
  msg,
  readDsh,
  stepEnd,
  stepStart,
  toolCall,
  toolResult,
  turnEnd,
  turnStart
} from "./utils/events.js"

const asked = (id: string, callId: string | undefined, toolName = "bash", reason?: string): EventDraft =>
  foreign("approval/asked", {
    id,
    toolName,
    ...(callId === undefined ? {} : { callId }),
    ...(reason === undefined ? {} : { reason })
  })
const decided = (id: string, outcome: string, extra: Record<string, unknown> = {}): EventDraft =>
  foreign("approval/decided", { id, outcome, ...extra })

/** Turn 1 up to a step whose assistant asks for two calls, c1 (asked about) and c2. */
const opening: ReadonlyArray<EventDraft> = [
  followup(msg("u1", "write notes.txt")),
  turnStart(1),
  claim("next-turn", 1),
  stepStart(1, 1),
  entered(msg("u1", "write notes.txt")),
  assistant(1, 1, undefined, { toolCalls: [{ id: "c1", name: "bash" }, { id: "c2", name: "clock" }] }),
  toolCall(1, 1, "c1", "bash"),
  asked("q1", "c1", "bash", "writes a file"),
  toolCall(1, 1, "c2", "clock")
]
const closing: ReadonlyArray<EventDraft> = [
  stepStart(1, 2),
  assistant(1, 2, "done"),
  stepEnd(1, 2),
  turnEnd(1)
]

describe("the approval events", () => {
  it("decode DSH's shapes and ours; an unknown outcome is not an outcome", () => {
    // As DSH writes them (its web app's approval snapshot, in shape).
    expect(
      Schema.decodeUnknownSync(Approval.AskedData)({
        id: "c9284e32-66fe-40d1-baba-a4a467d00f0d",
        toolName: "bash",
        callId: "call_00_Oa8HTzXO89hDxPkAtKSn1634",
        reason: "escalate sandbox to workspace-write"
      })
    ).toEqual({
      id: "c9284e32-66fe-40d1-baba-a4a467d00f0d",
      toolName: "bash",
      callId: "call_00_Oa8HTzXO89hDxPkAtKSn1634",
      reason: "escalate sandbox to workspace-write"
    })
    expect(Schema.decodeUnknownSync(Approval.DecidedData)({ id: "q", outcome: "allowed-once" })).toEqual({
      id: "q",
      outcome: "allowed-once"
    })
    expect(
      Schema.decodeUnknownSync(Approval.DecidedData)({
        id: "q",
        outcome: "rejected-always",
        by: { kind: "person", name: "ana" },
        reason: "not on main"
      })
    ).toEqual({ id: "q", outcome: "rejected-always", by: { kind: "person", name: "ana" }, reason: "not on main" })
    expect(Schema.is(Approval.DecidedData)({ id: "q", outcome: "allowed" })).toBe(false)
    expect(Schema.is(Approval.DecidedData)({ id: "q", outcome: "allowed-once", by: { kind: "robot" } })).toBe(false)
    expect(Approval.Outcome.literals.filter(Approval.isAllowed)).toEqual(["allowed-once", "allowed-always"])
  })
})

describe("Approval.openQuestions", () => {
  it("lists the questions without a decision, in the order asked, with the seq and time of the question", () => {
    const log = events(opening, asked("q2", "c2", "clock"), decided("q2", "rejected"))
    expect(Approval.openQuestions(log)).toEqual([
      { id: "q1", toolName: "bash", callId: "c1", reason: "writes a file", seq: 7, time: 70 }
    ])
    expect(Approval.openQuestions(events(opening, decided("q1", "allowed-once")))).toEqual([])
  })
})

describe("Invariant.check of approvals", () => {
  it("a question decided before its call's result, in a closed step: no violation", () => {
    const log = events(
      opening,
      decided("q1", "allowed-once", { by: { kind: "person" } }),
      toolResult(1, 1, "c1", "written"),
      toolResult(1, 1, "c2", "12:00"),
      stepEnd(1, 1),
      closing
    )
    expect(Invariant.check(log)).toEqual([])
  })

  it("a log that stops while a question is open (a crash, or a person not yet answered): no violation", () => {
    expect(Invariant.check(events(opening))).toEqual([])
  })

  it("names each broken rule: the result before the decision, a step ended with a question open, two decisions, two questions, strangers", () => {
    const resultFirst = events(
      opening,
      toolResult(1, 1, "c1", "written"),
      decided("q1", "allowed-once"),
      toolResult(1, 1, "c2", "12:00"),
      stepEnd(1, 1)
    )
    expect(Invariant.check(resultFirst)).toEqual([
      { seq: 9, rule: 3, message: "tool/result c1 before approval q1 is decided" }
    ])
    const stepEndsOpen = events(opening, toolResult(1, 1, "c2", "12:00"), stepEnd(1, 1))
    expect(Invariant.check(stepEndsOpen)).toEqual([
      { seq: 10, rule: 3, message: "tool/call c1 has no tool/result before step/end" }
    ])
    const twice = events(
      opening,
      decided("q1", "allowed-once"),
      decided("q1", "rejected"),
      asked("q1", "c2"),
      asked("q3", "c1"),
      asked("q4", "c9"),
      decided("q5", "rejected"),
      decided("q4", "maybe")
    )
    expect(Invariant.check(twice)).toEqual([
      { seq: 10, rule: 3, message: "approval/decided q1 decides a question a second time" },
      { seq: 11, rule: 3, message: "approval/asked q1 is asked a second time" },
      { seq: 12, rule: 3, message: "approval/asked q3 is a second question about c1" },
      { seq: 13, rule: 3, message: "approval/asked q4 names c9, not a tool/call of this step" },
      { seq: 14, rule: 3, message: "approval/decided q5 names no question asked before it" },
      {
        seq: 15,
        rule: 3,
        message:
          "approval/decided data is not {id, outcome, by?, reason?} with a known outcome: {\"id\":\"q4\",\"outcome\":\"maybe\"}"
      }
    ])
    const outside = events(
      opening.slice(0, 3),
      asked("q1", "c1"),
      foreign("approval/asked", { id: 5 })
    )
    expect(Invariant.check(outside)).toEqual([
      { seq: 3, rule: 2, message: "approval/asked q1 outside an open step" },
      { seq: 4, rule: 3, message: "approval/asked data is not {id, toolName, callId?, reason?}: {\"id\":5}" }
    ])
  })
})

describe("DSH's recorded logs with approvals", () => {
  it.effect("read as DSH wrote them: the pair after the tool/call and before its result, valid, nothing left open", () =>
    Effect.gen(function*() {
      for (
        const [file, toolName, outcome] of [
          ["acp__escalation-rejected__session.jsonl", "bash", "rejected"],
          ["acp__fs-escalation-approved__session.jsonl", "write", "allowed-once"]
        ] as const
      ) {
        const log = yield* Effect.promise(() => readDsh(file))
        const around = log.events.flatMap((e, i) =>
          e.type === "approval/asked" ? log.events.slice(i - 1, i + 3).map((x) => x.type) : []
        )
        expect([file, around]).toEqual([file, ["tool/call", "approval/asked", "approval/decided", "tool/result"]])
        const asked = log.events.filter((e) => e.type === "approval/asked").map((e) =>
          Schema.decodeUnknownSync(Approval.AskedData)(e.data)
        )
        const decided = log.events.filter((e) => e.type === "approval/decided").map((e) =>
          Schema.decodeUnknownSync(Approval.DecidedData)(e.data)
        )
        expect([file, asked.map((q) => q.toolName), decided.map((d) => [d.id === asked[0]!.id, d.outcome])]).toEqual([
          file,
          [toolName],
          [[true, outcome]]
        ])
        expect([file, Invariant.check(log.events, { header: log.header })]).toEqual([file, []])
        expect([file, Approval.openQuestions(log.events)]).toEqual([file, []])
        // Cut right after the question, as a crash while a person decides leaves it: one question open.
        const cut = log.events.slice(0, log.events.findIndex((e) => e.type === "approval/decided"))
        expect([file, Approval.openQuestions(cut).map((q) => [q.toolName, q.callId === undefined])]).toEqual([
          file,
          [[toolName, false]]
        ])
        expect([file, Invariant.check(cut, { header: log.header })]).toEqual([file, []])
      }
    }))
})

describe("the transcript of approvals", () => {
  it("an entry when asked and one when decided, each in its turn and step; the text names the tool, the outcome, who decided and why", () => {
    const log = events(
      opening,
      asked("q2", "c2", "clock"),
      decided("q1", "rejected-always", { by: { kind: "person", name: "ana" }, reason: "not on main" }),
      decided("q2", "allowed-once", { by: { kind: "policy", policy: "remembered" } }),
      decided("q9", "unavailable")
    )
    const entries = Transcript.fromEvents(log).filter((e) => e.kind === "approval")
    expect(entries).toEqual([
      {
        kind: "approval",
        event: "asked",
        turn: 1,
        step: 1,
        id: "q1",
        toolName: "bash",
        callId: "c1",
        reason: "writes a file"
      },
      { kind: "approval", event: "asked", turn: 1, step: 1, id: "q2", toolName: "clock", callId: "c2", reason: undefined },
      {
        kind: "approval",
        event: "decided",
        turn: 1,
        step: 1,
        id: "q1",
        toolName: "bash",
        callId: "c1",
        outcome: "rejected-always",
        by: { kind: "person", name: "ana" },
        reason: "not on main"
      },
      {
        kind: "approval",
        event: "decided",
        turn: 1,
        step: 1,
        id: "q2",
        toolName: "clock",
        callId: "c2",
        outcome: "allowed-once",
        by: { kind: "policy", policy: "remembered" },
        reason: undefined
      },
      {
        kind: "approval",
        event: "decided",
        turn: 1,
        step: 1,
        id: "q9",
        toolName: undefined,
        callId: undefined,
        outcome: "unavailable",
        by: undefined,
        reason: undefined
      }
    ])
    expect(TranscriptText.render(entries).split("\n")).toEqual([
      "── turn 1 ──",
      "? bash needs approval: writes a file",
      "? clock needs approval",
      "? bash: rejected always by ana: not on main",
      "? clock: allowed once by the policy remembered",
      "? question q9: unavailable (no one could answer; refused)",
      ""
    ])
  })

  it.effect("DSH's recorded approval, between the call and its result", () =>
    Effect.gen(function*() {
      const log = yield* Effect.promise(() => readDsh("acp__escalation-rejected__session.jsonl"))
      const lines = TranscriptText.render(Transcript.fromEvents(log.events)).split("\n")
      const at = lines.findIndex((l) => l.startsWith("? bash needs approval"))
      expect(lines.slice(at - 1, at + 3).map((l) => l.slice(0, 60))).toEqual([
        "→ bash({\"command\": \"printf 'escalated\\\\n' > /tmp/dsh-escalat",
        "? bash needs approval: escalate sandbox to danger-full-acces",
        "? bash: rejected",
        "← error: Error: the user rejected escalating this command to"
      ])
    }))
})

describe("the approval policy (rule 1 of §26)", () => {
  const request = (toolName: string, args: unknown, callId = "c1"): Approval.Request => ({
    toolName,
    callId,
    arguments: args,
    turn: 1,
    step: 2
  })

  it.effect("runs the listeners outermost first; next() of the innermost reaches the default ask", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const listener = (name: string): Approval.Listener => (req, next) =>
        Effect.sync(() => seen.push(`${name}:${req.toolName}`)).pipe(Effect.zipRight(next()))
      const decision = yield* Approval.decide([listener("outer"), listener("inner")], request("bash", {}))
      expect(decision).toEqual({ _tag: "Ask" })
      expect(seen).toEqual(["outer:bash", "inner:bash"])
      expect(yield* Approval.decide([], request("bash", {}))).toEqual({ _tag: "Ask" })
    }))

  it.effect("an outer answer skips the inner listeners; an outer listener sees the inner answer", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const inner: Approval.Listener = () => Effect.sync(() => (seen.push("inner"), Approval.Answer.deny("no")))
      const denyFirst: Approval.Listener = () => Effect.succeed(Approval.Answer.deny("stop"))
      expect(yield* Approval.decide([denyFirst, inner], request("bash", {}))).toEqual({ _tag: "Deny", reason: "stop" })
      expect(seen).toEqual([])
      const upgrade: Approval.Listener = (_, next) =>
        Effect.map(next(), (answer) => answer._tag === "Deny" ? Approval.Answer.ask : answer)
      expect(yield* Approval.decide([upgrade, inner], request("bash", {}))).toEqual({ _tag: "Ask" })
      expect(seen).toEqual(["inner"])
    }))

  it.effect("the layer holds the listeners and decides with them", () =>
    Effect.gen(function*() {
      const allowAll: Approval.Listener = () => Effect.succeed(Approval.Answer.allow)
      const service = yield* Approval.Approval.pipe(Effect.provide(Approval.layer([allowAll])))
      expect(service.listeners).toEqual([allowAll])
      expect(yield* service.decide(request("bash", {}))).toEqual({ _tag: "Allow" })
      const none = yield* Approval.Approval.pipe(Effect.provide(Approval.layer([])))
      expect(yield* none.decide(request("bash", {}))).toEqual({ _tag: "Ask" })
    }))

  it.effect("with no layer the Approval in context is the default: no listeners, every call asks a person", () =>
    Effect.gen(function*() {
      const service = yield* Approval.Approval
      expect(service).toBe(Approval.defaultService)
      expect([service.listeners, Object.isFrozen(service.listeners)]).toEqual([[], true])
      expect(yield* service.decide(request("bash", { command: "rm -rf /" }))).toEqual({ _tag: "Ask" })
      // A provided policy replaces it (how `Agent.make` reads it).
      const denyAll: Approval.Listener = () => Effect.succeed(Approval.Answer.deny("no"))
      const provided = yield* Approval.Approval.pipe(Effect.provide(Approval.layer([denyAll])))
      expect(yield* provided.decide(request("bash", {}))).toEqual({ _tag: "Deny", reason: "no" })
    }))

  it.effect("a failing listener gives Unavailable, never Allow, even when an outer one recovers", () =>
    Effect.gen(function*() {
      const fails: Approval.Listener = () => Effect.fail(new Error("policy store down"))
      const dies: Approval.Listener = () => Effect.die("boom")
      const throws: Approval.Listener = () => {
        throw new Error("thrown")
      }
      const recovers: Approval.Listener = (_, next) => Effect.orElseSucceed(next(), () => Approval.Answer.allow)
      const bad: Approval.Listener = () => Effect.succeed({ _tag: "Maybe" } as unknown as Approval.Answer)
      const messages: Array<[string, string]> = []
      for (
        const listeners of [[fails], [dies], [throws], [recovers, fails], [bad]] as const
      ) {
        const decision = yield* Approval.decide(listeners, request("bash", {}))
        expect(decision._tag).toBe("Unavailable")
        if (decision._tag === "Unavailable") messages.push([decision.message, String(Cause.squash(decision.cause))])
      }
      expect(messages).toEqual([
        ["the approval policy failed: policy store down", "Error: policy store down"],
        ["the approval policy failed: boom", "boom"],
        ["the approval policy failed: thrown", "Error: thrown"],
        ["the approval policy failed: policy store down", "Error: policy store down"],
        [
          "the approval policy failed: a listener answered {\"_tag\":\"Maybe\"}, which is not an Answer",
          "Error: a listener answered {\"_tag\":\"Maybe\"}, which is not an Answer"
        ]
      ])
    }))

  it.effect("an interrupted listener interrupts the decision", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Approval.decide([() => Effect.interrupt], request("bash", {})))
      expect(Exit.isInterrupted(exit)).toBe(true)
    }))

  describe("Approval.byName", () => {
    const policy = Approval.byName({
      allow: [{ tool: "read_file" }, { tool: "bash", argument: "command", glob: "git status*" }, {
        tool: "bash",
        argument: "command",
        glob: "ls ?"
      }],
      deny: [{ tool: "bash", argument: "command", glob: "git status --porcelain*" }, { tool: "rm" }]
    })
    const decideWith = (toolName: string, args: unknown) => Approval.decide([policy], request(toolName, args))

    it.effect("allows by tool name and by a glob on one string argument", () =>
      Effect.gen(function*() {
        expect(yield* decideWith("read_file", { path: "/etc/passwd" })).toEqual({ _tag: "Allow", policy: "byName" })
        expect(yield* decideWith("bash", { command: "git status" })).toEqual({ _tag: "Allow", policy: "byName" })
        expect(yield* decideWith("bash", { command: "git status -s\nrm -rf /" })).toEqual({
          _tag: "Allow",
          policy: "byName"
        })
        expect(yield* decideWith("bash", { command: "ls a" })).toEqual({ _tag: "Allow", policy: "byName" })
      }))

    it.effect("denies, and deny wins over allow", () =>
      Effect.gen(function*() {
        expect(yield* decideWith("rm", { path: "x" })).toEqual({
          _tag: "Deny",
          reason: "it matches the deny rule tool \"rm\"",
          policy: "byName"
        })
        expect(yield* decideWith("bash", { command: "git status --porcelain=v2" })).toEqual({
          _tag: "Deny",
          reason: "it matches the deny rule tool \"bash\" with command matching \"git status --porcelain*\"",
          policy: "byName"
        })
      }))

    it.effect("no match, a missing or a non-string argument goes to next()", () =>
      Effect.gen(function*() {
        expect(yield* decideWith("write_file", { path: "x" })).toEqual({ _tag: "Ask" })
        expect(yield* decideWith("bash", { command: "git log" })).toEqual({ _tag: "Ask" })
        expect(yield* decideWith("bash", { command: "ls ab" })).toEqual({ _tag: "Ask" })
        expect(yield* decideWith("bash", { command: "ls " })).toEqual({ _tag: "Ask" })
        expect(yield* decideWith("bash", { cmd: "git status" })).toEqual({ _tag: "Ask" })
        expect(yield* decideWith("bash", { command: ["git status"] })).toEqual({ _tag: "Ask" })
        expect(yield* decideWith("bash", "git status")).toEqual({ _tag: "Ask" })
        expect(yield* decideWith("bash", null)).toEqual({ _tag: "Ask" })
        const inner: Approval.Listener = () => Effect.succeed(Approval.Answer.deny("inner"))
        expect(yield* Approval.decide([policy, inner], request("bash", { command: "make" }))).toEqual({
          _tag: "Deny",
          reason: "inner"
        })
      }))

    it("rejects a rule with only one of argument and glob", () => {
      expect(() => Approval.byName({ allow: [{ tool: "bash", argument: "command" } as Approval.ByNameRule] })).toThrow(
        "Approval.byName: a rule gives both \"argument\" and \"glob\" or neither; got {\"tool\":\"bash\",\"argument\":\"command\"}"
      )
    })
  })

  it("globMatch: * any run, ? one character, the rest literal, anchored", () => {
    const cases: Array<[string, string]> = [
      ["*", ""],
      ["*", "a/b\nc"],
      ["a*b", "ab"],
      ["a*b", "axxb"],
      ["a*b", "axxbc"],
      ["a?c", "abc"],
      ["a?c", "ac"],
      ["a?c", "a😀c"],
      ["[ab]", "a"],
      ["[ab]", "[ab]"],
      ["a.c", "abc"],
      ["a\\*", "a\\xyz"],
      ["abc", "xabcx"],
      ["*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]
    ]
    expect(cases.map(([glob, text]) => Approval.globMatch(glob, text))).toEqual([
      true,
      true,
      true,
      true,
      false,
      true,
      false,
      true,
      false,
      true,
      false,
      true,
      false,
      false
    ])
  })

  describe("Tool.make({ approval })", () => {
    const parameters = Schema.Struct({ command: Schema.String })
    const execute = ({ command }: { readonly command: string }) => Effect.succeed({ content: command })
    const call = (command: string): Tool.ToolCall => ({
      callId: "c7",
      name: "bash",
      arguments: { command },
      rawArguments: JSON.stringify({ command }),
      turn: 1,
      step: 3
    })

    it.effect("never (the default) and always", () =>
      Effect.gen(function*() {
        const plain = Tool.make({ name: "bash", description: "d", parameters, execute })
        const never = Tool.make({ name: "bash", description: "d", parameters, execute, approval: "never" })
        const always = Tool.make({ name: "bash", description: "d", parameters, execute, approval: "always" })
        expect([plain.approval, never.approval, always.approval]).toEqual(["never", "never", "always"])
        expect(yield* Tool.needsApproval(plain, { command: "ls" }, call("ls"))).toBe(false)
        expect(yield* Tool.needsApproval(never, { command: "ls" }, call("ls"))).toBe(false)
        expect(yield* Tool.needsApproval(always, { command: "ls" }, call("ls"))).toBe(true)
        // The same shared effect for every call: nothing is allocated per call.
        expect(Tool.needsApproval(plain, { command: "a" }, call("a"))).toBe(
          Tool.needsApproval(never, { command: "b" }, call("b"))
        )
      }))

    it.effect("a function of the decoded arguments and the call", () =>
      Effect.gen(function*() {
        const seen: Array<string> = []
        const tool = Tool.make({
          name: "bash",
          description: "d",
          parameters,
          execute,
          approval: (args, c) =>
            Effect.sync(() => {
              seen.push(`${c.callId}/${c.step}:${args.command}`)
              return !args.command.startsWith("ls")
            })
        })
        expect(yield* Tool.needsApproval(tool, { command: "ls -l" }, call("ls -l"))).toBe(false)
        expect(yield* Tool.needsApproval(tool, { command: "rm -r x" }, call("rm -r x"))).toBe(true)
        expect(seen).toEqual(["c7/3:ls -l", "c7/3:rm -r x"])
      }))

    it.effect("a failing function fails ApprovalCheckFailed (decided unavailable)", () =>
      Effect.gen(function*() {
        const failing = (approval: Tool.ToolApproval<{ readonly command: string }>) =>
          Tool.make({ name: "bash", description: "d", parameters, execute, approval })
        const errors = yield* Effect.forEach([
          failing(() => Effect.fail("no rules loaded")),
          failing(() => Effect.die(new Error("bug"))),
          failing(() => {
            throw new Error("thrown")
          })
        ], (tool) => Effect.flip(Tool.needsApproval(tool, { command: "ls" }, call("ls"))))
        expect(errors.map((e) => [e._tag, e.message, e.toolName, e.callId])).toEqual([
          ["ApprovalCheckFailed", "the approval check of tool \"bash\" failed: no rules loaded", "bash", "c7"],
          ["ApprovalCheckFailed", "the approval check of tool \"bash\" failed: bug", "bash", "c7"],
          ["ApprovalCheckFailed", "the approval check of tool \"bash\" failed: thrown", "bash", "c7"]
        ])
        const interrupted = yield* Effect.exit(Tool.needsApproval(failing(() => Effect.interrupt), { command: "ls" }, call("ls")))
        expect(Exit.isInterrupted(interrupted)).toBe(true)
      }))
  })
})

describe("crash repair of a step with questions (rule 8 of §26)", () => {
  const repaired = (drafts: ReadonlyArray<EventDraft>) =>
    Effect.gen(function*() {
      const store = yield* SessionStore.SessionStore
      const log = yield* store.create({ id: "s1" })
      yield* log.append(drafts)
      const appended = yield* Agent.repair("s1")
      return { appended, events: log.events() }
    }).pipe(Effect.provide(Layer.merge(SessionStore.layerMemory, IdGenerator.layerSeeded(1))))

  it.effect("a question still open: nothing is appended, the turn stays open", () =>
    Effect.gen(function*() {
      const { appended } = yield* repaired(opening)
      expect(appended).toEqual([])
    }))

  it.effect("a call refused before the crash, its result not committed: DENIED, not an unknown outcome", () =>
    Effect.gen(function*() {
      const { appended, events } = yield* repaired([
        ...opening,
        decided("q1", "rejected", { by: { kind: "person", name: "ana" }, reason: "no" })
      ])
      expect(appended.map((e) => {
        const d = e.data as any
        return e.type === "tool/result"
          ? [e.type, d.message.content[0].toolCallId, d.error.code, d.message.content[0].content[0].text]
          : [e.type]
      })).toEqual([
        ["tool/result", "c1", "DENIED", "The call to bash was rejected by ana: no"],
        [
          "tool/result",
          "c2",
          "TOOL_OUTCOME_UNKNOWN",
          "The session stopped while this tool call was running; whether it took effect is unknown. Check before calling it again."
        ],
        ["step/end"],
        ["turn/end"],
        ["session/end-seed"]
      ])
      expect(Invariant.check(events)).toEqual([])
    }))

  it.effect("a call allowed before the crash: its outcome is unknown (it may have started), never run again", () =>
    Effect.gen(function*() {
      const { appended } = yield* repaired([...opening, decided("q1", "allowed-once")])
      expect(appended.filter((e) => e.type === "tool/result").map((e) => (e.data as any).error.code)).toEqual([
        "TOOL_OUTCOME_UNKNOWN",
        "TOOL_OUTCOME_UNKNOWN"
      ])
    }))
})
