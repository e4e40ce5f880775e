-- A number that names an order is allocated. Allocation answers an order with the number
-- naming it whatever its state, and hands the oldest available number to the next caller:
-- an available number still naming an order (one put back in the pool by hand, its order
-- left on it) went to that order and to another, one waybill on two parcels.
--
-- NOT VALID: the migrations run in one transaction, and checking every number ever
-- allocated would hold awb_numbers (every allocation) for the scan. New rows are checked
-- from here on; the runner validates the existing ones after the migrations commit, while
-- allocations go on (src/db/migrate.ts, validateConstraints).
ALTER TABLE "awb_numbers" ADD CONSTRAINT "awb_numbers_order_allocated" CHECK ("awb_numbers"."state" = 'allocated' or "awb_numbers"."client_order_id" is null) NOT VALID;
