try:
    pass
except:
    pass
try:
    pass
except* E as e:
    pass
