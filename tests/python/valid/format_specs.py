print(f"{x:%Y-%m-%d}", f"{x!r:^{w}}", f"{{literal}}", f"{x:{{}}>10}")
