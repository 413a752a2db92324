/**
 * Compaction (§17): a session whose history outgrows a (deliberately tiny) context window.
 * The agent is made under `Compaction.layer({contextWindow, reserve, keepRecentTokens})`; before
 * the request that would pass `contextWindow − reserve` the loop summarizes the older turns with
 * the agent's own model (here the offline model, whose summary quotes the earlier prompts) and
 * replaces them, in the log, by one checkpoint message. The prompt that turn claimed enters after
 * the compaction; the inbox is never touched. Then `agent.compact()` compacts on demand, and a
 * resumed agent reads the compacted history back from the JSONL log.
 *
 * Run: npm run example -- compaction [DIRECTORY]
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { Agent, Compaction, Message, Model, Offline, SessionStore } from "effect-agent-loop"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

/** A window of 220 tokens, 60 of them kept free: a few prompts fill it. */
export const policy = Compaction.layer({ contextWindow: 220, reserve: 60, keepRecentTokens: 100 })

const prompts = [
  "Plan a three-day trip to Lisbon: day one is the old town, Alfama and the castle.",
  "Day two should be Belém: the tower, the monastery and the custard tarts, by tram.",
  "Day three is a train to Sintra for the palaces; be back in Lisbon for dinner.",
  "Now list the bookings I need to make, in order of urgency."
]

/** One line per compaction event: what ran, why, and the estimate before and after. */
export const describe = (e: { readonly type: string; readonly data: unknown }): string | undefined => {
  const d = e.data as any
  switch (e.type) {
    case "compaction/start":
      return `compaction/start turn=${d.turn} reason=${d.reason} tokens=${d.tokens}`
    case "compaction/summary":
      return `compaction/summary shadowed=${d.shadowedSeqs.length} events (${d.shadowedTokenCount} tokens): ${d.summary}`
    case "compaction/end":
      return `compaction/end ${d.outcome}${d.tokens !== undefined ? ` tokens=${d.tokens}` : ""}`
    default:
      return undefined
  }
}

/** Four prompts (one compaction by pressure), a manual compaction, a resume. Returns what it printed. */
export const main = (directory: string) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const print = (line: string) => {
      lines.push(line)
      console.log(line)
    }
    const sessionId = yield* Effect.scoped(Effect.gen(function*() {
      const agent = yield* Agent.make()
      for (const prompt of prompts) {
        yield* agent.followup(prompt)
        yield* agent.awaitIdle
      }
      const report = yield* agent.compact({ instructions: "keep the day numbers" })
      print(`agent.compact: ${report.outcome} ${report.tokensBefore} → ${report.tokensAfter} tokens`)
      for (const e of agent.log.events()) {
        const line = describe(e)
        if (line !== undefined) print(`${String(e.seq).padStart(2)} ${line}`)
      }
      return agent.id
    }))
    // A new agent of the same session (another process would do the same): the history is the compacted one.
    const history = yield* Effect.scoped(Effect.flatMap(Agent.resume(sessionId), (agent) => agent.history))
    const first = Message.textOf(history[0]!.content)
    const summary = first.startsWith(Compaction.CHECKPOINT_PREFIX) ? first.slice(Compaction.CHECKPOINT_PREFIX.length) : first
    print(`resumed: ${history.length} messages; the first is the checkpoint: ${JSON.stringify(summary.slice(0, 60))}…`)
    return lines
  }).pipe(
    Effect.provide(Layer.mergeAll(SessionStore.layerJsonl({ directory }), Model.layer(Offline.make()), policy))
  )

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  NodeRuntime.runMain(main(process.argv[2] ?? Path.join(Os.tmpdir(), "effect-agent-loop-compaction")))
}
