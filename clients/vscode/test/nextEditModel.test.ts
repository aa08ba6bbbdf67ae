import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  ghostTextForm,
  inlineLabel,
  type NextEdit,
  parseNextEdits,
  serverOffersNextEdits,
} from "../src/nextEditModel";

const URI = "file:///project/scale.py";

function edit(text: string, line: number, start: number, end: number, endLine = line): NextEdit {
  return {
    text,
    range: { start: { line, character: start }, end: { line: endLine, character: end } },
    textDocument: { uri: URI, version: 4 },
  };
}

describe("serverOffersNextEdits", () => {
  test("only when the method is announced under experimental", () => {
    assert.equal(serverOffersNextEdits({ copilotInlineEdit: true, didShowInlineEdit: true }), true);
    assert.equal(serverOffersNextEdits({ copilotInlineEdit: "yes" }), false);
    assert.equal(serverOffersNextEdits(undefined), false);
    assert.equal(serverOffersNextEdits([]), false);
  });
});

describe("parseNextEdits", () => {
  const wire = {
    text: "amount",
    range: { start: { line: 1, character: 13 }, end: { line: 1, character: 18 } },
    textDocument: { uri: URI, version: 4 },
    command: { title: "Accept next edit", command: "gatewayLs.didAcceptInlineEdit", arguments: ["e1"] },
  };

  test("reads the edits and their acceptance command", () => {
    const [parsed] = parseNextEdits({ edits: [wire] });
    assert.deepEqual(parsed, wire);
  });

  test("no edits, or no answer at all, is no edit", () => {
    assert.deepEqual(parseNextEdits({ edits: [] }), []);
    assert.deepEqual(parseNextEdits(null), []);
    assert.deepEqual(parseNextEdits({ edits: "none" }), []);
  });

  test("a malformed edit is left out, the others kept", () => {
    const backwards = { ...wire, range: { start: wire.range.end, end: wire.range.start } };
    const negative = { ...wire, range: { start: { line: -1, character: 0 }, end: wire.range.end } };
    const noText = { ...wire, text: 7 };
    const noUri = { ...wire, textDocument: { version: 4 } };
    const huge = { ...wire, text: "x".repeat(20_001) };
    const parsed = parseNextEdits({ edits: [backwards, negative, noText, noUri, huge, wire] });
    assert.deepEqual(parsed, [wire]);
  });

  test("a missing version or command is tolerated", () => {
    const [parsed] = parseNextEdits({
      edits: [{ ...wire, textDocument: { uri: URI }, command: { title: "no id" } }],
    });
    assert.equal(parsed?.textDocument.version, null);
    assert.equal(parsed?.command, undefined);
  });
});

describe("ghostTextForm", () => {
  const line = "    total = add(price, tax";

  test("an insertion after the cursor on its line is the inline suggestion of the whole line", () => {
    const closing = edit(")", 3, line.length, line.length);
    assert.deepEqual(ghostTextForm(closing, { line: 3, character: 16 }, line), {
      lineText: `${line})`,
    });
  });

  test("insertions in several places after the cursor still read as ghost text", () => {
    const both = edit("price * 2, tax)", 3, 16, line.length);
    assert.deepEqual(ghostTextForm(both, { line: 3, character: 16 }, line), {
      lineText: "    total = add(price * 2, tax)",
    });
  });

  test("an edit on another line is a decoration", () => {
    assert.equal(ghostTextForm(edit(")", 4, 0, 0), { line: 3, character: 5 }, line), undefined);
  });

  test("an edit that removes text, or adds before the cursor, is a decoration", () => {
    const rename = edit("amount", 3, 16, 21);
    assert.equal(ghostTextForm(rename, { line: 3, character: 16 }, line), undefined);
    const before = edit("self.", 3, 12, 12);
    assert.equal(ghostTextForm(before, { line: 3, character: 20 }, line), undefined);
  });

  test("a multi-line edit, one past the line's end, or no change is never ghost text", () => {
    const cursor = { line: 3, character: 0 };
    assert.equal(ghostTextForm(edit(")\n", 3, line.length, line.length), cursor, line), undefined);
    assert.equal(ghostTextForm(edit(")", 3, 40, 40), cursor, line), undefined);
    assert.equal(ghostTextForm(edit("total", 3, 4, 9), cursor, line), undefined);
    assert.equal(ghostTextForm(edit(")", 3, 0, 0, 4), cursor, line), undefined);
  });
});

describe("inlineLabel", () => {
  test("line breaks are marked, long text cut", () => {
    assert.equal(inlineLabel("a\nb"), "a ⏎ b");
    assert.equal(inlineLabel("x".repeat(10), 5), "xxxx…");
  });
});
