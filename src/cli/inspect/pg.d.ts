// `pg` has no types of its own (the SQL store reaches it through @effect/sql-pg); `sources.ts`
// names the little of it that the inspector's table check uses.
declare module "pg" {
  const pg: unknown
  export default pg
}
