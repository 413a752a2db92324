/**
 * Sub-agent sessions in the cluster (§21 rule 9, §27): whether a session is a child that its
 * parent's call drives now (then its own entity must not open it: the parent's process holds its
 * writer), and the logs of the children a parent's log names (where a decision the parent's
 * entity took on a child's question is found again).
 */
import { Effect } from "effect"
import { HeaderTextId, type WithHeaderText } from "../internal/store/common.js"
import type { SessionEvent } from "../SessionEvent.js"
import type { SessionStoreError } from "../SessionLog.js"
import type { SessionStoreService } from "../SessionStore.js"

/** The parent's call that drives a child session. */
export interface DrivingCall {
  readonly parentSession: string
  readonly callId: string
}

/** A `tool/result` event's call id. */
const resultCallId = (event: SessionEvent): string | undefined => {
  const block = (event.data as { readonly message?: { readonly content?: ReadonlyArray<{ readonly toolCallId?: unknown }> } })
    .message?.content?.[0]
  return typeof block?.toolCallId === "string" ? block.toolCallId : undefined
}

/**
 * The call of the parent's `events` that started child `childId` and has not ended: its last
 * `subagent/start` naming the child, with neither a `subagent/end` naming the child nor the
 * call's `tool/result` after it (a crash repair answers the call without an end). Undefined when
 * the log never started the child (a DSH parent logs no start) or the call ended.
 */
export const openCallOf = (events: ReadonlyArray<SessionEvent>, childId: string): string | undefined => {
  let open: string | undefined
  for (const event of events) {
    if (event.type === "subagent/start") {
      const data = event.data as { readonly id?: unknown; readonly callId?: unknown } | null
      if (data?.id === childId && typeof data.callId === "string") open = data.callId
    } else if (open !== undefined) {
      if (event.type === "subagent/end") {
        if ((event.data as { readonly id?: unknown } | null)?.id === childId) open = undefined
      } else if (event.type === "tool/result" && resultCallId(event) === open) open = undefined
    }
  }
  return open
}

/** The header's `parentSession` of session `id` (undefined for a session that is no child, or does not exist). */
const parentOf = (store: SessionStoreService, id: string): Effect.Effect<string | undefined, SessionStoreError> => {
  const headerText = (store as WithHeaderText)[HeaderTextId]
  const fromHeader = (header: unknown): string | undefined => {
    const parent = (header as { readonly parentSession?: unknown } | null)?.parentSession
    return typeof parent === "string" ? parent : undefined
  }
  if (headerText !== undefined) {
    return Effect.map(headerText(id), (text) => {
      if (text === undefined) return undefined
      try {
        return fromHeader(JSON.parse(text))
      } catch {
        // An unreadable header: the session's open reports it.
        return undefined
      }
    })
  }
  return store.read(id).pipe(
    Effect.map((contents) => fromHeader(contents.header)),
    // A session that does not exist or cannot be read is no driven child: the open says why.
    Effect.catchTags({ SessionNotFound: () => Effect.succeed(undefined), SessionLogError: () => Effect.succeed(undefined) })
  )
}

/**
 * The parent's call that drives session `id` now (§21 rule 9): `id`'s header names a parent
 * (`parentSession`) whose stored log holds an open call that started `id` (`openCallOf`).
 * Undefined for any other session (no parent, a parent log that does not exist or cannot be
 * read, a call that ended). A store failure is the caller's to retry. Costs one header read
 * (with the SQL store: one `SELECT header`) for a session that is no child.
 */
export const drivingCall = (
  store: SessionStoreService,
  id: string
): Effect.Effect<DrivingCall | undefined, SessionStoreError> =>
  Effect.flatMap(
    parentOf(store, id),
    (parentSession) =>
      parentSession === undefined ? Effect.succeed(undefined) : store.read(parentSession).pipe(
        Effect.map((contents) => {
          const callId = openCallOf(contents.events, id)
          return callId === undefined ? undefined : { parentSession, callId }
        }),
        Effect.catchTags({ SessionNotFound: () => Effect.succeed(undefined), SessionLogError: () => Effect.succeed(undefined) })
      )
  )

/**
 * The stored events of the children `events` started (`subagent/start` ids, in order, each
 * once), read with `read`; a child that cannot be read is left out. For finding a question of a
 * child (§27 rule 7) in the logs.
 */
export const childrenEvents = (
  store: SessionStoreService,
  events: ReadonlyArray<SessionEvent>
): Effect.Effect<ReadonlyArray<SessionEvent>> => {
  const ids = new Set<string>()
  for (const event of events) {
    const id = event.type === "subagent/start" ? (event.data as { readonly id?: unknown } | null)?.id : undefined
    if (typeof id === "string") ids.add(id)
  }
  return Effect.map(
    Effect.forEach([...ids], (id) => Effect.option(Effect.map(store.read(id), (c) => c.events)), { concurrency: 4 }),
    (logs) => logs.flatMap((log) => log._tag === "Some" ? log.value : [])
  )
}
