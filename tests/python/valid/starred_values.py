def f():
    return *a, b
x = *a, *b
for x in *a, *b: pass
