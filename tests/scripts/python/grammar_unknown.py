# Python's statements and expressions parse, and the checker takes what it
# does not model as unknown: no error, no rule firing (a .py file is checked,
# never run; the same constructs in a .fab script are rule `unsupported`,
# tests/scripts/lang/unsupported.fab).
import os, os.path as osp
from collections import OrderedDict as OD, defaultdict
from builtins import ValueError, TypeError, RuntimeError, open
from . import sibling
from ..pkg.mod import (a as b, c, decorate, other, Base, Meta,)
@decorate(1)
@other
class Net(Base, metaclass=Meta):
    """A docstring."""
    size: int = 4
    def forward(self, x, /, y: int = 1, *args, scale, shift=0.0, **kw) -> "Tensor":
        return lambda z, *rest, k=1, **opts: (z, *rest)
async def serve(queue):
    async with queue as q, q:
        await q.get()
    async for item in queue:
        pass
    return [i async for i in queue]
def gen(n):
    yield n
    got = yield
    yield from range(n)
def scoped():
    global counter
    counter = 1
    def inner():
        nonlocal counter
    return inner
squares = [i * i for i in range(10) if i % 2 if i > 3]
table = {k: v for k, v in [(1, 2)]}
unique = {1, 2, *squares}
lazy = (x for x in squares)
total = sum(x for x in squares)
first = second = third = 0
head, *tail = [1, 2, 3]
del head
try:
    pass
except (ValueError, TypeError) as err:
    raise RuntimeError("bad") from err
else:
    pass
finally:
    pass
n = 3
while n > 0:
    n -= 1
else:
    pass
for k, in [(1,)]:
    pass
else:
    pass
if (m := len(squares)) > 2:
    pass
grid = [[1, 2], [3, 4]]
print(grid[0][1:2], grid[::2], squares[...] if False else 0)
print(1 < 2 < 3, 1 is not None, 2 not in [1], ~1, 1 << 2 | 3 ^ 4 & 5, 2 ** -1)
numbers = 1_000_000 + 0x_FF + 0o17 + 0b1010 + 1.5e-3 + 10j + .5 + 5.
big = 123456789012345678901234567890
words = r"\d+" "joined" 'implicitly' """and
triple"""
data = b"bytes" rb'\raw'
shown = f"{n!r:>10} {n=} {n:{n}} {'nested' + "quotes"} {grid[0]!s}"
nothing = ...
match grid:
    case [[1, _], *rest] if rest:
        pass
    case {"key": value, **others}:
        pass
    case Point(x=0, y=0) | [0, 0] as origin:
        pass
    case 1 | -2 | 3.5 | 1 + 2j | "s" | None | os.sep:
        pass
    case _:
        pass
type Alias[T] = list[T]
def generic[T](x: T) -> T:
    return x
match = 1
type = 2
case = match + type
print(match, type, case)
i = 1; j = 2;
if i: pass
elif j: pass
else: pass
with (open(words) as f, open(words) as g,):
    pass
assert i, "message"
