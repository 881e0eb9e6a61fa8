x = not a == b
y = a if not b else c
z = -x ** -y
w = await_ = 1
