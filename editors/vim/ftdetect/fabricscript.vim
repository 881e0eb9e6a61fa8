" fabricscript.vim -- a .fab file is FabricScript (syntax/fabricscript.vim,
" indent/fabricscript.vim; `fabricscript lsp` for diagnostics, docs/editors.md).
au BufRead,BufNewFile *.fab setfiletype fabricscript
