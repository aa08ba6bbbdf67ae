/** Downloads VS Code and runs the in-editor suite against this extension (needs network). */
import * as path from "node:path";

import { runTests } from "@vscode/test-electron";

async function main(): Promise<void> {
  const extensionRoot = path.resolve(__dirname, "..");
  await runTests({
    extensionDevelopmentPath: extensionRoot,
    extensionTestsPath: path.join(__dirname, "suite.js"),
    launchArgs: ["--disable-extensions", "--disable-workspace-trust"],
  });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
