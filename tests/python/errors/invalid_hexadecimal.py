x = 1if 1else 2
y = 0x1for_ = 3
