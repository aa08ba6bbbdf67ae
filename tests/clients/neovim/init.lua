-- Neovim 0.12's own LSP client on gateway-ls, as a user would set it up; the test passes the
-- server command and the workspace in vim.g.gateway_ls.
local setup = vim.g.gateway_ls

vim.lsp.config('gateway_ls', {
  cmd = setup.cmd,
  cmd_env = setup.env,
  filetypes = { 'python' },
  root_dir = setup.root,
})
vim.lsp.enable('gateway_ls')

-- The next-edit plugin shipped in clients/neovim, with its default keys.
vim.opt.runtimepath:append(setup.plugin)
require('gateway_ls.next_edit').setup()

vim.api.nvim_create_autocmd('LspAttach', {
  callback = function(args)
    local client = assert(vim.lsp.get_client_by_id(args.data.client_id))
    vim.lsp.completion.enable(true, client.id, args.buf, { autotrigger = false })
    vim.lsp.inline_completion.enable(true, { bufnr = args.buf })
  end,
})

-- What the test reads back.
_G.gateway_test = {}

function _G.gateway_test.client()
  return vim.lsp.get_clients({ bufnr = 0, name = 'gateway_ls' })[1]
end

function _G.gateway_test.request(method, params, timeout_ms)
  local client = assert(_G.gateway_test.client(), 'gateway_ls is not attached')
  local response = client:request_sync(method, params, timeout_ms, 0)
  if not response then
    return { error = 'timeout' }
  end
  return { result = response.result, error = response.err and response.err.message or nil }
end

function _G.gateway_test.ghost_text()
  local ns = vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion']
  if not ns then
    return ''
  end
  local parts = {}
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })) do
    local details = mark[4]
    for _, chunk in ipairs(details.virt_text or {}) do
      table.insert(parts, chunk[1])
    end
    for _, line in ipairs(details.virt_lines or {}) do
      table.insert(parts, '\n')
      for _, chunk in ipairs(line) do
        table.insert(parts, chunk[1])
      end
    end
  end
  return table.concat(parts)
end

function _G.gateway_test.code_actions(first, last)
  local client = assert(_G.gateway_test.client())
  local params = {
    textDocument = vim.lsp.util.make_text_document_params(0),
    range = { start = { line = first, character = 0 }, ['end'] = { line = last, character = 0 } },
    context = { diagnostics = {} },
  }
  local response = client:request_sync('textDocument/codeAction', params, 10000, 0)
  return response and response.result or {}
end

function _G.gateway_test.run_action(first, last, title)
  local client = assert(_G.gateway_test.client())
  for _, action in ipairs(_G.gateway_test.code_actions(first, last)) do
    if action.title == title then
      client:exec_cmd(action.command, { bufnr = 0 })
      return true
    end
  end
  return false
end

--- What the next-edit plugin draws: the struck-through text, the text beside it, the sign.
function _G.gateway_test.next_edit_marks()
  local next_edit = require('gateway_ls.next_edit')
  local drawn = { removed = '', added = '', sign = '' }
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(0, next_edit.ns, 0, -1, { details = true })) do
    local row, col, details = mark[2], mark[3], mark[4]
    if details.end_row then
      local text = vim.api.nvim_buf_get_text(0, row, col, details.end_row, details.end_col, {})
      drawn.removed = table.concat(text, '\n')
    end
    for _, chunk in ipairs(details.virt_text or {}) do
      drawn.added = drawn.added .. chunk[1]
    end
    for _, line in ipairs(details.virt_lines or {}) do
      drawn.added = drawn.added .. '\n' .. line[1][1]
    end
    if details.sign_text then
      drawn.sign = vim.trim(details.sign_text)
    end
  end
  return drawn
end
