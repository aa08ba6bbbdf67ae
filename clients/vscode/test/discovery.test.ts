import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";

import { type Discovery, discoverServer, expandPath, type Host } from "../src/discovery";

let root: string;

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "gateway-ls-discovery-"));
});

afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

/** Creates a file under the temp root; executable unless told otherwise. */
function makeFile(relative: string, executable = true): string {
  const file = path.join(root, relative);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, "#!/bin/sh\n");
  fs.chmodSync(file, executable ? 0o755 : 0o644);
  return file;
}

function posixHost(pathDirs: string[], workspaceFolder?: string): Host {
  return {
    platform: "linux",
    env: { PATH: pathDirs.join(":") },
    homeDir: path.join(root, "home"),
    workspaceFolder,
  };
}

function launchOf(discovery: Discovery) {
  assert.ok(discovery.found, discovery.found ? "" : discovery.problem);
  return discovery.launch;
}

describe("discoverServer", () => {
  test("serverPath wins and gets serve plus --config", () => {
    const server = makeFile("custom/gateway-ls");
    makeFile("bin/gateway-ls");
    const launch = launchOf(
      discoverServer(
        { serverPath: server, pythonPath: "python3", configPath: path.join(root, "c.toml") },
        posixHost([path.join(root, "bin")]),
      ),
    );
    assert.deepEqual(launch, {
      command: server,
      args: ["serve", "--config", path.join(root, "c.toml")],
      source: "serverPath",
      shell: false,
    });
  });

  test("pythonPath runs the module", () => {
    const python = makeFile("venv/bin/python");
    const launch = launchOf(discoverServer({ pythonPath: python }, posixHost([])));
    assert.equal(launch.command, python);
    assert.deepEqual(launch.args, ["-m", "lsp_server", "serve"]);
    assert.equal(launch.source, "pythonPath");
  });

  test("a bare pythonPath is looked up on PATH", () => {
    const python = makeFile("bin/python3");
    const launch = launchOf(discoverServer({ pythonPath: "python3" }, posixHost([path.join(root, "bin")])));
    assert.equal(launch.command, python);
  });

  test("pythonPath with ${workspaceFolder} and a relative config path", () => {
    const workspace = path.join(root, "project");
    const python = makeFile("project/.venv/bin/python");
    const launch = launchOf(
      discoverServer(
        { pythonPath: "${workspaceFolder}/.venv/bin/python", configPath: "gateway.toml" },
        posixHost([], workspace),
      ),
    );
    assert.equal(launch.command, python);
    assert.deepEqual(launch.args, [
      "-m",
      "lsp_server",
      "serve",
      "--config",
      path.join(workspace, "gateway.toml"),
    ]);
  });

  test("falls back to gateway-ls on PATH, skipping non-executable files", () => {
    makeFile("first/gateway-ls", false);
    const server = makeFile("second/gateway-ls");
    const host = posixHost([path.join(root, "empty"), path.join(root, "first"), path.join(root, "second")]);
    const launch = launchOf(discoverServer({}, host));
    assert.deepEqual(launch, { command: server, args: ["serve"], source: "PATH", shell: false });
  });

  test("nothing found names the settings that fix it", () => {
    const discovery = discoverServer({}, posixHost([path.join(root, "bin")]));
    assert.equal(discovery.found, false);
    assert.match(discovery.found ? "" : discovery.problem, /gatewayLs\.serverPath/);
    assert.match(discovery.found ? "" : discovery.problem, /gatewayLs\.pythonPath/);
  });

  test("a serverPath that does not exist is reported, not silently replaced by PATH", () => {
    makeFile("bin/gateway-ls");
    const discovery = discoverServer(
      { serverPath: path.join(root, "missing/gateway-ls") },
      posixHost([path.join(root, "bin")]),
    );
    assert.equal(discovery.found, false);
    assert.match(discovery.found ? "" : discovery.problem, /serverPath/);
  });

  test("Windows: PATHEXT, case-insensitive Path, batch files through a shell", () => {
    const cmd = makeFile("scripts/gateway-ls.CMD", false);
    const host: Host = {
      platform: "win32",
      env: { Path: [path.join(root, "nothing"), path.join(root, "scripts")].join(";"), PATHEXT: ".EXE;.CMD" },
      homeDir: root,
    };
    const launch = launchOf(discoverServer({}, host));
    assert.deepEqual(launch, { command: cmd, args: ["serve"], source: "PATH", shell: true });
  });

  test("Windows: an .exe is preferred by PATHEXT order and needs no shell", () => {
    const exe = makeFile("scripts/gateway-ls.EXE", false);
    makeFile("scripts/gateway-ls.CMD", false);
    const host: Host = {
      platform: "win32",
      env: { PATH: path.join(root, "scripts"), PATHEXT: ".EXE;.CMD" },
      homeDir: root,
    };
    const launch = launchOf(discoverServer({}, host));
    assert.equal(launch.command, exe);
    assert.equal(launch.shell, false);
  });
});

describe("expandPath", () => {
  test("home, environment variables and workspace folder", () => {
    const host: Host = {
      platform: "linux",
      env: { VENVS: "/opt/venvs" },
      homeDir: "/home/dev",
      workspaceFolder: "/src/app",
    };
    assert.equal(expandPath("~/bin/gateway-ls", host), "/home/dev/bin/gateway-ls");
    assert.equal(expandPath("${userHome}/x", host), "/home/dev/x");
    assert.equal(expandPath("${env:VENVS}/gw/bin/python", host), "/opt/venvs/gw/bin/python");
    assert.equal(expandPath("${workspaceFolder}/.venv", host), "/src/app/.venv");
    assert.equal(expandPath("config/gw.toml", host), "/src/app/config/gw.toml");
  });
});
