"""The edge idiom shared by every endpoint: one way to parse a body, one way to parse a query
string, one way to render a response — each declared once, as DRF fields, which also document
it (drf-spectacular; ``hindsight.infra.edge.schema``).

Parsing. A request part is a serializer: ``Body`` (a JSON object) or ``Query`` (a query
string); ``parse()`` returns the validated data or raises one ``FieldErrors`` with every problem
in FastAPI's flat shape, each ``loc`` starting at ``"body"`` or ``"query"``. The fields below
accept only the JSON type they name (DRF's stock fields coerce: ``CharField`` turns ``5`` into
``"5"``), and word each kind of mistake from the one table (``hindsight.infra.edge.problems``). A
``Body`` refuses keys it does not declare — the deliberate difference from upstream, which
ignores them (SPEC 0). In a query string the same fields read their value from text (an integer
parsed, a boolean interpreted); a parameter sent empty counts as left out.

Rendering. A response is a ``Rendered`` serializer; ``render(obj, **values)`` builds the dict
from its declared fields in their order: each field's value is ``values[name]`` when given,
else the constant the field declares (``const``), else what its function computes from ``obj``
(``computed``), else ``obj``'s attribute or key named by the field's ``source`` (its name by
default). Date-times render as ISO 8601, UUIDs as strings, nested ``Rendered`` serializers by
their own ``render``. The plan is compiled once per class: a page renders up to 1,000 rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.fields import SkipField, empty

from hindsight.infra.edge.errors import flatten_errors
from hindsight.infra.edge.problems import expected, problem_message, problem_type
from hindsight.infra.errors import FieldError, FieldErrors
from hindsight.infra.tagscope import MAX_TAG_LENGTH
from hindsight.infra.vocabulary import FACT_TYPES, TAGS_MATCH_MODES, iso

F = TypeVar("F", bound=serializers.Field)

# --- input fields ------------------------------------------------------------------------------


def _detail(kind: str, **context: Any) -> ErrorDetail:
    return ErrorDetail(problem_message(kind, **context), code=problem_type(kind))


def checked(check: Callable[[Any], Any], value: Any) -> tuple[Any, Any]:
    """``(check(value), None)``, or ``(None, its problems as DRF error detail)`` — a field's
    own or a domain rule's (``FieldError(s)``, located relative to the value)."""
    try:
        return check(value), None
    except ValidationError as exc:
        return None, exc.detail
    except (FieldError, FieldErrors) as exc:
        return None, located(exc.errors)


def located(errors: Sequence[Mapping[str, Any]]) -> Any:
    """A domain rule's problems (``loc`` relative to the value checked) as DRF error detail,
    nested by ``loc``, so the serializer above prefixes where the value is."""
    root: dict[Any, Any] = {}
    at_root: list[ErrorDetail] = []
    for error in errors:
        detail = ErrorDetail(str(error["msg"]), code=str(error.get("type") or "value_error"))
        loc = list(error.get("loc") or [])
        if not loc:
            at_root.append(detail)
            continue
        node = root
        for part in loc[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):  # a value already has problems of its own here
                child = node[part] = {"non_field_errors": child}
            node = child
        leaf = node.setdefault(loc[-1], [])
        if isinstance(leaf, dict):
            leaf.setdefault("non_field_errors", []).append(detail)
        else:
            leaf.append(detail)
    if not root:
        return at_root
    if at_root:
        root["non_field_errors"] = at_root
    return root


class WireField(serializers.Field):
    """A field that accepts one JSON type and words its mistakes from the problem table.

    ``type_kind`` is the mistake a value of another JSON type is (``string_type``…); a JSON null
    where the field is not nullable is that mistake too, unless ``null_as_absent`` (then null is
    the key left out: its default). DRF's own validators are not run: the field's checks are
    its ``to_internal_value``, so each mistake has exactly one wording.
    """

    type_kind: ClassVar[str] = "string_type"

    def __init__(self, *args: Any, null_as_absent: bool = False, **kwargs: Any) -> None:
        self.null_as_absent = null_as_absent
        super().__init__(*args, **kwargs)

    def fail(self, key: str, **kwargs: Any) -> Any:
        kind = {"required": "missing", "null": self.type_kind}.get(key, key)
        raise ValidationError(_detail(kind, **kwargs))

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data is None and self.null_as_absent:
            data = empty
        return super().validate_empty_values(data)

    def run_validation(self, data: Any = empty) -> Any:
        is_empty, value = self.validate_empty_values(data)
        if is_empty:
            return value
        return self.to_internal_value(value)

    def from_query(self, raw: str) -> Any:
        """The JSON value a query-string value stands for (the text itself, for a string)."""
        return raw

    def to_representation(self, value: Any) -> Any:
        return value


class Text(WireField, serializers.CharField):
    """A string, kept as sent (not trimmed). Blank (only whitespace) is refused unless
    ``allow_blank``; NUL characters always (PostgreSQL text cannot hold one)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("string_type")
        if "\x00" in data:
            self.fail("null_characters")
        if not self.allow_blank and not data.strip():
            self.fail("blank" if data else "string_too_short")
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("string_too_long", limit=self.max_length)
        return data


def _bounded(field: Any, value: Any) -> Any:
    if field.min_value is not None and value < field.min_value:
        field.fail("greater_than_equal", limit=field.min_value)
    if field.max_value is not None and value > field.max_value:
        field.fail("less_than_equal", limit=field.max_value)
    return value


class Integer(WireField, serializers.IntegerField):
    type_kind = "int_type"

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("int_type")
        return _bounded(self, data)

    def from_query(self, raw: str) -> Any:
        try:
            return int(raw.strip())
        except ValueError:
            self.fail("int_parsing")


class Number(WireField, serializers.FloatField):
    type_kind = "float_type"

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("float_type")
        return _bounded(self, float(data))


_TRUE = frozenset(("true", "1", "yes", "on", "t", "y"))
_FALSE = frozenset(("false", "0", "no", "off", "f", "n"))


class Boolean(WireField, serializers.BooleanField):
    type_kind = "bool_type"

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("bool_type")
        return data

    def from_query(self, raw: str) -> Any:
        word = raw.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        self.fail("bool_parsing")


class Choice(WireField, serializers.ChoiceField):
    """One of the declared strings; anything else (another type included) is ``literal_error``
    listing them."""

    type_kind = "literal_error"

    def fail(self, key: str, **kwargs: Any) -> Any:
        if key in ("null", "literal_error", "invalid_choice"):
            raise ValidationError(_detail("literal_error", expected=expected(self.choices)))
        return super().fail(key, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str) or data not in self.choices:
            self.fail("literal_error")
        return data


class DateTime(WireField, serializers.DateTimeField):
    """An ISO 8601 date-time string; naive values are taken as UTC."""

    def to_internal_value(self, data: Any) -> datetime:
        if not isinstance(data, str):
            self.fail("string_type")
        try:
            return parse_datetime_value(data)
        except ValueError:
            self.fail("datetime_parsing")
            raise  # unreachable: fail() raises


def parse_datetime_value(value: str) -> datetime:
    """ISO 8601 → aware datetime in UTC (naive values are taken as UTC)."""
    text = value.strip()
    if "\x00" in text:
        raise ValueError("NUL")
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        # Stored and read back in UTC: a value with no UTC form (year 0 or 10000) is bad input.
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("date-time out of range") from exc


class UUID(WireField, serializers.UUIDField):
    def to_internal_value(self, data: Any) -> uuid.UUID:
        if not isinstance(data, str):
            self.fail("string_type")
        try:
            return uuid.UUID(data)
        except ValueError:
            self.fail("uuid_parsing")
            raise  # unreachable


class List(WireField, serializers.ListField):
    """A JSON list; each item checked by ``child``, its problems located by index. In a query
    string: the parameter repeated."""

    type_kind = "list_type"

    def to_internal_value(self, data: Any) -> list[Any]:
        if not isinstance(data, list):
            self.fail("list_type")
        if self.min_length is not None and len(data) < self.min_length:
            self.fail("too_short", limit=self.min_length)
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("too_long", limit=self.max_length)
        out: list[Any] = []
        errors: dict[int, Any] = {}
        for index, item in enumerate(data):
            try:
                value, problems = checked(self.child.run_validation, item)
            except SkipField:
                continue
            if problems is not None:
                errors[index] = problems
            else:
                out.append(value)
        if errors:
            raise ValidationError(errors)  # type: ignore[arg-type]
        return out


class Object(WireField, serializers.DictField):
    """A JSON object with any keys; each value checked by ``child``, located by key."""

    type_kind = "dict_type"

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            self.fail("dict_type")
        out: dict[str, Any] = {}
        errors: dict[str, Any] = {}
        for key, value in data.items():
            if "\x00" in key:
                errors[key] = [_detail("null_characters")]
                continue
            try:
                out[key] = self.child.run_validation(value)
            except ValidationError as exc:
                errors[key] = exc.detail
        if errors:
            raise ValidationError(errors)
        return out


def nul_errors(data: Any, loc: list[str | int]) -> list[dict[str, object]]:
    """Every place in ``data`` (keys and string values, at any depth) holding a NUL character:
    PostgreSQL text and jsonb cannot store one. Iterative, so nesting depth cannot overflow."""
    message, type_ = problem_message("null_characters"), problem_type("null_characters")
    errors: list[dict[str, object]] = []
    stack: list[tuple[Any, list[str | int]]] = [(data, loc)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                errors.append({"loc": where, "msg": message, "type": type_})
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    errors.append({"loc": [*where, key], "msg": message, "type": type_})
                else:
                    stack.append((item, [*where, key]))
        elif isinstance(value, list):
            stack.extend((item, [*where, index]) for index, item in enumerate(value))
    return errors


class AnyJSON(WireField, serializers.JSONField):
    """Any JSON value, checked by the domain rule it is handed to (a tag-group tree, a config
    value), but never a NUL character (a key or a string, at any depth)."""

    def to_internal_value(self, data: Any) -> Any:
        problems = nul_errors(data, [])
        if problems:
            raise ValidationError(located(problems))
        return data


class JSONObject(AnyJSON):
    """A JSON object whose contents a domain rule checks (a JSON Schema)."""

    type_kind = "dict_type"

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            self.fail("dict_type")
        return super().to_internal_value(data)


# --- the generic wire fields: declared here once, used by every endpoint that has them ----------

#: PostgreSQL's OFFSET is a bigint; no page is further than a 32-bit offset anyway.
OFFSET_MAX = 2**31 - 1


def limit_field(default: int, maximum: int, *, minimum: int = 1) -> Integer:
    return Integer(required=False, default=default, min_value=minimum, max_value=maximum,
                   help_text=f"Page size ({minimum}..{maximum})")


def offset_field() -> Integer:
    return Integer(required=False, default=0, min_value=0, max_value=OFFSET_MAX,
                   help_text="Items to skip")


def page_fields() -> tuple[serializers.IntegerField, ...]:
    """A page's ``total, limit, offset`` in a list response (``total, limit, offset =
    page_fields()`` where the shape puts them)."""
    return (serializers.IntegerField(help_text="Items matching, over every page"),
            serializers.IntegerField(), serializers.IntegerField())


def tags_field(**kwargs: Any) -> List:
    """Tags: strings, each short enough for one entry of the GIN index on ``tags``."""
    kwargs.setdefault("required", False)
    return List(child=Text(allow_blank=True, max_length=MAX_TAG_LENGTH), **kwargs)


def tags_match_field(choices: Sequence[str] = TAGS_MATCH_MODES, **kwargs: Any) -> Choice:
    kwargs.setdefault("required", False)
    kwargs.setdefault("help_text", "How to match tags")
    return Choice(choices=tuple(choices), **kwargs)


def fact_types_field(choices: Sequence[str] = FACT_TYPES, **kwargs: Any) -> List:
    kwargs.setdefault("required", False)
    return List(child=Choice(choices=tuple(choices)), **kwargs)


def timestamp_field(**kwargs: Any) -> DateTime:
    kwargs.setdefault("required", False)
    return DateTime(**kwargs)


# --- request parts -------------------------------------------------------------------------------


def _parse_failed(errors: Any, root: str) -> FieldErrors:
    return FieldErrors(flatten_errors(errors, [root]))


# (The base classes carry comments, not docstrings: drf-spectacular would take a base's
# docstring as the description of every request component below it.)


# A JSON object: every problem of the request in one 422 — an unknown key, then each declared
# field's, in declaration order, then the cross-field rules of ``validate``. A value that is not
# an object is one ``dict_type`` problem. Nested in another body it is checked the same way, its
# problems located below the field that holds it. ``when_absent``: what no body at all (or JSON
# ``null``) stands for at the top; ``None`` refuses it as not an object.
# ``hindsight.infra.edge.schema.ClosedObjectExtension`` documents every subclass as a closed object.
class Body(serializers.Serializer):
    location: ClassVar[str] = "body"
    when_absent: ClassVar[Mapping[str, Any] | None] = None
    #: The OpenAPI component name, where it must be upstream's (the class's own only).
    component_name: ClassVar[str | None] = None

    @classmethod
    def parse(cls, data: Any, **context: Any) -> Any:
        """The validated data, or every problem as one ``FieldErrors`` located at the body."""
        if data is None or data is empty:
            if cls.when_absent is None:
                raise _parse_failed([_detail("dict_type")], cls.location)
            data = cls.when_absent
        try:
            return cls(context=context).run_validation(data)
        except ValidationError as exc:
            raise _parse_failed(exc.detail, cls.location) from None

    def fail(self, key: str, **kwargs: Any) -> Any:
        kind = {"required": "missing", "null": "dict_type", "invalid": "dict_type"}.get(key, key)
        raise ValidationError(_detail(kind, **kwargs))

    def run_validation(self, data: Any = empty) -> Any:
        is_empty, value = self.validate_empty_values(data)
        if is_empty:
            return value
        value = self.to_internal_value(value)
        try:
            return self.validate(value)
        except (FieldError, FieldErrors) as exc:
            raise ValidationError(located(exc.errors)) from None

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValidationError([_detail("dict_type")])
        fields = self.fields
        errors: dict[str, Any] = {key: [_detail("extra_forbidden")] for key in data
                                  if key not in fields}
        out: dict[str, Any] = {}
        for name, field in fields.items():
            if field.read_only:
                continue
            validate_method = getattr(self, "validate_" + name, None)
            try:
                value, problems = checked(field.run_validation, field.get_value(data))
                if problems is None and validate_method is not None:
                    value, problems = checked(validate_method, value)
            except SkipField:
                continue
            if problems is not None:
                errors[name] = problems
            else:
                self.set_value(out, field.source_attrs, value)
        if errors:
            raise ValidationError(errors)
        return out


# A query string: each declared field read from its parameter (the last value sent; a list
# field, the parameter repeated), as text the field interprets (``from_query``). A parameter
# sent empty is left out. Parameters not declared are ignored, as upstream does. The same
# fields document the parameters (``hindsight.infra.edge.schema.query_parameters``).
class Query(serializers.Serializer):
    location: ClassVar[str] = "query"

    @classmethod
    def parse(cls, params: Any) -> dict[str, Any]:
        """Every declared parameter (``None`` when left out without a default), or every
        problem as one ``FieldErrors`` at ``["query", name]``."""
        out: dict[str, Any] = {}
        errors: dict[str, Any] = {}
        for name, field in cls().fields.items():
            try:
                value, problems = checked(field.run_validation, _query_value(field, params, name))
            except SkipField:
                value, problems = None, None  # left out, and no default
            except ValidationError as exc:  # the text did not read as the field's type
                value, problems = None, exc.detail
            if problems is not None:
                errors[name] = problems
            else:
                out[name] = value
        if errors:
            raise _parse_failed(errors, cls.location)
        return out


def _query_value(field: serializers.Field, params: Any, name: str) -> Any:
    if isinstance(field, List):
        values = [v for v in params.getlist(name) if v != ""]
        if not values:
            return empty
        return [field.child.from_query(v) for v in values]  # type: ignore[attr-defined]
    raw = params.get(name)
    if raw is None or raw == "":
        return empty
    return field.from_query(raw)  # type: ignore[attr-defined]


def body_of(request: Any) -> Any:
    """A request's JSON body, or None when it sent none (DRF parses an empty body to ``{}``
    of a form type, which is not a body the client sent)."""
    data = request.data
    if hasattr(data, "dict") and not data:
        return None
    return data


# --- responses -----------------------------------------------------------------------------------


def const(field: F, value: Any) -> F:
    """A response field whose value is always ``value`` (a field this service does not fill)."""
    field.wire_const = value  # type: ignore[attr-defined]
    return field


def computed(field: F, fn: Callable[[Any], Any]) -> F:
    """A response field whose value ``fn`` computes from the object rendered."""
    field.wire_from = fn  # type: ignore[attr-defined]
    return field


_MISSING = object()
#: What a ``computed`` field returns to leave its key out of this object (a field the
#: declaration marks ``required=False``).
OMIT: Any = object()


def _getter(path: Sequence[str]) -> Callable[[Any], Any]:
    def get(obj: Any) -> Any:
        for part in path:
            obj = (obj.get(part, _MISSING) if isinstance(obj, Mapping)
                   else getattr(obj, part, _MISSING))
            if obj is _MISSING:
                raise KeyError(".".join(path))
            if obj is None:
                return None
        return obj

    if not path:
        return lambda obj: obj
    return get


def _constant(value: Any) -> Callable[[Any], Any]:
    return lambda obj: value


def _iso(value: Any) -> Any:
    return iso(value) if isinstance(value, datetime) else value


def _str_or_none(value: Any) -> Any:
    return None if value is None else str(value)


def _converter(field: serializers.Field | None) -> Callable[[Any], Any] | None:
    """How a field's value becomes JSON (None: as it is)."""
    if field is None:
        return None
    if isinstance(field, serializers.ListSerializer):
        child = _converter(field.child)
        if child is None:
            return lambda v: None if v is None else list(v)
        return lambda v: None if v is None else [child(x) for x in v]
    if isinstance(field, Rendered):
        render = type(field).render
        return lambda v: None if v is None else render(v)
    if isinstance(field, serializers.DateTimeField):
        return _iso
    if isinstance(field, serializers.UUIDField):
        return _str_or_none
    if isinstance(field, serializers.ListField):
        item = _converter(field.child)
        if item is None:
            return lambda v: None if v is None else list(v)
        return lambda v: None if v is None else [item(x) for x in v]
    return None


# A response shape: the declared fields are the document and the renderer (module docstring).
class Rendered(serializers.Serializer):
    _plan: ClassVar[tuple[tuple[str, Any, Callable[[Any], Any] | None], ...]]
    _name_set: ClassVar[frozenset[str]]

    @classmethod
    def plan(cls) -> tuple[tuple[str, Any, Callable[[Any], Any] | None], ...]:
        if "_plan" not in cls.__dict__:
            steps = []
            # (DRF copies the declared fields into each instance without their attributes:
            # the constant or function is read off the declaration.)
            declared = cls._declared_fields
            for name, field in cls().fields.items():
                origin = declared.get(name, field)
                if hasattr(origin, "wire_const"):
                    source: Any = _constant(origin.wire_const)
                elif hasattr(origin, "wire_from"):
                    source = origin.wire_from
                else:
                    source = _getter([] if field.source == "*" else field.source_attrs)
                steps.append((name, source, _converter(field)))
            cls._plan = tuple(steps)
        return cls._plan

    @classmethod
    def plan_names(cls) -> list[str]:
        return [name for name, _, _ in cls.plan()]

    @classmethod
    def _names(cls) -> frozenset[str]:
        if "_name_set" not in cls.__dict__:
            cls._name_set = frozenset(cls.plan_names())
        return cls._name_set

    @classmethod
    def render(cls, obj: Any = None, /, **values: Any) -> dict[str, Any]:
        """The declared fields of ``obj``, in their order; ``values`` give fields by name, as
        they are to be sent (already JSON: a nested part rendered, a time a string)."""
        plan = cls.plan()
        if values and not values.keys() <= cls._names():
            raise TypeError(f"{cls.__name__} has no field {sorted(values.keys() - cls._names())}")
        out: dict[str, Any] = {}
        for name, source, convert in plan:
            if name in values:
                if values[name] is not OMIT:
                    out[name] = values[name]
                continue
            value = source(obj)
            if value is OMIT:
                continue
            out[name] = convert(value) if convert is not None else value
        return out

    @classmethod
    def render_many(cls, objs: Sequence[Any]) -> list[dict[str, Any]]:
        render = cls.render
        return [render(obj) for obj in objs]
