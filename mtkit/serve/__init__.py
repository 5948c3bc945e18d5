"""`mtkit serve`: a translation server that batches concurrent requests (needs the `serve` extra).

    batcher.py         the bounded queue and the one decoder thread (dynamic batching)
    payload.py         request bodies checked, each mistake one sentence and its HTTP status
    guard.py           Host, Origin and API key checked before any endpoint; any error one JSON line
    languages.py       the model's language pairs, and which of its languages a text is in
    keys.py            the API keys (a key file re-read), each key's limits and usage
    glossaries.py      the glossaries clients made, each its key's
    service.py         the model loaded in the background, /info, translate through the batcher: no API's shape
    http.py            what every API adapter does with HTTP alike (bodies, errors, clients that left)
    markup.py          HTML fragments translated through the service
    documents.py       files translated through the service (mtkit/documents/'s formats)
    files.py           files being translated, and their translations kept for download
    native.py          an adapter per API: mtkit's own,
    opennmt.py           OpenNMT-py's,
    libretranslate.py    LibreTranslate's (its /spec: libretranslate_spec.py),
    deepl.py             DeepL's v2 (its glossaries: deepl_glossaries.py),
    openai.py            OpenAI's chat completions
    app.py             the server's own endpoints (/health, /info, the page) and the adapters mounted
    server.py          uvicorn on a socket bound here; a bounded drain, exit 0 after SIGTERM

The adapters, app.py and server.py need FastAPI and uvicorn; the rest imports without the extra.
"""
