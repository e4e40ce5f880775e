/** Hono context variables set by the app's middleware. */
export interface AppEnv {
  Variables: {
    requestId: string;
  };
}
