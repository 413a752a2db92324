/**
 * The SQLite session store (`effect-agent-loop/sql`, §3.3): every session in one
 * database file (WAL mode), one INSERT per append. A session is written by an agent, the store
 * closed, and the session read back through a new store, as after a restart: the same events,
 * valid by the invariants of §12, and its transcript.
 *
 * Run: npm run example -- sqlite-store [FILE]   (default .agent-loop/sessions.db)
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { Agent, Invariant, Model, Offline, SessionStore, Transcript, TranscriptText } from "effect-agent-loop"
import * as SqlSessionStore from "effect-agent-loop/sql"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

/** Writes one session to `filename`, then reads it back with a fresh store. */
export const main = (filename: string) =>
  Effect.gen(function*() {
    yield* Effect.sync(() => Fs.mkdirSync(Path.dirname(filename), { recursive: true }))
    // `synchronous: "full"` (the default) syncs the WAL at every commit: an append that returned survives power loss.
    const store = SqlSessionStore.layerSqlite({ filename })

    const written = yield* Effect.gen(function*() {
      const agent = yield* Agent.make()
      yield* agent.followup("hello")
      yield* agent.awaitIdle
      yield* agent.followup("what did I just say?")
      yield* agent.awaitIdle
      return { id: agent.id, events: agent.log.events().slice() }
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(store, Model.layer(Offline.make()))))
    // The store is closed here (the layer's scope ended with the effect): the database is closed.

    const { contents, sessions } = yield* Effect.gen(function*() {
      const sessions = yield* SessionStore.SessionStore
      return { contents: yield* sessions.read(written.id), sessions: yield* sessions.list }
    }).pipe(Effect.provide(store))

    console.log(`${filename}: ${sessions.length} session(s); ${written.id} has ${contents.events.length} events`)
    console.log(`invariant violations: ${JSON.stringify(Invariant.check(contents.events))}`)
    console.log(TranscriptText.render(Transcript.fromEvents(contents.events)))
    return { written, contents, sessions }
  })

if (process.argv[1] === fileURLToPath(import.meta.url)) NodeRuntime.runMain(main(process.argv[2] ?? ".agent-loop/sessions.db"))
