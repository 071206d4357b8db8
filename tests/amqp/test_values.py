"""The generated value classes (values.py: events, connection facts, a dissect's options and
summary; values_1_0.py: AMQP 1.0's events) behave as the dataclasses of their fields: the same
repr, equality, hashing, immutability, pickling and replace.  That the modules are what
tools/gen_classes.py writes is tests/amqp/test_spec_generated.py's check."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import pickle

import pytest

from amqpcap import values, values_1_0

CLASSES = [
    v
    for module in (values, values_1_0)
    for v in vars(module).values()
    if isinstance(v, type) and "__match_args__" in vars(v)
]


def test_the_dissect_classes_are_all_generated():
    assert {c.__name__ for c in CLASSES} == {
        "ProtocolHeader",
        "Frame",
        "Method",
        "Content",
        "Heartbeat",
        "Anomaly",
        "ConnectionFacts",
        "Options",
        "Summary",
        "Performative",
        "Delivery",
    }


def frozen(cls) -> bool:
    return cls.__setattr__ is not object.__setattr__


@functools.cache
def twin(cls):
    """The slotted dataclass of ``cls``'s fields and defaults (a default made per instance
    becomes a default_factory of the type the class makes)."""
    params = inspect.signature(cls).parameters
    made = cls(**{n: None for n, p in params.items() if p.default is inspect.Parameter.empty})
    fields = []
    for name in cls.__match_args__:
        default = params[name].default
        if default is inspect.Parameter.empty:
            fields.append((name, object))
        elif type(default) is object:  # the per-instance marker
            fields.append((name, object, dataclasses.field(default_factory=type(getattr(made, name)))))
        else:
            fields.append((name, object, dataclasses.field(default=default)))
    return dataclasses.make_dataclass(cls.__name__, fields, slots=True, frozen=frozen(cls))


def pair(cls, **changes):
    """An instance of ``cls`` and of its twin from the same arguments (required fields numbered)."""
    params = inspect.signature(cls).parameters
    kw = {n: i for i, (n, p) in enumerate(params.items()) if p.default is inspect.Parameter.empty}
    kw.update(changes)
    return cls(**kw), twin(cls)(**kw)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_value_class_has_its_dataclass_twins_repr_fields_and_defaults(cls):
    mine, theirs = pair(cls)
    assert repr(mine) == repr(theirs)
    assert cls.__match_args__ == type(theirs).__match_args__
    assert set(cls.__slots__) == set(type(theirs).__slots__)
    assert not hasattr(mine, "__dict__")


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_value_class_is_equal_by_value_and_hashable_only_when_frozen(cls):
    (a, ta), (b, tb) = pair(cls), pair(cls)
    last = cls.__match_args__[-1]
    (c, tc) = pair(cls, **{last: "other"})
    assert (a == b, a == c, a.__eq__(ta)) == (True, False, NotImplemented)
    assert (ta == tb, ta == tc) == (True, False)
    if frozen(cls):
        assert hash(a) == hash(ta) == hash(b)
    else:
        assert cls.__hash__ is None and type(ta).__hash__ is None


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_value_class_refuses_assignment_exactly_when_its_twin_does(cls):
    (a, ta) = pair(cls)
    name = cls.__match_args__[0]
    for obj in (a, ta):
        try:
            setattr(obj, name, "x")
            refused = False
        except AttributeError:
            refused = True
        assert refused == frozen(cls)
    assert getattr(a, name) == getattr(ta, name)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_value_class_pickles_and_replaces_as_its_twin(cls):
    (a, ta) = pair(cls)
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        back = pickle.loads(pickle.dumps(a, protocol))
        assert type(back) is cls and back == a
    name = cls.__match_args__[-1]
    assert repr(values.replace(a, **{name: 7})) == repr(dataclasses.replace(ta, **{name: 7}))
    with pytest.raises(TypeError):
        values.replace(a, no_such_field=1)


def test_a_default_made_per_instance_is_not_shared():
    a, b = values.Summary(), values.Summary()
    a.rows["methods"] = 1
    a.errors.append("e")
    assert (b.rows, b.errors) == ({}, [])
