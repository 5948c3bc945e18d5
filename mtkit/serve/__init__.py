"""`mtkit serve`: a translation server that batches concurrent requests (needs the `serve` extra).

    batcher.py   the bounded queue and the one decoder thread (dynamic batching)
    payload.py   request bodies checked, each mistake one sentence and its HTTP status
    guard.py     Host, Origin and API key checked before any endpoint; any error one JSON line
    service.py   the model loaded in the background, /info, translate through the batcher
    app.py       the FastAPI endpoints
    server.py    uvicorn on a socket bound here; a bounded drain, exit 0 after SIGTERM

Only app.py and server.py need FastAPI and uvicorn; the rest imports without the extra.
"""
