/**
 * Compaction cadence (§17, "When": compact when the estimate passes `contextWindow −
 * reserve`): with a small window, the guard the loop keeps after a compaction (no new pressure
 * compaction until the estimate passes what the last one left plus max(1,024, reserve / 2)
 * tokens) must not let a request pass the window itself. Fixed: the guard is only kept after a
 * compaction that could not get below the line, and never above the window.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Agent from "../src/Agent.js"
import * as Compaction from "../src/Compaction.js"
import * as History from "../src/History.js"
import * as Invariant from "../src/Invariant.js"
import * as ScriptedModel from "../src/ScriptedModel.js"
import { advance, layer } from "./utils/agent.js"

/** A 200-character prompt: 54 tokens by `Compaction.estimateTokens`; "ok" is 5. */
const big = (c: string) => c.repeat(200)

describe("Compaction cadence", () => {
  it.scoped("with a 200-token window no request passes 200 tokens: the policy compacts again before it would", () => {
    // Turn 3: 118 + 54 = 172 > 150: compacts to 80 (the checkpoint, b×200, ok), then c×200 and
    // ok join: 139. Turn 4: 139 + 54 = 193 > 150, turn 5: 193 + 5 + 54 = 252 > 200.
    const model = ScriptedModel.make([(r) => (r.purpose === "compaction" ? { text: "SUMMARY" } : { text: "ok" })], {
      loop: true
    })
    return Effect.gen(function*() {
      const agent = yield* Agent.make()
      for (const c of ["a", "b", "c", "d", "e"]) {
        yield* agent.followup(big(c))
        yield* advance(10)
      }
      const sent = model.requests.filter((r) => r.purpose !== "compaction").map((r) => {
        let tokens = 0
        for (const m of r.messages) tokens += Compaction.estimateTokens(m)
        return tokens
      })
      expect(sent.length).toBe(5)
      expect(sent.filter((t) => t > 200)).toEqual([])
      expect(model.requests.filter((r) => r.purpose === "compaction").length).toBeGreaterThanOrEqual(2)
      // The second compaction cut the surface the first one left (its seqs kept by the agent):
      // the live history is still the log's.
      expect(yield* agent.history).toEqual(History.derive(agent.log.events()))
      expect(Invariant.check(agent.log.events())).toEqual([])
    }).pipe(
      Effect.provide(layer(model)),
      Effect.provide(Compaction.layer({ contextWindow: 200, reserve: 50, keepRecentTokens: 60 }))
    )
  })
})
