--- `:checkhealth gateway_ls`: what stands between this Neovim and gateway-ls's suggestions.
---
--- The server command is the one `vim.lsp.config('gateway_ls', ...)` holds (`gateway-ls serve`
--- when there is none). The checks: the executable and its version; the configuration, as the
--- server itself judges it, and which endpoints answer (`gateway-ls doctor --json`, one token
--- each, no document content); that a server started from the command answers `initialize`;
--- and the local model's state, as that server reports it.
local M = {}

local TIMEOUT_MS = 60000

--- The command as configured, split where `serve` starts the server: what comes before it runs
--- any other subcommand, and a `--config PATH` after it is kept for them too.
local function server_command()
  local config = vim.lsp.config and vim.lsp.config.gateway_ls or nil
  local cmd = config and type(config.cmd) == 'table' and config.cmd or { 'gateway-ls', 'serve' }
  local base, options, serve = {}, {}, false
  for i, word in ipairs(cmd) do
    if word == 'serve' then
      serve = true
    elseif not serve then
      table.insert(base, word)
    elseif word == '--config' and cmd[i + 1] then
      vim.list_extend(options, { '--config', cmd[i + 1] })
    end
  end
  return { cmd = cmd, base = base, options = options, env = config and config.cmd_env or nil }
end

local function run(command, args)
  local argv = vim.list_extend(vim.list_extend({}, command.base), args)
  local ok, process = pcall(vim.system, argv, { text = true, env = command.env })
  if not ok then
    return { code = -1, stdout = '', stderr = tostring(process) }
  end
  local result = process:wait(TIMEOUT_MS)
  return { code = result.code, stdout = result.stdout or '', stderr = result.stderr or '' }
end

local function check_executable(command)
  vim.health.start('gateway-ls: the executable')
  local program = command.base[1]
  local path = program and vim.fn.exepath(program) or ''
  if path == '' then
    vim.health.error(
      ('`%s` is not on PATH'):format(program or '(no command)'),
      {
        "pip install 'gateway-ls[local]'",
        "or name the command: vim.lsp.config('gateway_ls', { cmd = { ... } })",
      }
    )
    return false
  end
  local version = run(command, { '--version' })
  if version.code ~= 0 then
    vim.health.error(('`%s --version` failed: %s'):format(path, vim.trim(version.stderr)))
    return false
  end
  vim.health.ok(('%s at %s'):format(vim.trim(version.stdout), path))
  return true
end

local function report_endpoint(endpoint)
  local latency = endpoint.latency_ms ~= vim.NIL and endpoint.latency_ms
      and (', %d ms'):format(endpoint.latency_ms)
    or ''
  local line = ('%s (%s, %s): %s%s'):format(
    endpoint.name,
    endpoint.kind,
    endpoint.roles,
    endpoint.status,
    latency
  )
  if endpoint.ok then
    vim.health.ok(line)
  else
    vim.health.warn(line, endpoint.hint ~= '' and { endpoint.hint } or nil)
  end
end

local function check_configuration(command)
  vim.health.start('gateway-ls: configuration and endpoints')
  local args = vim.list_extend(vim.deepcopy(command.options), { 'doctor', '--no-local', '--json' })
  local doctor = run(command, args)
  if doctor.code == 2 then
    vim.health.error('the configuration is invalid: ' .. vim.trim(doctor.stderr))
    return false
  end
  local ok, found = pcall(vim.json.decode, doctor.stdout)
  if not ok or type(found) ~= 'table' then
    vim.health.error('`gateway-ls doctor` did not answer: ' .. vim.trim(doctor.stderr))
    return false
  end
  vim.health.ok('configuration: ' .. found.configuration)
  for _, warning in ipairs(found.warnings or {}) do
    vim.health.warn(warning)
  end
  for _, endpoint in ipairs(found.endpoints or {}) do
    if endpoint.kind ~= 'local' then
      report_endpoint(endpoint)
    end
  end
  return true
end

local function request(rpc, method, params)
  local answer
  rpc.request(method, params, function(err, result)
    answer = { err = err, result = result }
  end)
  vim.wait(TIMEOUT_MS, function()
    return answer ~= nil
  end, 50)
  return answer
end

local LOCAL_STATES = {
  ready = vim.health.ok,
  loading = vim.health.ok,
  disabled = vim.health.info,
  failed = vim.health.error,
}

local function check_server(command)
  vim.health.start('gateway-ls: the server')
  local ok, rpc = pcall(vim.lsp.rpc.start, command.cmd, {}, { env = command.env })
  if not ok or not rpc then
    vim.health.error('the server did not start: ' .. tostring(rpc))
    return
  end
  local initialized = request(
    rpc,
    'initialize',
    { processId = vim.fn.getpid(), rootUri = vim.NIL, capabilities = {} }
  )
  if not initialized or initialized.err or not initialized.result then
    local why = vim.inspect(initialized and initialized.err)
    vim.health.error('the server did not answer initialize: ' .. why)
    rpc.terminate()
    return
  end
  local info = initialized.result.serverInfo or {}
  vim.health.ok(('answers initialize: %s %s'):format(info.name or '?', info.version or ''))
  rpc.notify('initialized', vim.empty_dict())
  local status =
    request(rpc, 'workspace/executeCommand', { command = 'gatewayLs.status', arguments = {} })
  local state = status and status.result and status.result['local'] and status.result['local'].state
  if state then
    local report = LOCAL_STATES[state] or vim.health.info
    report(('local model: %s'):format(state))
  else
    vim.health.warn('local model: no state in gatewayLs.status')
  end
  request(rpc, 'shutdown', vim.NIL)
  rpc.notify('exit', vim.NIL)
  vim.wait(5000, function()
    return rpc.is_closing()
  end, 50)
  rpc.terminate()
end

function M.check()
  local command = server_command()
  if not check_executable(command) then
    return
  end
  if check_configuration(command) then
    check_server(command)
  end
end

return M
