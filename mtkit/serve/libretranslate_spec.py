"""GET /spec: the LibreTranslate endpoints `mtkit serve` answers, described as LibreTranslate's own /spec describes
them (Swagger 2.0), for clients and tools that read the spec first. Data only: what each endpoint takes and gives."""

from __future__ import annotations

from typing import Any


def _param(name: str, description: str, required: bool = False, kind: str = "string") -> dict[str, Any]:
    return {"in": "formData", "name": name, "type": kind, "required": required, "description": description}


ERROR = {"type": "object", "properties": {"error": {"type": "string", "description": "One sentence."}}}
API_KEY = _param("api_key", "API key (or the Authorization: Bearer header)")
_ANSWERS = {
    "400": {"description": "Invalid request", "schema": ERROR},
    "403": {"description": "Wrong API key", "schema": ERROR},
    "429": {"description": "Slow down: busy, or the key's limit reached (see Retry-After)", "schema": ERROR},
    "500": {"description": "Translation error", "schema": ERROR},
}


def _post(summary: str, params: list[dict[str, Any]], ok: dict[str, Any], tag: str) -> dict[str, Any]:
    return {
        "post": {
            "tags": [tag],
            "summary": summary,
            "consumes": ["application/json", "application/x-www-form-urlencoded", "multipart/form-data"],
            "produces": ["application/json"],
            "parameters": params,
            "responses": {"200": ok, **_ANSWERS},
        }
    }


SPEC: dict[str, Any] = {
    "swagger": "2.0",
    "info": {"title": "LibreTranslate's API on mtkit serve", "version": "1.0"},
    "basePath": "/",
    "paths": {
        "/translate": _post(
            "Translate text",
            [
                _param("q", "Text to translate (a string, or a list of strings in JSON)", True),
                _param("source", "Source language code, or auto", True),
                _param("target", "Target language code", True),
                _param("format", "text or html"),
                _param("alternatives", "How many alternative translations to give", kind="integer"),
                _param(
                    "confidence",
                    "mtkit's extension: true to have each translation's confidence (0 to 1) in 'confidence'",
                    kind="boolean",
                ),
                API_KEY,
            ],
            {
                "description": "Translated text",
                "schema": {
                    "type": "object",
                    "properties": {
                        "translatedText": {"type": "string"},
                        "detectedLanguage": {"type": "object"},
                        "alternatives": {"type": "array", "items": {"type": "string"}},
                        "confidence": {"type": "number"},
                    },
                },
            },
            "translate",
        ),
        "/detect": _post(
            "Detect the language of a text",
            [_param("q", "Text", True), API_KEY],
            {
                "description": "Detections, most likely first",
                "schema": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"confidence": {"type": "number"}, "language": {"type": "string"}},
                    },
                },
            },
            "translate",
        ),
        "/suggest": _post(
            "Suggest a better translation (disabled on this server)",
            [_param("q", "Original text", True), _param("s", "Suggested translation", True)],
            {"description": "Success", "schema": {"type": "object", "properties": {"success": {"type": "boolean"}}}},
            "feedback",
        ),
        "/languages": {
            "get": {
                "tags": ["translate"],
                "summary": "The languages this server translates",
                "produces": ["application/json"],
                "responses": {
                    "200": {
                        "description": "Each language with the codes it translates into",
                        "schema": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "code": {"type": "string"},
                                    "name": {"type": "string"},
                                    "targets": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                        },
                    }
                },
            }
        },
        "/frontend/settings": {
            "get": {
                "tags": ["frontend"],
                "summary": "The settings LibreTranslate's web page reads",
                "produces": ["application/json"],
                "responses": {"200": {"description": "Frontend settings", "schema": {"type": "object"}}},
            }
        },
    },
}
