/**
 * How the CLI and the PostgreSQL store name a database in their messages: `host:port/db`, never the URL itself
 * (which may carry a password).
 *
 * @since 0.1.0
 */

/**
 * `postgres://user:secret@host:5432/db` → `host:5432/db`; `(an invalid URL)` when it is not one.
 *
 * @since 0.1.0
 */
export const pgWhere = (url: string): string => {
  try {
    const u = new URL(url)
    return `${u.hostname}${u.port === "" ? "" : `:${u.port}`}${u.pathname}`
  } catch {
    return "(an invalid URL)"
  }
}
