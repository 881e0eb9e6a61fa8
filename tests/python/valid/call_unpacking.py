print(*a, *b, **c, **d)
f(a, *b, c=1, *d, **e)
