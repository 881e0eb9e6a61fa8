x = [i for i in range(3) for j in range(i) if j if not i]
y = (x for x in (1, 2))
