/**
 * Reading `LogOptions` (§3.1): which flavour a log is and where its inherited prefix
 * ends.
 */
import type { LogOptions } from "../SessionLog.js"

/** Whether the options describe a DSH v0 log (`dsh`, else `header.version === 0`). */
export const isDsh = (options: LogOptions | undefined): boolean =>
  options?.dsh ?? (options?.header !== undefined && options.header.version === 0)

/** The length of the inherited prefix (`seedLength`, else `header.seedLength`, else 0). */
export const seedLengthOf = (options: LogOptions | undefined): number => {
  const n = options?.seedLength ?? options?.header?.seedLength
  return typeof n === "number" && n > 0 ? n : 0
}
