"""The edge idiom shared by every app: strict DRF input serializers, located errors.

DRF's stock fields coerce (``CharField`` turns ``5`` into ``"5"``, ``BooleanField`` takes
``"yes"``); a wire-compatible API that promises "wrong types are a 422 naming the field" cannot,
so the fields here accept only the JSON type they name. ``StrictSerializer`` rejects keys it
does not declare — the deliberate difference from upstream, which ignores them (SPEC 0).

Where an input comes from is the serializer's own: ``location`` is ``"body"`` or ``"query"``
(``QuerySerializer``), and ``parse()`` raises the problems as one ``FieldErrors`` whose every
``loc`` starts there. ``CollectingSerializer`` reports every problem of a request in one 422, in
FastAPI's flat shape, keeping the ``loc`` of a domain rule that raises ``FieldErrors`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.fields import SkipField, empty

from hindsight.api.errors import flatten_errors
from hindsight.errors import FieldErrors

NUL_MSG = "Null characters are not allowed."


# (The base classes carry comments, not docstrings: drf-spectacular would take a base's
# docstring as the description of every request component below it.)


# A request part (``location``: the body or the query string) parsed by a serializer.
class InputSerializer(serializers.Serializer):
    location: ClassVar[str] = "body"

    @classmethod
    def parse(cls, data: Any, **context: Any) -> Any:
        """The validated data, or every problem as one ``FieldErrors`` located at ``location``."""
        serializer = cls(data=data, context=context)
        if not serializer.is_valid():
            raise FieldErrors(flatten_errors(serializer.errors, [cls.location]))
        return serializer.validated_data


# Query parameters: problems are located at ``["query", name]``. The same fields document the
# parameters (``hindsight.api.schema.query_parameters``).
class QuerySerializer(InputSerializer):
    location: ClassVar[str] = "query"


# Refuses keys it does not declare; ``hindsight.api.schema.ClosedObjectExtension`` documents
# every subclass as a closed object (``additionalProperties: false``).
class ClosedSerializer(serializers.Serializer):
    pass


# Unknown keys are one 422 naming them, before any field is checked (the banks' requests). An
# app may word the problem its own way (``unknown_field_message``, ``unknown_field_code``) and
# list the keys in its order (``unknown_fields``).
class StrictSerializer(ClosedSerializer):
    unknown_field_code: ClassVar[str] = "extra_forbidden"

    def unknown_fields(self, data: Mapping[str, Any]) -> list[str]:
        """The keys sent that the serializer does not declare, in the order sent."""
        return [key for key in data if key not in self.fields]

    def unknown_field_message(self, key: str) -> str:
        return (f"unknown field {key!r}: this server does not accept it "
                f"(allowed: {', '.join(sorted(self.fields))})")

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = self.unknown_fields(data)
            if unknown:
                raise ValidationError(
                    {
                        key: [ErrorDetail(self.unknown_field_message(key),
                                          code=self.unknown_field_code)]
                        for key in unknown
                    }
                )
        return super().to_internal_value(data)


def nul_errors(data: Any, loc: list[str | int]) -> list[dict[str, object]]:
    """Every place in ``data`` (keys and string values, at any depth) holding a NUL character:
    PostgreSQL text and jsonb cannot store one. Iterative, so nesting depth cannot overflow."""
    errors: list[dict[str, object]] = []
    stack: list[tuple[Any, list[str | int]]] = [(data, loc)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                errors.append({"loc": where, "msg": NUL_MSG, "type": "null_characters_not_allowed"})
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    errors.append({"loc": [*where, key], "msg": NUL_MSG,
                                   "type": "null_characters_not_allowed"})
                else:
                    stack.append((item, [*where, key]))
        elif isinstance(value, list):
            stack.extend((item, [*where, index]) for index, item in enumerate(value))
    return errors


# A strict object that reports every problem at once, in FastAPI's flat shape.
#
# Before any field: a value that is not an object is one ``dict_type`` problem, and a NUL
# character anywhere (key or string, any depth) one problem per place. Then, in one 422: the
# unknown keys in the order sent, then each field's problems in ``check_order`` (declaration
# order by default). A field (or ``validate_<name>``) may raise ``FieldErrors`` with its own
# ``loc``s (a domain rule that locates its problems itself); they are kept as they are.
class CollectingSerializer(InputSerializer, ClosedSerializer):
    not_an_object_message: ClassVar[str] = "the body must be a JSON object"
    check_order: ClassVar[tuple[str, ...] | None] = None
    #: What no input at all (no body, JSON ``null``) stands for; ``None`` refuses it as not an
    #: object.
    when_absent: ClassVar[Mapping[str, Any] | None] = None

    def run_validation(self, data: Any = empty) -> Any:
        if data is empty or data is None:
            data = self.when_absent
        return self.validate(self.to_internal_value(data))

    def unknown_field_message(self, key: str) -> str:
        return f"unknown field {key!r}; allowed: {', '.join(self.fields)}"

    def _located(self) -> list[str | int]:
        return [self.location] if self.parent is None else [self.location, str(self.field_name)]

    def to_internal_value(self, data: Any) -> Any:
        here = self._located()
        if not isinstance(data, Mapping):
            raise FieldErrors([{"loc": here, "msg": self.not_an_object_message,
                                "type": "dict_type"}])
        nul = nul_errors(data, here)
        if nul:
            raise FieldErrors(nul)
        fields = self.fields
        errors: list[dict[str, object]] = [
            {"loc": [*here, key], "msg": self.unknown_field_message(key), "type": "extra_forbidden"}
            for key in data
            if key not in fields
        ]
        ret: dict[str, Any] = {}
        for name in self.check_order or tuple(fields):
            field = fields[name]
            validate_method = getattr(self, "validate_" + name, None)
            try:
                value = field.run_validation(field.get_value(data))
                if validate_method is not None:
                    value = validate_method(value)
            except ValidationError as exc:
                errors.extend(flatten_errors(exc.detail, [*here, name]))
            except FieldErrors as exc:
                errors.extend(exc.errors)
            except SkipField:
                pass
            else:
                self.set_value(ret, field.source_attrs, value)
        if errors:
            raise FieldErrors(errors)
        return ret


class WireTypedField(serializers.Field):
    """A field whose problems carry FastAPI's error types: ``fail(key)`` raises with the code
    ``wire_types[key]`` (DRF's ``required``/``null`` become ``missing``), message
    ``error_messages[key]``."""

    wire_types: ClassVar[dict[str, str]] = {"required": "missing", "null": "missing"}

    def fail(self, key: str, **kwargs: Any) -> Any:
        message = self.error_messages[key].format(**kwargs)
        raise ValidationError(message, code=self.wire_types.get(key, key))

    def run_validation(self, data: Any = empty) -> Any:
        # The field's own rules only (no CharField blank/trim handling, which would run first).
        return serializers.Field.run_validation(self, data)


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "must be a string"}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    default_error_messages = {"invalid": "must be true or false"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "must be an integer"}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    default_error_messages = {"invalid": "must be a number"}

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictListField(serializers.ListField):
    default_error_messages = {"not_a_list": "must be a list"}


class StrictDictField(serializers.DictField):
    default_error_messages = {"not_a_dict": "must be an object"}


class AnyJSONField(serializers.Field):
    """A value validated later by the service (tag_groups: ``hindsight.tagscope`` owns it)."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value
