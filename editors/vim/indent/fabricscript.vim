" fabricscript.vim -- indentation for FabricScript: Python's rules (Vim's
" indent/python.vim), which model, repeat and residual blocks follow too,
" since they open with a line ending in ':' like any Python block.
if exists("b:did_indent")
  finish
endif
runtime! indent/python.vim
