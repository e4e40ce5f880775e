/**
 * drizzle-orm, loaded with require(): through import, Node 24 re-reads its 180 KB export
 * map for each of the ~400 files an import pulls in, and the process kept ~150 MB more
 * heap. Only migrations and drizzle-kit use drizzle at run time.
 */
import { createRequire } from "node:module";
import type * as Orm from "drizzle-orm";
import type * as PgCore from "drizzle-orm/pg-core";
import type * as PostgresJs from "drizzle-orm/postgres-js";
import type * as Migrator from "drizzle-orm/postgres-js/migrator";

// import.meta.url is absent where a tool compiles this file to CommonJS (drizzle-kit).
const load = createRequire(import.meta.url ?? __filename);

export const { and, asc, desc, eq, gt, lt, or, sql } = load("drizzle-orm") as typeof Orm;
export const { bigint, boolean, check, date, doublePrecision, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex } =
  load("drizzle-orm/pg-core") as typeof PgCore;
export const { drizzle } = load("drizzle-orm/postgres-js") as typeof PostgresJs;
export const { migrate } = load("drizzle-orm/postgres-js/migrator") as typeof Migrator;
