// A large session written through the real loop, for `bench/inspect-open.js`: the library's
// `Agent` (the built `dist/`) on a JSONL store (fsync "none") in a given directory, driven by a
// scripted model that reads each request, with tools that run at once. Rounds are repeated until
// the log holds at least `minEvents` events; each round is one of:
// - a task (most rounds): a turn of three steps: three parallel tool calls (`read_file` twice and
//   `grep`), one more `grep`, then a text answer. While the first calls run, some rounds steer
//   (`grep`: a steer that joins the next step), inject (`read_file`: a note that enters the next
//   step) or queue a followup (`grep`: a prompt that starts its own one-step turn after the task);
//   some `grep` calls fail (an error result);
// - a cancel (every 50th round): the model calls `wait`, which runs until cancelled; meanwhile a
//   followup and a steer are queued, then `agent.cancel()` drops both (`canceled`) and aborts the
//   turn;
// - a rejection (every 50th round, offset): the pre-step rejects the prompt (`blocked: …`), which
//   is dropped (`rejected`) before any model request.
import { NodeFileSystem } from "@effect/platform-node"
import { Deferred, Effect, Layer, Schema } from "effect"
import { Agent, IdGenerator, Model, PreStep, ScriptedModel, SessionStore, Tool } from "../dist/index.js"

const textOf = (m) => (m?.content?.[0]?.type === "text" ? m.content[0].text : "")
const PROMPT = /^(task|later|slow|reject) (\d+)/
const isPrompt = (m) => m.role === "user" && PROMPT.test(textOf(m))

/** What the session holds once written (the driver's own counts; `inspect-open.js` checks the log). */
const newCounts = () => ({
  rounds: 0,
  tasks: 0,
  cancels: 0,
  rejections: 0,
  followups: 0,
  steers: 0,
  injects: 0,
  toolCalls: 0,
  toolErrors: 0,
  modelCalls: 0
})

/** The scripted model: a function of each request (its messages), the turn's prompt deciding the step. */
const makeModel = (counts) =>
  ScriptedModel.make([(request) => {
    counts.modelCalls++
    const msgs = request.messages
    let i = msgs.length - 1
    while (i >= 0 && !isPrompt(msgs[i])) i--
    if (i < 0) throw new Error(`inspect-session: request ${counts.modelCalls} has no prompt`)
    const [, kind, round] = PROMPT.exec(textOf(msgs[i]))
    let steps = 0
    for (let j = i + 1; j < msgs.length; j++) if (msgs[j].role === "assistant") steps++
    const usage = { inputTokens: 800 + 40 * (msgs.length % 500), outputTokens: 60 + (counts.modelCalls % 90) }
    const call = (name, args, k) => ({ id: `call_${counts.modelCalls}_${k}`, name, arguments: args })
    if (kind === "slow") return { toolCalls: [call("wait", { seconds: 600 }, 0)], usage }
    if (kind === "task" && steps === 0) {
      return {
        reasoning: `Round ${round}: read the two files, grep for the symbol.`,
        toolCalls: [
          call("read_file", { path: `src/module${round % 37}.ts`, round: Number(round) }, 0),
          call("grep", { pattern: `symbol${round % 11}`, round: Number(round) }, 1),
          call("read_file", { path: `test/module${round % 37}.test.ts`, round: Number(round) }, 2)
        ],
        usage
      }
    }
    if (kind === "task" && steps === 1) {
      return { toolCalls: [call("grep", { pattern: `caller${round % 13}`, round: -1 }, 0)], usage }
    }
    return {
      text: `Done with ${kind} ${round}: the module reads its input, checks it and writes the result; ` +
        `nothing else needs to change. ${"The tests cover the edge cases. ".repeat(1 + (round % 4))}`,
      usage
    }
  }], { loop: true, record: false, provider: "bench", model: "instant" })

const fileText = (path) =>
  Array.from({ length: 24 }, (_, i) => `${String(i + 1).padStart(3)}  export const line${i} = read("${path}", ${i})`).join("\n")

/** The tools: `read_file` and `grep` answer at once (and steer, inject, queue or fail by round); `wait` never ends. */
const makeTools = (counts, waiting) => {
  const Read = Schema.Struct({ path: Schema.String, round: Schema.Number })
  const Grep = Schema.Struct({ pattern: Schema.String, round: Schema.Number })
  const Wait = Schema.Struct({ seconds: Schema.Number })
  return [
    Tool.make({
      name: "read_file",
      description: "Reads a file of the project.",
      parameters: Read,
      execute: ({ path, round }, ctx) =>
        Effect.gen(function*() {
          counts.toolCalls++
          if (round % 4 === 0 && path.startsWith("src/")) {
            counts.injects++
            const note = yield* Effect.orDie(ctx.makeMessage(`note ${round}: ${path} changed on disk while it was read`))
            yield* Effect.orDie(ctx.agent.inject(note))
          }
          return { content: fileText(path) }
        })
    }),
    Tool.make({
      name: "grep",
      description: "Searches the project for a pattern.",
      parameters: Grep,
      execute: ({ pattern, round }, ctx) =>
        Effect.gen(function*() {
          counts.toolCalls++
          if (round >= 0 && round % 3 === 0) {
            counts.steers++
            yield* Effect.orDie(ctx.agent.steer(`steer ${round}: look at the tests of ${pattern} too`))
          }
          if (round >= 0 && round % 5 === 0) {
            counts.followups++
            yield* Effect.orDie(ctx.agent.followup(`later ${round}: write a short summary of ${pattern}`))
          }
          if (round >= 0 && round % 11 === 0) {
            counts.toolErrors++
            return yield* Effect.fail(new Tool.ToolError({ message: `grep: ${pattern}: too many matches` }))
          }
          return { content: `src/a.ts:12: ${pattern}(x)\nsrc/b.ts:40: return ${pattern}\ntest/a.test.ts:7: ${pattern}` }
        })
    }),
    Tool.make({
      name: "wait",
      description: "Waits for a number of seconds.",
      parameters: Wait,
      execute: () => {
        counts.toolCalls++
        return Effect.zipRight(Deferred.succeed(waiting.current, undefined), Effect.never)
      }
    })
  ]
}

/** The pre-step listener: rejects a batch with a `reject N` prompt, enters the others. */
const gate = (payload, next) =>
  payload.messages.some((m) => textOf(m).startsWith("reject "))
    ? Effect.succeed(PreStep.Decision.reject("blocked: no tools today"))
    : next()

/**
 * Writes one session into the JSONL store at `directory` until its log holds at least
 * `minEvents` events; resolves with `{ id, path, events, ms, counts }` (`counts`: the driver's
 * rounds, deliveries and calls).
 */
export const writeSession = ({ directory, minEvents, progress = () => {} }) => {
  const counts = newCounts()
  const waiting = { current: undefined }
  const model = makeModel(counts)
  const tools = makeTools(counts, waiting)
  const layer = Layer.mergeAll(
    SessionStore.layerJsonl({ directory, fsync: "none" }).pipe(Layer.provide(NodeFileSystem.layer)),
    IdGenerator.layer,
    Model.layer(model),
    PreStep.layer([gate])
  )
  const started = performance.now()
  return Effect.runPromise(
    Effect.scoped(Effect.gen(function*() {
      const agent = yield* Agent.make({
        tools,
        instructions: "You are a coding agent working on a small TypeScript project.",
        cwd: "/work/project"
      })
      let round = 0
      while (agent.log.events().length < minEvents) {
        round++
        counts.rounds++
        if (round % 50 === 0) {
          counts.cancels++
          waiting.current = yield* Deferred.make()
          yield* agent.followup(`slow ${round}: run the whole test suite`)
          yield* Deferred.await(waiting.current)
          counts.followups++
          yield* agent.followup(`task ${round}: never runs (the cancel drops it)`)
          counts.steers++
          yield* agent.steer(`steer ${round}: never enters (the cancel drops it)`)
          yield* agent.cancel({ kind: "user" })
        } else if (round % 50 === 25) {
          counts.rejections++
          yield* agent.followup(`reject ${round}: delete the repository`)
        } else {
          counts.tasks++
          yield* agent.followup(`task ${round}: fix the bug in module ${round % 37} and run its tests`)
        }
        yield* agent.awaitIdle
        if (round % 500 === 0) progress(agent.log.events().length)
      }
      return { id: agent.id, path: agent.log.path, events: agent.log.events().length }
    })).pipe(Effect.provide(layer))
  ).then((r) => ({ ...r, ms: performance.now() - started, counts }))
}
