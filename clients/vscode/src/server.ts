/** The gateway-ls language server process and the language client talking to it. */
import * as readline from "node:readline";
import type { Readable } from "node:stream";

import * as vscode from "vscode";
import {
  type Code2ProtocolConverter,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  type Protocol2CodeConverter,
  type ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";

import { CURSOR_NOTIFICATION, type CursorReport } from "./cursorReports";
import { currentHost, discoverServer } from "./discovery";
import {
  asksForCompletionItems,
  COMPLETION_ITEMS_KEY,
  didChangeConfigurationParams,
  initializationOptions,
  launchSettings,
  SECTION,
} from "./settings";
import { withInstruction } from "./instructions";
import { StderrClassifier } from "./serverStderr";
import { firstWorkspaceFolder, readUserSettings } from "./userSettings";

/** The server command behind its refactor code actions (see commands.ts). */
const REFACTOR_COMMAND = "gatewayLs.refactor";

const STOP_TIMEOUT_MS = 2000;

/** What the language client asks the rest of the extension while it serves the editor. */
export interface ClientHooks {
  /** Called after each inline completion request the editor made. */
  readonly onInlineCompletion: () => void;
  /**
   * What a shown next edit puts in place of the server's inline suggestion at this position:
   * the edit itself as the suggestion, nothing at all while it is drawn elsewhere in the
   * document (one suggestion at a time), or undefined when no next edit is shown there.
   */
  readonly nextEditInline: (
    document: vscode.TextDocument,
    position: vscode.Position,
  ) => vscode.InlineCompletionItem[] | undefined;
}

export class GatewayServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly runningChanged = new vscode.EventEmitter<boolean>();
  /** Fires with true once the server is up, false when it stops. */
  readonly onDidChangeRunning = this.runningChanged.event;

  constructor(
    private readonly output: vscode.LogOutputChannel,
    private readonly hooks: ClientHooks,
  ) {}

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  async start(): Promise<void> {
    const discovery = discoverServer(
      launchSettings(readUserSettings()),
      currentHost(firstWorkspaceFolder()),
    );
    if (!discovery.found) {
      this.output.error(discovery.problem);
      void offerSettings(discovery.problem);
      return;
    }
    const { command, args, shell } = discovery.launch;
    this.output.info(`Starting ${command} ${args.join(" ")}`);
    const serverOptions: ServerOptions = {
      command,
      args: [...args],
      transport: TransportKind.stdio,
      options: { shell },
    };
    const client = new LanguageClient(SECTION, "gateway-ls", serverOptions, this.clientOptions());
    client.onDidChangeState(({ newState }) => this.runningChanged.fire(newState === State.Running));
    this.client = client;
    try {
      await client.start();
    } catch (error) {
      this.output.error(`The server did not start: ${String(error)}`);
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      await client.dispose(STOP_TIMEOUT_MS).catch((error: unknown) => {
        this.output.warn(`Stopping the server: ${String(error)}`);
      });
      this.runningChanged.fire(false);
    }
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Runs a server command through `workspace/executeCommand`. */
  async executeCommand(command: string, args: unknown[]): Promise<unknown> {
    return this.runningClient().sendRequest(ExecuteCommandRequest.type, {
      command,
      arguments: args,
    });
  }

  get converter(): Code2ProtocolConverter {
    return this.runningClient().code2ProtocolConverter;
  }

  get protocolConverter(): Protocol2CodeConverter {
    return this.runningClient().protocol2CodeConverter;
  }

  /** The server's `experimental` capabilities; undefined while it is not running. */
  get experimentalCapabilities(): unknown {
    return this.running ? this.client?.initializeResult?.capabilities.experimental : undefined;
  }

  /** A request outside the protocol's typed ones (the next-edit method). */
  async sendRequest(method: string, params: unknown, token: vscode.CancellationToken): Promise<unknown> {
    return this.runningClient().sendRequest(method, params, token);
  }

  async sendNotification(method: string, params: unknown): Promise<void> {
    await this.runningClient().sendNotification(method, params);
  }

  /** Reports where the cursor rests in `editor` (see cursorReports.ts); nothing if stopped. */
  notifyCursor(editor: vscode.TextEditor): void {
    const client = this.client;
    if (!client || !this.running || !["file", "untitled"].includes(editor.document.uri.scheme)) {
      return;
    }
    const converter = client.code2ProtocolConverter;
    const report: CursorReport = {
      textDocument: { uri: converter.asUri(editor.document.uri) },
      position: converter.asPosition(editor.selection.active),
    };
    void client.sendNotification(CURSOR_NOTIFICATION, report).catch((error: unknown) => {
      this.output.warn(`Reporting the cursor: ${String(error)}`);
    });
  }

  /** Sends the current settings; the server replaces the editor's previous overlay with them. */
  async sendSettings(): Promise<void> {
    if (this.client && this.running) {
      await this.client.sendNotification(
        DidChangeConfigurationNotification.type,
        didChangeConfigurationParams(readUserSettings()),
      );
    }
  }

  dispose(): void {
    void this.stop();
    this.runningChanged.dispose();
  }

  private runningClient(): LanguageClient {
    if (!this.client || !this.running) {
      throw new Error("the gateway-ls server is not running");
    }
    return this.client;
  }

  private clientOptions(): LanguageClientOptions {
    return {
      documentSelector: [{ scheme: "file" }, { scheme: "untitled" }],
      initializationOptions: () => initializationOptions(readUserSettings()),
      outputChannel: this.output,
      stdioOptions: {
        stdout: (input, channel) => eachLine(input, (line) => channel.info(line)),
        stderr: (input, channel) => {
          const classifier = new StderrClassifier();
          eachLine(input, (line) => {
            const { level, text } = classifier.classify(line);
            channel[level](text);
          });
        },
      },
      middleware: {
        executeCommand: async (command, args, next) => {
          if (command !== REFACTOR_COMMAND) {
            return next(command, args);
          }
          const completed = await withInstruction(args);
          return completed ? next(command, completed) : undefined;
        },
        provideInlineCompletionItems: async (document, position, context, token, next) => {
          const shown = this.hooks.nextEditInline(document, position);
          if (shown) {
            return shown;
          }
          const result = await next(document, position, context, token);
          this.hooks.onInlineCompletion();
          // A next edit drawn while the server answered keeps the screen: its answer is dropped.
          return this.hooks.nextEditInline(document, position) ?? result;
        },
        // VS Code would show each suggestion twice, as ghost text and in the suggest widget.
        provideCompletionItem: (document, position, context, token, next) => {
          const setting = vscode.workspace.getConfiguration(SECTION).get(COMPLETION_ITEMS_KEY);
          const inline = vscode.workspace
            .getConfiguration("editor", document)
            .get("inlineSuggest.enabled");
          return asksForCompletionItems(setting, inline) ? next(document, position, context, token) : undefined;
        },
      },
    };
  }
}

function eachLine(input: Readable, handle: (line: string) => void): void {
  readline
    .createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 })
    .on("line", handle);
}

async function offerSettings(problem: string): Promise<void> {
  const openSettings = "Open Settings";
  const choice = await vscode.window.showErrorMessage(`gateway-ls: ${problem}`, openSettings);
  if (choice === openSettings) {
    await vscode.commands.executeCommand("workbench.action.openSettings", `@ext:gateway-ls.gateway-ls`);
  }
}
