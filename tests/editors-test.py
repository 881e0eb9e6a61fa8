#!/usr/bin/env python3
"""editors-test.py -- the editor files are what editors can load:
editors/fabricscript.tmLanguage.json (and VS Code's JSON files) parse as JSON, has a scope name and
patterns, every "#name" it includes is in its repository, every regex
compiles (Python's re, close to the Oniguruma editors use for these
patterns), and the model/repeat/residual rules match a declaration but not
the variable `model`. With nvim installed, Vim's files are loaded too:
a .fab file gets filetype fabricscript and those words their syntax groups."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

srcdir = os.environ.get("srcdir", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


path = os.path.join(srcdir, "editors", "fabricscript.tmLanguage.json")
with open(path, encoding="utf-8") as f:
    grammar = json.load(f)
expect(grammar.get("scopeName") == "source.fabricscript", "scopeName is source.fabricscript")
expect("fab" in grammar.get("fileTypes", []), "fileTypes has fab")
repo = grammar.get("repository", {})


def walk(node, where):
    if isinstance(node, dict):
        inc = node.get("include")
        if isinstance(inc, str) and inc.startswith("#"):
            expect(inc[1:] in repo, "%s: include %s is not in the repository" % (where, inc))
        for key in ("match", "begin", "end"):
            if key in node:
                try:
                    re.compile(node[key])
                except re.error as e:
                    expect(False, "%s.%s: %s does not compile: %s" % (where, key, node[key], e))
        for k, v in node.items():
            walk(v, where + "." + k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk(v, "%s[%d]" % (where, i))


walk(grammar, "grammar")
for name in ("package.json", "language-configuration.json"):
    with open(os.path.join(srcdir, "editors", "vscode", name), encoding="utf-8") as f:
        doc = json.load(f)
    if name == "package.json":
        g = doc["contributes"]["grammars"][0]
        expect(g["scopeName"] == grammar["scopeName"], "VS Code's grammar entry names the grammar's scope")
        expect(g["path"] == "./syntaxes/fabricscript.tmLanguage.json", "VS Code's grammar path is where make install puts it")
model = re.compile(repo["model-block"]["match"])
expect(model.search("model Net(hidden=32):"), "model-block matches a declaration")
expect(not model.search("model = Net()"), "model-block leaves the variable model alone")
block = re.compile(repo["layer-block"]["match"])
expect(block.search("    h = repeat 4:") and block.search("    residual:"), "layer-block matches repeat and residual")
expect(not block.search("    repeat_count = 3"), "layer-block leaves other names alone")



def string_rule(text):
    """The first string rule that opens in text, as a TextMate engine picks it (earliest, then first)."""
    found = [(m.start(), i, r) for i, r in enumerate(repo["string"]["patterns"])
             for m in [re.compile(r["begin"]).search(text)] if m]
    return min(found, key=lambda x: x[:2])[2] if found else None


plain, fstr = string_rule('x = "a{b}"'), string_rule('x = f"a{b}"')
expect(plain and {"include": "#fstring-field"} not in plain["patterns"], "a plain string has no fields")
expect(fstr and {"include": "#fstring-field"} in fstr["patterns"], "an f-string has fields")
triple = string_rule('x = """doc"""')
expect(triple and triple["name"].startswith("string.quoted.triple"), "triple quotes")

nvim = os.environ.get("NVIM") or shutil.which("nvim")
if nvim:
    with tempfile.TemporaryDirectory() as tmp:
        fab = os.path.join(tmp, "x.fab")
        with open(fab, "w") as f:
            f.write("model Net(hidden=32):\n    h = repeat 2:\n        Linear(hidden, hidden)\nmodel = Net()\n")
        out = os.path.join(tmp, "out")
        probe = ('call writefile([&filetype, synIDattr(synID(1,1,1),"name"), synIDattr(synID(1,7,1),"name"), '
                 'synIDattr(synID(2,9,1),"name"), synIDattr(synID(4,1,1),"name")], "%s")' % out)
        env = dict(os.environ, XDG_STATE_HOME=tmp, XDG_DATA_HOME=tmp, XDG_CACHE_HOME=tmp, XDG_CONFIG_HOME=tmp)
        subprocess.run([nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n",
                        "-c", "set rtp^=" + os.path.join(srcdir, "editors", "vim"), "-c", "filetype plugin indent on",
                        "-c", "syntax on", "-c", "edit " + fab, "-c", probe, "-c", "qa!"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                       timeout=60)
        got = open(out).read().split("\n") if os.path.exists(out) else []
        expect(got[:5] == ["fabricscript", "fabricscriptModel", "fabricscriptModelName", "fabricscriptBlock", ""],
               "Vim's files under nvim: filetype and syntax groups, got %r" % got)
else:
    print("editors-test: nvim is not installed; Vim's files not loaded")

if failures:
    sys.exit("%d failure(s)" % len(failures))
print("editors-test: the TextMate grammar and Vim's files load")
