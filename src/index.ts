/**
 * effect-agent-loop: an Effect-TS runtime for LLM agent loops (docs/design.md).
 *
 * @since 0.1.0
 */

/**
 * The agent: delivery (`followup`, `steer`, `inject`), status, live events, cancel, dispose, and the driver that runs turns (§5, §6, §9).
 *
 * @since 0.1.0
 */
export * as Agent from "./Agent.js"
/**
 * The errors of delivery, the plugin inbox operations, `cancel` and `appendEvent` (§5.1, §9).
 *
 * @since 0.1.0
 */
export * as AgentError from "./AgentError.js"
/**
 * What an agent shows while it runs: its status and `agent.events` (§5.2, §5.3).
 *
 * @since 0.1.0
 */
export * as AgentEvent from "./AgentEvent.js"
/**
 * Approvals: the log shapes of a tool call that waits for a person, and the questions a log leaves open (§26).
 *
 * @since 0.1.0
 */
export * as Approval from "./Approval.js"
/**
 * Token and cost budgets as a pre-step listener: a step is refused once the usage reaches the limit (§7, §18).
 *
 * @since 0.1.0
 */
export * as Budget from "./Budget.js"
/**
 * Context compaction: the policy port, the summarizing and pruning policies, the token estimate (§17).
 *
 * @since 0.1.0
 */
export * as Compaction from "./Compaction.js"
/**
 * Deliveries and their fates (§5.1, §12).
 *
 * @since 0.1.0
 */
export * as Delivery from "./Delivery.js"
/**
 * The model-visible history, derived from the session log alone (§6.2, §12).
 *
 * @since 0.1.0
 */
export * as History from "./History.js"
/**
 * The source of message and session ids (§2).
 *
 * @since 0.1.0
 */
export * as IdGenerator from "./IdGenerator.js"
/**
 * The inbox: the pending input of one agent, `nextTurn` and `nextStep` (§4).
 *
 * @since 0.1.0
 */
export * as Inbox from "./Inbox.js"
/**
 * The invariants of a session log, checked in one pass (§12).
 *
 * @since 0.1.0
 */
export * as Invariant from "./Invariant.js"
/**
 * Messages: the one identified, deep-frozen, plain-JSON shape for everything model-facing (§2).
 *
 * @since 0.1.0
 */
export * as Message from "./Message.js"
/**
 * The model port: the push-based `Model` service (§11).
 *
 * @since 0.1.0
 */
export * as Model from "./Model.js"
/**
 * The offline model: the default provider, rule-based, no network; it calls the offline tools when asked (§14).
 *
 * @since 0.1.0
 */
export * as Offline from "./providers/Offline.js"
/**
 * The built-in tools of the offline model (§14).
 *
 * @since 0.1.0
 */
export * as OfflineTools from "./providers/OfflineTools.js"
/**
 * The pre-step waterfall (§7).
 *
 * @since 0.1.0
 */
export * as PreStep from "./PreStep.js"
/**
 * Price tables (USD per million tokens, by model) and the cost of token usage (§18).
 *
 * @since 0.1.0
 */
export * as Prices from "./Prices.js"
/**
 * The Anthropic Messages adapter for the `Model` port (§11).
 *
 * @since 0.1.0
 */
export * as Anthropic from "./providers/Anthropic.js"
/**
 * The OpenAI-compatible Chat Completions adapter for the `Model` port (§11).
 *
 * @since 0.1.0
 */
export * as OpenAICompat from "./providers/OpenAICompat.js"
/**
 * The scenario format: a model script, tools, pre-step listeners and timed actions, and its decoding (§15).
 *
 * @since 0.1.0
 */
export * as Scenario from "./Scenario.js"
/**
 * The scripted model: answers each request with the next response of a script, on the Effect `Clock` (§15).
 *
 * @since 0.1.0
 */
export * as ScriptedModel from "./ScriptedModel.js"
/**
 * The durable events of a session log (§3).
 *
 * @since 0.1.0
 */
export * as SessionEvent from "./SessionEvent.js"
/**
 * The session log as a store hands it out: its interfaces and the store errors (§3).
 *
 * @since 0.1.0
 */
export * as SessionLog from "./SessionLog.js"
/**
 * Cross-session references (`@session:<id>`) (§13).
 *
 * @since 0.1.0
 */
export * as SessionReference from "./SessionReference.js"
/**
 * The session store: memory and JSONL stores of session logs (§3).
 *
 * @since 0.1.0
 */
export * as SessionStore from "./SessionStore.js"
/**
 * The scenario simulator: runs a `Scenario` on a virtual clock, to a byte-identical log on every run (§15).
 *
 * @since 0.1.0
 */
export * as Simulator from "./Simulator.js"
/**
 * Sub-agents: a tool that hands a task to a child agent on a session of its own (§27).
 *
 * @since 0.1.0
 */
export * as Subagent from "./Subagent.js"
/**
 * Tools: definitions, validation, guards and hooks (§8).
 *
 * @since 0.1.0
 */
export * as Tool from "./Tool.js"
/**
 * The transcript: a session log as people read it (§12, §14).
 *
 * @since 0.1.0
 */
export * as Transcript from "./Transcript.js"
/**
 * A transcript as terminal text: `render` and its labels, escaped so that log text cannot drive the terminal (§14).
 *
 * @since 0.1.0
 */
export * as TranscriptText from "./TranscriptText.js"
/**
 * Token usage from the session log (§18).
 *
 * @since 0.1.0
 */
export * as Usage from "./Usage.js"
