/**
 * The server's `gatewayLs.status` answer and how the extension shows it: the status bar item and
 * the routing status document.
 */
export type OfflineMode = "auto" | "always" | "never";
export const OFFLINE_MODES: readonly OfflineMode[] = ["auto", "always", "never"];

export interface EndpointStatus {
  readonly name: string;
  readonly kind: string;
  readonly model: string;
  readonly roles: readonly string[];
  /** "healthy" | "degraded" | "open" | "half_open", or whatever a newer server reports. */
  readonly health: string;
  readonly requests: number | null;
  readonly wins: number | null;
  readonly errors: number | null;
  readonly p50_ms: number | null;
  readonly p95_ms: number | null;
  /** What became of its inline suggestions; null for an endpoint without the `inline` role. */
  readonly inline: InlineOutcomes | null;
  /** What became of its next edits; null for an endpoint without the `edit` role. */
  readonly edit: EditOutcomes | null;
}

export interface InlineOutcomes {
  readonly offered: number | null;
  readonly accepted: number | null;
  readonly acceptance_rate: number | null;
  /** Of the characters accepted suggestions inserted, the share still there 30 s later. */
  readonly kept_rate: number | null;
}

export interface EditOutcomes {
  readonly shown: number | null;
  readonly accepted: number | null;
  readonly acceptance_rate: number | null;
  /** Of the characters accepted edits inserted, the share still there 30 s later. */
  readonly kept_rate: number | null;
}

export interface RoutingDecision {
  readonly time: string;
  /** "inline" | "refactor" */
  readonly kind: string;
  /** null when no endpoint answered (the deadline passed, every endpoint failed). */
  readonly endpoint: string | null;
  readonly reason: string;
  readonly latency_ms: number | null;
  readonly tokens: number | null;
  readonly cost_usd: number | null;
  readonly uri: string | null;
  /** What went wrong, in one line, when something did. */
  readonly detail: string | null;
}

export interface RoutingStatus {
  readonly offline: string;
  readonly offline_active: boolean;
  /** `choice`: how `model = "auto"` chose and its last switch, "" for a named model. */
  readonly local: { readonly state: string; readonly model: string; readonly choice: string };
  readonly endpoints: readonly EndpointStatus[];
  readonly decisions: readonly RoutingDecision[];
}

/**
 * The server's answer in a shape the rendering can rely on: absent, null or mistyped fields become
 * empty values (`null` for numbers, "" for names), so no field of a newer or older server can make
 * the status bar read "null" or the status view throw. Undefined when it is no status at all.
 */
export function parseRoutingStatus(value: unknown): RoutingStatus | undefined {
  const raw = record(value);
  if (raw === undefined || typeof raw.offline !== "string") {
    return undefined;
  }
  const local = record(raw.local) ?? {};
  return {
    offline: raw.offline,
    offline_active: raw.offline_active === true,
    local: {
      state: text(local.state) || "unknown",
      model: text(local.model),
      choice: autoChoice(record(local.auto)),
    },
    endpoints: list(raw.endpoints).flatMap((item) => {
      const e = record(item);
      return e === undefined
        ? []
        : [
            {
              name: text(e.name),
              kind: text(e.kind),
              model: text(e.model),
              roles: list(e.roles).filter((role): role is string => typeof role === "string"),
              health: text(e.health),
              requests: count(e.requests),
              wins: count(e.wins),
              errors: count(e.errors),
              p50_ms: count(e.p50_ms),
              p95_ms: count(e.p95_ms),
              inline: inlineOutcomes(record(e.inline)),
              edit: editOutcomes(record(e.edit)),
            },
          ];
    }),
    decisions: list(raw.decisions).flatMap((item) => {
      const d = record(item);
      return d === undefined
        ? []
        : [
            {
              time: text(d.time),
              kind: text(d.kind),
              endpoint: text(d.endpoint) || null,
              reason: text(d.reason),
              latency_ms: count(d.latency_ms),
              tokens: count(d.tokens),
              cost_usd: count(d.cost_usd),
              uri: text(d.uri) || null,
              detail: text(d.detail) || null,
            },
          ];
    }),
  };
}

function inlineOutcomes(inline: Record<string, unknown> | undefined): InlineOutcomes | null {
  return inline === undefined
    ? null
    : {
        offered: count(inline.offered),
        accepted: count(inline.accepted),
        acceptance_rate: count(inline.acceptance_rate),
        kept_rate: count(inline.kept_rate),
      };
}

function editOutcomes(edit: Record<string, unknown> | undefined): EditOutcomes | null {
  return edit === undefined
    ? null
    : {
        shown: count(edit.shown),
        accepted: count(edit.accepted),
        acceptance_rate: count(edit.acceptance_rate),
        kept_rate: count(edit.kept_rate),
      };
}

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function count(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

function list(value: unknown): readonly unknown[] {
  return Array.isArray(value) ? value : [];
}

const HEALTH_LABELS: Readonly<Record<string, string>> = {
  healthy: "healthy",
  degraded: "degraded",
  open: "circuit open",
  half_open: "probing (half open)",
};

/** The decisions, newest first. */
export function newestFirst(decisions: readonly RoutingDecision[]): RoutingDecision[] {
  return [...decisions].sort((a, b) => (Date.parse(b.time) || 0) - (Date.parse(a.time) || 0));
}

export function lastInlineDecision(status: RoutingStatus): RoutingDecision | undefined {
  return newestFirst(status.decisions).find((decision) => decision.kind === "inline");
}

/** The model behind an endpoint name; the local model is named by its file. */
export function modelOf(status: RoutingStatus, endpoint: string | null): string {
  if (endpoint === null) {
    return NO_ENDPOINT;
  }
  const remote = status.endpoints.find((e) => e.name === endpoint);
  if (remote) {
    return remote.model || remote.name;
  }
  if (endpoint === "local" && status.local.model) {
    return lastSegment(status.local.model);
  }
  return endpoint;
}

export function formatMs(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) {
    return "–";
  }
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export function formatUsd(usd: number | null): string {
  if (usd === null) {
    return "–";
  }
  return usd === 0 ? "$0" : `$${usd.toPrecision(2)}`;
}

/** `model = "auto"`: the preset served, why, and the last switch (the server lists them). */
function autoChoice(auto: Record<string, unknown> | undefined): string {
  if (auto === undefined || !text(auto.preset)) {
    return "";
  }
  const line = `Chosen by auto: ${text(auto.preset)} (${text(auto.reason)})`;
  const switches = list(auto.switches).flatMap((item) => {
    const entry = record(item);
    return entry ? [entry] : [];
  });
  const last = switches[switches.length - 1];
  if (last === undefined) {
    return line;
  }
  const at = typeof last.at === "number" ? new Date(last.at * 1000).toLocaleTimeString() : "";
  return `${line}\nSwitched ${at}: ${text(last.from)} → ${text(last.to)} (${text(last.reason)})`;
}

/** How a decision in which no endpoint answered is named. */
const NO_ENDPOINT = "no suggestion";

/** Status bar text with codicons: who served the last suggestion, how fast, and the mode. */
export function statusBarText(status: RoutingStatus): string {
  const last = lastInlineDecision(status);
  const icon =
    last?.reason === "sensitive" ? "$(lock)" : status.offline_active ? "$(cloud-offline)" : "$(zap)";
  const served = last
    ? `${modelOf(status, last.endpoint)} ${formatMs(last.latency_ms)}`
    : "gateway-ls";
  return status.offline_active ? `${icon} ${served} · offline` : `${icon} ${served}`;
}

export const STATUS_BAR_NOT_RUNNING = "$(circle-slash) gateway-ls";

export function statusBarTooltip(status: RoutingStatus): string {
  const last = lastInlineDecision(status);
  const lines = [
    last
      ? lastDecisionLine(status, last)
      : "No suggestion yet",
    `Offline mode: ${status.offline}${status.offline_active ? " (offline now)" : ""}`,
    `Local model: ${status.local.state}`,
    ...(status.local.choice ? [status.local.choice] : []),
    "Click for routing status",
  ];
  return lines.join("\n");
}

const REASONS: Readonly<Record<string, string>> = {
  fastest: "fastest endpoint",
  "hedge-win": "won a hedged race",
  fallback: "fallback",
  sensitive: "sensitive file, kept local",
  offline: "offline",
  "breaker-open": "circuit open elsewhere",
  explore: "exploring",
  probe: "probing an endpoint back from an outage",
  pinned: "the endpoint asked for",
  cache: "from cache",
  "config-order": "configured order, nothing measured yet",
  "local-only": "local model, no remote endpoint configured",
  "local-loading": "local model still loading",
  "local-declines": "the local model's preset does not predict next edits",
  "no-endpoint": "no endpoint available",
  deadline: "nothing answered within the deadline",
  configured: "the configured endpoint",
  "inline-fallback": "an inline endpoint's chat (no refactor endpoint)",
  failed: "every endpoint asked failed",
};

function reasonText(reason: string): string {
  return REASONS[reason] ?? reason;
}

function lastDecisionLine(status: RoutingStatus, last: RoutingDecision): string {
  const why = [reasonText(last.reason), last.detail].filter(Boolean).join(": ");
  return last.endpoint === null
    ? `Last request: no endpoint answered, ${formatMs(last.latency_ms)}, ${why}`
    : `Last suggestion: ${modelOf(status, last.endpoint)} (${last.endpoint}), ` +
        `${formatMs(last.latency_ms)}, ${why}`;
}

/** The routing status as a markdown document. */
export function statusMarkdown(status: RoutingStatus): string {
  const offlineLine = status.offline_active ? "yes, suggestions stay on this machine" : "no";
  const lines = [
    "# gateway-ls routing status",
    "",
    `- Offline mode: **${status.offline}**; offline now: ${offlineLine}`,
    `- Local model: ${cell(status.local.model || "bundled default")} (${status.local.state})`,
    "",
    "## Endpoints",
    "",
  ];
  if (status.endpoints.length === 0) {
    lines.push("No remote endpoints are configured; the local model serves every request.");
  } else {
    lines.push(
      "| endpoint | kind | model | roles | health | requests | wins | errors | p50 | p95 |",
      "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
      ...status.endpoints.map((e) =>
        row([
          e.name,
          e.kind,
          e.model,
          e.roles.join(", "),
          HEALTH_LABELS[e.health] ?? e.health,
          formatCount(e.requests),
          formatCount(e.wins),
          formatCount(e.errors),
          formatMs(e.p50_ms),
          formatMs(e.p95_ms),
        ]),
      ),
    );
  }
  const suggesting = status.endpoints.filter((e) => (e.inline?.offered ?? 0) > 0);
  if (suggesting.length > 0) {
    lines.push(
      "",
      "## Inline suggestions",
      "",
      "| endpoint | offered | accepted | acceptance | kept |",
      "| --- | ---: | ---: | ---: | ---: |",
      ...suggesting.map((e) =>
        row([
          e.name,
          formatCount(e.inline?.offered ?? null),
          formatCount(e.inline?.accepted ?? null),
          formatShare(e.inline?.acceptance_rate ?? null),
          formatShare(e.inline?.kept_rate ?? null),
        ]),
      ),
    );
  }
  const editing = status.endpoints.filter((e) => e.edit !== null);
  if (editing.length > 0) {
    lines.push(
      "",
      "## Next edits",
      "",
      "| endpoint | shown | accepted | acceptance | kept |",
      "| --- | ---: | ---: | ---: | ---: |",
      ...editing.map((e) =>
        row([
          e.name,
          formatCount(e.edit?.shown ?? null),
          formatCount(e.edit?.accepted ?? null),
          formatShare(e.edit?.acceptance_rate ?? null),
          formatShare(e.edit?.kept_rate ?? null),
        ]),
      ),
    );
  }
  lines.push("", "## Last routing decisions", "");
  if (status.decisions.length === 0) {
    lines.push("No requests routed yet.");
  } else {
    lines.push(
      "| time | kind | endpoint | reason | latency | tokens | cost | file |",
      "| --- | --- | --- | --- | ---: | ---: | ---: | --- |",
      ...newestFirst(status.decisions).map((d) =>
        row([
          d.time,
          d.kind,
          d.endpoint ?? "–",
          d.detail ? `${reasonText(d.reason)}: ${d.detail}` : reasonText(d.reason),
          formatMs(d.latency_ms),
          formatCount(d.tokens),
          formatUsd(d.cost_usd),
          d.uri ? fileName(d.uri) : "",
        ]),
      ),
    );
  }
  return lines.join("\n") + "\n";
}

function formatCount(value: number | null): string {
  return value === null ? "–" : String(value);
}

function formatShare(value: number | null): string {
  return value === null ? "–" : `${Math.round(value * 100)} %`;
}

function fileName(uri: string): string {
  const name = lastSegment(uri);
  try {
    return decodeURIComponent(name);
  } catch {
    return name; // not valid percent-encoding: shown as it came
  }
}

function lastSegment(pathOrUri: string): string {
  return pathOrUri.split(/[\\/]/).pop() || pathOrUri;
}

function row(cells: readonly string[]): string {
  return `| ${cells.map(cell).join(" | ")} |`;
}

/** Text made safe for a markdown table cell. */
function cell(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\|/g, "\\|").replace(/\r?\n/g, " ");
}
