for x, *y in z: pass
[*a, *b] = c
(a, b), c = d
