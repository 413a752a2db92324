/**
 * `effect-agent-loop/cluster` (§21): agents as `@effect/cluster` entities on PostgreSQL.
 * `AgentEntity` (the entity and its rpcs), `AgentClient` (send to any session from any process of
 * the cluster), `AgentRunner` (runner and client-only process layers). Needs the optional peers
 * `@effect/cluster`, `@effect/rpc`, `@effect/sql`, `@effect/sql-pg`, `@effect/workflow` (a peer of
 * `@effect/cluster`, never loaded) and `@effect/platform-node`.
 *
 * @since 0.1.0
 */

/**
 * The `AgentEntity` client, usable from any process of the cluster (§21).
 *
 * @since 0.1.0
 */
export * as AgentClient from "./AgentClient.js"
/**
 * Agents as `@effect/cluster` entities keyed by session id, and the handlers a runner registers (§21).
 *
 * @since 0.1.0
 */
export * as AgentEntity from "./AgentEntity.js"
/**
 * Runner processes and client-only processes of an agent cluster (§21).
 *
 * @since 0.1.0
 */
export * as AgentRunner from "./AgentRunner.js"
