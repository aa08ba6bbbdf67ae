import * as vscode from "vscode";

import { refactorSelection, SERVER_COMMANDS, toggleOffline } from "./commands";
import { CursorReporter } from "./cursorReports";
import { NextEditController } from "./nextEdit";
import { GatewayServer } from "./server";
import { LAUNCH_KEYS, SECTION } from "./settings";
import { RoutingStatusBar } from "./statusBar";
import { StatusPoller } from "./statusPoller";
import { STATUS_SCHEME, StatusDocument, showStatusDocument } from "./statusView";

const COMMANDS = {
  refactorSelection: "gatewayLs.refactorSelection",
  toggleOffline: "gatewayLs.toggleOffline",
  showStatus: "gatewayLs.showStatus",
  restartServer: "gatewayLs.restartServer",
} as const;

let server: GatewayServer | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("gateway-ls", { log: true });
  const poller = new StatusPoller(() =>
    server?.running ? server.executeCommand(SERVER_COMMANDS.status, []) : Promise.resolve(undefined),
  );
  const gateway: GatewayServer = new GatewayServer(output, {
    onInlineCompletion: () => poller.refreshSoon(),
    nextEditInline: (document, position) => nextEdits.inlineItemsAt(document, position),
  });
  const nextEdits = new NextEditController(gateway, output, context.extensionUri);
  server = gateway;
  const statusBar = new RoutingStatusBar(COMMANDS.showStatus);
  const statusDocument = new StatusDocument();
  const cursors = new CursorReporter((editor) => gateway.notifyCursor(editor));

  context.subscriptions.push(
    output,
    gateway,
    nextEdits,
    poller,
    statusBar,
    statusDocument,
    cursors,
    vscode.workspace.registerTextDocumentContentProvider(STATUS_SCHEME, statusDocument),
    poller.onDidUpdate((status) => {
      statusBar.update(status);
      statusDocument.update(status);
    }),
    gateway.onDidChangeRunning((running) => {
      if (running) {
        void poller.refresh();
        cursors.reportActive();
      } else {
        poller.clear();
      }
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (!event.affectsConfiguration(SECTION)) {
        return;
      }
      const relaunch = LAUNCH_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`));
      void (relaunch ? gateway.restart() : gateway.sendSettings());
    }),
    command(COMMANDS.refactorSelection, () => refactorSelection(gateway)),
    command(COMMANDS.toggleOffline, () => toggleOffline(gateway, poller)),
    command(COMMANDS.showStatus, async () => {
      await poller.refresh();
      await showStatusDocument();
    }),
    command(COMMANDS.restartServer, () => gateway.restart()),
  );
  await gateway.start();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}

/** Registers a command whose failure is shown to the user rather than lost. */
function command(id: string, run: () => Promise<void>): vscode.Disposable {
  return vscode.commands.registerCommand(id, async () => {
    try {
      await run();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      void vscode.window.showErrorMessage(`gateway-ls: ${message}`);
    }
  });
}
