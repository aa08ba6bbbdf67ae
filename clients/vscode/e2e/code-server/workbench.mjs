// @ts-check
/**
 * The steps every code-server drive shares: Chromium launched through puppeteer-core, a file
 * opened by Quick Open, the extension's server waited for, the cursor put on a line.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import puppeteer from "puppeteer-core";

const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
  "--window-size=1280,800",
];

/**
 * Chromium with a throwaway profile; `close` removes the profile.
 * @param {string} executable
 * @param {number} timeout
 */
export async function launchBrowser(executable, timeout) {
  const profile = mkdtempSync(join(tmpdir(), "gateway-ls-chromium-"));
  const browser = await puppeteer.launch({
    executablePath: executable,
    headless: true,
    args: [...CHROMIUM_FLAGS, `--user-data-dir=${profile}`],
    defaultViewport: { width: 1280, height: 800 },
    timeout,
  });
  return {
    browser,
    close: async () => {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Loads the workbench and opens `file` with Quick Open.
 * @param {import("puppeteer-core").Page} page
 * @param {string} url
 * @param {string} file
 */
async function openFile(page, url, file) {
  await page.goto(url, { waitUntil: "domcontentloaded" });
  await page.waitForSelector(".monaco-workbench .part.editor", { visible: true });
  await page.waitForSelector(".statusbar-item", { visible: true });
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyP");
  await page.keyboard.up("Control");
  await page.waitForSelector(".quick-input-widget input", { visible: true });
  await page.keyboard.type(file, { delay: 20 });
  await page.waitForFunction(
    (name) =>
      [...document.querySelectorAll(".quick-input-list .monaco-list-row")].some((row) =>
        row.textContent?.includes(name),
      ),
    {},
    file,
  );
  await page.keyboard.press("Enter");
  await page.waitForFunction(
    (name) =>
      [...document.querySelectorAll(".tabs-container .tab")].some((tab) =>
        tab.textContent?.includes(name),
      ),
    {},
    file,
  );
  await page.waitForSelector(".editor-instance .monaco-editor .view-lines", { visible: true });
}

/**
 * Opens `file` and waits for the extension's server; returns how many times the window was
 * reloaded for it (0 or 1).
 *
 * The first window of a fresh code-server has once come up without the user's settings: the
 * extension read no `gatewayLs.pythonPath` although settings.json set it, said the server was not
 * found, and no change of settings followed in the 90 s after. A user reloads the window then; so
 * does this, once. A second miss fails the step.
 * @param {import("puppeteer-core").Page} page
 * @param {string} url
 * @param {string} file
 */
export async function openFileWithServer(page, url, file) {
  for (let reloads = 0; ; reloads += 1) {
    await openFile(page, url, file);
    const state = await waitForServer(page);
    if (state === "running") {
      return reloads;
    }
    if (reloads >= 1) {
      throw new Error("the extension did not see its settings, also after a reload of the window");
    }
  }
}

/**
 * The extension starts the server once the workbench is up; until the server answers, the status
 * bar item shows a slashed circle. Typing before that would go unseen by the server. Resolves
 * "running", or "not-found" when the extension reported that it found no server to start.
 * @param {import("puppeteer-core").Page} page
 * @returns {Promise<"running" | "not-found">}
 */
async function waitForServer(page) {
  const state = await page.waitForFunction(() => {
    const notFound = [...document.querySelectorAll(".notification-toast")].some((toast) =>
      (toast.textContent ?? "").includes("The gateway-ls server was not found"),
    );
    if (notFound) {
      return "not-found";
    }
    const item = document.querySelector('[id$="gatewayLs.status"]');
    return item !== null && item.querySelector(".codicon-circle-slash") === null && "running";
  });
  return /** @type {"running" | "not-found"} */ (await state.jsonValue());
}

/**
 * Puts the cursor at the end of a 1-based line, with Go to Line as a user would.
 * @param {import("puppeteer-core").Page} page
 * @param {number} line
 */
export async function goToLineEnd(page, line) {
  await goTo(page, `${line}`);
  await page.keyboard.press("End");
}

/**
 * Puts the cursor on a 1-based line before a 0-based column, with Go to Line's `line:column`.
 * @param {import("puppeteer-core").Page} page
 * @param {number} line
 * @param {number} column
 */
export async function goToPosition(page, line, column) {
  await goTo(page, `${line}:${column + 1}`);
}

/**
 * Go to Line, as a user would: Ctrl+G, the target typed, Enter; returns once the editor has the
 * focus again, so that the next keys reach it.
 * @param {import("puppeteer-core").Page} page
 * @param {string} target
 */
async function goTo(page, target) {
  await page.click(".editor-instance .monaco-editor .view-lines");
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyG");
  await page.keyboard.up("Control");
  await page.waitForSelector(".quick-input-widget input", { visible: true });
  await page.keyboard.type(target, { delay: 20 });
  await page.keyboard.press("Enter");
  await page.waitForSelector(".quick-input-widget", { hidden: true });
  await page.waitForFunction(() =>
    document.activeElement?.closest(".editor-instance .monaco-editor") != null,
  );
}

/**
 * The editor's text as shown, decorations' injected text included, no-break spaces as spaces.
 * @param {import("puppeteer-core").Page} page
 */
export async function editorLines(page) {
  return page.$$eval(".editor-instance .monaco-editor .view-lines .view-line", (nodes) =>
    nodes
      .map((node) => ({
        top: Number.parseFloat(/** @type {HTMLElement} */ (node).style.top) || 0,
        text: (node.textContent ?? "").replace(/\u00a0/g, " "),
      }))
      .sort((a, b) => a.top - b.top)
      .map((line) => line.text),
  );
}
