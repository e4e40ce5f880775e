/** Reading query plans in tests: how many rows of a table a statement really read. */

/** A node of `explain (analyze, format json)`'s plan, as far as rowsRead looks. */
export interface PlanNode {
  "Relation Name"?: string;
  "Actual Rows": number;
  "Actual Loops": number;
  "Rows Removed by Filter"?: number;
  "Rows Removed by Index Recheck"?: number;
  Plans?: PlanNode[];
}

/** Rows of `table` the plan read (returned or filtered out), over every loop. */
export function rowsRead(n: PlanNode, table: string): number {
  const own = n["Relation Name"] === table ? (n["Actual Rows"] + (n["Rows Removed by Filter"] ?? 0) + (n["Rows Removed by Index Recheck"] ?? 0)) * n["Actual Loops"] : 0;
  return own + (n.Plans ?? []).reduce((s, p) => s + rowsRead(p, table), 0);
}

/** A statement as postgres.js's `debug` option saw it sent. */
export interface SentStatement {
  query: string;
  parameters: unknown[];
}
