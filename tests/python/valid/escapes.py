x = "\N{BULLET} \u2022 \U0001F600 \x41 \101"
b = b"\x00\xff"
