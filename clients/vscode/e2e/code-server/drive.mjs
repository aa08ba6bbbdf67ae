// @ts-check
/**
 * Drives a running code-server (VS Code in the browser) with Debian's Chromium through
 * puppeteer-core, as a user would: opens a Python file, types, waits for the ghost text, reads the
 * status bar and runs the extension's commands. Screenshots of each step go to the artifacts
 * folder. One JSON object on stdout reports what was seen; the exit code is 1 when a step failed.
 *
 * Usage: node drive.mjs '<JSON plan>'; the plan's fields are documented on `Plan` below.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";

import { goToLineEnd, launchBrowser, openFileWithServer } from "./workbench.mjs";

/**
 * @typedef {object} Plan
 * @property {string} url          code-server's address, with `?folder=` for the workspace
 * @property {string} file         the file to open, by name (typed into Quick Open)
 * @property {number} line         1-based line on which to type
 * @property {string} type         the text typed at the end of that line
 * @property {string} [typeAfterFile] type only once this file exists: the caller's signal (say,
 *                                 that the local model has loaded), waited for up to `readyWaitMs`
 * @property {number} [readyWaitMs] wait for `typeAfterFile` (default `timeoutMs`)
 * @property {string} ghostText    text the ghost text must contain ("" for any text)
 * @property {number} [attempts]   how often to retype the last character when no ghost text
 *                                 came within `ghostWaitMs` (default 1: no retyping)
 * @property {number} [ghostWaitMs] wait for the ghost text per attempt (default `timeoutMs`)
 * @property {string} statusText   text the gateway-ls status bar item must contain ("" for any)
 * @property {boolean} [suggestWidget] with the ghost text shown, open the suggest widget
 *                                 (Ctrl+Space) and report its rows: the suggestion must not be
 *                                 listed there as well
 * @property {string} artifacts    folder for screenshots
 * @property {string} [browser]    the Chromium executable (default /usr/bin/chromium)
 * @property {number} [timeoutMs]  budget of each wait (default 60 s)
 * @property {string} [prefix]     prefix of the screenshots' names
 */

/** @type {Plan} */
const plan = JSON.parse(process.argv[2] ?? "{}");
const timeout = plan.timeoutMs ?? 60_000;
const prefix = plan.prefix ?? "vscode";
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
  steps.push(`opened ${plan.file}`);
  report.statusBarBefore = await statusBarText(page);
  steps.push("the server is running");

  if (plan.typeAfterFile) {
    const budget = plan.readyWaitMs ?? timeout;
    const deadline = Date.now() + budget;
    while (!existsSync(plan.typeAfterFile)) {
      if (Date.now() > deadline) {
        throw new Error(`${plan.typeAfterFile} did not appear within ${budget} ms`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    steps.push("told to type");
  }

  // Go to the end of the line and type, as a user would.
  await goToLineEnd(page, plan.line);
  await page.keyboard.type(plan.type, { delay: 60 });
  steps.push(`typed ${JSON.stringify(plan.type)} on line ${plan.line}`);

  // Wait for the ghost text; when retrying, retype the last character as a user would.
  const attempts = plan.attempts ?? 1;
  for (let attempt = 1; ; attempt += 1) {
    try {
      await page.waitForFunction(
        (expected) => {
          const ghost = [...document.querySelectorAll('.monaco-editor [class*="ghost-text"]')]
            .map((node) => node.textContent ?? "")
            .join("")
            .replace(/\u00a0/g, " ");
          return ghost.trim() !== "" && ghost.includes(expected);
        },
        { timeout: plan.ghostWaitMs ?? timeout },
        plan.ghostText,
      );
      report.attempts = attempt;
      break;
    } catch (error) {
      if (attempt >= attempts) {
        throw error;
      }
      await page.keyboard.press("Backspace");
      await page.keyboard.type(plan.type.slice(-1));
    }
  }
  // Monaco renders the ghost text's spaces as no-break spaces; the first line is inline.
  report.ghostText = await ghostText(page, '.monaco-editor [class*="ghost-text"]');
  const firstLine = await ghostText(page, ".monaco-editor .ghost-text-decoration");
  steps.push("ghost text shown");
  await shot("ghost-text");

  if (plan.suggestWidget) {
    steps.push("opening the suggest widget");
    report.suggestRows = await suggestWidgetRows(page);
    steps.push("the suggest widget listed its rows");
    await shot("suggest-widget");
    await page.keyboard.press("Escape");
    steps.push("closed the suggest widget");
    // Escape may have hidden the ghost text too: retype the last character to bring it back.
    const shown = await ghostText(page, '.monaco-editor [class*="ghost-text"]');
    if (!shown.includes(plan.ghostText) || shown.trim() === "") {
      await page.keyboard.press("Backspace");
      await page.keyboard.type(plan.type.slice(-1));
      await page.waitForFunction(
        (expected) =>
          [...document.querySelectorAll('.monaco-editor [class*="ghost-text"]')]
            .map((node) => node.textContent ?? "")
            .join("")
            .replace(/\u00a0/g, " ")
            .includes(expected),
        { timeout: plan.ghostWaitMs ?? timeout },
        plan.ghostText,
      );
    }
  }

  // The status bar names the endpoint that served the suggestion.
  await page.waitForFunction(
    (expected) =>
      (document.querySelector('[id$="gatewayLs.status"]')?.textContent ?? "").includes(expected),
    {},
    plan.statusText,
  );
  report.statusBar = await statusBarText(page);
  steps.push("status bar names the endpoint");

  // Tab accepts the suggestion into the document.
  await page.keyboard.press("Tab");
  await page.waitForFunction(
    (expected) =>
      (document.querySelector(".editor-instance .monaco-editor .view-lines")?.textContent ?? "")
        .replace(/\u00a0/g, " ")
        .includes(expected),
    {},
    plan.type + firstLine.trimEnd(),
  );
  steps.push("Tab accepted the suggestion");

  // gateway-ls: Show Routing Status, from the command palette.
  await runCommand(page, "gateway-ls: Show Routing Status");
  report.routingStatus = await waitForFrameText(page, "gateway-ls routing status", timeout);
  steps.push("Show Routing Status opened the routing status");
  await shot("routing-status");

  // gateway-ls: Toggle Offline Mode, choosing "always": the status bar says offline.
  await runCommand(page, "gateway-ls: Toggle Offline Mode");
  await page.waitForFunction(() =>
    [...document.querySelectorAll(".quick-input-list .monaco-list-row")].some((row) =>
      (row.textContent ?? "").includes("never leave this machine"),
    ),
  );
  await page.keyboard.type("always", { delay: 20 });
  await page.keyboard.press("Enter");
  await page.waitForFunction(() =>
    (document.querySelector('[id$="gatewayLs.status"]')?.textContent ?? "").includes("offline"),
  );
  report.statusBarOffline = await statusBarText(page);
  steps.push("Toggle Offline Mode switched to always");
  await shot("offline");

  report.notifications = await page.$$eval(".notification-toast", (nodes) =>
    nodes.map((node) => node.textContent ?? ""),
  );
} catch (error) {
  failed = true;
  report.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const pages = await browser.pages();
  const page = pages[pages.length - 1];
  if (page) {
    report.statusBar ??= await statusBarText(page).catch(() => undefined);
    report.notifications ??= await page
      .$$eval(".notification-toast", (nodes) => nodes.map((node) => node.textContent ?? ""))
      .catch(() => undefined);
    await page
      .screenshot({ path: join(plan.artifacts, `${prefix}-failure.png`) })
      .catch(() => undefined);
  }
} finally {
  await close();
}
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(failed ? 1 : 0);

/**
 * The text of the ghost text's nodes, no-break spaces as spaces.
 * @param {import("puppeteer-core").Page} page
 * @param {string} selector
 */
async function ghostText(page, selector) {
  return page.$$eval(selector, (nodes) =>
    nodes
      .map((node) => node.textContent ?? "")
      .join("")
      .replace(/\u00a0/g, " "),
  );
}

/**
 * Opens the suggest widget with Ctrl+Space and returns its rows once every provider answered
 * (a provider still at work shows "Loading..."); a widget with nothing in it says so.
 * @param {import("puppeteer-core").Page} page
 */
async function suggestWidgetRows(page) {
  // On a loaded machine the workbench may drop a chord pressed while it is busy, or the keys may
  // go elsewhere: press it again until the widget opens, rather than waiting once for a widget
  // that was never asked for.
  const attempts = 4;
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.down("Control");
    await page.keyboard.press("Space");
    await page.keyboard.up("Control");
    try {
      await page.waitForSelector(".suggest-widget .monaco-list-row, .suggest-widget .message", {
        visible: true,
        timeout: 15_000,
      });
      break;
    } catch (error) {
      // Say where the keys went, then give the editor the focus back (its tab: the cursor stays).
      const focused = await page.evaluate(() => {
        const node = document.activeElement;
        return node ? `${node.tagName.toLowerCase()}.${node.className}` : "nothing";
      });
      report.suggestAttempts = [...(/** @type {string[]} */ (report.suggestAttempts ?? [])), focused];
      if (attempt >= attempts) {
        throw error;
      }
      await focusEditorOf(page, plan.file);
    }
  }
  await page.waitForFunction(() => {
    const message = /** @type {HTMLElement | null} */ (document.querySelector(".suggest-widget .message"));
    const shown = message !== null && message.offsetParent !== null;
    return !shown || !(message.textContent ?? "").includes("Loading");
  });
  // A provider answering late adds its rows to an open widget: give one a moment.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  return page.$$eval(".suggest-widget .monaco-list-row", (rows) =>
    rows.map((row) => (row.textContent ?? "").replace(/\u00a0/g, " ")),
  );
}

/** @param {import("puppeteer-core").Page} page */
async function statusBarText(page) {
  return page.$eval('[id$="gatewayLs.status"]', (node) => node.textContent ?? "");
}

/**
 * Runs a command by its title from the command palette, opened from the file's editor: while a
 * webview (the routing status) has the focus, a key such as F1 may never reach the workbench.
 * @param {import("puppeteer-core").Page} page
 * @param {string} title
 */
async function runCommand(page, title) {
  await focusEditorOf(page, plan.file);
  await page.keyboard.press("F1");
  await page.waitForSelector(".quick-input-widget input", { visible: true });
  await page.keyboard.type(title, { delay: 20 });
  await page.waitForFunction(
    (wanted) =>
      [...document.querySelectorAll(".quick-input-list .monaco-list-row")].some((row) =>
        (row.getAttribute("aria-label") ?? row.textContent ?? "").includes(wanted),
      ),
    {},
    title,
  );
  await page.keyboard.press("Enter");
}

/**
 * Clicks the file's tab and waits until its editor has the keyboard focus.
 * @param {import("puppeteer-core").Page} page
 * @param {string} name
 */
async function focusEditorOf(page, name) {
  const tab = await page.waitForFunction(
    (wanted) =>
      [...document.querySelectorAll(".tabs-container .tab")].find((node) =>
        node.textContent?.includes(wanted),
      ),
    {},
    name,
  );
  await /** @type {import("puppeteer-core").ElementHandle<Element>} */ (tab).click();
  await page.waitForFunction(() => document.activeElement?.closest(".monaco-editor") != null);
}

/**
 * The text of the frame (webviews live in nested iframes) that contains `text`, read in the same
 * evaluation: a webview may replace its frame at any time, so a frame found is not kept.
 * @param {import("puppeteer-core").Page} page
 * @param {string} text
 * @param {number} budgetMs
 */
async function waitForFrameText(page, text, budgetMs) {
  const deadline = Date.now() + budgetMs;
  while (Date.now() < deadline) {
    for (const frame of page.frames()) {
      // A webview's frames come and go while it loads: one detached since `frames()` makes
      // `evaluate` throw at once, not reject, so both are caught.
      let shown = "";
      try {
        shown = await frame.evaluate(() => document.body?.innerText ?? "");
      } catch {
        shown = "";
      }
      if (shown.includes(text)) {
        return shown;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`no frame shows ${JSON.stringify(text)} after ${budgetMs} ms`);
}
