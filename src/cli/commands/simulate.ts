/** `agent-loop simulate SCENARIO`: runs a scenario on the virtual clock and writes its session log (§15). */
import { Args, Command, Options } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Console, Effect, Either, Option } from "effect"
import { fileErrorText } from "../../internal/fsErrors.js"
import { fileKind } from "../../internal/store/common.js"
import { escapeJson, escapeLine } from "../../internal/terminalText.js"
import * as Scenario from "../../Scenario.js"
import * as Simulator from "../../Simulator.js"
import { exit } from "../exit.js"
import { otlpOptions, withOtlp } from "../otlp.js"
import { storeDirectory } from "./shared.js"

/**
 * `simulate SCENARIO [--out FILE] [--requests FILE] [--store DIR]` (§15): runs a scenario on the
 * virtual clock; writes the session log (default stdout) and, optionally, the model requests.
 * `--store DIR` also writes every session of the run, the scenario's agent's and each
 * sub-agent's (§27), as `DIR/<id>.jsonl` (the JSONL store's layout, so `transcript`, `stats` and
 * `pending --store DIR` read them); the directory is made if missing, and a file of the same name
 * is replaced (a file's ids are the same on every run).
 * An invalid scenario exits 2 with the JSON path of the problem, before anything runs; so does an
 * `--out` or `--requests` that cannot be written (a directory, a missing directory), and a
 * scenario over `Scenario.MAX_ACTIONS` actions. A delivery that failed (anything but
 * `AgentDisposed` after a `dispose` action), and an `approve` or `reject` that failed (no open
 * question under its name then: `ApprovalNotOpen`, §26), exit 2 after the log is written; recorded requests
 * over `Simulator.MAX_REQUEST_MESSAGES` messages exit 2 with nothing written.
 */
export const simulate = Command.make(
  "simulate",
  {
    scenario: Args.text({ name: "SCENARIO" }).pipe(Args.withDescription("a scenario JSON file (§15)")),
    out: Options.text("out").pipe(Options.optional, Options.withDescription("where to write the session log (default: stdout)")),
    requests: Options.text("requests").pipe(
      Options.optional,
      Options.withDescription("where to write the model requests, one JSON line each")
    ),
    store: Options.text("store").pipe(
      Options.withPseudoName("directory"),
      Options.optional,
      Options.withDescription("also write every session of the run, sub-agents' too, as <id>.jsonl in this directory")
    ),
    ...otlpOptions
  },
  ({ otlpEndpoint, out, requests, scenario, store }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // Stat first: opening a fifo blocks, and a device such as /dev/zero never ends.
      const cannotRead = (e: PlatformError) => exit(2, escapeLine(`${scenario}: cannot read: ${fileErrorText(e, "read")}`))
      const info = yield* fs.stat(scenario).pipe(Effect.catchAll(cannotRead))
      if (info.type !== "File") return yield* exit(2, `${scenario}: cannot read: not a regular file (${fileKind(info.type)})`)
      const text = yield* fs.readFileString(scenario).pipe(Effect.catchAll(cannotRead))
      const decoded = Scenario.parse(text)
      if (Either.isLeft(decoded)) {
        return yield* exit(2, escapeLine(`${scenario}: invalid scenario at ${decoded.left.path}: ${decoded.left.message}`))
      }
      if (Option.isSome(out)) yield* checkWritable("--out", out.value)
      if (Option.isSome(requests)) yield* checkWritable("--requests", requests.value)
      const directory = Option.isSome(store) ? yield* storeDirectory(store.value) : undefined
      const result = yield* Simulator.run(decoded.right, { seed: Scenario.seedOf(text), requests: Option.isSome(requests) })
        .pipe(Effect.catchTag("RequestsTooLarge", (e) => exit(2, `${scenario}: --requests: ${e.message}`)))
      // A delivery the scenario could not make is a failed run (exit 2), except `AgentDisposed`
      // after a `dispose` action, which is what the scenario asked for.
      let unexpected = 0
      for (const d of result.deliveries) {
        if (d.error !== undefined) {
          if (d.error !== "AgentDisposed") unexpected++
          yield* Console.error(escapeLine(`${scenario}: action ${d.action} (${d.kind} at ${d.at} ms) failed: ${d.error}`))
        }
      }
      // An approve or reject that found no open question under its name (§26) failed too.
      let undecided = 0
      for (const d of result.decisions) {
        if (d.error !== undefined) {
          undecided++
          const name = d.callId !== undefined
            ? `call ${d.callId}`
            : d.index !== undefined
            ? `open question ${d.index}`
            : `question ${d.id}`
          yield* Console.error(
            escapeLine(`${scenario}: action ${d.action} (${d.kind} ${name} at ${d.at} ms) failed: ${d.error}`)
          )
        }
      }
      const write = (file: string, content: string) =>
        fs.writeFileString(file, content).pipe(Effect.catchAll((e) => cannotWrite("--out", file, e)))
      if (Option.isSome(out)) yield* write(out.value, result.log)
      // On a terminal, the code points JSON leaves raw (C1, bidi, U+2028) as JSON escapes: the same values.
      else yield* Effect.sync(() => process.stdout.write(process.stdout.isTTY ? escapeJson(result.log) : result.log))
      if (Option.isSome(requests)) yield* writeLines(requests.value, result.requests)
      if (directory !== undefined) {
        const path = yield* Path.Path
        for (const session of [result, ...result.children]) {
          const file = path.join(directory, `${session.header.id}.jsonl`)
          yield* fs.writeFileString(file, session.log).pipe(Effect.catchAll((e) => cannotWrite("--store", file, e)))
        }
      }
      if (unexpected > 0 || undecided > 0) {
        const failed = [
          ...(unexpected > 0 ? [`${unexpected} deliver${unexpected === 1 ? "y" : "ies"}`] : []),
          ...(undecided > 0 ? [`${undecided} decision${undecided === 1 ? "" : "s"}`] : [])
        ]
        return yield* exit(2, `${scenario}: ${failed.join(" and ")} failed (see above)`)
      }
    }).pipe(withOtlp("simulate", otlpEndpoint))
).pipe(Command.withDescription("Run a scenario on a virtual clock and write its session log (§15)."))

/**
 * Writes `items` as JSON lines to `file` a chunk at a time (the requests of a long scenario can
 * be more than one string can hold).
 */
const writeLines = (file: string, items: ReadonlyArray<unknown>) =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const handle = yield* fs.open(file, { flag: "w" })
    const encoder = new TextEncoder()
    for (let i = 0; i < items.length;) {
      let chunk = ""
      while (i < items.length && chunk.length < 1 << 20) chunk += JSON.stringify(items[i++]) + "\n"
      yield* handle.writeAll(encoder.encode(chunk))
    }
  })).pipe(Effect.catchAll((e) => cannotWrite("--requests", file, e)))

/**
 * Exit 2 unless `file` looks writable, checked before the run without creating anything: a file
 * that is there must be writable and not a directory; else its directory must be there and
 * writable. The write after the run still reports what this cannot foresee (a full disk).
 */
const checkWritable = (flag: string, file: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const info = yield* fs.stat(file).pipe(Effect.either)
    if (Either.isRight(info)) {
      if (info.right.type === "Directory") return yield* exit(2, escapeLine(`${flag} ${file}: cannot write: it is a directory`))
      return yield* fs.access(file, { writable: true }).pipe(Effect.catchAll((e) => cannotWrite(flag, file, e)))
    }
    if (fileErrorText(info.left, "write") !== "no such directory") return yield* cannotWrite(flag, file, info.left)
    yield* fs.access(path.dirname(file), { writable: true }).pipe(Effect.catchAll((e) => cannotWrite(flag, file, e)))
  })

/** Exit 2: `--out FILE: cannot write: it is a directory`. */
const cannotWrite = (flag: string, file: string, error: PlatformError) =>
  exit(2, escapeLine(`${flag} ${file}: cannot write: ${fileErrorText(error, "write")}`))
