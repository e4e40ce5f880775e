-- Orders with more than one provider id (a second provider order for one client_order_id):
-- intake asks whether a bare order_id is one of them (src/orders/read.ts, knownClientIds).
-- Few such orders, so a small partial index.
CREATE INDEX "orders_other_svc_ids_idx" ON "orders" USING gin ("svc_order_ids") WHERE cardinality("orders"."svc_order_ids") > 1;