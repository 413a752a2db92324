/**
 * What the agent module and the sub-agent tool share (§27): how `Agent.make` is asked for a
 * child session (an option under a symbol no public type names), and the depth of a session.
 */
import type { Tracer } from "effect"
import type { PreStepUsage } from "../PreStep.js"
import type { SessionEvent, SessionHeader } from "../SessionEvent.js"

/** The key of `Agent.make`'s child-session option (`Subagent.ts` sets it). */
export const ChildSessionId: unique symbol = Symbol.for("effect-agent-loop/ChildSession")

/** A child session's header fields (§3.1, §27) and, for a fork, the parent events it starts with. */
export interface ChildSession {
  readonly parentSession: string
  readonly parentCallId: string
  readonly origin: "subagent"
  readonly delegationDepth: number
  readonly seed?: ReadonlyArray<SessionEvent> | undefined
  /** The child's `subagent/descriptor` data, its first event after the header (and seed). */
  readonly descriptor: { readonly [key: string]: unknown }
  /**
   * The parent's pre-step usage when the call started (undefined: the parent keeps none, its
   * pre-step is the default): the child's `PreStepPayload.usage` starts from it, so that a
   * budget counts the whole delegation (§18, §27).
   */
  readonly usage?: PreStepUsage | undefined
  /** The span of the parent's call (its `execute_tool`, §19): the parent of the child's turn spans. */
  readonly parentSpan?: Tracer.AnySpan | undefined
}

/** A session's delegation depth: its header's `delegationDepth`, 0 when it has none. */
export const depthOf = (header: SessionHeader): number => {
  const depth = (header as { readonly delegationDepth?: unknown }).delegationDepth
  return typeof depth === "number" && Number.isInteger(depth) && depth >= 0 ? depth : 0
}
