/**
 * Next-edit predictions, the part that needs no editor: reading the server's answer to
 * `textDocument/copilotInlineEdit` and deciding how an edit is shown.
 *
 * The answer comes from a process that read untrusted files and model output, so every field is
 * checked: anything malformed is no edit, never an exception.
 */

/** The method and notification, in the Copilot language server's words. */
export const NEXT_EDIT_METHOD = "textDocument/copilotInlineEdit";
export const DID_SHOW_METHOD = "textDocument/didShowInlineEdit";
/** The server command that says a shown edit was dismissed (acceptance is the edit's own command). */
export const DISMISS_COMMAND = "gatewayLs.didDismissInlineEdit";

export interface WirePosition {
  readonly line: number;
  readonly character: number;
}

export interface WireRange {
  readonly start: WirePosition;
  readonly end: WirePosition;
}

export interface WireCommand {
  readonly title: string;
  readonly command: string;
  readonly arguments?: readonly unknown[];
}

/** One proposed edit, as the server sends it. */
export interface NextEdit {
  readonly text: string;
  readonly range: WireRange;
  readonly textDocument: { readonly uri: string; readonly version: number | null };
  readonly command?: WireCommand;
}

/** Bounds on what is shown: an edit larger than this is not a "next edit" but a rewrite. */
const MAX_TEXT_CHARS = 20_000;

/** Whether the server announced the method under its `experimental` capabilities. */
export function serverOffersNextEdits(experimental: unknown): boolean {
  return isRecord(experimental) && experimental.copilotInlineEdit === true;
}

/** The edits of an answer (alternatives, best first), malformed ones left out. */
export function parseNextEdits(answer: unknown): NextEdit[] {
  if (!isRecord(answer) || !Array.isArray(answer.edits)) {
    return [];
  }
  return answer.edits.flatMap((item: unknown) => {
    const edit = parseEdit(item);
    return edit ? [edit] : [];
  });
}

function parseEdit(item: unknown): NextEdit | undefined {
  if (!isRecord(item) || typeof item.text !== "string" || item.text.length > MAX_TEXT_CHARS) {
    return undefined;
  }
  const range = parseRange(item.range);
  const document = isRecord(item.textDocument) ? item.textDocument : undefined;
  if (range === undefined || document === undefined || typeof document.uri !== "string") {
    return undefined;
  }
  const version = Number.isInteger(document.version) ? (document.version as number) : null;
  return {
    text: item.text,
    range,
    textDocument: { uri: document.uri, version },
    command: parseCommand(item.command),
  };
}

function parseRange(value: unknown): WireRange | undefined {
  if (!isRecord(value)) {
    return undefined;
  }
  const start = parsePosition(value.start);
  const end = parsePosition(value.end);
  if (start === undefined || end === undefined || comparePositions(start, end) > 0) {
    return undefined;
  }
  return { start, end };
}

function parsePosition(value: unknown): WirePosition | undefined {
  if (!isRecord(value)) {
    return undefined;
  }
  const { line, character } = value;
  if (!isCount(line) || !isCount(character)) {
    return undefined;
  }
  return { line, character };
}

function parseCommand(value: unknown): WireCommand | undefined {
  if (!isRecord(value) || typeof value.command !== "string" || value.command === "") {
    return undefined;
  }
  return {
    title: typeof value.title === "string" ? value.title : "",
    command: value.command,
    arguments: Array.isArray(value.arguments) ? value.arguments : undefined,
  };
}

export function comparePositions(a: WirePosition, b: WirePosition): number {
  return a.line - b.line || a.character - b.character;
}

/**
 * The edit as an inline suggestion on the cursor's line, when VS Code can draw it as ghost text:
 * the whole line replaced by its edited text, where the edit only inserts text at or after the
 * cursor. Undefined otherwise (the edit is shown as a decoration instead).
 *
 * VS Code's stable API draws an inline completion item only when its range is on one line,
 * contains the cursor, and its text keeps the replaced text, adding to it after the cursor.
 */
export function ghostTextForm(
  edit: NextEdit,
  cursor: WirePosition,
  lineText: string,
): { readonly lineText: string } | undefined {
  const { start, end } = edit.range;
  if (start.line !== cursor.line || end.line !== cursor.line || edit.text.includes("\n")) {
    return undefined;
  }
  if (end.character > lineText.length) {
    return undefined;
  }
  const edited = lineText.slice(0, start.character) + edit.text + lineText.slice(end.character);
  if (edited === lineText) {
    return undefined;
  }
  const before = lineText.slice(0, cursor.character);
  if (!edited.startsWith(before) || !isSubsequence(lineText.slice(cursor.character), edited.slice(before.length))) {
    return undefined;
  }
  return { lineText: edited };
}

/** Whether `part` can be read in `whole` by skipping characters: `whole` only adds to it. */
function isSubsequence(part: string, whole: string): boolean {
  let at = 0;
  for (const char of whole) {
    if (at < part.length && char === part[at]) {
      at += 1;
    }
  }
  return at === part.length;
}

/** How the new text reads beside the struck-through old text: one line, its breaks marked. */
export function inlineLabel(text: string, maxChars = 120): string {
  const oneLine = text.replace(/\r?\n/g, " ⏎ ").replace(/\t/g, "    ");
  return oneLine.length > maxChars ? `${oneLine.slice(0, maxChars - 1)}…` : oneLine;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}
