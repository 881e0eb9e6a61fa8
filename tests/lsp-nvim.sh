#!/bin/sh
# lsp-nvim.sh -- `fabricscript lsp` end to end in a real client: neovim's
# built-in LSP client, headless, opens the seed mistake, and the R36
# diagnostic arrives at 6:40 with hover over `model` saying what the checker
# knows. Skips (status 77) when nvim is not installed (Debian's neovim;
# `scripts/deps test` installs it). lsp-client.py covers the protocol in
# detail; this shows an editor's client agrees with it.
fs=${FABRICSCRIPT:-./fabricscript}
case $fs in /*) ;; *) fs=$(pwd)/$fs ;; esac
nvim=${NVIM:-$(command -v nvim)}
if [ -z "$nvim" ]; then
  echo "SKIP: nvim is not installed (apt-get install neovim, or scripts/deps test)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/train.fab" <<'FAB'
fabric = Fabric(strategy="fsdp", accelerator="cuda", devices=1)
fabric.launch()
with fabric.init_module(empty_init=True):
    model = Linear(8, 8)               # parameters on the meta device
optimizer = Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
FAB
cat > "$tmp/init.lua" <<'LUA'
pcall(vim.lsp.set_log_level, "ERROR")
local function code_of(d) return d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code) end
local function main()
  local file = os.getenv("FS_FILE")
  vim.cmd("edit " .. file)
  local client = vim.lsp.start_client({name = "fabricscript", cmd = {os.getenv("FS_BIN"), "lsp"},
                                       root_dir = vim.fn.fnamemodify(file, ":h")})
  vim.lsp.buf_attach_client(0, client)
  local function has_r36()
    for _, d in ipairs(vim.diagnostic.get(0)) do if code_of(d) == "R36" then return true end end
    return false
  end
  local ok = vim.wait(15000, has_r36, 50)
  local out = io.open(os.getenv("FS_OUT"), "w")
  for _, d in ipairs(vim.diagnostic.get(0)) do
    out:write(string.format("%s %d:%d %s\n", tostring(code_of(d)), d.lnum + 1, d.col + 1, d.message:match("[^\n]*")))
  end
  local res = vim.lsp.buf_request_sync(0, "textDocument/hover", {textDocument = {uri = vim.uri_from_bufnr(0)},
                                       position = {line = 3, character = 5}}, 10000)
  for _, r in pairs(res or {}) do
    if r.result then out:write("hover: " .. r.result.contents.value .. "\n") end
  end
  out:close()
  vim.lsp.stop_client(client)
  return ok
end
local done, ok = xpcall(main, function(e) io.stderr:write(tostring(e) .. "\n") end)
if done and ok then vim.cmd("qa!") else vim.cmd("cquit 1") end
LUA
# nvim writes its state and logs under the XDG directories: keep them here
XDG_STATE_HOME=$tmp XDG_CACHE_HOME=$tmp XDG_DATA_HOME=$tmp XDG_CONFIG_HOME=$tmp \
FS_BIN=$fs FS_FILE=$tmp/train.fab FS_OUT=$tmp/out \
  timeout 60 "$nvim" --headless -n -i NONE -u "$tmp/init.lua" </dev/null >"$tmp/nvim.log" 2>&1
status=$?
fail=0
[ $status -eq 0 ] || { echo "FAIL: nvim exited $status"; cat "$tmp/nvim.log"; fail=1; }
grep -q '^R36 6:40 The optimizer has references to the model' "$tmp/out" 2>/dev/null ||
  { echo "FAIL: no R36 at 6:40 in neovim's diagnostics:"; cat "$tmp/out" 2>/dev/null; fail=1; }
grep -q '^hover: `model`: Linear .* meta device (built under `fabric.init_module(empty_init=True)` with strategy fsdp)' \
  "$tmp/out" 2>/dev/null || { echo "FAIL: hover over model:"; cat "$tmp/out" 2>/dev/null; fail=1; }
[ $fail -eq 0 ] && echo "lsp-nvim: neovim received R36 and the hover"
exit $fail
