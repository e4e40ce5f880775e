/**
 * What the read server (DATABASE_READ_URL) says about itself, for the console's System
 * page: whether it is a replica, and how far behind the primary its pages may be.
 */
import type { Tx } from "./client.ts";

export interface ReadServerState {
  /** In recovery: a standby replaying the primary's WAL. False: a writable server. */
  replica: boolean;
  /**
   * Seconds since the primary committed the last transaction this replica replayed, or 0
   * when it has replayed everything it received. Null: not a replica, or nothing replayed
   * since it started.
   */
  lagSeconds: number | null;
}

/**
 * The replay timestamp alone would count an idle primary's quiet as lag (nothing to replay,
 * so the last replayed commit grows old): a standby that has replayed all the WAL it
 * received is caught up, whatever that timestamp says.
 */
export async function readServerState(sql: Tx): Promise<ReadServerState> {
  const [row] = await sql<{ replica: boolean; lag_seconds: number | null }[]>`
    select pg_is_in_recovery() as replica,
           case when not pg_is_in_recovery() then null
                when pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() then 0
                else extract(epoch from now() - pg_last_xact_replay_timestamp())
           end::float8 as lag_seconds`;
  return { replica: row?.replica ?? false, lagSeconds: row?.lag_seconds ?? null };
}
