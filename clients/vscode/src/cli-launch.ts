/**
 * Prints how the extension would start the server for the given settings, so other tools (and
 * the Python end-to-end test) can start it the same way.
 *
 *   node out/cli-launch.js '{"gatewayLs.pythonPath": "python3"}' [WORKSPACE_FOLDER]
 *
 * Output: one JSON line `{command, args, initializationOptions}`. Exit code 1 when no server is
 * found (the reason on stderr), 2 on bad usage.
 */
import { currentHost, discoverServer } from "./discovery";
import { fromSettingsJson, initializationOptions, launchSettings } from "./settings";

function main(argv: readonly string[]): number {
  const [settingsJson = "{}", workspaceFolder] = argv;
  let parsed: unknown;
  try {
    parsed = JSON.parse(settingsJson);
  } catch (error) {
    process.stderr.write(`cli-launch: settings are not JSON: ${String(error)}\n`);
    return 2;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    process.stderr.write("cli-launch: settings must be a JSON object, as in settings.json\n");
    return 2;
  }
  const user = fromSettingsJson(parsed as Record<string, unknown>);
  const discovery = discoverServer(launchSettings(user), currentHost(workspaceFolder));
  if (!discovery.found) {
    process.stderr.write(`${discovery.problem}\n`);
    return 1;
  }
  const { command, args } = discovery.launch;
  const launch = { command, args, initializationOptions: initializationOptions(user) };
  process.stdout.write(`${JSON.stringify(launch)}\n`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
