"""Row types of the generated protocol tables."""

from typing import NamedTuple


class MethodSpec(NamedTuple):
    name: str  # "class.method", spec spelling with hyphens
    synchronous: bool
    content: bool
    responses: tuple  # full "class.method" names of the possible responses
    fields: tuple  # ((field name, primitive type), ...) in wire order
