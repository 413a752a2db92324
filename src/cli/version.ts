/**
 * The CLI's version (`agent-loop --version`, `agentInfo.version` of `acp`, the `service.version`
 * of exported traces): the package's.
 *
 * @since 0.1.0
 */
export const VERSION = "0.1.0"
