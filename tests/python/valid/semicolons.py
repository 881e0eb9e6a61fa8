class A: x = 1; y = 2
if 1: pass; pass
