import type { Logger } from "../logger.ts";

/** Hono context variables set by the app's middleware. */
export interface AppEnv {
  Variables: {
    requestId: string;
    log: Logger;
  };
}
