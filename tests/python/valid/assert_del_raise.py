assert x, (
  "msg"
)
del (a), [b], c.d, e[0]
raise
raise X
raise X from None
