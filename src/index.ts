/**
 * effect-agent-loop: an Effect-TS runtime for LLM agent loops (docs/design.md).
 *
 * @since 0.1.0
 */
export * as Agent from "./Agent.js"
export * as AgentError from "./AgentError.js"
export * as AgentEvent from "./AgentEvent.js"
export * as Compaction from "./Compaction.js"
export * as Delivery from "./Delivery.js"
export * as History from "./History.js"
export * as IdGenerator from "./IdGenerator.js"
export * as Inbox from "./Inbox.js"
export * as Invariant from "./Invariant.js"
export * as Message from "./Message.js"
export * as Model from "./Model.js"
export * as OfflineTools from "./OfflineTools.js"
export * as PreStep from "./PreStep.js"
export * as Anthropic from "./providers/Anthropic.js"
export * as OpenAICompat from "./providers/OpenAICompat.js"
export * as Scenario from "./Scenario.js"
export * as SessionEvent from "./SessionEvent.js"
export * as SessionLog from "./SessionLog.js"
export * as SessionReference from "./SessionReference.js"
export * as SessionStore from "./SessionStore.js"
export * as Tool from "./Tool.js"
export * as Transcript from "./Transcript.js"
export * as Usage from "./Usage.js"
