match x:
    case 1:
        pass
match = 5
match.x = 1
match[0]
print(match)
