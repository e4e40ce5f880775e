import { defineConfig } from "drizzle-kit";

// drizzle-kit generates SQL from the schema; it never needs a live database here.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/schema/index.ts",
  out: "./migrations",
  casing: "snake_case",
});
