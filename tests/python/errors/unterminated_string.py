s = 'abc
t = 1
