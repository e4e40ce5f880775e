-- Every message pays each of its indexes and checks inside the projection's transaction.
-- A delivery is written by the statement that writes its message (the outbox), so the
-- foreign key's lookup per delivery checks what that statement guarantees.
ALTER TABLE "notification_deliveries" DROP CONSTRAINT "notification_deliveries_message_id_notification_messages_id_fk";--> statement-breakpoint
-- The rider-location throttle reads an order's messages through the sequence index instead.
DROP INDEX "notification_messages_order_type_idx";--> statement-breakpoint
-- Claiming a delivery sets only leased_until (not indexed): with room on the page that
-- update is HOT (no new index entries); without it, each claim rewrote four indexes.
ALTER TABLE "notification_deliveries" SET (fillfactor = 70);
