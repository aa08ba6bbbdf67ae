/**
 * Finds the gateway-ls server: `gatewayLs.serverPath`, else `<gatewayLs.pythonPath> -m lsp_server`,
 * else `gateway-ls` on PATH (with PATHEXT on Windows).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import type { LaunchSettings } from "./settings";

export const SERVER_EXECUTABLE = "gateway-ls";
export const SERVER_MODULE = "lsp_server";

export interface ServerLaunch {
  readonly command: string;
  readonly args: readonly string[];
  readonly source: "serverPath" | "pythonPath" | "PATH";
  /** Windows starts batch files (.cmd, .bat) only through a shell. */
  readonly shell: boolean;
}

export type Discovery =
  | { readonly found: true; readonly launch: ServerLaunch }
  | { readonly found: false; readonly problem: string };

/** What discovery reads from the machine; tests pass their own. */
export interface Host {
  readonly platform: NodeJS.Platform;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly homeDir: string;
  readonly workspaceFolder?: string;
}

export function currentHost(workspaceFolder?: string): Host {
  return { platform: process.platform, env: process.env, homeDir: os.homedir(), workspaceFolder };
}

export function discoverServer(settings: LaunchSettings, host: Host): Discovery {
  const configArgs = settings.configPath
    ? ["--config", expandPath(settings.configPath, host)]
    : [];
  if (settings.serverPath) {
    const server = findExecutable(settings.serverPath, host);
    return server
      ? found(server, ["serve", ...configArgs], "serverPath", host)
      : notFound(`gatewayLs.serverPath is "${settings.serverPath}", but no executable is there.`);
  }
  if (settings.pythonPath) {
    const python = findExecutable(settings.pythonPath, host);
    return python
      ? found(python, ["-m", SERVER_MODULE, "serve", ...configArgs], "pythonPath", host)
      : notFound(`gatewayLs.pythonPath is "${settings.pythonPath}", but no executable is there.`);
  }
  const server = searchPath(SERVER_EXECUTABLE, host);
  return server
    ? found(server, ["serve", ...configArgs], "PATH", host)
    : notFound(
        `The gateway-ls server was not found on PATH. Install it (pip install gateway-ls), ` +
          `or set gatewayLs.serverPath or gatewayLs.pythonPath.`,
      );
}

/** Expands `~`, `${userHome}`, `${workspaceFolder}` and `${env:NAME}`; relative paths are taken
 * from the workspace folder. */
export function expandPath(value: string, host: Host): string {
  const expanded = value
    .replace(/^~(?=$|[\\/])/, host.homeDir)
    .replace(/\$\{userHome\}/g, host.homeDir)
    .replace(/\$\{workspaceFolder\}/g, host.workspaceFolder ?? "${workspaceFolder}")
    .replace(/\$\{env:([^}]+)\}/g, (_, name: string) => envValue(host, name) ?? "");
  return path.resolve(host.workspaceFolder ?? host.homeDir, expanded);
}

function findExecutable(value: string, host: Host): string | undefined {
  const looksLikePath = /[\\/]/.test(value) || value.startsWith("~") || value.includes("${");
  if (!looksLikePath) {
    return searchPath(value, host);
  }
  return candidates(expandPath(value, host), host).find((file) => isExecutable(file, host));
}

function searchPath(name: string, host: Host): string | undefined {
  const delimiter = host.platform === "win32" ? ";" : ":";
  const directories = (envValue(host, "PATH") ?? "").split(delimiter).filter(Boolean);
  for (const directory of directories) {
    const hit = candidates(path.join(directory, name), host).find((file) => isExecutable(file, host));
    if (hit) {
      return hit;
    }
  }
  return undefined;
}

/** On Windows a bare name runs as name + one of PATHEXT's extensions. */
function candidates(file: string, host: Host): string[] {
  if (host.platform !== "win32") {
    return [file];
  }
  const extensions = (envValue(host, "PATHEXT") ?? ".COM;.EXE;.BAT;.CMD")
    .split(";")
    .filter(Boolean);
  const hasExtension = extensions.some((ext) => file.toLowerCase().endsWith(ext.toLowerCase()));
  return hasExtension ? [file] : extensions.map((ext) => file + ext);
}

function isExecutable(file: string, host: Host): boolean {
  try {
    if (!fs.statSync(file).isFile()) {
      return false;
    }
    if (host.platform !== "win32") {
      fs.accessSync(file, fs.constants.X_OK);
    }
    return true;
  } catch {
    return false;
  }
}

/** Environment variable names are case-insensitive on Windows (`Path`, `PATH`). */
function envValue(host: Host, name: string): string | undefined {
  if (host.platform !== "win32") {
    return host.env[name];
  }
  const key = Object.keys(host.env).find((k) => k.toUpperCase() === name.toUpperCase());
  return key === undefined ? undefined : host.env[key];
}

function found(
  command: string,
  args: string[],
  source: ServerLaunch["source"],
  host: Host,
): Discovery {
  const shell = host.platform === "win32" && /\.(cmd|bat)$/i.test(command);
  return { found: true, launch: { command, args, source, shell } };
}

function notFound(problem: string): Discovery {
  return { found: false, problem };
}
