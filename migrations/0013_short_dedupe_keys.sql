-- Shorter dedupe keys (docs/scale.md, "Bytes per event"): an event stored in a period
-- from order_events_short_keys_from() on keeps the first 32 hex digits (128 bits) of its
-- body's SHA-256 instead of all 64. It saves about 32 bytes in the row and as many in the
-- dedupe index, per event. The rows already stored keep their 64 digits: nothing is
-- rewritten.
--
-- Exactly once still holds across the change because the key's form follows the stored
-- period, and every copy of a body is stored with the same period as the first (the
-- period of its order key, order_periods): a late copy of an older event takes the long
-- form, as its first copy did, and meets it in the unique index.
--
-- The day it starts: with no event stored yet, from the start (-infinity). Otherwise the
-- day after tomorrow (UTC): events of today's and tomorrow's new order keys may still be
-- stored by processes of the release before this one until the deploy ends, which write
-- the long form. A deploy that outlasts that, with the old processes still appending,
-- would store their long keys where a later copy looks for the short one.
DO $$
DECLARE
  since date := CASE WHEN EXISTS (SELECT FROM "order_events") THEN (now() AT TIME ZONE 'UTC')::date + 2 ELSE '-infinity'::date END;
BEGIN
  EXECUTE format(
    'CREATE FUNCTION order_events_short_keys_from() RETURNS date LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
    format('SELECT %L::date', since));
END;
$$;
