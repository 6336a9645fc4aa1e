"""Every YAML read of Groupless goes through here: libyaml's C loader when present, else PyYAML's own.

Why: on ``groupless plan``'s 5,000-pod benchmark (a 1.9 MB manifest, ``benchmarks/README.md``)
PyYAML's pure-Python loader takes about 8x as long as ``yaml.CSafeLoader`` (the same safe
constructor and resolver over libyaml's C parser) and most of the command's time. The C loader
exists only when PyYAML was built against libyaml (the manylinux wheels are), so the pure
``yaml.SafeLoader`` stays the fallback and the choice is made at each call
(:func:`safe_loader`), never cached at import.

Both loaders build the same Python objects from the same text (safe tags only: mappings,
sequences, strings, ints, floats, booleans, null, timestamps); their error messages differ in
wording (the C loader shows no source snippet) but both raise :class:`yaml.YAMLError`
subclasses with the line and column.

:func:`load_all` builds each document in one pass over the loader's event stream: PyYAML's
own path composes a node tree (calling the resolver for every scalar) and then walks it again
in Python to construct the objects, which on the 5,000-pod manifest cost as much as parsing.
The one pass uses the loader's own resolver and its safe constructors for every scalar that is
not a string, so it builds exactly what ``yaml.safe_load_all`` builds (anchors and aliases
share one object, duplicate keys keep the last value); for what it leaves to PyYAML (merge keys
``<<``, explicit tags other than the core ones, collections as keys, duplicate or undefined
anchors: PyYAML's own answer or error) it hands the text to ``yaml.load_all`` from the
document it stopped at (and all of it, to a loader with path resolvers, which no safe loader has).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode

if TYPE_CHECKING:  # yaml.CSafeLoader does not exist without libyaml: never evaluated at run time
    from typing import TypeAlias

    #: The loader classes :func:`safe_loader` may return.
    SafeLoaderClass: TypeAlias = type[yaml.SafeLoader] | type[yaml.CSafeLoader]


def safe_loader() -> SafeLoaderClass:
    """``yaml.CSafeLoader`` when this PyYAML has libyaml, else ``yaml.SafeLoader``."""
    fast: SafeLoaderClass | None = getattr(yaml, "CSafeLoader", None)
    return fast if fast is not None else yaml.SafeLoader


def load(text: str | bytes) -> Any:
    """The one YAML document of ``text`` (None when empty), as ``yaml.safe_load`` would build it.

    Raises yaml.YAMLError when the text is not YAML or holds more than one document.
    """
    return yaml.load(text, Loader=safe_loader())


def load_all(text: str | bytes) -> Iterator[Any]:
    """Every document of a multi-document ``text`` (``---``-separated), as ``yaml.safe_load_all``.

    A generator: yaml.YAMLError is raised while iterating, at the first bad document. Built in
    one pass over the events (module docstring), PyYAML's own path past what that leaves to it.
    """
    loader_class = safe_loader()
    if loader_class.yaml_path_resolvers:  # resolved by position in the tree: PyYAML's composer tracks it
        yield from yaml.load_all(text, Loader=loader_class)
        return
    loader = loader_class(text)
    done = 0
    # Without path resolvers a scalar's tag is a function of its text and style alone, and
    # manifests repeat most of their scalars: each is resolved once per stream.
    tags: dict[tuple[str, tuple[bool, bool]], str] = {}
    try:
        loader.get_event()  # StreamStartEvent
        while not loader.check_event(StreamEndEvent):
            loader.get_event()  # DocumentStartEvent
            document = _document(loader, tags)
            loader.get_event()  # DocumentEndEvent
            yield document
            done += 1
    except _LeftToPyYAML:
        loader.dispose()
        for index, document in enumerate(yaml.load_all(text, Loader=loader_class)):
            if index >= done:
                yield document
    finally:
        loader.dispose()


class _LeftToPyYAML(Exception):
    """The document uses what :func:`_document` leaves to PyYAML's own path."""


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
#: Scalar tags the safe constructor has no plain constructor for (merge keys, ``=`` value keys).
_LEFT_TO_PYYAML = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})
#: Marks a mapping frame that waits for its next key.
_NO_KEY: Any = object()


def _scalar(loader: Any, constructors: dict[str, Callable[..., Any]], tag: str, event: Any) -> Any:
    """A scalar other than a string, by the loader's safe constructor for ``tag``."""
    construct = constructors.get(tag)
    if construct is None or tag in _LEFT_TO_PYYAML:
        raise _LeftToPyYAML(tag)
    return construct(loader, ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style))


def _collection(mapping: bool, tag: str | None) -> dict[Any, Any] | list[Any]:
    """The empty dict or list a mapping or sequence starts; _LeftToPyYAML for a tag such as ``!!set``."""
    if tag not in (None, "!", _MAP if mapping else _SEQ):
        raise _LeftToPyYAML(tag)
    return {} if mapping else []


def _anchor(anchors: dict[str, Any], anchor: str, value: Any) -> None:
    if anchor in anchors:
        raise _LeftToPyYAML(anchor)  # a duplicate anchor: PyYAML's error
    anchors[anchor] = value


def _document(loader: Any, tags: dict[tuple[str, tuple[bool, bool]], str]) -> Any:
    """The object of the document whose events come next (up to, not including, its end).

    ``tags``: the tags already resolved in this stream, by scalar text and style (filled here).

    Raises _LeftToPyYAML for merge keys, other tags than the core ones, collections as keys and
    duplicate or undefined anchors; yaml.YAMLError from the parser.
    """
    resolve: Callable[..., str] = loader.resolve
    constructors: dict[str, Callable[..., Any]] = loader.yaml_constructors
    anchors: dict[str, Any] = {}
    stack: list[list[Any]] = []  # [container, its pending key (mappings)]
    while True:
        event = loader.get_event()
        kind = event.__class__
        value: Any
        if kind is ScalarEvent:
            tag = event.tag
            if tag is None or tag == "!":
                tag_key = (event.value, event.implicit)
                tag = tags.get(tag_key)
                if tag is None:
                    tag = tags[tag_key] = resolve(ScalarNode, event.value, event.implicit)
            value = event.value if tag == _STR else _scalar(loader, constructors, tag, event)
            if event.anchor is not None:
                _anchor(anchors, event.anchor, value)
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            value = _collection(kind is MappingStartEvent, event.tag)
            if event.anchor is not None:
                _anchor(anchors, event.anchor, value)
            stack.append([value, _NO_KEY])
            continue
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            value = stack.pop()[0]
        elif kind is AliasEvent and event.anchor in anchors:
            value = anchors[event.anchor]
        else:
            raise _LeftToPyYAML(kind.__name__)  # an alias to no anchor: PyYAML's error
        if not stack:
            return value
        frame = stack[-1]
        container = frame[0]
        if container.__class__ is list:
            container.append(value)
        elif frame[1] is _NO_KEY:
            if value.__class__ is dict or value.__class__ is list:
                raise _LeftToPyYAML("a collection as a mapping key")
            frame[1] = value
        else:
            container[frame[1]] = value
            frame[1] = _NO_KEY


__all__ = ["load", "load_all", "safe_loader"]
