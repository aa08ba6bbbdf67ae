"""The prompt of Sweep's open next-edit models, for a raw completions API (llama-server).

As Sweep's model card writes it: `<|file_sep|>`-separated blocks, the file around the cursor,
the recently viewed code, the recent edits as `original:` / `updated:` pairs, then the
region before the last edit (`original/<path>:<start>:<end>`), as it is now with `<|cursor|>`
(`current/…`), and the header the model completes with the rewritten region
(`updated/…`). Lines are numbered from 1.
"""

from __future__ import annotations

from lsp_server.nextedit.request import EditRequest, HistoryEdit

FILE_SEP = "<|file_sep|>"
CURSOR = "<|cursor|>"
STOP = (FILE_SEP, "</s>", "<|endoftext|>")


def sweep_prompt(request: EditRequest, context: tuple[int, int]) -> str:
    text, (start, end), cursor = request.text, request.region, request.cursor
    first = text.count("\n", 0, start) + 1
    last = first + text.count("\n", start, end)
    lines = f"{first}:{last}"
    blocks = [_block(request.path, text[context[0] : context[1]])]
    blocks += [_block(chunk.path, chunk.text) for chunk in request.snippets]
    blocks += [_change(edit) for edit in request.history]
    region = text[start:end]
    blocks.append(_block(f"original/{request.path}:{lines}", region))
    current = text[start:cursor] + CURSOR + text[cursor:end]
    blocks.append(_block(f"current/{request.path}:{lines}", current))
    return "".join(blocks) + f"{FILE_SEP}updated/{request.path}:{lines}\n"


def read_sweep_answer(answer: str) -> str | None:
    for stop in STOP:
        cut = answer.find(stop)
        if cut >= 0:
            answer = answer[:cut]
    answer = answer.replace(CURSOR, "")
    return answer[:-1] if answer.endswith("\n") else answer


def _block(path: str, content: str) -> str:
    return f"{FILE_SEP}{path}\n{content}{'' if content.endswith(chr(10)) else chr(10)}"


def _change(edit: HistoryEdit) -> str:
    original: list[str] = []
    updated: list[str] = []
    for line in edit.diff.split("\n"):
        if line.startswith(("@@", "--- ", "+++ ")):
            continue
        if line.startswith("-"):
            original.append(line[1:])
        elif line.startswith("+"):
            updated.append(line[1:])
        elif line.startswith(" "):
            original.append(line[1:])
            updated.append(line[1:])
    body = "original:\n" + "\n".join(original) + "\nupdated:\n" + "\n".join(updated)
    return _block(f"{edit.path}.diff", body)
