#!/usr/bin/env bash
# llama.cpp's own HTTP server, llama-server, for the tests and benches that need a real
# `kind = "llamacpp"` upstream: built from the llama.cpp that the installed llama-cpp-python's
# source distribution vendors (the same llama.cpp as the local model), into
# .tools/llama-server-VERSION/ (VERSION: llama-cpp-python's). A second run at the same version
# does nothing.
#
# Only the server target, Release, static, for this machine's CPU; no web UI (neither built
# with npm nor downloaded), no HTTPS (it serves the tests on loopback), no tests or examples.
#
# Usage: scripts/build-llama-server.sh [VENV]   (default .venv; its python, pip and cmake)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
python="$venv/bin/python"
version="$("$python" -c 'from importlib.metadata import version; print(version("llama_cpp_python"))')"
dest="$PWD/.tools/llama-server-$version"
if [ -x "$dest/llama-server" ]; then
    exit 0
fi
cmake="$venv/bin/cmake"
[ -x "$cmake" ] || cmake="$(command -v cmake)" || { echo "cmake not found" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "building llama-server from llama-cpp-python $version's llama.cpp into $dest" >&2
"$python" -m pip download --quiet --no-binary :all: --no-deps "llama_cpp_python==$version" \
    -d "$work"
tar -xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
source_dir="$work/llama_cpp_python-$version/vendor/llama.cpp"
started=$SECONDS
"$cmake" -S "$source_dir" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >"$work/configure.log" \
    || { cat "$work/configure.log" >&2; exit 1; }
"$cmake" --build "$work/build" --target llama-server -j "$(nproc 2>/dev/null || echo 2)" \
    >"$work/build.log" || { tail -50 "$work/build.log" >&2; exit 1; }
mkdir -p "$dest.partial"
cp "$work/build/bin/llama-server" "$dest.partial/"
rm -rf "$dest"
mv "$dest.partial" "$dest"
echo "llama-server built in $((SECONDS - started)) s" >&2
