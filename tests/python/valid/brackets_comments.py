x = [
  1,  # comment
  2,
]
y = (1 if x else
     2)
