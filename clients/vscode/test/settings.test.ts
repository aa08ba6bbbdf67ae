import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  asksForCompletionItems,
  didChangeConfigurationParams,
  effectiveSettings,
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
      local: { enabled: true, n_threads: 0 },
    });
  });

  test("a model path is never sent: it names a file, which only the configuration file may", () => {
    const options = initializationOptions({ "local.modelPath": "/tmp/evil.gguf", "local.enabled": true });
    assert.deepEqual(options.gatewayLs, { local: { enabled: true } });
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

describe("effectiveSettings: what a workspace may set", () => {
  type Scoped = { globalValue?: unknown; workspaceValue?: unknown; workspaceFolderValue?: unknown };
  const read = (values: Record<string, Scoped>) => effectiveSettings((key) => values[key]);

  test("programs, files and the sensitive-file list come from the user's settings only", () => {
    const settings = read({
      serverPath: { workspaceValue: "./run-me.sh" },
      pythonPath: { globalValue: "/usr/bin/python3", workspaceFolderValue: "./.venv/bin/python" },
      configPath: { workspaceValue: "./gateway-ls.toml" },
      "routing.sensitiveGlobs": { globalValue: ["**/.env"], workspaceValue: [] },
    });
    assert.deepEqual(settings, {
      pythonPath: "/usr/bin/python3",
      "routing.sensitiveGlobs": ["**/.env"],
    });
  });

  test("a workspace cannot weaken privacy: redaction off and leaving the machine are ignored", () => {
    const settings = read({
      "routing.redactSecrets": { globalValue: true, workspaceValue: false },
      "routing.offline": { workspaceFolderValue: "never" },
    });
    assert.deepEqual(settings, { "routing.redactSecrets": true });
    assert.deepEqual(initializationOptions(settings).gatewayLs, { routing: { redact_secrets: true } });
  });

  test("a workspace may make privacy stricter", () => {
    const settings = read({
      "routing.redactSecrets": { globalValue: false, workspaceValue: true },
      "routing.offline": { globalValue: "never", workspaceValue: "always" },
    });
    assert.deepEqual(settings, { "routing.redactSecrets": true, "routing.offline": "always" });
  });

  test("harmless knobs: the most specific scope wins", () => {
    const settings = read({
      "routing.inlineDeadlineMs": { globalValue: 350, workspaceValue: 500, workspaceFolderValue: 600 },
      "routing.hedgeAfterMs": { globalValue: 100 },
      "local.nThreads": { workspaceValue: 2 },
    });
    assert.deepEqual(settings, {
      "routing.inlineDeadlineMs": 600,
      "routing.hedgeAfterMs": 100,
      "local.nThreads": 2,
    });
  });
});

describe("asksForCompletionItems", () => {
  test("not by default: the suggestion is shown once, as ghost text", () => {
    assert.equal(asksForCompletionItems(undefined, true), false);
    assert.equal(asksForCompletionItems(false, undefined), false);
  });

  test("when the setting says so", () => {
    assert.equal(asksForCompletionItems(true, true), true);
  });

  test("when inline suggestions are off, the suggest widget is the only place", () => {
    assert.equal(asksForCompletionItems(false, false), true);
  });
});
