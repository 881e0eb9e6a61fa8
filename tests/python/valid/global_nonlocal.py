global_ = 1
def f():
    global global_, y
    nonlocal_ = 2
