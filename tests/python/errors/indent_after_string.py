x = """
	tabs inside
"""
	if_ = 1
