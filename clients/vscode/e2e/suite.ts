/**
 * Runs inside the VS Code extension host. With GATEWAY_LS_PYTHON set to an interpreter that has
 * gateway-ls installed, it also starts the real server and waits for its routing status.
 */
import assert from "node:assert/strict";

import * as vscode from "vscode";

const EXTENSION_ID = "gateway-ls.gateway-ls";
const COMMANDS = [
  "gatewayLs.refactorSelection",
  "gatewayLs.toggleOffline",
  "gatewayLs.showStatus",
  "gatewayLs.restartServer",
];
const SERVER_WAIT_MS = 30_000;

export async function run(): Promise<void> {
  const extension = vscode.extensions.getExtension(EXTENSION_ID);
  assert.ok(extension, `${EXTENSION_ID} is installed`);
  await extension.activate();

  const registered = await vscode.commands.getCommands(true);
  for (const command of COMMANDS) {
    assert.ok(registered.includes(command), `${command} is registered`);
  }

  const python = process.env.GATEWAY_LS_PYTHON;
  if (python) {
    const settings = vscode.workspace.getConfiguration("gatewayLs");
    await settings.update("routing.offline", "always", vscode.ConfigurationTarget.Global);
    await settings.update("pythonPath", python, vscode.ConfigurationTarget.Global);
  }

  await vscode.commands.executeCommand("gatewayLs.showStatus");
  const statusDocument = () =>
    vscode.workspace.textDocuments.find((document) => document.uri.scheme === "gateway-ls-status");
  assert.ok(statusDocument(), "the routing status document is open");

  if (python) {
    const deadline = Date.now() + SERVER_WAIT_MS;
    while (!statusDocument()?.getText().includes("Offline mode: **always**")) {
      assert.ok(Date.now() < deadline, "the server answered gatewayLs.status with offline always");
      await new Promise((resolve) => setTimeout(resolve, 500));
      await vscode.commands.executeCommand("gatewayLs.showStatus");
    }
  }
}
