a = not not b
c = a is not not b
d = a not in b in c
