/**
 * The tool batch of a step (§8): calls are validated (a known tool, arguments that are
 * JSON and decode with its `Schema`), guarded and logged (`tool/call`) in model order before they
 * start; they run concurrently up to `toolConcurrency`, an `exclusive` call alone; hooks process
 * each result; every failure is an error result with a §8 code and the loop goes on. Results are
 * committed by `toolResults.ts`.
 *
 * The calls of a group start at once, in model order, each running until it completes or
 * suspends, on fibers started with `Runtime.runFork` on the spot (a synchronous tool costs no
 * scheduling; an `Effect.fork` per call was measured too slow: §24); a fiber that suspends joins
 * the agent's `calls` (`fibers.ts`), which the interrupted batch clears and the agent's disposal
 * closes. One fiber
 * runs the group's calls one after another while each completes at once; when a call suspends,
 * its fiber keeps it and a new fiber starts the next call (`startGroup`). A fiber per call cost
 * ~1 µs each (its FiberRefs copied, its scope, its exit), 8 of every 8 calls of an instant
 * batch (§24). What a call sees is what a fiber of its own would give it: the FiberRefs of
 * the batch's start (reset before each call that follows another on the same fiber); the one
 * difference is that the fibers a call forks (`Effect.fork`) are interrupted when its fiber
 * ends, which for a call that completed at once may be after the calls that followed it on
 * that fiber. A single call runs on the driver fiber.
 */
import { Cause, Effect, Either, Exit, type Fiber, FiberRef, type FiberRefs, Option, ParseResult, Runtime, Schema } from "effect"
import * as Approval from "../../Approval.js"
import { IdGenerator } from "../../IdGenerator.js"
import type { ContentBlock, UserMessage } from "../../Message.js"
import { UserMessage as UserMessages } from "../../Message.js"
import type { EventDraft, ToolErrorCode } from "../../SessionEvent.js"
import type { SessionWriteError } from "../../SessionLog.js"
import * as Tool from "../../Tool.js"
import { refusalText } from "../approvalText.js"
import { causeMessage, messageOf } from "../cause.js"
import { currentRuntime } from "../fork.js"
import { checkJson } from "../json.js"
import { isContentShape, isUserMessageShape } from "../logCodec.js"
import { oversize, textBlock } from "../message.js"
import { toolFailedText } from "../toolError.js"
import * as Trace from "../tracing.js"
import type { Resume } from "../waiters.js"
import * as Approvals from "./approvals.js"
import { interruptCalls, ownCall } from "./fibers.js"
import { assistantDraft, logAssistant } from "./modelStep.js"
import { publish } from "./observers.js"
import { commit } from "./section.js"
import { type Accumulator, type AgentState, type CallState, type Question, seen, type TurnState } from "./state.js"
import { commitAbortedCalls, commitBeforeStepEnd, commitReady, fail, succeed } from "./toolResults.js"

/** A validated call ready to run: the call, its tool and decoded arguments (§8). */
interface Run {
  readonly ok: true
  readonly call: CallState
  readonly tool: Tool.Tool<any>
  readonly args: unknown
  /** The open question the call waits for before it starts (§26), if any. */
  readonly question?: Question | undefined
  /** The question a policy decided at once, allowing the call (§26): for the call's span (§19). */
  readonly allowed?: { readonly askedAt: number; readonly data: Approval.DecidedData } | undefined
}

/** A validated tool call: ready to run, or the error result to record (§8). */
type Validated = Run | { readonly ok: false; readonly code: ToolErrorCode; readonly text: string }

/** Raw tool arguments that decode as `{}`. */
const BLANK = /^\s*$/

/** Each tool's arguments decoder, built once (all errors reported). */
const decoders = new WeakMap<Tool.Tool<any>, (u: unknown) => Either.Either<unknown, ParseResult.ParseError>>()
const decoderOf = (tool: Tool.Tool<any>) => {
  let decode = decoders.get(tool)
  if (decode === undefined) {
    const decodeEither = Schema.decodeUnknownEither(tool.parameters, { errors: "all" })
    decode = (u) => decodeEither(u)
    decoders.set(tool, decode)
  }
  return decode
}

/** A tool call's context (§8): a class, so that a call allocates one object, not closures. */
class CallContext implements Tool.ToolContext {
  constructor(
    readonly callId: string,
    readonly turn: number,
    readonly step: number,
    readonly agent: Tool.ToolAgent,
    private readonly owner: AgentState
  ) {}
  get progress(): Tool.ToolContext["progress"] {
    return (report) =>
      Effect.sync(() =>
        publish(this.owner, {
          type: "tool/progress",
          callId: this.callId,
          turn: this.turn,
          step: this.step,
          progress: report.progress,
          ...(report.total !== undefined ? { total: report.total } : {}),
          ...(report.message !== undefined ? { message: report.message } : {})
        })
      )
  }
  get makeMessage(): Tool.ToolContext["makeMessage"] {
    return (input) =>
      UserMessages.make(
        typeof input === "string"
          ? { text: input, source: { kind: "tool", callId: this.callId } }
          : input.source === undefined
          ? { ...input, source: { kind: "tool", callId: this.callId } }
          : input
      ).pipe(Effect.provideService(IdGenerator, this.owner.config.ids))
  }
}

/** A truncated response runs none of its calls: each gets `tool/call` + `TRUNCATED` (§6.4). */
export const truncateCalls = (a: AgentState, t: TurnState): Effect.Effect<void, SessionWriteError> => {
  const calls = t.calls ?? []
  for (const c of calls) fail(c, "TRUNCATED", "The response was truncated (max tokens); this tool call was not run.")
  return commitAbortedCalls(a, t, calls, false)
}

/**
 * Logs a response with tool calls and runs them (§8). Without guards or approvals, the assistant message
 * and the `tool/call`s of the first group (the calls that can start together) are one append.
 */
export const toolStep = (a: AgentState, t: TurnState, acc: Accumulator): Effect.Effect<void, SessionWriteError> => {
  if (a.config.perCall) return Effect.flatMap(logAssistant(a, t, acc, false), () => runTools(a, t, undefined))
  return Effect.flatMap(a.config.ids.next, (id) => {
    const assistant = assistantDraft(a, t, acc, false, id)
    const calls = assistant.calls!
    const end = groupEnd(a, calls, 0, 0)
    if (end === 0) return Effect.flatMap(commit(a, [assistant.draft], assistant.apply), () => runTools(a, t, undefined))
    const group = groupSection(a, t, calls.slice(0, end))
    return Effect.flatMap(
      commit(a, [assistant.draft, ...group.drafts], () => {
        assistant.apply()
        return group.apply()
      }),
      (runs) => runTools(a, t, { end, runs })
    )
  })
}

/** A call a resumed log left waiting: its index in the step's calls, its question's id and time. */
export interface Waiting {
  readonly index: number
  readonly id: string
  readonly askedAt: number
}

/** The batch of a resumed step, its questions open again (`reopen`), to go on with (`continueBatch`). */
export interface Reopened {
  readonly runs: ReadonlyArray<Run | undefined>
  /** Waiting calls that no longer validate: their question id, call, error code and text. */
  readonly invalid: ReadonlyArray<readonly [string, CallState, ToolErrorCode, string]>
  readonly from: number
}

/**
 * Opens again the questions of a step a resumed log left waiting for a person (§26 rule 8):
 * each waiting call is validated with the resumed agent's tools and its question is open again
 * (synchronously, so that the status says so at once). `from` is the first call without a
 * `tool/call`.
 */
export const reopen = (a: AgentState, t: TurnState, waiting: ReadonlyArray<Waiting>, from: number): Reopened => {
  const calls = t.calls ?? []
  const runs = new Array<Run | undefined>(from).fill(undefined)
  const invalid: Array<readonly [string, CallState, ToolErrorCode, string]> = []
  for (const w of waiting) {
    const call = calls[w.index]!
    const checked = validate(a, call)
    // A call that no longer validates is not open again: nobody may allow it (`continueBatch`).
    if (!checked.ok) invalid.push([w.id, call, checked.code, checked.text])
    else runs[w.index] = { ...checked, question: Approvals.open(a, w.id, call, checked.args, t.turn, t.step, w.askedAt) }
  }
  return { runs, invalid, from }
}

/**
 * Goes on with the tool batch of a resumed step (§26 rule 8): `t.calls` as the log has them
 * (committed results, results owed by the crash), the waiting calls wait for their decisions,
 * the calls from `from` on are prepared and run as usual. A waiting call whose tool is gone or
 * whose arguments no longer decode gets its question decided `unavailable` and the validation's
 * error result.
 */
export const continueBatch = (a: AgentState, t: TurnState, batch: Reopened): Effect.Effect<void, SessionWriteError> => {
  const refused = Effect.forEach(
    batch.invalid,
    ([id, call, code, text]) => Effect.tap(Approvals.decideClosed(a, id, "unavailable", text), () => fail(call, code, text)),
    { discard: true }
  )
  return Effect.zipRight(refused, runTools(a, t, { end: batch.from, runs: batch.runs }))
}

/**
 * The end of the group of calls from `start` that can start together: up to the free slots
 * (`running` calls run), up to the next `exclusive` call (a leading exclusive call: none).
 */
const groupEnd = (a: AgentState, calls: ReadonlyArray<CallState>, start: number, running: number): number => {
  const bound = a.config.toolBound
  let end = start
  while (end < calls.length && end - start < bound - running && !(a.config.tools.get(calls[end]!.name)?.exclusive ?? false)) end++
  return end
}

/**
 * Whether a step with a single call runs it on the driver fiber (rule 4 of §24). Only the
 * differential test of the fast paths (`test/FastPaths.test.ts`) turns it off, to compare the
 * fast path with the batch of one it must be equivalent to.
 */
export const fastPaths = { singleCall: true }

/** Runs the calls of `t`, the first group already logged when `first` is given. */
const runTools = (
  a: AgentState,
  t: TurnState,
  first: { readonly end: number; readonly runs: ReadonlyArray<Run | undefined> } | undefined
): Effect.Effect<void, SessionWriteError> => {
  const calls = t.calls ?? []
  if (calls.length === 1 && fastPaths.singleCall) {
    // Fast path: no fiber for a single call.
    const prepared = first !== undefined
      ? Effect.succeed(first.runs[0])
      : a.config.perCall
      ? prepare(a, t, calls[0]!)
      : Effect.map(prepareGroup(a, t, calls), (runs) => runs[0])
    return prepared.pipe(
      Effect.flatMap((run) => (run === undefined ? Effect.void : execution(a, t, run))),
      Effect.flatMap(() => commitBeforeStepEnd(a, t))
    )
  }
  return Effect.suspend(() => runBatch(a, t, calls, first))
}

/**
 * Runs a batch of calls (§8): each is prepared (validated, guarded, `tool/call` logged) in
 * model order and started at once in its own fiber, which runs on the spot until it completes
 * or suspends; at most `toolConcurrency` run at a time; an `exclusive` call waits for the running
 * ones and runs alone. The driver commits the results in call order whenever it waits, and at
 * the end, several in one append. Interrupting the driver interrupts every started call (the
 * agent's `calls`, `fibers.ts`).
 */
const runBatch = (
  a: AgentState,
  t: TurnState,
  calls: ReadonlyArray<CallState>,
  first: { readonly end: number; readonly runs: ReadonlyArray<Run | undefined> } | undefined
): Effect.Effect<void, SessionWriteError> => {
  const bound = a.config.toolBound
  const runtime = currentRuntime()
  let running = 0
  let wake: Resume<void> | undefined = undefined
  const settled = () => {
    running--
    const resume = wake
    if (resume !== undefined) {
      wake = undefined
      resume(Effect.void)
    }
  }
  // Resumes at the next completion, or at once when `ready()` holds (checked as it registers).
  const completion = (ready: () => boolean) =>
    Effect.async<void>((resume) => {
      if (ready()) return resume(Effect.void)
      wake = resume
      return Effect.sync(() => {
        wake = undefined
      })
    })
  // Commits what is ready only when it has to wait (a batch that never waits commits its
  // results with the step's end).
  const waitUntil = (ready: () => boolean): Effect.Effect<void, SessionWriteError> =>
    Effect.suspend(() =>
      ready() ?
        Effect.void :
        Effect.flatMap(commitReady(a, t), () => ready() ? Effect.void : Effect.flatMap(completion(ready), () => waitUntil(ready)))
    )
  const idle = () => running === 0
  const free = () => running < bound
  const isExclusive = (call: CallState) => a.config.tools.get(call.name)?.exclusive ?? false
  // Starts the executions of a group, in model order: a fiber runs them one after another
  // while each completes at once; a call that suspends keeps its fiber (one `running` slot) and
  // the next fiber starts the next call, before anything else runs.
  const startGroup = (runs: ReadonlyArray<Run | undefined>) => {
    const group = { runs, next: 0 }
    while (nextRun(group) < runs.length) {
      const fiber = Runtime.runFork(runtime)(runGroup(a, t, group))
      if (fiber.unsafePoll() === null) {
        running++
        ownCall(a, fiber)
        fiber.addObserver(settled)
      }
    }
  }
  const dispatch = (i: number): Effect.Effect<void, SessionWriteError> => {
    // Once none runs, every result is done: the rest go with the step's end.
    if (i === calls.length) return Effect.flatMap(waitUntil(idle), () => commitBeforeStepEnd(a, t))
    const call = calls[i]!
    if (isExclusive(call)) {
      // A barrier: the running calls finish and their results are committed first; its
      // result is committed before any later call starts.
      return waitUntil(idle).pipe(
        Effect.flatMap(() => commitReady(a, t)),
        Effect.flatMap(() => prepare(a, t, call)),
        Effect.flatMap((run) => (run === undefined ? Effect.void : execution(a, t, run))),
        Effect.flatMap(() => commitReady(a, t)),
        Effect.flatMap(() => dispatch(i + 1))
      )
    }
    if (!free()) return Effect.flatMap(waitUntil(free), () => dispatch(i))
    if (a.config.perCall) {
      return Effect.flatMap(prepare(a, t, call), (run) => {
        startGroup([run])
        return dispatch(i + 1)
      })
    }
    // As many calls as there are free slots, up to the next exclusive one, in one append.
    const end = groupEnd(a, calls, i, running)
    return Effect.flatMap(prepareGroup(a, t, calls.slice(i, end)), (runs) => {
      startGroup(runs)
      return dispatch(end)
    })
  }
  const begin = first === undefined ? dispatch(0) : Effect.suspend(() => {
    startGroup(first.runs)
    return dispatch(first.end)
  })
  return Effect.onInterrupt(begin, () => interruptCalls(a))
}

/** The executions of a group (`undefined`: a call with its error result already) and the next to start. */
interface Group {
  readonly runs: ReadonlyArray<Run | undefined>
  next: number
}

/** The index of the group's next execution to start (skipping calls that have their result). */
const nextRun = (group: Group): number => {
  while (group.next < group.runs.length && group.runs[group.next] === undefined) group.next++
  return group.next
}

/**
 * The body of a fiber of `startGroup`: the group's executions from `next` on, one after another,
 * each claimed as it starts. It starts no more once it has run half the operations after which
 * the fiber yields (a yield between two calls would start the later ones first: the next fiber,
 * fresh, starts them); a fiber that suspended finds them all claimed when it resumes. Untraced
 * and without hooks, a call is `execute` and one match whose handlers (this fiber's, for the
 * call it runs) record the result and start the next call: no effect of its own per call.
 */
const runGroup = (a: AgentState, t: TurnState, group: Group): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    const initial = fiber.getFiberRefs()
    const budget = fiber.getFiberRef(FiberRef.currentMaxOpsBeforeYield) / 2
    const plain = t.trace === undefined && a.config.hooks.length === 0
    let current: CallState
    const handlers = {
      onSuccess: (output: unknown): Effect.Effect<void> => {
        record(a, current, output, reportsError(output))
        return next()
      },
      onFailure: (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
        if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
        record(a, current, failedOutput(current, cause), true)
        return next()
      }
    }
    const start = (run: Run): Effect.Effect<void> => {
      if (!plain || run.question !== undefined) return Effect.flatMap(execution(a, t, run), next)
      current = run.call
      return Effect.matchCauseEffect(begin(a, t, run), handlers)
    }
    const next = (): Effect.Effect<void> => {
      if (nextRun(group) === group.runs.length || fiber.currentOpCount > budget) return Effect.void
      const run = group.runs[group.next++]!
      // What a fiber of its own would give the call: the FiberRefs this fiber started with.
      resetFiberRefs(fiber, initial)
      return start(run)
    }
    return start(group.runs[group.next++]!)
  })

/**
 * Replaces the fiber's FiberRefs (the fiber's own method, which `Effect.setFiberRefs` does not
 * use: that sets them one by one, ~1 µs).
 */
const resetFiberRefs = (fiber: Fiber.RuntimeFiber<unknown, unknown>, refs: FiberRefs.FiberRefs): void => {
  ;(fiber as unknown as { setFiberRefs(refs: FiberRefs.FiberRefs): void }).setFiberRefs(refs)
}

/** The `tool/call` draft of a call (§8). */
const callDraft = (t: TurnState, call: CallState): EventDraft => ({
  type: "tool/call",
  data: { turn: t.turn, step: t.step, callId: call.id, name: call.name, arguments: call.rawArguments }
})

/**
 * Validates a call (§8): a known tool and arguments that are JSON and decode with its
 * parameters `Schema`. Returns the decoded arguments, or the error result to record.
 */
const validate = (a: AgentState, call: CallState): Validated => {
  const tool = a.config.tools.get(call.name)
  if (tool === undefined) {
    return {
      ok: false,
      code: "UNKNOWN_TOOL",
      text: `Unknown tool "${call.name}". Available tools: ${[...a.config.tools.keys()].join(", ") || "none"}.`
    }
  }
  let parsed: unknown
  try {
    parsed = BLANK.test(call.rawArguments) ? {} : JSON.parse(call.rawArguments)
  } catch (e) {
    return { ok: false, code: "INVALID_ARGUMENTS", text: `The arguments of ${call.name} are not valid JSON: ${messageOf(e)}` }
  }
  const decoded = decoderOf(tool)(parsed)
  if (Either.isLeft(decoded)) {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
      .map((i) => (i.path.length > 0 ? `${i.path.join(".")}: ` : "") + i.message)
      .join("; ")
    return { ok: false, code: "INVALID_ARGUMENTS", text: `Invalid arguments for ${call.name}: ${issues}` }
  }
  return { ok: true, call, tool, args: decoded.right }
}

/** The call as guards and hooks see it. */
const callInfo = (t: TurnState, call: CallState, args: unknown): Tool.ToolCall => ({
  callId: call.id,
  name: call.name,
  arguments: args,
  rawArguments: call.rawArguments,
  turn: t.turn,
  step: t.step
})

/**
 * Validates, guards and logs `tool/call` for one call, in model order (§8). Returns the
 * execution (execute + hooks) to run, or `undefined` when the call already has its error
 * result (unknown tool, invalid arguments, denied, guard failure). Never fails but for the
 * store. Without guards, see `prepareGroup`.
 */
const prepare = (
  a: AgentState,
  t: TurnState,
  call: CallState
): Effect.Effect<Run | undefined, SessionWriteError> =>
  Effect.suspend(() => {
    const logCall = (after: () => void) =>
      commit(a, [callDraft(t, call)], () => {
        // Still "pending": the call is running once its execution starts (§9 codes).
        call.callLogged = true
        after()
      })
    const failWith = (code: ToolErrorCode, text: string) => Effect.as(logCall(() => fail(call, code, text)), undefined)
    const checked = validate(a, call)
    if (!checked.ok) return failWith(checked.code, checked.text)
    const allowed = (): Effect.Effect<Run | undefined, SessionWriteError> => {
      const approval = checked.tool.approval
      return approval === undefined || approval === "never" ? Effect.as(logCall(() => {}), checked) : ask(a, t, checked)
    }
    if (a.config.guards.length === 0) return allowed()
    return Effect.flatMap(Effect.exit(runGuards(a.config.guards, callInfo(t, call, checked.args))), (g) => {
      if (Exit.isFailure(g)) {
        if (Cause.isInterruptedOnly(g.cause)) return Effect.failCause(g.cause as Cause.Cause<never>)
        return failWith("TOOL_FAILED", `The guard of ${call.name} failed: ${causeMessage(g.cause)}`)
      }
      if (g.value._tag === "Deny") return failWith("DENIED", `The call to ${call.name} was denied: ${g.value.reason}`)
      return allowed()
    })
  })

/** What the approval step of a call settled on before anything is logged (§26 rules 1, 3, 6). */
type Asking =
  | { readonly _tag: "None" }
  | { readonly _tag: "Decided"; readonly outcome: Approval.Outcome; readonly by?: Approval.DecidedBy; readonly reason?: string }
  | { readonly _tag: "Ask" }

const NO_APPROVAL: Asking = { _tag: "None" }
const ASK: Asking = { _tag: "Ask" }

/**
 * The approval step of a validated, guarded call (§26): whether it needs approval (the tool's
 * `approval`), then the policy's answer, then, where the policy would ask a person, the
 * remembered answer of the session for this tool (rule 6). A failing `approval` function or
 * policy decides `unavailable` (rule 3).
 */
const asking = (a: AgentState, t: TurnState, run: Run): Effect.Effect<Asking> => {
  const timeout = a.config.approvalTimeout
  if (timeout === undefined) return askingNow(a, t, run)
  // The same bound holds the check and the policy: one that never answers decides `unavailable`.
  return Effect.map(
    Effect.timeoutOption(askingNow(a, t, run), timeout),
    Option.getOrElse((): Asking => ({
      _tag: "Decided",
      outcome: "unavailable",
      reason: `the approval check did not answer within ${timeout} ms`
    }))
  )
}

const askingNow = (a: AgentState, t: TurnState, run: Run): Effect.Effect<Asking> => {
  const info = callInfo(t, run.call, run.args)
  return Effect.flatMap(Effect.exit(Tool.needsApproval(run.tool, run.args, info)), (needed): Effect.Effect<Asking> => {
    if (Exit.isFailure(needed)) {
      if (Cause.isInterruptedOnly(needed.cause)) return Effect.failCause(needed.cause as Cause.Cause<never>)
      const error = Cause.failureOption(needed.cause)
      const reason = error._tag === "Some" ? error.value.message : causeMessage(needed.cause)
      return Effect.succeed({ _tag: "Decided", outcome: "unavailable", reason })
    }
    if (!needed.value) return Effect.succeed(NO_APPROVAL)
    const request: Approval.Request = {
      toolName: run.call.name,
      callId: run.call.id,
      arguments: run.args,
      turn: t.turn,
      step: t.step
    }
    return Effect.map(Approval.decide(a.config.approvalListeners, request), (d): Asking => {
      switch (d._tag) {
        case "Allow":
          return { _tag: "Decided", outcome: "allowed-once", by: { kind: "policy", policy: d.policy ?? "policy" } }
        case "Deny":
          return { _tag: "Decided", outcome: "rejected", by: { kind: "policy", policy: d.policy ?? "policy" }, reason: d.reason }
        case "Unavailable":
          return { _tag: "Decided", outcome: "unavailable", reason: d.message }
        case "Ask": {
          const remembered = a.approvalCell?.remembered.get(run.call.name)
          if (remembered === undefined) return ASK
          return {
            _tag: "Decided",
            outcome: remembered === "allowed-always" ? "allowed-once" : "rejected",
            by: { kind: "policy", policy: "remembered" },
            reason: remembered === "allowed-always"
              ? "a person allowed every call of this tool in this session"
              : "a person rejected every call of this tool in this session"
          }
        }
      }
    })
  })
}

/**
 * Logs a call that may need approval (§26): its `tool/call` alone (no approval needed), with its
 * question and the policy's decision (decided now: the call runs or gets its `DENIED` result), or
 * with its open question (the call waits: its `Run` carries the question).
 */
const ask = (a: AgentState, t: TurnState, run: Run): Effect.Effect<Run | undefined, SessionWriteError> =>
  Effect.flatMap(asking(a, t, run), (answer) => {
    const call = run.call
    if (answer._tag === "None") {
      return commit(a, [callDraft(t, call)], () => {
        call.callLogged = true
        return run
      })
    }
    return Effect.flatMap(a.config.ids.next, (id) => {
      const drafts = [callDraft(t, call), Approvals.askedDraft(id, call)]
      if (answer._tag === "Ask") {
        return commit(a, drafts, (events): Run => {
          call.callLogged = true
          return { ...run, question: Approvals.open(a, id, call, run.args, t.turn, t.step, events[1]?.time ?? 0) }
        })
      }
      const data = Approvals.decision(id, answer.outcome, answer.by, answer.reason)
      drafts.push(Approvals.decidedDraft(data))
      return commit(a, drafts, (events): Run | undefined => {
        call.callLogged = true
        if (Approval.isAllowed(data.outcome)) {
          return t.trace === undefined ? run : { ...run, allowed: { askedAt: events[1]?.time ?? 0, data } }
        }
        fail(call, "DENIED", refusalText(call.name, data))
        return undefined
      })
    })
  })

/**
 * With no guards, validation is synchronous: a group of calls is validated and their
 * `tool/call`s logged in one append, in model order (§8). Returns each call's execution, or
 * `undefined` for a call that got its error result.
 */
const prepareGroup = (
  a: AgentState,
  t: TurnState,
  calls: ReadonlyArray<CallState>
): Effect.Effect<ReadonlyArray<Run | undefined>, SessionWriteError> =>
  Effect.suspend(() => {
    const group = groupSection(a, t, calls)
    return commit(a, group.drafts, group.apply)
  })

/** The `tool/call` drafts of a group (validated now), and what to apply once they are durable. */
const groupSection = (
  a: AgentState,
  t: TurnState,
  calls: ReadonlyArray<CallState>
): { readonly drafts: Array<EventDraft>; readonly apply: () => ReadonlyArray<Run | undefined> } => {
  const drafts: Array<EventDraft> = []
  const checks: Array<Validated> = []
  for (const call of calls) {
    drafts.push(callDraft(t, call))
    checks.push(validate(a, call))
  }
  return {
    drafts,
    apply: () => {
      const runs: Array<Run | undefined> = []
      for (let k = 0; k < calls.length; k++) {
        const call = calls[k]!
        const checked = checks[k]!
        call.callLogged = true
        if (checked.ok) runs.push(checked)
        else {
          fail(call, checked.code, checked.text)
          runs.push(undefined)
        }
      }
      return runs
    }
  }
}

/**
 * A validated, allowed call's execution: `execute`, then the hooks; its result is recorded
 * on `call` (a failure is a `TOOL_FAILED` result). Fails only by interruption.
 */
const execution = (a: AgentState, t: TurnState, run: Run): Effect.Effect<void> => {
  if (t.trace === undefined) {
    return run.question === undefined ? untracedExecution(a, t, run) : afterDecision(a, t, run, run.question)
  }
  // Traced (§19): the execution in its `execute_tool` span, the tool's spans its children; a
  // question about the call is two events of that span, when asked and when decided (§26).
  const question = run.question
  const allowed = run.allowed
  const effect = question !== undefined
    ? Effect.zipRight(Trace.approvalAsked(question.id, question.askedAt), afterDecision(a, t, run, question))
    : allowed !== undefined
    ? Effect.zipRight(
      Effect.zipRight(Trace.approvalAsked(allowed.data.id, allowed.askedAt), Trace.approvalDecided(allowed.data)),
      untracedExecution(a, t, run)
    )
    : untracedExecution(a, t, run)
  return Trace.tool(a, t.trace, t.turn, t.step, run.call, effect)
}

/**
 * A waiting call (§26): once its question is decided, an allowed call runs; a refused one gets its
 * `DENIED` result (rule 3). Interrupted while it waits (a cancel), the call stays not started.
 */
const afterDecision = (a: AgentState, t: TurnState, run: Run, question: Question): Effect.Effect<void> =>
  Effect.flatMap(Approvals.awaitDecision(a, question), (data) => {
    const decided = t.trace === undefined ? Effect.void : Trace.approvalDecided(data)
    if (Approval.isAllowed(data.outcome)) return Effect.zipRight(decided, untracedExecution(a, t, run))
    fail(run.call, "DENIED", refusalText(run.call.name, data))
    return decided
  })

/**
 * Starts a call: `execute`'s effect (a throw is a defect of it). The call counts as started (an
 * abort then gives ABORTED, not TOOL_ABORTED_BEFORE_DISPATCH) when its execution begins, not
 * when its `tool/call` is durable.
 */
const begin = (a: AgentState, t: TurnState, run: Run): Effect.Effect<Tool.ToolOutput, unknown> => {
  const call = run.call
  call.phase = "running"
  try {
    return run.tool.execute(run.args, new CallContext(call.id, t.turn, t.step, a.toolAgent, a))
  } catch (e) {
    return Effect.die(e)
  }
}

/** Whether `execute`'s output reports an error with its content (`ToolOutput.isError`). */
const reportsError = (output: unknown): boolean => {
  try {
    return typeof output === "object" && output !== null && (output as Tool.ToolOutput).isError === true
  } catch {
    return false
  }
}

/** The output recorded for a failed `execute` (an error result, `isError`). */
const failedOutput = (call: CallState, cause: Cause.Cause<unknown>): Tool.ToolOutput => {
  try {
    return { content: toolFailedText(call.name, causeMessage(cause)) }
  } catch (e) {
    return { content: toolFailedText(call.name, messageOf(e)) }
  }
}

const untracedExecution = (a: AgentState, t: TurnState, run: Run): Effect.Effect<void> => {
  const call = run.call
  const started = Effect.suspend(() => begin(a, t, run))
  // A defect anywhere in recording the result (ours or a plugin's) is this call's failure,
  // never the batch's: the call gets a TOOL_FAILED result (without hooks, `record` catches it:
  // one effect less per call than a `catchAllCause` around the match).
  if (a.config.hooks.length === 0) {
    return Effect.matchCauseEffect(started, {
      onSuccess: (output) => {
        record(a, call, output, reportsError(output))
        return Effect.void
      },
      onFailure: (cause) => {
        if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
        record(a, call, failedOutput(call, cause), true)
        return Effect.void
      }
    })
  }
  const failed = (cause: Cause.Cause<unknown>): Effect.Effect<void> => {
    if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
    fail(call, "TOOL_FAILED", toolFailedText(call.name, causeMessage(cause)))
    return Effect.void
  }
  const executed = Effect.flatMap(Effect.exit(started), (exit): Effect.Effect<Tool.HookResult> => {
    if (Exit.isSuccess(exit)) return Effect.succeed({ output: exit.value, isError: reportsError(exit.value) })
    if (Cause.isInterruptedOnly(exit.cause)) return Effect.failCause(exit.cause as Cause.Cause<never>)
    return Effect.succeed({ output: { content: toolFailedText(call.name, causeMessage(exit.cause)) }, isError: true })
  })
  return Effect.catchAllCause(
    Effect.matchCauseEffect(Effect.flatMap(executed, (r) => runHooks(a.config.hooks, callInfo(t, call, run.args), r)), {
      onSuccess: (result) => {
        finish(a, call, result)
        return Effect.void
      },
      onFailure: failed
    }),
    failed
  )
}

/**
 * Records a tool's (or the hooks') result on its call after checking it (§2, §8): a `ToolOutput`
 * whose content is plain-JSON content blocks (or a string) and whose `additionalContexts` are
 * well-formed plain-JSON `UserMessage`s within `maxMessageBytes` (§5.1) with ids never used;
 * otherwise a `TOOL_FAILED` result.
 */
const finish = (a: AgentState, call: CallState, result: Tool.HookResult): void => {
  let output: unknown
  let isError: boolean
  try {
    const ok = typeof result === "object" && result !== null
    output = ok ? result.output : undefined
    isError = ok ? result.isError : false
  } catch (e) {
    fail(call, "TOOL_FAILED", `Tool ${call.name} returned an invalid result: ${messageOf(e)}`)
    return
  }
  finishOutput(a, call, output, isError)
}

/** `finish` of an output (`execute`'s, or the message of its failure with `isError`). */
const finishOutput = (a: AgentState, call: CallState, output: unknown, isError: boolean): void => {
  let contexts: ReadonlyArray<UserMessage>
  let content: ReadonlyArray<ContentBlock>
  try {
    if (typeof output !== "object" || output === null) throw new Error("it is not a ToolOutput ({content, additionalContexts?})")
    const given = (output as Tool.ToolOutput).additionalContexts ?? []
    if (!Array.isArray(given)) throw new Error("its additionalContexts is not an array")
    contexts = given
    const raw = (output as Tool.ToolOutput).content
    if (typeof raw === "string") {
      // One text block: JSON by construction, nothing to walk.
      content = Object.freeze([textBlock(raw)])
    } else {
      if (!Array.isArray(raw)) throw new Error("its content is not a string or an array of content blocks")
      content = checkJson(raw, "content")
      if (!isContentShape(content)) throw new Error("its content is not a string or an array of content blocks")
    }
    const ids = contexts.length === 0 ? undefined : new Set<string>()
    for (const m of contexts) {
      checkJson(m, "additionalContexts")
      if (!isUserMessageShape(m)) throw new Error("an additional context is not a UserMessage")
      const over = oversize(m, a.config.maxMessageBytes)
      if (over !== undefined) throw new Error(`additional context ${m.id} ${over}`)
      if (ids!.has(m.id) || seen(a).has(m.id)) throw new Error(`additional context id ${m.id} is already used`)
      ids!.add(m.id)
    }
  } catch (e) {
    fail(call, "TOOL_FAILED", `Tool ${call.name} returned an invalid result: ${messageOf(e)}`)
    return
  }
  succeed(call, content, contexts, isError)
}

/**
 * `finishOutput` without hooks, for the execution's handlers: anything thrown meanwhile (a
 * failure whose message cannot be read, say) is this call's `TOOL_FAILED` result, never the
 * batch's.
 */
const record = (a: AgentState, call: CallState, output: unknown, isError: boolean): void => {
  try {
    finishOutput(a, call, output, isError)
  } catch (e) {
    fail(call, "TOOL_FAILED", toolFailedText(call.name, messageOf(e)))
  }
}

const runGuards = (guards: ReadonlyArray<Tool.ToolGuard>, call: Tool.ToolCall): Effect.Effect<Tool.GuardDecision, unknown> => {
  const at = (i: number): Effect.Effect<Tool.GuardDecision, unknown> =>
    i >= guards.length ? Effect.succeed(Tool.Guard.allow) : Effect.suspend(() => guards[i]!(call, () => at(i + 1)))
  return at(0)
}

const runHooks = (
  hooks: ReadonlyArray<Tool.ToolHook>,
  call: Tool.ToolCall,
  innermost: Tool.HookResult
): Effect.Effect<Tool.HookResult, unknown> => {
  const at = (i: number): Effect.Effect<Tool.HookResult, unknown> =>
    i >= hooks.length ? Effect.succeed(innermost) : Effect.suspend(() => hooks[i]!(call, () => at(i + 1)))
  return at(0)
}
