/**
 * Building the page's elements: `h` makes an element from a tag, a few properties and children,
 * and every string it is given (child text, `title`) goes through `visible`, as text: the page
 * never parses markup from the server. Links to sessions are made by `sessionLink` only, for ids
 * of the store's alphabet.
 */
import { isSessionId, visible } from "./text.js"

/** A child of `h`: a node, text, or nothing (skipped). */
export type Child = Node | string | number | null | undefined | false

/** The properties `h` sets. `data` becomes `data-*` attributes (values as given: ids, kinds). */
export interface Props {
  readonly class?: string | undefined
  readonly title?: string | undefined
  readonly data?: Readonly<Record<string, string | number>> | undefined
  readonly href?: `#/${string}` | undefined
  readonly onclick?: ((event: MouseEvent) => void) | undefined
}

/** An element with its properties and children; strings become text nodes of visible text. */
export const h = <K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: ReadonlyArray<Child>
): HTMLElementTagNameMap[K] => {
  const el = document.createElement(tag)
  if (props.class !== undefined) el.className = props.class
  if (props.title !== undefined) el.title = visible(props.title)
  if (props.data !== undefined) { for (const [k, v] of Object.entries(props.data)) el.setAttribute(`data-${k}`, String(v)) }
  if (props.href !== undefined) el.setAttribute("href", props.href)
  if (props.onclick !== undefined) (el as HTMLElement).addEventListener("click", props.onclick)
  append(el, ...children)
  return el
}

/** Appends children as `h` does. */
export const append = (el: Element, ...children: ReadonlyArray<Child>): void => {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue
    el.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(visible(String(c))) : c)
  }
}

/** Replaces an element's children. */
export const replace = (el: Element, ...children: ReadonlyArray<Child>): void => {
  el.replaceChildren()
  append(el, ...children)
}

/** A link to a session (`#/s/ID`), or the id as plain text when it is not of the store's alphabet. */
export const sessionLink = (id: string): HTMLElement =>
  isSessionId(id) ? h("a", { href: `#/s/${encodeURIComponent(id)}` }, id) : h("span", {}, id)

/** A value as pretty-printed JSON text. */
export const json = (value: unknown): HTMLElement => h("pre", { class: "json" }, JSON.stringify(value, null, 2) ?? "undefined")
