s = "a\
b"
t = '''it's'''
u = """say "hi\""""
