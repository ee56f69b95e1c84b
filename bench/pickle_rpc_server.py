"""The plugin server of the design sandwit replaces: a FastAPI app that takes
`pickle.dumps({"method", "args", "kwargs"})` in a POST body, `pickle.loads`
it, calls the method and answers with the pickled result.

Run by `peers.py` under uvicorn on loopback; the methods are the ones
`sandwit-bench` calls in the echo plugin, plus the calculator's sum.
"""

import pickle

from fastapi import FastAPI, Request, Response

app = FastAPI()


def nop():
    return None


def echo(value):
    return value


def calculate_sum(num1, num2):
    return num1 + num2


METHODS = {"nop": nop, "echo": echo, "calculate_sum": calculate_sum}


@app.post("/call")
async def call(request: Request) -> Response:
    body = pickle.loads(await request.body())
    method = METHODS[body["method"]]
    result = method(*body.get("args", ()), **body.get("kwargs", {}))
    return Response(pickle.dumps(result), media_type="application/octet-stream")
