/**
 * `agent-loop inspect` over HTTP (§29): the built CLI serving a JSONL store (a simulated
 * session of ours, the DSH fixtures in place), its API's exact answers (the sessions list, the
 * timeline rows, the inbox bars and fates, a step's model request, a message's story), the
 * live stream while a test appends to a log, its security rules (no path outside the store, a
 * foreign Host, anything but GET) and its argument errors. The page itself is tested in
 * Chromium (`InspectBrowser.test.ts`).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeHttp from "node:http"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import type * as Api from "../src/cli/inspect/api.js"
import * as SessionStore from "../src/SessionStore.js"
import * as SqlSessionStore from "../src/SqlSessionStore.js"
import { CLI_RUN_MS } from "./utils/bounds.js"
import { type Inspect, startInspect } from "./utils/browser.js"
import { assistant, claim, entered, followup, msg, stepEnd, stepStart, turnEnd, turnStart } from "./utils/events.js"
import { createDatabase, describePg, dropDatabase } from "./utils/pg.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const ROOT = NodePath.join(NodePath.dirname(fileURLToPath(import.meta.url)), "..")
const BIN = NodePath.join(ROOT, "dist", "cli", "bin.js")
const DSH = NodePath.join(ROOT, "..", "shared", "fixtures", "dsh")
const SCENARIO = NodePath.join(ROOT, "..", "shared", "scenarios", "reject-then-queue.json")
/** The seeded ids of the simulated reject-then-queue session. */
const SESSION = "a046cc1f-d68b-47bd-b1ec-eb452ef3bdd9"
const FIRST = "3e6f2422-3f48-46b9-afb9-bef2b5349ce8"
const REJECTED = "85ed5003-aae1-40de-8ee5-53efa0f456f8"
const QUEUED = "c4da0c66-1922-4011-9cc2-e15006b7dce0"

/** A GET with any Host header (fetch cannot set one), as status, headers and body text. */
const get = (url: string, options: { readonly host?: string; readonly method?: string } = {}) =>
  new Promise<{ status: number; headers: NodeHttp.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const target = new URL(url)
    const request = NodeHttp.request({
      host: target.hostname,
      port: target.port,
      // the path exactly as given: no normalization of `..` or `%2F`
      path: url.slice(url.indexOf("/", "http://".length)),
      method: options.method ?? "GET",
      headers: options.host === undefined ? {} : { host: options.host }
    }, (response) => {
      let body = ""
      response.on("data", (d: Buffer) => (body += d.toString()))
      response.on("end", () => resolve({ status: response.statusCode!, headers: response.headers, body }))
    })
    request.on("error", reject)
    request.end()
  })

const scratch = scratchDirs("agent-loop-inspect-")

/** A store directory inside a fresh scratch directory (so that a file beside it is the test's too). */
const makeStore = (): string => {
  const store = NodePath.join(scratch(), "sessions")
  NodeFs.mkdirSync(store)
  return store
}

const getJson = async <A>(url: string): Promise<A> => {
  const response = await get(url)
  expect(response.status, response.body).toBe(200)
  return JSON.parse(response.body) as A
}

/** An event stream of the API, read as text as it comes; `ended` once the server ends it. */
const readStream = (url: string) => {
  const controller = new AbortController()
  let text = ""
  let ended = false
  let contentType: string | null = null
  const done = fetch(url, { signal: controller.signal }).then(async (response) => {
    contentType = response.headers.get("content-type")
    const reader = response.body!.getReader()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      text += new TextDecoder().decode(value)
    }
  }).catch(() => undefined).finally(() => (ended = true))
  return {
    text: () => text,
    ended: () => ended,
    contentType: () => contentType,
    close: () => controller.abort(),
    done
  }
}

/** Waits (bounded by `CLI_RUN_MS`) until `check` holds. */
const waitFor = async (what: string, check: () => boolean | Promise<boolean>) => {
  const start = Date.now()
  while (!(await check())) {
    if (Date.now() - start > CLI_RUN_MS) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/**
 * A store with the session `agent-loop simulate SCENARIO` writes, served by `agent-loop inspect`
 * for the tests of the `describe` it is called in.
 */
const servedSimulation = (scenario: string) => {
  const served = { store: "", inspect: undefined as unknown as Inspect }
  beforeAll(async () => {
    served.store = makeStore()
    execFileSync(process.execPath, [BIN, "simulate", scenario, "--store", served.store], {
      stdio: "ignore",
      timeout: CLI_RUN_MS
    })
    served.inspect = await startInspect(["--store", served.store])
  }, 2 * CLI_RUN_MS)
  afterAll(() => served.inspect?.close())
  return served
}

describe("agent-loop inspect: a simulated session of ours", () => {
  const served = servedSimulation(SCENARIO)

  it("prints its URL on loopback and serves the page's three files with a strict CSP", async () => {
    expect(served.inspect.stdout()).toBe(`agent-loop inspect: ${served.inspect.url} (jsonl ${served.store}, read-only)\n`)
    expect(served.inspect.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/)
    const page = await get(served.inspect.url)
    expect(page.status).toBe(200)
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8")
    expect(page.headers["content-security-policy"]).toBe(
      "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
    )
    expect(page.headers["x-content-type-options"]).toBe("nosniff")
    expect((await get(`${served.inspect.url}assets/app.js`)).headers["content-type"]).toBe("text/javascript; charset=utf-8")
    expect((await get(`${served.inspect.url}assets/app.css`)).headers["content-type"]).toBe("text/css; charset=utf-8")
    expect(await getJson<Api.StoreInfo>(`${served.inspect.url}api/store`)).toEqual({
      kind: "jsonl",
      where: served.store,
      readOnly: true,
      prices: false,
      version: "0.1.0"
    })
  })

  it("the sessions list: title, times, status, turns, events and tokens", async () => {
    const list = await getJson<Api.SessionList>(`${served.inspect.url}api/sessions`)
    expect(list.problems).toEqual([])
    expect(list.sessions).toEqual([{
      id: SESSION,
      title: "what time is it?",
      createdAt: 0,
      lastActivity: 105,
      status: "idle",
      turns: 3,
      events: 21,
      tokens: { input: 0, output: 0, cacheRead: 0, reasoning: 0, total: 0 },
      children: [],
      format: "effect-agent-loop"
    }])
  })

  it("the timeline: one row per event shown, the pre-step's enter and reject, and the inbox lane's bars with their fates", async () => {
    const view = await getJson<Api.SessionView>(`${served.inspect.url}api/sessions/${SESSION}`)
    expect(view.rows).toBe(24)
    expect(view.turns).toEqual([
      { turn: 1, startRow: 1, endRow: 11, startTime: 0, endTime: 100, steps: 1, reason: "completed" },
      { turn: 2, startRow: 12, endRow: 15, startTime: 100, endTime: 100, steps: 0, reason: "blocked: text includes \"rm -rf\"" },
      { turn: 3, startRow: 16, endRow: 23, startTime: 100, endTime: 105, steps: 1, reason: "completed" }
    ])
    expect(view.deliveries.map((b) => [b.id, b.kind, b.source, b.insertedRow, b.fateRow, b.fate, b.lane])).toEqual([
      [FIRST, "followup", "user", 0, 5, { _tag: "Entered", turn: 1, step: 1 }, 0],
      [REJECTED, "followup", "user", 7, 14, { _tag: "Dropped", reason: "rejected" }, 0],
      [QUEUED, "followup", "user", 8, 20, { _tag: "Entered", turn: 3, step: 1 }, 1]
    ])
    expect(view.lanes).toBe(2)
    const page = await getJson<Api.RowPage>(`${served.inspect.url}api/sessions/${SESSION}/rows?from=0&count=100`)
    expect(page.total).toBe(24)
    expect(page.rows.map((r) => `${r.row} ${r.seq} ${r.turn}.${r.step} ${r.kind} ${r.label}`)).toEqual([
      "0 0 0.0 inserted followup",
      "1 1 1.0 turn-start turn 1",
      "2 2 1.0 claimed claim 1 from next-turn",
      "3 3 1.1 step-start step 1",
      "4 3 1.1 pre-step pre-step: enter",
      "5 4 1.1 message user",
      "6 5 1.1 event request/header",
      "7 6 1.1 inserted followup",
      "8 7 1.1 inserted followup",
      "9 8 1.1 assistant assistant",
      "10 9 1.1 step-end step 1 end",
      "11 10 1.1 turn-end turn 1 end",
      "12 11 2.0 turn-start turn 2",
      "13 12 2.0 claimed claim 1 from next-turn",
      "14 13 2.0 pre-step pre-step: reject",
      "15 13 2.0 turn-end turn 2 end",
      "16 14 3.0 turn-start turn 3",
      "17 15 3.0 claimed claim 1 from next-turn",
      "18 16 3.1 step-start step 1",
      "19 16 3.1 pre-step pre-step: enter",
      "20 17 3.1 message user",
      "21 18 3.1 assistant assistant",
      "22 19 3.1 step-end step 1 end",
      "23 20 3.1 turn-end turn 3 end"
    ])
    expect(page.rows[14]).toEqual({
      row: 14,
      seq: 13,
      time: 100,
      turn: 2,
      step: 0,
      kind: "pre-step",
      label: "pre-step: reject",
      text: "blocked: text includes \"rm -rf\"",
      ids: [REJECTED],
      decision: "reject",
      level: "warn"
    })
    expect(page.rows[9]).toMatchObject({ text: "It is noon.", finish: "stop" })
    const second = await getJson<Api.RowPage>(`${served.inspect.url}api/sessions/${SESSION}/rows?from=20&count=2`)
    expect(second.rows.map((r) => r.row)).toEqual([20, 21])
  })

  it("a step's model request is History.derive of the log as the step called the model: the rejected prompt is not in it", async () => {
    const request = await getJson<Api.RequestView>(`${served.inspect.url}api/sessions/${SESSION}/request?turn=3&step=1`)
    expect(request).toEqual({
      turn: 3,
      step: 1,
      seq: 16,
      row: 18,
      provider: "scenario",
      model: "a rejected prompt does not strand the prompt queued behind it",
      tools: [],
      messages: [
        { id: FIRST, role: "user", source: "user", blocks: [{ type: "text", text: "what time is it?" }] },
        {
          id: expect.any(String),
          role: "assistant",
          source: "model:a rejected prompt does not strand the prompt queued behind it",
          blocks: [{ type: "text", text: "It is noon." }]
        },
        { id: QUEUED, role: "user", source: "user", blocks: [{ type: "text", text: "what is the weather?" }] }
      ]
    })
    expect((await get(`${served.inspect.url}api/sessions/${SESSION}/request?turn=2&step=1`)).status).toBe(404)
  })

  it("a message's story: inserted, claimed, dropped by the pre-step's reject, each with the event that proves it", async () => {
    const story = await getJson<Api.MessageStory>(`${served.inspect.url}api/sessions/${SESSION}/messages/${REJECTED}`)
    expect(story.fate).toEqual({ _tag: "Dropped", reason: "rejected" })
    expect(story.kind).toBe("followup")
    expect(story.steps.map((s) => [s.what, s.seq, s.row, s.time, s.text, (s.event as { type: string }).type])).toEqual([
      ["inserted", 6, 7, 10, "inserted into next-turn", "agent/inbox/spliced"],
      ["claimed", 12, 13, 100, "claimed by a pre-step", "agent/inbox/spliced"],
      ["dropped", 13, 14, 100, "dropped: rejected (turn 2 ended blocked: text includes \"rm -rf\")", "turn/end"]
    ])
    const entered = await getJson<Api.MessageStory>(`${served.inspect.url}api/sessions/${SESSION}/messages/${QUEUED}`)
    expect(entered.steps.map((s) => `${s.what} ${s.seq} ${s.text}`)).toEqual([
      "inserted 7 inserted into next-turn",
      "claimed 15 claimed by a pre-step",
      "entered 17 entered at turn 3 step 1"
    ])
    expect((await get(`${served.inspect.url}api/sessions/${SESSION}/messages/nope`)).status).toBe(404)
  })

  it("files that are not read are named under the list: a name that is no session id, a symbolic link", async () => {
    const other = makeStore()
    NodeFs.writeFileSync(NodePath.join(other, "with space.jsonl"), "{}\n")
    NodeFs.symlinkSync("/etc/passwd", NodePath.join(other, "passwd.jsonl"))
    const inspectOther = await startInspect(["--store", other])
    try {
      const list = await getJson<Api.SessionList>(`${inspectOther.url}api/sessions`)
      expect(list).toEqual({
        sessions: [],
        problems: [
          { id: "passwd.jsonl", message: "a symbolic link: not followed (only the store's own files are read)" },
          { id: "with space.jsonl", message: "the file's name is no session id ([A-Za-z0-9_-][A-Za-z0-9._-]*.jsonl)" }
        ],
        version: list.version
      })
      expect((await get(`${inspectOther.url}api/sessions/passwd`)).status).toBe(404)
    } finally {
      await inspectOther.close()
    }
  })

  it("a prompt of megabytes: its story and request cut its text at 64 Ki characters, and its raw event is a stub", async () => {
    const other = makeStore()
    const big = msg("big-1", "x".repeat(1_000_000))
    await Effect.runPromise(
      Effect.scoped(Effect.gen(function*() {
        const store = yield* SessionStore.SessionStore
        const log = yield* store.create({ id: "big" })
        yield* log.append([
          followup(big),
          turnStart(1),
          claim("next-turn", 1),
          stepStart(1, 1),
          entered(big),
          assistant(1, 1, "ok"),
          stepEnd(1, 1),
          turnEnd(1)
        ])
      })).pipe(Effect.provide(SessionStore.layerJsonl({ directory: other })))
    )
    const inspectOther = await startInspect(["--store", other])
    try {
      const story = await getJson<Api.MessageStory>(`${inspectOther.url}api/sessions/big/messages/big-1`)
      expect(story.message!.blocks[0]!.text).toBe(`${"x".repeat(65_536)}… (934464 more characters not shown)`)
      expect(story.steps.map((s) => s.event)).toEqual([
        {
          type: "agent/inbox/spliced",
          seq: 0,
          time: expect.any(Number),
          omitted: "1000204 characters of JSON, not shown"
        },
        expect.objectContaining({ type: "agent/inbox/spliced", seq: 2 }),
        {
          type: "user/message",
          seq: 4,
          time: expect.any(Number),
          omitted: expect.stringMatching(/ characters of JSON, not shown$/)
        }
      ])
      const request = await getJson<Api.RequestView>(`${inspectOther.url}api/sessions/big/request?turn=1&step=1`)
      expect(request.messages[0]!.blocks[0]!.text.length).toBe(65_536 + "… (934464 more characters not shown)".length)
      const events = await getJson<Api.EventPage>(`${inspectOther.url}api/sessions/big/events?from=4&count=2`)
      expect(events.events).toEqual([
        { type: "user/message", seq: 4, time: expect.any(Number), omitted: expect.any(String) },
        expect.objectContaining({ type: "assistant/message", seq: 5 })
      ])
    } finally {
      await inspectOther.close()
    }
  })

  it("raw events are served in pages, as stored", async () => {
    const page = await getJson<Api.EventPage>(`${served.inspect.url}api/sessions/${SESSION}/events?from=13&count=1`)
    expect(page).toEqual({
      from: 13,
      total: 21,
      events: [{
        type: "turn/end",
        seq: 13,
        time: 100,
        data: { turn: 2, reason: { kind: "blocked", reason: "text includes \"rm -rf\"" } }
      }]
    })
  })

  it("no path outside the store: traversal, bad ids and unknown paths are 404; a foreign Host is 403; only GET", async () => {
    NodeFs.writeFileSync(NodePath.join(NodePath.dirname(served.store), "secret.jsonl"), "{}\n")
    for (
      const path of [
        "api/sessions/..%2Fsecret",
        "api/sessions/../secret",
        "api/sessions/%2E%2E%2Fsecret",
        "api/sessions/..",
        "api/sessions/.hidden",
        "api/sessions/%00",
        "api/sessions/%E0%A4%A",
        `api/sessions/${SESSION}/../../../../etc/passwd`,
        "assets/../package.json",
        "assets/..%2F..%2Fpackage.json",
        "../../etc/passwd",
        "etc/passwd",
        "dist/cli/bin.js",
        "api/sessions/nope",
        `api/sessions/${SESSION}/nope`
      ]
    ) {
      const response = await get(`${served.inspect.url}${path}`)
      expect([path, response.status]).toEqual([path, 404])
      expect(response.body).not.toContain("root:")
    }
    expect((await get(`${served.inspect.url}api/sessions`, { host: "evil.example:80" })).status).toBe(403)
    expect((await get(`${served.inspect.url}api/sessions`, { host: `localhost:${new URL(served.inspect.url).port}` })).status)
      .toBe(200)
    for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
      expect((await get(`${served.inspect.url}api/sessions`, { method })).status).toBe(405)
    }
  })
})

describe("agent-loop inspect: compaction and streamed output", () => {
  const served = servedSimulation("test/scenarios/compaction/pressure.json")

  it("a compaction bracket's rows say what it replaced, and its checkpoint is named", async () => {
    const id = "f8cea6b9-785a-444d-b7eb-cc5dc5e91020"
    const page = await getJson<Api.RowPage>(`${served.inspect.url}api/sessions/${id}/rows?from=22&count=4`)
    expect(page.rows.map((r) => [r.seq, `${r.turn}.${r.step}`, r.kind, r.label, r.text!.slice(0, 40)])).toEqual([
      [20, "3.0", "compaction", "compaction start", "pressure, 104 tokens"],
      [21, "3.0", "compaction", "compaction summary", "replaces seq 4–6 (77 tokens): The user a"],
      [22, "3.0", "message", "compaction checkpoint", "The conversation before this point was c"],
      [23, "3.0", "compaction", "compaction end", "compacted, 71 tokens"]
    ])
  })
})

describe("agent-loop inspect: live", () => {
  const served = servedSimulation(SCENARIO)

  it("a log that grows sends `changed` with its new row count on the session's stream, and `sessions` on the list's", async () => {
    const file = NodePath.join(served.store, `${SESSION}.jsonl`)
    const streams = [`api/sessions/${SESSION}/live`, "api/live"].map((path) => readStream(`${served.inspect.url}${path}`))
    // Each stream starts with the state as it is.
    await waitFor("the streams' headers", () => streams.every((stream) => stream.contentType() !== null))
    expect(streams.map((stream) => stream.contentType())).toEqual(["text/event-stream", "text/event-stream"])
    await waitFor(
      "both streams open",
      () => streams[0]!.text().includes("event: changed") && streams[1]!.text().includes("event: sessions")
    )
    expect(streams[0]!.text()).toMatch(/^: open\n\nevent: changed\ndata: \{"version":\d+,"rows":24,"events":21\}\n\n$/)
    const before = [streams[0]!.text().length, streams[1]!.text().length]
    NodeFs.appendFileSync(
      file,
      JSON.stringify({
        type: "agent/inbox/spliced",
        seq: 21,
        time: 200,
        data: {
          target: "next-turn",
          start: 0,
          inserted: [{ id: "live-1", role: "user", content: [{ type: "text", text: "and now?" }], source: { kind: "user" } }]
        }
      }) + "\n"
    )
    await waitFor("the session's change", () => streams[0]!.text().slice(before[0]).includes("event: changed"))
    expect(streams[0]!.text().slice(before[0])).toMatch(/^event: changed\ndata: \{"version":\d+,"rows":25,"events":22\}\n\n$/)
    await waitFor("the list's change", () => streams[1]!.text().slice(before[1]).includes("event: sessions"))
    const view = await getJson<Api.SessionView>(`${served.inspect.url}api/sessions/${SESSION}`)
    expect(view.deliveries.at(-1)).toMatchObject({ id: "live-1", insertedRow: 24, fateRow: null, fate: { _tag: "Pending" } })
    // the log cut in the middle of a line and garbled: the page is told it cannot be read
    const length = streams[0]!.text().length
    NodeFs.appendFileSync(file, "garbage, not JSON\n{\"type\":\"x\"}\n")
    await waitFor("the session's unreadable event", () => streams[0]!.text().slice(length).includes("event: unreadable"))
    expect(streams[0]!.text().slice(length)).toMatch(/^event: unreadable\ndata: \{"error":".*line 24: not JSON.*"\}\n\n$/)
    for (const s of streams) s.close()
    await Promise.all(streams.map((s) => s.done))
  })
})

describe("agent-loop inspect: stopping", () => {
  it("SIGTERM with a page's live stream open: the stream ends and the server exits 0 (it waited for the stream)", async () => {
    const inspect = await startInspect(["--store", DSH])
    const stream = readStream(`${inspect.url}api/live`)
    await waitFor("the list's stream", () => stream.text().includes("event: sessions"))
    expect(stream.ended()).toBe(false)
    expect(await inspect.close()).toBe(0)
    await stream.done
    expect(stream.ended()).toBe(true)
  }, CLI_RUN_MS)
})

describe("agent-loop inspect: the DSH fixtures in place", () => {
  let inspect: Inspect
  beforeAll(async () => {
    inspect = await startInspect(["--store", DSH])
  }, CLI_RUN_MS)
  afterAll(() => inspect?.close())

  it("lists every log, DSH titles, and sub-agent children named by their headers", async () => {
    const list = await getJson<Api.SessionList>(`${inspect.url}api/sessions`)
    const files = NodeFs.readdirSync(DSH).filter((n) => n.endsWith(".jsonl"))
    expect(list.sessions.length + list.problems.length).toBe(files.length)
    expect(list.problems).toEqual([])
    const parent = list.sessions.find((s) => s.id === "acp__subagent-multi__session")!
    expect(parent).toMatchObject({ format: "dsh", status: "idle", turns: 1 })
    expect(parent.children).toEqual(["acp__subagent-multi__session.1", "acp__subagent-multi__session.2"])
    expect(list.sessions.find((s) => s.id === "acp__subagent-multi__session.1")!.parent).toBe("acp__subagent-multi__session")
    expect(list.sessions.find((s) => s.id === "acp__advanced-toolchain__session")!.title).toBe("Run this advanced flow exactly")
  })

  it("a DSH session's page names its parent and children by file, as the list does; a header id shared by several logs links nothing", async () => {
    const child = await getJson<Api.SessionView>(`${inspect.url}api/sessions/acp__subagent-multi__session.1`)
    expect(child.summary.parent).toBe("acp__subagent-multi__session")
    const parent = await getJson<Api.SessionView>(`${inspect.url}api/sessions/acp__subagent-multi__session`)
    expect(parent.summary.children).toEqual(["acp__subagent-multi__session.1", "acp__subagent-multi__session.2"])
    // six fixtures share the header id 11111111-…: only a log's own `.N` files are its children
    const shared = await getJson<Api.SessionView>(`${inspect.url}api/sessions/acp__subagent-max-tokens-partial__session`)
    expect(shared.summary.children).toEqual(["acp__subagent-max-tokens-partial__session.1"])
    const orphan = await getJson<Api.SessionView>(`${inspect.url}api/sessions/acp__subagent-child-question-rejection__session.1`)
    // its parent's header id 44444444-… is that of two other logs, neither its parent: left as logged
    expect(orphan.summary).toMatchObject({ parent: "44444444-4444-4444-8444-444444444444", parentOutside: true })
    expect(child.summary.parentOutside).toBeUndefined()
  })

  it("a DSH step's model request has the request header logged after the step's other events", async () => {
    const request = await getJson<Api.RequestView>(
      `${inspect.url}api/sessions/acp__hook-codex-stop-continue__session/request?turn=1&step=1`
    )
    expect([request.provider, request.model, request.messages.map((m) => m.role)]).toEqual([
      "deepseek-official",
      "deepseek-v4-flash",
      ["user", "user"]
    ])
  })

  it("a DSH session's streamed chunks are counted on its output rows, not shown one by one", async () => {
    const page = await getJson<Api.RowPage>(`${inspect.url}api/sessions/acp__packed-chunks__session/rows?from=0&count=100`)
    expect(page.rows.filter((r) => r.kind === "assistant").map((r) => [r.seq, r.label])).toEqual([
      [57, "assistant · 48 chunks streamed"],
      [121, "assistant · 57 chunks streamed"]
    ])
  })

  it("a DSH session's timeline: its staged context dropped by a canceled splice", async () => {
    const id = "acp__agent-instructions__session"
    const view = await getJson<Api.SessionView>(`${inspect.url}api/sessions/${id}`)
    const dropped = view.deliveries.filter((b) => b.fate._tag === "Dropped")
    expect(dropped.length).toBeGreaterThan(0)
    for (const bar of dropped) {
      const story = await getJson<Api.MessageStory>(`${inspect.url}api/sessions/${id}/messages/${encodeURIComponent(bar.id)}`)
      expect(story.steps.at(-1)).toMatchObject({ what: "dropped", seq: bar.fateSeq })
    }
  })
})

describe("agent-loop inspect: arguments", () => {
  const run = (args: ReadonlyArray<string>) => {
    try {
      execFileSync(process.execPath, [BIN, "inspect", ...args], { stdio: "pipe", timeout: CLI_RUN_MS })
      return { code: 0, err: "" }
    } catch (e) {
      const error = e as { status: number; stderr: Buffer }
      return { code: error.status, err: error.stderr.toString() }
    }
  }

  it("two stores, a missing directory, a table prefix without SQL, a bad port: exit 2 with one line", () => {
    expect(run(["--store", "x", "--pg", "postgres://u@127.0.0.1:1/db"])).toEqual({
      code: 2,
      err: "inspect: give one of --store DIR, --sqlite FILE, --pg URL\n"
    })
    expect(run(["--store", "/nonexistent/dir", "--port", "0"])).toEqual({
      code: 2,
      err: "inspect: --store /nonexistent/dir: cannot read: no such directory\n"
    })
    expect(run(["--store", "x", "--table-prefix", "p_"])).toEqual({
      code: 2,
      err: "inspect: --table-prefix goes with --sqlite or --pg\n"
    })
    expect(run(["--port", "70000"])).toEqual({ code: 2, err: "inspect: --port 70000: not a port (0–65535)\n" })
    expect(run(["--host", ""])).toEqual({ code: 2, err: "inspect: --host \"\": not a host name or address\n" })
  })

  it("--host another loopback address: its own URL is served, without a warning", async () => {
    const inspect = await startInspect(["--store", DSH, "--host", "127.0.0.2"])
    try {
      expect(inspect.url).toMatch(/^http:\/\/127\.0\.0\.2:\d+\/$/)
      expect((await get(`${inspect.url}api/store`)).status).toBe(200)
      expect(inspect.stderr()).toBe("")
    } finally {
      await inspect.close()
    }
  }, CLI_RUN_MS)

  it("a SQLite database without the store's tables is refused and left as it was (nothing created)", () => {
    for (
      const [schema, missing] of [
        [
          "CREATE TABLE bookmarks (url TEXT)",
          "agent_loop_sessions, agent_loop_events, agent_loop_writers, agent_loop_migrations"
        ],
        // a lookalike sessions table: the store would have added its other tables
        [
          "CREATE TABLE agent_loop_sessions (id TEXT, header TEXT)",
          "agent_loop_events, agent_loop_writers, agent_loop_migrations"
        ]
      ] as const
    ) {
      const file = NodePath.join(scratch(), "other.db")
      execFileSync(process.execPath, [
        "-e",
        "const D = require('better-sqlite3'); const db = new D(process.argv[1]); db.exec(process.argv[2]); db.close()",
        file,
        schema
      ])
      const before = NodeFs.readFileSync(file)
      expect(run(["--sqlite", file, "--port", "0"])).toEqual({
        code: 2,
        err: `inspect: --sqlite ${file}: no session store in this database (no table ${missing}); inspect creates nothing\n`
      })
      expect(NodeFs.readFileSync(file).equals(before)).toBe(true)
      expect(NodeFs.readdirSync(NodePath.dirname(file))).toEqual(["other.db"])
    }
  })

  it("a port in use: exit 2 naming it", async () => {
    const server = NodeHttp.createServer()
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as { port: number }).port
    const result = run(["--store", DSH, "--port", String(port)])
    server.close()
    expect(result.code).toBe(2)
    expect(result.err).toMatch(new RegExp(`^inspect: cannot listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE.*\\n$`))
  })
})

/**
 * A SQL store written by this process (`layer`): one finished turn, then a second turn opened
 * while the test holds the session (a live writer: `running`), then the store closed with the
 * turn open (no writer: `open-turn`, as after a crash). The inspector (`args`) sees each state
 * on its live stream.
 */
const sqlStoreStates = (
  layer: Layer.Layer<SessionStore.SessionStore, unknown>,
  args: () => ReadonlyArray<string>
) =>
async () => {
  const scope = Effect.runSync(Scope.make())
  const store = await Effect.runPromise(
    Effect.map(Layer.buildWithScope(layer, scope), (context) => Context.get(context, SessionStore.SessionStore))
  )
  const log = await Effect.runPromise(store.create({ id: "sql-1" }))
  const u1 = msg("u1", "hello from SQL")
  await Effect.runPromise(log.append([
    followup(u1),
    turnStart(1),
    claim("next-turn", 1),
    stepStart(1, 1),
    entered(u1),
    assistant(1, 1, "hi"),
    stepEnd(1, 1),
    turnEnd(1)
  ]))
  const inspect = await startInspect(args())
  try {
    const summary = async () =>
      (await getJson<Api.SessionList>(`${inspect.url}api/sessions`)).sessions.find((s) => s.id === "sql-1")!
    expect(await summary()).toMatchObject({ title: "hello from SQL", status: "idle", turns: 1, events: 8 })
    const view = await getJson<Api.SessionView>(`${inspect.url}api/sessions/sql-1`)
    expect(view.deliveries.map((b) => [b.id, b.fate])).toEqual([["u1", { _tag: "Entered", turn: 1, step: 1 }]])
    // live: the stream opens, then the session grows under its writer
    const stream = readStream(`${inspect.url}api/sessions/sql-1/live`)
    await waitFor("the stream's first state", () => stream.text().includes("event: changed"))
    const u2 = msg("u2", "and again")
    await Effect.runPromise(log.append([followup(u2), turnStart(2)]))
    await waitFor("the appended events on the stream", () => /"rows":\d+,"events":10\}/.test(stream.text()))
    expect((await summary()).status).toBe("running")
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await waitFor("the session without its writer", async () => (await summary()).status === "open-turn")
    stream.close()
    await stream.done
  } finally {
    await inspect.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

describe("agent-loop inspect: SQLite", () => {
  const filename = () => NodePath.join(scratch(), "sessions.db")
  let file = ""
  it(
    "--sqlite FILE: the list, a timeline, and a session followed live: running under its writer, an open turn once it is gone",
    () => {
      file = filename()
      return sqlStoreStates(SqlSessionStore.layerSqlite({ filename: file }), () => ["--sqlite", file])()
    },
    4 * CLI_RUN_MS
  )
})

describePg("agent-loop inspect: PostgreSQL", () => {
  let url = ""
  beforeAll(() => {
    url = createDatabase()
  })
  afterAll(() => dropDatabase(url))
  it(
    "--pg URL: the list, a timeline, and a session followed live: running under its writer, an open turn once it is gone",
    () => sqlStoreStates(SqlSessionStore.layerPg({ url, maxConnections: 2 }), () => ["--pg", url])(),
    4 * CLI_RUN_MS
  )
})
