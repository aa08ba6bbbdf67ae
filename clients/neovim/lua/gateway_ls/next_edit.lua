--- Next-edit predictions from gateway-ls in Neovim 0.12.
---
--- Asks the language server for the edit you are likely to make next
--- (`textDocument/copilotInlineEdit`), shows it with extmarks (the text it removes struck through,
--- the text it adds beside it, a sign in the gutter), applies it with one key and dismisses it
--- with another. The keys are mapped in the buffer only while an edit is shown, so they keep their
--- meaning otherwise.
---
---   require('gateway_ls.next_edit').setup({
---     keys = { request = '<M-n>', apply = '<Tab>', dismiss = '<Esc>' },
---     auto = false, -- or a pause in typing, in milliseconds, after which to ask
---   })
local M = {}

local METHOD = 'textDocument/copilotInlineEdit'
local DID_SHOW = 'textDocument/didShowInlineEdit'
local DISMISS_COMMAND = 'gatewayLs.didDismissInlineEdit'
local MAX_TEXT = 20000 -- an edit larger than this is a rewrite, not a next edit

M.ns = vim.api.nvim_create_namespace('gateway_ls.next_edit')

M.config = {
  keys = { request = '<M-n>', apply = '<Tab>', dismiss = '<Esc>' },
  auto = false,
  sign = '»',
}

--- The shown edit of each buffer: { edit, client_id, version, keymaps }.
local shown = {}
--- The request in flight for each buffer: { client_id, request_id }.
local pending = {}

local function resolve(bufnr)
  return (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
end

local function set_highlights()
  vim.api.nvim_set_hl(0, 'GatewayLsNextEditDelete', { default = true, link = 'DiffDelete' })
  vim.api.nvim_set_hl(0, 'GatewayLsNextEditStrike', { default = true, strikethrough = true })
  vim.api.nvim_set_hl(0, 'GatewayLsNextEditAdd', { default = true, link = 'DiffAdd' })
  vim.api.nvim_set_hl(0, 'GatewayLsNextEditSign', { default = true, link = 'Special' })
end

--- The attached client that offers next edits, if any.
local function client_for(bufnr)
  for _, client in ipairs(vim.lsp.get_clients({ bufnr = bufnr })) do
    local experimental = client.server_capabilities and client.server_capabilities.experimental
    if type(experimental) == 'table' and experimental.copilotInlineEdit == true then
      return client
    end
  end
end

local function is_count(value)
  return type(value) == 'number' and value >= 0 and value == math.floor(value)
end

local function valid_position(position)
  return type(position) == 'table' and is_count(position.line) and is_count(position.character)
end

--- The edit, if it is well formed and fits the buffer as it is (the server's answer is untrusted).
local function valid_edit(edit, bufnr, uri, version)
  if type(edit) ~= 'table' or type(edit.text) ~= 'string' or #edit.text > MAX_TEXT then
    return false
  end
  local range, document = edit.range, edit.textDocument
  if type(range) ~= 'table' or not valid_position(range.start) or not valid_position(range['end']) then
    return false
  end
  if type(document) ~= 'table' or document.uri ~= uri then
    return false
  end
  if document.version ~= nil and document.version ~= vim.NIL and document.version ~= version then
    return false
  end
  local s, e = range.start, range['end']
  if s.line > e.line or (s.line == e.line and s.character > e.character) then
    return false
  end
  return e.line < vim.api.nvim_buf_line_count(bufnr)
end

--- A position's byte column in the buffer, its character counted in the client's encoding.
local function byte_col(bufnr, position, encoding)
  local line = vim.api.nvim_buf_get_lines(bufnr, position.line, position.line + 1, false)[1] or ''
  if encoding == 'utf-8' then
    return math.min(position.character, #line)
  end
  local ok, col = pcall(vim.str_byteindex, line, encoding, position.character, false)
  return ok and math.min(col, #line) or #line
end

local function map_while_shown(bufnr, lhs, rhs, desc)
  if not lhs then
    return nil
  end
  local saved = vim.fn.maparg(lhs, 'n', false, true)
  vim.keymap.set('n', lhs, rhs, { buffer = bufnr, desc = desc, nowait = true })
  return { lhs = lhs, saved = (saved.buffer == 1) and saved or nil }
end

local function unmap(bufnr, keymap)
  if not keymap then
    return
  end
  pcall(vim.keymap.del, 'n', keymap.lhs, { buffer = bufnr })
  if keymap.saved then
    vim.fn.mapset('n', false, keymap.saved)
  end
end

--- Removes the shown edit's marks and keys; true when there was one.
function M.clear(bufnr)
  bufnr = resolve(bufnr)
  local state = shown[bufnr]
  shown[bufnr] = nil
  if not state then
    return false
  end
  if vim.api.nvim_buf_is_valid(bufnr) then
    vim.api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
    for _, keymap in ipairs(state.keymaps) do
      unmap(bufnr, keymap)
    end
  end
  return true
end

local function draw(bufnr, edit, encoding)
  local s, e = edit.range.start, edit.range['end']
  local start_col, end_col = byte_col(bufnr, s, encoding), byte_col(bufnr, e, encoding)
  vim.api.nvim_buf_set_extmark(bufnr, M.ns, s.line, start_col, {
    sign_text = M.config.sign,
    sign_hl_group = 'GatewayLsNextEditSign',
  })
  if s.line ~= e.line or start_col ~= end_col then
    vim.api.nvim_buf_set_extmark(bufnr, M.ns, s.line, start_col, {
      end_row = e.line,
      end_col = end_col,
      hl_group = { 'GatewayLsNextEditDelete', 'GatewayLsNextEditStrike' },
    })
  end
  local lines = vim.split(edit.text, '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    table.insert(virt_lines, { { lines[i], 'GatewayLsNextEditAdd' } })
  end
  vim.api.nvim_buf_set_extmark(bufnr, M.ns, e.line, end_col, {
    virt_text = { { lines[1], 'GatewayLsNextEditAdd' } },
    virt_text_pos = 'inline',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
  })
end

local function show(bufnr, client, edit, version)
  M.clear(bufnr)
  draw(bufnr, edit, client.offset_encoding)
  shown[bufnr] = { edit = edit, client_id = client.id, version = version, keymaps = {} }
  local keys = M.config.keys or {}
  local keymaps = shown[bufnr].keymaps
  table.insert(keymaps, map_while_shown(bufnr, keys.apply, function()
    M.apply(bufnr)
  end, 'Apply the next edit'))
  table.insert(keymaps, map_while_shown(bufnr, keys.dismiss, function()
    M.dismiss(bufnr)
  end, 'Dismiss the next edit'))
  client:notify(DID_SHOW, { item = edit })
end

--- Asks the server for the next edit at the cursor; the answer is shown when it comes, unless the
--- buffer changed meanwhile.
function M.request(bufnr)
  bufnr = resolve(bufnr)
  local client = client_for(bufnr)
  if not client then
    return false
  end
  M.clear(bufnr)
  M.cancel(bufnr)
  local version = vim.lsp.util.buf_versions[bufnr]
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.textDocument.version = version
  local uri = params.textDocument.uri
  local ok, request_id
  ok, request_id = client:request(METHOD, params, function(err, result)
    if pending[bufnr] and pending[bufnr].request_id == request_id then
      pending[bufnr] = nil
    end
    if err or type(result) ~= 'table' or type(result.edits) ~= 'table' then
      return
    end
    if not vim.api.nvim_buf_is_valid(bufnr) or vim.lsp.util.buf_versions[bufnr] ~= version then
      return -- the buffer changed while the model worked
    end
    for _, edit in ipairs(result.edits) do
      if valid_edit(edit, bufnr, uri, version) then
        show(bufnr, client, edit, version)
        return
      end
    end
  end, bufnr)
  if ok and request_id then
    pending[bufnr] = { client_id = client.id, request_id = request_id }
  end
  return ok
end

function M.cancel(bufnr)
  local request = pending[bufnr]
  pending[bufnr] = nil
  local client = request and vim.lsp.get_client_by_id(request.client_id)
  if client then
    client:cancel_request(request.request_id)
  end
end

local function run_command(client, command, bufnr)
  local provider = client.server_capabilities.executeCommandProvider
  local commands = type(provider) == 'table' and provider.commands or {}
  if type(command) == 'table' and vim.list_contains(commands, command.command) then
    client:exec_cmd(command, { bufnr = bufnr })
  end
end

--- Applies the shown edit, puts the cursor after it and tells the server; true when applied.
function M.apply(bufnr)
  bufnr = resolve(bufnr)
  local state = shown[bufnr]
  if not state then
    return false
  end
  M.clear(bufnr)
  local client = vim.lsp.get_client_by_id(state.client_id)
  if not client or vim.lsp.util.buf_versions[bufnr] ~= state.version then
    return false
  end
  local edit = state.edit
  vim.lsp.util.apply_text_edits(
    { { range = edit.range, newText = edit.text } },
    bufnr,
    client.offset_encoding
  )
  local lines = vim.split(edit.text, '\n', { plain = true })
  local row = edit.range.start.line + #lines - 1
  local col = #lines[#lines]
  if #lines == 1 then
    col = col + byte_col(bufnr, edit.range.start, client.offset_encoding)
  end
  if vim.api.nvim_get_current_buf() == bufnr then
    pcall(vim.api.nvim_win_set_cursor, 0, { row + 1, math.max(col - 1, 0) })
  end
  run_command(client, edit.command, bufnr)
  return true
end

--- Hides the shown edit and tells the server it was passed over; true when there was one.
function M.dismiss(bufnr)
  bufnr = resolve(bufnr)
  local state = shown[bufnr]
  if not M.clear(bufnr) then
    return false
  end
  local client = vim.lsp.get_client_by_id(state.client_id)
  local command = state.edit.command
  local id = type(command) == 'table' and type(command.arguments) == 'table' and command.arguments[1]
  if client and id then
    run_command(client, { title = '', command = DISMISS_COMMAND, arguments = { id } }, bufnr)
  end
  return true
end

--- The shown edit of the buffer, as the server sent it, or nil.
function M.get(bufnr)
  local state = shown[resolve(bufnr)]
  return state and state.edit
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', M.config, opts or {})
  set_highlights()
  local group = vim.api.nvim_create_augroup('gateway_ls.next_edit', { clear = true })
  vim.api.nvim_create_autocmd('ColorScheme', { group = group, callback = set_highlights })
  -- A change makes a shown edit stale; leaving the buffer hides it.
  vim.api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI', 'BufLeave' }, {
    group = group,
    callback = function(args)
      M.cancel(args.buf)
      M.clear(args.buf)
    end,
  })
  local request_key = M.config.keys and M.config.keys.request
  if request_key then
    vim.keymap.set({ 'n', 'i' }, request_key, function()
      M.request(0)
    end, { desc = 'Ask gateway-ls for the next edit' })
  end
  if type(M.config.auto) == 'number' then
    local timer = assert(vim.uv.new_timer())
    vim.api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
      group = group,
      callback = function(args)
        timer:start(M.config.auto, 0, vim.schedule_wrap(function()
          if vim.api.nvim_get_current_buf() == args.buf then
            M.request(args.buf)
          end
        end))
      end,
    })
  end
end

return M
