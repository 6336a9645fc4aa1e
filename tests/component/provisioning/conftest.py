import pytest

from .harness import Cluster


@pytest.fixture
def cluster():
    return Cluster()
