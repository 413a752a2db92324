/**
 * The scenario simulator (§15): runs a `Scenario` (a JSON file with a model script, tools,
 * pre-step listeners and timed actions) on a virtual clock so that the same file gives a
 * byte-identical session log on every run, times included, whatever the machine's load.
 *
 * The virtual clock is the simulator's own Effect `Clock` (`internal/virtualClock.ts`), not
 * `TestClock`: `TestClock.adjust` waits for the calling fiber's descendants with real 0 ms
 * timers (≥ 1 ms each on Node), which made one scenario take ~75 ms and a 1,000-run property
 * test take minutes; the simulator does its own settling across all fibers of the run (a
 * `Supervisor`), so it needs a clock that only moves when told. Each advance wakes one sleep.
 *
 * Determinism: the memory store (or the `store` given to `run`), written out once at the end; ids from an `IdGenerator` seeded
 * with a hash of the scenario file; a header with `createdAt: 0` and no `cwd`; before applying an
 * action and before each clock advance the simulator waits until every fiber of the run is
 * suspended or done (the runtime has no runnable work), then advances the clock to the earlier
 * of the next action and the next sleep (an action due at the same instant as a sleep goes
 * first; sleeps due at the same instant wake one at a time, in the order they began). Actions with the same `at` are applied in file order,
 * each after the runtime has settled. The model script goes through the real model port:
 * `ScriptedModel.make` streams each response as parts into the loop.
 *
 * Compaction (§17): a `compaction` block gives the scenario's agent a `Compaction` policy
 * (`Compaction.summarize`, or `Compaction.prune` with `policy: "prune"`); a model entry's
 * `usage` is reported after its response (the loop resets its token estimate to `inputTokens`);
 * an `error`'s `code` is a `Model.ModelErrorCode` (another is refused at its path), and it may
 * carry the HTTP `status` (e.g. `CONTEXT_OVERFLOW` with 400); a `compact` action
 * calls `agent.compact` in its own fiber (it waits for a boundary on a running agent, and the
 * simulator settles it like the rest). A summarization request consumes the next model entry
 * like any request: the script holds the summaries where the requests for them come.
 *
 * Approvals (§26): `approve` and `reject` actions run in the simulator's fiber (a decision
 * returns once it is durable) and are recorded in `decisions`; one that finds no open question
 * under the name it gives (its `callId`, `index` or `id`) changes nothing and is recorded with
 * `ApprovalNotOpen`. A `resume` action releases the agent (nothing appended, open questions stay
 * open) and resumes the session from the memory store with `continuePending`; the actions after
 * it go to the resumed agent.
 *
 * Sub-agents (§27): a tool with a `subagent` block is `Subagent.tool` with a scripted child model
 * (named `NAME/TOOL`, e.g. `script/research`, its requests recorded like the parent's); the
 * children run on the run's store, ids and clock, and the simulator settles their fibers with the
 * rest. `children` of the result holds each child session (path of call ids, header, events,
 * log, requests); a child's question is the parent's to decide (`approve`/`reject` actions).
 *
 * @since 0.1.0
 */
import { Effect, Either, Layer, Schema } from "effect"
import * as Agent from "./Agent.js"
import type { DeliveryError } from "./AgentError.js"
import * as Budget from "./Budget.js"
import type { CompactionReport } from "./Compaction.js"
import type * as Delivery from "./Delivery.js"
import * as IdGenerator from "./IdGenerator.js"
import { accessOf } from "./internal/agent/access.js"
import { encodeEvents, encodeHeader } from "./internal/logCodec.js"
import { compactionLayer, listeners, messageOf, tools } from "./internal/scenario/build.js"
import { FiberTracker, settle } from "./internal/settle.js"
import { VirtualClock } from "./internal/virtualClock.js"
import { type InvalidMessage, type Message, textOf } from "./Message.js"
import * as Model from "./Model.js"
import * as PreStep from "./PreStep.js"
import type { Scenario } from "./Scenario.js"
import * as ScriptedModel from "./ScriptedModel.js"
import type { SessionEvent, SessionHeader, SessionId } from "./SessionEvent.js"
import type { LogContents } from "./SessionLog.js"
import * as SessionStore from "./SessionStore.js"

/**
 * A request as `--requests` writes it (§15): each message
 * `{role: "user"|"assistant"|"tool", content, reasoning?, toolCalls?, toolCallId?}`; a
 * compaction's summarization request has `purpose: "compaction"` (§17).
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestLine {
  readonly turn: number
  readonly step: number
  /** `"compaction"` on a summarization request (§17: `step` 0, `turn` 0 between turns). */
  readonly purpose?: "compaction"
  readonly messages: ReadonlyArray<{
    readonly role: "user" | "assistant" | "tool"
    readonly content: string
    readonly reasoning?: string
    readonly toolCalls?: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
    readonly toolCallId?: string
  }>
}

/**
 * A model-visible message in the `--requests` line shape (§15).
 *
 * @since 0.1.0
 */
export const requestMessage = (m: Message): RequestLine["messages"][number] => {
  if (m.role === "assistant") {
    const reasoning = m.content.filter((b) => b.type === "reasoning").map((b) => (b as { text: string }).text).join("\n")
    const calls = m.content.flatMap((b) => (b.type === "tool-call" ? [{ id: b.id, name: b.name, arguments: b.arguments }] : []))
    return {
      role: "assistant",
      content: textOf(m.content),
      ...(reasoning.length > 0 ? { reasoning } : {}),
      ...(calls.length > 0 ? { toolCalls: calls } : {})
    }
  }
  const result = m.content.find((b) => b.type === "tool-result")
  if (result !== undefined && result.type === "tool-result") {
    return { role: "tool", content: textOf(result.content), toolCallId: result.toolCallId }
  }
  return { role: "user", content: textOf(m.content) }
}

/**
 * What a run produced: the header and events of the session log, the model requests, and the
 * serialized forms `log` (JSONL with the header) and `requests` (one JSON line a request).
 *
 * @since 0.1.0
 * @category models
 */
export interface RunResult {
  readonly header: SessionHeader
  readonly events: ReadonlyArray<SessionEvent>
  readonly requests: ReadonlyArray<RequestLine>
  readonly log: string
  readonly requestLines: string
  /**
   * One record per delivery action (in the order applied): the message id and the outcome its
   * `Delivery.outcome` resolved with during the run (`undefined` while the message is pending),
   * or the tag of the typed error the delivery failed with (e.g. `AgentDisposed`).
   */
  readonly deliveries: ReadonlyArray<DeliveryRecord>
  /**
   * One record per `compact` action (in the order applied): the report `agent.compact` returned
   * (`undefined` while it waits for a boundary the run never reached), or the tag of its error.
   */
  readonly compactions: ReadonlyArray<CompactRecord>
  /**
   * One record per `approve` and `reject` action (in the order applied, §26): the question it
   * decided, or the tag of its error (`ApprovalNotOpen`: no question was open under that name
   * then, e.g. one not asked yet or already decided).
   */
  readonly decisions: ReadonlyArray<DecisionRecord>
  /**
   * The sessions of the run's sub-agents (§27), in the order their `subagent/start` was
   * logged, each child's own children right after it: each one's path, header, events, log and
   * model requests, read from the store like the parent's. (A fork's seed copies its parent's
   * `subagent/start` events: those children are the parent's, listed once.)
   */
  readonly children: ReadonlyArray<ChildResult>
}

/**
 * A sub-agent's session in a run (§15, §27). `path` names it by the call ids that lead to it
 * from the scenario's agent, joined with `/`: `"c1"` for the child of the parent's call `c1`,
 * `"c1/k1"` for the child of that child's call `k1`. `header` carries the lineage
 * (`parentSession`, `parentCallId`, `origin`, `delegationDepth`, a fork's `seedLength`);
 * `events`, `log`, `requests` and `requestLines` are as in `RunResult` (a fork's seed is in
 * `events`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ChildResult {
  readonly path: string
  readonly callId: string
  readonly header: SessionHeader
  readonly events: ReadonlyArray<SessionEvent>
  readonly requests: ReadonlyArray<RequestLine>
  readonly log: string
  readonly requestLines: string
}

/**
 * What became of one delivery action of a run.
 *
 * @since 0.1.0
 * @category models
 */
export interface DeliveryRecord {
  readonly action: number
  readonly kind: "followup" | "steer" | "inject"
  readonly at: number
  readonly messageId?: string | undefined
  readonly outcome?: Delivery.DeliveryOutcome | undefined
  readonly error?: string | undefined
}

/**
 * What became of one `compact` action of a run (§17).
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactRecord {
  readonly action: number
  readonly at: number
  readonly report?: CompactionReport | undefined
  readonly error?: string | undefined
}

/**
 * What became of one `approve` or `reject` action of a run (§26): `id` and `callId` of the
 * question it decided (and `sessionId`, the child's session, when it was a sub-agent's question,
 * §27 rule 7), or `error`, the tag of the typed error it failed with (`ApprovalNotOpen` when no
 * question was open under the name it gave; then `callId`, `id` or `index` is the name, as the
 * action gave it).
 *
 * @since 0.1.0
 * @category models
 */
export interface DecisionRecord {
  readonly action: number
  readonly kind: "approve" | "reject"
  readonly at: number
  readonly id?: string | undefined
  readonly callId?: string | undefined
  readonly sessionId?: string | undefined
  readonly index?: number | undefined
  readonly error?: string | undefined
}

/**
 * The most messages the recorded model requests of one run may hold in all (each request repeats
 * the history, so they grow with the square of a session's length: 1,000 one-turn followups
 * already make 10^6). Past it, `run` with `requests` on fails with `RequestsTooLarge`.
 *
 * @since 0.1.0
 * @category models
 */
export const MAX_REQUEST_MESSAGES = 2_000_000

/**
 * The model requests of a run hold more than `MAX_REQUEST_MESSAGES` messages in all (they were
 * dropped as soon as they did, so memory stays bounded; the run itself went to its end).
 *
 * @since 0.1.0
 * @category errors
 */
export class RequestsTooLarge extends Schema.TaggedError<RequestsTooLarge>()("RequestsTooLarge", {
  message: Schema.String
}) {}

/**
 * Runs a scenario to its end under a virtual clock. `seed` seeds the ids (use `seedOf` of the
 * file's text). The run ends when no action is left and nothing sleeps (a model request past the
 * end of the script fails its turn with `SCRIPT_EXHAUSTED`). `requests` (default true) records
 * the model requests; with `false`, `requests` and `requestLines` are empty (what
 * `agent-loop simulate` does without `--requests`). Recorded requests holding more than
 * `MAX_REQUEST_MESSAGES` messages in all fail the run with `RequestsTooLarge`. With a
 * `compaction` block the agent gets its `Compaction` layer; summarization requests are recorded
 * with `purpose: "compaction"`, and each `compact` action's report is in `compactions`. What
 * each `approve` and `reject` action decided (or its `ApprovalNotOpen`) is in `decisions` (§26).
 * The sessions of sub-agents (§27) are in `children`, read from the store like the parent's,
 * each with its own requests (`requests` and `requestLines` are the parent's only).
 * `store` (default `SessionStore.layerMemory`) is the store the session is created in and read
 * back from at the end: e.g. one without `appendSync`, whose critical sections take the lock
 * path (§24 rule 2); the run stays deterministic while the store's appends end without the
 * virtual clock moving.
 *
 * @example
 * ```ts
 * import { Scenario, Simulator } from "effect-agent-loop"
 * import { Effect, Either } from "effect"
 *
 * // Two turns, then a manual compaction: the third response is the summary of the first turn.
 * const scenario = Either.getOrThrow(Scenario.decode({
 *   compaction: { keepRecentTokens: 20 },
 *   model: [{ text: "ok" }, { text: "ok again" }, { text: "the user said hi" }],
 *   actions: [{ at: 0, followup: "hi" }, { at: 10, followup: "again" }, { at: 20, compact: {} }]
 * }))
 * Effect.runPromise(Simulator.run(scenario, { seed: 1 })).then((result) => {
 *   console.log(result.compactions[0]?.report?.outcome) // "compacted"
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = (
  scenario: Scenario,
  options: {
    readonly seed: number
    readonly requests?: boolean | undefined
    readonly store?: Layer.Layer<SessionStore.SessionStore> | undefined
  }
): Effect.Effect<RunResult, RequestsTooLarge> => {
  // Requests are recorded here, in their `--requests` form, by session, and counted as they come.
  const recording = options.requests ?? true
  const requests = new Map<string, Array<RequestLine>>()
  let requestMessages = 0
  const scriptedModel = (script: Scenario["model"], name: string): Model.ModelService => {
    const scripted = ScriptedModel.make(script, { provider: "scenario", model: name, record: false })
    return {
      provider: scripted.provider,
      model: scripted.model,
      respond: (request, sink) => {
        if (recording && requestMessages <= MAX_REQUEST_MESSAGES) {
          requestMessages += request.messages.length
          if (requestMessages > MAX_REQUEST_MESSAGES) requests.clear()
          else {
            let lines = requests.get(request.sessionId)
            if (lines === undefined) requests.set(request.sessionId, lines = [])
            lines.push({
              turn: request.turn,
              step: request.step,
              ...(request.purpose !== undefined ? { purpose: request.purpose } : {}),
              messages: request.messages.map(requestMessage)
            })
          }
        }
        return scripted.respond(request, sink)
      }
    }
  }
  const modelName = scenario.name ?? "script"
  const model = scriptedModel(scenario.model, modelName)
  const ids = IdGenerator.seeded(options.seed)
  const clock = new VirtualClock()
  const records: Array<DeliveryRecord> = []
  const compacts: Array<CompactRecord> = []
  const decisions: Array<DecisionRecord> = []
  // A sub-agent tool's child model is named after the tools that lead to it: `script/research`.
  const agentTools = tools(scenario.tools, (script, path) => scriptedModel(script, [modelName, ...path].join("/")))
  const program = Effect.gen(function*() {
    const supervisor = new FiberTracker()
    const store = yield* SessionStore.SessionStore
    return yield* Effect.scoped(
      Effect.gen(function*() {
        // A `resume` action replaces the agent (the same session, resumed from the store).
        const current = {
          agent: yield* Effect.orDie(Agent.make({ tools: agentTools, approvalTimeoutMs: scenario.approvalTimeoutMs }))
        }
        const resume = Effect.gen(function*() {
          yield* Effect.orDie(current.agent.release)
          current.agent = yield* Effect.orDie(
            Agent.resume(current.agent.id, {
              tools: agentTools,
              approvalTimeoutMs: scenario.approvalTimeoutMs,
              continuePending: true
            })
          )
        })
        const records_ = { deliveries: records, compacts, decisions }
        // By time, then file order (a stable sort).
        const actions = scenario.actions.map((a, i) => [a, i] as const).sort(([a, i], [b, j]) => a.at - b.at || i - j)
        let next = 0
        while (true) {
          // A scenario runs to its end however long that takes: no bound on the rounds.
          yield* Effect.orDie(settle(supervisor, { maxRounds: Infinity }))
          const now = clock.unsafeCurrentTimeMillis()
          const nextAction = next < actions.length ? actions[next]![0].at : undefined
          const nextSleep = clock.nextSleep()
          if (nextAction !== undefined && nextAction <= now) {
            const [action, index] = actions[next]!
            if ("resume" in action) yield* resume
            else yield* apply(current.agent, action, index, records_)
            next++
            continue
          }
          // An action due at the same instant as a sleep goes first.
          if (nextSleep !== undefined && (nextAction === undefined || nextSleep < nextAction)) {
            clock.wakeNext()
            continue
          }
          if (nextAction === undefined) break
          clock.setTime(nextAction)
        }
        // Read the log and the outcomes before the scope closes: closing it disposes the agent,
        // which is the simulator's housekeeping, not part of the scenario.
        const contents = yield* Effect.orDie(store.read(current.agent.id))
        const children = yield* childSessions(store, contents.events)
        return {
          contents,
          children,
          deliveries: records.slice(),
          compactions: compacts.slice(),
          decisions: decisions.slice()
        }
      }).pipe(Effect.supervised(supervisor))
    )
  })
  const compaction = compactionLayer(scenario.compaction)
  const layers = Layer.mergeAll(
    options.store ?? SessionStore.layerMemory,
    Layer.succeed(IdGenerator.IdGenerator, ids),
    Model.layer(model),
    PreStep.layer(
      scenario.budget === undefined
        ? listeners(scenario.preStep)
        : [Either.getOrThrow(Budget.make(scenario.budget)), ...listeners(scenario.preStep)]
    ).pipe(Layer.provide(Layer.succeed(IdGenerator.IdGenerator, ids)))
  )
  return program.pipe(
    Effect.provide(compaction === undefined ? layers : Layer.merge(layers, compaction)),
    Effect.withClock(clock),
    Effect.flatMap(({ children, compactions, contents, decisions, deliveries }) =>
      requestMessages > MAX_REQUEST_MESSAGES
        ? Effect.fail(
          new RequestsTooLarge({
            message: `the model requests hold more than ${
              MAX_REQUEST_MESSAGES.toLocaleString("en-US")
            } messages in all (each request repeats the history), the simulator's limit for recording them`
          })
        )
        : Effect.sync((): RunResult => {
          const own = requests.get(contents.header.id) ?? []
          const lines = requestLinesOf(own)
          return {
            header: contents.header,
            events: contents.events,
            requests: own,
            log: encodeHeader(contents.header) + encodeEvents(contents.events),
            get requestLines() {
              return lines()
            },
            deliveries,
            compactions,
            decisions,
            children: children.map((child): ChildResult => {
              const its = requests.get(child.contents.header.id) ?? []
              const lines = requestLinesOf(its)
              return {
                path: child.path,
                callId: child.callId,
                header: child.contents.header,
                events: child.contents.events,
                requests: its,
                log: encodeHeader(child.contents.header) + encodeEvents(child.contents.events),
                get requestLines() {
                  return lines()
                }
              }
            })
          }
        })
    )
  )
}

/**
 * The `--requests` lines of requests, built on first use (not by a spread, which would call the
 * getter): they can be large, and `agent-loop simulate` writes the lines itself.
 */
const requestLinesOf = (requests: ReadonlyArray<RequestLine>): () => string => {
  let lines: string | undefined
  return () => lines ??= requests.map((r) => JSON.stringify(r) + "\n").join("")
}

/**
 * The sub-agent sessions a log started (its `subagent/start` events, §27), read from the store,
 * each followed by its own, depth first; `prefix` is the path of the log's session. A child
 * whose session was never made (its agent failed to start) is not there.
 */
const childSessions = (
  store: SessionStore.SessionStoreService,
  events: ReadonlyArray<SessionEvent>,
  prefix = ""
): Effect.Effect<Array<{ readonly path: string; readonly callId: string; readonly contents: LogContents }>> =>
  Effect.map(
    Effect.forEach(events.filter((e) => e.type === "subagent/start"), (e) => {
      const { callId, id } = e.data as { readonly id: string; readonly callId: string }
      const path = prefix === "" ? callId : `${prefix}/${callId}`
      return store.read(id as SessionId).pipe(
        Effect.flatMap((contents) =>
          Effect.map(
            // A fork's seed is its parent's: the children it names are the parent's, listed already.
            childSessions(store, contents.events.slice(contents.header.seedLength ?? 0), path),
            (inner) => [{ path, callId, contents }, ...inner]
          )
        ),
        Effect.catchAll(() => Effect.succeed([]))
      )
    }),
    (lists) => lists.flat()
  )

const apply = (
  agent: Agent.Agent,
  action: Exclude<Scenario["actions"][number], { readonly resume: unknown }>,
  index: number,
  { compacts, decisions, deliveries: records }: {
    readonly deliveries: Array<DeliveryRecord>
    readonly compacts: Array<CompactRecord>
    readonly decisions: Array<DecisionRecord>
  }
): Effect.Effect<void, never, IdGenerator.IdGenerator> => {
  const ignore = <A, E, R>(e: Effect.Effect<A, E, R>) => Effect.asVoid(Effect.either(e))
  const deliver = (
    kind: DeliveryRecord["kind"],
    effect: Effect.Effect<Delivery.Delivery, DeliveryError | InvalidMessage, IdGenerator.IdGenerator>
  ) =>
    Effect.flatMap(Effect.either(effect), (result) => {
      if (Either.isLeft(result)) {
        records.push({ action: index, kind, at: action.at, error: result.left._tag })
        return Effect.void
      }
      const at = records.length
      records.push({ action: index, kind, at: action.at, messageId: result.right.messageId })
      // Record the outcome when the agent decides it (a callback: a fiber per pending delivery
      // would make every settle O(deliveries)).
      const record = (outcome: Delivery.DeliveryOutcome) => {
        records[at] = { ...records[at]!, outcome }
      }
      if (accessOf(agent)?.observeOutcome(result.right.messageId, record) !== true) {
        return Effect.map(result.right.outcome, record)
      }
      return Effect.void
    })
  if ("followup" in action) {
    return deliver("followup", Effect.flatMap(messageOf(action.followup, { kind: "user" }), agent.followup))
  }
  if ("steer" in action) return deliver("steer", Effect.flatMap(messageOf(action.steer, { kind: "user" }), agent.steer))
  if ("inject" in action) {
    return deliver("inject", Effect.flatMap(messageOf(action.inject, { kind: "plugin", plugin: "scenario" }), agent.inject))
  }
  if ("cancel" in action) {
    // A cancel returns when the turn is closed: run it in its own fiber; the simulator settles.
    return Effect.asVoid(Effect.fork(ignore(agent.cancel(action.cancel.cause, { keepInbox: action.cancel.keepInbox }))))
  }
  if ("compact" in action) {
    // A compaction on a running agent waits for its next boundary: its own fiber, like a cancel.
    const at = compacts.length
    compacts.push({ action: index, at: action.at })
    return Effect.asVoid(Effect.fork(Effect.flatMap(
      Effect.either(agent.compact({ instructions: action.compact.instructions })),
      (result) =>
        Effect.sync(() => {
          compacts[at] = {
            ...compacts[at]!,
            ...(Either.isRight(result) ? { report: result.right } : { error: result.left._tag })
          }
        })
    )))
  }
  if ("approve" in action || "reject" in action) {
    // Applied in the simulator's fiber: a decision returns once it is durable (§26 rule 5), and
    // the call's fiber it wakes runs when the simulator settles.
    const kind = "approve" in action ? "approve" : "reject"
    const spec = "approve" in action ? action.approve : action.reject
    return Effect.flatMap(agent.pendingApprovals, (pending) => {
      const question = spec.index !== undefined
        ? pending[spec.index]
        : pending.find((q) => spec.callId !== undefined ? q.callId === spec.callId : q.id === spec.id)
      const named = spec.index !== undefined
        ? { index: spec.index }
        : spec.callId !== undefined
        ? { callId: spec.callId }
        : { id: spec.id }
      if (question === undefined) {
        // Not open (not asked yet, decided already): what `agent.approve` of its id would fail with.
        decisions.push({ action: index, kind, at: action.at, ...named, error: "ApprovalNotOpen" })
        return Effect.void
      }
      const decide = "approve" in action
        ? agent.approve(question.id, { always: action.approve.always, name: action.approve.name })
        : agent.reject(question.id, { reason: action.reject.reason, always: action.reject.always, name: action.reject.name })
      return Effect.map(Effect.either(decide), (result) => {
        decisions.push({
          action: index,
          kind,
          at: action.at,
          id: question.id,
          callId: question.callId,
          ...(question.sessionId !== undefined ? { sessionId: question.sessionId } : {}),
          ...(Either.isLeft(result) ? { error: result.left._tag } : {})
        })
      })
    })
  }
  return Effect.asVoid(Effect.fork(ignore(agent.dispose)))
}
