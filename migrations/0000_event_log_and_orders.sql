CREATE TABLE "order_events" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "order_events_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"dedupe_key" text NOT NULL,
	"source" text DEFAULT 'provider' NOT NULL,
	"kind" text NOT NULL,
	"svc_order_id" text,
	"client_order_id" text,
	"provider_status" text,
	"occurred_at" timestamp with time zone NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"payload" jsonb NOT NULL,
	CONSTRAINT "order_events_has_order_id" CHECK ("order_events"."svc_order_id" is not null or "order_events"."client_order_id" is not null),
	CONSTRAINT "order_events_kind" CHECK ("order_events"."kind" in ('status', 'location'))
);
--> statement-breakpoint
CREATE TABLE "rejected_callbacks" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "rejected_callbacks_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"reason" text NOT NULL,
	"content_type" text,
	"body" text NOT NULL,
	"body_bytes" integer NOT NULL,
	"truncated" boolean DEFAULT false NOT NULL
);
--> statement-breakpoint
CREATE TABLE "orders" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "orders_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"client_order_id" text,
	"svc_order_id" text,
	"store_code" text,
	"status" text,
	"provider_status" text,
	"status_at" timestamp with time zone,
	"track_url" text,
	"awb_number" text,
	"pickup_otp" text,
	"rider_id" text,
	"rider_name" text,
	"rider_contact" text,
	"rider_latitude" double precision,
	"rider_longitude" double precision,
	"rider_location_at" timestamp with time zone,
	"placement_state" text DEFAULT 'external' NOT NULL,
	"placement_error" text,
	"event_count" integer DEFAULT 0 NOT NULL,
	"last_event_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "order_events_dedupe_key_idx" ON "order_events" USING btree ("dedupe_key");--> statement-breakpoint
CREATE INDEX "order_events_svc_order_id_idx" ON "order_events" USING btree ("svc_order_id") WHERE "order_events"."svc_order_id" is not null;--> statement-breakpoint
CREATE INDEX "order_events_client_order_id_idx" ON "order_events" USING btree ("client_order_id") WHERE "order_events"."client_order_id" is not null;--> statement-breakpoint
CREATE INDEX "rejected_callbacks_received_at_idx" ON "rejected_callbacks" USING btree ("received_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE UNIQUE INDEX "orders_client_order_id_idx" ON "orders" USING btree ("client_order_id");--> statement-breakpoint
CREATE UNIQUE INDEX "orders_svc_order_id_idx" ON "orders" USING btree ("svc_order_id");--> statement-breakpoint
CREATE INDEX "orders_created_at_idx" ON "orders" USING btree ("created_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "orders_status_idx" ON "orders" USING btree ("status","created_at" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "orders_store_code_idx" ON "orders" USING btree ("store_code","created_at" DESC NULLS LAST) WHERE "orders"."store_code" is not null;--> statement-breakpoint
CREATE INDEX "orders_updated_at_idx" ON "orders" USING btree ("updated_at");