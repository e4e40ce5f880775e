-- GET /v1/orders?placement= for every state (docs/scale.md, "Lists"): the partial index
-- held only pending, unconfirmed and failed orders, so `placed` and `external` walked the
-- primary key, and a filter matching no order read the whole table. One index over every
-- order's placement state replaces it; the state seldom changes, so order writes stay HOT.
CREATE INDEX "orders_placement_idx" ON "orders" USING btree ("placement_state","id" DESC NULLS FIRST);--> statement-breakpoint
DROP INDEX "orders_placement_attention_idx";
