/**
 * The built-in tools of the offline model (DESIGN.md §14): `wait {seconds}` sleeps on the Effect
 * `Clock`, `clock {}` tells the time, `read_file {path}` reads a text file confined to the
 * working directory (no absolute paths outside it, no `..` escape, no symlink escape; at most
 * 64 KiB are returned).
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, Effect, Schema } from "effect"
import * as Tool from "./Tool.js"

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

const MAX_READ = 64 * 1024

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
    const inside = (p: string) => {
      const rel = path.relative(base, p)
      return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel))
    }
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
          const rel = path.relative(realBase, real)
          if (rel.startsWith("..") || path.isAbsolute(rel)) {
            return yield* new Tool.ToolError({ message: `${requested} resolves outside the working directory` })
          }
          const info = yield* fs.stat(real)
          if (info.type === "Directory") return yield* new Tool.ToolError({ message: `${requested} is a directory` })
          const bytes = yield* fs.readFile(real)
          const text = new TextDecoder().decode(bytes.subarray(0, MAX_READ))
          return { content: bytes.length > MAX_READ ? `${text}\n[truncated at 64 KiB of ${bytes.length} bytes]` : text }
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
