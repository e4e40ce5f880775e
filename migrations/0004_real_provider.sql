-- The real provider (placement with unknown outcome, reconciliation, several provider ids).
-- commands.outcome_unknown: an attempt may have reached the provider unanswered.
-- orders.svc_order_ids: every provider id seen for the order; filled from svc_order_id
-- here and kept by the projection from then on. orders.reconciled_at: last status poll.
ALTER TABLE "commands" DROP CONSTRAINT "commands_kind";--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "svc_order_ids" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "reconciled_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "commands" ADD COLUMN "outcome_unknown" boolean DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX "orders_placement_attention_idx" ON "orders" USING btree ("placement_state","id" DESC NULLS FIRST) WHERE "orders"."placement_state" in ('pending', 'unconfirmed', 'failed');--> statement-breakpoint
ALTER TABLE "commands" ADD CONSTRAINT "commands_kind" CHECK ("commands"."kind" in ('place', 'edit', 'cancel', 'dispatch_ready', 'stop_reattempt', 'confirm_placement'));--> statement-breakpoint
UPDATE "orders" SET "svc_order_ids" = ARRAY["svc_order_id"] WHERE "svc_order_id" IS NOT NULL;
