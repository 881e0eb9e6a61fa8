lambda: 1
x = lambda: lambda: 0
(lambda x: x)(1)
