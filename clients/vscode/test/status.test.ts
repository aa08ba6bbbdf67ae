import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  formatMs,
  parseRoutingStatus,
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
    detail: null,
    ...overrides,
  };
}

const SAMPLE: RoutingStatus = {
  offline: "auto",
  offline_active: false,
  local: { state: "ready", model: "/models/gemma-3-270m-it-Q4_K_M.gguf", choice: "" },
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
      inline: { offered: 50, accepted: 10, acceptance_rate: 0.2, kept_rate: 0.9 },
      edit: { shown: 10, accepted: 4, acceptance_rate: 0.4, kept_rate: 0.75 },
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
      inline: null,
      edit: null,
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

  test("the tooltip says how auto chose the local model and its last switch", () => {
    const status = parseRoutingStatus({
      ...SAMPLE,
      local: {
        state: "ready",
        model: "/cache/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        auto: {
          preset: "qwen2.5-coder-0.5b",
          reason: "the best installed preset that fits the deadline",
          switches: [
            { at: 1700000000, from: "gemma-3-270m", to: "qwen2.5-coder-0.5b", reason: "calibrated" },
          ],
        },
      },
    });
    assert.ok(status);
    const tooltip = statusBarTooltip(status);
    assert.match(tooltip, /Chosen by auto: qwen2\.5-coder-0\.5b \(the best installed preset/);
    assert.match(tooltip, /gemma-3-270m → qwen2\.5-coder-0\.5b \(calibrated\)/);
    const named = parseRoutingStatus({ ...SAMPLE, local: { state: "ready", model: "/m.gguf" } });
    assert.ok(named);
    assert.doesNotMatch(statusBarTooltip(named), /Chosen by auto/);
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

  test("every reason the router gives reads as words, not as its code", () => {
    for (const reason of ["config-order", "local-only", "probe", "pinned", "no-endpoint"]) {
      const status = { ...SAMPLE, decisions: [decision({ reason })] };
      assert.doesNotMatch(statusBarTooltip(status), new RegExp(`, ${reason}\\b`));
    }
  });
});

describe("status document", () => {
  const markdown = statusMarkdown(SAMPLE);

  test("one row per endpoint with health, counters and percentiles", () => {
    assert.ok(markdown.includes("| mercury | openai | mercury-2 | inline | healthy | 120 | 97 | 2 | 84 ms | 1.5 s |"));
    assert.ok(markdown.includes("| claude | anthropic | claude-opus-4-6 | refactor | circuit open | 3 | 0 | 3 | – | – |"));
  });

  test("next edits: acceptance and the kept rate per edit endpoint", () => {
    assert.ok(markdown.includes("| mercury | 10 | 4 | 40 % | 75 % |"));
    assert.ok(!markdown.includes("| claude | –"));
  });

  test("inline suggestions: acceptance and the kept rate per endpoint that offered some", () => {
    assert.ok(markdown.includes("## Inline suggestions"));
    assert.ok(markdown.includes("| mercury | 50 | 10 | 20 % | 90 % |"));
    const unoffered = { offered: 0, accepted: 0, acceptance_rate: null, kept_rate: null };
    const none = [{ ...SAMPLE.endpoints[0]!, inline: unoffered }];
    assert.ok(!statusMarkdown({ ...SAMPLE, endpoints: none }).includes("## Inline suggestions"));
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

  test("parseRoutingStatus keeps a well-formed answer as it is", () => {
    assert.deepEqual(parseRoutingStatus(JSON.parse(JSON.stringify(SAMPLE))), SAMPLE);
  });

  test("parseRoutingStatus refuses what is no status", () => {
    assert.equal(parseRoutingStatus(null), undefined);
    assert.equal(parseRoutingStatus("ok"), undefined);
    assert.equal(parseRoutingStatus([]), undefined);
    assert.equal(parseRoutingStatus({ endpoints: [] }), undefined);
  });
});

describe("answers with null or absent fields", () => {
  /** A decision in which no endpoint answered, as the server reports it. */
  const unanswered = {
    time: "2025-03-01T10:00:07Z",
    kind: "inline",
    endpoint: null,
    reason: "deadline",
    latency_ms: 353,
    tokens: 0,
    cost_usd: 0,
    uri: "file:///src/app/main.py",
    detail: "no endpoint answered within 350 ms",
  };
  const sparse = {
    offline: "auto",
    local: null,
    endpoints: [{ name: "mercury", model: null, p50_ms: null, requests: null }, null, 7],
    decisions: [unanswered, { endpoint: null, time: null, latency_ms: null, uri: "%E0%A4" }, "x"],
  };

  test("a decision without an endpoint never reads null in the status bar", () => {
    const status = parseRoutingStatus({ ...SAMPLE, decisions: [unanswered] });
    assert.ok(status);
    const text = statusBarText(status);
    assert.equal(text, "$(zap) no suggestion 353 ms");
    assert.doesNotMatch(text, /null|undefined/);
    assert.match(
      statusBarTooltip(status),
      /no endpoint answered, 353 ms, nothing answered within the deadline: no endpoint/,
    );
  });

  test("the status document renders every sparse field without throwing", () => {
    const status = parseRoutingStatus(sparse);
    assert.ok(status);
    assert.equal(status.endpoints.length, 1);
    assert.equal(status.decisions.length, 2);
    const markdown = statusMarkdown(status);
    assert.doesNotMatch(markdown, /null|undefined|NaN/);
    assert.ok(markdown.includes("| mercury |  |  |  |  | – | – | – | – | – |"));
    assert.ok(
      markdown.includes(
        "| inline | – | nothing answered within the deadline: no endpoint answered within 350 ms | 353 ms | 0 | $0 | main.py |",
      ),
    );
    assert.ok(markdown.includes("%E0%A4"), "a file name that is not valid percent-encoding stays as it came");
    assert.doesNotMatch(statusBarText(status), /null|undefined|NaN/);
    assert.doesNotMatch(statusBarTooltip(status), /null|undefined|NaN/);
  });

  test("an empty status object renders as a server with nothing yet", () => {
    const status = parseRoutingStatus({ offline: "always" });
    assert.ok(status);
    assert.equal(statusBarText(status), "$(zap) gateway-ls");
    assert.match(statusMarkdown(status), /No requests routed yet/);
    assert.match(statusBarTooltip(status), /Local model: unknown/);
  });
});
