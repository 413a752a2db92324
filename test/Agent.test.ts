/**
 * The agent suite (test/utils/agentSuite.ts) on the memory store: its synchronous append makes
 * every critical section one synchronous step.
 */
import { agentSuite } from "./utils/agentSuite.js"

agentSuite("sync")
