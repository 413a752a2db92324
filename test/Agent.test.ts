import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Agent from "../src/Agent.js"
import * as Model from "../src/Model.js"
import { brief, layer } from "./utils/agent.js"

describe("Agent", () => {
  it.scoped("a followup runs one turn with one step", () =>
    Effect.gen(function*() {
      const model = Model.scripted([{ text: "hello there" }])
      const agent = yield* Agent.make()
      const d = yield* agent.followup("hi")
      const outcome = yield* d.outcome
      yield* agent.awaitIdle
      expect(outcome).toEqual({ _tag: "Entered", turn: 1, step: 1 })
      expect(brief(agent.log.events())).toEqual([
        "splice next-turn 0 +[hi]",
        "turn/start 1",
        "splice next-turn 0 -1",
        "step/start 1.1",
        "user hi",
        "request/header",
        "assistant hello there",
        "step/end 1.1",
        "turn/end 1 completed"
      ])
    }).pipe(Effect.provide(layer(Model.scripted([{ text: "hello there" }])))))
})
