type = 1
type(x)
type.x = 2
case = 3
case[0]
