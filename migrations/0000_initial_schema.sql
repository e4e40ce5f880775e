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
CREATE TABLE "commands" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "commands_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"order_id" bigint NOT NULL,
	"kind" text NOT NULL,
	"state" text DEFAULT 'pending' NOT NULL,
	"request" jsonb NOT NULL,
	"request_hash" text NOT NULL,
	"response" jsonb,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"completed_at" timestamp with time zone,
	CONSTRAINT "commands_kind" CHECK ("commands"."kind" in ('place', 'edit', 'cancel', 'dispatch_ready', 'stop_reattempt')),
	CONSTRAINT "commands_state" CHECK ("commands"."state" in ('pending', 'succeeded', 'failed'))
);
--> statement-breakpoint
CREATE TABLE "awb_numbers" (
	"awb_number" text PRIMARY KEY NOT NULL,
	"state" text DEFAULT 'available' NOT NULL,
	"client_order_id" text,
	"allocated_at" timestamp with time zone,
	"source" text NOT NULL,
	"request_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "awb_numbers_state" CHECK ("awb_numbers"."state" in ('available', 'allocated')),
	CONSTRAINT "awb_numbers_allocated" CHECK (("awb_numbers"."state" = 'allocated') = ("awb_numbers"."allocated_at" is not null))
);
--> statement-breakpoint
CREATE TABLE "awb_requests" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "awb_requests_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"mode" text NOT NULL,
	"request_id" text,
	"status" text DEFAULT 'pending' NOT NULL,
	"count" integer NOT NULL,
	"received" integer DEFAULT 0 NOT NULL,
	"added" integer DEFAULT 0 NOT NULL,
	"polls" integer DEFAULT 0 NOT NULL,
	"next_poll_at" timestamp with time zone,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"completed_at" timestamp with time zone,
	CONSTRAINT "awb_requests_mode" CHECK ("awb_requests"."mode" in ('pool', 'fresh')),
	CONSTRAINT "awb_requests_status" CHECK ("awb_requests"."status" in ('pending', 'completed', 'failed'))
);
--> statement-breakpoint
ALTER TABLE "commands" ADD CONSTRAINT "commands_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "order_events_dedupe_key_idx" ON "order_events" USING btree ("dedupe_key");--> statement-breakpoint
CREATE INDEX "order_events_svc_order_id_idx" ON "order_events" USING btree ("svc_order_id") WHERE "order_events"."svc_order_id" is not null;--> statement-breakpoint
CREATE INDEX "order_events_client_order_id_idx" ON "order_events" USING btree ("client_order_id") WHERE "order_events"."client_order_id" is not null;--> statement-breakpoint
CREATE INDEX "rejected_callbacks_received_at_idx" ON "rejected_callbacks" USING btree ("received_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE UNIQUE INDEX "orders_client_order_id_idx" ON "orders" USING btree ("client_order_id");--> statement-breakpoint
CREATE UNIQUE INDEX "orders_svc_order_id_idx" ON "orders" USING btree ("svc_order_id");--> statement-breakpoint
CREATE INDEX "orders_status_idx" ON "orders" USING btree ("status","id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "orders_store_code_idx" ON "orders" USING btree ("store_code","id" DESC NULLS LAST) WHERE "orders"."store_code" is not null;--> statement-breakpoint
CREATE INDEX "orders_updated_at_idx" ON "orders" USING btree ("updated_at");--> statement-breakpoint
CREATE INDEX "commands_order_id_idx" ON "commands" USING btree ("order_id","id");--> statement-breakpoint
CREATE INDEX "awb_numbers_available_idx" ON "awb_numbers" USING btree ("created_at","awb_number") WHERE "awb_numbers"."state" = 'available';--> statement-breakpoint
CREATE UNIQUE INDEX "awb_numbers_client_order_id_idx" ON "awb_numbers" USING btree ("client_order_id");--> statement-breakpoint
CREATE UNIQUE INDEX "awb_requests_request_id_idx" ON "awb_requests" USING btree ("request_id");--> statement-breakpoint
CREATE INDEX "awb_requests_created_at_idx" ON "awb_requests" USING btree ("created_at" DESC NULLS LAST);