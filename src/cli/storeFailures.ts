/**
 * How the commands that run turns (`run`, `resume --continue-pending`) notice that their session
 * log could not be written (§23): the store they run on records the first append that
 * failed (a full disk, a read-only file system, a log deleted or cut under the session), so that
 * the command exits 2 with that one line, whatever the agent did after the failure; and the
 * agent's own error logs, which would print a stack trace into the transcript, become one line
 * on stderr each, those about a failed append left to that exit line.
 *
 * @since 0.1.0
 */
import { Cause, Console, Context, DefaultServices, Effect, FiberRef, FiberRefs, HashSet, Layer, Logger } from "effect"
import type { SessionLog, SessionWriteError } from "../SessionLog.js"
import { SessionFenced, SessionStoreError } from "../SessionLog.js"
import { SessionStore } from "../SessionStore.js"

/**
 * A store layer watched for failed appends: `layer` serves the logs of `store` with their
 * `append` and `appendSync` recording the first `SessionStoreError`; `failure()` returns it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const watchAppends = <E, R>(
  store: Layer.Layer<SessionStore, E, R>
): {
  readonly layer: Layer.Layer<SessionStore, E, R>
  readonly failure: () => SessionWriteError | undefined
} => {
  let failure: SessionWriteError | undefined
  const record = (error: SessionWriteError) => {
    if (failure === undefined) failure = error
  }
  const watch = (log: SessionLog): SessionLog => {
    const appendSync = log.appendSync
    return {
      ...log,
      append: (drafts) => Effect.tapError(log.append(drafts), (error) => Effect.sync(() => record(error))),
      ...(appendSync === undefined ? {} : {
        appendSync: (drafts, time) => {
          const result = appendSync(drafts, time)
          if (result instanceof SessionStoreError) record(result)
          return result
        }
      })
    }
  }
  const layer = Layer.effect(
    SessionStore,
    Effect.map(SessionStore, (inner) =>
      SessionStore.of({
        ...inner,
        create: (options) => Effect.map(inner.create(options), watch),
        open: (id) => Effect.map(inner.open(id), watch)
      }))
  ).pipe(Layer.provide(store))
  return { layer, failure: () => failure }
}

/** Whether `cause` holds a `SessionStoreError` (a failed append the command reports itself). */
const isStoreFailure = (cause: Cause.Cause<unknown>): boolean =>
  Cause.failures(cause).pipe((failures) =>
    [...failures].some((e) => e instanceof SessionStoreError || e instanceof SessionFenced)
  )

/**
 * A log entry as one text: its message, then its cause's message when it has one (never a stack
 * trace). For the one-line logger here and the chat's notices.
 *
 * @since 0.1.0
 */
export const entryText = (entry: { readonly message: unknown; readonly cause: Cause.Cause<unknown> }): string => {
  const text = (Array.isArray(entry.message) ? entry.message : [entry.message]).map(String).join(" ")
  const squashed = Cause.isEmpty(entry.cause) ? undefined : Cause.squash(entry.cause)
  return squashed === undefined ? text : `${text}: ${squashed instanceof Error ? squashed.message : String(squashed)}`
}

/** One line on stderr per log entry (see `oneLineLogger`). */
const oneLine = Logger.make((entry) => {
  if (isStoreFailure(entry.cause)) return
  const console = Context.get(FiberRefs.getOrDefault(entry.context, DefaultServices.currentServices), Console.Console)
  console.unsafe.error(`agent-loop: ${entryText(entry)}`.replace(/\s*\n\s*/g, " "))
})

/**
 * The logger of the commands that run turns, in place of every other (the binary's `runMain`
 * installs the pretty logger, which prints causes with their stacks): each log entry is one line
 * on stderr (its message and, when it has one, its cause's message; never a stack trace), except
 * entries whose cause is a `SessionStoreError` (the command ends with that error's line, exit 2).
 *
 * @since 0.1.0
 * @category layers
 */
export const oneLineLogger: Layer.Layer<never> = Layer.scopedDiscard(
  Effect.locallyScopedWith(FiberRef.currentLoggers, () => HashSet.make(oneLine))
)
