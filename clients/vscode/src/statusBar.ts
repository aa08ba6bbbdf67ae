/** The status bar item: the model behind the last suggestion, its latency and the offline state. */
import * as vscode from "vscode";

import {
  type RoutingStatus,
  STATUS_BAR_NOT_RUNNING,
  statusBarText,
  statusBarTooltip,
} from "./status";

export class RoutingStatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;

  constructor(command: string) {
    this.item = vscode.window.createStatusBarItem(
      "gatewayLs.status",
      vscode.StatusBarAlignment.Right,
      100,
    );
    this.item.name = "gateway-ls";
    this.item.command = command;
    this.update(undefined);
    this.item.show();
  }

  update(status: RoutingStatus | undefined): void {
    this.item.text = status ? statusBarText(status) : STATUS_BAR_NOT_RUNNING;
    this.item.tooltip = status
      ? statusBarTooltip(status)
      : "gateway-ls is not running. Click for routing status.";
  }

  dispose(): void {
    this.item.dispose();
  }
}
