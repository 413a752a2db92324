/**
 * The bounds of the tests' waits in real time, and what each is derived from. A wait for
 * something is a condition (a poll, an awaited call or exit) with one of these bounds; a bound
 * only says when to give up and name what did not come, so it is several times the slowest
 * figure measured on the machine the suite must pass on: 2 cores loaded by two busy loops
 * (`yes > /dev/null` twice) and by other work (load average 8 to 20). Fixed sleeps remain only
 * as observation windows (something must not happen), each with a comment saying why. The rows
 * of `Chat`, `Acp`, `Crash`, `CrashMatrix`, `Package`, `Examples`, `CliOtlp` and `Property` were
 * measured with the two busy loops at load average 2 to 6 (the other work was lighter then).
 *
 * | what was measured (under that load)                            | figures              | bound                       |
 * |----------------------------------------------------------------|----------------------|-----------------------------|
 * | the built CLI to its end: `--version`                          | 0.83–1.07 s          | CLI_RUN_MS 20 s             |
 * |   `send`/`transcript`/`check`/a refused `runner` on PostgreSQL | 1.5–5.6 s            |                             |
 * |   a `send --timeout 7s` that waits its limit out               | 6.8–9.9 s            |                             |
 * | one `agent-loop runner` child: its ready line                  | 2.5–6.3 s            | RUNNER_READY_MS 30 s        |
 * | 2 or 3 runners started at once: all ready                      | 6.1–15.0 s           | RUNNERS_READY_MS 60 s       |
 * | a child's exit after SIGKILL                                   | 24–593 ms            | KILLED_EXIT_MS 10 s         |
 * | the backends ended by `pg_terminate_backend` gone              | 8 ms                 |   (the same)                |
 * | an admin query through a `node` child (`pg.ts`)                | 0.27–0.50 s          | PG_ADMIN_MS 30 s            |
 * | a loopback server seeing the connection of an interrupted      | 29–72 ms (load 20)   | SOCKET_CLOSE_MS 5 s         |
 * |   request close (`OpenAICompat`; was 100 polls of 10 ms)       |                      |                             |
 * | an `AgentClient` call to a runner (`entity.ts`'s `bounded`)    | 1 ms–8.7 s           | CLUSTER_CALL_S 30 s         |
 * | an idle entity passivated (`maxIdleTime` 500 ms; the cluster's | 5.0 s                | CLUSTER_PASSIVATION_S 20 s  |
 * |   reaper looks every 5 s)                                      |                      |                             |
 * | a state a cluster reaches on its own: a turn started,          | 9 ms–0.95 s;         | CLUSTER_CONDITION_S 30 s    |
 * |   an agent stopped by a fault                                  | 5.3–5.6 s            |                             |
 * | a call or condition that waits out a failover or a fault:      | 4.1–9.3 s;           | CLUSTER_SLOW_CALL_S 60 s    |
 * |   a session answering from another runner, its outcomes;       |                      |                             |
 * |   the shards settled between the runners                       | 3.8–11.1 s           |                             |
 * | a `ClusterEntity` test (one runner in the test's process)      | 3.9–11.7 s           | CLUSTER_TEST_MS 60 s        |
 * |   the cluster-runner example's test (`Examples`)               | 0.9–1.6 s            |                             |
 * | a `ClusterHeal` test (a fault of 2 s, calls bounded at 60 s)   | 3.9–14.2 s           | CLUSTER_FAULT_TEST_MS 120 s |
 * | a `ClusterFailover` test (runners, a 10 s or 30 s turn)        | 27.7–59.8 s          | 180 s, 240 s (in the file)  |
 * | a `CliCluster` test (runners, CLI runs in series)              | 0.5–73.3 s           | CLI_PG_TEST_MS 240 s        |
 * | a tmux wait of `Chat` (the chat UI's screen, its exit; a lock  | 12 ms–2.9 s          | TMUX_WAIT_MS 10 s           |
 * |   file gone and the process exited after its terminal closed)  | 12–37 ms             |                             |
 * | a running `acp` child: an answer or update on its stdout, a    | 0–44 ms              | CHILD_WAIT_MS 10 s          |
 * |   record in its log; its first answer (its start included)     | 0.57–0.68 s          |                             |
 * |   its exit once its stdin ends (a prompt running or not)       | 14–93 ms             |                             |
 * |   a prompt of `wait 5 seconds` answered                        | 4.5 s                |                             |
 * |   a runner's exit after SIGTERM, its spans flushed (`CliOtlp`) | 98 ms                |                             |
 * | an MCP test's wait for real servers (`mcp.ts`, load 4 to 7):   |                      | MCP_WAIT_MS 20 s            |
 * |   connected (one to five at once; `server-everything` the      | 0.3–2.3 s            |                             |
 * |   slowest), a turn of calls to them, an HTTP server listening  |                      |                             |
 * |   a line in a server's log; a process gone after SIGKILL       | 0–0.1 s; 0–42 ms     |                             |
 * | a `node` child of a test to its end: `Crash`'s crash child     | 1.35–3.58 s          | CHILD_RUN_MS 20 s           |
 * |   a `node -e` import with the module hooks (`Package`)         | 1.9–2.8 s            |                             |
 * |   `npm pack --dry-run` (`Package`)                             | 4.4 s                |                             |
 * |   `tsc` of the examples (`Examples`)                           | 1.9–3.4 s            |                             |
 * |   `SubagentCrash`'s child until its sub-agent's tool runs      | 2.9–3.8 s (load 12)  |                             |
 * | a `Crash` test with a kill after each append (10 children)     | 18.0–27.4 s          | CRASH_TEST_MS 120 s         |
 * |   (its tests that cut a log: 0.6–5.5 s)                        |                      |   (they keep the default)   |
 * | a `CrashMatrix` test, a store's cells (PostgreSQL slowest;     | 36–68 s alone, load  | CRASH_MATRIX_MS 300 s       |
 * |   13 scenarios with the sub-agent one), load 5–9; in the full  | 5–9; 39–100 s; over  |                             |
 * |   suite beside other work (load 10–15)                         | 120 s once           |                             |
 * | a chat's first idle screen, the program's start included       | 1.1–1.9 s; 2.2–4.1 s | CHAT_READY_MS 20 s          |
 * |   a big session's lock taken (`--session big` starting)        | 1.1 s                |                             |
 * | `agent-loop inspect` printing its address (a 100,000-event      | 0.38–0.69 s          | INSPECT_READY_MS 20 s       |
 * |   store, load 3); with the two busy loops                      | 1.3–2.7 s            |                             |
 * |   its exit after SIGTERM (`browser.ts`'s `close`)              | 12–132 ms            |   (KILLED_EXIT_MS)          |
 * | the inspector's page in chromium (`browser.ts`), the two busy  |                      | BROWSER_WAIT_MS 10 s        |
 * |   loops: a 10,000-event session's first rows after `goto`      | 0.35–1.15 s          |                             |
 * |   its last row after a scroll to the end                       | 39–67 ms             |                             |
 * |   a browser launched (`launchBrowser`)                         | 0.33–0.37 s          |                             |
 * | an Ink frame in the test's process (written within `render`);  | 0 ms;                | IN_PROCESS_MS 5 s           |
 * |   two lines typed in one chunk, submitted;                     | 25 ms;               |                             |
 * |   an HTTP exchange with a server of the test's process, an     | 10–66 ms; 34 ms      |                             |
 * |   event stream read over two turns (`Examples`)                |                      |                             |
 * | a `Chat` test that first writes its 8 MiB session through the  | 18.9 s (16.7 s the   | CHAT_BIG_TEST_MS 120 s      |
 * |   library (65,536 text deltas)                                 | session)             |                             |
 * | a property of `Property`: 1,000 runs; 400 with compaction      | 27.5 s; 12.4 s       | PROPERTY_TEST_MS 120 s      |
 * |   a property of `FastPaths`: 250–300 scenarios run twice       | 2.9–9.2 s (load 5–6) |                             |
 * |   (the fast checks of `SessionEvent`, `LogEncode`: ≤ 0.34 s)   |                      |   (they keep the default)   |
 * | a test under vitest's default bound: the CLI's tests           | up to 17.1 s         | TEST_TIMEOUT_MS 60 s        |
 * |   (`Cli`, `CliOtlp`; most tests take milliseconds)             |                      |   (was 30 s)                |
 * |   `CliOtlp`, `Chat`, `Acp`, `Package`, `Examples`, whose own   | 8.3, 5.4, 6.2, 4.4,  |                             |
 * |   30–90 s bounds are gone                                      | 5.3 s                |                             |
 * | a hook: `CrashMatrix`'s `afterAll` drops its databases         | an admin query each  | HOOK_TIMEOUT_MS 30 s        |
 *
 * Re-measure with `AGENT_LOOP_BOUNDS_LOG=/tmp/bounds.log npx vitest run test/X.test.ts`: the waits
 * of `cluster.ts`, `entity.ts`, `tmux.ts`, `mcp.ts`, `browser.ts`, the cluster tests, `Chat`, `Acp`,
 * `Crash`, `Package`, `Examples` (its `tsc`) and `CliOtlp` append how long they took there (`note`); a test's own
 * time is in vitest's JSON report (`--reporter=json --outputFile.json=FILE`).
 */
import * as NodeFs from "node:fs"

/** A run of the built CLI to its end (the `timeout` of an `execFile`/`spawnSync` of `dist/cli/bin.js`). */
export const CLI_RUN_MS = 20_000

/**
 * The timeout of a `CliCluster` test: runners and runs of the CLI one after another, measured up
 * to 73.3 s with four PostgreSQL test files at once (load 16 to 20), near the 60–120 s they had.
 */
export const CLI_PG_TEST_MS = 240_000

/** One `agent-loop runner` child printing its ready line. */
export const RUNNER_READY_MS = 30_000

/** Several runners started at once (`cluster.ts`'s `startRunners`), every one ready. */
export const RUNNERS_READY_MS = 60_000

/** A child process's exit after SIGKILL; PostgreSQL backends gone after `pg_terminate_backend`. */
export const KILLED_EXIT_MS = 10_000

/** An admin query of `pg.ts` (a database or role made or dropped) through a `node` child. */
export const PG_ADMIN_MS = 30_000

/** A loopback server's `close` of a connection whose client was interrupted. */
export const SOCKET_CLOSE_MS = 5_000

/** A tmux wait (`tmux.ts`: the screen shows something, the program started or exited). */
export const TMUX_WAIT_MS = 10_000

/**
 * A state a running child (the built CLI) reaches on its own: a line on its stdout, a record in
 * its log, an answer to a request, its exit once its stdin ends or after SIGTERM.
 */
export const CHILD_WAIT_MS = 10_000

/**
 * A wait of the MCP tests for a server process (`test/utils/mcp.ts`): started and connected, a
 * call answered, a turn of real calls ended, a line in a server's log, an HTTP server listening.
 */
export const MCP_WAIT_MS = 20_000

/** A program a test runs to its end that is not the CLI: a crash child, a `node -e` import, `npm pack`, `tsc`. */
export const CHILD_RUN_MS = 20_000

/**
 * The timeout of a `Crash` test that runs its crash child once per append (10 runs, each
 * repaired), and of a `CrashMatrix` test (one store's cells, PostgreSQL the slowest).
 */
export const CRASH_TEST_MS = 120_000

/** A `CrashMatrix` test: one store's cells (see the table). */
export const CRASH_MATRIX_MS = 300_000

/** A chat's first idle screen (`Chat`'s `startChat`): the program's start and its session's load. */
export const CHAT_READY_MS = 20_000

/** `agent-loop inspect` printing its address (`browser.ts`'s `startInspect`): the program's start and its store's first read. */
export const INSPECT_READY_MS = 20_000

/**
 * A condition of the inspector's page in the browser (`browser.ts`): a row or a view shown after
 * a navigation, a click or a change of the log; a browser launched.
 */
export const BROWSER_WAIT_MS = 10_000

/** The timeout of a `Chat` test that first writes its 8 MiB session through the library. */
export const CHAT_BIG_TEST_MS = 120_000

/**
 * Something the test's own process does on its event loop: an Ink frame written, keys read from
 * a stream, an HTTP exchange with a server the test runs.
 */
export const IN_PROCESS_MS = 5_000

/**
 * The timeout of a property of `Property` (1,000 or 400 simulated runs) and of `FastPaths`
 * (250–300 scenarios, each run twice); no real waits.
 */
export const PROPERTY_TEST_MS = 120_000

/** vitest's `testTimeout`: a test that sets no bound of its own. */
export const TEST_TIMEOUT_MS = 60_000

/** vitest's `hookTimeout` (its default, 10 s, is less than one database drop under load may need with several). */
export const HOOK_TIMEOUT_MS = 30_000

/** An `AgentClient` call to a runner (`entity.ts`'s `bounded`), in seconds. */
export const CLUSTER_CALL_S = 30

/** An idle entity passivated (`maxIdleTime` 500 ms), in seconds. */
export const CLUSTER_PASSIVATION_S = 20

/** A state the cluster reaches on its own (a turn started, an agent stopped, shards settled), in seconds. */
export const CLUSTER_CONDITION_S = 30

/** A call that waits out a store fault or a failover, in seconds. */
export const CLUSTER_SLOW_CALL_S = 60

/** The timeout of a `ClusterEntity` test. */
export const CLUSTER_TEST_MS = 60_000

/** The timeout of a `ClusterHeal` test. */
export const CLUSTER_FAULT_TEST_MS = 120_000

/**
 * With `AGENT_LOOP_BOUNDS_LOG=<file>` set, appends `<what>\t<ms>` to that file: how long a
 * bounded wait took, the figures the bounds above are derived from. A no-op otherwise.
 */
export const note = (what: string, ms: number): void => {
  const file = process.env["AGENT_LOOP_BOUNDS_LOG"]
  if (file) NodeFs.appendFileSync(file, `${what.replaceAll(/\s+/g, " ")}\t${Math.round(ms)}\n`)
}
