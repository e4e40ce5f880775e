-- Incremental projection. Each order row keeps the fold of its merged events
-- (projection_state), and the queue holds events instead of orders, so a drain merges
-- each new event into its order's state exactly once instead of re-reading the order's
-- whole history. Null state: the next projection of the order derives it from the log.
ALTER TABLE "orders" ADD COLUMN "projection_state" text;--> statement-breakpoint
ALTER TABLE "projection_queue" RENAME TO "projection_queue_0002";--> statement-breakpoint
CREATE TABLE "projection_queue" (
	"event_id" bigint PRIMARY KEY NOT NULL,
	"enqueued_at" timestamp with time zone DEFAULT now() NOT NULL
);--> statement-breakpoint
-- Orders still queued under the old layout: queue the latest event of each. Every row's
-- state is null at this point, so that event's drain re-derives the order from the log.
INSERT INTO "projection_queue" ("event_id", "enqueued_at")
SELECT e.id, min(q.enqueued_at)
FROM "projection_queue_0002" q
CROSS JOIN LATERAL (
	SELECT id FROM "order_events" e
	WHERE e.svc_order_id = q.svc_order_id OR e.client_order_id = q.client_order_id
	ORDER BY id DESC LIMIT 1
) e
GROUP BY e.id;--> statement-breakpoint
DROP TABLE "projection_queue_0002";
