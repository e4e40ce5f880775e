/**
 * drizzle-orm, loaded with require() instead of import. drizzle-orm 0.45's package.json
 * lists about 630 export paths (180 KB), and Node 24's ES module loader handles that
 * package.json again for each of the ~400 drizzle files an import pulls in: importing
 * drizzle-orm/postgres-js took ~150 MB of transient heap that V8 then kept, so a process
 * idled at ~220 MB RSS; through require() it idles at ~70 MB. drizzle-orm 1.0 collapses
 * the export map (drizzle-team/drizzle-orm#5934). Types still come from the package's own
 * declarations; every runtime use of drizzle goes through this module.
 */
import { createRequire } from "node:module";
import type * as Orm from "drizzle-orm";
import type * as PgCore from "drizzle-orm/pg-core";
import type * as PostgresJs from "drizzle-orm/postgres-js";
import type * as Migrator from "drizzle-orm/postgres-js/migrator";

// import.meta.url is absent where a tool compiles this file to CommonJS (drizzle-kit).
const load = createRequire(import.meta.url ?? __filename);

export const { and, asc, desc, eq, gt, lt, or, sql } = load("drizzle-orm") as typeof Orm;
export const { bigint, boolean, check, doublePrecision, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } =
  load("drizzle-orm/pg-core") as typeof PgCore;
export const { drizzle } = load("drizzle-orm/postgres-js") as typeof PostgresJs;
export const { migrate } = load("drizzle-orm/postgres-js/migrator") as typeof Migrator;
