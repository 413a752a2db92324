/**
 * Flat strings (§2: ids are stored flattened). `crypto.randomUUID()` and template
 * literals build a tree of concatenations that a kept id would otherwise carry (~480 bytes per
 * UUID measured here, ~58 flat). Reading a character makes V8 flatten the string in place (a
 * numeric conversion does not).
 */

/** Returns the same string, flattened in place. */
export const flatten = (s: string): string => {
  // Kept in a module variable so that the optimizing compiler cannot drop the read.
  if (s.length > 0) flatSink ^= s.charCodeAt(0)
  return s
}
// eslint-disable-next-line @typescript-eslint/no-unused-vars -- a sink: written so that the read above is kept
let flatSink = 0
