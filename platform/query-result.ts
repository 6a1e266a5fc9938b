/** What a query answers, whichever driver ran it (platform/db.ts) or kept it (platform/read-cache.ts). */
export interface QueryResult<R> {
  rows: R[];
  /** Rows changed by an INSERT/UPDATE/DELETE, or returned by a SELECT. */
  rowCount: number;
}
