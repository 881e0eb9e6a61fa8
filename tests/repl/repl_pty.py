#!/usr/bin/env python3
"""repl_pty.py FABRICSCRIPT -- drives the interactive session through a
pseudo-terminal, as a person at a keyboard would, and checks what it shows:
completion, a multi-line model, the seed's error and recovery, history across
two sessions, Ctrl-C, long pasted lines. Prints `N passed, N failed`; exits
1 on any failure. REPL_WRAPPER (e.g. "valgrind --log-file=...") runs each
session under a tool (`make check-valgrind`)."""
import os, pty, re, select, shlex, signal, sys, tempfile, time

BIN = os.path.abspath(sys.argv[1])
R36 = ("The optimizer has references to the model's meta-device parameters. Materializing them "
       "is is currently not supported unless you to set up the model and optimizer(s) separately.")


class Session:
    def __init__(self, history):
        env = dict(os.environ, FABRICSCRIPT_HISTORY=history, TERM="xterm", NO_COLOR="1")
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            argv = shlex.split(os.environ.get("REPL_WRAPPER", "")) + [BIN, "--gpus=1"]
            os.execvpe(argv[0], argv, env)
        self.out = b""
        self.expect(">>> ")

    def read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            return False
        self.out += data
        return bool(data)

    def expect(self, text, timeout=60.0):
        """Waits until `text` appears after the last match; returns what came before it."""
        end = time.time() + timeout
        while text.encode() not in self.out:
            if time.time() > end or not self.read(end - time.time()):
                if text.encode() in self.out:
                    break
                raise AssertionError(f"timed out waiting for {text!r}; screen so far:\n"
                                     + self.out.decode(errors="replace")[-2000:])
        before, _, after = self.out.partition(text.encode())
        self.out = after
        return before.decode(errors="replace")

    def send(self, keys):
        os.write(self.fd, keys.encode())

    def line(self, text):
        self.send(text + "\r")

    def paste(self, text, timeout=600.0):
        """Writes all of `text` as a terminal does a paste: as fast as the
        session takes it, reading its echo meanwhile (a pty's buffers hold
        about 4 KB each way; os.write alone would block or write part)."""
        data, end = text.encode(), time.time() + timeout
        while data:
            if time.time() > end:
                raise AssertionError(f"the session stopped taking input; {len(data)} bytes left")
            r, w, _ = select.select([self.fd], [self.fd], [], 1.0)
            if r:
                self.read(0)
            if w:
                data = data[os.write(self.fd, data[:1024]):]

    def close(self):
        """Ctrl-D at an idle prompt ends the session. A Ctrl-D typed while a
        statement still runs reaches the terminal outside libedit's mode and
        can be lost, as it can in Python's REPL: it is typed again then."""
        try:
            end = time.time() + 60
            while time.time() < end:
                self.send("\x04")
                retry = time.time() + 5
                while time.time() < retry:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                    if pid:
                        return status
                    self.read(0.1)
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            raise AssertionError("the session did not end on Ctrl-D; screen:\n"
                                 + self.out.decode(errors="replace")[-1000:])
        finally:
            os.close(self.fd)


def test_multiline_model_and_completion(hist):
    s = Session(hist)
    s.line("model Net(hidden=8):")
    s.expect("... ")
    s.line("    fc1 = Linear(4, hidden)")
    s.expect("... ")
    s.line("    ReLU()")
    s.expect("... ")
    s.line("")
    s.expect(">>> ")
    s.line("net = Net()")
    s.expect(">>> ")
    s.line("net.num_parameters()")
    s.expect("40")
    s.line('fabric = Fabric(accelerator="cpu")')
    s.expect(">>> ")
    s.send("fabric.set\t\t")  # ambiguous: the candidates are listed
    shown = s.expect("setup_optimizers")
    assert "setup_dataloaders" in shown, f"candidates not listed: {shown!r}"
    s.send("\x15")  # Ctrl-U: clear the line
    s.expect(">>> ")
    # A unique completion, then the rest of the line: it runs only if the
    # method name was completed in full.
    s.send("net = fabric.setup_m\t")
    s.line("(net)")
    s.line("print('set', 'up')")
    after = s.expect("set up")
    assert "error" not in after, f"setup_m<Tab> did not complete to setup_module:\n{after}"
    s.send("ne\t")  # a name of the session
    s.line(".num_parameters() + 1")
    s.expect("41")
    s.close()


def test_seed_error_and_recovery(hist):
    s = Session(hist)
    for line in ['fabric = Fabric(strategy="fsdp", accelerator="cuda", devices=1)',
                 "fabric.launch()"]:
        s.line(line)
        s.expect(">>> ")
    s.line("with fabric.init_module(empty_init=True):")
    s.expect("... ")
    s.line("    model = Linear(8, 8)")
    s.expect("... ")
    s.line("")
    s.expect(">>> ")
    s.line("optimizer = Adam(model.parameters())")
    s.expect(">>> ")
    s.line("model, optimizer = fabric.setup(model, optimizer)")
    shown = s.expect(">>> ")
    # Line 7: the blank line that ended the `with` block is part of the session.
    assert "<stdin>:7:40: error[R36]: " + R36 in shown.replace("\r", ""), f"no R36 at 7:40:\n{shown}"
    assert "help: set up the model first" in shown
    # The rejected line did not run and is not part of the session: the
    # corrected order passes the check next (running it needs the target's GPU).
    s.line("model = fabric.setup_module(model)")
    s.line("optimizer = fabric.setup_optimizers(Adam(model.parameters()))")
    s.line(":check")
    after = s.expect("session checks clean")
    assert "meta-device" not in after, f"the corrected order was rejected:\n{after}"
    s.close()


def test_history_across_sessions(hist):
    s = Session(hist)
    s.line("answer = 41 + 1")
    s.expect(">>> ")
    s.close()
    s = Session(hist)
    s.send("\x1b[A")  # Up: the previous session's line comes back
    s.expect("answer = 41 + 1")
    s.send("\r")
    s.expect(">>> ")
    s.line("answer")
    s.expect("42")
    s.close()


def test_history_multiline(hist):
    """A block is one history entry: Up recalls all of it, in this session
    and the next, and Enter runs it again."""
    s = Session(hist)
    s.line("for i in range(2):")
    s.expect("... ")
    s.line("    print('row', i)")
    s.expect("... ")
    s.line("")
    s.expect("row 1")
    s.expect(">>> ")
    s.close()
    s = Session(hist)
    s.send("\x1b[A")
    s.expect("print('row', i)")
    s.send("\r")
    shown = s.expect("row 1")
    assert "row 0" in shown and "... " not in shown, f"the block did not come back whole:\n{shown}"
    s.expect(">>> ")
    s.close()


def test_ctrl_c(hist):
    s = Session(hist)
    s.line("for i in range(1000000000):")
    s.expect("... ")
    s.line("    x = i")
    s.expect("... ")
    s.line("    if i == 1000:")
    s.expect("... ")
    s.line("        print('looping')")
    s.expect("... ")
    s.line("")
    s.expect("looping")
    s.send("\x03")  # Ctrl-C interrupts the loop, not the session
    shown = s.expect(">>> ")
    assert "KeyboardInterrupt" in shown, f"no KeyboardInterrupt:\n{shown}"
    s.line("x > 0")
    s.expect("True")  # the loop's progress stays
    s.expect(">>> ")
    time.sleep(0.3)  # a person types at an idle prompt, not while the terminal changes mode
    s.send("half a line")
    s.expect("half a line")  # echoed: the line editor has it (input sent earlier can be flushed)
    s.send("\x03")  # at the prompt: the line is dropped
    s.expect("KeyboardInterrupt")
    s.expect(">>> ")
    s.line("1 + 41")
    s.expect("42")
    s.close()


def test_save_and_load(hist):
    import subprocess
    d = os.path.dirname(hist)
    script = os.path.join(d, "session.fab")
    s = Session(hist)
    s.line("model Tiny():")
    s.expect("... ")
    s.line("    Linear(2, 3)")
    s.expect("... ")
    s.line("")
    s.line("t = Tiny()")
    s.line("x = t.num_parameters() * 2")
    s.line("y = nope  # rejected: not part of the session")
    s.expect("name 'nope' is not defined")
    s.line("z = 1 / (sum([1, 2]) - 3)  # checks clean, fails while running: not saved")
    s.expect("division by zero")
    s.line(f":save {script}")
    s.expect("saved")
    s.close()
    saved = open(script).read()
    assert "nope" not in saved and "t = Tiny()" in saved, f"saved session:\n{saved}"
    assert "sum([1, 2])" not in saved, f"an entry that failed while running was saved:\n{saved}"
    r = subprocess.run([BIN, "check", script], capture_output=True, text=True)
    assert r.returncode == 0, f"fabricscript check rejects the saved session:\n{r.stderr}"
    r = subprocess.run([BIN, script], capture_output=True, text=True)
    assert r.returncode == 0, f"the saved session does not run:\n{r.stderr}"
    s = Session(hist)
    s.line(f":load {script}")
    s.line("x + 1")
    s.expect("19")  # 9 parameters, twice, plus one: the loaded entries ran
    s.close()


def test_plan(hist):
    s = Session(hist)
    s.line("model M():")
    s.expect("... ")
    s.line("    Linear(100, 100)")
    s.expect("... ")
    s.line("")
    s.line('fabric = Fabric(accelerator="cpu")')
    s.line("m = fabric.setup_module(M())")
    s.line("o = fabric.setup_optimizers(Adam(m.parameters()))")
    s.line(":plan")
    shown = s.expect("total")
    assert "10100 parameters" in shown, f"no plan of the session's model:\n{shown}"
    s.close()


def test_ddp_is_refused(hist):
    """Fabric's interactive-environment error (R69), not two ranks that
    both read the terminal."""
    s = Session(hist)
    s.line('fabric = Fabric(accelerator="cpu", strategy="ddp", devices=2)')
    shown = s.expect(">>> ").replace("\r", "")
    assert ("error[R69]: `Fabric(strategy='ddp')` is not compatible with an interactive environment. "
            "Run your code as a script") in shown, f"no R69:\n{shown}"
    s.line("1 + 41")
    s.expect("42")
    s.close()


def test_long_lines(hist):
    """Pasted lines of 1 KB, 4 KB and 64 KB (libedit's readline emulation
    wrote through a stale pointer from about 1 KB of line: issue 18)."""
    s = Session(hist)
    for n in (1024, 4096, 65536):
        s.paste("x = '" + "a" * (n - 6) + "'\r")
        s.expect(">>> ", timeout=600)
        s.line("len(x)")
        s.expect(str(n - 6), timeout=60)
        s.expect(">>> ")
    s.close()


def main():
    tests = [test_multiline_model_and_completion, test_seed_error_and_recovery,
             test_history_across_sessions, test_history_multiline, test_ctrl_c, test_save_and_load, test_plan,
             test_long_lines, test_ddp_is_refused]
    passed = failed = 0
    with tempfile.TemporaryDirectory() as d:
        for t in tests:
            hist = os.path.join(d, t.__name__ + ".history")
            try:
                t(hist)
                print(f"PASS {t.__name__}")
                passed += 1
            except Exception as e:  # report and go on: every test is independent
                print(f"FAIL {t.__name__}: {e}")
                failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
