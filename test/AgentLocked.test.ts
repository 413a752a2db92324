/**
 * The agent suite (test/utils/agentSuite.ts) again, on a store without a synchronous append:
 * every critical section takes the lock path (as with JSONL `fsync: "batch"`) instead of running
 * as one synchronous step.
 */
import { agentSuite } from "./utils/agentSuite.js"

agentSuite("locked")
