while True
    break
