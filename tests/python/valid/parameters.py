def f(a, b=1, *, c, d=2, **e): pass
def g(a, /): pass
def h(*a, b): pass
def i(a=1, /, b=2, *c, d, **e): pass
