import * as vscode from "vscode";

import { effectiveSettings, SECTION, type UserSettings } from "./settings";

/** The `gatewayLs` settings actually set (not the defaults package.json declares), by trust. */
export function readUserSettings(): UserSettings {
  const configuration = vscode.workspace.getConfiguration(SECTION);
  return effectiveSettings((key) => configuration.inspect(key));
}

export function firstWorkspaceFolder(): string | undefined {
  return vscode.workspace.workspaceFolders?.find((folder) => folder.uri.scheme === "file")?.uri
    .fsPath;
}
