with open(p) as f
    pass
