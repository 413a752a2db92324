/**
 * `CliExit`, a command's requested exit (its own module, so that the lazily loaded command
 * modules, `cluster.ts`, share it with `main.ts` without importing the CLI's entry).
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"

/**
 * A command's requested exit: the process exits with `code` after printing `message` (if any)
 * to stderr.
 *
 * @since 0.1.0
 * @category errors
 */
export class CliExit extends Schema.TaggedError<CliExit>()("CliExit", {
  code: Schema.Number,
  message: Schema.String
}) {}

/** Fails with a `CliExit`. */
export const exit = (code: number, message = ""): Effect.Effect<never, CliExit> => Effect.fail(new CliExit({ code, message }))
