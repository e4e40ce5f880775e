CREATE TABLE "console_marks" (
	"name" text PRIMARY KEY NOT NULL,
	"value" bigint NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "console_sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"csrf_token" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "console_sessions_expires_at_idx" ON "console_sessions" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "commands_failed_idx" ON "commands" USING btree ("id" DESC NULLS FIRST) WHERE "commands"."state" = 'failed';--> statement-breakpoint
CREATE INDEX "awb_numbers_created_at_idx" ON "awb_numbers" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "awb_numbers_allocated_at_idx" ON "awb_numbers" USING btree ("allocated_at") WHERE "awb_numbers"."allocated_at" is not null;--> statement-breakpoint
CREATE INDEX "notification_deliveries_failed_idx" ON "notification_deliveries" USING btree ("id" DESC NULLS FIRST) WHERE "notification_deliveries"."status" = 'failed';