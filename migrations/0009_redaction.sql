-- Personal data goes PII_RETENTION_DAYS after an order finished (docs/operations.md): the
-- customer's details in its commands, the rider's name and contact in its events and row.
ALTER TABLE "orders" ADD COLUMN "redacted_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "commands" ADD COLUMN "redacted_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "orders_pii_due_idx" ON "orders" USING btree ("status_at") WHERE "orders"."redacted_at" is null and "orders"."status" in ('DELIVERED', 'CANCELLED', 'CANCELLED_BY_CUSTOMER', 'RETURNED_TO_SELLER');--> statement-breakpoint
-- Whether `new` is `old` with some values (at any depth) replaced by "[redacted]" and
-- nothing else changed: the same keys, the same array lengths, every other value equal.
CREATE FUNCTION jsonb_is_redaction_of(old jsonb, new jsonb) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  k text;
  i int;
BEGIN
  IF new = old OR new = '"[redacted]"'::jsonb THEN
    RETURN true;
  END IF;
  IF jsonb_typeof(old) = 'object' AND jsonb_typeof(new) = 'object' THEN
    IF (SELECT array_agg(x ORDER BY x) FROM jsonb_object_keys(old) x) IS DISTINCT FROM (SELECT array_agg(x ORDER BY x) FROM jsonb_object_keys(new) x) THEN
      RETURN false;
    END IF;
    FOR k IN SELECT jsonb_object_keys(old) LOOP
      IF NOT jsonb_is_redaction_of(old -> k, new -> k) THEN
        RETURN false;
      END IF;
    END LOOP;
    RETURN true;
  END IF;
  IF jsonb_typeof(old) = 'array' AND jsonb_typeof(new) = 'array' AND jsonb_array_length(old) = jsonb_array_length(new) THEN
    FOR i IN 0 .. jsonb_array_length(old) - 1 LOOP
      IF NOT jsonb_is_redaction_of(old -> i, new -> i) THEN
        RETURN false;
      END IF;
    END LOOP;
    RETURN true;
  END IF;
  RETURN false;
END;
$$;
--> statement-breakpoint
-- The log stays append-only. The one change allowed is a redaction: inside a transaction
-- that says so (SET LOCAL tracklane.redacting = 'on'), a payload may have values replaced by
-- "[redacted]", every other column and value unchanged. Removing rows stays refused.
CREATE OR REPLACE FUNCTION order_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND current_setting('tracklane.redacting', true) = 'on'
     AND (NEW.id, NEW.dedupe_key, NEW.source, NEW.kind, NEW.svc_order_id, NEW.client_order_id, NEW.provider_status, NEW.occurred_at, NEW.received_at)
         IS NOT DISTINCT FROM
         (OLD.id, OLD.dedupe_key, OLD.source, OLD.kind, OLD.svc_order_id, OLD.client_order_id, OLD.provider_status, OLD.occurred_at, OLD.received_at)
     AND jsonb_is_redaction_of(OLD.payload, NEW.payload) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'order_events is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'restrict_violation';
END;
$$;
