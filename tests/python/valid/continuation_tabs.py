x = 1\
+ 2
if x:
	pass
