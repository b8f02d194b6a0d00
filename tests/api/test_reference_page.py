"""``/docs`` works on a control plane without internet access: the page loads Swagger UI from the server
itself (FastAPI's own page loaded it from a CDN and was blank offline), and it is public as the OpenAPI
document it reads is."""

from __future__ import annotations

import re

from tests.api.conftest import Api


async def test_the_reference_page_needs_nothing_from_the_network(api: Api) -> None:
    page = await api.client.get("/docs")  # no token
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text) + re.findall(r"url: '([^']+)'", page.text)
    assert urls and not [u for u in urls if u.startswith(("http:", "https:", "//"))], urls
    for asset in ("/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"):
        assert asset in urls
        r = await api.client.get(asset)
        assert r.status_code == 200 and len(r.content) > 10_000, asset
    assert "/openapi.json" in page.text
    assert (await api.client.get("/openapi.json")).status_code == 200
