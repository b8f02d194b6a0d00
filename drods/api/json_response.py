"""The API's JSON responses, rendered by orjson (`drods.model.jsondoc`) rather than the standard
library: every object read, list and apply answer is rendered once per request, and the standard
library's encoder was most of rendering a watch event or an answer in the API server and the members'
simulator. NaN is written as null, as the store writes it."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse as _StarletteJSONResponse

from drods.model import jsondoc


class JSONResponse(_StarletteJSONResponse):
    def render(self, content: Any) -> bytes:
        return jsondoc.dumps(content)
