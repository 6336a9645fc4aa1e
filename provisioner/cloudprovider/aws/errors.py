"""botocore errors translated into the provider's typed errors, at the boundary and nowhere else.

Why: controllers decide on *kinds* of failure (no capacity: try other offerings; gone: done;
misconfigured: report and stop; anything else: back off and retry), never on AWS error codes.
The codes are EC2's (and moto's ``moto/ec2/exceptions.py``); the capacity set is the one
Karpenter v1 treats as "this offering cannot be fulfilled now" (``pkg/errors``).
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from provisioner.cloudprovider.types import (
    CloudProviderError,
    ConfigurationError,
    LaunchError,
    NotFoundError,
)

#: Fleet/instance error codes meaning "this offering has no capacity for us right now".
UNFULFILLABLE_CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientFreeAddressesInSubnet",
        "MaxSpotInstanceCountExceeded",
        "SpotMaxPriceTooLow",
        "UnfulfillableCapacity",
        "Unsupported",
        "VcpuLimitExceeded",
        "ReservationCapacityExceeded",
    }
)
#: Codes that mean "slow down" (retried with backoff by the caller).
THROTTLING_CODES = frozenset(
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException"}
)
NOT_FOUND_CODES = frozenset(
    {
        "InvalidInstanceID.NotFound",
        "InvalidInstanceID.Malformed",
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "ParameterNotFound",
        "NoSuchEntity",
    }
)
CONFIGURATION_CODES = frozenset(
    {
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "InvalidSubnetID.NotFound",
        "InvalidGroup.NotFound",
        "InvalidAMIID.NotFound",
        "InvalidAMIID.Malformed",
        "UnauthorizedOperation",
        "AccessDenied",
        "AccessDeniedException",
        "InvalidIamInstanceProfile.NotFound",
    }
)


def error_code(error: BaseException) -> str:
    """The AWS error code of a botocore ClientError, ``""`` otherwise."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def is_throttling(error: BaseException) -> bool:
    return error_code(error) in THROTTLING_CODES


def translate(error: ClientError | BotoCoreError, action: str) -> CloudProviderError:
    """The typed error for ``error`` raised while doing ``action`` (callers ``raise ... from error``)."""
    code = error_code(error)
    message = f"{action}: {error}"
    if code in NOT_FOUND_CODES:
        return NotFoundError(message)
    if code in CONFIGURATION_CODES:
        return ConfigurationError(message)
    return LaunchError(message)
