// @ts-check
/**
 * Drives a next-edit prediction in a running code-server, as a user would: renames a word by
 * typing, waits for the next edit the extension draws away from the cursor (the old text struck
 * through, the new text beside it, a mark in the gutter), presses Tab to go there and Tab again
 * to apply it. It reports the ghost text on screen while the edit is drawn (there should be
 * none: one suggestion at a time) and, with `ghostText`, first waits for a ghost text at the
 * cursor that the next edit must then take the place of. Screenshots of each step go to the artifacts folder; one JSON object on stdout
 * reports what was seen; the exit code is 1 when a step failed.
 *
 * Usage: node next-edit.mjs '<JSON plan>'; the plan's fields are documented on `Plan` below.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { editorLines, goToPosition, launchBrowser, openFileWithServer } from "./workbench.mjs";

/**
 * @typedef {object} Plan
 * @property {string} url        code-server's address, with `?folder=` for the workspace
 * @property {string} file       the file to open, by name (typed into Quick Open)
 * @property {number} line       1-based line of the word to rename
 * @property {number} column     0-based column just after that word
 * @property {number} erase      how many characters to erase there (the old word)
 * @property {string} type       what to type instead (the new word)
 * @property {string} removed    the text the next edit must strike through
 * @property {string} added      the text the next edit must show beside it
 * @property {string} applied    a line the document must hold once the edit is applied
 * @property {boolean} [dismiss] press Esc on the edit instead of applying it
 * @property {string} [ghostText] text a ghost text at the cursor must show before the next edit
 * @property {string} artifacts  folder for screenshots
 * @property {string} [browser]  the Chromium executable (default /usr/bin/chromium)
 * @property {number} [timeoutMs] budget of each wait (default 60 s)
 * @property {string} [prefix]   prefix of the screenshots' names
 */

/** Monaco's ghost text: the inline part and the lines below it. */
const GHOST_TEXT = '.editor-instance .monaco-editor [class*="ghost-text"]';

/** @type {Plan} */
const plan = JSON.parse(process.argv[2] ?? "{}");
const timeout = plan.timeoutMs ?? 60_000;
const prefix = plan.prefix ?? "next-edit";
/** @type {Record<string, unknown>} */
const report = { steps: [] };
const steps = /** @type {string[]} */ (report.steps);

mkdirSync(plan.artifacts, { recursive: true });
const { browser, close } = await launchBrowser(plan.browser ?? "/usr/bin/chromium", timeout);
let failed = false;
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(timeout);
  /** @param {string} name */
  const shot = (name) => page.screenshot({ path: join(plan.artifacts, `${prefix}-${name}.png`) });

  report.reloads = await openFileWithServer(page, plan.url, plan.file);
  steps.push(`opened ${plan.file}, the server is running`);

  // Rename the word, a keystroke at a time.
  await goToPosition(page, plan.line, plan.column);
  for (let i = 0; i < plan.erase; i += 1) {
    await page.keyboard.press("Backspace");
  }
  await page.keyboard.type(plan.type, { delay: 60 });
  steps.push(`typed ${JSON.stringify(plan.type)} on line ${plan.line}`);

  if (plan.ghostText !== undefined) {
    await page.waitForFunction(
      (selector, expected) => {
        const ghost = [...document.querySelectorAll(selector)].map((node) => node.textContent ?? "").join("");
        return ghost.trim() !== "" && ghost.replace(/\u00a0/g, " ").includes(expected);
      },
      {},
      GHOST_TEXT,
      plan.ghostText,
    );
    report.ghostBefore = await ghostTextShown(page);
    steps.push("a ghost text is shown at the cursor");
    await shot("ghost-text");
  }

  // The next edit, drawn away from the cursor: struck-through text, new text, a gutter mark.
  const deadline = Date.now() + timeout;
  for (;;) {
    const drawn = await page.evaluate(nextEditDrawn);
    const complete = drawn.struck.includes(plan.removed) && drawn.beside.includes(plan.added);
    if (complete && drawn.gutterMarks > 0) {
      Object.assign(report, drawn);
      await new Promise((resolve) => setTimeout(resolve, 500)); // painted, not only in the DOM
      await shot("shown");
      break;
    }
    if (Date.now() > deadline) {
      throw new Error(`no next edit drawn within ${timeout} ms: ${JSON.stringify(drawn)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  report.shownLines = await editorLines(page);
  report.ghostWhileShown = await ghostTextShown(page);
  steps.push("the next edit is drawn");

  if (plan.dismiss) {
    await page.keyboard.press("Escape");
    // Gone: nothing struck through, nothing beside, no mark in the gutter.
    await page.waitForFunction(
      `(() => { const drawn = (${nextEditDrawn})();
        return !drawn.struck.length && !drawn.beside.length && !drawn.gutterMarks; })()`,
    );
    // Tab is Tab again: it indents where the cursor is.
    await page.keyboard.press("Tab");
    await new Promise((resolve) => setTimeout(resolve, 500));
    report.dismissedLines = await editorLines(page);
    steps.push("Esc dismissed the next edit");
    await shot("dismissed");
  } else {
    // Tab goes to the edit, Tab again applies it.
    await page.keyboard.press("Tab");
    await page.waitForFunction(
      () => document.querySelector(".editor-instance .monaco-editor .cursors-layer .cursor") !== null,
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    report.afterJumpLines = await editorLines(page);
    report.ghostAfterJump = await ghostTextShown(page);
    steps.push("Tab went to the next edit");
    await shot("jumped");
    await page.keyboard.press("Tab");
    await page.waitForFunction(
      (applied) =>
        [...document.querySelectorAll(".editor-instance .monaco-editor .view-lines .view-line")].some(
          (line) => (line.textContent ?? "").replace(/\u00a0/g, " ") === applied,
        ),
      {},
      plan.applied,
    );
    report.appliedLines = await editorLines(page);
    steps.push("Tab applied the next edit");
    await shot("applied");
  }
} catch (error) {
  failed = true;
  report.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const pages = await browser.pages();
  const page = pages[pages.length - 1];
  if (page) {
    report.lines = await editorLines(page).catch(() => undefined);
    await page.screenshot({ path: join(plan.artifacts, `${prefix}-failure.png`) }).catch(() => undefined);
  }
} finally {
  await close();
}
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(failed ? 1 : 0);

/**
 * The ghost text on screen, no-break spaces as spaces ("" when there is none).
 * @param {import("puppeteer-core").Page} page
 */
async function ghostTextShown(page) {
  const nodes = await page.$$eval(GHOST_TEXT, (found) => found.map((node) => node.textContent ?? ""));
  return nodes.join("").replace(/\u00a0/g, " ").trim();
}

/**
 * What the editor draws of a next edit, read in the page: the struck-through text, and the text
 * decorations put beside it (injected text, or a pseudo-element's content).
 */
function nextEditDrawn() {
  const editor = ".editor-instance .monaco-editor";
  /** @param {Element} node */
  const isStruck = (node) => getComputedStyle(node).textDecorationLine.includes("line-through");
  const struck = [];
  const beside = [];
  for (const node of document.querySelectorAll(`${editor} .view-line span`)) {
    const text = node.textContent ?? "";
    if (text && isStruck(node) && !(node.parentElement && isStruck(node.parentElement))) {
      struck.push(text);
    } else if (text && /(^|\s)ced-/.test(node.className) && !isStruck(node)) {
      beside.push(text); // an injected text decoration
    }
    for (const pseudo of ["::before", "::after"]) {
      const content = getComputedStyle(node, pseudo).content;
      if (content && content !== "none" && content !== "normal") {
        beside.push(content.replace(/^"|"$/g, ""));
      }
    }
  }
  const gutter = [...document.querySelectorAll(`${editor} .margin *`)].filter((node) =>
    getComputedStyle(node).backgroundImage.includes("next-edit"),
  ).length;
  const clean = (/** @type {string[]} */ texts) => texts.map((text) => text.replace(/\u00a0/g, " "));
  return { struck: clean(struck), beside: clean(beside), gutterMarks: gutter };
}
