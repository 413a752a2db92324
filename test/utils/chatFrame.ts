/**
 * The chat view's frame for a `ChatModel` as the terminal would show it: `App` rendered by Ink in
 * debug mode (each frame written whole) on fake streams of 100 × 30, its first whole frame,
 * colours removed. Shared by the chat's view tests.
 */
import { Effect } from "effect"
import { render } from "ink"
import { PassThrough } from "node:stream"
import { createElement } from "react"
import { App } from "../../src/cli/chat/App.js"
import type { ChatModel } from "../../src/cli/chat/ChatModel.js"
import { IN_PROCESS_MS } from "./bounds.js"
import { pollUntil } from "./poll.js"

const until = pollUntil("chat frame")

/** The first whole frame of the view of `model` (colours removed). */
export const frameOf = (model: ChatModel) =>
  Effect.promise(async () => {
    const stdout = Object.assign(new PassThrough(), { columns: 100, rows: 30 })
    // The first whole frame: one that has the footer line (a write of Ink's can also be a cursor
    // sequence alone; the footer names /quit, or Esc while a question is open). Ink writes it
    // within `render`; the frames after it differ only in the spinner and the elapsed time. It is
    // awaited all the same, bounded by `IN_PROCESS_MS`.
    let frame = ""
    stdout.on("data", (chunk) => {
      if (frame === "" && /\/quit|Esc: cancel/.test(String(chunk))) frame = String(chunk)
    })
    const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => stdin, ref: () => stdin, unref: () => stdin })
    const controller = { submit: () => {}, cancel: () => {}, answer: () => {}, quit: () => {}, sessionIds: () => [] }
    const ink = render(createElement(App, { model, controller }), {
      stdout: stdout as unknown as NodeJS.WriteStream,
      stdin: stdin as unknown as NodeJS.ReadStream,
      debug: true,
      exitOnCtrlC: false,
      patchConsole: false
    })
    await until("Ink's first whole frame", () => frame !== "", IN_PROCESS_MS)
    ink.unmount()
    // eslint-disable-next-line no-control-regex -- the colours Ink writes
    return frame.replace(/\u001b\[[0-9;]*m/g, "")
  })
