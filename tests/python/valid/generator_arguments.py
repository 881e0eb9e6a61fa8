f(x for x in y)
f(a=(x for x in y))
print(f"{'nested'}", f'{"a"}')
