-- Deduplication local to the order (docs/scale.md): the unique index leads with the order's
-- id, so inserts land among the active orders' pages instead of on a random page of a
-- history-sized index (which had to stay in memory, and cost a full-page write per insert
-- after each checkpoint). The new index is built before the old one goes.
CREATE UNIQUE INDEX "order_events_order_dedupe_idx" ON "order_events" USING btree (coalesce("svc_order_id", "client_order_id"),"dedupe_key");--> statement-breakpoint
DROP INDEX "order_events_dedupe_key_idx";
