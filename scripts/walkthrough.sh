#!/usr/bin/env bash
# Walks one order to DELIVERED against a running tracklane (`npm start`, built-in emulator):
# allocates an AWB, places the order, waits until the provider has it, then moves it
# through the provider's sandbox (allot, collect, deliver), waiting for each status
# before the next step. CI runs it against `npm start`, so the README cannot drift.
#
#   scripts/walkthrough.sh [API_URL]      default http://127.0.0.1:3000
#
# The API token comes from API_TOKEN, else from $DATA_DIR/api-token (DATA_DIR: .data).
# Needs curl and node.
set -euo pipefail

API=${1:-http://127.0.0.1:3000}
TOKEN=${API_TOKEN:-$(cat "${DATA_DIR:-.data}/api-token")}
COID=${COID:-WALK-$(date +%s)-$$}
TIMEOUT_S=${WALKTHROUGH_TIMEOUT_S:-60}

# call METHOD PATH [BODY]: prints the body; the status goes to $STATUS.
call() {
  local out
  out=$(curl -sS -X "$1" "$API$2" -H "authorization: Bearer $TOKEN" -H "content-type: application/json" \
    ${3:+-d "$3"} -w $'\n%{http_code}')
  STATUS=${out##*$'\n'}
  BODY=${out%$'\n'*}
}

# field PATH: the value at a dotted path of the JSON in $BODY ("" when absent).
field() {
  node -e 'const v = process.argv[2].split(".").reduce((o, k) => (o == null ? o : o[k]), JSON.parse(process.argv[1])); console.log(v == null ? "" : typeof v === "object" ? JSON.stringify(v) : v)' "$BODY" "$1"
}

# expect STATUS...: stop with the answer when the last call's status is none of them.
expect() {
  for s in "$@"; do [ "$STATUS" = "$s" ] && return 0; done
  echo "walkthrough: expected HTTP $*, got $STATUS: $BODY" >&2
  exit 1
}

# wait_for FIELD VALUE: polls the order until FIELD has VALUE.
wait_for() {
  local deadline=$((SECONDS + TIMEOUT_S))
  while :; do
    call GET "/v1/orders/$COID"
    expect 200
    [ "$(field "$1")" = "$2" ] && return 0
    if [ $SECONDS -ge $deadline ]; then
      echo "walkthrough: $1 is '$(field "$1")', not '$2', after ${TIMEOUT_S}s: $BODY" >&2
      exit 1
    fi
    sleep 0.5
  done
}

step() { printf '\n== %s\n' "$*"; }

step "1. An AWB for the order (503 while a fresh pool is being topped up: try again)"
deadline=$((SECONDS + TIMEOUT_S))
while :; do
  call POST /v1/awb/allocate "{\"client_order_id\": \"$COID\"}"
  [ "$STATUS" = 200 ] && break
  expect 503
  [ $SECONDS -ge $deadline ] && { echo "walkthrough: the AWB pool stayed empty: $BODY" >&2; exit 1; }
  sleep 1
done
AWB=$(field awb_number)
echo "AWB $AWB"

step "2. Place the order: 202, placement pending; a job sends it to the provider"
call POST /v1/orders "{
  \"store_code\": \"STORE1\",
  \"order_details\": {\"client_order_id\": \"$COID\", \"order_value\": 450, \"paid\": true, \"payment_mode\": \"prepaid\"},
  \"customer_details\": {\"name\": \"Asha\", \"contact_number\": \"9876543210\", \"address_line_1\": \"12 MG Road\",
                       \"city\": \"Bengaluru\", \"latitude\": 12.97, \"longitude\": 77.59},
  \"product_details\": [{\"id\": \"P1\", \"name\": \"Idli\", \"price\": 150, \"quantity\": 3}]
}"
expect 202
wait_for placement.state placed
echo "placed: svc_order_id $(field svc_order_id), track_url $(field track_url)"
[ "$(field awb_number)" = "$AWB" ] || { echo "walkthrough: the order does not show its AWB: $BODY" >&2; exit 1; }

step "3. Allot a rider (the provider calls back: ALLOTTED)"
call POST "/v1/sandbox/orders/$COID/allot" '{"rider_id": 77}'
expect 200
wait_for status ALLOTTED
wait_for rider.id 77

step "4. The rider collects it (COLLECTED)"
call POST "/v1/sandbox/orders/$COID/collect" '{"status": "COLLECTED", "pickup_lat": 12.9, "pickup_lng": 77.6}'
expect 200
wait_for status COLLECTED

step "5. Delivered (DELIVERED)"
call POST "/v1/sandbox/orders/$COID/deliver" '{"status": "DELIVERED", "delivery_latitude": 12.97, "delivery_longitude": 77.59, "is_partial_delivery": false}'
expect 200
wait_for status DELIVERED
echo "$BODY"

step "6. Its timeline"
call GET "/v1/orders/$COID/events"
expect 200
node -e 'for (const e of JSON.parse(process.argv[1]).items) console.log(`${e.occurred_at}  ${e.source.padEnd(9)} ${e.kind.padEnd(8)} ${e.status ?? e.provider_status ?? e.payload.tracklane ?? ""}`)' "$BODY"
printf '\nwalkthrough: %s delivered\n' "$COID"
