match x:
    case 1: pass
    case [a]: pass
case[0]: int = 5
case = 1
match[0]: int = 2
