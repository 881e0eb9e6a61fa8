data = [
    1,
    2,
