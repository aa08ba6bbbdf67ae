import * as vscode from "vscode";

/**
 * Tells the server where the cursor rests (`gatewayLs/didMoveCursor`), so that the local model
 * reads the prompt of a suggestion there before the first keystroke asks for it.
 */
export const CURSOR_NOTIFICATION = "gatewayLs/didMoveCursor";

/** The cursor must rest this long before it is reported: moving through a file sends nothing. */
export const CURSOR_REST_MS = 200;

export interface CursorReport {
  textDocument: { uri: string };
  position: { line: number; character: number };
}

/** Whether a selection change is the person moving the cursor (not typing, not an edit). */
export function isNavigation(kind: vscode.TextEditorSelectionChangeKind | undefined): boolean {
  return kind !== undefined;
}

export class CursorReporter implements vscode.Disposable {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly subscriptions: vscode.Disposable[];

  constructor(private readonly send: (editor: vscode.TextEditor) => void) {
    this.subscriptions = [
      vscode.window.onDidChangeTextEditorSelection((event) => {
        if (isNavigation(event.kind)) {
          this.schedule(event.textEditor);
        }
      }),
      vscode.window.onDidChangeActiveTextEditor((editor) => editor && this.schedule(editor)),
    ];
  }

  /** Reports the active editor's cursor once it rests (the server has just started). */
  reportActive(): void {
    const editor = vscode.window.activeTextEditor;
    if (editor) {
      this.schedule(editor);
    }
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.subscriptions.forEach((subscription) => subscription.dispose());
  }

  private schedule(editor: vscode.TextEditor): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.send(editor), CURSOR_REST_MS);
  }
}
