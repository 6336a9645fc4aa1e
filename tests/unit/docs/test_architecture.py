"""ARCHITECTURE.md names only modules and folders that exist, and names every product package."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TEXT = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
#: backticked repository paths: a file with an extension, or a folder ending in "/"
PATH = re.compile(r"`((?:provisioner|extender|webhook|certs|localcluster|deploy|benchmarks|tests)/[\w./-]*)`")


def named_paths() -> list[str]:
    return sorted(set(PATH.findall(TEXT)))


def test_every_path_it_names_exists() -> None:
    paths = named_paths()
    assert len(paths) > 40
    missing = [p for p in paths if not (REPO / p).exists()]
    assert missing == []


def test_every_package_of_the_product_is_placed() -> None:
    packages = sorted(
        str(p.parent.relative_to(REPO)) + "/"
        for p in (REPO / "provisioner").glob("*/__init__.py")
    )
    assert packages  # provisioner/api/, provisioner/model/, ...
    assert [p for p in packages if f"`{p}`" not in TEXT] == []
