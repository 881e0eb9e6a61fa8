class C(B)
    pass
