#!/usr/bin/env python3
"""json-schema.py -- validates JSON documents against a JSON Schema.

    json-schema.py SCHEMA --lines FILE   every non-empty line of FILE is a document
    json-schema.py SCHEMA FILE           FILE is one document

Uses the jsonschema package when it is installed (unless FS_SCHEMA_BUILTIN=1); otherwise the subset of
draft 2020-12 that docs/*.schema.json use (type, enum, const, properties,
required, additionalProperties, items, minItems, minimum, pattern, $ref to
#/$defs, oneOf, anyOf), implemented below. Prints each violation with the
line and the JSON path; exit status 1 if there is one, 2 on bad usage."""
import json
import os
import re
import sys

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def errors(schema, value, root, path):
    """The violations of schema by value, as 'path: what' strings."""
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/$defs/"), ref
        yield from errors(root["$defs"][ref[len("#/$defs/"):]], value, root, path)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[t](value) for t in types):
            yield f"{path}: {json.dumps(value)[:60]} is not of type {types}"
            return
    if "const" in schema and value != schema["const"]:
        yield f"{path}: {json.dumps(value)[:60]} is not {json.dumps(schema['const'])}"
    if "enum" in schema and value not in schema["enum"]:
        yield f"{path}: {json.dumps(value)[:60]} is not one of {schema['enum']}"
    if "minimum" in schema and TYPES["number"](value) and value < schema["minimum"]:
        yield f"{path}: {value} < {schema['minimum']}"
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        yield f"{path}: {value!r} does not match {schema['pattern']}"
    for key in ("oneOf", "anyOf"):
        if key in schema:
            ok = sum(1 for s in schema[key] if not list(errors(s, value, root, path)))
            if ok == 0 or (key == "oneOf" and ok > 1):
                yield f"{path}: {ok} of the {key} alternatives match"
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                yield f"{path}: required property {name!r} is missing"
        props = schema.get("properties", {})
        for name, v in value.items():
            if name in props:
                yield from errors(props[name], v, root, f"{path}.{name}")
            elif schema.get("additionalProperties", True) is False:
                yield f"{path}: property {name!r} is not allowed"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            yield f"{path}: fewer than {schema['minItems']} items"
        if "items" in schema:
            for i, v in enumerate(value):
                yield from errors(schema["items"], v, root, f"{path}[{i}]")


def validate(schema, doc):
    if os.environ.get("FS_SCHEMA_BUILTIN") != "1":  # FS_SCHEMA_BUILTIN=1: the subset below
        try:
            import jsonschema  # the reference implementation, where installed
        except ImportError:
            jsonschema = None
        if jsonschema:
            v = jsonschema.Draft202012Validator(schema)
            return [f"$.{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]
    return list(errors(schema, doc, schema, "$"))


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[2] != "--lines"):
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    with open(argv[-1], encoding="utf-8") as f:
        text = f.read()
    docs = [(i + 1, l) for i, l in enumerate(text.split("\n")) if l] if len(argv) == 4 else [(1, text)]
    bad = 0
    for line, d in docs:
        try:
            doc = json.loads(d)
        except ValueError as e:
            print(f"{argv[-1]}:{line}: not JSON: {e}")
            bad = 1
            continue
        for e in validate(schema, doc):
            print(f"{argv[-1]}:{line}: {e}")
            bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv))
