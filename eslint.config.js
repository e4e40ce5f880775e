import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/**", ".data/**", "migrations/**", "bench/results/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "no-console": ["error", { allow: ["error"] }],
    },
  },
  {
    // The console's script runs in the browser.
    files: ["src/http/console/assets/**/*.js"],
    languageOptions: { globals: { document: "readonly", fetch: "readonly", setInterval: "readonly", window: "readonly" } },
  },
  {
    files: ["test/**", "bench/**", "src/main.ts", "src/emulator/main.ts"],
    rules: { "no-console": "off" },
  },
);
