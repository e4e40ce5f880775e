-- Personal data is kept PII_RETENTION_DAYS from when tracklane recorded that an order
-- finished (finished_at, its own clock), no longer from status_at: that is the provider's
-- time of the terminal event, which a clock far off or a late callback made too early or
-- never (docs/operations.md, "Personal data").
DROP INDEX "orders_pii_due_idx";--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "finished_at" timestamp with time zone;--> statement-breakpoint
-- No backfill of the orders that finished before: ADD COLUMN holds orders exclusively until
-- the migration commits, and rewriting every finished order (a year of them) under that lock
-- would stop every read and write of orders for minutes. The daily redaction fills in
-- finished_at of those not redacted yet, a batch at a time, from their row's last change
-- (orders/store.ts fillFinishedAt); those already redacted need none.
--
-- Orders redacted before the provider's answers were (src/retention/redact.ts): due again
-- at once when one of their commands' answers holds customer_details, so the next daily run
-- takes the customer's details out of it too. They finished when the rule that redacted them
-- said (status_at), no later than that redaction.
UPDATE "orders" SET "redacted_at" = NULL, "finished_at" = least("status_at", "redacted_at")
WHERE "redacted_at" IS NOT NULL
  AND "id" IN (SELECT "order_id" FROM "commands" WHERE "response" @? '$.**.customer_details');--> statement-breakpoint
CREATE INDEX "orders_pii_due_idx" ON "orders" USING btree ("finished_at") WHERE "orders"."redacted_at" is null and "orders"."status" in ('DELIVERED', 'CANCELLED', 'CANCELLED_BY_CUSTOMER', 'RETURNED_TO_SELLER');
