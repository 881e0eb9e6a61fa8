if a:
    pass
# comment

    # indented comment
else:
    pass
