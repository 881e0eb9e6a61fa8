x = {**a, "b": 1, **c}
y = {*a, *b}
z = {a: b for a, b in c if a}
