"""llama-cpp-python's OpenAI-compatible server, an OpenAI-only llama.cpp upstream (no `/infill`).

`python -m tests.support.llama_cpp_python_server ARGS` is `python -m llama_cpp.server ARGS` with
the model's weights kept out of AMX buffers, as the in-process local model does: llama.cpp's AMX
kernel crashes the process on some CPUs (see `lsp_server.backends.local.loading`).
"""

from __future__ import annotations

import runpy

import llama_cpp

from lsp_server.backends.local.loading import plain_weight_buffers

if __name__ == "__main__":
    with plain_weight_buffers(llama_cpp):
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
