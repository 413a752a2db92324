/**
 * Resume after a real crash (§3.3, §10). The program runs itself as a child process
 * that starts a session on the JSONL store, queues a second followup, and dies by SIGKILL in
 * the middle of a tool call: its `tool/call` is durable, its result never comes. The parent
 * then resumes the session with `Agent.resume(id, { continuePending: true })`: repair closes
 * the interrupted turn (`TOOL_OUTCOME_UNKNOWN` for the call, `step/end`, `turn/end
 * {kind:"interrupted"}`, `session/end-seed`), and the followup still queued runs as turn 2,
 * whose model sees the unknown outcome (a message claimed by the interrupted turn before it
 * entered would be `Dropped interrupted`; this one had entered). The child's writer lock, left
 * by a dead process, is taken over.
 *
 * Run: npm run example -- resume-after-crash [DIR]   (default .agent-loop/sessions)
 * then e.g. `npx agent-loop transcript DIR/<id>.jsonl`.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Deferred, Effect, Layer, Schema } from "effect"
import {
  Agent,
  Delivery,
  Model,
  Offline,
  ScriptedModel,
  SessionEvent,
  SessionStore,
  Tool,
  Transcript,
  TranscriptText
} from "effect-agent-loop"
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { writeSync } from "node:fs"
import { fileURLToPath } from "node:url"

/** `deploy`, which runs `during` in the middle of its call. */
const deploy = (during: Effect.Effect<void>) =>
  Tool.make({
    name: "deploy",
    description: "Deploys a service",
    parameters: Schema.Struct({ service: Schema.String }),
    execute: ({ service }) => Effect.as(during, { content: `${service} deployed` })
  })

/** The child: a turn whose tool call kills the process once the second followup is durable. */
const child = (directory: string, sessionId: string) =>
  Effect.gen(function*() {
    const queued = yield* Deferred.make<void>()
    const kill = Effect.zipRight(
      Deferred.await(queued),
      Effect.sync(() => {
        writeSync(1, "child: in the middle of deploy, SIGKILL\n") // synchronous: nothing runs after the kill
        process.kill(process.pid, "SIGKILL")
      })
    )
    const agent = yield* Agent.make({ sessionId, tools: [deploy(kill)] })
    yield* agent.followup("deploy the api")
    yield* agent.followup("then tell me how it went")
    yield* Deferred.succeed(queued, undefined)
    yield* agent.awaitIdle // never returns
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.merge(
      SessionStore.layerJsonl({ directory }),
      Model.layer(ScriptedModel.make([{ toolCalls: [{ id: "call_1", name: "deploy", arguments: { service: "api" } }] }]))
    ))
  )

/** Runs `node entry child DIR ID` and waits (at most 30 s) for it to exit; the signal that ended it, if any. */
const runChild = (entry: string, directory: string, sessionId: string) =>
  Effect.async<NodeJS.Signals | null, Error>((resume) => {
    const proc = spawn(process.execPath, [entry, "child", directory, sessionId], { stdio: ["ignore", "inherit", "inherit"] })
    proc.on("error", (e) => resume(Effect.fail(e)))
    proc.on("exit", (code, signal) =>
      resume(signal !== null || code === 0 ? Effect.succeed(signal) : Effect.fail(new Error(`child exited ${code}`))))
    return Effect.sync(() =>
      proc.kill("SIGKILL")
    )
  }).pipe(Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => new Error("the child did not exit within 30 s") }))

/**
 * Crashes a session in a child process (`entry`: this program's built file), then resumes it.
 * Returns the child's signal, the events repair appended, the fates of the two followups and
 * the log after the queued work ran.
 */
export const main = (options: { readonly directory: string; readonly entry?: string; readonly sessionId?: string }) =>
  Effect.gen(function*() {
    const sessionId = options.sessionId ?? randomUUID()
    const signal = yield* runChild(options.entry ?? fileURLToPath(import.meta.url), options.directory, sessionId)
    console.log(`parent: the child died by ${signal}`)

    const store = yield* SessionStore.SessionStore
    const before = (yield* store.read(sessionId)).events.length
    const agent = yield* Agent.resume(sessionId, { tools: [deploy(Effect.void)], continuePending: true })
    // Repair is appended before resume returns; the run it started comes after session/end-seed.
    const seed = agent.log.events().findIndex((e, i) => i >= before && SessionEvent.is(e, "session/end-seed"))
    const repaired = agent.log.events().slice(before, seed + 1)
    console.log("parent: repair appended")
    for (const e of repaired) {
      const detail = SessionEvent.is(e, "tool/result")
        ? `${e.data.message.source.callId} ${e.data.error?.code}`
        : JSON.stringify(e.data)
      console.log(`  ${e.seq} ${e.type} ${detail}`)
    }

    yield* agent.awaitIdle
    const events = agent.log.events().slice()
    const delivered = events.flatMap((e) => SessionEvent.is(e, "agent/inbox/spliced") ? e.data.inserted : [])
    const fates = delivered.map((m) => Delivery.fateOf(events, m.id))
    console.log(`parent: fates ${JSON.stringify(fates)}`)
    console.log(TranscriptText.render(Transcript.fromEvents(events)))
    console.log(`log: ${agent.log.path}`)
    return { signal, repaired, fates, events }
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.merge(SessionStore.layerJsonl({ directory: options.directory }), Model.layer(Offline.make())))
  )

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [mode, directory, sessionId] = process.argv.slice(2)
  NodeRuntime.runMain(
    mode === "child" && directory !== undefined && sessionId !== undefined
      ? child(directory, sessionId)
      : main({ directory: mode ?? ".agent-loop/sessions" })
  )
}
