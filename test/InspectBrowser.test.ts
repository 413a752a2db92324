/**
 * The inspector's page in a real browser (§29): Debian's chromium driven by playwright-core,
 * against `agent-loop inspect` serving a simulated session of ours, the DSH fixtures in place, a
 * session a test appends to, and a session full of hostile text. Screenshots are kept under
 * `build/screenshots/inspect/` as artifacts (never compared).
 */
import { afterAll, beforeAll, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import type { Browser, Page } from "playwright-core"
import * as SessionStore from "../src/SessionStore.js"
import { BROWSER_WAIT_MS, CLI_RUN_MS } from "./utils/bounds.js"
import {
  BIN,
  describeBrowser,
  type Inspect,
  launchBrowser,
  openPage,
  screenshot,
  sessionUrl,
  startInspect
} from "./utils/browser.js"
import {
  assistant,
  claim,
  entered,
  followup,
  msg,
  stepEnd,
  stepStart,
  toolCall,
  toolResult,
  turnEnd,
  turnStart
} from "./utils/events.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const DSH = NodePath.resolve("../shared/fixtures/dsh")
const SCENARIO = NodePath.resolve("../shared/scenarios/reject-then-queue.json")
/** The seeded ids of the simulated reject-then-queue session. */
const SESSION = "a046cc1f-d68b-47bd-b1ec-eb452ef3bdd9"
const REJECTED = "85ed5003-aae1-40de-8ee5-53efa0f456f8"
const QUEUED = "c4da0c66-1922-4011-9cc2-e15006b7dce0"

const scratch = scratchDirs("agent-loop-inspect-browser-")

/** A store with the simulated reject-then-queue session (`agent-loop simulate`). */
const simulatedStore = (): string => {
  const store = NodePath.join(scratch(), "sessions")
  NodeFs.mkdirSync(store)
  execFileSync(process.execPath, [BIN, "simulate", SCENARIO, "--store", store], { stdio: "ignore", timeout: CLI_RUN_MS })
  return store
}

const texts = (page: Page, selector: string) => page.locator(selector).allTextContents()

/** An attribute of every element `selector` matches, in document order. */
const attributes = async (page: Page, selector: string, name: string) =>
  Promise.all((await page.locator(selector).all()).map((element) => element.getAttribute(name)))

describeBrowser("agent-loop inspect in chromium", () => {
  let browser: Browser
  let ours: Inspect
  let dsh: Inspect
  let store: string
  beforeAll(async () => {
    store = simulatedStore()
    ;[browser, ours, dsh] = await Promise.all([launchBrowser(), startInspect(["--store", store]), startInspect(["--store", DSH])])
  }, 3 * CLI_RUN_MS)
  afterAll(async () => {
    await Promise.all([ours?.close(), dsh?.close(), browser?.close()])
  })

  it("the list, then a session of ours: its turns, the inbox bars, a rejected prompt's reason and story, a step's request", async () => {
    const { errors, page } = await openPage(browser)
    await page.goto(ours.url)
    const row = page.locator(`tr[data-session="${SESSION}"]`)
    await row.waitFor({ timeout: BROWSER_WAIT_MS })
    expect(await row.locator("[data-col=\"title\"]").textContent()).toBe("what time is it?")
    expect(await row.locator("[data-col=\"status\"]").textContent()).toBe("idle")
    await screenshot(page, "list-ours")
    await row.locator("a").first().click()
    await page.locator("[data-timeline][data-rows=\"24\"]").waitFor({ timeout: BROWSER_WAIT_MS })
    await page.locator("[data-row=\"23\"]").waitFor({ timeout: BROWSER_WAIT_MS })
    // the turns: each turn's rows, in order
    expect(await texts(page, "[data-row] [data-col=\"turnstep\"]")).toEqual([
      "0.0",
      "1.0",
      "1.0",
      "1.1",
      "1.1",
      "1.1",
      "1.1",
      "1.1",
      "1.1",
      "1.1",
      "1.1",
      "1.1",
      "2.0",
      "2.0",
      "2.0",
      "2.0",
      "3.0",
      "3.0",
      "3.1",
      "3.1",
      "3.1",
      "3.1",
      "3.1",
      "3.1"
    ])
    const reject = page.locator("[data-row=\"14\"]")
    expect(await reject.getAttribute("data-kind")).toBe("pre-step")
    expect(await reject.locator("[data-col=\"label\"]").textContent()).toBe("pre-step: reject")
    expect(await reject.locator("[data-col=\"text\"]").textContent()).toBe("blocked: text includes \"rm -rf\"")
    // the inbox lane: three followups, one dropped with its reason
    const bars = page.locator("[data-bar]")
    expect(await bars.count()).toBe(3)
    const rejected = page.locator(`[data-bar="${REJECTED}"]`)
    expect(await rejected.getAttribute("data-kind")).toBe("followup")
    expect(await rejected.getAttribute("data-fate")).toBe("dropped")
    expect(await rejected.getAttribute("data-reason")).toBe("rejected")
    expect(await page.locator(`[data-bar="${QUEUED}"]`).getAttribute("data-fate")).toBe("entered")
    await screenshot(page, "timeline-ours")
    // the rejected prompt's story
    await rejected.click()
    const story = page.locator("[data-panel=\"story\"]")
    await story.waitFor({ timeout: BROWSER_WAIT_MS })
    expect(await story.locator("[data-fate-line]").textContent()).toBe("dropped: rejected")
    expect(await attributes(page, "[data-panel=\"story\"] [data-story-step]", "data-story-step"))
      .toEqual(["inserted", "claimed", "dropped"])
    expect(page.url()).toBe(`${sessionUrl(ours.url, SESSION)}/m/${REJECTED}`)
    await screenshot(page, "story-rejected")
    // the model request of turn 3 step 1: the rejected prompt is not in it
    await page.goto(`${sessionUrl(ours.url, SESSION)}/r/3/1`)
    const request = page.locator("[data-panel=\"request\"]")
    await request.locator("[data-message]").first().waitFor({ timeout: BROWSER_WAIT_MS })
    expect(await attributes(page, "[data-panel=\"request\"] [data-message]", "data-role")).toEqual(["user", "assistant", "user"])
    expect(await request.textContent()).not.toContain("rm -rf")
    await screenshot(page, "request-turn3-step1")
    expect(errors).toEqual([])
  })

  it("a recorded DSH session: its timeline, its sub-agents, and staged context dropped by a canceled splice", async () => {
    const { errors, page } = await openPage(browser)
    await page.goto(dsh.url)
    await page.locator("tr[data-session=\"acp__subagent-multi__session\"]").waitFor({ timeout: BROWSER_WAIT_MS })
    await page.fill("input[data-search]", "subagent-multi")
    await page.waitForFunction("document.querySelectorAll('tr[data-session]').length === 3", undefined, {
      timeout: BROWSER_WAIT_MS
    })
    expect((await attributes(page, "tr[data-session]", "data-session")).sort())
      .toEqual(["acp__subagent-multi__session", "acp__subagent-multi__session.1", "acp__subagent-multi__session.2"])
    await screenshot(page, "list-dsh")
    await page.goto(sessionUrl(dsh.url, "acp__agent-instructions__session"))
    await page.locator("[data-timeline][data-rows]").waitFor({ timeout: BROWSER_WAIT_MS })
    await page.locator("[data-row=\"0\"]").waitFor({ timeout: BROWSER_WAIT_MS })
    const dropped = page.locator("[data-bar][data-fate=\"dropped\"]")
    expect(await dropped.count()).toBeGreaterThan(0)
    // a canceled splice without a cause: discarded (§12)
    expect(await dropped.first().getAttribute("data-reason")).toBe("discarded")
    expect(await page.locator("[data-row][data-kind=\"turn-start\"]").count()).toBe(1)
    await screenshot(page, "timeline-dsh")
    expect(errors).toEqual([])
  })

  it("a session a test appends to: the page follows it (new rows, a bar pending, then entered), with no reload", async () => {
    const { errors, page } = await openPage(browser)
    const liveStore = simulatedStore()
    const live = await startInspect(["--store", liveStore])
    try {
      await page.goto(sessionUrl(live.url, SESSION))
      await page.locator("[data-timeline][data-rows=\"24\"]").waitFor({ timeout: BROWSER_WAIT_MS })
      await page.locator("[data-live=\"open\"]").waitFor({ timeout: BROWSER_WAIT_MS })
      const file = NodePath.join(liveStore, `${SESSION}.jsonl`)
      const append = (seq: number, lines: ReadonlyArray<{ readonly type: string; readonly data: unknown }>) =>
        NodeFs.appendFileSync(
          file,
          lines.map((l, i) => JSON.stringify({ ...l, seq: seq + i, time: 200 + seq + i }) + "\n").join("")
        )
      const later = msg("live-1", "and tomorrow?")
      append(21, [followup(later)])
      const start = Date.now()
      await page.locator("[data-timeline][data-rows=\"25\"]").waitFor({ timeout: BROWSER_WAIT_MS })
      const shown = Date.now() - start
      await page.locator("[data-bar=\"live-1\"][data-fate=\"pending\"]").waitFor({ timeout: BROWSER_WAIT_MS })
      append(22, [
        turnStart(4),
        claim("next-turn", 1),
        stepStart(4, 1),
        entered(later),
        assistant(4, 1, "Sunny."),
        stepEnd(4, 1),
        turnEnd(4)
      ])
      await page.locator("[data-bar=\"live-1\"][data-fate=\"entered\"]").waitFor({ timeout: BROWSER_WAIT_MS })
      await page.locator("[data-timeline][data-rows=\"33\"]").waitFor({ timeout: BROWSER_WAIT_MS })
      await screenshot(page, "timeline-live")
      // a log that cannot be read any more: the page says so, and keeps what it showed
      NodeFs.appendFileSync(file, "garbage, not JSON\n{}\n")
      await page.getByText(/this session's log cannot be read now: .*line 31: not JSON/).waitFor({ timeout: BROWSER_WAIT_MS })
      expect(await page.locator("[data-timeline]").getAttribute("data-rows")).toBe("33")
      // The probe looks every 250 ms: the page shows a change well within a second on an idle
      // machine; under load the bound only says when to give up.
      expect(shown).toBeLessThan(BROWSER_WAIT_MS)
      expect(errors).toEqual([])
    } finally {
      await live.close()
    }
  })

  it("hostile content is inert text: HTML, script, javascript: URLs, bidi and control characters in prompts, output and tool results", async () => {
    const hostileStore = NodePath.join(scratch(), "sessions")
    const hostile = [
      "<img src=x onerror=\"window.__xss=1\">",
      "<script>window.__xss=2</script>",
      "<a href=\"javascript:window.__xss=3\">click</a>",
      "abc\u202Edcba\u2066x",
      "bell\u0007 esc\u001b[31m red"
    ].join(" ")
    await Effect.runPromise(
      Effect.scoped(Effect.gen(function*() {
        const store = yield* SessionStore.SessionStore
        const log = yield* store.create({ id: "hostile" })
        const prompt = msg("h-1", hostile)
        yield* log.append([
          followup(prompt),
          turnStart(1),
          claim("next-turn", 1),
          stepStart(1, 1),
          entered(prompt),
          assistant(1, 1, hostile, {
            toolCalls: [{ id: "c1", name: "<b>read_file</b>", arguments: JSON.stringify({ path: hostile }) }]
          }),
          toolCall(1, 1, "c1", "<b>read_file</b>", JSON.stringify({ path: hostile })),
          toolResult(1, 1, "c1", hostile),
          stepEnd(1, 1),
          turnEnd(1)
        ])
      })).pipe(Effect.provide(SessionStore.layerJsonl({ directory: hostileStore })))
    )
    const inspect = await startInspect(["--store", hostileStore])
    const { errors, page } = await openPage(browser)
    let dialogs = 0
    page.on("dialog", (dialog) => {
      dialogs++
      void dialog.dismiss()
    })
    try {
      await page.goto(inspect.url)
      const row = page.locator("tr[data-session=\"hostile\"]")
      await row.waitFor({ timeout: BROWSER_WAIT_MS })
      const title = await row.locator("[data-col=\"title\"]").textContent()
      expect(title).toContain("<img src=x onerror=")
      expect(title).toContain("⟨U+202E⟩")
      await page.goto(sessionUrl(inspect.url, "hostile"))
      await page.locator("[data-row=\"9\"]").waitFor({ timeout: BROWSER_WAIT_MS })
      await page.locator("[data-row][data-kind=\"tool-result\"]").click()
      await page.locator("[data-panel=\"detail\"]").waitFor({ timeout: BROWSER_WAIT_MS })
      await page.goto(`${sessionUrl(inspect.url, "hostile")}/r/1/1`)
      await page.locator("[data-panel=\"request\"] [data-message]").first().waitFor({ timeout: BROWSER_WAIT_MS })
      await screenshot(page, "hostile")
      // Evaluated in the page (a string: this file is compiled without the DOM's types).
      const found = await page.evaluate(`({
        xss: window.__xss,
        images: document.querySelectorAll("img").length,
        scripts: [...document.querySelectorAll("script")].map((s) => s.getAttribute("src")),
        links: [...document.querySelectorAll("a")].map((a) => a.getAttribute("href")).filter((h) => !h?.startsWith("#/")),
        bold: document.querySelectorAll("b").length,
        text: document.body.innerText
      })`) as { readonly text: string }
      expect({ ...found, text: undefined }).toEqual({
        xss: undefined,
        images: 0,
        scripts: ["/assets/app.js"],
        links: [],
        bold: 0,
        text: undefined
      })
      expect(found.text).toContain("<script>window.__xss=2</script>")
      for (const hidden of ["\u202E", "\u2066", "\u0007", "\u001b"]) expect(found.text).not.toContain(hidden)
      expect(dialogs).toBe(0)
      expect(errors).toEqual([])
    } finally {
      await inspect.close()
    }
  })

  it("paths outside the store: the API answers 404 to the browser, and the page shows the error as a line", async () => {
    const { errors, page } = await openPage(browser)
    NodeFs.writeFileSync(NodePath.join(NodePath.dirname(store), "secret.jsonl"), "{\"type\":\"session\"}\n")
    for (const path of ["api/sessions/..%2Fsecret", "api/sessions/%2E%2E%2Fsecret/rows", "assets/..%2F..%2Fpackage.json"]) {
      const response = await page.goto(`${ours.url}${path}`)
      expect([path, response?.status()]).toEqual([path, 404])
    }
    await page.goto(`${ours.url}#/s/..%2Fsecret`)
    await page.getByText("no session ../secret").waitFor({ timeout: BROWSER_WAIT_MS })
    expect(errors.filter((e) => !e.includes("404"))).toEqual([])
  })
})
