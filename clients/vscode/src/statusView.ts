/** The routing status as a read-only markdown document, shown in the markdown preview. */
import * as vscode from "vscode";

import { type RoutingStatus, statusMarkdown } from "./status";

export const STATUS_SCHEME = "gateway-ls-status";
const STATUS_URI = vscode.Uri.from({ scheme: STATUS_SCHEME, path: "/Routing Status.md" });
const NOT_RUNNING =
  "# gateway-ls routing status\n\nThe server is not running. Run **gateway-ls: Restart Server**.\n";

export class StatusDocument implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private text = NOT_RUNNING;
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  update(status: RoutingStatus | undefined): void {
    const text = status ? statusMarkdown(status) : NOT_RUNNING;
    if (text !== this.text) {
      this.text = text;
      this.changed.fire(STATUS_URI);
    }
  }

  provideTextDocumentContent(): string {
    return this.text;
  }

  dispose(): void {
    this.changed.dispose();
  }
}

/** Opens the status in the markdown preview, or as plain markdown if the preview is unavailable. */
export async function showStatusDocument(): Promise<void> {
  const document = await vscode.workspace.openTextDocument(STATUS_URI);
  try {
    await vscode.commands.executeCommand("markdown.showPreview", STATUS_URI);
  } catch {
    await vscode.window.showTextDocument(document, { preview: true });
  }
}
