/**
 * Approvals (§26): the log shapes of a tool call that waits for a person, and the projection of
 * the questions a log leaves open. The shapes are DeepSeek Harness's, so each system reads the
 * other's logs:
 *
 * - `approval/asked {id, toolName, callId, reason?}`: a question about one call, appended with the
 *   call's `tool/call`, before the call would start (rule 2 of §26);
 * - `approval/decided {id, outcome, by?, reason?}`: its one decision. `outcome` is DSH's
 *   `allowed-once | rejected | cancelled | unavailable`, or ours, `allowed-always |
 *   rejected-always`; `by` says who decided (a person, a policy, a timeout, a cancel).
 *
 * `Invariant.check` holds a log to the rules of §26 (one question per call, one decision per
 * question, the decision before the call's result).
 *
 * The approval policy (rule 1 of §26) is a waterfall of listeners, outermost first, like the
 * pre-step's (§7): `Approval.layer([outer, …, inner])`, each listener answering `allow`,
 * `deny(reason)` or `ask` or calling `next()`; the default asks a person. `Approval.byName` is a
 * shipped policy by tool name and a glob on one string argument; the remembered "always"
 * answers of a session stand in for the person where the policy would ask (rule 6). A live
 * agent's questions are `agent.pendingApprovals`, answered by `agent.approve`/`agent.reject`.
 *
 * @example
 * ```ts
 * import { Approval, SessionStore } from "effect-agent-loop"
 * import { NodeFileSystem } from "@effect/platform-node"
 * import { Effect } from "effect"
 *
 * // The questions a session log leaves open, e.g. for an operator's list of waiting sessions.
 * const open = SessionStore.readFile(".agent-loop/sessions/s1.jsonl").pipe(
 *   Effect.map((log) => Approval.openQuestions(log.events)),
 *   Effect.provide(NodeFileSystem.layer)
 * )
 * ```
 *
 * @since 0.1.0
 */
import { Cause, Context, Effect, Layer, Schema } from "effect"
import { messageOf } from "./internal/cause.js"
import type { SessionEvent } from "./SessionEvent.js"

/**
 * How a question was decided. `allowed-once` and `allowed-always` start the call; every other
 * outcome refuses it (an outcome not in this list is never an approval). `allowed-always` and
 * `rejected-always` also apply to the later calls of the same tool in the session (rule 6 of §26).
 *
 * @since 0.1.0
 * @category models
 */
export const Outcome = Schema.Literal(
  "allowed-once",
  "rejected",
  "cancelled",
  "unavailable",
  "allowed-always",
  "rejected-always"
)
/**
 * @since 0.1.0
 * @category models
 */
export type Outcome = typeof Outcome.Type

/**
 * Who decided (`approval/decided` `by`): a person (optionally named), a policy (by name; the
 * remembered answers are the policy `"remembered"`), the approval timeout, or a cancel.
 *
 * @since 0.1.0
 * @category models
 */
export const DecidedBy = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("person"), name: Schema.optional(Schema.String) }),
  Schema.Struct({ kind: Schema.Literal("policy"), policy: Schema.String }),
  Schema.Struct({ kind: Schema.Literal("timeout") }),
  Schema.Struct({ kind: Schema.Literal("cancel") })
)
/**
 * @since 0.1.0
 * @category models
 */
export type DecidedBy = typeof DecidedBy.Type

/**
 * `approval/asked` data. DSH writes `callId` when the question is about a tool call (always, in
 * our logs).
 *
 * @since 0.1.0
 * @category models
 */
export const AskedData = Schema.Struct({
  id: Schema.String,
  toolName: Schema.String,
  callId: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type AskedData = typeof AskedData.Type

/**
 * `approval/decided` data. DSH writes `{id, outcome}`; `by` and `reason` are ours.
 *
 * @since 0.1.0
 * @category models
 */
export const DecidedData = Schema.Struct({
  id: Schema.String,
  outcome: Outcome,
  by: Schema.optional(DecidedBy),
  reason: Schema.optional(Schema.String)
})
/**
 * @since 0.1.0
 * @category models
 */
export type DecidedData = typeof DecidedData.Type

/**
 * The approval event types (events of a type outside the core, §3.2: kept as read).
 *
 * @since 0.1.0
 * @category models
 */
export const eventTypes: ReadonlySet<string> = new Set(["approval/asked", "approval/decided"])

/**
 * The outcomes that start the call.
 *
 * @since 0.1.0
 * @category models
 */
export const isAllowed = (outcome: Outcome): boolean => outcome === "allowed-once" || outcome === "allowed-always"

/**
 * A question a log leaves open: its data, and the seq and time of its `approval/asked`.
 *
 * @since 0.1.0
 * @category models
 */
export interface OpenQuestion extends AskedData {
  readonly seq: number
  readonly time: number
}

/**
 * The questions of a log that have no decision, in the order they were asked. An `approval/asked`
 * whose data is not `AskedData` is not a question (`Invariant.check` reports it).
 *
 * @since 0.1.0
 * @category projections
 */
export const openQuestions = (events: ReadonlyArray<SessionEvent>): Array<OpenQuestion> => {
  const open = new Map<string, OpenQuestion>()
  for (const event of events) {
    if (event.type === "approval/asked" && Schema.is(AskedData)(event.data)) {
      if (!open.has(event.data.id)) open.set(event.data.id, { ...event.data, seq: event.seq, time: event.time })
    } else if (event.type === "approval/decided") {
      const id = (event.data as { readonly id?: unknown } | null)?.id
      if (typeof id === "string") open.delete(id)
    }
  }
  return [...open.values()]
}

/**
 * An open question of a live agent, as `agent.pendingApprovals` lists it (§26 rule 5): its id,
 * the tool, the call id and decoded arguments, the turn and step, and when it was asked (ms since
 * the epoch: the time of its `approval/asked`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Pending {
  readonly id: string
  readonly toolName: string
  readonly callId: string
  readonly arguments: unknown
  readonly turn: number
  readonly step: number
  readonly askedAt: number
  /**
   * The session the question is in, when it is a sub-agent's (§27): a question of a child
   * session that a running call of this agent started; absent for the agent's own.
   */
  readonly sessionId?: string | undefined
}

/**
 * What the approval policy sees (rule 1 of §26): the call's tool name, call id and decoded
 * arguments, and the turn and step it belongs to.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request {
  readonly toolName: string
  readonly callId: string
  /** The decoded arguments. */
  readonly arguments: unknown
  readonly turn: number
  readonly step: number
}

/**
 * A policy's answer (rule 1 of §26): `Allow` (the call starts; decided by the policy), `Deny`
 * with a reason (the call is refused, decided by the policy) or `Ask` (a person decides).
 * `policy` names the policy that answered, for `by: {kind:"policy", policy}` (rule 2 of §26).
 *
 * @since 0.1.0
 * @category models
 */
export type Answer =
  | { readonly _tag: "Allow"; readonly policy?: string | undefined }
  | { readonly _tag: "Deny"; readonly reason: string; readonly policy?: string | undefined }
  | { readonly _tag: "Ask" }

/**
 * Answer constructors: `Answer.allow`, `Answer.deny(reason)`, `Answer.ask`; the optional
 * `policy` names the policy that answered.
 *
 * @since 0.1.0
 * @category constructors
 */
export const Answer = {
  allow: { _tag: "Allow" } as Answer,
  deny: (reason: string, policy?: string): Answer =>
    policy === undefined ? { _tag: "Deny", reason } : { _tag: "Deny", reason, policy },
  ask: { _tag: "Ask" } as Answer
} as const

/**
 * The policy could not answer: a listener failed (a typed error or a defect) or answered
 * something that is not an `Answer`. The caller decides the question `unavailable`: the call is
 * refused, never run (rule 3 of §26). `message` is readable; `cause` is the full cause.
 *
 * @since 0.1.0
 * @category models
 */
export interface Unavailable {
  readonly _tag: "Unavailable"
  readonly message: string
  readonly cause: Cause.Cause<unknown>
}

/**
 * What running the policy gives: an `Answer`, or `Unavailable` (never an `Allow`) when it
 * failed.
 *
 * @since 0.1.0
 * @category models
 */
export type Decision = Answer | Unavailable

/**
 * An approval listener, as waterfall middleware (rule 1 of §26): answer, or call `next()` for
 * the inner listeners' answer (the innermost default is `Ask`). A failure anywhere in the
 * waterfall makes the whole decision `Unavailable`, even when an outer listener catches it from
 * `next()`: a failed policy never allows.
 *
 * @since 0.1.0
 * @category models
 */
export type Listener = (request: Request, next: () => Effect.Effect<Answer, unknown>) => Effect.Effect<Answer, unknown>

/**
 * @since 0.1.0
 * @category services
 */
export interface ApprovalService {
  /** The listeners, outermost first. */
  readonly listeners: ReadonlyArray<Listener>
  /** Runs the waterfall on one call's request (`Approval.decide`). */
  readonly decide: (request: Request) => Effect.Effect<Decision>
}

/**
 * The approval policy in context (rule 1 of §26), a `Context.Reference`: `Agent.make` and
 * `Agent.resume` read it; without a layer, `yield* Approval` gives `defaultService` (no
 * listeners: every call that needs approval asks a person), so they do not require it.
 * `Approval.layer(...)` or `Layer.succeed(Approval, ...)` replace it.
 *
 * @since 0.1.0
 * @category services
 */
export class Approval extends Context.Reference<Approval>()("effect-agent-loop/Approval", {
  defaultValue: (): ApprovalService => defaultService
}) {}

const unavailable = (cause: Cause.Cause<unknown>): Unavailable => ({
  _tag: "Unavailable",
  message: `the approval policy failed: ${messageOf(Cause.squash(cause))}`,
  cause
})

const isAnswer = (answer: unknown): answer is Answer => {
  const tag = (answer as { readonly _tag?: unknown } | null)?._tag
  return tag === "Allow" || tag === "Ask" ||
    (tag === "Deny" && typeof (answer as { readonly reason?: unknown }).reason === "string")
}

const askEffect: Effect.Effect<Answer> = Effect.succeed(Answer.ask)

/**
 * Runs the listeners, outermost first, on one request; `next()` of the innermost gives the
 * default, `Ask` (rule 1 of §26). A listener that fails (typed error, defect or throw), anywhere
 * in the waterfall, or a result that is not an `Answer`, gives `Unavailable` with the first
 * failure's cause, which the caller decides `unavailable` (rule 3 of §26); it is never `Allow`.
 * An interruption stays an interruption.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Approval } from "effect-agent-loop"
 *
 * const request = { toolName: "bash", callId: "c1", arguments: { command: "git status" }, turn: 1, step: 1 }
 * // Effect<Decision>: { _tag: "Allow", policy: "byName" }
 * const decision = Approval.decide(
 *   [Approval.byName({ allow: [{ tool: "bash", argument: "command", glob: "git status*" }] })],
 *   request
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const decide = (listeners: ReadonlyArray<Listener>, request: Request): Effect.Effect<Decision> => {
  if (listeners.length === 0) return askEffect
  // The first failure, wherever it happened: an outer listener that recovers from it does not
  // turn a failed policy into an answer.
  let failure: Cause.Cause<unknown> | undefined
  const record = (cause: Cause.Cause<unknown>) =>
    Effect.sync(() => {
      if (failure === undefined && !Cause.isInterruptedOnly(cause)) failure = cause
    })
  const run = (i: number): Effect.Effect<Answer, unknown> =>
    i === listeners.length
      ? askEffect
      : Effect.suspend(() => listeners[i]!(request, () => run(i + 1))).pipe(Effect.tapErrorCause(record))
  return run(0).pipe(
    Effect.matchCauseEffect({
      onFailure: (cause): Effect.Effect<Decision> =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause as Cause.Cause<never>)
          : Effect.succeed(unavailable(failure ?? cause)),
      onSuccess: (answer): Effect.Effect<Decision> =>
        Effect.succeed(
          failure !== undefined
            ? unavailable(failure)
            : isAnswer(answer)
            ? answer
            : unavailable(Cause.die(new Error(`a listener answered ${JSON.stringify(answer)}, which is not an Answer`)))
        )
    })
  )
}

/**
 * Builds the policy service from listeners, outermost first (the pure form of `layer`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (listeners: ReadonlyArray<Listener>): ApprovalService => {
  const own = [...listeners]
  return Approval.of({ listeners: own, decide: (request) => decide(own, request) })
}

/**
 * The default policy: no listeners, so every call that needs approval asks a person (rule 1 of
 * §26). The default of the `Approval` reference; `Approval.layer([])` decides the same.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultService: ApprovalService = Approval.of({
  listeners: Object.freeze([]),
  decide: () => askEffect
})

/**
 * The whole approval policy as one layer: `Approval.layer([outer, …, inner])`;
 * `Approval.layer([])` is the default, which asks a person about every call that needs approval
 * (rule 1 of §26).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Approval } from "effect-agent-loop"
 *
 * // Outermost first: nothing is allowed after 20 steps; then the rules by name; then ask.
 * const notTooLong: Approval.Listener = (request, next) =>
 *   request.step > 20 ? Effect.succeed(Approval.Answer.deny("too many steps")) : next()
 * const policy = Approval.layer([
 *   notTooLong,
 *   Approval.byName({
 *     allow: [{ tool: "read_file" }, { tool: "bash", argument: "command", glob: "git status*" }],
 *     deny: [{ tool: "bash", argument: "command", glob: "rm *" }]
 *   })
 * ])
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (listeners: ReadonlyArray<Listener>): Layer.Layer<Approval> => Layer.succeed(Approval, make(listeners))

/**
 * One rule of `Approval.byName`: a tool name, optionally with a glob that one string argument
 * (a top-level field of the decoded arguments) must match.
 *
 * @since 0.1.0
 * @category models
 */
export type ByNameRule =
  | { readonly tool: string; readonly argument?: undefined; readonly glob?: undefined }
  | { readonly tool: string; readonly argument: string; readonly glob: string }

/**
 * Whether `text` matches `glob`, as a whole (anchored at both ends): `*` matches any run of
 * characters (also none, also `/` and newlines), `?` exactly one character (a code point);
 * every other character, `[`, `\` and `{` included, matches itself. Linear in practice, with no
 * backtracking blow-up.
 *
 * @since 0.1.0
 * @category combinators
 */
export const globMatch = (glob: string, text: string): boolean => {
  const g = Array.from(glob)
  const t = Array.from(text)
  let gi = 0
  let ti = 0
  let star = -1
  let mark = 0
  while (ti < t.length) {
    if (gi < g.length && (g[gi] === "?" || (g[gi] !== "*" && g[gi] === t[ti]))) {
      gi++
      ti++
    } else if (gi < g.length && g[gi] === "*") {
      star = gi++
      mark = ti
    } else if (star !== -1) {
      gi = star + 1
      ti = ++mark
    } else {
      return false
    }
  }
  while (gi < g.length && g[gi] === "*") gi++
  return gi === g.length
}

const matches = (rule: ByNameRule, request: Request): boolean => {
  if (rule.tool !== request.toolName) return false
  if (rule.argument === undefined) return true
  const args = request.arguments
  if (typeof args !== "object" || args === null || !Object.hasOwn(args, rule.argument)) return false
  const value = (args as Record<string, unknown>)[rule.argument]
  return typeof value === "string" && globMatch(rule.glob, value)
}

const describeRule = (rule: ByNameRule): string =>
  rule.argument === undefined
    ? `tool "${rule.tool}"`
    : `tool "${rule.tool}" with ${rule.argument} matching "${rule.glob}"`

/**
 * A shipped policy by tool name (rule 1 of §26): a call that matches a `deny` rule is denied
 * (`Deny`, reason `it matches the deny rule tool "bash" with command matching "rm *"`), else
 * one that matches an `allow` rule is allowed (`Allow`); both name the policy `"byName"`. Deny
 * wins over allow; a call that matches no rule goes to `next()`. A rule is a tool name, e.g.
 * `{ tool: "read_file" }`, or a tool name and a glob (see `globMatch`) on one string argument,
 * e.g. `{ tool: "bash", argument: "command", glob: "git status*" }`; an argument that is missing
 * or not a string never matches. Throws when a rule gives only one of `argument` and `glob` (a
 * programming error).
 *
 * @example
 * ```ts
 * import { Approval } from "effect-agent-loop"
 *
 * const policy = Approval.byName({
 *   allow: [{ tool: "read_file" }, { tool: "bash", argument: "command", glob: "git status*" }],
 *   deny: [{ tool: "bash", argument: "command", glob: "*sudo *" }]
 * })
 * const layer = Approval.layer([policy])
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const byName = (options: {
  readonly allow?: ReadonlyArray<ByNameRule> | undefined
  readonly deny?: ReadonlyArray<ByNameRule> | undefined
}): Listener => {
  const allow = [...(options.allow ?? [])]
  const deny = [...(options.deny ?? [])]
  for (const rule of [...allow, ...deny]) {
    if ((rule.argument === undefined) !== (rule.glob === undefined)) {
      throw new Error(`Approval.byName: a rule gives both "argument" and "glob" or neither; got ${JSON.stringify(rule)}`)
    }
  }
  const allowed: Effect.Effect<Answer> = Effect.succeed({ _tag: "Allow", policy: "byName" })
  return (request, next) => {
    for (const rule of deny) {
      if (matches(rule, request)) {
        return Effect.succeed(Answer.deny(`it matches the deny rule ${describeRule(rule)}`, "byName"))
      }
    }
    for (const rule of allow) {
      if (matches(rule, request)) return allowed
    }
    return next()
  }
}
