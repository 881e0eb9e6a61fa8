#!/usr/bin/env python3
"""lsp-client.py -- a scripted LSP client driving one `fabricscript lsp`
session end to end: the seed mistake's R36 with its related information,
its code action applied until the diagnostics are clean, hover, completion,
definition, incremental edits with UTF-16 positions, and malformed input
(the server answers JSON-RPC errors and stays up). Standard library only.
Run by make check (FABRICSCRIPT names the binary); scripts/bench-lsp uses
its Client for timing."""
import json
import os
import random
import select
import subprocess
import sys
import tempfile
import time

SEED = (
    'fabric = Fabric(strategy="fsdp", accelerator="cuda", devices=1)\n'
    'fabric.launch()\n'
    'with fabric.init_module(empty_init=True):\n'
    '    model = Linear(8, 8)               # parameters on the meta device\n'
    'optimizer = Adam(model.parameters())\n'
    'model, optimizer = fabric.setup(model, optimizer)\n'
)


class Client:
    def __init__(self, binary, timeout=20.0):
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.timeout = timeout
        self.buf = b""
        self.next_id = 0

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj):
        body = json.dumps(obj).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
            raise TimeoutError("no message from the server in %.0f s" % self.timeout)
        chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
        if not chunk:
            raise EOFError("the server closed its output (exit status %s)" % self.proc.poll())
        self.buf += chunk

    def read(self):
        deadline = time.monotonic() + self.timeout
        while b"\r\n\r\n" not in self.buf:
            self._fill(deadline)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        length = int(head.split(b":")[1])
        while len(self.buf) < length:
            self._fill(deadline)
        body, self.buf = self.buf[:length], self.buf[length:]
        return json.loads(body)

    def response(self, rid):
        while True:
            m = self.read()
            if m.get("id") == rid and "method" not in m:
                return m

    def diagnostics(self, uri):
        while True:
            m = self.read()
            if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri:
                return m["params"]

    def call(self, method, params):
        return self.response(self.request(method, params))


def apply_edits(text, edits):
    """Applies LSP TextEdits (UTF-16 positions) to text, last first."""
    lines = text.split("\n")

    def offset(pos):
        line = lines[pos["line"]] if pos["line"] < len(lines) else ""
        units, col = 0, 0
        while col < len(line) and units < pos["character"]:
            units += 2 if ord(line[col]) > 0xFFFF else 1
            col += 1
        return sum(len(l) + 1 for l in lines[:pos["line"]]) + col

    spans = sorted(((offset(e["range"]["start"]), offset(e["range"]["end"]), e["newText"]) for e in edits),
                   reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def main():
    binary = os.environ.get("FABRICSCRIPT", "./fabricscript")
    c = Client(binary)
    uri = "file:///tmp/lsp%20test/train.fab"

    # requests before initialize are refused, the server stays up
    r = c.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
    expect(r.get("error", {}).get("code") == -32002, "hover before initialize: ServerNotInitialized, got %r" % r)

    r = c.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    caps = r["result"]["capabilities"]
    expect(caps["textDocumentSync"]["change"] == 2, "incremental sync announced")
    expect(caps["positionEncoding"] == "utf-16", "UTF-16 positions announced")
    c.notify("initialized", {})

    # the seed mistake: R36 with the notes as related information
    c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "fabricscript", "version": 1,
                                                       "text": SEED}})
    d = c.diagnostics(uri)
    r36 = [g for g in d["diagnostics"] if g.get("code") == "R36"]
    expect(len(r36) == 1, "one R36 diagnostic, got %r" % d["diagnostics"])
    if r36:
        g = r36[0]
        expect(g["severity"] == 1, "R36 is an error")
        expect(g["range"] == {"start": {"line": 5, "character": 39}, "end": {"line": 5, "character": 48}},
               "R36's range is the optimizer argument: %r" % g["range"])
        rel = g.get("relatedInformation", [])
        expect(any("meta device" in x["message"] and x["location"]["range"]["start"]["line"] == 2 for x in rel),
               "related information names init_module's line: %r" % rel)
        expect(all(x["location"]["uri"] == uri for x in rel), "related information in the document")

    # the code action is R36's fix-it; applied, the diagnostics are clean
    r = c.call("textDocument/codeAction", {"textDocument": {"uri": uri},
                                           "range": {"start": {"line": 5, "character": 40},
                                                     "end": {"line": 5, "character": 40}},
                                           "context": {"diagnostics": r36}})
    actions = [a for a in r.get("result") or [] if a["kind"] == "quickfix"]
    expect(len(actions) == 1 and actions[0]["diagnostics"][0]["code"] == "R36", "one quick fix, R36's: %r" % r)
    fixed = SEED
    if actions:
        fixed = apply_edits(SEED, actions[0]["edit"]["changes"][uri])
    expect("model = fabric.setup_module(model)" in fixed, "the fix sets up the module first: %r" % fixed)
    # all fixes at once (source.fixAll): the same text here, where R36's is the only one
    r = c.call("textDocument/codeAction", {"textDocument": {"uri": uri},
                                           "range": {"start": {"line": 0, "character": 0},
                                                     "end": {"line": 0, "character": 0}},
                                           "context": {"diagnostics": [], "only": ["source.fixAll"]}})
    kinds = [a["kind"] for a in r.get("result") or []]
    expect(kinds == ["source.fixAll.fabricscript"], "only the fix-all action when only source.fixAll is asked: %r" % kinds)
    if kinds:
        expect(apply_edits(SEED, r["result"][0]["edit"]["changes"][uri]) == fixed, "fix-all gives the quick fix's text")
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                        "contentChanges": [{"text": fixed}]})
    d = c.diagnostics(uri)
    errors = [g for g in d["diagnostics"] if g["severity"] == 1]
    expect(not errors and d["version"] == 2, "clean after the fix: %r" % d)

    # hover: a builtin's signature and doc; a name's state as the checker knows it
    lines = fixed.split("\n")
    setup_line = next(i for i, l in enumerate(lines) if "fabric.setup_module" in l)
    r = c.call("textDocument/hover", {"textDocument": {"uri": uri},
                                      "position": {"line": setup_line, "character": lines[setup_line].index("setup_module") + 2}})
    value = (r.get("result") or {}).get("contents", {}).get("value", "")
    expect("Fabric.setup_module(" in value and "Wraps a model alone for the strategy" in value,
           "hover on setup_module: signature and doc: %r" % value)
    r = c.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 3, "character": 5}})
    value = (r.get("result") or {}).get("contents", {}).get("value", "")
    expect("Linear" in value and "meta device" in value and "init_module(empty_init=True)" in value
           and "fsdp" in value, "hover on model: what the checker knows: %r" % value)
    r = c.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 2}})
    value = (r.get("result") or {}).get("contents", {}).get("value", "")
    expect("strategy fsdp" in value, "hover on fabric: its configuration: %r" % value)

    # a .py document is checked as Python: torch's names through an import alias
    py = "file:///tmp/lsp%20test/train.py"
    pytext = "import torch.nn as nn\nlayer = nn.Linear(2, 2)\n"
    c.notify("textDocument/didOpen", {"textDocument": {"uri": py, "languageId": "python", "version": 1,
                                                       "text": pytext}})
    d = c.diagnostics(py)
    expect(d["diagnostics"] == [], "a clean .py document: %r" % d)
    r = c.call("textDocument/hover", {"textDocument": {"uri": py}, "position": {"line": 1, "character": 13}})
    value = (r.get("result") or {}).get("contents", {}).get("value", "")
    expect("layer Linear(in_features, out_features" in value, "hover on nn.Linear in a .py file: %r" % value)
    c.notify("textDocument/didClose", {"textDocument": {"uri": py}})
    c.diagnostics(py)

    # definition: `model` used on the last line is defined under the with
    last = len(lines) - 2
    r = c.call("textDocument/definition", {"textDocument": {"uri": uri},
                                           "position": {"line": setup_line, "character": lines[setup_line].rindex("model") + 1}})
    loc = r.get("result") or {}
    expect(loc.get("uri") == uri and loc.get("range", {}).get("start") == {"line": 3, "character": 4},
           "definition of model: line 4 col 5: %r" % loc)

    # completion: attributes of a known object, names, keywords, builtins
    text2 = fixed + "fabric.se"
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3},
                                        "contentChanges": [{"text": text2}]})
    c.diagnostics(uri)
    r = c.call("textDocument/completion", {"textDocument": {"uri": uri},
                                           "position": {"line": len(lines) - 1, "character": 9}})
    labels = {i["label"] for i in r["result"]["items"]}
    expect({"setup", "setup_module", "setup_optimizers", "seed_everything"} <= labels and "launch" not in labels,
           "completion after fabric.se: %r" % sorted(labels))
    text3 = fixed + "op"
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 4},
                                        "contentChanges": [{"text": text3}]})
    c.diagnostics(uri)
    r = c.call("textDocument/completion", {"textDocument": {"uri": uri},
                                           "position": {"line": len(lines) - 1, "character": 2}})
    labels = {i["label"] for i in r["result"]["items"]}
    expect("optimizer" in labels, "completion of a name in scope: %r" % sorted(labels))
    r = c.call("textDocument/completion", {"textDocument": {"uri": uri},
                                           "position": {"line": len(lines) - 1, "character": 0}})
    labels = {i["label"] for i in r["result"]["items"]}
    expect({"model", "repeat", "residual", "while", "Fabric", "print"} <= labels,
           "completion: keywords and builtins: %r" % sorted(labels)[:20])

    # incremental edits, positions in UTF-16 code units (an astral character is 2)
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 5},
                                        "contentChanges": [{"text": 's = "\U0001F600"; print(nope)\n'}]})
    d = c.diagnostics(uri)
    names = [g for g in d["diagnostics"] if g.get("code") == "name"]
    expect(names and names[0]["range"]["start"] == {"line": 0, "character": 16},
           "UTF-16 column of `nope` after an emoji: %r" % d["diagnostics"])
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 6},
                                        "contentChanges": [{"range": {"start": {"line": 0, "character": 16},
                                                                      "end": {"line": 0, "character": 20}},
                                                            "text": "s"}]})
    d = c.diagnostics(uri)
    expect(d["diagnostics"] == [] and d["version"] == 6, "incremental edit fixed the name: %r" % d)
    # didSave with the text (includeText): checked again
    c.notify("textDocument/didSave", {"textDocument": {"uri": uri}, "text": "print(missing)\n"})
    d = c.diagnostics(uri)
    expect([g.get("code") for g in d["diagnostics"]] == ["name"], "didSave's text is checked: %r" % d)

    # malformed input: each gets a JSON-RPC error and the server goes on
    c.send_raw(b"Content-Length: 9\r\n\r\n{not json")
    expect(c.read().get("error", {}).get("code") == -32700, "bad JSON: parse error")
    c.send_raw(b"garbage line\r\n")
    expect(c.read().get("error", {}).get("code") == -32700, "a header line without ':': parse error")
    c.send_raw(b"Content-Length: 2\r\n\r\n[]")
    expect(c.read().get("error", {}).get("code") == -32600, "a batch: invalid request")
    c.send({"jsonrpc": "2.0", "id": 99, "params": {}})
    m = c.read()
    expect(m.get("id") == 99 and m.get("error", {}).get("code") == -32600, "no method: invalid request %r" % m)
    r = c.call("no/such/method", {})
    expect(r.get("error", {}).get("code") == -32601, "unknown method: method not found")
    r = c.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": "x"}})
    expect(r.get("error", {}).get("code") == -32602, "bad position: invalid params")
    r = c.call("textDocument/hover", {"textDocument": {"uri": "file:///not/open.fab"},
                                      "position": {"line": 0, "character": 0}})
    expect(r.get("error", {}).get("code") == -32602, "a document not open: invalid params")
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri}, "contentChanges": [{"range": 5, "text": 3}]})
    r = c.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 21}})
    expect("result" in r, "still serving after a malformed change: %r" % r)

    # seeded garbage in well-formed frames: every method with parameters of
    # the wrong shapes; the server answers what it answers and stays up
    rng = random.Random(17)
    values = [None, 0, -1, 2 ** 40, 1.5, "x", "", [], {}, [1, 2], {"line": -5, "character": 3},
              {"line": 2 ** 31, "character": 2 ** 31}, {"uri": uri}, {"textDocument": {"uri": uri}},
              {"start": {"line": 1, "character": 0}, "end": {"line": 0, "character": 0}}, "\U0001F600\n\t"]
    methods = ["textDocument/didOpen", "textDocument/didChange", "textDocument/didSave", "textDocument/hover",
               "textDocument/completion", "textDocument/definition", "textDocument/codeAction", "initialize",
               "$/cancelRequest", "", 5, None]
    keys = ["textDocument", "position", "range", "contentChanges", "text", "uri", "version", "context"]

    def garbage(depth=0):
        if depth < 3 and rng.random() < 0.5:
            return {rng.choice(keys): garbage(depth + 1) for _ in range(rng.randint(0, 4))}
        if depth < 3 and rng.random() < 0.2:
            return [garbage(depth + 1) for _ in range(rng.randint(0, 3))]
        return rng.choice(values)

    for k in range(400):
        msg = {"jsonrpc": rng.choice(["2.0", "2.0", "2.0", "1.0", 2]), "method": rng.choice(methods),
               "params": garbage()}
        if isinstance(msg["params"], dict) and rng.random() < 0.5:
            msg["params"]["textDocument"] = {"uri": uri, "version": k, "text": rng.choice(values[5:]) if rng.random() < 0.3 else SEED}
        if rng.random() < 0.5:
            msg["id"] = 1000 + k
        c.send(msg)
    r = c.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 1}})
    expect("result" in r or r.get("error", {}).get("code") == -32602, "alive after 400 garbage messages: %r" % r)

    c.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    d = c.diagnostics(uri)
    expect(d["diagnostics"] == [], "closing clears the diagnostics")
    r = c.call("shutdown", None)
    expect("result" in r and r["result"] is None, "shutdown answers null")
    c.notify("exit", None)
    try:
        status = c.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        c.proc.kill()
        status = None
    expect(status == 0, "exit after shutdown: status 0, got %r" % status)
    c.stderr.seek(0)
    err = c.stderr.read()
    expect(not err, "nothing on stderr (a sanitizer's report lands there): %r" % err[:2000])
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("lsp-client: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
