/**
 * The agent suite again, on a store without a synchronous append: every critical section takes
 * the lock path (as with JSONL `fsync: "batch"`) instead of running as one synchronous step.
 */
process.env.AGENT_STORE_MODE = "locked"
await import("./Agent.test.js")
