"""The fleet spec's one declaration (berth.operator.spec.declaration) and the CRD's schema (deploy/crds) say the same
thing: walked together, property by property, every field has the same name, type, default, enum, bounds, pattern
and required-ness on both sides, and neither side has a field the other lacks. The walk itself can fail: a declaration
changed in one place is caught."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from msgspec import inspect

from berth.operator.spec.declaration import FleetSpecDeclared, SessionTimeoutSpec

CRD = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "consumerfleets.berth.dev.yaml"


def spec_schema() -> dict[str, Any]:
    (version,) = yaml.safe_load(CRD.read_text())["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def unwrap(info: Any) -> tuple[Any, dict[str, Any]]:
    extra: dict[str, Any] = {}
    while True:
        if isinstance(info, inspect.Metadata):
            extra |= info.extra or {}
            info = info.type
        elif isinstance(info, inspect.UnionType) and any(isinstance(t, inspect.NoneType) for t in info.types):
            rest = [t for t in info.types if not isinstance(t, inspect.NoneType)]
            info = rest[0] if len(rest) == 1 else inspect.UnionType(tuple(rest))
        else:
            return info, extra


def without_none(value: Any) -> Any:
    return {k: without_none(v) for k, v in value.items() if v is not None} if isinstance(value, dict) else value


def differences(schema: dict[str, Any], declared: Any, where: str) -> list[str]:
    """Every way ``declared`` (msgspec's view of a type) and the CRD's ``schema`` of the same field disagree."""
    info, extra = unwrap(declared)
    if "shape" in extra:  # kept as given; what the CRD declares inside is checked against the shape
        assert isinstance(info, inspect.DictType), where
        info = inspect.type_info(extra["shape"])
    found: list[str] = []

    def same(what: str, crd: object, ours: object) -> None:
        if crd != ours:
            found.append(f"{where}: {what} is {crd!r} in the CRD, {ours!r} in the declaration")

    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        types = {type(t) for t in getattr(info, "types", ())}
        same("type", "int-or-string", "int-or-string" if types == {inspect.IntType, inspect.StrType} else info)
    elif "enum" in schema:
        values = info.values if isinstance(info, inspect.LiteralType) else tuple(m.value for m in info.cls)
        same("enum", list(schema["enum"]), list(values))
    elif kind in ("integer", "number"):
        same("type", kind, {inspect.IntType: "integer", inspect.FloatType: "number"}.get(type(info), info))
        same("minimum", schema.get("minimum"), getattr(info, "ge", None))
        same("maximum", schema.get("maximum"), getattr(info, "le", None))
    elif kind == "string":
        same("type", kind, "string" if isinstance(info, inspect.StrType) else info)
        for crd_key, ours in (("minLength", "min_length"), ("maxLength", "max_length"), ("pattern", "pattern")):
            same(crd_key, schema.get(crd_key), getattr(info, ours, None))
    elif kind == "boolean":
        same("type", kind, "boolean" if isinstance(info, inspect.BoolType) else info)
    elif kind == "array":
        same("type", kind, "array" if isinstance(info, inspect.ListType) else info)
        if isinstance(info, inspect.ListType):
            same("minItems", schema.get("minItems"), info.min_length)
            same("maxItems", schema.get("maxItems"), info.max_length)
            found += differences(schema["items"], info.item_type, f"{where}[]")
    elif kind == "object" and "properties" in schema:
        if not isinstance(info, inspect.StructType):
            return [*found, f"{where}: an object with properties in the CRD, {info} in the declaration"]
        fields = {field.encode_name: field for field in info.fields}
        same("properties", sorted(schema["properties"]), sorted(fields))
        same("required", sorted(schema.get("required", [])), sorted(n for n, f in fields.items() if f.required))
        for name in sorted(set(schema["properties"]) & set(fields)):
            prop, field = schema["properties"][name], fields[name]
            if not field.required:
                default = (
                    None if field.default is msgspec.NODEFAULT else without_none(msgspec.to_builtins(field.default))
                )
                same(f"{name}'s default", prop.get("default"), default)
            found += differences(prop, field.type, f"{where}.{name}")
    elif kind == "object" and "additionalProperties" in schema:
        if not isinstance(info, inspect.DictType):
            return [*found, f"{where}: a map in the CRD, {info} in the declaration"]
        found += differences(schema["additionalProperties"], info.value_type, f"{where}[*]")
    elif kind == "object":  # kept as given
        same("type", "object kept as given", "object kept as given" if isinstance(info, inspect.DictType) else info)
    else:
        found.append(f"{where}: a CRD type this walk does not know: {schema}")
    return found


def test_the_declaration_is_the_crds_schema_field_for_field() -> None:
    assert differences(spec_schema(), inspect.type_info(FleetSpecDeclared), "spec") == []


def test_the_walk_notices_a_field_that_differs_on_one_side() -> None:
    schema = spec_schema()
    schema["properties"]["replicas"]["maximum"] = 20_000
    schema["properties"]["sessionTimeout"]["properties"]["policy"]["enum"] = ["Auto", "Fixed", "Manual"]
    schema["properties"]["sessionTimeout"]["default"]["minMs"] = 5000
    schema["properties"]["groupId"]["pattern"] = "^[a-z]+$"
    del schema["properties"]["leaveOnScaleDown"]
    schema["properties"]["template"]["properties"]["spec"]["properties"]["containers"]["items"]["required"] = ["name"]
    found = differences(schema, inspect.type_info(FleetSpecDeclared), "spec")
    assert found == [
        "spec: properties is "
        + repr(sorted(schema["properties"]))
        + " in the CRD, "
        + repr(sorted([*schema["properties"], "leaveOnScaleDown"]))
        + " in the declaration",
        "spec.groupId: pattern is '^[a-z]+$' in the CRD, '^[A-Za-z0-9._-]+$' in the declaration",
        "spec.replicas: maximum is 20000 in the CRD, 10000 in the declaration",
        "spec: sessionTimeout's default is "
        + repr(schema["properties"]["sessionTimeout"]["default"])
        + " in the CRD, "
        + repr(without_none(msgspec.to_builtins(SessionTimeoutSpec())))
        + " in the declaration",
        "spec.sessionTimeout.policy: enum is ['Auto', 'Fixed', 'Manual'] in the CRD, ['Auto', 'Fixed'] in the"
        " declaration",
        "spec.template.spec.containers[]: required is ['name'] in the CRD, ['image', 'name'] in the declaration",
    ]


@pytest.mark.parametrize("policy", ["Auto", "Fixed"])
def test_decoding_an_admitted_spec_fills_in_what_the_api_server_would(policy: str) -> None:
    """The declaration's defaults are the CRD's: an object that never met the API server means the same."""
    given = {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
    if policy == "Fixed":
        given["sessionTimeout"] = {"policy": "Fixed", "fixedMs": 45000}
    declared = msgspec.convert(given, FleetSpecDeclared)
    filled = msgspec.to_builtins(declared)
    assert filled["sessionTimeout"]["minMs"] == 6000 and filled["rebalanceTimeoutMs"] == 300_000
    assert filled["podDisruptionBudget"] == {"enabled": True, "maxUnavailable": 1}
    assert (filled["preRegister"], filled["leaveOnScaleDown"], filled["podManagementPolicy"]) == (
        True,
        True,
        "OrderedReady",
    )
