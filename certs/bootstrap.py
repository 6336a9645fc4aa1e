"""Self-bootstrap of the webhook's TLS: certificates in a Secret, ``caBundle`` in our configurations.

Why: a cluster without cert-manager must still be able to install Groupless with plain
manifests. Like Gatekeeper's cert-controller and knative (which Karpenter uses), the webhook
process keeps a CA and serving certificate in a Secret it owns, creating them when absent (or
expiring, or missing a name), writes them to a directory for the TLS server, and patches the
CA into every webhook of our MutatingWebhookConfiguration and ValidatingWebhookConfiguration
so kube-apiserver trusts the server. Several replicas may start at once: the Secret's create is
the lock (the loser of an ``AlreadyExists`` race reads the winner's bundle), and the caBundle
patch is idempotent.

All API access goes through the :class:`provisioner.kube.api.KubeAPI` protocol, so this is
tested against the in-memory fake.
"""

from __future__ import annotations

import base64
import datetime
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from certs.bundle import FILES, CertBundle, CertError, generate
from provisioner.kube.api import AlreadyExistsError, KubeAPI, NotFoundError

log = logging.getLogger(__name__)

MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"
#: Default names, matching ``deploy/``.
DEFAULT_NAMESPACE = "groupless"
DEFAULT_SECRET = "groupless-cert"
DEFAULT_SERVICE = "groupless"
#: A CA this close to its end is replaced rather than reused for a renewal.
CA_ROTATION_LOOKAHEAD = datetime.timedelta(days=365)
#: How often a running webhook re-checks its certificates and caBundles (as cert-controller does).
CHECK_INTERVAL_SECONDS = 3600.0
DEFAULT_CONFIGURATIONS: tuple[tuple[str, str], ...] = (
    (MUTATING, "defaulting.webhook.provisioners.groupless.dev"),
    (VALIDATING, "validation.webhook.provisioners.groupless.dev"),
)


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """What :func:`ensure_certificates` did: the bundle in use, and whether it created it."""

    bundle: CertBundle
    created: bool
    patched: tuple[str, ...]


def _secret_bundle(secret: dict[str, Any]) -> CertBundle | None:
    data = secret.get("data") or {}
    try:
        return CertBundle.from_files({name: base64.b64decode(data.get(name) or "") for name in FILES})
    except (CertError, ValueError):
        return None


def _secret(name: str, namespace: str, bundle: CertBundle) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/name": "groupless"}},
        "type": "Opaque",
        "data": {name: base64.b64encode(data).decode() for name, data in bundle.to_files().items()},
    }


def ensure_secret(
    kube: KubeAPI,
    *,
    namespace: str,
    secret_name: str,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = (),
    now: datetime.datetime | None = None,
) -> tuple[CertBundle, bool]:
    """The bundle in Secret ``namespace/secret_name``, created or renewed when needed.

    Returns ``(bundle, created)``. Renews when the stored bundle is unreadable, expires within
    90 days, or lacks a wanted name; a renewal signs the new serving certificate with the
    stored CA unless the CA itself expires within a year (then a new CA, and new caBundles).
    Raises :class:`provisioner.kube.api.ApiError` on API failures.
    """
    try:
        secret = kube.get("Secret", secret_name, namespace)
    except NotFoundError:
        secret = None
    if secret is not None:
        bundle = _secret_bundle(secret)
        why = "the Secret holds no valid bundle" if bundle is None else bundle.needs_rotation(
            dns_names, ip_addresses, now=now)
        if bundle is not None and why is None:
            return bundle, False
        log.info("Renewing webhook certificates in Secret %s/%s: %s", namespace, secret_name, why)
        keep_ca = bundle is not None and not bundle.ca_expires_within(CA_ROTATION_LOOKAHEAD, now=now)
        # Keeping a healthy CA keeps every caBundle (and every other replica's trust) valid.
        bundle = generate(dns_names, ip_addresses, now=now,
                          ca=(bundle.ca_cert, bundle.ca_key) if keep_ca and bundle is not None else None)
        replacement = _secret(secret_name, namespace, bundle)
        replacement["metadata"]["resourceVersion"] = secret.get("metadata", {}).get("resourceVersion", "")
        kube.replace("Secret", replacement)
        return bundle, True
    bundle = generate(dns_names, ip_addresses, now=now)
    try:
        kube.create("Secret", _secret(secret_name, namespace, bundle))
    except AlreadyExistsError:  # another replica won the race: use its bundle
        stored = _secret_bundle(kube.get("Secret", secret_name, namespace))
        if stored is None:
            raise
        return stored, False
    log.info("Created webhook certificates in Secret %s/%s for %s", namespace, secret_name,
             ", ".join([*dns_names, *ip_addresses]))
    return bundle, True


def inject_ca_bundle(kube: KubeAPI, kind: str, name: str, ca_cert: bytes) -> bool:
    """Set ``clientConfig.caBundle`` of every webhook in configuration ``kind/name`` to ``ca_cert``.

    One JSON patch for all webhooks, guarded by a ``test`` of the webhook count so a concurrent
    edit makes it fail rather than patch the wrong entry. Returns True when something changed;
    NotFoundError when the configuration does not exist.
    """
    config = kube.get(kind, name)
    encoded = base64.b64encode(ca_cert).decode()
    webhooks = config.get("webhooks") or []
    ops: list[dict[str, Any]] = []
    for i, webhook in enumerate(webhooks):
        client = webhook.get("clientConfig") or {}
        if client.get("caBundle") != encoded:
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": encoded})
    if not ops:
        return False
    kube.patch(kind, name, [{"op": "test", "path": f"/webhooks/{len(webhooks) - 1}/name",
                             "value": webhooks[-1].get("name")}, *ops])
    log.info("Injected the CA bundle into %s %s (%d webhook(s))", kind, name, len(ops))
    return True


def ensure_certificates(
    kube: KubeAPI,
    *,
    cert_dir: str,
    namespace: str = DEFAULT_NAMESPACE,
    secret_name: str = DEFAULT_SECRET,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = (),
    configurations: Iterable[tuple[str, str]] = DEFAULT_CONFIGURATIONS,
    now: datetime.datetime | None = None,
) -> BootstrapResult:
    """Make sure the webhook can serve TLS that kube-apiserver trusts; call before serving.

    Ensures the Secret (:func:`ensure_secret`), writes ``ca.crt ca.key tls.crt tls.key`` to
    ``cert_dir``, and injects the CA into each ``(kind, name)`` of ``configurations``; a
    configuration that does not exist yet is skipped with a warning (apply ``deploy/webhooks``
    and restart, or run again). Raises ApiError on other API failures.
    """
    bundle, created = ensure_secret(
        kube, namespace=namespace, secret_name=secret_name, dns_names=dns_names,
        ip_addresses=ip_addresses, now=now,
    )
    bundle.write(cert_dir)
    patched = []
    for kind, name in configurations:
        try:
            if inject_ca_bundle(kube, kind, name, bundle.ca_cert):
                patched.append(name)
        except NotFoundError:
            log.warning("%s %s not found; its caBundle was not set", kind, name)
    return BootstrapResult(bundle=bundle, created=created, patched=tuple(patched))


def keep_fresh(
    kube: KubeAPI,
    stop: threading.Event,
    *,
    interval_seconds: float = CHECK_INTERVAL_SECONDS,
    **ensure: Any,
) -> threading.Thread:
    """Start a daemon thread running :func:`ensure_certificates` every ``interval_seconds``.

    ``ensure`` are its keyword arguments (``cert_dir``, ``namespace``, ``secret_name``,
    ``dns_names``, ...). It renews certificates before they expire, picks up a renewal another
    replica made, and heals a caBundle that was reset. The files are rewritten in place and
    gunicorn's gthread worker loads them per connection, so no restart is needed. Errors are
    logged and retried at the next interval; set ``stop`` to end the thread.
    """

    def run() -> None:
        while not stop.wait(interval_seconds):
            try:
                result = ensure_certificates(kube, **ensure)
                if result.created or result.patched:
                    log.info("Refreshed webhook certificates (renewed: %s, caBundle injected into: %s)",
                             result.created, ", ".join(result.patched) or "nothing")
            except Exception:  # keep serving with what we have; try again later
                log.exception("Checking the webhook certificates failed; retrying in %.0fs", interval_seconds)

    thread = threading.Thread(target=run, name="groupless-cert-refresh", daemon=True)
    thread.start()
    return thread
