"""Which pods the provisioning controller acts on: :mod:`provisioner.model.pods` holds the rules.

Re-exported here for the provisioning controller's imports.
"""

from provisioner.model.objects import controller_owner_kind as owner_kind
from provisioner.model.pods import MIRROR_ANNOTATION as MIRROR_ANNOTATION
from provisioner.model.pods import is_unschedulable as unschedulable
from provisioner.model.pods import not_provisionable_reason as not_provisionable_reason

__all__ = ["MIRROR_ANNOTATION", "not_provisionable_reason", "owner_kind", "unschedulable"]
