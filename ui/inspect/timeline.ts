/**
 * A session's timeline: its rows as a virtualized list (a fixed row height; only the rows in view,
 * and a margin, are in the DOM; rows come from `/api/sessions/ID/rows` in pages of 200 as they
 * come into view, cached per page), background bands alternating per turn, and the inbox lane on
 * the left: a bar per message from its insertion to its fate, in its column (`DeliveryBar.lane`).
 * Bands and bars are drawn only where they overlap the rows in the DOM.
 */
import type { DeliveryBar, Fate, Row, RowPage, SessionView } from "../../src/cli/inspect/api.js"
import { errorText, getJson, isAbort, sessionPath } from "./api.js"
import { h } from "./dom.js"
import { count, duration, elapsed, oneLine } from "./text.js"

/** The height of a row, in pixels (the CSS has the same: `--row-h`). */
export const rowHeight = 24
/** The width of a lane of the inbox lane, in pixels. */
const laneWidth = 10
/** Rows per fetched page. */
const pageSize = 200
/** Rows kept in the DOM above and below the ones in view. */
const margin = 30

/** What the timeline tells its session view. */
export interface TimelineEvents {
  readonly select: (row: Row) => void
  readonly story: (message: string) => void
  readonly error: (message: string) => void
  /** The follow state changed because the view was scrolled to or away from the last row. */
  readonly follow: (on: boolean) => void
}

/** The timeline of one session. */
export interface Timeline {
  /** The column titles, to be put above the timeline. */
  readonly header: HTMLElement
  /** The scrolling element (`[data-timeline]`): its scroll height is the rows × `rowHeight`. */
  readonly element: HTMLElement
  /**
   * Shows `view`, a newer version of the session after the first: the cached pages that hold
   * the last 200 rows of the previous version, or any row past them, are fetched again when in
   * view (a live change adds rows and may complete recent ones, such as a tool call's duration).
   */
  readonly update: (view: SessionView) => void
  readonly select: (row: number | undefined) => void
  /** Scrolls so that `row` is in view, a few rows below the top. */
  readonly reveal: (row: number) => void
  /** Turns following (keeping the last row in view) on or off; on scrolls to the end. */
  readonly setFollow: (on: boolean) => void
  /** Marks the bar of the message whose story is open (`undefined`: none). */
  readonly setActive: (message: string | undefined) => void
}

/** A fate as one line: `pending`, `entered at turn 2 step 1`, `dropped: rejected`. */
export const fateLine = (fate: Fate): string =>
  fate._tag === "Pending"
    ? "pending"
    : fate._tag === "Entered"
    ? `entered at turn ${fate.turn} step ${fate.step}`
    : `dropped: ${fate.reason}`

const fateWord = (fate: Fate): string => fate._tag.toLowerCase()

/**
 * A cached page: its rows once fetched, and whether they are current (`loaded`), older than the
 * session (`stale`: shown until the new ones come, fetched again when in view), being fetched,
 * or failed (not fetched again until the next live change).
 */
interface Page {
  readonly rows: ReadonlyArray<Row> | undefined
  readonly state: "loaded" | "stale" | "loading" | "failed"
}

/** Makes the timeline of session `session`; requests stop with `signal`. */
export const timeline = (session: string, signal: AbortSignal, on: TimelineEvents): Timeline => {
  const header = h(
    "div",
    { class: "tl-columns" },
    h("span", {}, "time"),
    h("span", { class: "num" }, "turn.step"),
    h("span", {}, "kind"),
    h("span", {}, "label"),
    h("span", {}, "text"),
    h("span", { class: "num" }, "duration"),
    h("span", { class: "num", title: "tokens in/out" }, "usage")
  )
  const bands = h("div", { class: "tl-layer" })
  const bars = h("div", { class: "tl-layer" })
  const rows = h("div", { class: "tl-layer" })
  const canvas = h("div", { class: "tl-canvas" }, bands, rows, bars)
  const element = h("div", { class: "timeline", data: { timeline: "", rows: 0 } }, canvas)

  let view: SessionView | undefined
  let start = 0
  let follow = false
  let selected: number | undefined
  let active: string | undefined
  const pages = new Map<number, Page>()
  // The rows, bands and bars in the DOM, by row index, turn and message id, with what they show.
  const shownRows = new Map<number, { readonly el: HTMLElement; readonly data: Row | undefined }>()
  const shownBars = new Map<string, { readonly el: HTMLElement; readonly bar: DeliveryBar }>()
  let shownRange = ""

  const rowAt = (i: number): Row | undefined => {
    return pages.get(Math.floor(i / pageSize))?.rows?.[i % pageSize]
  }

  const fetchPage = (p: number) => {
    const mark: Page = { rows: pages.get(p)?.rows, state: "loading" }
    pages.set(p, mark)
    getJson<RowPage>(sessionPath(session, `/rows?from=${p * pageSize}&count=${pageSize}`), signal).then(
      (page) => {
        if (pages.get(p) !== mark) return // made stale by a live change meanwhile
        pages.set(p, { rows: page.rows, state: "loaded" })
        schedule()
      },
      (error: unknown) => {
        if (isAbort(error) || pages.get(p) !== mark) return
        pages.set(p, { rows: mark.rows, state: "failed" })
        on.error(errorText(error))
      }
    )
  }

  const rowElement = (i: number, r: Row | undefined): HTMLElement => {
    const top = `${i * rowHeight}px`
    if (r === undefined) {
      const el = h("div", { class: "row placeholder", data: { placeholder: i } }, h("span", { class: "muted" }, "…"))
      el.style.top = top
      return el
    }
    const el = h(
      "div",
      {
        class: `row${r.level === undefined ? "" : ` level-${r.level}`}${selected === i ? " selected" : ""}`,
        data: { row: i, kind: r.kind, seq: r.seq, turn: r.turn, step: r.step },
        onclick: () => on.select(r)
      },
      h("span", { class: "c-time" }, elapsed(r.time, start)),
      h("span", { class: "c-ts", data: { col: "turnstep" } }, `${r.turn}.${r.step}`),
      h("span", { class: "c-kind" }, h("span", { class: `kind kind-${r.kind}` }, r.kind)),
      h("span", { class: "c-label", data: { col: "label" }, title: r.label }, r.label),
      h("span", { class: "c-text", data: { col: "text" } }, r.text === undefined ? "" : oneLine(r.text)),
      h("span", { class: "c-dur num" }, r.durationMs === undefined ? "" : duration(r.durationMs)),
      h(
        "span",
        {
          class: "c-usage num",
          title: r.usage === undefined
            ? undefined
            : `input ${count(r.usage.input)} · output ${count(r.usage.output)} · cache read ${
              count(r.usage.cacheRead)
            } · reasoning ${count(r.usage.reasoning)}`
        },
        r.usage === undefined ? "" : `${count(r.usage.input)}/${count(r.usage.output)}`
      )
    )
    el.style.top = top
    return el
  }

  const barElement = (bar: DeliveryBar, lastRow: number): HTMLElement => {
    const end = bar.fateRow ?? lastRow
    const el = h("div", {
      class: `bar dk-${bar.kind} fate-${fateWord(bar.fate)}${bar.id === active ? " active" : ""}`,
      data: {
        bar: bar.id,
        kind: bar.kind,
        fate: fateWord(bar.fate),
        ...(bar.fate._tag === "Dropped" ? { reason: bar.fate.reason } : {})
      },
      title: `${bar.kind} · ${bar.source} · ${fateLine(bar.fate)}\n${bar.text}`,
      onclick: (event) => {
        event.stopPropagation()
        on.story(bar.id)
      }
    })
    el.style.left = `${bar.lane * laneWidth + 3}px`
    el.style.top = `${bar.insertedRow * rowHeight + rowHeight / 2 - 3}px`
    el.style.height = `${Math.max(0, end - bar.insertedRow) * rowHeight + 6}px`
    return el
  }

  const render = () => {
    scheduled = false
    if (view === undefined) return
    const total = view.rows
    const top = element.scrollTop
    const first = Math.max(0, Math.floor(top / rowHeight) - margin)
    const last = Math.min(total - 1, Math.ceil((top + element.clientHeight) / rowHeight) + margin)
    if (last >= first) {
      for (let p = Math.floor(first / pageSize); p <= Math.floor(last / pageSize); p++) {
        const state = pages.get(p)?.state
        if (state === undefined || state === "stale") fetchPage(p)
      }
    }

    // The rows in the DOM are always one run of indices, in order: new ones go before or after it.
    for (const i of [...shownRows.keys()]) {
      if (i < first || i > last) {
        shownRows.get(i)!.el.remove()
        shownRows.delete(i)
      }
    }
    const lowest = shownRows.size === 0 ? Infinity : Math.min(...shownRows.keys())
    const before: Array<HTMLElement> = []
    const after: Array<HTMLElement> = []
    for (let i = first; i <= last; i++) {
      const data = rowAt(i)
      const entry = shownRows.get(i)
      if (entry !== undefined && entry.data === data) continue
      const el = rowElement(i, data)
      shownRows.set(i, { el, data })
      if (entry !== undefined) entry.el.replaceWith(el)
      else if (i < lowest) before.push(el)
      else after.push(el)
    }
    rows.prepend(...before)
    rows.append(...after)

    // Bands and bars change only with the range or the view.
    const range = `${first}:${last}:${view.version}`
    if (range === shownRange) return
    shownRange = range
    bands.replaceChildren(
      ...view.turns.filter((t) => t.endRow >= first && t.startRow <= last).map((t) => {
        const el = h("div", { class: `band ${t.turn % 2 === 0 ? "even" : "odd"}` })
        el.style.top = `${t.startRow * rowHeight}px`
        el.style.height = `${(t.endRow - t.startRow + 1) * rowHeight}px`
        return el
      })
    )
    const keep = new Set<string>()
    for (const bar of view.deliveries) {
      if ((bar.fateRow ?? total - 1) < first || bar.insertedRow > last) continue
      keep.add(bar.id)
      const shown = shownBars.get(bar.id)
      if (shown !== undefined && shown.bar === bar) continue
      const el = barElement(bar, total - 1)
      if (shown !== undefined) shown.el.replaceWith(el)
      else bars.append(el)
      shownBars.set(bar.id, { el, bar })
    }
    for (const [id, shown] of shownBars) {
      if (!keep.has(id)) {
        shown.el.remove()
        shownBars.delete(id)
      }
    }
  }

  let scheduled = false
  const schedule = () => {
    if (scheduled) return
    scheduled = true
    requestAnimationFrame(render)
  }

  const atBottom = () => element.scrollTop + element.clientHeight >= element.scrollHeight - rowHeight / 2
  const toBottom = () => {
    element.scrollTop = element.scrollHeight
  }

  element.addEventListener("scroll", () => {
    const now = atBottom()
    if (now !== follow) {
      follow = now
      on.follow(follow)
    }
    schedule()
  })
  new ResizeObserver(schedule).observe(element)

  return {
    header,
    element,
    update: (next) => {
      const firstView = view === undefined
      // When the log shrank (it was replaced), nothing cached holds.
      const firstChanged = view === undefined || next.rows < view.rows ? 0 : Math.max(0, view.rows - pageSize)
      for (const [p, page] of pages) if ((p + 1) * pageSize > firstChanged) pages.set(p, { rows: page.rows, state: "stale" })
      view = next
      start = next.summary.createdAt !== 0 ? next.summary.createdAt : next.turns[0]?.startTime ?? 0
      element.setAttribute("data-rows", String(next.rows))
      const lanes = `${Math.max(1, next.lanes) * laneWidth + 4}px`
      element.style.setProperty("--lanes-w", lanes)
      header.style.setProperty("--lanes-w", lanes)
      canvas.style.height = `${next.rows * rowHeight}px`
      if (firstView) {
        follow = atBottom()
        on.follow(follow)
      } else if (follow) toBottom()
      shownRange = ""
      schedule()
    },
    select: (row) => {
      shownRows.get(selected ?? -1)?.el.classList.remove("selected")
      selected = row
      shownRows.get(row ?? -1)?.el.classList.add("selected")
    },
    reveal: (row) => {
      const top = row * rowHeight
      if (top < element.scrollTop || top > element.scrollTop + element.clientHeight - 3 * rowHeight) {
        element.scrollTop = Math.max(0, top - 4 * rowHeight)
      }
      schedule()
    },
    setFollow: (value) => {
      follow = value
      if (value) toBottom()
    },
    setActive: (message) => {
      shownBars.get(active ?? "")?.el.classList.remove("active")
      active = message
      shownBars.get(active ?? "")?.el.classList.add("active")
    }
  }
}
