import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  formatMs,
  isRoutingStatus,
  type RoutingDecision,
  type RoutingStatus,
  statusBarText,
  statusBarTooltip,
  statusMarkdown,
} from "../src/status";

function decision(overrides: Partial<RoutingDecision>): RoutingDecision {
  return {
    time: "2025-03-01T10:00:00Z",
    kind: "inline",
    endpoint: "mercury",
    reason: "fastest",
    latency_ms: 84.4,
    tokens: 21,
    cost_usd: 0.0000123,
    uri: "file:///src/app/main.py",
    ...overrides,
  };
}

const SAMPLE: RoutingStatus = {
  offline: "auto",
  offline_active: false,
  local: { state: "ready", model: "/models/gemma-3-270m-it-Q4_K_M.gguf" },
  endpoints: [
    {
      name: "mercury",
      kind: "openai",
      model: "mercury-2",
      roles: ["inline"],
      health: "healthy",
      requests: 120,
      wins: 97,
      errors: 2,
      p50_ms: 84.2,
      p95_ms: 1510,
    },
    {
      name: "claude",
      kind: "anthropic",
      model: "claude-opus-4-6",
      roles: ["refactor"],
      health: "open",
      requests: 3,
      wins: 0,
      errors: 3,
      p50_ms: null,
      p95_ms: null,
    },
  ],
  decisions: [
    decision({ time: "2025-03-01T10:00:01Z", endpoint: "local", reason: "hedge-win", latency_ms: 40 }),
    decision({ time: "2025-03-01T10:00:05Z" }),
    decision({
      time: "2025-03-01T10:00:09Z",
      kind: "refactor",
      endpoint: "claude",
      reason: "fallback",
      latency_ms: 4200,
      uri: null,
    }),
  ],
};

describe("status bar", () => {
  test("names the model behind the newest inline suggestion and its latency", () => {
    assert.equal(statusBarText(SAMPLE), "$(zap) mercury-2 84 ms");
  });

  test("offline: the cloud-offline icon and the local model's file name", () => {
    const status: RoutingStatus = {
      ...SAMPLE,
      offline_active: true,
      decisions: [decision({ endpoint: "local", reason: "offline", latency_ms: 61 })],
    };
    assert.equal(statusBarText(status), "$(cloud-offline) gemma-3-270m-it-Q4_K_M.gguf 61 ms · offline");
  });

  test("a sensitive file shows the lock", () => {
    const status = { ...SAMPLE, decisions: [decision({ endpoint: "local", reason: "sensitive" })] };
    assert.match(statusBarText(status), /^\$\(lock\) /);
  });

  test("before any suggestion", () => {
    assert.equal(statusBarText({ ...SAMPLE, decisions: [] }), "$(zap) gateway-ls");
  });

  test("tooltip explains the last decision and the mode", () => {
    const tooltip = statusBarTooltip(SAMPLE);
    assert.match(tooltip, /mercury-2 \(mercury\), 84 ms, fastest endpoint/);
    assert.match(tooltip, /Offline mode: auto/);
  });
});

describe("status document", () => {
  const markdown = statusMarkdown(SAMPLE);

  test("one row per endpoint with health, counters and percentiles", () => {
    assert.ok(markdown.includes("| mercury | openai | mercury-2 | inline | healthy | 120 | 97 | 2 | 84 ms | 1.5 s |"));
    assert.ok(markdown.includes("| claude | anthropic | claude-opus-4-6 | refactor | circuit open | 3 | 0 | 3 | – | – |"));
  });

  test("decisions newest first, with reason, cost and file", () => {
    const rows = markdown.split("\n").filter((line) => line.startsWith("| 2025-"));
    assert.equal(rows.length, 3);
    assert.ok(rows[0]?.includes("| refactor | claude | fallback | 4.2 s |"));
    assert.ok(rows[1]?.includes("| inline | mercury | fastest endpoint | 84 ms | 21 | $0.000012 | main.py |"));
    assert.ok(rows[2]?.includes("won a hedged race"));
  });

  test("table cells are escaped", () => {
    const status = { ...SAMPLE, decisions: [decision({ endpoint: "a|b" })] };
    assert.ok(statusMarkdown(status).includes("| a\\|b |"));
  });

  test("empty server: says so instead of empty tables", () => {
    const text = statusMarkdown({ ...SAMPLE, endpoints: [], decisions: [] });
    assert.match(text, /No remote endpoints are configured/);
    assert.match(text, /No requests routed yet/);
  });
});

describe("helpers", () => {
  test("formatMs", () => {
    assert.equal(formatMs(null), "–");
    assert.equal(formatMs(12.6), "13 ms");
    assert.equal(formatMs(2345), "2.3 s");
  });

  test("isRoutingStatus accepts the contract's outline only", () => {
    assert.ok(isRoutingStatus(JSON.parse(JSON.stringify(SAMPLE))));
    assert.ok(!isRoutingStatus(null));
    assert.ok(!isRoutingStatus({ offline: "auto" }));
  });
});
