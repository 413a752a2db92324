/**
 * The built-in tools of the offline model (§14): `wait {seconds}` sleeps on the Effect
 * `Clock`, `clock {}` tells the time, `read_file {path}` reads a text file confined to the
 * working directory (no absolute paths outside it, no `..` escape, no symlink escape; only
 * regular files, never opened otherwise; at most the first 64 KiB are returned, with a note of the
 * number of lines not shown).
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, Effect, Schema } from "effect"
import * as NodeFs from "node:fs"
import { messageOf } from "../internal/cause.js"
import { countHiddenLines, leaves, MAX_READ, withTruncation } from "../internal/readFile.js"
import { fileKind } from "../internal/store/common.js"
import * as Tool from "../Tool.js"

/**
 * `wait {seconds}`: sleeps (0 ≤ seconds ≤ 3600), then says so.
 *
 * @since 0.1.0
 * @category constructors
 */
export const wait: Tool.Tool<{ readonly seconds: number }> = Tool.make({
  name: "wait",
  description: "Wait for the given number of seconds, then return.",
  parameters: Schema.Struct({
    seconds: Schema.Number.pipe(Schema.between(0, 3600)).annotations({ description: "seconds to wait" })
  }),
  execute: ({ seconds }) =>
    Effect.as(Effect.sleep(Math.round(seconds * 1000)), { content: `waited ${seconds} second${seconds === 1 ? "" : "s"}` })
})

/**
 * `clock {}`: the current time (Effect `Clock`) as an ISO-8601 string.
 *
 * @since 0.1.0
 * @category constructors
 */
export const clock: Tool.Tool<{}> = Tool.make({
  name: "clock",
  description: "Tell the current date and time (UTC, ISO 8601).",
  parameters: Schema.Struct({}),
  execute: () => Effect.map(Clock.currentTimeMillis, (ms) => ({ content: new Date(ms).toISOString() }))
})

/**
 * `read_file {path}` confined to `root` (default: the process's working directory).
 *
 * @since 0.1.0
 * @category constructors
 */
export const readFile = (
  root?: string
): Effect.Effect<Tool.Tool<{ readonly path: string }>, never, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const base = path.resolve(root ?? process.cwd())
    const inside = (p: string) => !leaves(path, path.relative(base, p))
    return Tool.make({
      name: "read_file",
      description: "Read a UTF-8 text file under the working directory (at most 64 KiB).",
      parameters: Schema.Struct({ path: Schema.String.annotations({ description: "path relative to the working directory" }) }),
      execute: ({ path: requested }) =>
        Effect.gen(function*() {
          const target = path.resolve(base, requested)
          if (!inside(target)) return yield* new Tool.ToolError({ message: `${requested} is outside the working directory` })
          const real = yield* fs.realPath(target)
          const realBase = yield* fs.realPath(base)
          if (leaves(path, path.relative(realBase, real))) {
            return yield* new Tool.ToolError({ message: `${requested} resolves outside the working directory` })
          }
          // Stat before opening: opening a fifo for reading blocks until a writer comes, and a
          // device such as /dev/zero never ends.
          const info = yield* fs.stat(real)
          if (info.type === "Directory") return yield* new Tool.ToolError({ message: `${requested} is a directory` })
          if (info.type !== "File") {
            return yield* new Tool.ToolError({
              message: `${requested} is not a regular file (${fileKind(info.type)})`
            })
          }
          // Only what is returned is read: the first 64 KiB. Opened without blocking and checked
          // again on the descriptor: a fifo swapped in after the stat must not hang the turn.
          const read = yield* Effect.scoped(Effect.flatMap(
            Effect.acquireRelease(
              Effect.tryPromise({
                try: () => NodeFs.promises.open(real, NodeFs.constants.O_RDONLY | NodeFs.constants.O_NONBLOCK),
                catch: (cause) => new Tool.ToolError({ message: `cannot read ${requested}: ${messageOf(cause)}` })
              }),
              (handle) => Effect.promise(() => handle.close())
            ),
            (handle) =>
              Effect.tryPromise({
                try: async () => {
                  if (!(await handle.stat()).isFile()) return undefined
                  const buffer = new Uint8Array(MAX_READ)
                  let filled = 0
                  while (filled < MAX_READ) {
                    const { bytesRead } = await handle.read(buffer, filled, MAX_READ - filled, filled)
                    if (bytesRead === 0) break
                    filled += bytesRead
                  }
                  const hidden = filled < MAX_READ ? undefined : await countHiddenLines(
                    async (chunk, position) => (await handle.read(chunk, 0, chunk.length, position)).bytesRead,
                    Number(info.size),
                    buffer[MAX_READ - 1]!
                  )
                  return { bytes: buffer.subarray(0, filled), hidden }
                },
                catch: (cause) => new Tool.ToolError({ message: `cannot read ${requested}: ${messageOf(cause)}` })
              })
          ))
          if (read === undefined) {
            return yield* new Tool.ToolError({ message: `${requested} is not a regular file (it changed while it was read)` })
          }
          const size = Math.max(Number(info.size), read.bytes.length)
          const text = new TextDecoder().decode(read.bytes)
          return { content: withTruncation(text, size, read.hidden ?? { lines: 0, exact: true }) }
        }).pipe(
          Effect.catchIf(
            (e): e is Exclude<typeof e, Tool.ToolError> => !(e instanceof Tool.ToolError),
            (e) =>
              Effect.fail(
                new Tool.ToolError({
                  message: `cannot read ${requested}: ${
                    e._tag === "SystemError" ? (e.reason === "NotFound" ? "no such file" : e.reason) : e.message
                  }`
                })
              )
          )
        )
    })
  })

/**
 * All three built-in tools.
 *
 * @since 0.1.0
 * @category constructors
 */
export const all = (root?: string): Effect.Effect<ReadonlyArray<Tool.Tool<any>>, never, FileSystem.FileSystem | Path.Path> =>
  Effect.map(readFile(root), (read) => [wait, clock, read])
