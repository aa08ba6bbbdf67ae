/** Asking the person what a refactor should do. */
import * as vscode from "vscode";

const INSTRUCTION_PRESETS = [
  "extract function",
  "add type hints",
  "simplify",
  "add docstrings",
  "handle errors",
  "make it idiomatic",
];

/** A quick pick of common instructions that also takes whatever the user types. */
export function askInstruction(): Promise<string | undefined> {
  const presets = INSTRUCTION_PRESETS.map((label) => ({ label }));
  const pick = vscode.window.createQuickPick();
  pick.title = "Refactor selection";
  pick.placeholder = "Describe the change, or pick one";
  pick.items = presets;
  return new Promise((resolve) => {
    pick.onDidChangeValue((value) => {
      const typed = value.trim();
      pick.items =
        typed && !INSTRUCTION_PRESETS.includes(typed) ? [{ label: typed }, ...presets] : presets;
    });
    pick.onDidAccept(() => {
      resolve(pick.selectedItems[0]?.label ?? (pick.value.trim() || undefined));
      pick.hide();
    });
    pick.onDidHide(() => {
      resolve(undefined);
      pick.dispose();
    });
    pick.show();
  });
}

/**
 * The server's generic code action ("Refactor with reasoning model…") carries an empty
 * instruction: an LSP server cannot ask for text, so the extension asks here before the command
 * runs. Returns undefined when the person dismisses the question.
 */
export async function withInstruction(args: unknown[]): Promise<unknown[] | undefined> {
  const target = args[0];
  if (typeof target !== "object" || target === null || !("instruction" in target)) {
    return args;
  }
  if ((target as { instruction: unknown }).instruction !== "") {
    return args;
  }
  const instruction = await askInstruction();
  return instruction ? [{ ...target, instruction }, ...args.slice(1)] : undefined;
}
