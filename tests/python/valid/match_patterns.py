match (a, b):
    case (1, 2): pass
    case [a, b, *_] if a > b: pass
    case {1: _, "x": [y, *z]}: pass
    case A.B(c, d=e): pass
    case -1.5 | 2 - 3j: pass
    case str() | bytes(): pass
    case (x): pass
