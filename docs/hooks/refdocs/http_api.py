"""The HTTP API reference: every path and method of the server's OpenAPI document (the one it serves at
/api/v1/openapi.json), with its summary, authentication, parameters, request body and responses, then the
schemas they name. The app is built as the tests build it (feeds.http.app.create_app over a store), with a
read token, so that reads show the authentication they take when reading is closed; the document a server
serves declares security as its options enforce it (no read token: reads declare none). The document is
made without a request, so the store's database is never opened."""

from __future__ import annotations

from typing import Any

from feeds.http.app import ServerOptions, create_app
from refdocs.markdown import cell, code, table
from storage.db import create_db_engine
from storage.front import Storage

METHODS = ("get", "post", "put", "patch", "delete")
READ_SCHEME = "APIKeyQuery"  # `?token=`: only reads take it (feeds.http.auth)


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the whole HTTP surface."""
    engine = create_db_engine("sqlite://")
    try:
        return create_app(Storage(engine), options=ServerOptions(read_token="reference")).openapi()
    finally:
        engine.dispose()


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path, operation) of every operation, in the document's order."""
    return [(method.upper(), path, item[method]) for path, item in document["paths"].items() for method in METHODS
            if method in item]


def schema_words(schema: dict[str, Any]) -> str:
    """A JSON schema in a few words: a type, a link to a named schema, `array of` ..., `or` between choices."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#schema-{name.lower()})"
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(schema_words(s) for s in schema.get("anyOf") or schema["oneOf"])
    if "enum" in schema:
        return "one of " + ", ".join(code(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return "array of " + schema_words(schema.get("items", {}))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "object of " + schema_words(schema["additionalProperties"])
    return cell(kind)


def _limits(schema: dict[str, Any]) -> str:
    parts = [f"{word} {code(schema[key])}" for key, word in (("default", "default"), ("minimum", "min"), ("maximum", "max"),
                                                              ("maxLength", "max length")) if key in schema]
    return "; ".join(parts)


def parameters_table(operation: dict[str, Any]) -> str:
    rows = []
    for param in operation.get("parameters", []):
        schema = param.get("schema", {})
        text = param.get("description") or schema.get("description") or ""
        rows.append((code(param["name"]), param["in"], "yes" if param.get("required") else "no", schema_words(schema),
                     cell(text), _limits(schema)))
    return table(("Name", "In", "Required", "Type", "Meaning", "Limits"), rows)


def _content(content: dict[str, Any]) -> str:
    return "<br>".join(f"{code(media)}: {schema_words(body.get('schema', {}))}" if body.get("schema") else code(media)
                       for media, body in content.items())


def responses_table(operation: dict[str, Any]) -> str:
    rows = [(code(status), cell(answer.get("description", "")), _content(answer.get("content", {})))
            for status, answer in sorted(operation["responses"].items())]
    return table(("Status", "Meaning", "Body"), rows)


def _auth(operation: dict[str, Any]) -> str:
    schemes = [name for requirement in operation.get("security", []) for name in requirement]
    said = "Authentication: " + (" or ".join(f"[{s}](#auth-{s.lower()})" for s in schemes) if schemes else "none")
    if READ_SCHEME in schemes:  # a read: open unless the operator set a read token
        said += " when `[server] read_token_env` is set; none by default (reads are open)"
    return said + "."


def operation_section(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    out = [f"### {method} `{path}`", "", cell(operation.get("summary", "")), ""]
    if operation.get("description"):
        out += [operation["description"].strip(), ""]
    out += [_auth(operation), ""]
    if operation.get("parameters"):
        out += ["**Parameters**", "", parameters_table(operation), ""]
    if "requestBody" in operation:
        out += ["**Request body**: " + _content(operation["requestBody"].get("content", {})), ""]
    out += ["**Responses**", "", responses_table(operation), ""]
    return out


def schema_section(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"### {name} {{ #schema-{name.lower()} }}", ""]
    if schema.get("description"):
        out += [cell(schema["description"]), ""]
    if "properties" in schema:
        required = set(schema.get("required", ()))
        rows = [(code(key), schema_words(prop), "yes" if key in required else "no", cell(prop.get("description", "")))
                for key, prop in schema["properties"].items()]
        out += [table(("Field", "Type", "Required", "Meaning"), rows), ""]
    else:
        out += [f"Type: {schema_words(schema)}.", ""]
    return out


def security_section(document: dict[str, Any]) -> list[str]:
    out = ["## Authentication", ""]
    for name, scheme in document.get("components", {}).get("securitySchemes", {}).items():
        how = "A bearer token in `Authorization`" if scheme.get("scheme") == "bearer" else \
            f"The {scheme.get('in')} parameter {code(scheme.get('name'))}"
        out += [f"### {name} {{ #auth-{name.lower()} }}", "", f"{how}: {cell(scheme.get('description', ''))}", ""]
    return out


def render(document: dict[str, Any] | None = None) -> str:
    """The whole reference: authentication, the operations grouped by tag, the schemas."""
    document = document or openapi_document()
    out = security_section(document)
    tag = None
    for method, path, operation in operations(document):
        if (operation.get("tags") or ["other"])[0] != tag:
            tag = (operation.get("tags") or ["other"])[0]
            out += [f"## {tag}", ""]
        out += operation_section(method, path, operation)
    out += ["## Schemas", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        out += schema_section(name, schema)
    return "\n".join(out)
