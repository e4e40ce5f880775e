-- Every message pays each of its indexes inside the projection's transaction: the
-- rider-location throttle reads an order's messages through the sequence index instead.
DROP INDEX "notification_messages_order_type_idx";--> statement-breakpoint
-- Claiming a delivery sets only leased_until (not indexed): with room on the page that
-- update is HOT (no new index entries); without it, each claim rewrote four indexes.
ALTER TABLE "notification_deliveries" SET (fillfactor = 70);
