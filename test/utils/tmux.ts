/**
 * Drives a real terminal program inside tmux: a private tmux server (its own socket and
 * config, so nothing of the user's tmux is touched) with one detached session of a fixed size,
 * keys sent with `send-keys`, the screen read with `capture-pane -p` (scrollback included), and
 * polling with a deadline for a screen condition. Real time is unavoidable here (a real
 * program in a real pty): every wait is a short poll bounded by a deadline, and a timeout
 * fails with the screen as it was.
 */
import { Effect, type Scope } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { note, TMUX_WAIT_MS } from "./bounds.js"

/** True when a `tmux` binary runs here. */
export const available = (): boolean => {
  try {
    execFileSync("tmux", ["-V"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

/** A screen condition: text to find, a pattern, or a predicate on the whole screen. */
export type Condition = string | RegExp | ((screen: string) => boolean)

/** A program running in a tmux pane. */
export interface Pane {
  /** Types `text` literally (`send-keys -l`). */
  readonly type: (text: string) => Effect.Effect<void>
  /** Sends tmux key names (`Enter`, `M-Enter`, `Escape`, `C-c`, …). */
  readonly keys: (...keys: ReadonlyArray<string>) => Effect.Effect<void>
  /** The screen with its scrollback, wrapped lines joined, trailing blank lines dropped. */
  readonly screen: Effect.Effect<string>
  /** Polls the screen every 50 ms until `condition` holds; fails after `timeoutMs` (default `TMUX_WAIT_MS`) with the screen. */
  readonly waitFor: (condition: Condition, timeoutMs?: number) => Effect.Effect<string>
  /**
   * Polls until the program has exited; its exit status (fails after `timeoutMs`, default `TMUX_WAIT_MS`).
   * The shell that runs the program prints `[exited N]` after it: tmux itself sometimes misses
   * the exit of a pane's process (it reaps it on SIGCHLD, and tmux 3.3 may not see that signal),
   * so the status is read from the screen rather than from `#{pane_dead_status}`.
   */
  readonly waitForExit: (timeoutMs?: number) => Effect.Effect<number>
  /**
   * The pid of the program (the child of the pane's shell), polled until it has started (fails
   * after `timeoutMs`, default `TMUX_WAIT_MS`).
   */
  readonly pid: (timeoutMs?: number) => Effect.Effect<number>
  /** Resizes the window (and its pane) to `width` × `height`: the program gets SIGWINCH. */
  readonly resize: (width: number, height: number) => Effect.Effect<void>
  /** Kills the tmux server: the terminal is gone (its pty closed) as when a terminal window is closed. */
  readonly kill: Effect.Effect<void>
}

const quote = (arg: string): string => /^[\w./:=@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`

const holds = (condition: Condition, screen: string): boolean =>
  typeof condition === "string"
    ? screen.includes(condition)
    : condition instanceof RegExp
    ? condition.test(screen)
    : condition(screen)

/**
 * Starts `command` (argv) in a new detached tmux session of `width` × `height` (default
 * 120 × 40) in `cwd`, with `unsetEnv` removed from its environment, run by `/bin/sh` which
 * prints `[exited N]` when it ends. The pane stays after the program exits (`remain-on-exit`),
 * so its last screen can be read. The tmux server is killed when the scope closes.
 */
export const start = (options: {
  readonly command: ReadonlyArray<string>
  readonly cwd: string
  readonly width?: number | undefined
  readonly height?: number | undefined
  readonly unsetEnv?: ReadonlyArray<string> | undefined
}): Effect.Effect<Pane, never, Scope.Scope> =>
  Effect.gen(function*() {
    // The program's pid once known: a program that outlives its terminal is killed at the end.
    let programPid: number | undefined
    let programCmdline = ""
    const cmdline = (pid: number): string => {
      try {
        return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
      } catch {
        return ""
      }
    }
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "agent-loop-tmux-"))),
      (dir) =>
        Effect.sync(() => {
          try {
            execFileSync("tmux", ["-S", Path.join(dir, "sock"), "kill-server"], { stdio: "ignore" })
          } catch {
            // already gone
          }
          // (The same process, not another that got its pid since.)
          if (programPid !== undefined && programCmdline !== "" && cmdline(programPid) === programCmdline) {
            try {
              process.kill(programPid, "SIGKILL")
            } catch {
              // exited
            }
          }
          Fs.rmSync(dir, { recursive: true, force: true })
        })
    )
    const socket = Path.join(dir, "sock")
    const config = Path.join(dir, "tmux.conf")
    Fs.writeFileSync(
      config,
      "set -g remain-on-exit on\nset -g history-limit 10000\nset -g status off\nset -g default-shell /bin/sh\n"
    )
    const tmux = (args: ReadonlyArray<string>): string =>
      execFileSync("tmux", ["-S", socket, "-f", config, ...args], { encoding: "utf8" })
    const unset = (options.unsetEnv ?? []).flatMap((name) => ["-u", name])
    const shell = `${["env", ...unset, ...options.command].map(quote).join(" ")}; echo "[exited $?]"`
    yield* Effect.sync(() =>
      tmux([
        "new-session",
        "-d",
        "-s",
        "test",
        "-x",
        String(options.width ?? 120),
        "-y",
        String(options.height ?? 40),
        "-c",
        options.cwd,
        shell
      ])
    )
    const target = "test:0.0"
    const screen = Effect.sync(() => tmux(["capture-pane", "-p", "-J", "-S", "-", "-t", target]).replace(/\s+$/, ""))
    const poll = <A>(what: string, timeoutMs: number, probe: Effect.Effect<A | undefined>): Effect.Effect<A> =>
      Effect.gen(function*() {
        const deadline = Date.now() + timeoutMs
        while (true) {
          const found = yield* probe
          if (found !== undefined) {
            note(`tmux ${what}`, Date.now() - deadline + timeoutMs)
            return found
          }
          if (Date.now() > deadline) {
            return yield* Effect.die(
              new Error(`tmux: timed out after ${timeoutMs} ms waiting for ${what}; the screen:\n${yield* screen}`)
            )
          }
          yield* Effect.sleep("50 millis")
        }
      })
    const pane: Pane = {
      type: (text) => Effect.sync(() => void tmux(["send-keys", "-t", target, "-l", text])),
      keys: (...keys) => Effect.sync(() => void tmux(["send-keys", "-t", target, ...keys])),
      screen,
      waitFor: (condition, timeoutMs = TMUX_WAIT_MS) =>
        poll(String(condition), timeoutMs, Effect.map(screen, (s) => holds(condition, s) ? s : undefined)),
      waitForExit: (timeoutMs = TMUX_WAIT_MS) =>
        poll(
          "the program to exit",
          timeoutMs,
          Effect.map(screen, (s) => {
            const exited = /^\[exited (\d+)\]$/m.exec(s)
            return exited === null ? undefined : Number(exited[1])
          })
        ),
      pid: (timeoutMs = TMUX_WAIT_MS) =>
        poll(
          "the program to start",
          timeoutMs,
          Effect.sync(() => {
            const shell = tmux(["display-message", "-p", "-t", target, "#{pane_pid}"]).trim()
            try {
              const children = Fs.readFileSync(`/proc/${shell}/task/${shell}/children`, "utf8").trim().split(/\s+/)
              if (children[0] === undefined || children[0] === "") return undefined
              programPid = Number(children[0])
              programCmdline = cmdline(programPid)
              return programPid
            } catch {
              return undefined
            }
          })
        ),
      resize: (width, height) =>
        Effect.sync(() => void tmux(["resize-window", "-t", "test", "-x", String(width), "-y", String(height)])),
      kill: Effect.sync(() => {
        try {
          tmux(["kill-server"])
        } catch {
          // already gone
        }
      })
    }
    return pane
  })
