-- The event log is append-only: the database itself refuses to change or remove events,
-- whatever client or role tries. Orders are rebuilt from it, so it must never lose a row.
CREATE FUNCTION order_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
