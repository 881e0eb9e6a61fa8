@a.b(c)
@d
async def f():
    async with a: pass
    await b
    return [x async for x in y]
