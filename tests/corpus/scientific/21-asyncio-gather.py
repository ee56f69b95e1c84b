# expect: [0, 1, 2]
import asyncio
async def job(i):
    await asyncio.sleep(0.01)
    return i
async def main():
    return await asyncio.gather(*(job(i) for i in range(3)))
print(asyncio.run(main()))
