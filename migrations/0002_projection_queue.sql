CREATE TABLE "projection_queue" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "projection_queue_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"svc_order_id" text,
	"client_order_id" text,
	"enqueued_at" timestamp with time zone DEFAULT now() NOT NULL
);
