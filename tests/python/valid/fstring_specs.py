x = f"{1:{2}.{3}f}" f'{x!r}' rf"\{x}" fr"{x}\n"
