/** The palette commands that talk to the server. */
import * as vscode from "vscode";

import type { GatewayServer } from "./server";
import { OFFLINE_MODES, type OfflineMode } from "./status";
import { askInstruction } from "./instructions";
import type { StatusPoller } from "./statusPoller";

/** Commands the server executes (`workspace/executeCommand`). */
export const SERVER_COMMANDS = {
  refactor: "gatewayLs.refactor",
  setOffline: "gatewayLs.setOffline",
  status: "gatewayLs.status",
} as const;

const OFFLINE_DESCRIPTIONS: Readonly<Record<OfflineMode, string>> = {
  auto: "use the network while it answers, the local model when it does not",
  always: "never leave this machine: the local model only",
  never: "always use the remote endpoints",
};

export async function refactorSelection(server: GatewayServer): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.selection.isEmpty) {
    void vscode.window.showWarningMessage("gateway-ls: select the code to refactor first.");
    return;
  }
  const instruction = await askInstruction();
  if (!instruction) {
    return;
  }
  const converter = server.converter;
  await server.executeCommand(SERVER_COMMANDS.refactor, [
    {
      uri: converter.asUri(editor.document.uri),
      range: converter.asRange(editor.selection),
      instruction,
    },
  ]);
}

export async function toggleOffline(server: GatewayServer, poller: StatusPoller): Promise<void> {
  const current = (await poller.refresh())?.offline;
  const items = OFFLINE_MODES.map((mode) => ({
    label: mode,
    description: mode === current ? "(current)" : "",
    detail: OFFLINE_DESCRIPTIONS[mode],
  }));
  const picked = await vscode.window.showQuickPick(items, { placeHolder: "Offline mode" });
  if (!picked) {
    return;
  }
  await server.executeCommand(SERVER_COMMANDS.setOffline, [picked.label]);
  await poller.refresh();
  void vscode.window.showInformationMessage(`gateway-ls: offline mode is now "${picked.label}".`);
}
