import postgres from "postgres";
import type { Sql } from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import type { PostgresJsDatabase } from "drizzle-orm/postgres-js";
import * as schema from "./schema/index.ts";

export type Db = PostgresJsDatabase<typeof schema>;

export interface Database {
  /** postgres.js, for the few hot or set-based statements written as SQL. */
  sql: Sql;
  /** drizzle over the same pool, for everything else. */
  db: Db;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  max?: number;
  /** Application name shown in pg_stat_activity. */
  name?: string;
}

function pool(url: string, max: number, name: string): Sql {
  return postgres(url, {
    max,
    onnotice: () => {},
    connection: { application_name: name },
    // A dead server must surface as an error (503), not as requests waiting forever.
    connect_timeout: 5,
    idle_timeout: 60,
  });
}

/**
 * Two pools: drizzle replaces postgres.js's date parsers and serializers on the client it
 * wraps (it maps dates itself), which would hand raw SQL strings instead of Dates. Raw
 * SQL (ingest, projection) gets the full pool; drizzle (API reads, commands) a smaller one.
 */
export function createDatabase(url: string, options: DatabaseOptions = {}): Database {
  const max = options.max ?? 10;
  const name = options.name ?? "tracklane";
  const sql = pool(url, max, name);
  const drizzleSql = pool(url, Math.max(2, Math.ceil(max / 2)), name);
  const db = drizzle(drizzleSql, { schema, casing: "snake_case" });
  return {
    sql,
    db,
    close: async () => {
      await Promise.all([sql.end({ timeout: 5 }), drizzleSql.end({ timeout: 5 })]);
    },
  };
}

/** SQLSTATE classes and socket errors that mean "the database is not there right now". */
const UNAVAILABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
  "53300", // too_many_connections
]);

/** True for connection-level failures, also when wrapped (drizzle wraps driver errors). */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; typeof e === "object" && e !== null && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && (UNAVAILABLE_CODES.has(code) || code.startsWith("08"))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
