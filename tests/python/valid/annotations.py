a = b = c = d
a: int
b: "T" = 1
self.x: int = 1
x[0]: int
