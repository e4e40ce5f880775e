import js from "@eslint/js";
import { createNodeResolver, importX } from "eslint-plugin-import-x";
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
    files: ["test/**", "bench/**", "src/main.ts", "src/emulator/main.ts"],
    rules: { "no-console": "off" },
  },
  {
    // No import cycles in src/ (type-only imports are not followed: they vanish at run time).
    files: ["src/**/*.ts"],
    plugins: { "import-x": importX },
    settings: {
      // Without this, imported .ts files are never parsed and every cycle passes silently.
      "import-x/extensions": [".ts", ".js"],
      "import-x/resolver-next": [createNodeResolver({ extensions: [".ts", ".js"] })],
    },
    rules: { "import-x/no-cycle": ["error", { ignoreExternal: true }] },
  },
);
