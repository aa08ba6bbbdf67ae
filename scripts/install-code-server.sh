#!/bin/sh
# Installs what the real-editor test of the VS Code extension needs: code-server (VS Code in a
# browser, from the npm registry), Debian's chromium to drive it, and ripgrep / libkrb5-dev for
# code-server's native modules. Nothing is downloaded from outside the npm and Debian mirrors:
# code-server's own install script would fetch ripgrep from GitHub, so scripts are skipped and the
# native modules are rebuilt here against the system's node headers.
#
# Usage: scripts/install-code-server.sh CACHE_DIR   (idempotent; prints nothing when up to date)
set -eu

CODE_SERVER_VERSION=4.100.3
cache=${1:?usage: $0 CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
stamp="$cache/.installed-$CODE_SERVER_VERSION"

missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v rg >/dev/null 2>&1 || missing="$missing ripgrep"
[ -e /usr/include/krb5.h ] || missing="$missing libkrb5-dev"
command -v g++ >/dev/null 2>&1 || missing="$missing g++"
command -v make >/dev/null 2>&1 || missing="$missing make"
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "installing$missing (apt-get)" >&2
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
	else
		echo "missing system packages:$missing (install them, e.g. apt-get install$missing)" >&2
		exit 1
	fi
fi

[ -e "$stamp" ] && exit 0

echo "installing code-server $CODE_SERVER_VERSION into $cache (a few minutes, once)" >&2
rm -rf "$cache"
mkdir -p "$cache"
export npm_config_nodedir=/usr npm_config_yes=true npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

cd "$cache"
echo '{"private": true}' > package.json
npm install --ignore-scripts --no-save "code-server@$CODE_SERVER_VERSION" >&2
server="$cache/node_modules/code-server"

# What code-server's postinstall does, minus the downloads.
cd "$server/lib/vscode"
npm install --ignore-scripts --omit=dev >&2
mkdir -p node_modules/@vscode/ripgrep/bin
cp "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
npm rebuild >&2
ln -sfn node_modules node_modules.asar
(cd bin/remote-cli && ln -sfn code-linux.sh code-server)
(cd bin/helpers && ln -sfn browser-linux.sh browser.sh)
(cd extensions && npm install --ignore-scripts --omit=dev >&2 && npm rebuild >&2)
# code-server's own native module (password hashing), built here rather than fetched prebuilt.
cd "$cache"
npm_config_build_from_source=true npm rebuild argon2 >&2

touch "$stamp"
