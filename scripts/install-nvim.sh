#!/usr/bin/env bash
# Neovim 0.12 for the editor tests (built-in inline completion arrived in 0.12), in .tools/nvim.
#
# PyPI's Neovim wheels stop at 0.11 and Debian stable ships 0.7, so this takes Debian unstable's
# neovim package and the libraries it links against (glibc included), downloads them with
# apt-get from Debian's own mirror into a private folder, and unpacks them there; nothing is
# installed system-wide. `.tools/bin/nvim` runs the binary through the unpacked dynamic loader.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD/.tools/nvim"
wrapper="$PWD/.tools/bin/nvim"
if [ -x "$wrapper" ] && "$wrapper" --version 2>/dev/null | grep -q '^NVIM v0\.1[2-9]'; then
    exit 0
fi
command -v apt-get >/dev/null || { echo "apt-get not found: cannot fetch Neovim 0.12" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/archives/partial"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
echo "deb $mirror sid main" >"$work/sources.list"
apt_options=(
    -o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::archives=$work/archives"
    -o "APT::Sandbox::User=root" -o "Debug::NoLocking=1"
)
echo "fetching Neovim 0.12 from Debian unstable into .tools/nvim" >&2
apt-get "${apt_options[@]}" -qq update
packages=(neovim neovim-runtime libc6 libgcc-s1 libluajit-5.1-2 libluajit-5.1-common
    libtree-sitter0.26 libunibilium4 libutf8proc3 libuv1t64 lua-lpeg lua-luv)
(cd "$work/archives" && apt-get "${apt_options[@]}" -qq download "${packages[@]}")
rm -rf "$root"
mkdir -p "$root" "$(dirname "$wrapper")"
for deb in "$work"/archives/*.deb; do
    dpkg-deb -x "$deb" "$root"
done
cat >"$wrapper" <<WRAPPER
#!/bin/sh
# Neovim from Debian unstable, run with the C library it was built for (see scripts/install-nvim.sh).
root="$root"
export VIMRUNTIME="\${VIMRUNTIME:-\$root/usr/share/nvim/runtime}"
exec "\$root/usr/lib64/ld-linux-x86-64.so.2" --library-path "\$root/usr/lib/x86_64-linux-gnu" \\
    "\$root/usr/bin/nvim" "\$@"
WRAPPER
chmod +x "$wrapper"
"$wrapper" --version | head -1
