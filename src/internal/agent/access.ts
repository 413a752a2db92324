/**
 * What modules outside the agent's own may ask of an agent that `Agent.make` or `Agent.resume`
 * made (the scenario simulator, a session reference's delivery): a narrow internal interface,
 * found on the agent's prototype under a symbol no public type names, instead of a cast of the
 * public `Agent` to the agent's record. An `Agent` made otherwise (a caller's own
 * implementation of the interface) has none, and those modules fall back to its public members.
 */
import type { Effect } from "effect"
import type * as Approval from "../../Approval.js"
import type { DeliveryOutcome } from "../../Delivery.js"
import type { IdGeneratorService } from "../../IdGenerator.js"
import type { ModelService } from "../../Model.js"
import type { PreStepService, PreStepUsage } from "../../PreStep.js"
import type { SessionEvent } from "../../SessionEvent.js"
import type { SessionWriteError } from "../../SessionLog.js"
import type { SessionStoreService } from "../../SessionStore.js"

/** The key of an agent's accessor (on the prototype: no field per agent). */
export const AgentAccessId: unique symbol = Symbol.for("effect-agent-loop/AgentAccess")

/** What an agent made by this library lets the rest of the library see of its state. */
export interface AgentAccess {
  /** `maxMessageBytes` (§5.1): the most UTF-8 bytes of JSON a delivered message may have. */
  readonly maxMessageBytes: number
  /** Whether the session used the id: pending, or ever logged (§2). */
  readonly usedId: (id: string) => boolean
  /**
   * Registers `observer` for the outcome of the undecided delivery `id`, called once when the
   * agent decides it (no fiber, no `Deferred`); false, and nothing registered, when `id` is not
   * undecided.
   */
  readonly observeOutcome: (id: string, observer: (outcome: DeliveryOutcome) => void) => boolean
}

/** An object that carries an accessor. */
export interface Accessible {
  readonly [AgentAccessId]: AgentAccess
}

const isAccessible = (agent: object): agent is Accessible => AgentAccessId in agent

/** The accessor of an agent this library made, else undefined. */
export const accessOf = (agent: object): AgentAccess | undefined => isAccessible(agent) ? agent[AgentAccessId] : undefined

/**
 * What a sub-agent tool (`Subagent.ts`, §27) may ask of the agent whose call runs it: found on
 * the call's `ctx.agent` under a symbol no public type names. A `ToolAgent` made otherwise (a
 * test calling `execute` itself) has none, and the sub-agent tool fails with a clear error.
 */
export const ParentAccessId: unique symbol = Symbol.for("effect-agent-loop/ParentAccess")

/** The parent agent as its sub-agent tools see it. */
export interface ParentAccess {
  readonly sessionId: string
  /** The parent's `delegationDepth` (its header's; 0 for a session no agent delegated to). */
  readonly depth: number
  readonly cwd: string | undefined
  readonly store: SessionStoreService
  readonly model: ModelService
  readonly ids: IdGeneratorService
  readonly approvalListeners: ReadonlyArray<Approval.Listener>
  /** The parent's `approvalTimeoutMs` (§26 rule 5), the default of its sub-agents'. */
  readonly approvalTimeoutMs: number | undefined
  /** Whether the parent's spans record content (§19 rule 6): the child's do too. */
  readonly recordContent: boolean
  /** The parent's pre-step waterfall (§7): the child's too (§27). */
  readonly preStep: PreStepService
  /**
   * The parent's pre-step usage now (its own, its ended children's, and what it inherited;
   * §18), undefined when it keeps none (the default pre-step).
   */
  readonly usage: () => PreStepUsage | undefined
  /** The parent's committed events (for a fork child's seed). */
  readonly events: () => ReadonlyArray<SessionEvent>
  /**
   * Appends a runtime event (`subagent/start`, `subagent/end`) to the parent's log; a
   * `subagent/end`'s usage then counts in the parent's pre-step usage and its turn's span (§18, §19).
   */
  readonly record: (type: string, data: unknown) => Effect.Effect<void, SessionWriteError>
  /**
   * Links the child agent of call `callId` to the parent while the call runs: its questions are
   * listed and decided through the parent. Returns the unlink.
   */
  readonly adopt: (callId: string, child: object) => () => void
  /** Whether the parent was released (passivation, §9): its sub-agents are released too. */
  readonly released: () => boolean
}

/** The parent access of a tool call's `ctx.agent`, else undefined. */
export const parentOf = (agent: object): ParentAccess | undefined =>
  ParentAccessId in agent ? (agent as { readonly [ParentAccessId]: ParentAccess })[ParentAccessId] : undefined
