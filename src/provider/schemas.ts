import { z } from "zod";

/**
 * Request and response shapes of every provider endpoint (provider-api.md §4) with the
 * defaults of PRODUCT.md §3 where the spec is silent. One definition, shared by the client
 * (validates what it sends and what it gets), the emulator (validates what it receives)
 * and tracklane's HTTP API (validates what users send before it is queued).
 *
 * Request schemas are plain objects (unknown keys stripped). Response schemas are loose:
 * extra fields the provider adds are kept, never an error.
 */

/** The spec's 128-character limit; it does not say which field, so every string gets it. */
export const MAX_STRING_LENGTH = 128;
/** Upper bound of `count` (pool) and `awb_count` (fresh) (provider-api.md §8). */
export const MAX_AWB_COUNT = 100_000;
const DEFAULT_POOL_AWB_COUNT = 10;
const DEFAULT_FRESH_AWB_COUNT = 1000;

const text = z
  .string()
  .min(1, "must not be empty")
  .max(MAX_STRING_LENGTH, `must be at most ${MAX_STRING_LENGTH} characters`);
const optionalText = z.string().max(MAX_STRING_LENGTH, `must be at most ${MAX_STRING_LENGTH} characters`).optional();
const latitude = z.number().min(-90).max(90);
const longitude = z.number().min(-180).max(180);

/** An identifier the provider may send as a number or a string; tracklane keeps strings. */
const ProviderIdSchema = z
  .union([z.string().min(1).max(MAX_STRING_LENGTH), z.number().int().nonnegative()])
  .transform(String);

// ---------------------------------------------------------------- place order (§4.2)

/**
 * Merchant code sends numbers as JSON numbers or as numeric strings ("250.00"), and the
 * flag as a boolean or "true"/"false" (PRODUCT.md §10). Both read as what they mean, so a
 * body is the same order whichever way it spells them, and the provider gets numbers and
 * booleans.
 */
const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const numberish = z.union([
  z.number(),
  z
    .string()
    .trim()
    .regex(NUMERIC, "must be a number or a numeric string")
    .transform(Number),
]);
const tolerantLatitude = numberish.pipe(z.number().min(-90, "must be between -90 and 90").max(90, "must be between -90 and 90"));
const tolerantLongitude = numberish.pipe(z.number().min(-180, "must be between -180 and 180").max(180, "must be between -180 and 180"));
const tolerantAmount = numberish.pipe(z.number().nonnegative("must not be negative"));
const tolerantQuantity = numberish.pipe(z.number().int("must be a whole number").positive("must be at least 1"));
const booleanish = z.union([
  z.boolean(),
  z
    .string()
    .trim()
    .toLowerCase()
    .pipe(z.enum(["true", "false"], { error: 'must be true, false, "true" or "false"' }))
    .transform((v) => v === "true"),
]);

/**
 * Only what PRODUCT.md §10 lists is required; a field we know is checked when present;
 * every other field, at any depth, is kept as sent (loose objects), so nothing a merchant
 * adds (scheduled_time, delivery_instruction, landmark...) is dropped on its way to the
 * provider.
 */
const StoreOrderDetailsSchema = z.looseObject({
  client_order_id: text,
  order_value: tolerantAmount.optional(),
  paid: booleanish.optional(),
  payment_mode: text.optional(),
});

const CustomerDetailsSchema = z.looseObject({
  name: text,
  contact_number: text,
  address_line_1: text,
  address_line_2: optionalText,
  city: text.optional(),
  latitude: tolerantLatitude,
  longitude: tolerantLongitude,
});

const ProductDetailSchema = z.looseObject({
  id: z.union([text, z.number().int()]).optional(),
  name: text.optional(),
  price: tolerantAmount.optional(),
  quantity: tolerantQuantity.optional(),
});

export const PlaceOrderBodySchema = z.looseObject({
  store_code: text,
  order_details: StoreOrderDetailsSchema,
  customer_details: CustomerDetailsSchema,
  product_details: z.array(ProductDetailSchema).min(1, "at least one product"),
  pickup_contact_number: optionalText,
  misc: z.looseObject({ pickup_otp: optionalText }).optional(),
});
export type PlaceOrderBody = z.input<typeof PlaceOrderBodySchema>;

/** Where an answer may name the order's id, first found wins (PRODUCT.md §10). */
const ORDER_ID_KEYS = ["svc_order_id", "sfx_order_id", "id"] as const;

/**
 * The order an answer's `data` names, read tolerantly: the id from `svc_order_id`,
 * `sfx_order_id` or `id`, as a number or a string; `track_url` when present. Fails when
 * no id is there, so a 2xx that names no order never passes for a placed one.
 */
export type NamedOrder = Record<string, unknown> & { svc_order_id: string; track_url: string | null };

/** `data` with the order it names read as NamedOrder says; null when it names none. */
function namedOrder(data: Record<string, unknown>): NamedOrder | null {
  for (const key of ORDER_ID_KEYS) {
    const id = ProviderIdSchema.safeParse(data[key]);
    if (id.success) {
      const track = data["track_url"];
      return { ...data, svc_order_id: id.data, track_url: typeof track === "string" && track.trim() !== "" ? track : null };
    }
  }
  return null;
}

const NamedOrderSchema = z.looseObject({}).transform((data, ctx): NamedOrder => {
  const named = namedOrder(data);
  if (named) return named;
  ctx.addIssue({ code: "custom", message: `names no order: expected one of ${ORDER_ID_KEYS.join(", ")}` });
  return z.NEVER;
});

export const PlaceOrderResponseSchema = z.looseObject({ message: z.string().optional(), data: NamedOrderSchema });
export type PlaceOrderResponse = z.output<typeof PlaceOrderResponseSchema>;

/**
 * The pickup OTP the rider must quote (provider-api.md §4.2): the custom `misc.pickup_otp`
 * when given, else the last four digits of client_order_id (null when it has fewer).
 */
export function pickupOtp(body: Pick<PlaceOrderBody, "order_details" | "misc">): string | null {
  if (body.misc?.pickup_otp) return body.misc.pickup_otp;
  const digits = body.order_details.client_order_id.replace(/\D/g, "");
  return digits.length >= 4 ? digits.slice(-4) : null;
}

// ---------------------------------------------------------------- edit order (§4.2)

export const EditOrderBodySchema = z.looseObject({
  svc_order_id: ProviderIdSchema,
  order_details: z
    .looseObject({ payment_mode: text.optional(), order_value: tolerantAmount.optional() })
    .optional(),
  product_details: z.array(ProductDetailSchema).min(1, "at least one product").optional(),
});
export type EditOrderBody = z.input<typeof EditOrderBodySchema>;

/**
 * The edit answer, read as tolerantly as the place answer (PRODUCT.md §10). The spec shows
 * `{store_code, status, svc_order_id, track_url, order_details}`; the real provider leaves
 * track_url out of its place answer and names the order `sfx_order_id` under `data`, and
 * its edit answer may do the same (the emulator's realistic `edit_answer` does). So every
 * field is optional but the order's id, found as in the place answer, at the top or under
 * `data`; it comes out as `svc_order_id` (a string) beside `track_url` (or null). A 2xx
 * that names no order is not taken for a done edit: `interpret` reads it by its words.
 */
export type EditOrderResponse = Record<string, unknown> & {
  message?: string | undefined;
  store_code?: string | undefined;
  status?: string | undefined;
  svc_order_id: string;
  track_url: string | null;
};
export const EditOrderResponseSchema = z
  .looseObject({ message: z.string().optional(), store_code: z.string().optional(), status: z.string().optional() })
  .transform((answer, ctx): EditOrderResponse => {
    const data = answer["data"];
    const named = namedOrder(answer) ?? (typeof data === "object" && data !== null && !Array.isArray(data) ? namedOrder(data as Record<string, unknown>) : null);
    if (named) return { ...answer, svc_order_id: named.svc_order_id, track_url: named.track_url };
    ctx.addIssue({ code: "custom", message: `names no order: expected one of ${ORDER_ID_KEYS.join(", ")}, at the top or under data` });
    return z.NEVER;
  });

// ---------------------------------------------------------------- cancel, dispatch-ready, stop re-attempt

export const CANCEL_USERS = ["Customer", "Seller", "Rider"] as const;
export const CancelOrderBodySchema = z.object({ reason: text, user: z.enum(CANCEL_USERS) });
export type CancelOrderBody = z.input<typeof CancelOrderBodySchema>;

/** `data`'s shape is not in the spec; kept as whatever the provider sends. */
export const CancelOrderResponseSchema = z.looseObject({ message: z.string(), data: z.unknown() });
export type CancelOrderResponse = z.output<typeof CancelOrderResponseSchema>;

/** ISO-8601 string (what tracklane sends) or epoch number; the spec shows neither. */
export const DispatchReadyBodySchema = z.object({
  shipment_ready_timestamp: z.union([text, z.number().nonnegative()]),
});
export type DispatchReadyBody = z.input<typeof DispatchReadyBodySchema>;

export const StopReattemptBodySchema = z.object({ svc_order_id: ProviderIdSchema });
export type StopReattemptBody = z.input<typeof StopReattemptBodySchema>;

/** Responses that carry a message and maybe more (cancel re-attempt, allot, deliver...). */
export const MessageResponseSchema = z.looseObject({ message: z.string() });
export type MessageResponse = z.output<typeof MessageResponseSchema>;

/** Responses whose shape the spec does not show: any JSON object. */
export const AnyObjectResponseSchema = z.looseObject({ message: z.string().optional() });
export type AnyObjectResponse = z.output<typeof AnyObjectResponseSchema>;

/**
 * The order-status answer (not in provider-api.md; PRODUCT.md §10): `{message, data:
 * {status, sfx_order_id, track_url, rider_details{…}, order_details{allot_time, …}}}`,
 * shaped like a callback. Only `data` being an object is required: it is stored as an
 * event, read by the same normalisation as callbacks.
 */
export const OrderStatusResponseSchema = z.looseObject({ message: z.string().optional(), data: z.looseObject({}) });
export type OrderStatusResponse = z.output<typeof OrderStatusResponseSchema>;

// ---------------------------------------------------------------- sandbox (§4.1)

const flag = z.union([z.literal(0), z.literal(1), z.boolean()]);

const AllotBodySchema = z.object({
  rider_id: z.union([text, z.number().int()]),
  /** 1 (or true): allot for acceptance only; see provider-api.md §3. */
  only_allot: flag.optional(),
});
export type AllotBody = z.input<typeof AllotBodySchema>;

/** Body not in the spec: an optional free object, passed through as is. */
export const FreeBodySchema = z.looseObject({});
export type FreeBody = z.input<typeof FreeBodySchema>;

const CollectBodySchema = z.object({
  status: z.literal("COLLECTED"),
  pickup_lat: latitude.optional(),
  pickup_lng: longitude.optional(),
});
export type CollectBody = z.input<typeof CollectBodySchema>;
const CollectResponseSchema = z.looseObject({
  message: z.string(),
  virtual_contact_number: z.union([z.string(), z.number()]).transform(String),
});
export type CollectResponse = z.output<typeof CollectResponseSchema>;

const DoorstepArrivalBodySchema = z.object({
  time_arrival: z.union([text, z.number().nonnegative()]).optional(),
  arrival_lat: latitude.optional(),
  arrival_lng: longitude.optional(),
  arrival_accuracy: z.number().nonnegative().optional(),
});
export type DoorstepArrivalBody = z.input<typeof DoorstepArrivalBodySchema>;

const StatusMessageResponseSchema = z.looseObject({ status: z.string(), message: z.string() });
export type StatusMessageResponse = z.output<typeof StatusMessageResponseSchema>;

const DeliverBodySchema = z.object({
  status: z.literal("DELIVERED"),
  delivery_latitude: latitude.optional(),
  delivery_longitude: longitude.optional(),
  is_partial_delivery: z.boolean().optional(),
});
export type DeliverBody = z.input<typeof DeliverBodySchema>;

const CustomerReturnResponseSchema = z.looseObject({
  status: z.string(),
  message: z.string(),
  rts_order_id: ProviderIdSchema.optional(),
});
export type CustomerReturnResponse = z.output<typeof CustomerReturnResponseSchema>;

/**
 * update-rider-location: the spec shows no body. We chose `{latitude, longitude, accuracy?}`
 * (metres), mirroring the rider-location callback's rider_latitude, rider_longitude and
 * location_accuracy.
 */
const RiderLocationBodySchema = z.object({
  latitude,
  longitude,
  accuracy: z.number().nonnegative().optional(),
});
export type RiderLocationBody = z.input<typeof RiderLocationBodySchema>;

/**
 * The sandbox actions by the names tracklane's API uses (PRODUCT.md §6), with their path
 * and schemas, so a caller can validate a body before queueing it and dispatch generically.
 */
export const SANDBOX_ACTIONS = {
  allot: { path: "sandboxAllot", method: "PUT", body: AllotBodySchema, response: MessageResponseSchema },
  "rider-arrival": { path: "sandboxRiderArrival", method: "POST", body: FreeBodySchema, response: AnyObjectResponseSchema },
  collect: { path: "sandboxCollect", method: "PUT", body: CollectBodySchema, response: CollectResponseSchema },
  "doorstep-arrival": { path: "sandboxDoorstepArrival", method: "PUT", body: DoorstepArrivalBodySchema, response: StatusMessageResponseSchema },
  deliver: { path: "sandboxDeliver", method: "PUT", body: DeliverBodySchema, response: MessageResponseSchema },
  "customer-return": { path: "sandboxCustomerReturn", method: "PUT", body: null, response: CustomerReturnResponseSchema },
  "seller-return": { path: "sandboxSellerReturn", method: "PUT", body: FreeBodySchema, response: AnyObjectResponseSchema },
  "rider-location": { path: "sandboxRiderLocation", method: "PUT", body: RiderLocationBodySchema, response: AnyObjectResponseSchema },
} as const;
export type SandboxAction = keyof typeof SANDBOX_ACTIONS;
export const SANDBOX_ACTION_NAMES = Object.keys(SANDBOX_ACTIONS) as SandboxAction[];

// ---------------------------------------------------------------- AWB (§4.3)

const awbCount = z
  .number()
  .int()
  .min(1, "must be at least 1")
  .max(MAX_AWB_COUNT, `must be at most ${MAX_AWB_COUNT}`);

export const PoolAwbBodySchema = z.object({ count: awbCount.default(DEFAULT_POOL_AWB_COUNT) });
export const PoolAwbResponseSchema = z.looseObject({ message: z.string(), awb_numbers: z.array(z.string()) });
export type PoolAwbResponse = z.output<typeof PoolAwbResponseSchema>;

/**
 * request_type: the spec does not list its values, so any short text is passed on (the
 * provider judges it); "forward" is the default (PRODUCT.md §3).
 */
export const FreshAwbBodySchema = z.object({
  awb_count: awbCount.default(DEFAULT_FRESH_AWB_COUNT),
  request_type: z.string().trim().min(1, "must not be empty").max(128, "must be at most 128 characters").default("forward"),
});
export type FreshAwbBody = z.input<typeof FreshAwbBodySchema>;
/**
 * `delay_time`: seconds, as a number or a numeric string (the spec shows no type, and
 * gateways send numbers as strings, as some do `expires_in`): an answer refused for it
 * would leave the request it accepted uncollectable, and every top-up would ask again.
 */
const delaySeconds = numberish.pipe(z.number().nonnegative("must not be negative"));
export const FreshAwbAcceptedSchema = z.looseObject({
  status: z.string(),
  request_id: ProviderIdSchema,
  message: z.string(),
  delay_time: delaySeconds,
});
export type FreshAwbAccepted = z.output<typeof FreshAwbAcceptedSchema>;
export const FreshAwbPollSchema = z.looseObject({
  /** Absent or null while the batch is still generating: no numbers yet. */
  awb_numbers: z
    .array(z.string())
    .nullish()
    .transform((numbers) => numbers ?? []),
  status: z.string(),
  retry_flag: z.boolean(),
  /** When to poll again (not in the spec's poll answer): a hint, dropped when unusable. */
  delay_time: delaySeconds.optional().catch(undefined),
});
export type FreshAwbPoll = z.output<typeof FreshAwbPollSchema>;

/** `SF` + 10 digits + 3-letter client suffix (PRODUCT.md §3): the documented form. */
export const AWB_NUMBER_PATTERN = /^SF\d{10}[A-Z]{3}$/;

/**
 * What tracklane stores and hands out as an AWB number: 8 to 40 capital letters and
 * digits. The documented form is one such; a provider whose numbers take another (a
 * longer suffix, another prefix) is not refused for it, while a blank, padded, lower-case
 * or punctuated value is never stored.
 */
export const USABLE_AWB_NUMBER = /^[A-Z0-9]{8,40}$/;

// ---------------------------------------------------------------- OAuth2 (§5.2)

export const OAuthTokenResponseSchema = z.looseObject({
  /**
   * Sent back in the Authorization header: a token no header can carry (a line break, a
   * character beyond ASCII) fails the exchange (retried, the call not sent), rather than
   * every call made with it until it expires. RFC 6750's b64token is a subset of this.
   */
  access_token: z.string().regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces: it is sent in the Authorization header"),
  token_type: z.string(),
  /**
   * Seconds; some gateways send it as a numeric string. Absent or unusable (null, empty,
   * zero, not a number): the product's default. The token itself is good, and a 401 renews
   * it; refusing the answer for this field would leave every call without a token.
   */
  expires_in: z.coerce.number().positive().optional().catch(undefined),
});
export type OAuthTokenResponse = z.output<typeof OAuthTokenResponseSchema>;

// ---------------------------------------------------------------- errors (PRODUCT.md §3)

/**
 * What the provider answers when a (store_code, client_order_id) pair already has an order.
 * The spec is silent; this is the shape the emulator sends and tracklane relies on to never
 * place twice (see `existingOrderFromError`).
 */
export const DuplicateOrderErrorSchema = z.looseObject({
  errors: z.looseObject({ client_order_id: z.union([z.array(z.string()).min(1), z.string().min(1)]) }),
  data: NamedOrderSchema,
});

/**
 * What the provider answers when a cancel finds the order already finished. The spec is
 * silent; like the duplicate-order answer, the emulator names the field AND carries the
 * order's current status: tracklane relies on it to recognise a cancel of its own whose
 * answer was lost (see `cancelRefusalFromError`).
 */
export const NotCancellableErrorSchema = z.looseObject({
  data: NamedOrderSchema.pipe(z.looseObject({ svc_order_id: z.string(), track_url: z.string().nullable(), status: z.string().min(1) })),
});
