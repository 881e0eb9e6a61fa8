x = f"{a}" "plain" f"{b}"
y = "plain" f"{a}"
