-- The event log becomes a table partitioned by RANGE (kind, period) (docs/scale.md,
-- "Partitions and retention"): one partition per kind and stretch of days, so that old
-- events go by dropping a partition, never by a bulk DELETE, and location events can go
-- sooner than status events. `period` is the UTC day the event's order key was first
-- seen (order_periods): every copy of a body carries it, so the dedupe index, which must
-- hold the partition key, still refuses a duplicate whenever it arrives.
--
-- The existing events are copied into the new table (ids kept), in this transaction.
CREATE TABLE "event_partitions" (
	"kind" text NOT NULL,
	"starts" date NOT NULL,
	"ends" date NOT NULL,
	"name" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "event_partitions_kind_starts_pk" PRIMARY KEY("kind","starts"),
	CONSTRAINT "event_partitions_name_unique" UNIQUE("name"),
	CONSTRAINT "event_partitions_range" CHECK ("event_partitions"."starts" < "event_partitions"."ends")
);
--> statement-breakpoint
CREATE TABLE "order_periods" (
	"order_key" text PRIMARY KEY NOT NULL,
	"period" date NOT NULL
);
--> statement-breakpoint
ALTER TABLE "order_events" RENAME TO "order_events_unpartitioned";--> statement-breakpoint
ALTER SEQUENCE "order_events_id_seq" RENAME TO "order_events_unpartitioned_id_seq";--> statement-breakpoint
DROP INDEX "order_events_order_dedupe_idx";--> statement-breakpoint
DROP INDEX "order_events_svc_order_id_idx";--> statement-breakpoint
DROP INDEX "order_events_client_order_id_idx";--> statement-breakpoint
ALTER TABLE "order_events_unpartitioned" RENAME CONSTRAINT "order_events_has_order_id" TO "order_events_unpartitioned_has_order_id";--> statement-breakpoint
ALTER TABLE "order_events_unpartitioned" RENAME CONSTRAINT "order_events_kind" TO "order_events_unpartitioned_kind";--> statement-breakpoint
CREATE TABLE "order_events" (
	"id" bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
	"dedupe_key" text NOT NULL,
	"source" text DEFAULT 'provider' NOT NULL,
	"kind" text NOT NULL,
	"svc_order_id" text,
	"client_order_id" text,
	"provider_status" text,
	"occurred_at" timestamp with time zone NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"payload" jsonb NOT NULL,
	"period" date NOT NULL,
	CONSTRAINT "order_events_has_order_id" CHECK ("order_events"."svc_order_id" is not null or "order_events"."client_order_id" is not null),
	CONSTRAINT "order_events_kind" CHECK ("order_events"."kind" in ('status', 'location'))
) PARTITION BY RANGE ("kind", "period");
--> statement-breakpoint
-- One partition: its table, its TRUNCATE guard (a statement trigger on the parent does not
-- fire for a partition truncated on its own; the row triggers are cloned on attach), and
-- its row in event_partitions. ATTACH, not CREATE ... PARTITION OF: it locks the parent
-- with SHARE UPDATE EXCLUSIVE only, so appends and reads go on meanwhile.
CREATE FUNCTION order_events_attach_partition(p_kind text, p_starts date, p_ends date) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  part text := format('order_events_%s_%s', p_kind, to_char(p_starts, 'YYYYMMDD'));
BEGIN
  EXECUTE format('CREATE TABLE %I (LIKE order_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
  EXECUTE format('CREATE TRIGGER order_events_no_truncate BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION order_events_refuse_change()', part);
  EXECUTE format('ALTER TABLE order_events ATTACH PARTITION %I FOR VALUES FROM (%L, %L) TO (%L, %L)', part, p_kind, p_starts, p_kind, p_ends);
  INSERT INTO event_partitions (kind, starts, ends, name) VALUES (p_kind, p_starts, p_ends, part);
  RETURN part;
END;
$$;
--> statement-breakpoint
INSERT INTO "order_periods" ("order_key", "period")
  SELECT coalesce("svc_order_id", "client_order_id"), min(("received_at" AT TIME ZONE 'UTC')::date)
  FROM "order_events_unpartitioned" GROUP BY 1;
--> statement-breakpoint
-- Monthly partitions of both kinds, from the oldest period through next month.
DO $$
DECLARE
  m date := date_trunc('month', least(coalesce((SELECT min("period") FROM "order_periods"), now() AT TIME ZONE 'UTC'), now() AT TIME ZONE 'UTC'))::date;
  last date := (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month')::date;
  k text;
BEGIN
  WHILE m <= last LOOP
    FOREACH k IN ARRAY ARRAY['location', 'status'] LOOP
      PERFORM order_events_attach_partition(k, m, (m + interval '1 month')::date);
    END LOOP;
    m := (m + interval '1 month')::date;
  END LOOP;
END;
$$;
--> statement-breakpoint
INSERT INTO "order_events" ("id", "dedupe_key", "source", "kind", "svc_order_id", "client_order_id", "provider_status", "occurred_at", "received_at", "payload", "period")
  OVERRIDING SYSTEM VALUE
  SELECT e."id", e."dedupe_key", e."source", e."kind", e."svc_order_id", e."client_order_id", e."provider_status", e."occurred_at", e."received_at", e."payload", p."period"
  FROM "order_events_unpartitioned" e JOIN "order_periods" p ON p."order_key" = coalesce(e."svc_order_id", e."client_order_id");
--> statement-breakpoint
SELECT setval(pg_get_serial_sequence('order_events', 'id'), coalesce((SELECT max("id") FROM "order_events_unpartitioned"), 0) + 1, false);--> statement-breakpoint
DROP TABLE "order_events_unpartitioned";--> statement-breakpoint
CREATE INDEX "order_events_id_idx" ON "order_events" USING btree ("id");--> statement-breakpoint
CREATE UNIQUE INDEX "order_events_order_dedupe_idx" ON "order_events" USING btree (coalesce("svc_order_id", "client_order_id"),"dedupe_key","kind","period");--> statement-breakpoint
CREATE INDEX "order_events_svc_order_id_idx" ON "order_events" USING btree ("svc_order_id","occurred_at","id") WHERE "order_events"."svc_order_id" is not null;--> statement-breakpoint
CREATE INDEX "order_events_client_order_id_idx" ON "order_events" USING btree ("client_order_id","occurred_at","id") WHERE "order_events"."client_order_id" is not null;--> statement-breakpoint
-- The log stays append-only, as before: no UPDATE but a redaction (which now also leaves
-- the period alone), no DELETE, no TRUNCATE. Retention drops whole partitions.
CREATE OR REPLACE FUNCTION order_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND current_setting('tracklane.redacting', true) = 'on'
     AND (NEW.id, NEW.dedupe_key, NEW.source, NEW.kind, NEW.svc_order_id, NEW.client_order_id, NEW.provider_status, NEW.occurred_at, NEW.received_at, NEW.period)
         IS NOT DISTINCT FROM
         (OLD.id, OLD.dedupe_key, OLD.source, OLD.kind, OLD.svc_order_id, OLD.client_order_id, OLD.provider_status, OLD.occurred_at, OLD.received_at, OLD.period)
     AND jsonb_is_redaction_of(OLD.payload, NEW.payload) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'order_events is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'restrict_violation';
END;
$$;
--> statement-breakpoint
CREATE TRIGGER order_events_no_update_delete
  BEFORE UPDATE OR DELETE ON order_events
  FOR EACH ROW EXECUTE FUNCTION order_events_refuse_change();
--> statement-breakpoint
CREATE TRIGGER order_events_no_truncate
  BEFORE TRUNCATE ON order_events
  FOR EACH STATEMENT EXECUTE FUNCTION order_events_refuse_change();
