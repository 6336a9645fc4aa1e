"""The walkthrough's manifests (``01-provisioner.yaml`` ... ``04-provisioner-with-expiry.yaml``) for tests.

Read from the copy shipped as package data in ``localcluster/walkthrough/`` (a unit test checks
it byte for byte against ``../shared/walkthrough/`` when that is beside the clone), so tests do
not depend on a directory outside the repository.
"""

from __future__ import annotations

from typing import Any

from localcluster.walkthrough import embedded_walkthrough, load_manifest


def walkthrough(name: str) -> dict[str, Any]:
    """A fresh dict of the manifest ``name``; FileNotFoundError for a name the walkthrough lacks."""
    return load_manifest(name, embedded_walkthrough())
