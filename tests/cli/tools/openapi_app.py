"""An HTTP API with an OpenAPI 3.1 document, for the tool-source tests.

    .venv-tools/bin/python tests/cli/tools/openapi_app.py

A FastAPI app: the tests turn its /openapi.json into sandbox methods
(`[tools.ID] openapi = ...`) and call them. It binds a free port on
127.0.0.1, prints `listening on http://127.0.0.1:PORT` as its only line on
stdout once it takes connections, logs to stderr, and exits when its stdin
reaches EOF (so it never outlives the test that holds the pipe).

Every operation needs `Authorization: Bearer TOKEN`, TOKEN from the
environment's TOOLS_TOKEN (default `test-token-7781`); a missing or wrong
token is answered 401, as FastAPI's HTTPBearer does. The document itself,
GET /openapi.json, needs none.

Other environment variables:
  TOOLS_REQUEST_LOG      a file to which every request that passed the token
                         check appends `METHOD PATH` (before its parameters
                         are validated), so a test can show that a request
                         was never sent
  TOOLS_DISCONNECT_FILE  a file that GET /slow writes when its client goes
                         away before it answers

Operations (operationIds): get_item, create_item, search, slow, boom, big,
echo_auth, put_file (its body's members `message, content`, out of
alphabetical order, as GitHub's create-or-update-file-contents has them).
"""

import asyncio
import os
import secrets
import time
from typing import Annotated

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from loopback import serve

TOKEN = os.environ.get("TOOLS_TOKEN", "test-token-7781")
bearer = HTTPBearer()


def authorized(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials, Depends(bearer)]
) -> None:
    """Checks the token, then records the request (TOOLS_REQUEST_LOG)."""
    if not secrets.compare_digest(credentials.credentials.encode(), TOKEN.encode()):
        raise HTTPException(401, "Invalid token", headers={"WWW-Authenticate": "Bearer"})
    log = os.environ.get("TOOLS_REQUEST_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{request.method} {request.url.path}\n")


app = FastAPI(
    title="Shop",
    version="1.0.0",
    dependencies=[Depends(authorized)],
)
app.openapi_version = "3.1.0"  # FastAPI's default, kept whatever a later one picks


class Item(BaseModel):
    id: int
    name: str
    q: str | None = None


class NewItem(BaseModel):
    name: str
    price: float
    tags: list[str] = []


class CreatedItem(NewItem):
    id: int


class SearchResult(BaseModel):
    terms: list[str]
    trace: str | None


created = 0


@app.get(
    "/items/{item_id}",
    operation_id="get_item",
    response_model=Item,
    summary="Get an item",
    description="Reads one item of the shop by its id; `q` is echoed back.",
)
def get_item(item_id: int, q: str | None = None) -> Item:
    return Item(id=item_id, name=f"item {item_id}", q=q)


@app.post(
    "/items",
    operation_id="create_item",
    response_model=CreatedItem,
    status_code=201,
    summary="Create an item",
)
def create_item(item: NewItem) -> CreatedItem:
    global created
    created += 1
    return CreatedItem(id=1000 + created, **item.model_dump())


@app.get("/search", operation_id="search", response_model=SearchResult, summary="Search")
def search(
    terms: Annotated[list[str], Query()],
    x_trace_id: Annotated[str | None, Header()] = None,
) -> SearchResult:
    return SearchResult(terms=terms, trace=x_trace_id)


@app.get("/slow", operation_id="slow", summary="Answer after `ms` milliseconds")
async def slow(ms: int, request: Request) -> dict:
    deadline = time.monotonic() + ms / 1000
    while (left := deadline - time.monotonic()) > 0:
        if await request.is_disconnected():
            path = os.environ.get("TOOLS_DISCONNECT_FILE")
            if path:
                with open(path, "w", encoding="utf-8") as f:
                    f.write("disconnected\n")
            return {"disconnected": True}
        await asyncio.sleep(min(left, 0.02))
    return {"slept_ms": ms}


@app.get("/boom", operation_id="boom", summary="Always fails (500)")
def boom() -> JSONResponse:
    return JSONResponse({"detail": "boom"}, status_code=500)


# About 8 MiB of JSON, made once.
BIG = b'{"data": "' + b"x" * (8 * 1024 * 1024) + b'"}'


@app.get("/big", operation_id="big", summary="An 8 MiB JSON answer")
def big() -> Response:
    return Response(BIG, media_type="application/json")


@app.get("/echo-auth", operation_id="echo_auth", summary="The Authorization header received")
def echo_auth(request: Request) -> dict:
    return {"authorization": request.headers.get("authorization")}


class FileChange(BaseModel):
    message: str
    content: str


@app.put("/files/{name}", operation_id="put_file", summary="Create or update a file")
def put_file(name: str, change: FileChange) -> dict:
    return {"name": name, "message": change.message, "content": change.content}




if __name__ == "__main__":
    serve(app)
