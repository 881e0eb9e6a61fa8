class C(A, B, metaclass=M, **kw): pass
class D(): pass
