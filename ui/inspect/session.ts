/**
 * A session's view (`#/s/ID`): the summary, the timeline with its inbox lane, and the side
 * panels (a clicked row's detail; the story or the model request the route opens). The session's
 * live stream (`/api/sessions/ID/live`) says when the log grew: the view is fetched again and the
 * timeline shows the new rows (following the last one while "follow" is on). Nothing is polled.
 */
import type { ApiError, LiveChange, Row, SessionView } from "../../src/cli/inspect/api.js"
import { errorText, getJson, isAbort, sessionPath } from "./api.js"
import { append, h, json, replace, sessionLink } from "./dom.js"
import { statusBadge, tokensCell } from "./list.js"
import { detailPanel, loadStory, type PanelActions, requestPanel, storyPanel } from "./panels.js"
import { type Panel, sessionHash } from "./router.js"
import { count, usd, visible } from "./text.js"
import { timeline } from "./timeline.js"

/** An open session view. */
export interface SessionHandle {
  readonly id: string
  /** Opens the panel of the route (`undefined`: none). */
  readonly open: (panel: Panel | undefined) => void
  /** Leaves the view: closes its live stream and stops its requests. */
  readonly close: () => void
}

const legend = (): HTMLElement =>
  h(
    "div",
    { class: "legend", data: { legend: "" } },
    h("span", { class: "legend-item" }, h("span", { class: "swatch dk-followup" }), "followup"),
    h("span", { class: "legend-item" }, h("span", { class: "swatch dk-steer" }), "steer"),
    h("span", { class: "legend-item" }, h("span", { class: "swatch dk-inject" }), "inject"),
    h("span", { class: "legend-item" }, h("span", { class: "swatch lg-pending" }), "pending"),
    h("span", { class: "legend-item" }, h("span", { class: "swatch lg-entered" }), "entered"),
    h("span", { class: "legend-item" }, h("span", { class: "swatch lg-dropped" }), "dropped")
  )

/** Renders session `id` into `root`, with the route's panel `panel`. */
export const sessionView = (root: HTMLElement, id: string, panel: Panel | undefined): SessionHandle => {
  const controller = new AbortController()
  const signal = controller.signal
  const summary = h("div", { class: "summary", data: { summary: "" } }, h("div", { class: "muted" }, "loading…"))
  const errorLine = h("div", { class: "error" })
  const liveState = h("span", { class: "live-state" })
  const follow = h("input")
  follow.type = "checkbox"
  const detailSlot = h("div")
  const routeSlot = h("div")
  const side = h("aside", { class: "side" }, routeSlot, detailSlot)
  const view = h("div", { class: "session-view", data: { live: "closed" } })

  let current: SessionView | undefined
  let selected: Row | undefined
  let route: Panel | undefined
  let storyBody: HTMLElement | undefined

  const go = (to: Panel | undefined) => {
    location.hash = sessionHash(id, to)
  }
  const act: PanelActions = {
    story: (message) => go({ kind: "story", message }),
    request: (turn, step) => go({ kind: "request", turn, step }),
    row: (row) => {
      lines.select(row)
      lines.reveal(row)
    },
    close: () => go(undefined)
  }
  const closeDetail = () => {
    selected = undefined
    lines.select(undefined)
    replace(detailSlot)
    layout()
  }
  const layout = () => side.classList.toggle("open", route !== undefined || selected !== undefined)

  const lines = timeline(id, signal, {
    select: (row) => {
      selected = row
      lines.select(row.row)
      replace(detailSlot, detailPanel(id, row, start(), signal, { ...act, close: closeDetail }))
      layout()
    },
    story: act.story,
    error: (message) => replace(errorLine, message),
    follow: (on) => {
      follow.checked = on
    }
  })
  follow.addEventListener("change", () => lines.setFollow(follow.checked))

  const start = () =>
    current === undefined ? 0 : current.summary.createdAt !== 0 ? current.summary.createdAt : current.turns[0]?.startTime ?? 0

  const renderSummary = (v: SessionView) => {
    const s = v.summary
    const stats = h(
      "div",
      { class: "stats" },
      h("span", {}, `${count(s.turns)} turns`),
      h("span", {}, `${count(s.events)} events`),
      h("span", {}, `${count(v.rows)} rows`),
      h("span", {}, tokensCell(s.tokens), " tokens"),
      s.cost === undefined ? null : h("span", {}, usd(s.cost)),
      h("span", { class: "muted" }, s.format)
    )
    if (s.parent !== undefined) {
      append(
        stats,
        h("span", {}, "parent ", s.parentOutside ? h("span", {}, `${s.parent} (not in this store)`) : sessionLink(s.parent))
      )
    }
    if (s.children.length > 0) {
      append(stats, h("span", { class: "links" }, "children ", ...s.children.flatMap((c) => [sessionLink(c), " "])))
    }
    replace(
      summary,
      h(
        "div",
        { class: "summary-head" },
        h("a", { href: "#/", class: "back" }, "← sessions"),
        h("h1", {}, s.id),
        statusBadge(s.status)
      ),
      s.title === "" ? null : h("div", { class: "title" }, s.title),
      stats,
      v.warnings.length === 0 ? null : h("ul", { class: "warnings" }, ...v.warnings.map((w) => h("li", {}, w))),
      h("details", {}, h("summary", {}, "log header"), json(v.header))
    )
    document.title = `${visible(s.id)} · agent-loop inspect`
  }

  const renderRoute = () => {
    storyBody = undefined
    lines.setActive(route?.kind === "story" ? route.message : undefined)
    if (route === undefined) replace(routeSlot)
    else if (route.kind === "request") replace(routeSlot, requestPanel(id, route.turn, route.step, signal, act))
    else {
      const story = storyPanel(id, route.message, signal, act)
      storyBody = story.body
      replace(routeSlot, story.element)
    }
    layout()
  }

  let request = 0
  const load = async () => {
    const mine = ++request
    try {
      const next = await getJson<SessionView>(sessionPath(id), signal)
      if (mine !== request || (current !== undefined && next.version === current.version)) return
      const first = current === undefined
      current = next
      replace(errorLine)
      renderSummary(next)
      lines.update(next)
      if (first && route?.kind === "story") {
        const bar = next.deliveries.find((d) => route?.kind === "story" && d.id === route.message)
        if (bar !== undefined) lines.reveal(bar.insertedRow)
      } else if (storyBody !== undefined && route?.kind === "story") {
        loadStory(storyBody, id, route.message, signal, act, false)
      }
    } catch (error) {
      if (!isAbort(error)) replace(errorLine, errorText(error))
    }
  }

  // One load at a time: a change announced while one is in flight (the stream's first event
  // arrives while the first load waits for the server's projection) is loaded after it, only if
  // that load did not already give its version.
  let loading: Promise<void> | undefined
  let announced: number | undefined
  const refresh = () => {
    if (loading !== undefined) return
    loading = load().finally(() => {
      loading = undefined
      if (announced !== undefined && current !== undefined && announced !== current.version) refresh()
    })
  }

  // Each stream (and each reconnection) starts with the session's version as it is: a change
  // missed meanwhile is seen then.
  const live = new EventSource(sessionPath(id, "/live"))
  live.addEventListener("open", () => {
    view.setAttribute("data-live", "open")
    replace(liveState, "live")
  })
  live.addEventListener("error", () => {
    view.setAttribute("data-live", "closed")
    replace(liveState, live.readyState === EventSource.CLOSED ? "not live" : "reconnecting…")
  })
  live.addEventListener("unreadable", (event) => {
    const { error } = JSON.parse((event as MessageEvent<string>).data) as ApiError
    replace(errorLine, `this session's log cannot be read now: ${error}`)
  })
  live.addEventListener("changed", (event) => {
    const change = JSON.parse((event as MessageEvent<string>).data) as LiveChange
    announced = change.version
    if (current === undefined || change.version !== current.version) refresh()
  })

  const onKey = (event: KeyboardEvent) => {
    if (event.key !== "Escape") return
    if (route !== undefined) go(undefined)
    else if (selected !== undefined) closeDetail()
  }
  document.addEventListener("keydown", onKey)

  append(
    view,
    summary,
    errorLine,
    h(
      "div",
      { class: "session-body" },
      h(
        "div",
        { class: "session-main" },
        h("div", { class: "tl-toolbar" }, liveState, h("label", { class: "follow" }, follow, "follow"), legend()),
        lines.header,
        lines.element
      ),
      side
    )
  )
  replace(root, view)
  route = panel
  renderRoute()
  refresh()

  return {
    id,
    open: (next) => {
      route = next
      renderRoute()
    },
    close: () => {
      live.close()
      controller.abort()
      document.removeEventListener("keydown", onKey)
    }
  }
}
