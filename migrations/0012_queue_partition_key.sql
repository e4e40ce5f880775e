-- Queued events carry their partition key (kind, period): a drain's join to the events
-- then reads one partition's id index per event instead of every partition's. Rows
-- queued before this migration take theirs from their events.
ALTER TABLE "projection_queue" ADD COLUMN "kind" text;--> statement-breakpoint
ALTER TABLE "projection_queue" ADD COLUMN "period" date;--> statement-breakpoint
UPDATE "projection_queue" q SET "kind" = e."kind", "period" = e."period" FROM "order_events" e WHERE e."id" = q."event_id";--> statement-breakpoint
ALTER TABLE "projection_queue" ALTER COLUMN "kind" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "projection_queue" ALTER COLUMN "period" SET NOT NULL;
