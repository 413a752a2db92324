// `append` (ours only): events/s of the JSONL store with N concurrent appenders on one session
// log, against a raw baseline measured in the same run: the very bytes our store wrote (read
// back from its file) written again with plain `write(2)`, batched N lines per write, each write
// followed by `fdatasync` (fsync "batch"), or without it (fsync "none"). The baseline is the
// ideal group commit; ours batches through its flusher fiber.
import { NodeFileSystem } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { closeSync, fdatasyncSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SessionStore } from "../dist/index.js"

const TEXT = "the quick brown fox jumps over the lazy dog; ".repeat(3)

/** Ours: `appenders` fibers append `total / appenders` single-event drafts each. Returns events/s and the file. */
const runOurs = async ({ appenders, total, fsync, directory }) => {
  const per = Math.floor(total / appenders)
  const events = per * appenders
  const program = Effect.gen(function*() {
    const store = yield* SessionStore.SessionStore
    const log = yield* store.create()
    const appender = (a) =>
      Effect.gen(function*() {
        for (let i = 0; i < per; i++) {
          yield* log.append([{ type: "bench/append", data: { appender: a, i, text: TEXT } }])
        }
      })
    const start = performance.now()
    yield* Effect.forEach(Array.from({ length: appenders }, (_, a) => a), appender, { concurrency: "unbounded", discard: true })
    const elapsed = performance.now() - start
    if (log.events().length !== events) throw new Error(`ours append: ${log.events().length} events in the log, expected ${events}`)
    return { perSecond: events / (elapsed / 1000), path: log.path }
  })
  return await Effect.runPromise(Effect.scoped(program).pipe(
    Effect.provide(SessionStore.layerJsonl({ directory, fsync }).pipe(Layer.provide(NodeFileSystem.layer)))
  ))
}

/** Raw: the same event lines, `appenders` lines per write, fdatasync after each write when `fsync === "batch"`. */
const runRaw = ({ lines, appenders, fsync, directory }) => {
  const path = join(directory, "raw.jsonl")
  const batches = []
  for (let i = 0; i < lines.length; i += appenders) batches.push(Buffer.from(lines.slice(i, i + appenders).join("")))
  const fd = openSync(path, "a")
  const start = performance.now()
  for (const b of batches) {
    let off = 0
    while (off < b.length) off += writeSync(fd, b, off)
    if (fsync === "batch") fdatasyncSync(fd)
  }
  const elapsed = performance.now() - start
  closeSync(fd)
  return { perSecond: lines.length / (elapsed / 1000) }
}

/** One run: ours, then the raw baseline on the bytes ours wrote. */
export const runAppend = async ({ appenders, total, fsync }) => {
  const directory = mkdtempSync(join(tmpdir(), "bench-append-"))
  try {
    const ours = await runOurs({ appenders, total, fsync, directory })
    const text = readFileSync(ours.path, "utf8")
    const lines = text.split("\n").slice(1, -1).map((l) => l + "\n") // minus the header, minus the final ""
    const expected = Math.floor(total / appenders) * appenders
    if (lines.length !== expected) throw new Error(`append: ${lines.length} lines in our file, expected ${expected}`)
    const raw = runRaw({ lines, appenders, fsync, directory })
    const files = readdirSync(directory)
    if (files.length !== 2) throw new Error(`append: unexpected files ${files.join(", ")}`)
    return { ours: ours.perSecond, peer: raw.perSecond }
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}
