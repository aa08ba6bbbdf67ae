/**
 * Next-edit predictions in the editor: after a pause in typing the server is asked for the edit
 * the user makes next (`textDocument/copilotInlineEdit`). An edit on the cursor's line that only
 * adds text after the cursor shows as the inline suggestion; any other edit shows as a decoration
 * (the removed text struck through, the new text beside it) with a mark in the gutter. Tab jumps
 * to it, Tab again applies it, Esc dismisses it: the keybindings hold only while an edit is shown
 * (the `gatewayLs.nextEdit` context key), so Tab keeps its meaning otherwise.
 *
 * One suggestion at a time, so that Tab does what the screen shows: while an edit is drawn
 * away from the cursor, the ghost text on screen is hidden and the inline suggestions of that
 * document are none, until the edit is applied, dismissed, or typed over. The next edit wins
 * over the ghost text because it is the later answer (asked after the pause in typing that
 * the ghost text was shown in) and it read the recent edits; at the cursor it is itself the
 * ghost text, so the screen never shows two.
 */
import * as vscode from "vscode";

import {
  DID_SHOW_METHOD,
  DISMISS_COMMAND,
  ghostTextForm,
  inlineLabel,
  NEXT_EDIT_METHOD,
  type NextEdit,
  parseNextEdits,
  serverOffersNextEdits,
  type WireCommand,
} from "./nextEditModel";
import type { GatewayServer } from "./server";
import { SECTION } from "./settings";

/** The context key the keybindings read: "away" (Tab jumps), "here" (Tab applies) or unset. */
const CONTEXT_KEY = "gatewayLs.nextEdit";
const DEFAULT_DELAY_MS = 400;

export const NEXT_EDIT_COMMANDS = {
  request: "gatewayLs.nextEdit.request",
  jump: "gatewayLs.nextEdit.jump",
  accept: "gatewayLs.nextEdit.accept",
  dismiss: "gatewayLs.nextEdit.dismiss",
  /** Run by VS Code when the inline suggestion form of an edit is accepted. */
  acceptedInline: "gatewayLs.nextEdit.acceptedInline",
} as const;

interface Shown {
  readonly edit: NextEdit;
  readonly editor: vscode.TextEditor;
  readonly version: number;
  readonly range: vscode.Range;
  /** The cursor's line as the edit makes it, when shown as the inline suggestion. */
  readonly ghostLine?: string;
}

export class NextEditController implements vscode.Disposable {
  private shown: Shown | undefined;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: vscode.CancellationTokenSource | undefined;
  private readonly removed: vscode.TextEditorDecorationType;
  private readonly inserted: vscode.TextEditorDecorationType;
  private readonly gutter: vscode.TextEditorDecorationType;
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly server: GatewayServer,
    private readonly output: vscode.LogOutputChannel,
    extensionUri: vscode.Uri,
  ) {
    this.removed = vscode.window.createTextEditorDecorationType({
      textDecoration: "line-through",
      backgroundColor: new vscode.ThemeColor("diffEditor.removedTextBackground"),
    });
    this.inserted = vscode.window.createTextEditorDecorationType({
      after: {
        backgroundColor: new vscode.ThemeColor("diffEditor.insertedTextBackground"),
        margin: "0 0 0 0.3em",
      },
    });
    this.gutter = vscode.window.createTextEditorDecorationType({
      gutterIconPath: vscode.Uri.joinPath(extensionUri, "media", "next-edit.svg"),
      gutterIconSize: "contain",
      overviewRulerColor: new vscode.ThemeColor("editorOverviewRuler.modifiedForeground"),
      overviewRulerLane: vscode.OverviewRulerLane.Right,
    });
    this.subscriptions = [
      this.removed,
      this.inserted,
      this.gutter,
      vscode.workspace.onDidChangeTextDocument((event) => this.documentChanged(event)),
      vscode.window.onDidChangeActiveTextEditor(() => this.clear()),
      vscode.window.onDidChangeTextEditorSelection((event) => this.selectionChanged(event)),
      vscode.commands.registerCommand(NEXT_EDIT_COMMANDS.request, () => this.request()),
      vscode.commands.registerCommand(NEXT_EDIT_COMMANDS.jump, () => this.jump()),
      vscode.commands.registerCommand(NEXT_EDIT_COMMANDS.accept, () => this.accept()),
      vscode.commands.registerCommand(NEXT_EDIT_COMMANDS.dismiss, () => this.dismiss()),
      vscode.commands.registerCommand(NEXT_EDIT_COMMANDS.acceptedInline, (command?: WireCommand) =>
        this.acceptedInline(command),
      ),
    ];
  }

  /**
   * The inline suggestions a shown edit makes at this position, for the inline completion
   * provider: the edit itself on its line when it is shown as the inline suggestion, none while
   * it is drawn elsewhere in the document, and undefined (the server is asked) otherwise.
   */
  inlineItemsAt(
    document: vscode.TextDocument,
    position: vscode.Position,
  ): vscode.InlineCompletionItem[] | undefined {
    const shown = this.shown;
    if (shown === undefined || shown.editor.document !== document || document.version !== shown.version) {
      return undefined;
    }
    if (shown.ghostLine === undefined) {
      return [];
    }
    if (position.line !== shown.range.start.line) {
      return undefined;
    }
    const line = document.lineAt(position.line).range;
    return [
      new vscode.InlineCompletionItem(shown.ghostLine, line, {
        title: "Accept next edit",
        command: NEXT_EDIT_COMMANDS.acceptedInline,
        arguments: [shown.edit.command],
      }),
    ];
  }

  /** Asks for the next edit at the active editor's cursor now, replacing any shown edit. */
  async request(): Promise<void> {
    clearTimeout(this.timer);
    this.clear();
    this.inFlight?.cancel();
    const editor = vscode.window.activeTextEditor;
    if (!editor || !this.server.running || !serverOffersNextEdits(this.server.experimentalCapabilities)) {
      return;
    }
    const document = editor.document;
    const version = document.version;
    const cursor = editor.selection.active;
    const converter = this.server.converter;
    const uri = converter.asUri(document.uri);
    const source = new vscode.CancellationTokenSource();
    this.inFlight = source;
    let answer: unknown;
    try {
      answer = await this.server.sendRequest(
        NEXT_EDIT_METHOD,
        { textDocument: { uri, version }, position: converter.asPosition(cursor) },
        source.token,
      );
    } catch (error) {
      if (!source.token.isCancellationRequested) {
        this.output.warn(`Next edit: ${String(error)}`);
      }
      return;
    } finally {
      if (this.inFlight === source) {
        this.inFlight = undefined;
      }
      source.dispose();
    }
    const current = vscode.window.activeTextEditor;
    if (source.token.isCancellationRequested || current?.document !== document || document.version !== version) {
      return; // superseded: the user typed on, or moved elsewhere
    }
    const edit = parseNextEdits(answer).find(
      (candidate) => candidate.textDocument.uri === uri && (candidate.textDocument.version ?? version) === version,
    );
    if (edit) {
      await this.show(current, edit);
    }
  }

  private async show(editor: vscode.TextEditor, edit: NextEdit): Promise<void> {
    const document = editor.document;
    const range = document.validateRange(this.server.protocolConverter.asRange(edit.range));
    const cursor = editor.selection.active;
    const ghost = editor.selection.isEmpty
      ? ghostTextForm(edit, { line: cursor.line, character: cursor.character }, document.lineAt(cursor.line).text)
      : undefined;
    this.shown = { edit, editor, version: document.version, range, ghostLine: ghost?.lineText };
    editor.setDecorations(this.gutter, [new vscode.Range(range.start, range.start)]);
    if (ghost) {
      await vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
    } else {
      // The ghost text goes: Tab now belongs to the edit drawn here.
      await vscode.commands.executeCommand("editor.action.inlineSuggest.hide");
      this.decorate(editor, edit, range);
    }
    await this.updateContext();
    await this.server.sendNotification(DID_SHOW_METHOD, { item: edit }).catch((error: unknown) => {
      this.output.warn(`Next edit: ${String(error)}`);
    });
  }

  private decorate(editor: vscode.TextEditor, edit: NextEdit, range: vscode.Range): void {
    editor.setDecorations(this.removed, range.isEmpty ? [] : [range]);
    editor.setDecorations(this.inserted, [
      {
        range: new vscode.Range(range.end, range.end),
        renderOptions: { after: { contentText: inlineLabel(edit.text) || "⌫" } },
        hoverMessage: new vscode.MarkdownString("Next edit: **Tab** to go there, **Tab** again to apply, **Esc** to dismiss"),
      },
    ]);
  }

  /** Moves the cursor to the edit; the next Tab applies it. */
  private async jump(): Promise<void> {
    const shown = this.current();
    if (!shown) {
      return;
    }
    shown.editor.selection = new vscode.Selection(shown.range.start, shown.range.start);
    shown.editor.revealRange(shown.range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    await this.updateContext();
  }

  /** Applies the shown edit, puts the cursor after it and tells the server it was accepted. */
  private async accept(): Promise<void> {
    const shown = this.current();
    if (!shown) {
      return;
    }
    this.clear();
    const { editor, range, edit } = shown;
    const applied = await editor.edit((builder) => builder.replace(range, edit.text));
    if (!applied) {
      return;
    }
    const end = editor.document.positionAt(editor.document.offsetAt(range.start) + edit.text.length);
    editor.selection = new vscode.Selection(end, end);
    await this.runServerCommand(edit.command);
  }

  private async acceptedInline(command: WireCommand | undefined): Promise<void> {
    this.clear();
    await this.runServerCommand(command);
  }

  private async dismiss(): Promise<void> {
    const shown = this.shown;
    this.clear();
    if (shown?.ghostLine !== undefined) {
      await vscode.commands.executeCommand("editor.action.inlineSuggest.hide");
    }
    const id = shown?.edit.command?.arguments?.[0];
    if (id !== undefined) {
      await this.runServerCommand({ title: "", command: DISMISS_COMMAND, arguments: [id] });
    }
  }

  private async runServerCommand(command: WireCommand | undefined): Promise<void> {
    if (!command || !this.server.running) {
      return;
    }
    try {
      await this.server.executeCommand(command.command, [...(command.arguments ?? [])]);
    } catch (error) {
      this.output.warn(`Next edit: ${command.command}: ${String(error)}`);
    }
  }

  /** The shown edit, if it still applies to its document as it is now. */
  private current(): Shown | undefined {
    const shown = this.shown;
    if (shown && shown.editor.document.version === shown.version) {
      return shown;
    }
    this.clear();
    return undefined;
  }

  private documentChanged(event: vscode.TextDocumentChangeEvent): void {
    const editor = vscode.window.activeTextEditor;
    if (event.contentChanges.length === 0 || editor?.document !== event.document) {
      return;
    }
    this.clear();
    this.inFlight?.cancel();
    const settings = vscode.workspace.getConfiguration(SECTION, event.document);
    if (!settings.get<boolean>("nextEdit.enabled", true)) {
      return;
    }
    const delay = settings.get<number>("nextEdit.delayMs", DEFAULT_DELAY_MS);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.request(), Math.max(0, delay));
  }

  private selectionChanged(event: vscode.TextEditorSelectionChangeEvent): void {
    if (this.shown && event.textEditor === this.shown.editor) {
      void this.updateContext();
    }
  }

  private async updateContext(): Promise<void> {
    const shown = this.shown;
    let value: string | undefined;
    if (shown && shown.ghostLine === undefined) {
      const cursor = shown.editor.selection.active;
      value = cursor.line === shown.range.start.line ? "here" : "away";
    }
    await vscode.commands.executeCommand("setContext", CONTEXT_KEY, value);
  }

  private clear(): void {
    const shown = this.shown;
    this.shown = undefined;
    if (shown) {
      // The keys first: once the edit is no longer drawn, Tab is Tab again.
      void vscode.commands.executeCommand("setContext", CONTEXT_KEY, undefined);
      for (const type of [this.removed, this.inserted, this.gutter]) {
        shown.editor.setDecorations(type, []);
      }
    }
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.inFlight?.cancel();
    this.clear();
    for (const subscription of this.subscriptions) {
      subscription.dispose();
    }
  }
}
