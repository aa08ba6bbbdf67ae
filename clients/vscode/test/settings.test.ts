import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  didChangeConfigurationParams,
  fromSettingsJson,
  initializationOptions,
  launchSettings,
} from "../src/settings";

describe("initializationOptions", () => {
  test("nothing set sends an empty overlay", () => {
    assert.deepEqual(initializationOptions({}), { gatewayLs: {} });
  });

  test("only the keys the user set, with the file's snake_case names", () => {
    const options = initializationOptions({
      "routing.inlineDeadlineMs": 250,
      "routing.offline": "always",
      "local.enabled": false,
      "local.nThreads": 2,
      serverPath: "/usr/bin/gateway-ls",
      "trace.server": "verbose",
    });
    assert.deepEqual(options, {
      gatewayLs: {
        routing: { inline_deadline_ms: 250, offline: "always" },
        local: { enabled: false, n_threads: 2 },
      },
    });
  });

  test("every forwarded setting maps to its TOML key", () => {
    const options = initializationOptions({
      "routing.inlineDeadlineMs": 300,
      "routing.hedgeAfterMs": 80,
      "routing.offline": "never",
      "routing.sensitiveGlobs": ["**/*.secret"],
      "routing.redactSecrets": false,
      "local.modelPath": "/models/tiny.gguf",
      "local.enabled": true,
      "local.nThreads": 0,
    });
    assert.deepEqual(options.gatewayLs, {
      routing: {
        inline_deadline_ms: 300,
        hedge_after_ms: 80,
        offline: "never",
        sensitive_globs: ["**/*.secret"],
        redact_secrets: false,
      },
      local: { model_path: "/models/tiny.gguf", enabled: true, n_threads: 0 },
    });
  });

  test("didChangeConfiguration carries the same overlay under settings.gatewayLs", () => {
    const user = { "routing.hedgeAfterMs": 90 };
    assert.deepEqual(didChangeConfigurationParams(user), {
      settings: { gatewayLs: { routing: { hedge_after_ms: 90 } } },
    });
  });
});

describe("launchSettings", () => {
  test("keeps non-empty launch strings only", () => {
    assert.deepEqual(
      launchSettings({ serverPath: "  ", pythonPath: " /venv/bin/python ", configPath: 3 }),
      { pythonPath: "/venv/bin/python" },
    );
  });
});

describe("fromSettingsJson", () => {
  test("reads settings.json keys under gatewayLs and ignores others", () => {
    const user = fromSettingsJson({
      "gatewayLs.pythonPath": "python3",
      "gatewayLs.routing.offline": "always",
      "editor.fontSize": 14,
    });
    assert.deepEqual(user, { pythonPath: "python3", "routing.offline": "always" });
  });
});
