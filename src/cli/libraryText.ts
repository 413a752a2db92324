/**
 * What @effect/cli prints itself (`--help`, `--version`, `--completions`, its parse errors such
 * as `Received unknown argument: 'x'`), fitted to this CLI (§14) on its way to the terminal.
 * @effect/cli 0.77 has no setting for any of these (`CliConfig` has none; `HelpDoc.toAnsiText`
 * always styles), so its text is rewritten at the Console it prints through, and only there:
 * - colour (ANSI SGR sequences) only on a terminal without `NO_COLOR` (https://no-color.org),
 *   decided for stdout and stderr apart; plain text in a pipe, a file or with `NO_COLOR=1`;
 * - usage lines start with the program's name: `$ agent-loop run --prompt text …` (a command's
 *   own `--help` printed `$ run --prompt text …`: the parent's name is added only when the
 *   parent, not the command, parses `--help`);
 * - `'abc' is not an integer` (its message reads `is not a integer`);
 * - an error is one line on stderr (its text ends with a newline, to which the Console adds one);
 * - in a `--help` text, a line wider than 80 columns (a command's usage, a flag's description)
 *   is wrapped.
 * The commands' handlers print through the Console that was there before (`handlerConsole`),
 * so none of this touches a transcript or a log line.
 *
 * @since 0.1.0
 */
import type { Console } from "effect"

/** An ANSI SGR sequence (colour, bold), the only escapes @effect/cli's text holds. */
// eslint-disable-next-line no-control-regex -- ESC is what an SGR sequence starts with
const SGR = /\u001b\[[0-9;]*m/g

/**
 * Whether text written to `stream` may be coloured: the stream is a terminal and `NO_COLOR` is
 * unset or empty.
 *
 * @since 0.1.0
 */
export const colourFor = (
  stream: { readonly isTTY?: boolean | undefined },
  env: Readonly<Record<string, string | undefined>>
): boolean => stream.isTTY === true && (env.NO_COLOR === undefined || env.NO_COLOR === "")

/**
 * One text of @effect/cli's fitted as above: `name` is the program's (`agent-loop`), `colour`
 * whether its stream may be coloured, `error` whether it goes to stderr (then its trailing
 * newlines are cut: the Console ends the line).
 *
 * @since 0.1.0
 */
export const libraryText = (
  text: string,
  options: { readonly name: string; readonly colour: boolean; readonly error: boolean }
): string => {
  let out = options.colour ? text : text.replace(SGR, "")
  // A usage line is a paragraph of its own that starts with "$ " (after its style, if any).
  out = out.replace(
    new RegExp(`^((?:\\u001b\\[[0-9;]*m)*)\\$ (?!${options.name}(?: |\\u001b|$))`, "gm"),
    `$1$$ ${options.name} `
  )
  out = out.replace(/' is not a integer$/gm, "' is not an integer")
  if (options.error) return out.replace(/\n+$/, "")
  // Only a help text (a `USAGE` heading) is wrapped: never a completion script.
  return HELP.test(out) ? out.split("\n").map(wrapLine).join("\n") : out
}

/** The `USAGE` heading of a `--help` text, styled or not. */
// eslint-disable-next-line no-control-regex -- ESC is what an SGR sequence starts with
const HELP = /^(?:\u001b\[[0-9;]*m)*USAGE(?:\u001b\[[0-9;]*m)*$/m

/** The width `--help` is wrapped to. */
const WIDTH = 80

/**
 * A line of a command's `--help` wider than `WIDTH` columns, wrapped at spaces: a usage line
 * (`$ agent-loop run --prompt text [--instructions text] …`) between its flags (never inside
 * `[…]` or `<…>`), its further lines indented 4; any other line under its own indent. A styled
 * line (with an SGR sequence) or a word wider than the width is left as it is.
 */
const wrapLine = (line: string): string => {
  if ([...line].length <= WIDTH || line.includes("\u001b")) return line
  const usage = line.startsWith("$ ")
  const indent = usage ? "" : /^ */.exec(line)![0]
  const next = usage ? "    " : indent
  const words: Array<string> = []
  let depth = 0
  let word = ""
  for (const c of line.slice(indent.length)) {
    if (c === " " && (depth === 0 || !usage)) {
      words.push(word)
      word = ""
      continue
    }
    if (c === "[" || c === "<") depth++
    if (c === "]" || c === ">") depth--
    word += c
  }
  words.push(word)
  const lines: Array<string> = []
  let current = indent
  for (const w of words) {
    if (current.trim() !== "" && [...current].length + 1 + [...w].length > WIDTH) {
      lines.push(current)
      current = next + w
    } else current = current.trim() === "" ? current + w : `${current} ${w}`
  }
  lines.push(current)
  return lines.join("\n")
}

/** The Console each `libraryConsole` was made over: the one the handlers print through. */
const bases = new WeakMap<Console.Console, Console.Console>()

/**
 * `base` with `libraryText` applied to every string printed through `log` and `info` (stdout:
 * `stdout` says whether it may be coloured) and `error` and `warn` (stderr).
 *
 * @since 0.1.0
 */
export const libraryConsole = (
  base: Console.Console,
  options: { readonly name: string; readonly stdout: boolean; readonly stderr: boolean }
): Console.Console => {
  const fit = (colour: boolean, error: boolean) => (args: ReadonlyArray<unknown>): Array<unknown> =>
    args.map((arg) => (typeof arg === "string" ? libraryText(arg, { name: options.name, colour, error }) : arg))
  const out = fit(options.stdout, false)
  const err = fit(options.stderr, true)
  const unsafe = base.unsafe
  const console: Console.Console = {
    ...base,
    log: (...args) => base.log(...out(args)),
    info: (...args) => base.info(...out(args)),
    error: (...args) => base.error(...err(args)),
    warn: (...args) => base.warn(...err(args)),
    unsafe: {
      ...unsafe,
      log: (...args) => unsafe.log(...out(args)),
      info: (...args) => unsafe.info(...out(args)),
      error: (...args) => unsafe.error(...err(args)),
      warn: (...args) => unsafe.warn(...err(args))
    }
  }
  bases.set(console, base)
  return console
}

/**
 * The Console a command's handler prints through: the one under `console` if it is a
 * `libraryConsole`, else `console` itself.
 *
 * @since 0.1.0
 */
export const handlerConsole = (console: Console.Console): Console.Console => bases.get(console) ?? console
