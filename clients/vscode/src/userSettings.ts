import * as vscode from "vscode";

import { MACHINE_KEYS, SECTION, SETTING_KEYS, type UserSettings } from "./settings";

/** The `gatewayLs` settings the user actually set (not the defaults package.json declares). */
export function readUserSettings(): UserSettings {
  const configuration = vscode.workspace.getConfiguration(SECTION);
  const user: Record<string, unknown> = {};
  for (const key of SETTING_KEYS) {
    const inspected = configuration.inspect(key);
    const value = MACHINE_KEYS.includes(key)
      ? inspected?.globalValue
      : (inspected?.workspaceFolderValue ?? inspected?.workspaceValue ?? inspected?.globalValue);
    if (value !== undefined) {
      user[key] = value;
    }
  }
  return user;
}

export function firstWorkspaceFolder(): string | undefined {
  return vscode.workspace.workspaceFolders?.find((folder) => folder.uri.scheme === "file")?.uri
    .fsPath;
}
