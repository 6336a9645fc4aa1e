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
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import yaml

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

    A generator: yaml.YAMLError is raised while iterating, at the first bad document.
    """
    return yaml.load_all(text, Loader=safe_loader())


__all__ = ["load", "load_all", "safe_loader"]
