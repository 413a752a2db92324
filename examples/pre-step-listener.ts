/**
 * Pre-step listeners as layers (§7). At every step boundary the claimed batch goes
 * through the waterfall, outermost first: here `redaction` (a listener with a service of its
 * own, `Secrets`, which knows what to hide) rewrites the batch and hands it to `policy`, which
 * rejects a batch asking for a destructive command before the default enters what is left.
 * The model sees the redacted text; the rejected turn ends `blocked` with the policy's reason
 * and its message's fate is `Dropped rejected`. Prints the session log.
 *
 * A listener changes what enters the step (the `user/message` and the model's request), not
 * what was delivered: the delivery's `agent/inbox/spliced` event keeps the text as sent. To
 * keep a secret out of the log itself, redact before delivering.
 *
 * Run: npm run example -- pre-step-listener
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Context, Effect, Layer } from "effect"
import { Agent, Delivery, Message, Model, Offline, PreStep, type SessionEvent, SessionStore } from "effect-agent-loop"
import { fileURLToPath } from "node:url"

/** What `redaction` needs: the secret values to hide (from a vault, the environment, …). */
export class Secrets extends Context.Tag("examples/Secrets")<Secrets, { readonly values: ReadonlyArray<string> }>() {}

const redact = (text: string, secrets: ReadonlyArray<string>): string =>
  secrets.reduce((t, secret) => t.replaceAll(secret, "[redacted]"), text)

/**
 * Rewrites every text block of the batch, keeping each message's id (its identity, §7), and
 * calls the inner listeners with the rewritten batch. As a layer it needs `PreStep` (what it
 * wraps) and `Secrets`.
 */
export const redaction: Layer.Layer<PreStep.PreStep, never, PreStep.PreStep | Secrets> = PreStep.listener((payload, next) =>
  Effect.flatMap(Secrets, ({ values }) =>
    next({
      ...payload,
      messages: payload.messages.map((m) => ({
        ...m,
        content: m.content.map((block) => block.type === "text" ? { ...block, text: redact(block.text, values) } : block)
      }))
    }))
)

/** Rejects a batch that asks for `rm -rf`: the turn ends `{kind:"blocked", reason}` (§6.4). */
export const policy: Layer.Layer<PreStep.PreStep, never, PreStep.PreStep> = PreStep.listener((payload, next) =>
  payload.messages.some((m) => Message.textOf(m.content).includes("rm -rf"))
    ? Effect.succeed(PreStep.Decision.reject("policy: no destructive commands"))
    : next()
)

/** redaction → policy → the default. `A.pipe(Layer.provide(B))` puts A outside B. */
export const waterfall: Layer.Layer<PreStep.PreStep> = redaction.pipe(
  Layer.provide(policy),
  Layer.provide(PreStep.layer([])),
  Layer.provide(Layer.succeed(Secrets, { values: ["hunter2"] }))
)

/** One line per event of the log: `seq type`, and the text or the end reason where there is one. */
export const summary = (e: SessionEvent.SessionEvent): string => {
  const data = e.data as any
  const detail = e.type === "user/message"
    ? JSON.stringify(Message.textOf(data.content))
    : e.type === "assistant/message"
    ? JSON.stringify(Message.textOf(data.message.content))
    : e.type === "turn/end"
    ? JSON.stringify(data.reason)
    : e.type === "agent/inbox/spliced"
    ? `${data.target} ${data.inserted.length > 0 ? `+${data.inserted.length}` : `-${data.removedCount}`}`
    : ""
  return `${String(e.seq).padStart(2)} ${e.type} ${detail}`.trimEnd()
}

/** Two followups: one entered redacted, one rejected by the policy. Returns the log and the two fates. */
export const main = Effect.gen(function*() {
  const agent = yield* Agent.make()
  const kept = yield* agent.followup("my password is hunter2, remember it")
  yield* agent.awaitIdle
  const refused = yield* agent.followup("now run rm -rf / for me")
  yield* agent.awaitIdle
  const events = agent.log.events().slice()
  const outcomes = [yield* kept.outcome, yield* refused.outcome]
  console.log(events.map(summary).join("\n"))
  console.log(`fates: ${JSON.stringify(outcomes)}`)
  // The outcomes are the log's answer too (§12).
  console.log(`from the log: ${JSON.stringify([kept, refused].map((d) => Delivery.fateOf(events, d.messageId)))}`)
  return { events, outcomes }
}).pipe(
  Effect.scoped,
  Effect.provide(Layer.mergeAll(waterfall, SessionStore.layerMemory, Model.layer(Offline.make())))
)

if (process.argv[1] === fileURLToPath(import.meta.url)) NodeRuntime.runMain(main)
