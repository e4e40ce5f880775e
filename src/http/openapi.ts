/**
 * The answers every /v1 operation can give whatever its route declares, added to the
 * generated OpenAPI document in one place: the token check (401), the body limit and
 * Content-Encoding / Content-Type gates that run before any route (413, 415, and 400 for a
 * body that cannot be read), validation (400 for parameters, 422 for a body), a fault of
 * tracklane's (500) and the database being out of reach (503). A route's own description
 * of a status is kept; these only fill the gaps, so that the document lists every status a
 * client can get, each with the one error model.
 */

type Responses = Record<string, unknown>;
interface OperationLike {
  responses?: Responses;
  requestBody?: unknown;
}
export interface OpenApiLike {
  paths?: object;
  components?: object;
}

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"] as const;

const error = (description: string) => ({ description, content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } });

/** name -> [status, description, for operations with a request body only] */
const COMMON: Record<string, readonly [status: string, description: string, bodyOnly: boolean]> = {
  BadRequest: ["400", "invalid_parameter: a path or query parameter is invalid or unknown (each named in error.issues); invalid_json: the body cannot be read as JSON", false],
  Unauthorized: ["401", "unauthorized: missing or wrong `Authorization: Bearer <API_TOKEN>`", false],
  PayloadTooLarge: ["413", "payload_too_large: a body over 1 MiB, also once decompressed", false],
  UnsupportedMediaType: ["415", "unsupported_media_type: a body not sent as application/json, or a Content-Encoding other than gzip, deflate or br", false],
  ValidationFailed: ["422", "validation_failed: the body is invalid (each bad field named in error.issues)", true],
  InternalError: ["500", "internal_error: a fault of tracklane's (logged with its stack)", false],
  Unavailable: ["503", "database_unavailable: the database is out of reach, or rolled the statement back for a passing reason; send it again (Retry-After)", false],
};

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** `doc` with every /v1 operation's common answers declared (by $ref to components.responses). */
export function withCommonResponses<T extends OpenApiLike>(doc: T): T {
  const given = (doc.components ?? {}) as { responses?: Record<string, unknown> };
  const components = { ...given, responses: { ...given.responses } };
  for (const [name, [, description]] of Object.entries(COMMON)) components.responses[name] = error(description);
  const paths: Record<string, unknown> = {};
  for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Record<string, unknown>>)) {
    if (!path.startsWith("/v1/")) {
      paths[path] = item;
      continue;
    }
    const next: Record<string, unknown> = { ...item };
    for (const method of METHODS) {
      const op = item[method];
      if (!isRecord(op)) continue;
      const operation = op as OperationLike;
      const responses: Responses = { ...operation.responses };
      for (const [name, [status, , bodyOnly]] of Object.entries(COMMON)) {
        if (bodyOnly && operation.requestBody === undefined) continue;
        responses[status] ??= { $ref: `#/components/responses/${name}` };
      }
      const sorted = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
      next[method] = { ...op, responses: sorted };
    }
    paths[path] = next;
  }
  return { ...doc, paths, components };
}
