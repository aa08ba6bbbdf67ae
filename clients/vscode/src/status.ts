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
  readonly health: "healthy" | "degraded" | "open" | "half_open";
  readonly requests: number;
  readonly wins: number;
  readonly errors: number;
  readonly p50_ms: number | null;
  readonly p95_ms: number | null;
}

export interface RoutingDecision {
  readonly time: string;
  readonly kind: "inline" | "refactor";
  readonly endpoint: string;
  readonly reason: string;
  readonly latency_ms: number;
  readonly tokens: number;
  readonly cost_usd: number;
  readonly uri: string | null;
}

export interface RoutingStatus {
  readonly offline: OfflineMode;
  readonly offline_active: boolean;
  readonly local: { readonly state: string; readonly model: string };
  readonly endpoints: readonly EndpointStatus[];
  readonly decisions: readonly RoutingDecision[];
}

/** Checks the outline of a status answer; fields inside are trusted to follow the contract. */
export function isRoutingStatus(value: unknown): value is RoutingStatus {
  if (typeof value !== "object" || value === null) {
    return false;
  }
  const status = value as Record<string, unknown>;
  return (
    typeof status.offline === "string" &&
    typeof status.offline_active === "boolean" &&
    typeof status.local === "object" &&
    status.local !== null &&
    Array.isArray(status.endpoints) &&
    Array.isArray(status.decisions)
  );
}

const HEALTH_LABELS: Readonly<Record<EndpointStatus["health"], string>> = {
  healthy: "healthy",
  degraded: "degraded",
  open: "circuit open",
  half_open: "probing (half open)",
};

/** The decisions, newest first. */
export function newestFirst(decisions: readonly RoutingDecision[]): RoutingDecision[] {
  return [...decisions].sort((a, b) => Date.parse(b.time) - Date.parse(a.time));
}

export function lastInlineDecision(status: RoutingStatus): RoutingDecision | undefined {
  return newestFirst(status.decisions).find((decision) => decision.kind === "inline");
}

/** The model behind an endpoint name; the local model is named by its file. */
export function modelOf(status: RoutingStatus, endpoint: string): string {
  const remote = status.endpoints.find((e) => e.name === endpoint);
  if (remote) {
    return remote.model;
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

export function formatUsd(usd: number): string {
  return usd === 0 ? "$0" : `$${usd.toPrecision(2)}`;
}

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
      ? `Last suggestion: ${modelOf(status, last.endpoint)} (${last.endpoint}), ` +
        `${formatMs(last.latency_ms)}, ${reasonText(last.reason)}`
      : "No suggestion yet",
    `Offline mode: ${status.offline}${status.offline_active ? " (offline now)" : ""}`,
    `Local model: ${status.local.state}`,
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
  cache: "from cache",
};

function reasonText(reason: string): string {
  return REASONS[reason] ?? reason;
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
          String(e.requests),
          String(e.wins),
          String(e.errors),
          formatMs(e.p50_ms),
          formatMs(e.p95_ms),
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
          d.endpoint,
          reasonText(d.reason),
          formatMs(d.latency_ms),
          String(d.tokens),
          formatUsd(d.cost_usd),
          d.uri ? fileName(d.uri) : "",
        ]),
      ),
    );
  }
  return lines.join("\n") + "\n";
}

function fileName(uri: string): string {
  return decodeURIComponent(lastSegment(uri));
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
