/**
 * Reading a `text/event-stream` response body for the provider adapters: bytes are decoded as
 * UTF-8 (a character split across reads is kept whole), cut into events by @effect/experimental's
 * SSE parser (a `\r\n` split across reads stays one line break), and each event is handed to
 * the adapter's assembly state, which appends the parts to push. Parts are pushed into the sink
 * after each read, so deltas reach the loop as they arrive. Comment lines (`: ping`) and blank
 * lines are no progress for the idle timeout: a server that only keeps the connection alive
 * times out (§23). Shared by `OpenAICompat` and `Anthropic`.
 */
import * as Sse from "@effect/experimental/Sse"
import type { HttpClientResponse } from "@effect/platform"
import { Effect } from "effect"
import type { ModelError, ModelPart, ModelSink } from "../../Model.js"
import { badResponse, type BodyLimits, readBody } from "./http.js"

/**
 * The adapter's assembly state of one streamed response.
 *
 * - `onEvent(name, data, out)`: one SSE event (`name` is `"message"` when the event has no
 *   `event:` line); appends parts to `out`, or sets `failure`.
 * - `done`: set when the stream's own end marker arrived: `finish` is called at once, and the
 *   rest of the body is read without parsing (`readBody`'s `"done"`), so the connection is reused.
 * - `failure`: set by the state (or by the reader for an oversized event); pushing stops and
 *   the response fails with it, after the parts already in `out`.
 * - `finish(out)`: the body ended (or `done`): appends the closing parts, or sets `failure`.
 */
export interface EventStreamState {
  readonly done: boolean
  failure: ModelError | undefined
  onEvent(name: string, data: string, out: Array<ModelPart>): void
  finish(out: Array<ModelPart>): void
}

/**
 * Reads an SSE body into `state` and pushes the parts it produces, within `limits` (`readBody`):
 * a piece that holds anything but comments and blank lines must arrive within `idleTimeoutMs`
 * of the last one (Effect `Clock`), else `TIMEOUT`; past `maxBytes`, `RESPONSE_TOO_LARGE`; a
 * broken connection is `NETWORK`. At EOF an unterminated last event (no blank line before the
 * end) is dispatched, not dropped.
 */
export const streamEvents = (
  response: HttpClientResponse.HttpClientResponse,
  state: EventStreamState,
  sink: ModelSink,
  limits: BodyLimits
): Effect.Effect<void, ModelError> =>
  Effect.suspend(() => {
    const decoder = new TextDecoder()
    let pending: Array<ModelPart> = []
    let cr = false // a chunk ended with "\r": hold it so "\r\n" split across chunks stays one break
    let events = 0
    let head = "" // the body's first characters, to show when it is not an event stream at all
    const progress = progressScanner()
    const parser = Sse.makeParser((event) => {
      if (event._tag !== "Event") return
      events++
      if (state.done || state.failure !== undefined) return
      state.onEvent(event.event, event.data, pending)
    })
    const feed = (text: string) => {
      // Only until the first event: `head` is a slice, which keeps the whole read it was cut
      // from alive (~30 KB per session in concurrent-sessions, §24).
      if (events === 0 && head.length < 200) head += text.slice(0, 200 - head.length)
      if (cr) text = "\r" + text
      cr = text.endsWith("\r")
      if (cr) text = text.slice(0, -1)
      if (text === "") return
      // One line at a time (cut after each "\n"; a "\r\n" stays whole): the parser rescans
      // what it was fed from its start for every line in it, so a piece of many lines costs
      // quadratic time (a 60,000-character read of 300-character events cost ~400 µs per event,
      // §24; in 1,000-character pieces its scan was still 15% of the CPU of 1,000 streams
      // at once), and reads that large are what many streams at once deliver.
      let start = 0
      while (start < text.length) {
        const cut = text.indexOf("\n", start)
        const end = cut < 0 ? text.length : cut + 1
        const error = parser.feed(start === 0 && end === text.length ? text : text.slice(start, end))
        if (error !== undefined && state.failure === undefined) {
          state.failure = badResponse(`SSE event too large: ${error.message}`)
        }
        start = end
      }
      if (events > 0) head = ""
    }
    const drain = (): Effect.Effect<void, ModelError> => {
      const parts = pending
      pending = []
      const push = pushAll(sink, parts)
      return state.failure === undefined ? push : Effect.zipRight(push, Effect.fail(state.failure))
    }
    let closed = false
    // The response is complete (its end marker, or the body's end): the closing parts (tool
    // calls, usage, finish) are appended once, at the marker, so that none waits for the rest of
    // the body (`readBody` reads it only so that the connection can be reused).
    const close = () => {
      if (closed) return
      closed = true
      if (state.failure === undefined && events === 0 && head.trim() !== "") {
        // Not one SSE event in a non-empty body (an HTML login page, a JSON error sent as an
        // event stream): a bad response, shown, not an incomplete stream to retry.
        state.failure = badResponse(`the response is not an event stream: ${JSON.stringify(head.trim().slice(0, 160))}`)
      }
      if (state.failure === undefined) state.finish(pending)
    }
    const read = readBody(
      response,
      limits,
      "reading the event stream",
      "the next piece of the event stream",
      (bytes) => {
        const text = decoder.decode(bytes, { stream: true })
        const moved = progress(text)
        feed(text)
        if (!state.done) return Effect.as(drain(), moved ? "progress" : "idle")
        close()
        return Effect.as(drain(), "done")
      }
    )
    const finish = Effect.suspend(() => {
      if (!closed && !state.done && state.failure === undefined) {
        // EOF: dispatch an unterminated last event instead of dropping it.
        feed(decoder.decode() + (cr ? "\r" : "") + "\n\n")
        cr = false
      }
      close()
      return drain()
    })
    return Effect.zipRight(read, finish)
  })

/**
 * Whether each next piece of an event stream holds anything but comment lines (`:` first) and
 * blank lines; the line state carries over from piece to piece.
 */
const progressScanner = () => {
  let lineStart = true
  let comment = false
  return (text: string): boolean => {
    let moved = false
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i)
      if (c === 10 || c === 13) {
        lineStart = true
        comment = false
      } else if (lineStart) {
        lineStart = false
        comment = c === 58 // ":"
        if (!comment) moved = true
      } else if (!comment) moved = true
    }
    return moved
  }
}

/** Pushes parts in order (no `Effect.forEach` for the common 0 or 1 part). */
export const pushAll = (sink: ModelSink, parts: ReadonlyArray<ModelPart>): Effect.Effect<void> => {
  switch (parts.length) {
    case 0:
      return Effect.void
    case 1:
      return sink.part(parts[0]!)
    default:
      return Effect.forEach(parts, sink.part, { discard: true })
  }
}
