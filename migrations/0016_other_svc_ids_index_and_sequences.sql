-- The last notification sequence of orders whose messages retention purged, so that an
-- order's next message continues above it (src/notify/outbox.ts, purgeMessages).
CREATE TABLE "notification_sequences" (
	"order_id" bigint PRIMARY KEY NOT NULL,
	"last_sequence" integer NOT NULL
);
--> statement-breakpoint
-- Orders with more than one provider id (a second provider order for one client_order_id):
-- intake asks whether a bare order_id is one of them (src/orders/read.ts, knownClientIds).
-- Few such orders, so a small partial index.
CREATE INDEX "orders_other_svc_ids_idx" ON "orders" USING gin ("svc_order_ids") WHERE cardinality("orders"."svc_order_ids") > 1;