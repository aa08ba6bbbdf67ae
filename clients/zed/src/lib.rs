//! Zed extension for gateway-ls: starts `gateway-ls serve` (LSP over stdio) and hands it the
//! user's `lsp.gateway-ls` settings.

use std::collections::HashMap;

use zed_extension_api::{
    self as zed,
    serde_json::{Map, Value},
    settings::LspSettings,
    LanguageServerId, Result, Worktree,
};

/// The key under `lsp` in Zed's settings, and the `[language_servers.*]` id in extension.toml.
const LANGUAGE_SERVER_ID: &str = "gateway-ls";
/// The executable looked up on the worktree's PATH when `binary.path` is not set.
const SERVER_BINARY: &str = "gateway-ls";
/// Arguments used when `binary.arguments` is not set: LSP over stdio.
const SERVER_ARGS: &[&str] = &["serve"];
/// The key the server reads its editor settings from (initializationOptions, workspace config).
const SETTINGS_KEY: &str = "gatewayLs";

const NOT_FOUND: &str = "gateway-ls was not found on PATH. Install it with \
`pipx install 'gateway-ls[local]'`, or set `lsp.gateway-ls.binary.path` in Zed's settings.";

struct GatewayLsExtension;

fn lsp_settings(worktree: &Worktree) -> LspSettings {
    LspSettings::for_worktree(LANGUAGE_SERVER_ID, worktree).unwrap_or_default()
}

/// The server expects `{"gatewayLs": {...}}`; users may write either that or just the inner
/// object, so an object that already has the key is passed through unchanged.
fn under_settings_key(value: Option<Value>) -> Option<Value> {
    match value? {
        Value::Object(map) if map.contains_key(SETTINGS_KEY) => Some(Value::Object(map)),
        inner => {
            let mut wrapped = Map::new();
            wrapped.insert(SETTINGS_KEY.to_string(), inner);
            Some(Value::Object(wrapped))
        }
    }
}

impl zed::Extension for GatewayLsExtension {
    fn new() -> Self {
        GatewayLsExtension
    }

    fn language_server_command(
        &mut self,
        _language_server_id: &LanguageServerId,
        worktree: &Worktree,
    ) -> Result<zed::Command> {
        let binary = lsp_settings(worktree).binary.unwrap_or_default();
        let command = binary
            .path
            .or_else(|| worktree.which(SERVER_BINARY))
            .ok_or_else(|| NOT_FOUND.to_string())?;
        let args = binary
            .arguments
            .unwrap_or_else(|| SERVER_ARGS.iter().map(|arg| arg.to_string()).collect());
        // The login shell's environment carries the endpoints' API keys (`api_key_env`), which
        // a Zed started from the desktop would not otherwise pass on; settings override it.
        let mut env: HashMap<String, String> = worktree.shell_env().into_iter().collect();
        env.extend(binary.env.unwrap_or_default());
        Ok(zed::Command {
            command,
            args,
            env: env.into_iter().collect(),
        })
    }

    fn language_server_initialization_options(
        &mut self,
        _language_server_id: &LanguageServerId,
        worktree: &Worktree,
    ) -> Result<Option<Value>> {
        Ok(under_settings_key(lsp_settings(worktree).initialization_options))
    }

    fn language_server_workspace_configuration(
        &mut self,
        _language_server_id: &LanguageServerId,
        worktree: &Worktree,
    ) -> Result<Option<Value>> {
        Ok(under_settings_key(lsp_settings(worktree).settings))
    }
}

zed::register_extension!(GatewayLsExtension);
