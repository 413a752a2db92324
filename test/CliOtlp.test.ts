/**
 * `--otlp-endpoint URL` and the OpenTelemetry environment (§19, src/cli/otlp.ts): the
 * built CLI (dist/cli/bin.js) exports the traces of a run over OTLP/HTTP JSON to a loopback
 * receiver in this test, which checks the request and decodes the body. Bounded waits only: each
 * child process has a timeout, and the export is done before the process exits.
 */
import { describe, expect, it } from "@effect/vitest"
import {
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_TOOL_NAME
} from "@opentelemetry/semantic-conventions/incubating"
import { Effect, Either, Option } from "effect"
import { execFile, spawn as spawnChild } from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"
import { exportTimeout, otlpEndpoint } from "../src/cli/otlp.js"
import { CHILD_WAIT_MS, CLI_RUN_MS, note, RUNNER_READY_MS } from "./utils/bounds.js"
import { createDatabase, describePg, dropDatabase } from "./utils/pg.js"
import { closedPort } from "./utils/replayServer.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const bin = Path.resolve("dist/cli/bin.js")
const hooks = Path.resolve("test/utils/moduleHooks.mjs")
const tmpDir = scratchDirs("agent-loop-otlp-")

/** One request the receiver got. */
interface Received {
  readonly method: string
  readonly url: string
  readonly contentType: string | undefined
  readonly body: string
}

/**
 * A loopback OTLP/HTTP receiver on 127.0.0.1 (a free port): records every request and answers
 * `status` with an empty JSON object (a full success of the OTLP/HTTP protocol when 200).
 * `"trickle"`: answers 200 at once, then one byte of its body a second, never ending it (a slow
 * collector); `trickled` counts the bytes sent so. Closed, with its connections, with the
 * test's scope.
 */
const receiver = (status: number | "trickle" = 200) =>
  Effect.acquireRelease(
    Effect.async<{
      readonly port: number
      readonly requests: Array<Received>
      readonly server: Http.Server
      readonly trickled: { bytes: number }
    }>((resume) => {
      const requests: Array<Received> = []
      const trickled = { bytes: 0 }
      const server = Http.createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          requests.push({
            method: req.method ?? "",
            url: req.url ?? "",
            contentType: req.headers["content-type"],
            body: Buffer.concat(chunks).toString("utf8")
          })
          if (status !== "trickle") {
            res.writeHead(status, { "content-type": "application/json" })
            res.end("{}")
            return
          }
          res.writeHead(200, { "content-type": "application/json" })
          res.flushHeaders()
          // A byte a second, well within the 3 s export timeout: a deadline between bytes would never end.
          const timer = setInterval(() => {
            trickled.bytes++
            res.write(" ")
          }, 1000)
          res.on("close", () => clearInterval(timer))
        })
      })
      server.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({ port: (server.address() as AddressInfo).port, requests, server, trickled })))
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() =>
          resume(Effect.void)
        )
      })
  )

/** The environment of the child: ours without any OpenTelemetry variable, plus `env`. */
const childEnv = (env: Record<string, string>, hide?: string): NodeJS.ProcessEnv => {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("OTEL_")))
  return { ...base, ...env, ...(hide === undefined ? {} : { HIDE_PACKAGES: hide }) }
}

/** Runs the built CLI (with the module hooks when `hide` is given); bounded by `CLI_RUN_MS`. */
const spawn = (
  args: ReadonlyArray<string>,
  options: { readonly env?: Record<string, string>; readonly hide?: string } = {}
) =>
  Effect.async<{ code: number; stdout: string; stderr: string }>((resume) => {
    const argv = options.hide === undefined ? [bin, ...args] : ["--disable-warning=DEP0205", "--import", hooks, bin, ...args]
    execFile(
      process.execPath,
      argv,
      { cwd: tmpDir(), env: childEnv(options.env ?? {}, options.hide), timeout: CLI_RUN_MS },
      (error, stdout, stderr) => {
        resume(Effect.succeed({ code: error ? (error as any).code ?? 1 : 0, stdout, stderr }))
      }
    )
  })

/**
 * Runs the built CLI as `spawn` does, and times its exit from the last line of its work (the log
 * path it prints): `afterWork` in ms, -1 when it printed none. A process that hangs is killed
 * after `CLI_RUN_MS`: its code is then the signal.
 */
const spawnTimed = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.async<{ code: number | string; stdout: string; stderr: string; afterWork: number }>((resume) => {
    const child = spawnChild(process.execPath, [bin, ...args], {
      cwd: tmpDir(),
      env: childEnv(env),
      stdio: ["ignore", "pipe", "pipe"]
    })
    const out = { stdout: "", stderr: "", workDone: 0 }
    child.stdout.on("data", (d) => {
      out.stdout += d
      if (out.workDone === 0 && out.stdout.includes("session log: ")) out.workDone = Date.now()
    })
    child.stderr.on("data", (d) => (out.stderr += d))
    const kill = setTimeout(() => child.kill("SIGKILL"), CLI_RUN_MS)
    child.on("close", (code, signal) => {
      clearTimeout(kill)
      const afterWork = out.workDone === 0 ? -1 : Date.now() - out.workDone
      note(`CliOtlp: the exit after the work (${env["OTEL_EXPORTER_OTLP_TIMEOUT"] ?? "3000"} ms export timeout)`, afterWork)
      resume(Effect.succeed({ code: code ?? signal!, stdout: out.stdout, stderr: out.stderr, afterWork }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** A span of the OTLP JSON encoding, with its attributes decoded to plain values. */
interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  readonly kind: number
  /** Nanoseconds since the epoch. */
  readonly start: bigint
  readonly attributes: Record<string, unknown>
}

/** An OTLP `AnyValue` (JSON encoding) as a plain value. */
const valueOf = (value: Record<string, unknown>): unknown => {
  if ("stringValue" in value) return value.stringValue
  if ("boolValue" in value) return value.boolValue
  if ("intValue" in value) return Number(value.intValue)
  if ("doubleValue" in value) return value.doubleValue
  if ("arrayValue" in value) {
    return ((value.arrayValue as { values?: Array<Record<string, unknown>> }).values ?? []).map(valueOf)
  }
  return value
}

const attributesOf = (list: ReadonlyArray<{ key: string; value: Record<string, unknown> }> | undefined) =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]))

/** The resources and spans of every request body (an `ExportTraceServiceRequest` each). */
const decode = (requests: ReadonlyArray<Received>) => {
  const resources: Array<Record<string, unknown>> = []
  const spans: Array<Span> = []
  for (const request of requests) {
    const body = JSON.parse(request.body) as {
      resourceSpans: Array<{
        resource: { attributes: Array<{ key: string; value: Record<string, unknown> }> }
        scopeSpans: Array<{ spans: Array<Record<string, any>> }>
      }>
    }
    for (const rs of body.resourceSpans) {
      resources.push(attributesOf(rs.resource.attributes))
      for (const ss of rs.scopeSpans) {
        for (const s of ss.spans) {
          spans.push({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId === undefined || s.parentSpanId === "" ? undefined : s.parentSpanId,
            name: s.name,
            kind: s.kind,
            start: BigInt(s.startTimeUnixNano),
            attributes: attributesOf(s.attributes)
          })
        }
      }
    }
  }
  return { resources, spans }
}

/** OTLP span kinds (the protobuf enum). */
const INTERNAL = 1
const CLIENT = 3

/** The session id of `run`'s last line, `session log: DIR/<id>.jsonl`. */
const sessionIdOf = (stdout: string) => Path.basename(/session log: (\S+)/.exec(stdout)![1]!, ".jsonl")

/**
 * The offline model calls `clock` for "what time is it": one turn, two model requests (the call,
 * then the answer) and one tool call. The span tree of the `tracing` work (§19):
 * `invoke_agent agent-loop` the root, its children `chat offline-rules-1` (twice) and
 * `execute_tool clock`, all in one trace, the session id as `gen_ai.conversation.id`.
 */
const expectTurnTree = (spans: ReadonlyArray<Span>, sessionId: string) => {
  const turns = spans.filter((s) => s.name === "invoke_agent agent-loop")
  expect(turns.length).toBe(1)
  const turn = turns[0]!
  expect(turn.parentSpanId).toBeUndefined()
  expect(turn.kind).toBe(INTERNAL)
  expect(turn.attributes).toMatchObject({
    [ATTR_GEN_AI_OPERATION_NAME]: "invoke_agent",
    [ATTR_GEN_AI_AGENT_NAME]: "agent-loop",
    [ATTR_GEN_AI_CONVERSATION_ID]: sessionId,
    "agent_loop.turn": 1
  })
  const chats = spans.filter((s) => s.name === "chat offline-rules-1")
  expect(chats.map((s) => [s.kind, s.traceId, s.parentSpanId])).toEqual([
    [CLIENT, turn.traceId, turn.spanId],
    [CLIENT, turn.traceId, turn.spanId]
  ])
  expect(chats.map((s) => [s.attributes[ATTR_GEN_AI_OPERATION_NAME], s.attributes[ATTR_GEN_AI_REQUEST_MODEL]])).toEqual([
    ["chat", "offline-rules-1"],
    ["chat", "offline-rules-1"]
  ])
  const tools = spans.filter((s) => s.name === "execute_tool clock")
  expect(tools.map((s) => [s.kind, s.traceId, s.parentSpanId])).toEqual([[INTERNAL, turn.traceId, turn.spanId]])
  expect(tools[0]!.attributes).toMatchObject({
    [ATTR_GEN_AI_OPERATION_NAME]: "execute_tool",
    [ATTR_GEN_AI_TOOL_NAME]: "clock",
    "gen_ai.tool.call.id": "call_1_1_1"
  })
}

describe("the endpoint and timeout of the flag and the environment (otlpEndpoint, exportTimeout)", () => {
  const resolve = (env: Record<string, string>, flag?: string) =>
    Effect.runSync(
      Effect.either(otlpEndpoint(flag === undefined ? Option.none() : Option.some(flag), env)).pipe(
        Effect.map(Either.match({ onLeft: (e) => `exit ${e.code}: ${e.message}`, onRight: (r) => r }))
      )
    )
  const BASE = "OTEL_EXPORTER_OTLP_ENDPOINT"
  const TRACES = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"

  it("OTEL_EXPORTER_OTLP_ENDPOINT: v1/traces appended to the URL's path, with or without a trailing slash, the query kept", () => {
    const cases: ReadonlyArray<[string, string]> = [
      ["http://127.0.0.1:14318", "http://127.0.0.1:14318/v1/traces"],
      ["http://127.0.0.1:14318/", "http://127.0.0.1:14318/v1/traces"],
      ["http://127.0.0.1:14318/?tenant=a", "http://127.0.0.1:14318/v1/traces?tenant=a"],
      ["http://127.0.0.1:14318?tenant=a&x=1", "http://127.0.0.1:14318/v1/traces?tenant=a&x=1"],
      ["https://collector.example/otlp", "https://collector.example/otlp/v1/traces"],
      ["https://collector.example/otlp/?k=v#f", "https://collector.example/otlp/v1/traces?k=v#f"],
      ["  http://collector:4318  ", "http://collector:4318/v1/traces"]
    ]
    for (const [base, url] of cases) {
      expect([base, resolve({ [BASE]: base })]).toEqual([base, { url, origin: BASE }])
    }
  })

  it("the flag and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT are used as given (trimmed)", () => {
    expect(resolve({ [BASE]: "http://b:4318" }, "http://f:4318/x?q=1")).toEqual({
      url: "http://f:4318/x?q=1",
      origin: "--otlp-endpoint"
    })
    expect(resolve({ [BASE]: "http://b:4318", [TRACES]: " http://t:4318/traces?q=1 " })).toEqual({
      url: "http://t:4318/traces?q=1",
      origin: TRACES
    })
  })

  it("a variable that is empty or only blanks is unset; a blank flag is an error", () => {
    expect(resolve({ [BASE]: " \t ", [TRACES]: "" })).toBe(undefined)
    expect(resolve({ [BASE]: "http://b:4318", [TRACES]: "   " })).toEqual({ url: "http://b:4318/v1/traces", origin: BASE })
    expect(resolve({}, "  ")).toBe("exit 2: --otlp-endpoint: the URL is empty")
    expect(resolve({ OTEL_SDK_DISABLED: " TRUE ", [BASE]: "http://b:4318" })).toBe(undefined)
  })

  it("the timeout: 3,000 ms unset (or blank), the traces variable first, a bad one exits 2", () => {
    const timeout = (env: Record<string, string>) =>
      Effect.runSync(
        Effect.either(exportTimeout(env)).pipe(
          Effect.map(Either.match({ onLeft: (e) => `exit ${e.code}: ${e.message}`, onRight: (ms) => ms }))
        )
      )
    expect(timeout({})).toBe(3000)
    expect(timeout({ OTEL_EXPORTER_OTLP_TIMEOUT: "  " })).toBe(3000)
    expect(timeout({ OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: " ", OTEL_EXPORTER_OTLP_TIMEOUT: "500" })).toBe(500)
    expect(timeout({ OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "250", OTEL_EXPORTER_OTLP_TIMEOUT: "500" })).toBe(250)
    expect(timeout({ OTEL_EXPORTER_OTLP_TIMEOUT: "0" })).toBe(
      "exit 2: OTEL_EXPORTER_OTLP_TIMEOUT: not a positive integer (milliseconds): \"0\""
    )
  })
})

describe("agent-loop run --otlp-endpoint (a loopback OTLP/HTTP receiver)", () => {
  it.scopedLive(
    "POSTs the run's spans as JSON to the URL as given: resource agent-loop, the turn's span tree",
    () =>
      Effect.gen(function*() {
        const otlp = yield* receiver()
        const url = `http://127.0.0.1:${otlp.port}/v1/traces`
        const r = yield* spawn(["run", "--prompt", "what time is it", "--store", tmpDir(), "--otlp-endpoint", url])
        expect([r.code, r.stderr]).toEqual([0, ""])
        expect(r.stdout).toContain("→ clock({})")
        // Everything was sent before the process exited.
        expect(otlp.requests.length).toBeGreaterThanOrEqual(1)
        for (const request of otlp.requests) {
          expect([request.method, request.url, request.contentType]).toEqual(["POST", "/v1/traces", "application/json"])
        }
        const { resources, spans } = decode(otlp.requests)
        for (const resource of resources) {
          expect(resource).toMatchObject({ "service.name": "agent-loop", "service.version": "0.1.0" })
        }
        // The plumbing: the store's span (on main before the loop's spans).
        expect(spans.map((s) => s.name)).toContain("SessionStore.create")
        expectTurnTree(spans, sessionIdOf(r.stdout))
      })
  )

  it.scopedLive(
    "the environment: OTEL_EXPORTER_OTLP_ENDPOINT gets /v1/traces, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as is, the flag wins",
    () =>
      Effect.gen(function*() {
        const otlp = yield* receiver()
        const base = `http://127.0.0.1:${otlp.port}`
        const run = (env: Record<string, string>, flag: ReadonlyArray<string> = []) =>
          spawn(["run", "--prompt", "what time is it", "--store", tmpDir(), ...flag], { env })
        const a = yield* run({ OTEL_EXPORTER_OTLP_ENDPOINT: base })
        expect([a.code, a.stderr]).toEqual([0, ""])
        const paths = () => [...new Set(otlp.requests.splice(0).map((q) => q.url))]
        expect(paths()).toEqual(["/v1/traces"])
        const b = yield* run({ OTEL_EXPORTER_OTLP_ENDPOINT: `${base}/collector/` })
        expect([b.code, b.stderr]).toEqual([0, ""])
        expect(paths()).toEqual(["/collector/v1/traces"])
        // The path gets v1/traces; a query stays after it. A variable of blanks is unset.
        const q = yield* run({ OTEL_EXPORTER_OTLP_ENDPOINT: `${base}/?tenant=a`, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: " " })
        expect([q.code, q.stderr]).toEqual([0, ""])
        expect(paths()).toEqual(["/v1/traces?tenant=a"])
        const c = yield* run({
          OTEL_EXPORTER_OTLP_ENDPOINT: `${base}/not-this`,
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${base}/custom/traces`
        })
        expect([c.code, c.stderr]).toEqual([0, ""])
        expect(paths()).toEqual(["/custom/traces"])
        const closed = yield* closedPort
        const d = yield* run(
          { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${closed}/v1/traces` },
          ["--otlp-endpoint", `${base}/flag`]
        )
        expect([d.code, d.stderr]).toEqual([0, ""])
        expect(paths()).toEqual(["/flag"])
        // OTEL_SDK_DISABLED=true: the variables are ignored (not even a bad one is read), the flag is not.
        const off = { OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_ENDPOINT: base, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "::" }
        const f = yield* run(off)
        expect([f.code, f.stderr, paths()]).toEqual([0, "", []])
        const g = yield* run(off, ["--otlp-endpoint", `${base}/flag`])
        expect([g.code, g.stderr, paths()]).toEqual([0, "", ["/flag"]])
        // The env form exports the same tree.
        const e = yield* run({ OTEL_EXPORTER_OTLP_ENDPOINT: base })
        expect(e.code).toBe(0)
        expectTurnTree(decode(otlp.requests).spans, sessionIdOf(e.stdout))
      })
  )

  it.scopedLive(
    "a receiver answering 500, or no receiver at all: the run still exits 0, one stderr line says the spans were not exported",
    () =>
      Effect.gen(function*() {
        const otlp = yield* receiver(500)
        const url = `http://127.0.0.1:${otlp.port}/v1/traces`
        const r = yield* spawn(["run", "--prompt", "what time is it", "--store", tmpDir(), "--otlp-endpoint", url])
        expect(r.code).toBe(0)
        expect(r.stdout).toContain("turn 1 ended: completed")
        expect(r.stderr).toMatch(
          new RegExp(`^agent-loop: could not export \\d+ spans? to ${url.replaceAll(".", "\\.")}: Internal Server Error\\n$`)
        )
        // 500 is not retryable (OTLP/HTTP): one request.
        expect(otlp.requests.length).toBe(1)
        // A refused connection is retried within the export timeout (OTEL_EXPORTER_OTLP_TIMEOUT), then given up.
        const closed = yield* closedPort
        const refused = yield* spawnTimed(["run", "--prompt", "hello", "--store", tmpDir()], {
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${closed}`,
          OTEL_EXPORTER_OTLP_TIMEOUT: "500"
        })
        expect(refused.code).toBe(0)
        expect(refused.stderr).toMatch(
          new RegExp(
            `^agent-loop: could not export \\d+ spans? to http://127\\.0\\.0\\.1:${closed}/v1/traces: connect ECONNREFUSED`
          )
        )
        // Its exit came 52–104 ms after its work under load; 1.5 s is 3 times the export timeout and
        // less than the 2.5 s after its work that a run without the variable takes (3 s by default).
        expect(refused.afterWork).toBeGreaterThanOrEqual(0)
        expect(refused.afterWork).toBeLessThan(1_500)
      })
  )

  it.scopedLive(
    "a collector that answers 200 then trickles its body: the run exits within the export timeout after its work, the spans reported lost",
    () =>
      Effect.gen(function*() {
        const otlp = yield* receiver("trickle")
        const url = `http://127.0.0.1:${otlp.port}/v1/traces`
        // A hung process is killed after CLI_RUN_MS: the test fails on its exit code.
        const r = yield* spawnTimed(["run", "--prompt", "what time is it", "--store", tmpDir(), "--otlp-endpoint", url])
        expect(r.code).toBe(0)
        expect(r.stdout).toContain("turn 1 ended: completed")
        // The collector got the spans and had started its answer: the export timeout (3 s) is a
        // deadline for the whole answer, not a wait between its bytes. The exit came 3.04 s after
        // the work under load; 8 s leaves 5 s to exit and is less than the exporter's own default (10 s).
        expect(otlp.requests.length).toBeGreaterThanOrEqual(1)
        expect(otlp.trickled.bytes).toBeGreaterThanOrEqual(1)
        expect(r.afterWork).toBeGreaterThanOrEqual(0)
        expect(r.afterWork).toBeLessThan(8_000)
        // One line per export given up, whose counts add up to the spans the collector received.
        const lines = r.stderr.split("\n").slice(0, -1)
        const pattern = new RegExp(
          `^agent-loop: could not export (\\d+) spans? to ${url.replaceAll(".", "\\.")}: no complete answer within 3000 ms$`
        )
        expect(lines.length).toBeGreaterThanOrEqual(1)
        expect(lines.map((line) => pattern.test(line))).toEqual(lines.map(() => true))
        const lost = lines.reduce((sum, line) => sum + Number(pattern.exec(line)![1]), 0)
        expect(lost).toBe(decode(otlp.requests).spans.length)
      })
  )

  it.live(
    "a value that is not an http(s) URL, an empty one, a bad timeout: exit 2 naming the flag or variable, nothing run",
    () =>
      Effect.gen(function*() {
        const cases: ReadonlyArray<[ReadonlyArray<string>, Record<string, string>, string]> = [
          [["--otlp-endpoint", "not a url"], {}, "--otlp-endpoint: not a URL: not a url"],
          [["--otlp-endpoint", ""], {}, "--otlp-endpoint: the URL is empty"],
          [
            ["--otlp-endpoint", "grpc://127.0.0.1:4317"],
            {},
            "--otlp-endpoint: only http and https URLs are supported (OTLP/HTTP), not grpc:"
          ],
          [
            [],
            { OTEL_EXPORTER_OTLP_ENDPOINT: "localhost:4318" },
            "OTEL_EXPORTER_OTLP_ENDPOINT: only http and https URLs are supported (OTLP/HTTP), not localhost:"
          ],
          [[], { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "::" }, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: not a URL: ::"],
          [
            ["--otlp-endpoint", "http://127.0.0.1:1/v1/traces"],
            { OTEL_EXPORTER_OTLP_TIMEOUT: "10s" },
            "OTEL_EXPORTER_OTLP_TIMEOUT: not a positive integer (milliseconds): \"10s\""
          ]
        ]
        for (const [flag, env, message] of cases) {
          const store = tmpDir()
          const r = yield* spawn(["run", "--prompt", "hello", "--store", store, ...flag], { env })
          expect([flag, env, r]).toEqual([flag, env, { code: 2, stdout: "", stderr: `${message}\n` }])
          expect(Fs.readdirSync(store)).toEqual([])
        }
      })
  )

  it.live(
    "the OpenTelemetry packages not installed: exit 2 naming those missing and the versions to install",
    () =>
      Effect.gen(function*() {
        const url = "http://127.0.0.1:1/v1/traces"
        const one = yield* spawn(["run", "--prompt", "hello", "--otlp-endpoint", url], { hide: "@opentelemetry/sdk-trace-base" })
        expect(one).toEqual({
          code: 2,
          stdout: "",
          stderr:
            "agent-loop run --otlp-endpoint needs @opentelemetry/sdk-trace-base (an optional peer dependency of effect-agent-loop), which is not installed: npm install @opentelemetry/sdk-trace-base@2.12.1\n"
        })
        const all = yield* spawn(["run", "--prompt", "hello"], {
          env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1" },
          hide:
            "@opentelemetry/api,@opentelemetry/resources,@opentelemetry/sdk-trace-node,@opentelemetry/sdk-trace-base,@opentelemetry/exporter-trace-otlp-http"
        })
        expect(all).toEqual({
          code: 2,
          stdout: "",
          stderr:
            "agent-loop run (OTEL_EXPORTER_OTLP_ENDPOINT) needs @opentelemetry/api, @opentelemetry/resources, @opentelemetry/sdk-trace-node, @opentelemetry/sdk-trace-base and @opentelemetry/exporter-trace-otlp-http (optional peer dependencies of effect-agent-loop), which are not installed: npm install @opentelemetry/api@1.9.0 @opentelemetry/resources@2.12.1 @opentelemetry/sdk-trace-node@2.12.1 @opentelemetry/sdk-trace-base@2.12.1 @opentelemetry/exporter-trace-otlp-http@0.223.1\n"
        })
        // OTEL_SDK_DISABLED=true is the way out of a shell that sets the variable.
        const off = yield* spawn(["run", "--prompt", "hello", "--store", tmpDir()], {
          env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1", OTEL_SDK_DISABLED: "true" },
          hide: "@opentelemetry/api"
        })
        expect([off.code, off.stderr]).toEqual([0, ""])
        // Without an endpoint nothing of them is needed.
        const plain = yield* spawn(["run", "--prompt", "hello", "--store", tmpDir()], { hide: "@opentelemetry/api" })
        expect([plain.code, plain.stderr]).toEqual([0, ""])
      })
  )

  it.scopedLive(
    "simulate exports the scenario's spans too, at the virtual times of its log (from 0)",
    () =>
      Effect.gen(function*() {
        const otlp = yield* receiver()
        const dir = tmpDir()
        const scenario = Path.join(dir, "s.json")
        Fs.writeFileSync(
          scenario,
          JSON.stringify({ model: [{ text: "ok" }], actions: [{ at: 0, followup: "hello" }] })
        )
        const r = yield* spawn([
          "simulate",
          scenario,
          "--out",
          Path.join(dir, "log.jsonl"),
          "--otlp-endpoint",
          `http://127.0.0.1:${otlp.port}/v1/traces`
        ])
        expect([r.code, r.stderr]).toEqual([0, ""])
        const { spans } = decode(otlp.requests)
        expect(spans.map((s) => s.name)).toContain("SessionStore.create")
        // The scenario runs on a virtual clock that starts at 0 (its log's times): so do the spans.
        for (const span of spans) expect([span.name, span.start < 1_000_000_000n]).toEqual([span.name, true])
        expect(spans.map((s) => s.name)).toContain("invoke_agent agent-loop")
      })
  )

  it.live("run, chat, resume, simulate and runner take --otlp-endpoint (their --help)", () =>
    Effect.gen(function*() {
      for (const command of ["run", "chat", "resume", "simulate", "runner"]) {
        const help = yield* spawn([command, "--help"])
        expect([command, help.code, help.stdout.includes("--otlp-endpoint")]).toEqual([command, 0, true])
      }
      const other = yield* spawn(["transcript", "--help"])
      expect(other.stdout.includes("--otlp-endpoint")).toBe(false)
    }))
})

describePg("agent-loop runner --otlp-endpoint (PostgreSQL)", () => {
  it.live(
    "the runner's turns are exported, and flushed when SIGTERM stops it (exit 0)",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const otlp = yield* receiver()
        const url = yield* Effect.acquireRelease(Effect.sync(createDatabase), (db) => Effect.sync(() => dropDatabase(db)))
        const port = yield* closedPort
        const endpoint = `http://127.0.0.1:${otlp.port}/v1/traces`
        const runner = yield* Effect.acquireRelease(
          Effect.sync(() => {
            const child = spawnChild(process.execPath, [
              bin,
              "runner",
              "--pg",
              url,
              "--port",
              String(port),
              "--otlp-endpoint",
              endpoint
            ], { stdio: ["ignore", "pipe", "pipe"], env: childEnv({}) })
            const out = { stdout: "", stderr: "" }
            child.stdout!.on("data", (d) => (out.stdout += d))
            child.stderr!.on("data", (d) => (out.stderr += d))
            const exited = new Promise<number | string>((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal!)))
            return { child, out, exited }
          }),
          ({ child }) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
        )
        // Its ready line, within `RUNNER_READY_MS`.
        yield* Effect.async<void, Error>((resume) => {
          const timer = setTimeout(() => resume(Effect.fail(new Error(`no ready line: ${runner.out.stderr}`))), RUNNER_READY_MS)
          const check = () => {
            if (runner.out.stdout.includes("\n")) {
              clearTimeout(timer)
              resume(Effect.void)
            }
          }
          runner.child.stdout!.on("data", check)
          check()
        })
        expect(runner.out.stdout).toBe(`runner ready 127.0.0.1:${port}\n`)
        const sent = yield* spawn(["send", "--pg", url, "--session", "s1", "--followup", "what time is it", "--wait"])
        expect([sent.code, sent.stderr]).toEqual([0, ""])
        runner.child.kill("SIGTERM")
        const terminated = Date.now()
        const code = yield* Effect.promise(() => runner.exited).pipe(Effect.timeout(CHILD_WAIT_MS))
        note("CliOtlp: the runner's exit after SIGTERM", Date.now() - terminated)
        expect(code).toBe(0)
        for (const request of otlp.requests) {
          expect([request.url, request.contentType]).toEqual(["/v1/traces", "application/json"])
        }
        const { resources, spans } = decode(otlp.requests)
        for (const resource of resources) expect(resource["service.name"]).toBe("agent-loop")
        expectTurnTree(spans, "s1")
      }))
  )
})
