x = f"\{a} \N{BULLET} {b!r}"
y = rf"\{a}\n"
