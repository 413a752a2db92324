/**
 * The model-visible history: the messages a model request carries, derived from the session log
 * alone (§6.2, §12). It is the `data` of every `user/message`, the `data.message` of
 * every `assistant/message` (an interrupted prefix included) and the `data.message` of every
 * `tool/result`, in log order, with DSH `surfaceOp` replacements honoured.
 *
 * DSH surface operations (envelope field `surfaceOp`, §3.1). DSH keeps a "surface":
 * the ordered list of the seqs of the events the model sees. The values found in the DSH v0
 * fixtures, and what each does here:
 * - `"append"`: the event's message goes at the end of the surface (every ordinary message).
 * - `{op:"replace", start, end}` (also spelled `startSeq`/`endSeq`): `start` and `end` are seqs of
 *   events currently on the surface; the span from `start` through `end`, in surface order
 *   (not a numeric seq range: a replacement node has a higher seq than its neighbours), is
 *   removed and the event's message takes its place. Compaction checkpoints and rewrites of one
 *   message (e.g. an image replaced by its transcription) use it. A replace that names seqs not
 *   on the surface (or `end` before `start`) is applied as an append, so nothing is lost.
 * - absent: in our logs every message event is appended; in a DSH v0 log an event without
 *   `surfaceOp` is log-only and not model-visible (as in DSH's own `deriveMessages`).
 * An event of another type that carries a `surfaceOp` (e.g. a DSH `system/message`) occupies a
 * surface position (so replace spans stay right) but yields no `Message`.
 *
 * Compaction (§17): in our logs a checkpoint (a `user/message` whose
 * envelope carries a `replace`) logged inside a compaction bracket (`compaction/start` …
 * `compaction/end`) is applied when its bracket ends with `outcome: "compacted"`, and not at all
 * when it ends otherwise or never ends (a crash: repair closes it `interrupted`), so that a
 * compaction cut short leaves the history as it was. In a DSH v0 log compaction events are
 * foreign and a checkpoint applies where it stands, as in DSH: DSH's compaction appends its
 * checkpoint (`compaction/summary`, then the `user/message` with the replace) only once the
 * summary is written, right before a `compaction/end` without `error`; one that fails or is
 * aborted logs `compaction/end {error}` and no checkpoint; and DSH's surface applies a replace
 * when it is appended, whatever follows (a log cut between the checkpoint and the end keeps it).
 *
 * For a DSH child session the inherited prefix (`seedLength`) is part of the history: it is the
 * seed conversation. Only the inbox replay skips it.
 *
 * `derive` is one pass (O(1) per appended message; a replace costs O(surface)). The running
 * agent keeps its history incrementally itself (it appends the messages it logs; only a
 * compaction replaces part of it, and then the agent takes the new history as a whole), so
 * nothing on its per-step path is O(history).
 *
 * @since 0.1.0
 */
import { isDsh } from "./internal/logOptions.js"
import type { Message } from "./Message.js"
import type { SessionEvent } from "./SessionEvent.js"
import type { LogOptions } from "./SessionLog.js"

/**
 * Options of `derive`: the log's `header` (or `dsh: true`) selects DSH v0 surface rules.
 *
 * @since 0.1.0
 * @category models
 */
export type DeriveOptions = Pick<LogOptions, "header" | "dsh">

/** The message an event contributes, if it is one of the three model-visible types. */
const messageOf = (event: SessionEvent): Message | undefined => {
  switch (event.type) {
    case "user/message":
      return event.data as Message
    case "assistant/message":
    case "tool/result":
      return (event.data as { readonly message: Message }).message
    default:
      return undefined
  }
}

const isSurfaceType = (type: string): boolean => type === "user/message" || type === "assistant/message" || type === "tool/result"

/** What one event did to the history, as splice coordinates on `messages`. */
interface HistoryChange {
  readonly start: number
  readonly deleteCount: number
  readonly message: Message | undefined
}

class Builder {
  readonly messages: Array<Message> = []
  /** Checkpoints of the open compaction bracket (our logs), applied when it ends `compacted`. */
  private bracket: Array<SessionEvent> | undefined = undefined
  /** Seq of each surface node, in surface order. */
  private readonly nodes: Array<number> = []
  /** Seqs of surface nodes that carry no `Message` (foreign types with a surfaceOp). */
  private readonly bare = new Set<number>()

  constructor(private readonly dsh: boolean) {}

  push = (event: SessionEvent): HistoryChange | undefined => {
    const op = (event as { readonly surfaceOp?: unknown }).surfaceOp
    if (!this.dsh) {
      if (event.type === "compaction/start") {
        this.bracket = []
        return undefined
      }
      if (event.type === "compaction/end") {
        const held = this.bracket
        this.bracket = undefined
        if (held !== undefined && (event.data as { readonly outcome?: unknown }).outcome === "compacted") {
          for (const e of held) this.apply(e, e.surfaceOp)
        }
        return undefined
      }
      if (this.bracket !== undefined && op !== undefined && op !== "append") {
        this.bracket.push(event)
        return undefined
      }
    }
    return this.apply(event, op)
  }

  /** The surface entries: each model-visible message with the seq of its event. */
  entries(): Array<SurfaceEntry> {
    const out: Array<SurfaceEntry> = []
    let m = 0
    for (const seq of this.nodes) {
      if (this.bare.has(seq)) continue
      out.push({ seq, message: this.messages[m++]! })
    }
    return out
  }

  private apply(event: SessionEvent, op: unknown): HistoryChange | undefined {
    if (op === undefined) {
      if (this.dsh || !isSurfaceType(event.type)) return undefined
      return this.append(event.seq, messageOf(event))
    }
    if (op === "append") return this.append(event.seq, messageOf(event))
    if (typeof op === "object" && op !== null && (op as { readonly op?: unknown }).op === "replace") {
      const o = op as { readonly start?: unknown; readonly end?: unknown; readonly startSeq?: unknown; readonly endSeq?: unknown }
      return this.replace(event.seq, messageOf(event), o.start ?? o.startSeq, o.end ?? o.endSeq)
    }
    // An unknown surface operation: keep the message visible.
    return this.append(event.seq, messageOf(event))
  }

  private append(seq: number, message: Message | undefined): HistoryChange {
    this.nodes.push(seq)
    if (message === undefined) {
      this.bare.add(seq)
      return { start: this.messages.length, deleteCount: 0, message }
    }
    this.messages.push(message)
    return { start: this.messages.length - 1, deleteCount: 0, message }
  }

  private replace(seq: number, message: Message | undefined, start: unknown, end: unknown): HistoryChange {
    const nodes = this.nodes
    const from = typeof start === "number" ? nodes.lastIndexOf(start) : -1
    const to = typeof end === "number" ? nodes.lastIndexOf(end) : -1
    if (from < 0 || to < from) return this.append(seq, message)
    // message index of node `from`, and how many messages the span holds
    let msgStart = from
    let deleteCount = to - from + 1
    if (this.bare.size > 0) {
      msgStart = 0
      for (let i = 0; i < from; i++) if (!this.bare.has(nodes[i]!)) msgStart++
      deleteCount = 0
      for (let i = from; i <= to; i++) {
        if (this.bare.has(nodes[i]!)) this.bare.delete(nodes[i]!)
        else deleteCount++
      }
    }
    nodes.splice(from, to - from + 1, seq)
    if (message === undefined) {
      this.bare.add(seq)
      this.messages.splice(msgStart, deleteCount)
    } else {
      this.messages.splice(msgStart, deleteCount, message)
    }
    return { start: msgStart, deleteCount, message }
  }
}

/**
 * The model-visible messages of a log (§12): `user/message` data,
 * `assistant/message` `data.message`, `tool/result` `data.message`, in log order, with DSH
 * `surfaceOp` replacements honoured (see the module comment). One pass.
 *
 * @since 0.1.0
 * @category projections
 */
export const derive = (events: ReadonlyArray<SessionEvent>, options?: DeriveOptions): Array<Message> => {
  const builder = new Builder(isDsh(options))
  for (let i = 0; i < events.length; i++) builder.push(events[i]!)
  return builder.messages
}

/**
 * One model-visible message and the `seq` of the event that put it on the surface: the
 * coordinates a `surfaceOp` replace names (`start`/`end`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SurfaceEntry {
  readonly seq: number
  readonly message: Message
}

/**
 * The surface of a log (§17): what `derive` returns, each message with the seq of its
 * event, in order. A compaction policy cuts the history with these seqs. One pass.
 *
 * @since 0.1.0
 * @category projections
 */
export const surface = (events: ReadonlyArray<SessionEvent>, options?: DeriveOptions): Array<SurfaceEntry> => {
  const builder = new Builder(isDsh(options))
  for (let i = 0; i < events.length; i++) builder.push(events[i]!)
  return builder.entries()
}
