/**
 * The sessions list (`#/`): a table of the store's sessions, filtered by the search box (id and
 * title, case-insensitive) and sorted by the clicked column (last activity, newest first, by
 * default). `/api/live` says when to fetch the list again; sessions that could not be read are
 * listed under the table.
 */
import type { SessionList, SessionStatus, SessionSummary } from "../../src/cli/inspect/api.js"
import { errorText, getJson, isAbort } from "./api.js"
import { append, h, replace, sessionLink } from "./dom.js"
import { count, dateTime, usd, visible } from "./text.js"

/** The words of the status badges (the test hooks read them). */
export const statusWord: Record<SessionStatus, string> = {
  idle: "idle",
  running: "running",
  "open-turn": "open turn",
  waiting: "waiting"
}

const statusTitle: Record<SessionStatus, string> = {
  idle: "no turn open",
  running: "a turn is open and a live writer holds the session",
  "open-turn": "a turn is open and no writer holds it (resume repairs it)",
  waiting: "waiting for approval"
}

/** A status badge. */
export const statusBadge = (status: SessionStatus): HTMLElement =>
  h("span", { class: `badge status-${status}`, title: statusTitle[status] }, statusWord[status])

/** Tokens as their total, with the parts in the title. */
export const tokensCell = (t: SessionSummary["tokens"]): HTMLElement =>
  h("span", {
    title: `input ${count(t.input)} · output ${count(t.output)} · cache read ${count(t.cacheRead)} · reasoning ${
      count(t.reasoning)
    }`
  }, count(t.total))

/** A time to the minute, with the seconds in its title. */
const time = (t: number): HTMLElement => h("span", { title: dateTime(t) }, dateTime(t, false))

interface Column {
  readonly key: string
  readonly label: string
  readonly sortBy?: (s: SessionSummary) => string | number
  readonly numeric?: boolean
  readonly cell: (s: SessionSummary) => HTMLElement | string
}

const columns: ReadonlyArray<Column> = [
  { key: "id", label: "id", sortBy: (s) => s.id, cell: (s) => sessionLink(s.id) },
  { key: "title", label: "title", sortBy: (s) => s.title.toLowerCase(), cell: (s) => s.title },
  { key: "created", label: "created", sortBy: (s) => s.createdAt, cell: (s) => time(s.createdAt) },
  { key: "activity", label: "last activity", sortBy: (s) => s.lastActivity, cell: (s) => time(s.lastActivity) },
  { key: "status", label: "status", sortBy: (s) => s.status, cell: (s) => statusBadge(s.status) },
  { key: "turns", label: "turns", numeric: true, sortBy: (s) => s.turns, cell: (s) => count(s.turns) },
  { key: "events", label: "events", numeric: true, sortBy: (s) => s.events, cell: (s) => count(s.events) },
  { key: "tokens", label: "tokens", numeric: true, sortBy: (s) => s.tokens.total, cell: (s) => tokensCell(s.tokens) },
  {
    key: "cost",
    label: "cost",
    numeric: true,
    sortBy: (s) => s.cost ?? -1,
    cell: (s) => s.cost === undefined ? "" : usd(s.cost)
  },
  {
    key: "parent",
    label: "parent",
    cell: (s) => {
      if (s.parent === undefined) return ""
      const link = s.parentOutside ? h("span", {}, s.parent) : sessionLink(s.parent)
      link.title = visible(s.parent)
      return link
    }
  },
  {
    key: "children",
    label: "children",
    cell: (s) => {
      const span = h("span", { class: "links" })
      for (const c of s.children) append(span, sessionLink(c), " ")
      return span
    }
  }
]

// The search and the sort outlive a visit to a session.
let search = ""
let sort = { key: "activity", descending: true }

/** Renders the list into `root`; the returned function stops its live updates. */
export const listView = (root: HTMLElement): () => void => {
  const controller = new AbortController()
  const errorLine = h("div", { class: "error" })
  const status = h("span", { class: "muted" })
  const input = h("input", { data: { search: "" } })
  input.type = "search"
  input.placeholder = "search id or title"
  input.value = search
  const thead = h("thead")
  const tbody = h("tbody")
  const problems = h("div", { class: "problems" })
  replace(
    root,
    h(
      "div",
      { class: "list-view" },
      h("div", { class: "toolbar" }, input, status),
      errorLine,
      h("table", { class: "sessions" }, thead, tbody),
      problems
    )
  )

  let list: SessionList | undefined
  let request = 0

  const renderHead = () => {
    const tr = h("tr")
    for (const col of columns) {
      const th = h("th", { data: { col: col.key }, class: col.numeric === true ? "num" : undefined }, col.label)
      if (col.sortBy !== undefined) {
        th.classList.add("sortable")
        if (sort.key === col.key) append(th, sort.descending ? " ▼" : " ▲")
        th.addEventListener("click", () => {
          sort = sort.key === col.key ? { key: col.key, descending: !sort.descending } : { key: col.key, descending: false }
          renderHead()
          renderBody()
        })
      }
      tr.append(th)
    }
    replace(thead, tr)
  }

  const renderBody = () => {
    if (list === undefined) return
    const needle = search.toLowerCase()
    const shown = list.sessions.filter((s) =>
      needle === "" || s.id.toLowerCase().includes(needle) || s.title.toLowerCase().includes(needle)
    )
    const by = columns.find((c) => c.key === sort.key)?.sortBy
    if (by !== undefined) {
      shown.sort((a, b) => {
        const x = by(a)
        const y = by(b)
        const order = x < y ? -1 : x > y ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0
        return sort.descending ? -order : order
      })
    }
    tbody.replaceChildren(
      ...shown.map((s) =>
        h(
          "tr",
          { data: { session: s.id } },
          ...columns.map((c) => h("td", { data: { col: c.key }, class: c.numeric === true ? "num" : undefined }, c.cell(s)))
        )
      )
    )
    if (shown.length === 0) {
      const td = h("td", { class: "muted empty" }, list.sessions.length === 0 ? "no sessions" : "no match")
      td.colSpan = columns.length
      tbody.append(h("tr", {}, td))
    }
    replace(status, `${shown.length} of ${list.sessions.length} sessions`)
    replace(
      problems,
      list.problems.length === 0 ? null : h("h3", {}, "Sessions that could not be read"),
      list.problems.length === 0
        ? null
        : h("ul", {}, ...list.problems.map((p) => h("li", {}, h("code", {}, p.id), ": ", p.message)))
    )
  }

  const load = async () => {
    const mine = ++request
    try {
      const fresh = await getJson<SessionList>("/api/sessions", controller.signal)
      if (mine !== request) return
      list = fresh
      replace(errorLine)
      renderBody()
    } catch (error) {
      if (!isAbort(error)) replace(errorLine, errorText(error))
    }
  }

  input.addEventListener("input", () => {
    search = input.value
    renderBody()
  })
  renderHead()
  void load()
  const live = new EventSource("/api/live")
  live.addEventListener("sessions", () => void load())
  return () => {
    live.close()
    controller.abort()
  }
}
