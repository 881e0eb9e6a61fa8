" fabricscript.vim -- Vim syntax for FabricScript (.fab): Python's syntax
" (Vim's own python.vim) plus the declaration forms Python lacks: `model
" NAME(...):` and the `repeat N:` / `residual:` blocks of a model body.
" Invariant: the extra words are highlighted only where they open a block,
" since `model` is also the most common variable name in a training script.
" Its other halves: ftdetect/fabricscript.vim (the .fab extension) and
" editors/fabricscript.tmLanguage.json (the same tokens for TextMate
" editors); diagnostics come from `fabricscript lsp` (docs/editors.md).
if exists("b:current_syntax")
  finish
endif

runtime! syntax/python.vim
unlet! b:current_syntax

" model NAME(params):
syn match fabricscriptModel "^\s*\zsmodel\ze\s\+\h\w*\s*[(:]" nextgroup=fabricscriptModelName skipwhite
syn match fabricscriptModelName "\h\w*" contained
" repeat N:, residual:, also as `h = repeat N:`
syn match fabricscriptBlock "^\s*\(\h\w*\s*=\s*\)\=\zs\<\(repeat\|residual\)\>\ze[^:#]*:"
" Fabric's classes and the script parameter
syn keyword fabricscriptBuiltin param Fabric FSDPStrategy DDPStrategy DeepSpeedStrategy DataLoader

hi def link fabricscriptModel Structure
hi def link fabricscriptModelName Function
hi def link fabricscriptBlock Repeat
hi def link fabricscriptBuiltin Function

let b:current_syntax = "fabricscript"
