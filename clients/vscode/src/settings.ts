/**
 * The extension's settings and how they reach the server.
 *
 * Settings that mirror the configuration file are sent as `initializationOptions` and in
 * `workspace/didChangeConfiguration`, with the file's own snake_case keys. Only settings the user
 * actually set are sent, so the defaults declared in package.json never override the file.
 */

/** Settings under `gatewayLs`, keyed relative to that section, holding only what the user set. */
export type UserSettings = Readonly<Record<string, unknown>>;

export const SECTION = "gatewayLs";

/** Settings that decide how the server is started; changing one restarts it. */
export const LAUNCH_KEYS = ["serverPath", "pythonPath", "configPath"] as const;

/**
 * Settings taken from the user's own settings only, never from a workspace's
 * `.vscode/settings.json`: those that name a program or a file (opening a folder must not make the
 * editor run something it ships; they reach the server on its command line, never as
 * initialization options), and the sensitive-file list (a workspace's list would replace the
 * user's protection).
 */
export const USER_ONLY_KEYS: readonly string[] = [...LAUNCH_KEYS, "routing.sensitiveGlobs"];

/**
 * Privacy settings a workspace may only make stricter: its value counts when it is this one
 * (redaction on, never leave the machine); any other workspace value is ignored.
 */
const WORKSPACE_STRICTER_ONLY: Readonly<Record<string, unknown>> = {
  "routing.redactSecrets": true,
  "routing.offline": "always",
};

export interface LaunchSettings {
  readonly serverPath?: string;
  readonly pythonPath?: string;
  readonly configPath?: string;
}

type ServerSection = "routing" | "local";

/** Each forwarded setting and its place in the configuration file. */
const SERVER_KEYS: Readonly<Record<string, readonly [ServerSection, string]>> = {
  "routing.inlineDeadlineMs": ["routing", "inline_deadline_ms"],
  "routing.hedgeAfterMs": ["routing", "hedge_after_ms"],
  "routing.editEagerness": ["routing", "edit_eagerness"],
  "routing.offline": ["routing", "offline"],
  "routing.sensitiveGlobs": ["routing", "sensitive_globs"],
  "routing.redactSecrets": ["routing", "redact_secrets"],
  "local.enabled": ["local", "enabled"],
  "local.nThreads": ["local", "n_threads"],
};

/** Every setting the extension reads, relative to `gatewayLs`. */
export const SETTING_KEYS: readonly string[] = [...LAUNCH_KEYS, ...Object.keys(SERVER_KEYS)];

/** The server-side configuration overlay: `{routing: {...}, local: {...}}`, set keys only. */
export type ServerSettings = Partial<Record<ServerSection, Record<string, unknown>>>;

export interface InitializationOptions {
  readonly gatewayLs: ServerSettings;
}

/** A setting's values by scope, as `WorkspaceConfiguration.inspect` reports them. */
export interface ScopedValues {
  readonly globalValue?: unknown;
  readonly workspaceValue?: unknown;
  readonly workspaceFolderValue?: unknown;
}

/**
 * The settings in force, from each key's values by scope: the most specific scope wins, except that
 * user-only keys come from the user's settings and privacy keys from a workspace only when stricter.
 */
export function effectiveSettings(inspect: (key: string) => ScopedValues | undefined): UserSettings {
  const user: Record<string, unknown> = {};
  for (const key of SETTING_KEYS) {
    const scoped = inspect(key);
    const workspace = scoped?.workspaceFolderValue ?? scoped?.workspaceValue;
    let value: unknown;
    if (USER_ONLY_KEYS.includes(key)) {
      value = scoped?.globalValue;
    } else if (key in WORKSPACE_STRICTER_ONLY) {
      value = workspace === WORKSPACE_STRICTER_ONLY[key] ? workspace : scoped?.globalValue;
    } else {
      value = workspace ?? scoped?.globalValue;
    }
    if (value !== undefined) {
      user[key] = value;
    }
  }
  return user;
}

export function launchSettings(user: UserSettings): LaunchSettings {
  const picked: Record<string, string> = {};
  for (const key of LAUNCH_KEYS) {
    const value = user[key];
    if (typeof value === "string" && value.trim() !== "") {
      picked[key] = value.trim();
    }
  }
  return picked;
}

export function serverSettings(user: UserSettings): ServerSettings {
  const overlay: ServerSettings = {};
  for (const [key, [section, fileKey]] of Object.entries(SERVER_KEYS)) {
    const value = user[key];
    if (value !== undefined && value !== null) {
      (overlay[section] ??= {})[fileKey] = value;
    }
  }
  return overlay;
}

export function initializationOptions(user: UserSettings): InitializationOptions {
  return { gatewayLs: serverSettings(user) };
}

/** The payload of `workspace/didChangeConfiguration`: the whole overlay, replacing the last one. */
export function didChangeConfigurationParams(user: UserSettings): {
  settings: InitializationOptions;
} {
  return { settings: initializationOptions(user) };
}

/** Reads settings written as in settings.json (`"gatewayLs.routing.offline": "always"`). */
export function fromSettingsJson(json: Readonly<Record<string, unknown>>): UserSettings {
  const prefix = `${SECTION}.`;
  const user: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(json)) {
    if (key.startsWith(prefix) && value !== undefined) {
      user[key.slice(prefix.length)] = value;
    }
  }
  return user;
}

/** The extension-only setting that also offers each suggestion in the suggest widget. */
export const COMPLETION_ITEMS_KEY = "completionItems";

/**
 * Whether to ask the server for completion items (the suggest widget) as well as inline
 * suggestions. VS Code shows both, so the same suggestion would appear twice: only when the user
 * asks for it, or when inline suggestions are turned off and the suggest widget is the only place.
 */
export function asksForCompletionItems(setting: unknown, inlineSuggestEnabled: unknown): boolean {
  return setting === true || inlineSuggestEnabled === false;
}
