/**
 * The text functions of `agent-loop inspect`'s page (ui/inspect/text.ts): hidden characters made
 * visible, one-line previews, times and durations, and which session ids may be linked.
 */
import { describe, expect, it } from "vitest"
import { duration, elapsed, isSessionId, oneLine, visible } from "../ui/inspect/text.js"

describe("visible", () => {
  it("keeps ordinary text, newlines and tabs", () => {
    expect(visible("plain text\n\tindented, ünïcødé, 日本語, emoji 🙂")).toBe("plain text\n\tindented, ünïcødé, 日本語, emoji 🙂")
  })

  it("shows control characters as tokens", () => {
    expect(visible("a\u0000b\u0007c\rd\u001be\u007ff\u0085g")).toBe(
      "a⟨U+0000⟩b⟨U+0007⟩c⟨U+000D⟩d⟨U+001B⟩e⟨U+007F⟩f⟨U+0085⟩g"
    )
  })

  it("shows bidi controls as tokens", () => {
    expect(visible("invoice\u202Eexe.txt")).toBe("invoice⟨U+202E⟩exe.txt")
    expect(visible("\u200E\u200F\u202A\u202B\u202C\u202D\u2066\u2067\u2068\u2069\u061C")).toBe(
      "⟨U+200E⟩⟨U+200F⟩⟨U+202A⟩⟨U+202B⟩⟨U+202C⟩⟨U+202D⟩⟨U+2066⟩⟨U+2067⟩⟨U+2068⟩⟨U+2069⟩⟨U+061C⟩"
    )
  })

  it("shows invisible format characters as tokens", () => {
    expect(visible("zero\u200Bwidth\u200C\u200D line\u2028para\u2029bom\uFEFF join\u2060")).toBe(
      "zero⟨U+200B⟩width⟨U+200C⟩⟨U+200D⟩ line⟨U+2028⟩para⟨U+2029⟩bom⟨U+FEFF⟩ join⟨U+2060⟩"
    )
  })

  it("leaves markup as it is (the page shows it as text)", () => {
    expect(visible("<img src=x onerror=alert(1)>")).toBe("<img src=x onerror=alert(1)>")
  })
})

describe("formats", () => {
  it("previews on one line", () => {
    expect(oneLine("  first\n\n second\tthird  ")).toBe("first second third")
  })

  it("times since the start as m:ss.mmm", () => {
    expect(elapsed(0, 1000)).toBe("-")
    expect(elapsed(1000, 1000)).toBe("0:00.000")
    expect(elapsed(1000 + 61_234, 1000)).toBe("1:01.234")
    expect(elapsed(1000 + 75 * 60_000 + 5, 1000)).toBe("75:00.005")
    expect(elapsed(500, 1000)).toBe("-0:00.500")
  })

  it("durations", () => {
    expect(duration(850)).toBe("850ms")
    expect(duration(12_345)).toBe("12.3s")
    expect(duration(245_000)).toBe("4m05s")
  })
})

describe("isSessionId", () => {
  it("accepts the store's alphabet only", () => {
    expect(isSessionId("2025-01-02_abc.1")).toBe(true)
    expect(isSessionId("_x")).toBe(true)
    expect(isSessionId(".hidden")).toBe(false)
    expect(isSessionId("")).toBe(false)
    expect(isSessionId("a/b")).toBe(false)
    expect(isSessionId("javascript:alert(1)")).toBe(false)
    expect(isSessionId("a b")).toBe(false)
    expect(isSessionId("a\u202Eb")).toBe(false)
  })
})
