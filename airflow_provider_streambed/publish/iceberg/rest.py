"""What a pyiceberg ``RestCatalog`` keeps to itself: the endpoints its server listed, and its
signed session (the catalog's auth: OAuth2 tokens, SigV4, configured headers).

pyiceberg 0.12 has no client call for the REST spec's multi-table commit, so the request is
posted on the catalog's own session. Relies on pyiceberg 0.12 internals ``RestCatalog._session``
and ``_supported_endpoints``; ``tests/unit/publish/iceberg/test_rest.py`` checks them against
the installed pyiceberg.
"""

from __future__ import annotations

import requests
from pyiceberg.catalog.rest import Endpoint, RestCatalog


def supported_endpoints(catalog: RestCatalog) -> set[Endpoint]:
    """The endpoints the server listed in ``GET /v1/config``, else pyiceberg's defaults."""
    return catalog._supported_endpoints


def post_json(catalog: RestCatalog, path: str, body: bytes) -> requests.Response:
    """POST the JSON ``body`` to ``path`` under the catalog's URI and prefix, on its signed session."""
    return catalog._session.post(catalog.url(path, prefixed=True), data=body,
                                 headers={"Content-Type": "application/json"})
