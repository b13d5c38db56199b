// Bundles src/ into the one-file plugin opencode loads: semantic-memory.js (committed, shipped
// by the Python package semantic-memory-opencode). `node scripts/build.mjs [outfile]`; the
// tests build into a temp file and compare, so a stale bundle fails `npm test`.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));

await build({
  absWorkingDir: root,
  entryPoints: ["src/index.ts"],
  outfile: process.argv[2] ?? "semantic-memory.js",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  legalComments: "none",
  logLevel: "warning",
  banner: {
    js:
      "// semantic-memory-mcp's opencode plugin (https://opencode.ai/docs/plugins/).\n" +
      "// Generated from opencode-plugin/src by `npm run build`: edit the sources, not this file.",
  },
});
