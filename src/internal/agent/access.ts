/**
 * What modules outside the agent's own may ask of an agent that `Agent.make` or `Agent.resume`
 * made (the scenario simulator, a session reference's delivery): a narrow internal interface,
 * found on the agent's prototype under a symbol no public type names, instead of a cast of the
 * public `Agent` to the agent's record. An `Agent` made otherwise (a caller's own
 * implementation of the interface) has none, and those modules fall back to its public members.
 */
import type { DeliveryOutcome } from "../../Delivery.js"

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
