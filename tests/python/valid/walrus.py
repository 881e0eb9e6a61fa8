if (n := 10) > 5: pass
while (chunk := f.read()): pass
[y := 1, y ** 2]
f(x := 1)
x[y := 1]
