import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { StderrClassifier } from "../src/serverStderr";

function classifyAll(lines: readonly string[]): string[] {
  const classifier = new StderrClassifier();
  return lines.map((line) => {
    const { level, text } = classifier.classify(line);
    return `${level} ${text}`;
  });
}

describe("server stderr lines", () => {
  test("logging lines keep their level and lose the timestamp", () => {
    assert.deepEqual(
      classifyAll([
        "2026-12-02 21:00:00,123 INFO lsp_server.lsp.server: gateway-ls 0.1.0 serving over stdio",
        "2026-12-02 21:00:00,200 WARNING lsp_server.config: routing.offline: refused from the editor",
        "2026-12-02 21:00:01,000 DEBUG lsp_server.routing: probe",
        "2026-12-02 21:00:02,000 ERROR lsp_server.backends.local: the model did not load",
        "WARNING:lsp_server.config:plain basicConfig format",
      ]),
      [
        "info lsp_server.lsp.server: gateway-ls 0.1.0 serving over stdio",
        "warn lsp_server.config: routing.offline: refused from the editor",
        "debug lsp_server.routing: probe",
        "error lsp_server.backends.local: the model did not load",
        "warn lsp_server.config:plain basicConfig format",
      ],
    );
  });

  test("normal start-up output is info, not an error", () => {
    assert.deepEqual(classifyAll(["loading the local model: 40%", "gemma-3-270m ready"]), [
      "info loading the local model: 40%",
      "info gemma-3-270m ready",
    ]);
  });

  test("a traceback is an error down to the exception's line, then info again", () => {
    assert.deepEqual(
      classifyAll([
        "Traceback (most recent call last):",
        '  File "lsp_server/__main__.py", line 3, in <module>',
        "    main()",
        "RuntimeError: boom",
        "restarting",
      ]).map((line) => line.split(" ")[0]),
      ["error", "error", "error", "error", "info"],
    );
  });

  test("indented lines continue the message above at its level", () => {
    assert.deepEqual(
      classifyAll(["2026-12-02 21:00:00,123 ERROR x: bad config", "  config.toml, line 3, key routing.offline"]).map(
        (line) => line.split(" ")[0],
      ),
      ["error", "error"],
    );
  });

  test("a command-line error is an error", () => {
    assert.deepEqual(classifyAll(["gateway-ls: error: unrecognized arguments: --bogus"]), [
      "error gateway-ls: error: unrecognized arguments: --bogus",
    ]);
  });
});
