/** Keeps the latest `gatewayLs.status` answer: polled while the window has focus, and on demand. */
import * as vscode from "vscode";

import { parseRoutingStatus, type RoutingStatus } from "./status";

const POLL_INTERVAL_MS = 5000;
const SOON_MS = 300;

export class StatusPoller implements vscode.Disposable {
  private current: RoutingStatus | undefined;
  private inFlight: Promise<RoutingStatus | undefined> | undefined;
  private soon: NodeJS.Timeout | undefined;
  private readonly interval: NodeJS.Timeout;
  private readonly updated = new vscode.EventEmitter<RoutingStatus | undefined>();
  /** Fires with each new answer; undefined when the server is not running or did not answer. */
  readonly onDidUpdate = this.updated.event;
  private readonly focusListener: vscode.Disposable;

  constructor(private readonly fetch: () => Promise<unknown>) {
    this.interval = setInterval(() => {
      if (vscode.window.state.focused) {
        void this.refresh();
      }
    }, POLL_INTERVAL_MS);
    this.focusListener = vscode.window.onDidChangeWindowState((state) => {
      if (state.focused) {
        void this.refresh();
      }
    });
  }

  get latest(): RoutingStatus | undefined {
    return this.current;
  }

  /** Asks again shortly; a burst of calls (one per keystroke) makes one request. */
  refreshSoon(): void {
    clearTimeout(this.soon);
    this.soon = setTimeout(() => void this.refresh(), SOON_MS);
  }

  refresh(): Promise<RoutingStatus | undefined> {
    this.inFlight ??= this.fetchOnce().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  /** Forgets the last answer, e.g. when the server stopped. */
  clear(): void {
    this.current = undefined;
    this.updated.fire(undefined);
  }

  dispose(): void {
    clearInterval(this.interval);
    clearTimeout(this.soon);
    this.focusListener.dispose();
    this.updated.dispose();
  }

  private async fetchOnce(): Promise<RoutingStatus | undefined> {
    let answer: unknown;
    try {
      answer = await this.fetch();
    } catch {
      answer = undefined;
    }
    this.current = parseRoutingStatus(answer);
    this.updated.fire(this.current);
    return this.current;
  }
}
