/**
 * A full disk during a turn, then space again (issue 13; DESIGN.md §10, §12), on the JSONL
 * store in both fsync modes, its `write(2)` failing with `ENOSPC` through the failpoint seam:
 * a turn whose closing events can still be written ends `{kind:"error", code:"RUN_FAILED"}`;
 * one that cannot be closed stops the agent (nothing more is written: a later `turn/start` would
 * leave the log invalid for good), and resuming the session repairs the turn and goes on.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel, Scope } from "effect"
import * as Agent from "../src/Agent.js"
import * as Delivery from "../src/Delivery.js"
import * as IdGenerator from "../src/IdGenerator.js"
import { failpointIo, Failpoints, withFailpoints } from "../src/internal/store/failpoints.js"
import { makeJsonlWith, nodeIo } from "../src/internal/store/jsonl.js"
import * as Invariant from "../src/Invariant.js"
import * as Model from "../src/Model.js"
import { SessionStoreError } from "../src/SessionLog.js"
import * as SessionStore from "../src/SessionStore.js"
import { brief } from "./utils/agent.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const scratch = scratchDirs("disk-full-")

/** A JSONL store in `directory` whose appends from `at` on fail `ENOSPC` `times` times. */
const fullDisk = (directory: string, fsync: "none" | "batch", at: number, times: number) =>
  Effect.gen(function*() {
    const fp = new Failpoints({ at, times, fault: { _tag: "IoError", code: "ENOSPC", syscall: "write", bytes: 5 } })
    const store = yield* makeJsonlWith({ directory, fsync }, failpointIo(fp, nodeIo))
    return withFailpoints(store, fp, true)
  })

const services = Layer.mergeAll(
  Model.layer(Model.scripted([{ text: "one" }, { text: "two" }, { text: "three" }], { loop: true })),
  IdGenerator.layerSeeded(7),
  Logger.minimumLogLevel(LogLevel.None)
)

describe("a full disk during a turn", () => {
  for (const fsync of ["none", "batch"] as const) {
    it.scoped(`fsync ${fsync}: space again before the turn is closed: the turn ends RUN_FAILED and the session goes on`, () =>
      Effect.gen(function*() {
        const directory = scratch()
        // Append 1 is the followup, 2 the turn's opening, 3 the response (fails once).
        const store = yield* fullDisk(directory, fsync, 3, 1)
        const agent = yield* Agent.make({ sessionId: "s" }).pipe(Effect.provideService(SessionStore.SessionStore, store))
        const first = yield* agent.followup("hello")
        expect(yield* first.outcome).toEqual(Delivery.entered(1, 1))
        yield* agent.awaitIdle
        const second = yield* agent.followup("again")
        expect(yield* second.outcome).toEqual(Delivery.entered(2, 1))
        yield* agent.awaitIdle
        const events = agent.log.events()
        expect(Invariant.check(events)).toEqual([])
        expect(brief(events).filter((e) => e.startsWith("turn/end"))).toEqual([
          "turn/end 1 error:RUN_FAILED",
          "turn/end 2 completed"
        ])
      }).pipe(Effect.provide(services)))

    it.scoped(`fsync ${fsync}: a turn that cannot be closed stops the agent; resume repairs it and goes on`, () =>
      Effect.gen(function*() {
        const directory = scratch()
        const scope = yield* Scope.make()
        // The response (append 3) and the closing of the failed turn (4) fail; then the disk
        // has space again.
        const store = yield* Scope.extend(fullDisk(directory, fsync, 3, 2), scope)
        const agent = yield* Scope.extend(
          Agent.make({ sessionId: "s" }).pipe(Effect.provideService(SessionStore.SessionStore, store)),
          scope
        )
        const first = yield* agent.followup("hello")
        // It entered step 1 (append 2) before the disk filled.
        expect(yield* first.outcome).toEqual(Delivery.entered(1, 1))
        yield* agent.awaitIdle
        // Space again: the stopped agent writes nothing; every delivery fails naming the cause.
        const refused = yield* Effect.flip(agent.followup("again"))
        expect(refused).toBeInstanceOf(SessionStoreError)
        expect(refused.message).toMatch(/^session "s" stopped: turn 1 could not be closed \(.*ENOSPC.*\); resume the session/)
        expect(yield* Effect.flip(agent.cancel())).toEqual(refused)
        const stoppedAt = agent.log.events()
        expect(Invariant.check(stoppedAt)).toEqual([])
        // Turn 1 is left open for the repair: nothing was written after its step began.
        expect(brief(stoppedAt).filter((e) => e.startsWith("turn/"))).toEqual(["turn/start 1"])
        yield* Scope.close(scope, { _tag: "Success", value: undefined } as never)
        // A restart: a new store resumes the session, repairs the open turn and goes on.
        const events = yield* Effect.gen(function*() {
          const resumed = yield* Agent.resume("s")
          const next = yield* resumed.followup("again")
          expect(yield* next.outcome).toEqual(Delivery.entered(2, 1))
          yield* resumed.awaitIdle
          return resumed.log.events()
        }).pipe(Effect.provide(SessionStore.layerJsonl({ directory, fsync })))
        expect(Invariant.check(events)).toEqual([])
        expect(brief(events).filter((e) => e.startsWith("turn/end"))).toEqual([
          "turn/end 1 interrupted",
          "turn/end 2 completed"
        ])
      }).pipe(Effect.provide(services)))
  }
})
