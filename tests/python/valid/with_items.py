with a, b as c, d as (e, f): pass
with (a, b) as c: pass
with (a) as b, (c): pass
