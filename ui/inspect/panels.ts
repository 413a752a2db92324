/**
 * The side panels of a session view: a row's detail (its fields, its raw event, and what it
 * leads to), a step's model request (the messages the model was given), and a message's story
 * (its fate and each step of its life, with the event that proves it). Each loads into its
 * container and replaces the container's content only when the answer is in, so loading it
 * again (after a live change) does not flicker.
 */
import type { EventPage, MessageStory, RequestView, Row, ViewMessage } from "../../src/cli/inspect/api.js"
import { errorText, getJson, isAbort, sessionPath } from "./api.js"
import { append, type Child, h, json, replace, sessionLink } from "./dom.js"
import { count, dateTime, duration, elapsed } from "./text.js"
import { fateLine } from "./timeline.js"

/** What the panels' buttons open. */
export interface PanelActions {
  readonly story: (message: string) => void
  readonly request: (turn: number, step: number) => void
  readonly row: (row: number) => void
  readonly close: () => void
}

const panel = (kind: string, title: string, close: () => void, ...body: ReadonlyArray<Child>): HTMLElement =>
  h(
    "section",
    { class: "panel", data: { panel: kind } },
    h("header", {}, h("h2", {}, title), h("button", { class: "close", title: "close", onclick: close }, "×")),
    ...body
  )

const fields = (pairs: ReadonlyArray<readonly [string, Child]>): HTMLElement =>
  h("dl", { class: "fields" }, ...pairs.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))

const button = (label: string, onclick: () => void, title?: string): HTMLElement =>
  h("button", { class: "link", onclick, title }, label)

/** Runs `load` and puts its content into `container`, or an error line; `loading` shows meanwhile. */
const into = (container: HTMLElement, load: () => Promise<Child>, loading = true): void => {
  if (loading) replace(container, h("div", { class: "muted" }, "loading…"))
  load().then(
    (content) => replace(container, content),
    (error: unknown) => {
      if (!isAbort(error)) replace(container, h("div", { class: "error" }, errorText(error)))
    }
  )
}

/** The detail of a row: its fields, its raw event, and buttons to its request, stories and child. */
export const detailPanel = (session: string, r: Row, start: number, signal: AbortSignal, act: PanelActions) => {
  const raw = h("div")
  into(raw, async () => {
    const page = await getJson<EventPage>(sessionPath(session, `/events?from=${r.seq}&count=1`), signal)
    return page.events.length === 0 ? h("div", { class: "muted" }, "no event at this seq") : json(page.events[0])
  })
  const opens: Array<Child> = []
  if (r.request === true) opens.push(button("model request", () => act.request(r.turn, r.step)))
  for (const id of r.ids ?? []) opens.push(button(`story of ${id}`, () => act.story(id)))
  if (r.child !== undefined) opens.push(h("span", {}, "open child session ", sessionLink(r.child)))
  const pairs: Array<readonly [string, Child]> = [
    ["row", String(r.row)],
    ["seq", String(r.seq)],
    ["time", r.time === 0 ? "-" : `${dateTime(r.time)} (${elapsed(r.time, start)} since the start)`],
    ["turn.step", `${r.turn}.${r.step}`],
    ["kind", r.kind],
    ["label", r.label]
  ]
  if (r.level !== undefined) pairs.push(["level", r.level])
  if (r.deliveryKind !== undefined) pairs.push(["delivery", r.deliveryKind])
  if (r.source !== undefined) pairs.push(["source", r.source])
  if (r.decision !== undefined) pairs.push(["decision", r.decision])
  if (r.name !== undefined) pairs.push(["name", r.name])
  if (r.callId !== undefined) pairs.push(["call id", r.callId])
  if (r.durationMs !== undefined) pairs.push(["duration", duration(r.durationMs)])
  if (r.finish !== undefined) pairs.push(["finish", r.finish])
  if (r.usage !== undefined) {
    pairs.push([
      "usage",
      `in ${count(r.usage.input)} · out ${count(r.usage.output)} · cache read ${count(r.usage.cacheRead)} · reasoning ${
        count(r.usage.reasoning)
      } · total ${count(r.usage.total)}`
    ])
  }
  if (r.ids !== undefined) pairs.push(["ids", r.ids.join(", ")])
  return panel(
    "detail",
    `${r.kind} · row ${r.row}`,
    act.close,
    fields(pairs),
    opens.length === 0 ? null : h("div", { class: "opens" }, ...opens),
    r.text === undefined ? null : h("pre", { class: "text" }, r.text),
    h("h3", {}, "event"),
    raw
  )
}

/** A message; its id opens its story when `story` is given. */
const message = (m: ViewMessage, story?: (id: string) => void): HTMLElement =>
  h(
    "div",
    { class: `message role-${m.role}`, data: { message: m.id ?? "", role: m.role } },
    h(
      "div",
      { class: "message-head" },
      h("span", { class: "role" }, m.role),
      m.source === undefined ? null : h("span", { class: "muted" }, ` · ${m.source}`),
      m.id === undefined ? null : " · ",
      m.id === undefined ? null : story === undefined
        ? h("span", { class: "muted id" }, m.id)
        : button(m.id, () => story(m.id!), "open the story of this message")
    ),
    ...m.blocks.map((b) =>
      h(
        "div",
        { class: `block block-${b.type}` },
        h("span", { class: "block-type" }, b.type),
        h("pre", { class: "text" }, b.text)
      )
    )
  )

/** The model request of turn `turn` step `step`. */
export const requestPanel = (session: string, turn: number, step: number, signal: AbortSignal, act: PanelActions) => {
  const body = h("div")
  into(body, async () => {
    const req = await getJson<RequestView>(sessionPath(session, `/request?turn=${turn}&step=${step}`), signal)
    const pairs: Array<readonly [string, Child]> = [["seq", String(req.seq)]]
    if (req.provider !== undefined) pairs.push(["provider", req.provider])
    if (req.model !== undefined) pairs.push(["model", req.model])
    pairs.push(["tools", req.tools.length === 0 ? "none" : req.tools.join(", ")])
    pairs.push(["messages", String(req.messages.length)])
    const out = h("div", {}, fields(pairs))
    if (req.instructions !== undefined) {
      append(out, h("details", {}, h("summary", {}, "instructions"), h("pre", { class: "text" }, req.instructions)))
    }
    append(out, h("div", { class: "messages" }, ...req.messages.map((m) => message(m, act.story))))
    return out
  })
  return panel("request", `model request · turn ${turn} step ${step}`, act.close, body)
}

/**
 * Loads the story of message `id` into `body`: at first with a loading line (`first`), and again
 * after a live change without one.
 */
export const loadStory = (
  body: HTMLElement,
  session: string,
  id: string,
  signal: AbortSignal,
  act: PanelActions,
  first: boolean
): void =>
  into(body, async () => {
    const story = await getJson<MessageStory>(sessionPath(session, `/messages/${encodeURIComponent(id)}`), signal)
    const pairs: Array<readonly [string, Child]> = [["id", story.id]]
    if (story.kind !== undefined) pairs.push(["kind", story.kind])
    if (story.source !== undefined) pairs.push(["source", story.source])
    return h(
      "div",
      {},
      h(
        "div",
        { class: `fate-line fate-${story.fate?._tag.toLowerCase() ?? "none"}`, data: { "fate-line": "" } },
        story.fate === undefined ? "never went through the inbox" : fateLine(story.fate)
      ),
      fields(pairs),
      story.message === undefined ? null : message(story.message),
      h("h3", {}, "steps"),
      h(
        "ol",
        { class: "story-steps" },
        ...story.steps.map((s) =>
          h(
            "li",
            { data: { "story-step": s.what } },
            h(
              "div",
              {},
              h("span", { class: `step-what what-${s.what}` }, s.what),
              " ",
              button(`row ${s.row}`, () => act.row(s.row), `seq ${s.seq}`),
              " ",
              h("span", { class: "muted" }, dateTime(s.time))
            ),
            h("div", {}, s.text),
            h("details", {}, h("summary", {}, "event"), json(s.event))
          )
        )
      )
    )
  }, first)

/** The story panel of message `id`, with its content container (for `loadStory` after a live change). */
export const storyPanel = (session: string, id: string, signal: AbortSignal, act: PanelActions) => {
  const body = h("div")
  loadStory(body, session, id, signal, act, true)
  return { element: panel("story", `story · ${id}`, act.close, body), body }
}
