-- Personal data is kept PII_RETENTION_DAYS from when tracklane recorded that an order
-- finished (finished_at, its own clock), no longer from status_at: that is the provider's
-- time of the terminal event, which a clock far off or a late callback made too early or
-- never (docs/operations.md, "Personal data").
DROP INDEX "orders_pii_due_idx";--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "finished_at" timestamp with time zone;--> statement-breakpoint
-- Orders finished before this migration: when tracklane learned it was not recorded. The
-- row's last write (updated_at, tracklane's clock too) came no earlier, so none of them is
-- redacted sooner than PII_RETENTION_DAYS after tracklane knew it had finished.
UPDATE "orders" SET "finished_at" = "updated_at" WHERE "status" in ('DELIVERED', 'CANCELLED', 'CANCELLED_BY_CUSTOMER', 'RETURNED_TO_SELLER');--> statement-breakpoint
CREATE INDEX "orders_pii_due_idx" ON "orders" USING btree ("finished_at") WHERE "orders"."redacted_at" is null and "orders"."status" in ('DELIVERED', 'CANCELLED', 'CANCELLED_BY_CUSTOMER', 'RETURNED_TO_SELLER');--> statement-breakpoint
-- Orders redacted before the provider's answers were (src/retention/redact.ts): due again
-- when one of their commands' answers holds customer_details, so the next daily run takes
-- the customer's details out of it too.
UPDATE "orders" o SET "redacted_at" = NULL
WHERE o."redacted_at" IS NOT NULL
  AND EXISTS (SELECT FROM "commands" c WHERE c."order_id" = o."id" AND c."response" @? '$.**.customer_details');
